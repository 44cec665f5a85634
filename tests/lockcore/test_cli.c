/* The fencelock command against real redis-server processes: the JSON of
 * each command, run's mutual exclusion, automatic extension and loss, and
 * every exit code. The binary is $FENCELOCK_BIN; each invocation runs as a
 * child process with its stdout and stderr in files of a test directory. */
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>
#include <jansson.h>

#include "fault_proxy.h"
#include "proc.h"
#include "cli_harness.h"
#include "fence_probe.h"
#include "redis_harness.h"

#define RUN_TIMEOUT_MS 20000

/* Exit codes of fencelock (docs/cli.md). */
enum { X_USAGE = 64, X_UNREACHABLE = 69, X_NOT_HELD = 75, X_LOST = 79 };

static struct fixture *fx(int n)
{
    struct fixture *f = fx_new(n, "cli");
    f->run_timeout_ms = RUN_TIMEOUT_MS;
    return f;
}

static int setup3(void **state)
{
    *state = fx(3);
    return 0;
}

static int setup_none(void **state)
{
    *state = fx(0);
    return 0;
}

static int teardown(void **state)
{
    return fx_teardown(state);
}

/* Wait up to ms for a file to have content; returns it in buf. */
static int wait_file(const char *path, char *buf, size_t cap, long ms)
{
    long long end = hp_now_ms() + ms;
    do {
        read_file(path, buf, cap);
        if (buf[0] != '\0')
            return 0;
        hp_sleep_ms(10);
    } while (hp_now_ms() < end);
    return -1;
}

static int file_exists(const char *path)
{
    FILE *fp = fopen(path, "r");
    if (fp != NULL)
        fclose(fp);
    return fp != NULL;
}

/* pid runs (a zombie does not count: nobody may reap orphans here). */
static int alive(pid_t pid)
{
    char path[64], buf[256];
    snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
    read_file(path, buf, sizeof(buf));
    const char *p = strrchr(buf, ')');
    return p != NULL && p[1] == ' ' && p[2] != 'Z' && p[2] != 'X';
}

/* Wait up to ms for pid to be gone; returns 1 if it is. */
static int gone_within(pid_t pid, long ms)
{
    long long end = hp_now_ms() + ms;
    while (alive(pid) && hp_now_ms() < end)
        hp_sleep_ms(10);
    return !alive(pid);
}

/* A pid a command wrote to path (waits up to 5 s for it). */
static pid_t pid_in(const char *path)
{
    char buf[32];
    assert_int_equal(wait_file(path, buf, sizeof(buf), 5000), 0);
    long v = strtol(buf, NULL, 10);
    assert_true(v > 1);
    return (pid_t)v;
}

/* Two files a `run` command reports to, and the environment naming them:
 * T_READY (it started) and T_TERM (it got SIGTERM). */
struct ready_term {
    char ready[300], term[300], v1[330], v2[330];
    char *env[3];
};

static void ready_term(struct fixture *f, struct ready_term *rt)
{
    path_in(f, "ready", rt->ready, sizeof(rt->ready));
    path_in(f, "term", rt->term, sizeof(rt->term));
    snprintf(rt->v1, sizeof(rt->v1), "T_READY=%s", rt->ready);
    snprintf(rt->v2, sizeof(rt->v2), "T_TERM=%s", rt->term);
    rt->env[0] = rt->v1;
    rt->env[1] = rt->v2;
    rt->env[2] = NULL;
}

/* ---- acquire, extend, release, status ---- */

/* `fencelock --ttl TTL acquire RESOURCE`, which must succeed; its lock id
 * into id (41 bytes). */
static void acquire_id(struct fixture *f, const char *ttl, const char *resource, char *id)
{
    struct res r;
    fl(f, &r, "--ttl", ttl, "acquire", resource, NULL);
    assert_int_equal(r.code, 0);
    json_t *j = one_json_line(&r);
    snprintf(id, 41, "%s", jstr(j, "lock_id"));
    json_decref(j);
}

/* CLOCK_REALTIME in ms. */
static long long wall_now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* The grant and valid-until times of acquire's and extend's output: the
 * grant within [mono0, mono1] (wall0, wall1 on the wall clock), and the
 * validity counted from it. A script that waited for the lock learns when
 * its validity began from these, not from when it asked. */
static void check_times(json_t *j, long long mono0, long long mono1, long long wall0, long long wall1)
{
    long long validity = jint(j, "validity_ms");
    long long granted = jint(j, "granted_mono_ms"), granted_wall = jint(j, "granted_wall_ms");
    if (granted < mono0 || granted > mono1 || granted_wall < wall0 - 1 || granted_wall > wall1 + 1)
        fail_msg("granted at %lld (wall %lld), not within [%lld, %lld] (wall [%lld, %lld])", granted,
                 granted_wall, mono0, mono1, wall0, wall1);
    assert_int_equal(jint(j, "valid_until_mono_ms"), granted + validity);
    assert_int_equal(jint(j, "valid_until_wall_ms"), granted_wall + validity);
}

static void test_cli_acquire_prints_the_lock(void **state)
{
    struct fixture *f = *state;
    struct res r;
    /* Held by another for a while first: the grant comes well after the
     * request, and the times say when. */
    char other[41];
    acquire_id(f, "700ms", "cli:acq", other);
    long long mono0 = hp_now_ms(), wall0 = wall_now_ms();
    fl(f, &r, "--ttl", "5s", "--wait", "5s", "--quiet", "acquire", "cli:acq", NULL);
    long long mono1 = hp_now_ms(), wall1 = wall_now_ms();
    assert_int_equal(r.code, 0);
    assert_string_equal(r.err, "");
    json_t *j = one_json_line(&r);
    has_keys(j, "resource", "lock_id", "token", "validity_ms", "ttl_ms", "nodes_granted", "nodes",
             "granted_mono_ms", "granted_wall_ms", "valid_until_mono_ms", "valid_until_wall_ms", NULL);
    check_times(j, mono0, mono1, wall0, wall1);
    assert_true(jint(j, "granted_mono_ms") - mono0 >= 300);
    assert_string_equal(jstr(j, "resource"), "cli:acq");
    const char *id = jstr(j, "lock_id");
    assert_int_equal(strlen(id), 40);
    assert_int_equal(strspn(id, "0123456789abcdef"), 40);
    assert_int_equal(jint(j, "ttl_ms"), 5000);
    /* validity = TTL - elapsed - drift (1% + 2 ms) */
    assert_true(jint(j, "validity_ms") <= 5000 - 52);
    assert_true(jint(j, "validity_ms") > 4500);
    assert_int_equal(jint(j, "nodes"), 3);
    assert_true(jint(j, "nodes_granted") >= 2 && jint(j, "nodes_granted") <= 3);
    long long token = jint(j, "token");
    assert_true(token > 0);

    /* The nodes that granted hold that id, with the TTL asked for, and
     * their fence value is the token: at least the nodes_granted of the
     * decision (the last node may grant after it, or refuse where the
     * other's 700 ms key had not expired yet). */
    char id_copy[41];
    snprintf(id_copy, sizeof(id_copy), "%s", id);
    unsigned granted = (unsigned)jint(j, "nodes_granted");
    for (int t = 0; t < 100 && rh_holders(f->rc, "cli:acq", id_copy) < granted; t++)
        hp_sleep_ms(10);
    assert_true(rh_holders(f->rc, "cli:acq", id_copy) >= granted);
    for (int i = 0; i < 3; i++) {
        char v[64];
        rh_get(f->rc, i, "cli:acq", v, sizeof(v));
        if (strcmp(v, id_copy) != 0)
            continue;
        long long pttl = rh_pttl(f->rc, i, "cli:acq");
        assert_true(pttl > 4000 && pttl <= 5000);
        assert_int_equal(tf_fence(f->rc, i, "", "cli:acq"), token);
    }
    json_decref(j);

    /* --key-prefix and --no-fencing reach the nodes. */
    fl(f, &r, "--no-fencing", "--key-prefix", "app:", "acquire", "cli:plain", NULL);
    assert_int_equal(r.code, 0);
    j = one_json_line(&r);
    assert_int_equal(jint(j, "token"), 0);
    assert_int_equal(jint(j, "ttl_ms"), 10000);
    assert_true(rh_holders(f->rc, "app:cli:plain", jstr(j, "lock_id")) >= 2);
    assert_int_equal(rh_holders(f->rc, "cli:plain", jstr(j, "lock_id")), 0);
    assert_int_equal(tf_fence(f->rc, 0, "app:", "cli:plain"), 0);
    redisReply *x = rh_command(f->rc, 0, "EXISTS {app:cli:plain}:fence");
    assert_int_equal(x->integer, 0);
    freeReplyObject(x);
    json_decref(j);

    /* A grant leaves no fence key of its own, but in transition mode
     * (FENCELOCK_FENCE_TRANSITION=1, an upgrade) it writes the old layout's
     * key too; any other value than 0 or 1 is a usage error. */
    x = rh_command(f->rc, 1, "EXISTS {cli:acq}:fence");
    assert_int_equal(x->integer, 0);
    freeReplyObject(x);
    char *transition[] = {"FENCELOCK_FENCE_TRANSITION=1", NULL};
    fl_env(f, &r, transition, "acquire", "cli:transition", NULL);
    assert_int_equal(r.code, 0);
    j = one_json_line(&r);
    char want[32];
    snprintf(want, sizeof(want), "%lld", jint(j, "token"));
    assert_true(rh_holders(f->rc, "{cli:transition}:fence", want) >= 2);
    json_decref(j);
    char *bad_transition[] = {"FENCELOCK_FENCE_TRANSITION=yes", NULL};
    fl_env(f, &r, bad_transition, "acquire", "cli:transition2", NULL);
    assert_int_equal(r.code, 64);
    assert_non_null(strstr(r.err, "FENCELOCK_FENCE_TRANSITION"));

    /* The nodes may also come from --nodes; --nodes wins over the
     * environment. */
    char *bad_env[] = {"FENCELOCK_NODES=127.0.0.1:1", NULL};
    fl_env(f, &r, bad_env, "--nodes", f->nodes, "acquire", "cli:flag", NULL);
    assert_int_equal(r.code, 0);
    j = one_json_line(&r);
    assert_string_equal(jstr(j, "resource"), "cli:flag");
    json_decref(j);
}

static void test_cli_extend_and_release_print_the_outcome(void **state)
{
    struct fixture *f = *state;
    struct res r;
    char id[41];
    acquire_id(f, "5s", "cli:ext", id);

    long long mono0 = hp_now_ms(), wall0 = wall_now_ms();
    fl(f, &r, "extend", "cli:ext", id, "--ttl", "30s", NULL);
    long long mono1 = hp_now_ms(), wall1 = wall_now_ms();
    assert_int_equal(r.code, 0);
    assert_string_equal(r.err, "");
    json_t *j = one_json_line(&r);
    has_keys(j, "resource", "lock_id", "extended", "validity_ms", "ttl_ms", "nodes_extended", "nodes",
             "granted_mono_ms", "granted_wall_ms", "valid_until_mono_ms", "valid_until_wall_ms", NULL);
    check_times(j, mono0, mono1, wall0, wall1);
    assert_string_equal(jstr(j, "resource"), "cli:ext");
    assert_string_equal(jstr(j, "lock_id"), id);
    assert_true(jbool(j, "extended"));
    assert_int_equal(jint(j, "ttl_ms"), 30000);
    assert_true(jint(j, "validity_ms") > 29000 && jint(j, "validity_ms") < 30000);
    assert_true(jint(j, "nodes_extended") >= 2);
    assert_int_equal(jint(j, "nodes"), 3);
    json_decref(j);
    /* A majority's keys carry the new TTL (the command answers at a
     * majority: the third node's extension may still be on its way). */
    int pushed = 0;
    for (int i = 0; i < 3; i++)
        pushed += rh_pttl(f->rc, i, "cli:ext") > 25000;
    assert_true(pushed >= 2);

    /* Another id does not hold it: not extended, exit "lost". */
    fl(f, &r, "extend", "cli:ext", "0123456789abcdef0123456789abcdef01234567", NULL);
    assert_int_equal(r.code, X_LOST);
    assert_non_null(strstr(r.err, "extend"));
    j = one_json_line(&r);
    assert_false(jbool(j, "extended"));
    assert_int_equal(jint(j, "validity_ms"), 0);
    assert_true(json_is_null(json_object_get(j, "valid_until_mono_ms")));
    assert_int_equal(jint(j, "nodes_extended"), 0);
    assert_int_equal(jint(j, "nodes"), 3);
    json_decref(j);

    fl(f, &r, "release", "cli:ext", id, NULL);
    assert_int_equal(r.code, 0);
    assert_string_equal(r.err, "");
    j = one_json_line(&r);
    has_keys(j, "resource", "lock_id", "released", "nodes_released", "nodes", NULL);
    assert_string_equal(jstr(j, "resource"), "cli:ext");
    assert_string_equal(jstr(j, "lock_id"), id);
    assert_true(jbool(j, "released"));
    assert_int_equal(jint(j, "nodes_released"), 3);
    assert_int_equal(jint(j, "nodes"), 3);
    json_decref(j);
    assert_int_equal(rh_holders(f->rc, "cli:ext", id), 0);

    /* Released already: nothing to release (not an error), nothing to
     * extend (the lock is not held). */
    fl(f, &r, "release", "cli:ext", id, NULL);
    assert_int_equal(r.code, 0);
    j = one_json_line(&r);
    assert_false(jbool(j, "released"));
    assert_int_equal(jint(j, "nodes_released"), 0);
    json_decref(j);
    fl(f, &r, "extend", "cli:ext", id, NULL);
    assert_int_equal(r.code, X_LOST);
    j = one_json_line(&r);
    assert_false(jbool(j, "extended"));
    json_decref(j);
}

static void test_cli_status_reports_a_foreign_holder(void **state)
{
    struct fixture *f = *state;
    const char *foreign = "f0f0f0f0f0f0f0f0f0f0f0f0f0f0f0f0f0f0f0f0";
    assert_int_equal(0, rh_set(f->rc, 0, "cli:st", foreign));
    assert_int_equal(0, rh_set(f->rc, 1, "cli:st", foreign));
    assert_int_equal(0, rh_set(f->rc, 2, "cli:st", "someone-else"));
    struct res r;
    fl(f, &r, "status", "cli:st", NULL);
    assert_int_equal(r.code, 0);
    json_t *j = one_json_line(&r);
    has_keys(j, "resource", "quorum", "nodes", "reachable", "state", "held_by_majority", "majority_holder",
             "majority_holder_info", "majority_remaining_ms", NULL);
    assert_string_equal(jstr(j, "resource"), "cli:st");
    assert_int_equal(jint(j, "quorum"), 2);
    assert_int_equal(jint(j, "reachable"), 3);
    assert_true(jbool(j, "held_by_majority"));
    assert_string_equal(jstr(j, "majority_holder"), foreign);
    assert_string_equal(jstr(j, "state"), "held");
    assert_true(json_is_null(json_object_get(j, "majority_holder_info")));
    assert_true(jint(j, "majority_remaining_ms") > 50000);
    json_t *nodes = json_object_get(j, "nodes");
    assert_int_equal(json_array_size(nodes), 3);
    for (size_t i = 0; i < 3; i++) {
        json_t *n = json_array_get(nodes, i);
        has_keys(n, "node", "reachable", "holder", "remaining_ms", "holder_info", "fence", "node_time_us",
                 "fence_ahead_ms", "waiters", "queue", NULL);
        assert_true(json_is_null(json_object_get(n, "holder_info"))); /* another program's key */
        char want[64];
        snprintf(want, sizeof(want), "127.0.0.1:%d", rh_port(f->rc, (int)i));
        assert_string_equal(jstr(n, "node"), want);
        assert_true(jbool(n, "reachable"));
        assert_string_equal(jstr(n, "holder"), i < 2 ? foreign : "someone-else");
        assert_true(jint(n, "remaining_ms") > 50000 && jint(n, "remaining_ms") <= 60000);
        assert_int_equal(jint(n, "fence"), 0);
    }
    json_decref(j);

    /* The foreign holder keeps us out. */
    fl(f, &r, "acquire", "cli:st", NULL);
    assert_int_equal(r.code, X_NOT_HELD);
    assert_string_equal(r.out, "");
    assert_non_null(strstr(r.err, "cli:st"));

    /* Held on one node only: no majority holder. A free node shows no
     * holder and no remaining time, and the fence value of the last grant. */
    redisReply *x = rh_command(f->rc, 1, "DEL cli:st");
    freeReplyObject(x);
    x = rh_command(f->rc, 1, "SET {cli:st}:fence 1234");
    freeReplyObject(x);
    fl(f, &r, "status", "cli:st", NULL);
    assert_int_equal(r.code, 0);
    j = one_json_line(&r);
    assert_false(jbool(j, "held_by_majority"));
    assert_true(json_is_null(json_object_get(j, "majority_holder")));
    json_t *n1 = json_array_get(json_object_get(j, "nodes"), 1);
    assert_true(json_is_null(json_object_get(n1, "holder")));
    assert_true(json_is_null(json_object_get(n1, "remaining_ms")));
    assert_int_equal(jint(n1, "fence"), 1234);
    json_decref(j);
}

/* Each holder leaves who it is beside the lock, with the lock's TTL, and
 * status shows it; the lock key's value stays the id (other Redlock
 * clients read it). A holder whose lock ran out on the majority shows as
 * expired. */
/* A fence pushed two hours ahead (by a client with no bound, written here
 * on the nodes): status says how far ahead of each node's clock it is;
 * repair without --force changes nothing, refuses while the lock is held
 * (75), and with --force lowers it to each node's clock; a lock taken
 * then has a token near the clock again. */
static void test_cli_repair_lowers_a_fence_pushed_ahead(void **state)
{
    struct fixture *f = *state;
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    unsigned long long now_us =
        (unsigned long long)ts.tv_sec * 1000000ULL + (unsigned long long)ts.tv_nsec / 1000;
    for (int i = 0; i < 3; i++) {
        redisReply *x = rh_command(f->rc, i, "SET {cli:fast}:fence %llu", now_us + 7200ULL * 1000000);
        freeReplyObject(x);
    }
    struct res r;
    fl(f, &r, "status", "cli:fast", NULL);
    json_t *j = one_json_line(&r);
    json_t *n0 = json_array_get(json_object_get(j, "nodes"), 0);
    long long ahead = jint(n0, "fence_ahead_ms");
    assert_true(ahead > 7100LL * 1000 && ahead < 7300LL * 1000);
    json_decref(j);

    fl(f, &r, "repair", "cli:fast", NULL); /* no --force: a look */
    assert_int_equal(r.code, 0);
    j = one_json_line(&r);
    assert_int_equal(jint(j, "lowered"), 0);
    json_decref(j);
    fl(f, &r, "acquire", "cli:fast", NULL);
    assert_int_equal(r.code, 0);
    j = one_json_line(&r);
    char id[41];
    snprintf(id, sizeof(id), "%s", jstr(j, "lock_id"));
    assert_true((unsigned long long)jint(j, "token") > now_us + 7100ULL * 1000000);
    json_decref(j);
    fl(f, &r, "repair", "cli:fast", "--force", NULL); /* held: not lowered */
    assert_int_equal(r.code, 75);
    fl(f, &r, "release", "cli:fast", id, NULL);
    assert_int_equal(r.code, 0);
    fl(f, &r, "repair", "cli:fast", "--force", NULL);
    assert_int_equal(r.code, 0);
    j = one_json_line(&r);
    assert_int_equal(jint(j, "lowered"), 3);
    json_decref(j);
    fl(f, &r, "acquire", "cli:fast", NULL);
    assert_int_equal(r.code, 0);
    j = one_json_line(&r);
    assert_true((unsigned long long)jint(j, "token") < now_us + 600ULL * 1000000);
    json_decref(j);
    fl(f, &r, "--to", "5", "acquire", "cli:x", NULL);
    assert_int_equal(r.code, 64);
    fl(f, &r, "repair", "cli:a", "cli:b", NULL);
    assert_int_equal(r.code, 64);
}

static void test_cli_status_shows_who_holds_the_lock(void **state)
{
    struct fixture *f = *state;
    struct ready_term rt;
    ready_term(f, &rt);
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    long long wall0 = (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
    const char *args[] = {
        "--ttl", "3s", "run", "cli:who", "sh", "-c", "echo $FENCELOCK_LOCK_ID > \"$T_READY\"; sleep 30",
        NULL};
    struct child ch;
    spawn(f, &ch, rt.env, args);
    char id[64];
    assert_int_equal(wait_file(rt.ready, id, sizeof(id), 5000), 0);
    id[strcspn(id, "\n")] = '\0';
    struct res r;
    fl(f, &r, "status", "cli:who", NULL);
    assert_int_equal(r.code, 0);
    json_t *j = one_json_line(&r);
    assert_string_equal(jstr(j, "state"), "held");
    char owner[41];
    acq_of(id, owner); /* a run holds a reentrant lock: the key holds its owner */
    assert_string_equal(jstr(j, "majority_holder"), owner);
    long long left = jint(j, "majority_remaining_ms");
    assert_true(left > 0 && left <= 3000);
    json_t *info = json_object_get(j, "majority_holder_info");
    if (!json_is_object(info))
        fail_msg("no holder info: %s", r.out);
    char host[256] = "";
    gethostname(host, sizeof(host) - 1);
    assert_string_equal(jstr(info, "host"), host);
    assert_int_equal(jint(info, "pid"), ch.pid);
    assert_non_null(strstr(jstr(info, "cmd"), "sh -c echo $FENCELOCK_LOCK_ID"));
    long long at = jint(info, "acquired_at");
    assert_true(at >= wall0 && at <= wall0 + 5000);
    json_t *n0 = json_array_get(json_object_get(j, "nodes"), 0);
    assert_true(json_is_object(json_object_get(n0, "holder_info")));
    json_decref(j);

    /* Beside the lock, with its TTL; the lock key keeps the owner. */
    char v[64];
    rh_get(f->rc, 0, "cli:who", v, sizeof(v));
    assert_string_equal(v, owner);
    long long pttl = rh_pttl(f->rc, 0, "{cli:who}:holder");
    assert_true(pttl > 0 && pttl <= 3000);

    /* Gone on a majority: expired, and no majority holder. */
    redisReply *x = rh_command(f->rc, 0, "DEL cli:who");
    freeReplyObject(x);
    x = rh_command(f->rc, 1, "DEL cli:who");
    freeReplyObject(x);
    fl(f, &r, "status", "cli:who", NULL);
    j = one_json_line(&r);
    assert_string_equal(jstr(j, "state"), "expired");
    assert_false(jbool(j, "held_by_majority"));
    assert_true(json_is_null(json_object_get(j, "majority_holder_info")));
    assert_true(json_is_null(json_object_get(j, "majority_remaining_ms")));
    json_decref(j);
    kill(ch.pid, SIGTERM);
    collect(&ch, RUN_TIMEOUT_MS, &r);

    /* acquire names its caller (this test program). */
    fl(f, &r, "acquire", "cli:who2", NULL);
    assert_int_equal(r.code, 0);
    fl(f, &r, "status", "cli:who2", NULL);
    j = one_json_line(&r);
    info = json_object_get(j, "majority_holder_info");
    assert_true(json_is_object(info));
    assert_int_equal(jint(info, "pid"), getpid());
    json_decref(j);
    fl(f, &r, "status", "cli:nobody", NULL);
    j = one_json_line(&r);
    assert_string_equal(jstr(j, "state"), "free");
    json_decref(j);
}

/* ---- run ---- */

static void test_cli_run_passes_the_lock_to_the_command(void **state)
{
    struct fixture *f = *state;
    char envfile[300];
    path_in(f, "env", envfile, sizeof(envfile));
    char var[330];
    snprintf(var, sizeof(var), "T_ENV=%s", envfile);
    char *env[] = {var, NULL};
    struct res r;
    fl_env(f, &r, env, "--ttl", "4s", "run", "cli:env", "--", "sh", "-c",
           "env | grep -E '^FENCELOCK_(TOKEN|RESOURCE|LOCK_ID|VALIDITY_MS)=' | sort > \"$T_ENV\"; exit 7",
           NULL);
    assert_int_equal(r.code, 7); /* the command's own status */
    assert_string_equal(r.out, "");
    char got[4096];
    read_file(envfile, got, sizeof(got));
    char id[41] = "", res[64] = "";
    unsigned long long token = 0, validity = 0;
    assert_int_equal(sscanf(got,
                            "FENCELOCK_LOCK_ID=%40s\nFENCELOCK_RESOURCE=%63s\nFENCELOCK_TOKEN=%llu\n"
                            "FENCELOCK_VALIDITY_MS=%llu\n",
                            id, res, &token, &validity),
                     4);
    assert_int_equal(strspn(id, "0123456789abcdef"), 40);
    assert_string_equal(res, "cli:env");
    assert_true(validity > 3500 && validity < 4000);
    assert_int_equal(tf_fence(f->rc, 0, "", "cli:env"), token);
    /* Released when the command ended. */
    assert_int_equal(rh_holders(f->rc, "cli:env", id), 0);

    /* Death by signal is 128 + N; a command that cannot be found is 127. */
    fl(f, &r, "run", "cli:env", "sh", "-c", "kill -USR1 $$", NULL);
    assert_int_equal(r.code, 128 + SIGUSR1);
    fl(f, &r, "run", "cli:env", "--", "/nonexistent/fencelock-test-command", NULL);
    assert_int_equal(r.code, 127);
    assert_non_null(strstr(r.err, "/nonexistent/fencelock-test-command"));
}

struct span {
    unsigned long long token, start, end;
};

static int by_start(const void *a, const void *b)
{
    const struct span *x = a, *y = b;
    return x->start < y->start ? -1 : x->start > y->start;
}

static void test_cli_runs_never_overlap(void **state)
{
    struct fixture *f = *state;
    enum { K = 4 };
    char log[300], var[330];
    path_in(f, "spans", log, sizeof(log));
    snprintf(var, sizeof(var), "T_LOG=%s", log);
    char *env[] = {var, NULL};
    const char *script = "echo \"S $FENCELOCK_TOKEN $(date +%s%N)\" >> \"$T_LOG\"; sleep 0.4; "
                         "echo \"E $FENCELOCK_TOKEN $(date +%s%N)\" >> \"$T_LOG\"";
    const char *args[] = {"--ttl",    "3s", "--wait", "15s", "--retry-delay", "50ms", "run",
                          "cli:excl", "--", "sh",     "-c",  script,          NULL};
    struct child ch[K];
    for (int i = 0; i < K; i++)
        spawn(f, &ch[i], env, args);
    for (int i = 0; i < K; i++) {
        struct res r;
        collect(&ch[i], RUN_TIMEOUT_MS, &r);
        if (r.code != 0)
            fail_msg("run %d exited %d: %s", i, r.code, r.err);
    }
    char text[4096];
    read_file(log, text, sizeof(text));
    struct span s[K];
    memset(s, 0, sizeof(s));
    int n = 0;
    for (char *save = NULL, *line = strtok_r(text, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
        char kind;
        unsigned long long tok, t;
        assert_int_equal(sscanf(line, "%c %llu %llu", &kind, &tok, &t), 3);
        int i = 0;
        while (i < n && s[i].token != tok)
            i++;
        if (i == n) {
            assert_true(n < K);
            s[n++].token = tok;
        }
        if (kind == 'S')
            s[i].start = t;
        else
            s[i].end = t;
    }
    assert_int_equal(n, K); /* four runs, four distinct tokens */
    qsort(s, K, sizeof(s[0]), by_start);
    for (int i = 0; i < K; i++) {
        assert_true(s[i].start > 0 && s[i].end >= s[i].start + 400000000ULL);
        if (i > 0) {
            assert_true(s[i].start >= s[i - 1].end);  /* never two at once */
            assert_true(s[i].token > s[i - 1].token); /* and the token only grows */
        }
    }
}

/* seed 004's room from the shell: `run --permits 3`, six jobs at once,
 * never more than three inside, each in a permit of its own; status shows
 * the permits. */
static void test_cli_run_permits_room_of_three(void **state)
{
    struct fixture *f = *state;
    enum { K = 6 };
    char log[300], var[330];
    path_in(f, "room", log, sizeof(log));
    snprintf(var, sizeof(var), "T_LOG=%s", log);
    char *env[] = {var, NULL};
    const char *script = "echo \"S $FENCELOCK_RESOURCE $(date +%s%N)\" >> \"$T_LOG\"; sleep 0.3; "
                         "echo \"E $FENCELOCK_RESOURCE $(date +%s%N)\" >> \"$T_LOG\"";
    const char *args[] = {"--ttl",    "3s", "--wait", "15s", "--retry-delay", "50ms", "--permits", "3", "run",
                          "cli:room", "--", "sh",     "-c",  script,          NULL};
    struct child ch[K];
    for (int i = 0; i < K; i++)
        spawn(f, &ch[i], env, args);
    for (int i = 0; i < K; i++) {
        struct res r;
        collect(&ch[i], RUN_TIMEOUT_MS, &r);
        if (r.code != 0)
            fail_msg("run %d exited %d: %s", i, r.code, r.err);
    }
    char text[4096];
    read_file(log, text, sizeof(text));
    unsigned long long start[K], end[K];
    int ns = 0, ne = 0;
    for (char *save = NULL, *line = strtok_r(text, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
        char kind, res[64];
        unsigned long long t;
        assert_int_equal(sscanf(line, "%c %63s %llu", &kind, res, &t), 3);
        assert_int_equal(strncmp(res, "cli:room:permit:", 16), 0);
        assert_true(res[16] >= '0' && res[16] <= '2' && res[17] == '\0');
        if (kind == 'S')
            start[ns++] = t;
        else
            end[ne++] = t;
    }
    assert_int_equal(ns, K);
    assert_int_equal(ne, K);
    /* At every start, at most three have started and not ended (the log's
     * order is each job's own, so count by time). */
    int most = 0;
    for (int i = 0; i < K; i++) {
        int inside = 0;
        for (int j = 0; j < K; j++)
            inside += start[j] <= start[i];
        for (int j = 0; j < K; j++)
            inside -= end[j] <= start[i];
        most = inside > most ? inside : most;
    }
    assert_true(most <= 3);
    assert_true(most >= 2);

    struct res r;
    fl(f, &r, "--permits", "3", "status", "cli:room", NULL);
    assert_int_equal(r.code, 0);
    assert_non_null(strstr(r.out, "\"permits\":3"));
    assert_non_null(strstr(r.out, "\"held\":0"));
    fl(f, &r, "--permits", "3", "extend", "cli:room", "0123456789abcdef0123456789abcdef01234567", NULL);
    assert_int_equal(r.code, 64);
}

/* A run nested in a run of the same resource joins its lock (the same
 * token), where any other client is refused; the outer holds on after
 * the inner ends. */
static void test_cli_nested_run_joins_the_lock(void **state)
{
    struct fixture *f = *state;
    char out[300], var[330];
    path_in(f, "nested", out, sizeof(out));
    snprintf(var, sizeof(var), "T_OUT=%s", out);
    char *env[] = {var, NULL};
    char inner[1200];
    snprintf(inner, sizeof(inner),
             "echo \"outer $FENCELOCK_TOKEN\" >> \"$T_OUT\"; "
             "\"%s\" --wait 0 run cli:nest -- sh -c 'echo \"inner $FENCELOCK_TOKEN\" >> \"$T_OUT\"' || "
             "echo \"inner failed $?\" >> \"$T_OUT\"; "
             "FENCELOCK_LOCK_ID= \"%s\" --wait 0 --quiet acquire cli:nest >/dev/null 2>&1; "
             "echo \"stranger $?\" >> \"$T_OUT\"",
             fencelock_bin(), fencelock_bin());
    struct res r;
    fl_env(f, &r, env, "--ttl", "5s", "run", "cli:nest", "--", "sh", "-c", inner, NULL);
    assert_int_equal(r.code, 0);
    char got[1024];
    read_file(out, got, sizeof(got));
    unsigned long long t_outer = 0, t_inner = 0;
    int stranger = -1;
    char *o = strstr(got, "outer "), *i = strstr(got, "inner "), *s = strstr(got, "stranger ");
    assert_non_null(o);
    assert_non_null(i);
    assert_non_null(s);
    assert_int_equal(sscanf(o, "outer %llu", &t_outer), 1);
    if (sscanf(i, "inner %llu", &t_inner) != 1)
        fail_msg("the nested run did not run: %s", got);
    assert_int_equal(sscanf(s, "stranger %d", &stranger), 1);
    assert_true(t_outer > 0);
    assert_int_equal(t_inner, t_outer); /* joined: the same token */
    assert_int_equal(stranger, 75);     /* still held by the outer run */
    for (int n = 0; n < 3; n++)         /* the outer run released it when its command ended */
        assert_int_equal(rh_pttl(f->rc, n, "cli:nest"), -2);
}

static void test_cli_run_keeps_the_lock_past_its_ttl(void **state)
{
    struct fixture *f = *state;
    char idfile[300], var[330];
    path_in(f, "id", idfile, sizeof(idfile));
    snprintf(var, sizeof(var), "T_ID=%s", idfile);
    char *env[] = {var, NULL};
    const char *args[] = {
        "--ttl", "1s", "run", "cli:long", "sh", "-c", "echo $FENCELOCK_LOCK_ID > \"$T_ID\"; sleep 3.5", NULL};
    struct child ch;
    spawn(f, &ch, env, args);
    char id[64];
    assert_int_equal(wait_file(idfile, id, sizeof(id), 5000), 0);
    id[strcspn(id, "\n")] = '\0';
    assert_int_equal(strlen(id), 40);
    acq_of(id, id); /* the run's reentrant lock: the key holds its owner */
    /* Check at 1.2, 2.2 and 3.2 TTLs: each time a majority holds our id with
     * time left, so the lock was extended, more than once. */
    long long t0 = hp_now_ms();
    for (int k = 1; k <= 3; k++) {
        long long at = t0 + 1000 * k + 200;
        while (hp_now_ms() < at)
            hp_sleep_ms(10);
        assert_true(rh_holders(f->rc, "cli:long", id) >= 2);
        long long pttl = rh_pttl(f->rc, 0, "cli:long");
        assert_true(pttl > 0 && pttl <= 1000);
    }
    struct res r;
    collect(&ch, RUN_TIMEOUT_MS, &r);
    assert_int_equal(r.code, 0);
    assert_true(r.ms >= 3500);
    assert_string_equal(r.err, "");
    assert_int_equal(rh_holders(f->rc, "cli:long", id), 0);
}

/* Start a run whose command writes "ready" to $T_READY and then runs
 * `rest`, kill a majority of nodes once it is ready, and collect it. */
static void run_and_kill_majority(struct fixture *f, const char *ready, const char *kill_after,
                                  const char *rest, char *const *env, struct res *r, long long *killed_ms)
{
    char script[512];
    snprintf(script, sizeof(script), "echo ready > \"$T_READY\"; %s", rest);
    const char *args[] = {"--ttl",    "1s", "--kill-after", kill_after, "run",
                          "cli:lost", "sh", "-c",           script,     NULL};
    struct child ch;
    spawn(f, &ch, env, args);
    char buf[16];
    assert_int_equal(wait_file(ready, buf, sizeof(buf), 5000), 0);
    assert_int_equal(rh_kill(f->rc, 0), 0);
    assert_int_equal(rh_kill(f->rc, 1), 0);
    *killed_ms = hp_now_ms();
    collect(&ch, RUN_TIMEOUT_MS, r);
}

static void test_cli_run_signals_the_command_when_the_lock_is_lost(void **state)
{
    struct fixture *f = *state;
    struct ready_term rt;
    ready_term(f, &rt);
    char *ready = rt.ready, *term = rt.term, **env = rt.env;
    struct res r;
    long long killed;
    run_and_kill_majority(f, ready, "10s",
                          "trap 'echo TERM > \"$T_TERM\"; exit 0' TERM; "
                          "i=0; while [ $i -lt 200 ]; do sleep 0.05; i=$((i+1)); done",
                          env, &r, &killed);
    /* Lost when the validity (under 1 s) runs out without a majority. */
    assert_int_equal(r.code, X_LOST);
    long long after = hp_now_ms() - killed;
    assert_true(after < 2500);
    char got[16];
    read_file(term, got, sizeof(got));
    assert_string_equal(got, "TERM\n");
    assert_non_null(strstr(r.err, "lost"));
    assert_non_null(strstr(r.err, "SIGTERM"));
    assert_null(strstr(r.err, "SIGKILL"));
    assert_string_equal(r.out, "");
}

static void test_cli_run_kills_a_command_that_ignores_sigterm(void **state)
{
    struct fixture *f = *state;
    char ready[300], v1[330];
    path_in(f, "ready", ready, sizeof(ready));
    snprintf(v1, sizeof(v1), "T_READY=%s", ready);
    char *env[] = {v1, NULL};
    struct res r;
    long long killed;
    /* exec: the command itself ignores SIGTERM (and leaves no child). */
    run_and_kill_majority(f, ready, "500ms", "trap '' TERM; exec sleep 30", env, &r, &killed);
    assert_int_equal(r.code, X_LOST);
    long long after = hp_now_ms() - killed;
    assert_true(after >= 500);
    assert_true(after < 3000);
    assert_non_null(strstr(r.err, "SIGTERM"));
    assert_non_null(strstr(r.err, "SIGKILL"));
}

/* Start `fencelock --ttl 1s run cli:pause sh -c SCRIPT` where SCRIPT first
 * writes "ready" to $T_READY, stop fencelock alone (SIGSTOP) for 2.5 TTLs
 * once it is ready, let it go on, and collect it. */
static void run_and_pause_fencelock(struct fixture *f, const char *rest, struct res *r)
{
    struct ready_term rt;
    ready_term(f, &rt);
    char script[512];
    snprintf(script, sizeof(script), "echo ready > \"$T_READY\"; %s", rest);
    const char *args[] = {"--ttl",     "1s", "--kill-after", "500ms", "run",
                          "cli:pause", "sh", "-c",           script,  NULL};
    struct child ch;
    spawn(f, &ch, rt.env, args);
    char buf[16];
    assert_int_equal(wait_file(rt.ready, buf, sizeof(buf), 5000), 0);
    assert_int_equal(kill(ch.pid, SIGSTOP), 0);
    hp_sleep_ms(2500);
    assert_int_equal(kill(ch.pid, SIGCONT), 0);
    collect(&ch, RUN_TIMEOUT_MS, r);
}

/* A lock whose validity ran out while fencelock was stopped is lost, and
 * the message says why: no "success" left over from an earlier call. */
static void test_cli_run_says_why_a_paused_lock_was_lost(void **state)
{
    struct fixture *f = *state;
    struct res r;
    run_and_pause_fencelock(f, "sleep 5", &r);
    assert_int_equal(r.code, X_LOST);
    /* Said once, with the likely cause, and no "success" left over. */
    const char *said = "lock on 'cli:pause' lost: ";
    const char *why = strstr(r.err, said);
    if (why == NULL || strstr(why + strlen(said), "lost: ") != NULL || strstr(r.err, "lock lost") != NULL ||
        strstr(r.err, "(was fencelock paused, or are the nodes slow?)") == NULL ||
        strstr(r.err, "success") != NULL)
        fail_msg("stderr: %s", r.err);
}

/* fencelock stopped past its lock's validity while the command ran and
 * ended: the loss is seen when fencelock goes on, and it says so, and
 * that the command had already ended, and how. */
static void test_cli_run_never_exits_without_saying_why(void **state)
{
    struct fixture *f = *state;
    struct res r;
    run_and_pause_fencelock(f, "sleep 0.3", &r);
    assert_int_equal(r.code, X_LOST);
    if (strstr(r.err, "lock on 'cli:pause' lost") == NULL ||
        strstr(r.err, "sh had already ended (exited with status 0)") == NULL)
        fail_msg("stderr: %s", r.err);

    /* A command's own failure is named too. */
    fl(f, &r, "run", "cli:pause", "sh", "-c", "exit 3", NULL);
    assert_int_equal(r.code, 3);
    assert_non_null(strstr(r.err, "sh exited with status 3"));
}

/* The job's children die with fencelock: SIGKILL of fencelock leaves no
 * job running without a lock. */
static void test_cli_run_job_does_not_outlive_fencelock(void **state)
{
    struct fixture *f = *state;
    struct ready_term rt;
    ready_term(f, &rt);
    const char *args[] = {"--ttl",
                          "2s",
                          "run",
                          "cli:orphan",
                          "sh",
                          "-c",
                          "sleep 30 & echo $! > \"$T_TERM\"; echo $$ > \"$T_READY\"; wait",
                          NULL};
    struct child ch;
    spawn(f, &ch, rt.env, args);
    pid_t job = pid_in(rt.ready);
    pid_t grandchild = pid_in(rt.term);
    assert_true(alive(job) && alive(grandchild));
    assert_int_equal(kill(ch.pid, SIGKILL), 0);
    long long killed = hp_now_ms();
    struct res r;
    collect(&ch, RUN_TIMEOUT_MS, &r);
    assert_int_equal(r.code, 128 + SIGKILL);
    if (!gone_within(job, 1000) || !gone_within(grandchild, 1000 - (long)(hp_now_ms() - killed)))
        fail_msg("the job (%d: %s) or its child (%d: %s) outlived fencelock by 1 s", (int)job,
                 alive(job) ? "running" : "gone", (int)grandchild, alive(grandchild) ? "running" : "gone");
}

/* A lost lock and a signal to fencelock reach the job's children too. */
static void test_cli_run_signals_the_whole_job(void **state)
{
    struct fixture *f = *state;
    struct ready_term rt;
    ready_term(f, &rt);
    struct res r;
    long long killed;
    run_and_kill_majority(f, rt.ready, "10s", "sleep 30 & echo $! > \"$T_TERM\"; wait", rt.env, &r, &killed);
    assert_int_equal(r.code, X_LOST);
    pid_t grandchild = pid_in(rt.term);
    if (!gone_within(grandchild, 1000))
        fail_msg("the command's child %d runs on after the lock was lost", (int)grandchild);
    /* Said while the command ran, and how it ended. */
    if (strstr(r.err, "sh was still running: sending SIGTERM to its process group") == NULL ||
        strstr(r.err, "sh was killed by signal 15") == NULL)
        fail_msg("stderr: %s", r.err);
}

static void test_cli_run_passes_signals_to_the_whole_job(void **state)
{
    struct fixture *f = *state;
    struct ready_term rt;
    ready_term(f, &rt);
    const char *args[] = {
        "run", "cli:sigall", "sh", "-c", "sleep 30 & echo $! > \"$T_TERM\"; echo ready > \"$T_READY\"; wait",
        NULL};
    struct child ch;
    spawn(f, &ch, rt.env, args);
    char buf[16];
    assert_int_equal(wait_file(rt.ready, buf, sizeof(buf), 5000), 0);
    pid_t grandchild = pid_in(rt.term);
    assert_int_equal(kill(ch.pid, SIGTERM), 0);
    struct res r;
    collect(&ch, RUN_TIMEOUT_MS, &r);
    assert_int_equal(r.code, 128 + SIGTERM);
    assert_true(gone_within(grandchild, 1000));
}

/* The job learns when its lock was granted, on the monotonic clock (the
 * same for every process of the host) and the wall clock, and until when
 * it is valid: enough to place its lease however late it started. */
static void test_cli_run_tells_the_job_when_the_lock_was_granted(void **state)
{
    struct fixture *f = *state;
    char envfile[300], var[330];
    path_in(f, "env", envfile, sizeof(envfile));
    snprintf(var, sizeof(var), "T_ENV=%s", envfile);
    char *env[] = {var, NULL};
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    long long wall0 = (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
    long long mono0 = hp_now_ms();
    struct res r;
    fl_env(f, &r, env, "--ttl", "4s", "run", "cli:when", "--", "sh", "-c",
           "env | grep -E '^FENCELOCK_(GRANTED_MONO_MS|GRANTED_WALL_MS|VALID_UNTIL_MONO_MS|VALIDITY_MS)=' "
           "| sort > \"$T_ENV\"",
           NULL);
    long long mono1 = hp_now_ms();
    clock_gettime(CLOCK_REALTIME, &ts);
    long long wall1 = (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
    assert_int_equal(r.code, 0);
    char got[1024];
    read_file(envfile, got, sizeof(got));
    long long mono = 0, wall = 0, until = 0, validity = 0;
    if (sscanf(got,
               "FENCELOCK_GRANTED_MONO_MS=%lld\nFENCELOCK_GRANTED_WALL_MS=%lld\n"
               "FENCELOCK_VALIDITY_MS=%lld\nFENCELOCK_VALID_UNTIL_MONO_MS=%lld\n",
               &mono, &wall, &validity, &until) != 4)
        fail_msg("environment: %s", got);
    assert_true(mono >= mono0 && mono <= mono1);
    assert_true(wall >= wall0 && wall <= wall1);
    assert_int_equal(until, mono + validity);
    assert_true(validity > 3500 && validity < 4000);
}

/* In the foreground of a terminal the job gets the terminal: it reads the
 * keyboard (a background process group would be stopped by SIGTTIN), and
 * Ctrl-C ends it (and with it fencelock, which releases the lock). */
static void test_cli_run_hands_the_terminal_to_the_job(void **state)
{
    struct fixture *f = *state;
    struct ready_term rt;
    ready_term(f, &rt);
    int master = posix_openpt(O_RDWR | O_NOCTTY);
    assert_true(master >= 0);
    assert_int_equal(grantpt(master), 0);
    assert_int_equal(unlockpt(master), 0);
    char slave[128];
    assert_int_equal(ptsname_r(master, slave, sizeof(slave)), 0);
    char nodes[1100];
    snprintf(nodes, sizeof(nodes), "FENCELOCK_NODES=%s", f->nodes);
    char errpath[320];
    path_in(f, "tty.err", errpath, sizeof(errpath));
    long long started = hp_now_ms();
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        /* A new session whose controlling terminal is the pty: fencelock
         * is in its foreground, as under an interactive shell. */
        setsid();
        /* As an interactive shell starts its jobs: Ctrl-C not ignored (a
         * test runner may ignore or block it). */
        signal(SIGINT, SIG_DFL);
        sigset_t none;
        sigemptyset(&none);
        sigprocmask(SIG_SETMASK, &none, NULL);
        int fd = open(slave, O_RDWR);
        int err = open(errpath, O_WRONLY | O_CREAT | O_TRUNC, 0600);
        if (fd < 0 || err < 0)
            _exit(99);
        dup2(fd, 0);
        dup2(fd, 1);
        dup2(err, 2);
        putenv(nodes);
        putenv(rt.v1);
        /* exec: Ctrl-C must find sleep, not dash between two commands
         * (dash -c catches SIGINT there). */
        execl(fencelock_bin(), fencelock_bin(), "run", "cli:tty", "sh", "-c",
              "read line; echo \"$$ $line\" > \"$T_READY\"; exec sleep 30", (char *)NULL);
        _exit(98);
    }
    assert_int_equal(write(master, "hello\n", 6), 6);
    char got[32];
    int ok = wait_file(rt.ready, got, sizeof(got), 5000);
    char buf[256];
    if (ok == 0) {
        char comm_path[64], comm[32] = "";
        snprintf(comm_path, sizeof(comm_path), "/proc/%ld/comm", strtol(got, NULL, 10));
        for (int i = 0; i < 500 && strcmp(comm, "sleep\n") != 0; i++) {
            hp_sleep_ms(10);
            read_file(comm_path, comm, sizeof(comm));
        }
        assert_int_equal(write(master, "\003", 1), 1); /* Ctrl-C */
    }
    int status = 0;
    int rc = hp_wait(pid, 5000, &status);
    if (rc == -ETIMEDOUT)
        hp_signal(pid, SIGKILL, 0);
    while (read(master, buf, sizeof(buf)) > 0 && hp_now_ms() - started < 10000)
        ; /* the terminal's echo; EIO once no process has it open */
    close(master);
    char err[2048];
    read_file(errpath, err, sizeof(err));
    if (ok != 0)
        fail_msg("the job could not read the terminal (stderr: %s)", err);
    if (rc != 0)
        fail_msg("fencelock still running 5 s after Ctrl-C (stderr: %s)", err);
    assert_non_null(strstr(got, " hello\n"));
    assert_int_equal(rc, 0);
    assert_true(WIFEXITED(status));
    assert_int_equal(WEXITSTATUS(status), 128 + SIGINT);
    assert_non_null(strstr(err, "sh was killed by signal 2"));
    redisReply *x = rh_command(f->rc, 0, "EXISTS cli:tty");
    assert_int_equal(x->integer, 0);
    freeReplyObject(x);
}

/* --undo runs after a failed job (the lock still held) and after a lost
 * lock, with the token, the reason and the job's status; not after a job
 * that succeeded. */
static void test_cli_run_undo_runs_after_failure_or_loss(void **state)
{
    struct fixture *f = *state;
    struct ready_term rt;
    ready_term(f, &rt);
    char st_path[300], st_var[330], bin_var[1100];
    path_in(f, "status", st_path, sizeof(st_path));
    snprintf(st_var, sizeof(st_var), "T_STATUS=%s", st_path);
    snprintf(bin_var, sizeof(bin_var), "FL_BIN=%s", fencelock_bin());
    char *env[] = {rt.v1, rt.v2, st_var, bin_var, NULL};
    const char *undo =
        "echo \"$FENCELOCK_UNDO_REASON $FENCELOCK_JOB_STATUS $FENCELOCK_TOKEN\" > \"$T_TERM\"; "
        "\"$FL_BIN\" status \"$FENCELOCK_RESOURCE\" > \"$T_STATUS\"";
    struct res r;
    fl_env(f, &r, env, "--undo", undo, "run", "cli:undo", "sh", "-c", "exit 0", NULL);
    assert_int_equal(r.code, 0);
    assert_false(file_exists(rt.term));

    fl_env(f, &r, env, "--undo", undo, "run", "cli:undo", "sh", "-c",
           "echo $FENCELOCK_TOKEN > \"$T_READY\"; exit 3", NULL);
    assert_int_equal(r.code, 3);
    char token[32], got[128], want[128];
    read_file(rt.ready, token, sizeof(token));
    token[strcspn(token, "\n")] = '\0';
    read_file(rt.term, got, sizeof(got));
    snprintf(want, sizeof(want), "failed 3 %s\n", token);
    assert_string_equal(got, want);
    assert_non_null(strstr(r.err, "running the --undo command (failed)"));
    /* The lock was still held while the undo ran. */
    char text[4096];
    read_file(st_path, text, sizeof(text));
    assert_non_null(strstr(text, "\"state\":\"held\""));
    remove(rt.ready);
    remove(rt.term);

    const char *args[] = {"--ttl", "1s",  "--undo",
                          undo,    "run", "cli:undo",
                          "sh",    "-c",  "echo $FENCELOCK_TOKEN > \"$T_READY\"; sleep 30",
                          NULL};
    struct child ch;
    spawn(f, &ch, env, args);
    assert_int_equal(wait_file(rt.ready, token, sizeof(token), 5000), 0);
    token[strcspn(token, "\n")] = '\0';
    assert_int_equal(rh_kill(f->rc, 0), 0);
    assert_int_equal(rh_kill(f->rc, 1), 0);
    collect(&ch, RUN_TIMEOUT_MS, &r);
    assert_int_equal(r.code, X_LOST);
    read_file(rt.term, got, sizeof(got));
    snprintf(want, sizeof(want), "lost %d %s\n", 128 + SIGTERM, token);
    if (strcmp(got, want) != 0)
        fail_msg("undo saw '%s', not '%s' (stderr: %s)", got, want, r.err);

    /* Only for run. */
    fl(f, &r, "--undo", "true", "acquire", "cli:undo", NULL);
    assert_int_equal(r.code, X_USAGE);
}

/* --max-hold bounds how long a job holds the lock: a job still running
 * then is stopped as on a lost lock (SIGTERM, SIGKILL after --kill-after,
 * exit 79), --undo runs with reason max-hold, and the lock is free after. A
 * job that ends in time is not touched. */
static void test_cli_run_max_hold_stops_a_job_that_holds_too_long(void **state)
{
    struct fixture *f = *state;
    struct ready_term rt;
    ready_term(f, &rt);
    char undo_path[300], undo_var[330];
    path_in(f, "undo", undo_path, sizeof(undo_path));
    snprintf(undo_var, sizeof(undo_var), "T_UNDO=%s", undo_path);
    char *env[] = {rt.v1, rt.v2, undo_var, NULL};
    struct res r;
    fl_env(f, &r, env, "--max-hold", "5s", "run", "cli:maxhold", "--", "sh", "-c", "exit 0", NULL);
    assert_int_equal(r.code, 0);
    assert_string_equal(r.err, "");

    long long t0 = hp_now_ms();
    fl_env(f, &r, env, "--ttl", "2s", "--max-hold", "1s", "--undo",
           "echo $FENCELOCK_UNDO_REASON > \"$T_UNDO\"", "run", "cli:maxhold", "--", "sh", "-c",
           "trap 'echo TERM > \"$T_TERM\"; exit 0' TERM; i=0; while [ $i -lt 200 ]; do sleep 0.05; "
           "i=$((i+1)); done",
           NULL);
    long long took = hp_now_ms() - t0;
    assert_int_equal(r.code, X_LOST);
    assert_true(took >= 1000 && took < 5000);
    char got[32];
    read_file(rt.term, got, sizeof(got));
    assert_string_equal(got, "TERM\n");
    read_file(undo_path, got, sizeof(got));
    assert_string_equal(got, "max-hold\n");
    if (strstr(r.err, "still running after --max-hold 1000 ms: sending SIGTERM") == NULL ||
        strstr(r.err, "lost") != NULL)
        fail_msg("stderr: %s", r.err);
    /* Released: the next one gets it at once. */
    fl(f, &r, "--wait", "0", "acquire", "cli:maxhold", NULL);
    assert_int_equal(r.code, 0);

    /* A job that ignores SIGTERM is killed after --kill-after. */
    t0 = hp_now_ms();
    fl(f, &r, "--max-hold", "500ms", "--kill-after", "300ms", "run", "cli:maxhold2", "--", "sh", "-c",
       "trap '' TERM; exec sleep 30", NULL);
    took = hp_now_ms() - t0;
    assert_int_equal(r.code, X_LOST);
    assert_true(took >= 800 && took < 5000);
    assert_non_null(strstr(r.err, "SIGKILL"));

    /* Only for run, and above 0. */
    fl(f, &r, "--max-hold", "1s", "acquire", "cli:maxhold3", NULL);
    assert_int_equal(r.code, X_USAGE);
    fl(f, &r, "--max-hold", "0", "run", "cli:maxhold3", "true", NULL);
    assert_int_equal(r.code, X_USAGE);
}

/* SIGTERM to fencelock reaches the command; fencelock waits for it, exits
 * with its status and releases the lock. */
static void test_cli_run_passes_signals_on(void **state)
{
    struct fixture *f = *state;
    struct ready_term rt;
    ready_term(f, &rt);
    char *ready = rt.ready, *term = rt.term, **env = rt.env;
    const char *args[] = {
        "--ttl",
        "2s",
        "run",
        "cli:sig",
        "sh",
        "-c",
        "trap 'echo TERM > \"$T_TERM\"; exit 3' TERM; echo $FENCELOCK_LOCK_ID > \"$T_READY\"; "
        "i=0; while [ $i -lt 200 ]; do sleep 0.05; i=$((i+1)); done",
        NULL};
    struct child ch;
    spawn(f, &ch, env, args);
    char id[64];
    assert_int_equal(wait_file(ready, id, sizeof(id), 5000), 0);
    id[strcspn(id, "\n")] = '\0';
    acq_of(id, id); /* the run's reentrant lock: the key holds its owner */
    assert_true(rh_holders(f->rc, "cli:sig", id) >= 2);
    assert_int_equal(kill(ch.pid, SIGTERM), 0);
    struct res r;
    collect(&ch, RUN_TIMEOUT_MS, &r);
    assert_int_equal(r.code, 3);
    assert_true(r.ms < 5000);
    char got[16];
    read_file(term, got, sizeof(got));
    assert_string_equal(got, "TERM\n");
    assert_int_equal(rh_holders(f->rc, "cli:sig", id), 0);
}

/* ---- exit codes ---- */

static void test_cli_bad_arguments_are_usage_errors(void **state)
{
    struct fixture *f = *state;
    static const char *const cases[][8] = {
        {NULL},
        {"frobnicate", "x", NULL},
        {"acquire", NULL},
        {"acquire", "a", "a", NULL},
        {"status", NULL},
        {"extend", "x", NULL},
        {"extend", "x", "not-a-lock-id", NULL},
        {"release", "x", "0123456789ABCDEF0123456789ABCDEF01234567", NULL},
        {"run", "x", NULL},
        {"run", "x", "--", NULL},
        {"--bogus", "acquire", "x", NULL},
        {"--ttl", NULL},
        {"--ttl", "ten", "acquire", "x", NULL},
        {"--ttl", "0", "acquire", "x", NULL},
        {"--ttl", "25h", "acquire", "x", NULL},
        {"--ttl", "5x", "acquire", "x", NULL},
        {"--wait", "-1s", "acquire", "x", NULL},
        {"--retry-count", "-2", "acquire", "x", NULL},
        {"--retry-count", "3x", "acquire", "x", NULL},
        {"--ttl", "1s", "--extend-at", "1s", "run", "x", "true", NULL},
        {"--nodes", "redis://", "acquire", "x", NULL},
        {"acquire", "--", "x", NULL},
    };
    struct res r;
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        struct child ch;
        spawn(f, &ch, NULL, cases[i]);
        collect(&ch, RUN_TIMEOUT_MS, &r);
        if (r.code != X_USAGE)
            fail_msg("case %zu (%s %s): exit %d, not %d", i, cases[i][0] ? cases[i][0] : "",
                     cases[i][0] && cases[i][1] ? cases[i][1] : "", r.code, X_USAGE);
        assert_string_equal(r.out, "");
        assert_true(strlen(r.err) > 10);
        assert_true(r.ms < 5000); /* never reaches for a node */
    }
    /* No nodes at all. */
    char *no_nodes[] = {"FENCELOCK_NODES=", NULL};
    fl_env(f, &r, no_nodes, "acquire", "x", NULL);
    assert_int_equal(r.code, X_USAGE);
    assert_non_null(strstr(r.err, "FENCELOCK_NODES"));

    /* Help and version go to stdout and succeed. */
    fl(f, &r, "--help", NULL);
    assert_int_equal(r.code, 0);
    assert_non_null(strstr(r.out, "usage: fencelock"));
    assert_non_null(strstr(r.out, "--kill-after"));
    static const char *const cmds[] = {"acquire", "extend", "release", "status", "run"};
    for (size_t i = 0; i < 5; i++) {
        fl(f, &r, cmds[i], "--help", NULL);
        assert_int_equal(r.code, 0);
        char want[64];
        snprintf(want, sizeof(want), "usage: fencelock [options] %s", cmds[i]);
        assert_non_null(strstr(r.out, want));
        assert_string_equal(r.err, "");
    }
    fl(f, &r, "--version", NULL);
    assert_int_equal(r.code, 0);
    assert_int_equal(strncmp(r.out, "fencelock ", 10), 0);
}

/* Hours are a unit (the largest TTL is 24 h), and a malformed duration is
 * refused with the option's name, not only its value. */
static void test_cli_durations_take_hours_and_name_the_option(void **state)
{
    struct fixture *f = *state;
    struct res r;
    fl(f, &r, "--ttl", "1h", "acquire", "cli:hour", NULL);
    assert_int_equal(r.code, 0);
    json_t *j = one_json_line(&r);
    assert_int_equal(jint(j, "ttl_ms"), 3600000);
    json_decref(j);
    /* A majority has it with that TTL (a late node may grant after the
     * majority answered). */
    long long pttl = -2;
    for (int t = 0; t < 100 && pttl < 0; t++) {
        for (int i = 0; i < 3 && pttl < 0; i++)
            pttl = rh_pttl(f->rc, i, "cli:hour");
        if (pttl < 0)
            hp_sleep_ms(10);
    }
    if (!(pttl > 3590000 && pttl <= 3600000))
        fail_msg("PTTL %lld", pttl);
    fl(f, &r, "--ttl", "24h", "acquire", "cli:day", NULL);
    assert_int_equal(r.code, 0);
    fl(f, &r, "--ttl", "25h", "acquire", "cli:toolong", NULL);
    assert_int_equal(r.code, X_USAGE);
    assert_string_equal(r.out, "");

    fl(f, &r, "--ttl", "5x", "acquire", "cli:x", NULL);
    assert_int_equal(r.code, X_USAGE);
    assert_non_null(strstr(r.err, "--ttl: '5x' is not a duration"));
    fl(f, &r, "--wait=3d", "acquire", "cli:x", NULL);
    assert_int_equal(r.code, X_USAGE);
    assert_non_null(strstr(r.err, "--wait: '3d' is not a duration"));
}

static void test_cli_gives_up_after_wait(void **state)
{
    struct fixture *f = *state;
    struct res r;
    fl(f, &r, "--ttl", "30s", "acquire", "cli:busy", NULL);
    assert_int_equal(r.code, 0);

    /* Attempts every 50..150 ms; none starts after the wait ran out, so the
     * last one ends at most one delay before it. */
    fl(f, &r, "--wait", "700ms", "--retry-delay", "50ms", "acquire", "cli:busy", NULL);
    assert_int_equal(r.code, X_NOT_HELD);
    assert_string_equal(r.out, "");
    assert_non_null(strstr(r.err, "cli:busy"));
    assert_true(r.ms >= 700 - 150);
    assert_true(r.ms < 3000);

    /* --wait 0: one attempt. */
    fl(f, &r, "--wait", "0", "acquire", "cli:busy", NULL);
    assert_int_equal(r.code, X_NOT_HELD);
    assert_true(r.ms < 1000);

    /* run never starts its command. */
    char marker[300];
    path_in(f, "marker", marker, sizeof(marker));
    fl(f, &r, "--wait", "500ms", "--retry-delay", "50ms", "run", "cli:busy", "--", "touch", marker, NULL);
    assert_int_equal(r.code, X_NOT_HELD);
    assert_true(r.ms >= 500 - 150);
    assert_false(file_exists(marker));
}

/* A wait says what it waits for (with --verbose; at a terminal without
 * it): once, then every 5 s; --quiet and a non-terminal stderr keep quiet. */
static void test_cli_wait_says_what_it_waits_for(void **state)
{
    struct fixture *f = *state;
    struct res r;
    fl(f, &r, "--ttl", "7s", "acquire", "cli:wait", NULL);
    assert_int_equal(r.code, 0);
    fl(f, &r, "--verbose", "--wait", "10s", "acquire", "cli:wait", NULL);
    assert_int_equal(r.code, 0);
    char want[128];
    snprintf(want, sizeof(want), "fencelock: waiting for 'cli:wait' (held by pid %d on ", (int)getpid());
    if (strstr(r.err, want) == NULL || strstr(r.err, "up to 10.0 s)") == NULL ||
        strstr(r.err, "fencelock: still waiting for 'cli:wait' after 5 s") == NULL)
        fail_msg("stderr: %s", r.err);
    assert_true(r.ms >= 4500);

    fl(f, &r, "--ttl", "1s", "acquire", "cli:wait2", NULL);
    assert_int_equal(r.code, 0);
    fl(f, &r, "--wait", "5s", "acquire", "cli:wait2", NULL);
    assert_int_equal(r.code, 0);
    assert_string_equal(r.err, ""); /* stderr is no terminal here */
    fl(f, &r, "--ttl", "1s", "acquire", "cli:wait3", NULL);
    assert_int_equal(r.code, 0);
    fl(f, &r, "--verbose", "--quiet", "--wait", "5s", "acquire", "cli:wait3", NULL);
    assert_int_equal(r.code, 0);
    assert_string_equal(r.err, "");
}

/* A majority that grants too slowly leaves no validity: lockcore's
 * -ETIMEDOUT, exit 69 like other failures to reach a majority in time, not
 * 75 (nobody else holds the lock). Every node answers 30 ms late each way
 * (within the 90 ms timeout), and a fence value ahead of the wall clock
 * makes the grant take a second round: 120 ms, past the 100 ms TTL. */
static void test_cli_granted_too_slowly_is_no_majority_in_time(void **state)
{
    struct fixture *f = *state;
    struct fp_proxy *p[3];
    char nodes[200] = "FENCELOCK_NODES=";
    for (int i = 0; i < 3; i++) {
        redisReply *x = rh_command(f->rc, i, "SET {cli:slow}:fence 5000000000000000");
        assert_non_null(x);
        freeReplyObject(x);
        assert_int_equal(fp_new(rh_port(f->rc, i), &p[i]), 0);
        fp_set_delay(p[i], FP_BOTH, 30);
        size_t len = strlen(nodes);
        snprintf(nodes + len, sizeof(nodes) - len, "%s127.0.0.1:%d", i ? "," : "", fp_port(p[i]));
    }
    char *env[] = {nodes, NULL};
    struct res r;
    fl_env(f, &r, env, "--ttl", "100ms", "--timeout", "90ms", "--retry-count", "0", "acquire", "cli:slow",
           NULL);
    for (int i = 0; i < 3; i++)
        fp_free(p[i]);
    if (r.code != X_UNREACHABLE)
        fail_msg("exit %d, not %d: %s", r.code, X_UNREACHABLE, r.err);
    assert_string_equal(r.out, "");
    assert_non_null(strstr(r.err, "too slowly"));
}

static void test_cli_unreachable_nodes_have_their_code(void **state)
{
    struct fixture *f = *state;
    struct res r;
    char id[41];
    acquire_id(f, "30s", "cli:down", id);
    assert_int_equal(rh_kill(f->rc, 0), 0);
    assert_int_equal(rh_kill(f->rc, 2), 0);

    fl(f, &r, "acquire", "cli:other", NULL);
    assert_int_equal(r.code, X_UNREACHABLE);
    assert_string_equal(r.out, "");
    assert_non_null(strstr(r.err, "unreachable"));

    char marker[300];
    path_in(f, "marker", marker, sizeof(marker));
    fl(f, &r, "--wait", "600ms", "run", "cli:other", "touch", marker, NULL);
    assert_int_equal(r.code, X_UNREACHABLE);
    assert_false(file_exists(marker));

    fl(f, &r, "extend", "cli:down", id, NULL);
    assert_int_equal(r.code, X_UNREACHABLE);
    json_t *j = one_json_line(&r);
    assert_false(jbool(j, "extended"));
    /* Decided as soon as a majority could no longer agree: the one live
     * node's answer may come after that. */
    assert_true(jint(j, "nodes_extended") <= 1);
    assert_int_equal(jint(j, "nodes"), 3);
    json_decref(j);

    fl(f, &r, "status", "cli:down", NULL);
    assert_int_equal(r.code, X_UNREACHABLE);
    j = one_json_line(&r);
    assert_int_equal(jint(j, "reachable"), 1);
    assert_false(jbool(j, "held_by_majority"));
    json_t *n0 = json_array_get(json_object_get(j, "nodes"), 0);
    assert_false(jbool(n0, "reachable"));
    has_keys(n0, "node", "reachable", "error", NULL);
    assert_true(strlen(jstr(n0, "error")) > 0);
    json_t *n1 = json_array_get(json_object_get(j, "nodes"), 1);
    assert_string_equal(jstr(n1, "holder"), id);
    json_decref(j);

    fl(f, &r, "release", "cli:down", id, NULL);
    assert_int_equal(r.code, X_UNREACHABLE);
    j = one_json_line(&r);
    assert_int_equal(jint(j, "nodes_released"), 1);
    json_decref(j);
}

/* `meson install` into a temporary --destdir, then the installed fencelock
 * runs with an empty environment: no ldconfig, no LD_LIBRARY_PATH (its
 * RUNPATH finds the libraries installed beside it). */
static void test_cli_installed_fencelock_runs(void **state)
{
    struct fixture *f = *state;
    const char *root = getenv("FENCELOCK_BUILD_ROOT");
    const char *installed = getenv("FENCELOCK_INSTALLED_BIN");
    if (root == NULL || installed == NULL)
        fail_msg("FENCELOCK_BUILD_ROOT or FENCELOCK_INSTALLED_BIN is not set: run this test through meson");
    char dest[300], log[320], bin[1024], out[320];
    path_in(f, "destdir", dest, sizeof(dest));
    snprintf(log, sizeof(log), "%s/install.log", f->dir);
    snprintf(out, sizeof(out), "%s/version.out", f->dir);
    snprintf(bin, sizeof(bin), "%s%s", dest, installed);
    char *install[] = {"meson", "install", "--no-rebuild", "-C", (char *)root, "--destdir", dest, NULL};
    pid_t pid = hp_spawn(install, NULL, log);
    assert_true(pid > 0);
    int status = 0;
    assert_int_equal(hp_wait(pid, 120000, &status), 0);
    char text[4096];
    read_file(log, text, sizeof(text));
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
        fail_msg("meson install failed: %s", text);
    assert_true(file_exists(bin));

    char *version[] = {"env", "-i", bin, "--version", NULL};
    pid = hp_spawn(version, NULL, out);
    assert_true(pid > 0);
    assert_int_equal(hp_wait(pid, 10000, &status), 0);
    read_file(out, text, sizeof(text));
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
        fail_msg("installed %s --version: %s", bin, text);
    assert_int_equal(strncmp(text, "fencelock ", 10), 0);
}

/* `--fair`: two waiters queue behind a holder in the order they asked;
 * `status` lists them with their tickets; a release lets the first in. */
static void test_cli_fair_waiters_are_listed_and_served_in_order(void **state)
{
    struct fixture *f = *state;
    char id[41];
    acquire_id(f, "20s", "cli:fair", id);
    struct child w1, w2;
    const char *a1[] = {"--fair", "--quiet", "--ttl", "20s", "--wait", "15s", "acquire", "cli:fair", NULL};
    spawn(f, &w1, NULL, a1);
    long long end = hp_now_ms() + 5000;
    struct res r;
    json_t *j = NULL;
    /* The first waiter has its place before the second asks. */
    for (;;) {
        fl(f, &r, "status", "cli:fair", NULL);
        j = one_json_line(&r);
        json_t *n0 = json_array_get(json_object_get(j, "nodes"), 0);
        if (jint(n0, "waiters") >= 1 || hp_now_ms() > end)
            break;
        json_decref(j);
        hp_sleep_ms(50);
    }
    json_decref(j);
    spawn(f, &w2, NULL, a1);
    end = hp_now_ms() + 5000;
    for (;;) {
        fl(f, &r, "status", "cli:fair", NULL);
        j = one_json_line(&r);
        json_t *n0 = json_array_get(json_object_get(j, "nodes"), 0);
        if (jint(n0, "waiters") >= 2 || hp_now_ms() > end)
            break;
        json_decref(j);
        hp_sleep_ms(50);
    }
    json_t *n0 = json_array_get(json_object_get(j, "nodes"), 0);
    assert_int_equal(jint(n0, "waiters"), 2);
    json_t *q = json_object_get(n0, "queue");
    assert_int_equal(json_array_size(q), 2);
    long long t1 = jint(json_array_get(q, 0), "ticket"), t2 = jint(json_array_get(q, 1), "ticket");
    assert_true(t1 < t2);
    assert_true(jint(json_array_get(q, 0), "waited_ms") >= jint(json_array_get(q, 1), "waited_ms"));
    json_decref(j);
    /* The holder leaves: the first waiter is granted, the second still waits. */
    fl(f, &r, "release", "cli:fair", id, NULL);
    assert_int_equal(r.code, 0);
    struct res g1;
    collect(&w1, RUN_TIMEOUT_MS, &g1);
    assert_int_equal(g1.code, 0);
    assert_true(alive(w2.pid));
    json_t *l1 = one_json_line(&g1);
    char first[41];
    snprintf(first, sizeof(first), "%s", jstr(l1, "lock_id"));
    json_decref(l1);
    fl(f, &r, "release", "cli:fair", first, NULL);
    struct res g2;
    collect(&w2, RUN_TIMEOUT_MS, &g2);
    assert_int_equal(g2.code, 0);
    /* Unknown backoff: a usage error that names the option. */
    fl(f, &r, "--backoff", "random", "status", "cli:fair", NULL);
    assert_int_equal(r.code, X_USAGE);
    assert_non_null(strstr(r.err, "--backoff"));
}

/* A password from a file or the environment: never in argv, never in a
 * message; a wrong one is a server error (70) that does not show it. */
static void test_cli_password_stays_out_of_argv_and_messages(void **state)
{
    (void)state;
    struct rh_options ro;
    rh_options_init(&ro);
    ro.password = "S3cretPW-cli";
    struct fixture *f = fx_new(0, "cli-pw"); /* with its own nodes: */
    f->run_timeout_ms = RUN_TIMEOUT_MS;
    assert_int_equal(rh_cluster_start(3, &ro, &f->rc), 0);
    /* Plain addresses, without the password. */
    f->nodes[0] = '\0';
    for (int i = 0; i < 3; i++) {
        char a[64];
        snprintf(a, sizeof(a), "%s127.0.0.1:%d", i ? "," : "", rh_port(f->rc, i));
        strcat(f->nodes, a);
    }
    char pwfile[320], badfile[320];
    snprintf(pwfile, sizeof(pwfile), "%s/pw", f->dir);
    snprintf(badfile, sizeof(badfile), "%s/bad", f->dir);
    FILE *fp = fopen(pwfile, "w");
    assert_non_null(fp);
    fputs("S3cretPW-cli\n", fp);
    fclose(fp);
    fp = fopen(badfile, "w");
    assert_non_null(fp);
    fputs("wrong-password-xyz\n", fp);
    fclose(fp);

    struct res r;
    fl(f, &r, "--password-file", pwfile, "acquire", "cli:pw", NULL);
    assert_int_equal(r.code, 0);
    char *const env_ok[] = {"FENCELOCK_PASSWORD=S3cretPW-cli", NULL};
    fl_env(f, &r, env_ok, "status", "cli:pw", NULL);
    assert_int_equal(r.code, 0);
    assert_null(strstr(r.out, "S3cretPW"));
    /* Without it: refused by the nodes. */
    fl(f, &r, "acquire", "cli:pw2", NULL);
    assert_int_not_equal(r.code, 0);
    fl(f, &r, "--password-file", badfile, "acquire", "cli:pw2", NULL);
    assert_int_equal(r.code, 70);
    assert_null(strstr(r.err, "wrong-password-xyz"));
    assert_non_null(strstr(r.err, "AUTH"));
    /* A file that is not there: a usage error naming it. */
    fl(f, &r, "--password-file", "/nonexistent/pw", "acquire", "cli:pw2", NULL);
    assert_int_equal(r.code, X_USAGE);
    assert_non_null(strstr(r.err, "/nonexistent/pw"));
    /* A password in a URL is masked in every message. */
    char url[128];
    snprintf(url, sizeof(url), "redis://:wrong-password-xyz@127.0.0.1:%d", rh_port(f->rc, 0));
    fl(f, &r, "--nodes", url, "acquire", "cli:pw3", NULL);
    assert_int_equal(r.code, 70);
    assert_null(strstr(r.err, "wrong-password-xyz"));
    rh_cluster_free(f->rc);
    rh_rmtree(f->dir);
    free(f);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_cli_acquire_prints_the_lock, setup3, teardown),
        cmocka_unit_test_setup_teardown(test_cli_extend_and_release_print_the_outcome, setup3, teardown),
        cmocka_unit_test_setup_teardown(test_cli_status_reports_a_foreign_holder, setup3, teardown),
        cmocka_unit_test_setup_teardown(test_cli_status_shows_who_holds_the_lock, setup3, teardown),
        cmocka_unit_test_setup_teardown(test_cli_repair_lowers_a_fence_pushed_ahead, setup3, teardown),
        cmocka_unit_test_setup_teardown(test_cli_run_passes_the_lock_to_the_command, setup3, teardown),
        cmocka_unit_test_setup_teardown(test_cli_runs_never_overlap, setup3, teardown),
        cmocka_unit_test_setup_teardown(test_cli_run_permits_room_of_three, setup3, teardown),
        cmocka_unit_test_setup_teardown(test_cli_nested_run_joins_the_lock, setup3, teardown),
        cmocka_unit_test_setup_teardown(test_cli_run_keeps_the_lock_past_its_ttl, setup3, teardown),
        cmocka_unit_test_setup_teardown(test_cli_run_signals_the_command_when_the_lock_is_lost, setup3,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_cli_run_kills_a_command_that_ignores_sigterm, setup3, teardown),
        cmocka_unit_test_setup_teardown(test_cli_run_passes_signals_on, setup3, teardown),
        cmocka_unit_test_setup_teardown(test_cli_run_undo_runs_after_failure_or_loss, setup3, teardown),
        cmocka_unit_test_setup_teardown(test_cli_run_max_hold_stops_a_job_that_holds_too_long, setup3,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_cli_run_says_why_a_paused_lock_was_lost, setup3, teardown),
        cmocka_unit_test_setup_teardown(test_cli_run_never_exits_without_saying_why, setup3, teardown),
        cmocka_unit_test_setup_teardown(test_cli_run_job_does_not_outlive_fencelock, setup3, teardown),
        cmocka_unit_test_setup_teardown(test_cli_run_signals_the_whole_job, setup3, teardown),
        cmocka_unit_test_setup_teardown(test_cli_run_passes_signals_to_the_whole_job, setup3, teardown),
        cmocka_unit_test_setup_teardown(test_cli_run_tells_the_job_when_the_lock_was_granted, setup3,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_cli_run_hands_the_terminal_to_the_job, setup3, teardown),
        cmocka_unit_test_setup_teardown(test_cli_bad_arguments_are_usage_errors, setup_none, teardown),
        cmocka_unit_test_setup_teardown(test_cli_installed_fencelock_runs, setup_none, teardown),
        cmocka_unit_test_setup_teardown(test_cli_durations_take_hours_and_name_the_option, setup3, teardown),
        cmocka_unit_test_setup_teardown(test_cli_gives_up_after_wait, setup3, teardown),
        cmocka_unit_test_setup_teardown(test_cli_wait_says_what_it_waits_for, setup3, teardown),
        cmocka_unit_test_setup_teardown(test_cli_granted_too_slowly_is_no_majority_in_time, setup3, teardown),
        cmocka_unit_test_setup_teardown(test_cli_unreachable_nodes_have_their_code, setup3, teardown),
        cmocka_unit_test_setup_teardown(test_cli_fair_waiters_are_listed_and_served_in_order, setup3,
                                        teardown),
        cmocka_unit_test(test_cli_password_stays_out_of_argv_and_messages),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
