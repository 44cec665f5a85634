/* The lock kinds through the fencelock command, against real redis-server
 * processes: several resources all or nothing (run, acquire, extend,
 * release, status), read-write locks, reentrant holds, and the usage
 * errors of every combination that makes no lock. Jobs of `run` log when
 * they enter and leave to a shared file; a checker over that log says who
 * was inside together. The binary is $FENCELOCK_BIN. */
#include <errno.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>
#include <jansson.h>

#include "proc.h"
#include "cli_harness.h"
#include "fence_probe.h"
#include "redis_harness.h"

#define RUN_TIMEOUT_MS 30000
#define REQUEST_TIMEOUT "400ms"

enum { X_USAGE = 64, X_NOT_HELD = 75, X_LOST = 79 };

static struct fixture *fx(int n)
{
    struct fixture *f = fx_new(n, "clikinds");
    f->timeout = REQUEST_TIMEOUT;
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

static json_t *ok_json(struct res *r)
{
    if (r->code != 0)
        fail_msg("exit %d: %s", r->code, r->err);
    return one_json_line(r);
}

/* ---- the shared log of `run` jobs ---- */

/* A job's stay inside its lock: when it entered and left (ns, wall clock,
 * as `date +%s%N` says) and the token it got. */
struct stay {
    int job;
    unsigned long long token, enter, leave;
};

/*
 * The command a job runs: log "S job token time" on entry, sleep, log "E
 * job token time" on leaving. The times are taken inside the lock (after
 * the grant, before the release), so two stays that overlap in the log
 * overlapped in the locks.
 */
static const char job_script[] = "echo \"S $1 $FENCELOCK_TOKEN $(date +%s%N)\" >> \"$T_LOG\"; sleep \"$2\"; "
                                 "echo \"E $1 $FENCELOCK_TOKEN $(date +%s%N)\" >> \"$T_LOG\"";

/* Read the log into s[0..cap); returns the number of jobs found (each
 * must have entered and left). */
static int read_stays(const char *log, struct stay *s, int cap)
{
    char text[8192];
    read_file(log, text, sizeof(text));
    int n = 0;
    for (char *save = NULL, *line = strtok_r(text, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
        char kind;
        int job;
        unsigned long long tok, t;
        if (sscanf(line, "%c %d %llu %llu", &kind, &job, &tok, &t) != 4)
            fail_msg("bad log line '%s'", line);
        int i = 0;
        while (i < n && s[i].job != job)
            i++;
        if (i == n) {
            assert_true(n < cap);
            memset(&s[n], 0, sizeof(s[n]));
            s[n++].job = job;
        }
        s[i].token = tok;
        if (kind == 'S')
            s[i].enter = t;
        else
            s[i].leave = t;
    }
    for (int i = 0; i < n; i++)
        if (s[i].enter == 0 || s[i].leave < s[i].enter)
            fail_msg("job %d did not enter and leave", s[i].job);
    return n;
}

static int overlap(const struct stay *a, const struct stay *b)
{
    return a->enter < b->leave && b->enter < a->leave;
}

static void log_env(struct fixture *f, char *log, size_t cap, char *var, size_t vcap)
{
    snprintf(log, cap, "%s/stays", f->dir);
    snprintf(var, vcap, "T_LOG=%s", log);
}

/* Wait until none of keys (NULL-terminated) is on any node, at most
 * within_ms (a key's TTL): 0, or -1 with what is left said. */
static int keys_gone(struct fixture *f, const char *const *keys, long long within_ms)
{
    long long end = hp_now_ms() + within_ms;
    for (;;) {
        int left = 0;
        for (int n = 0; n < 3; n++)
            for (const char *const *k = keys; *k != NULL; k++)
                if (rh_pttl(f->rc, n, *k) != -2) {
                    left++;
                    if (hp_now_ms() >= end)
                        fprintf(stderr, "node %d: %s left, %lld ms to live\n", n, *k, rh_pttl(f->rc, n, *k));
                }
        if (left == 0)
            return 0;
        if (hp_now_ms() >= end)
            return -1;
        hp_sleep_ms(50);
    }
}

/* ---- several resources ---- */

/*
 * Six runs over overlapping sets of three resources, the sets named in
 * opposite orders ({a,b} and {b,a}, ...): all of them end within the bound
 * (no deadlock: a set is taken whole or not at all), no two whose sets
 * share a resource are ever inside at once, and on each resource the
 * tokens grow in the order of the stays.
 */
static void test_cli_kinds_overlapping_sets_never_share_a_resource(void **state)
{
    struct fixture *f = *state;
    enum { K = 6 };
    static const char *const sets[K][2] = {{"k:a", "k:b"}, {"k:b", "k:c"}, {"k:c", "k:a"},
                                           {"k:b", "k:a"}, {"k:c", "k:b"}, {"k:a", "k:c"}};
    char log[300], var[330];
    log_env(f, log, sizeof(log), var, sizeof(var));
    char *env[] = {var, NULL};
    struct child ch[K];
    char job[K][8];
    for (int i = 0; i < K; i++) {
        snprintf(job[i], sizeof(job[i]), "%d", i);
        const char *args[] = {"--ttl",    "5s", "--wait", "20s", "--retry-delay", "30ms", "run",  sets[i][0],
                              sets[i][1], "--", "sh",     "-c",  job_script,      "sh",   job[i], "0.25",
                              NULL};
        spawn(f, &ch[i], env, args);
    }
    for (int i = 0; i < K; i++) {
        struct res r;
        collect(&ch[i], RUN_TIMEOUT_MS, &r);
        if (r.code != 0)
            fail_msg("run %d exited %d: %s", i, r.code, r.err);
    }
    struct stay s[K];
    assert_int_equal(read_stays(log, s, K), K);
    int shared_pairs = 0;
    for (int x = 0; x < K; x++) {
        for (int y = x + 1; y < K; y++) {
            int jx = s[x].job, jy = s[y].job, share = 0;
            for (int p = 0; p < 2; p++)
                for (int q = 0; q < 2; q++)
                    share |= strcmp(sets[jx][p], sets[jy][q]) == 0;
            if (!share)
                continue;
            shared_pairs++;
            if (overlap(&s[x], &s[y]))
                fail_msg("jobs %d and %d share a resource and were inside together", jx, jy);
            /* One token fences the whole set: the later stay has the larger. */
            const struct stay *first = s[x].enter < s[y].enter ? &s[x] : &s[y];
            const struct stay *later = first == &s[x] ? &s[y] : &s[x];
            assert_true(later->token > first->token);
        }
    }
    assert_true(shared_pairs > 0);
    /* Every set was released: no lock key is left on any node, but one
     * whose rollback a node never got (a busy machine) until its TTL. */
    assert_int_equal(keys_gone(f, (const char *[]){"k:a", "k:b", "k:c", NULL}, 6000), 0);
}

/* `acquire a b` holds both under one id and one token; a member is
 * refused to others; `extend a b ID` and `release a b ID` work on the set;
 * `status a b` shows each resource's holder and the set's. */
static void test_cli_kinds_acquire_extend_release_a_set(void **state)
{
    struct fixture *f = *state;
    struct res r;
    fl(f, &r, "--ttl", "5s", "acquire", "s:a", "s:b", NULL);
    json_t *j = ok_json(&r);
    assert_string_equal(r.err, "");
    has_keys(j, "resources", "kind", "lock_id", "token", "validity_ms", "ttl_ms", "nodes_granted", "nodes",
             "granted_mono_ms", "granted_wall_ms", "valid_until_mono_ms", "valid_until_wall_ms", NULL);
    json_t *names = json_object_get(j, "resources");
    assert_int_equal(json_array_size(names), 2);
    assert_string_equal(json_string_value(json_array_get(names, 0)), "s:a");
    assert_string_equal(json_string_value(json_array_get(names, 1)), "s:b");
    assert_string_equal(jstr(j, "kind"), "multi");
    char id[41];
    snprintf(id, sizeof(id), "%s", jstr(j, "lock_id"));
    long long token = jint(j, "token");
    assert_true(token > 0);
    json_decref(j);
    /* Both keys hold the id on a majority; both fences are the token. */
    assert_true(rh_holders(f->rc, "s:a", id) >= 2);
    assert_true(rh_holders(f->rc, "s:b", id) >= 2);
    for (int n = 0; n < 3; n++) {
        if (rh_holders(f->rc, "s:a", id) == 3) {
            assert_int_equal(tf_fence(f->rc, n, "", "s:a"), token);
            assert_int_equal(tf_fence(f->rc, n, "", "s:b"), token);
        }
    }

    /* A member alone, or a set that shares one, is refused to others. */
    fl(f, &r, "--wait", "0", "acquire", "s:b", NULL);
    assert_int_equal(r.code, X_NOT_HELD);
    fl(f, &r, "--wait", "0", "acquire", "s:c", "s:a", NULL);
    assert_int_equal(r.code, X_NOT_HELD);
    /* One line on stderr, the set named by commas, not newlines. */
    assert_ptr_equal(strchr(r.err, '\n'), r.err + strlen(r.err) - 1);
    assert_non_null(strstr(r.err, "s:c,s:a"));
    /* ...and the refused set left nothing on s:c. */
    for (int n = 0; n < 3; n++)
        assert_int_equal(rh_pttl(f->rc, n, "s:c"), -2);

    /* status of the set: each resource's view, and the id holding them all. */
    fl(f, &r, "status", "s:a", "s:b", NULL);
    j = ok_json(&r);
    has_keys(j, "resources", "set_holder", NULL);
    assert_string_equal(jstr(j, "set_holder"), id);
    json_t *arr = json_object_get(j, "resources");
    assert_int_equal(json_array_size(arr), 2);
    for (size_t i = 0; i < 2; i++) {
        json_t *e = json_array_get(arr, i);
        assert_string_equal(jstr(e, "resource"), i == 0 ? "s:a" : "s:b");
        assert_string_equal(jstr(e, "state"), "held");
        assert_string_equal(jstr(e, "majority_holder"), id);
    }
    json_decref(j);

    fl(f, &r, "extend", "s:a", "s:b", id, "--ttl", "30s", NULL);
    j = ok_json(&r);
    has_keys(j, "resources", "kind", "lock_id", "extended", "validity_ms", "ttl_ms", "nodes_extended",
             "nodes", "granted_mono_ms", "granted_wall_ms", "valid_until_mono_ms", "valid_until_wall_ms",
             NULL);
    assert_true(jbool(j, "extended"));
    json_decref(j);
    /* Extended at a majority: node 0 may still be running it. */
    for (int t = 0; t < 100 && (rh_pttl(f->rc, 0, "s:a") <= 25000 || rh_pttl(f->rc, 0, "s:b") <= 25000); t++)
        hp_sleep_ms(20);
    assert_true(rh_pttl(f->rc, 0, "s:a") > 25000);
    assert_true(rh_pttl(f->rc, 0, "s:b") > 25000);

    /* Another id holds nothing: not extended, exit 79. */
    fl(f, &r, "extend", "s:a", "s:b", "0123456789abcdef0123456789abcdef01234567", NULL);
    assert_int_equal(r.code, X_LOST);
    j = one_json_line(&r);
    assert_false(jbool(j, "extended"));
    json_decref(j);

    fl(f, &r, "release", "s:a", "s:b", id, NULL);
    j = ok_json(&r);
    has_keys(j, "resources", "kind", "lock_id", "released", "nodes_released", "nodes", NULL);
    assert_true(jbool(j, "released"));
    assert_int_equal(jint(j, "nodes_released"), 3);
    json_decref(j);
    for (int n = 0; n < 3; n++) {
        assert_int_equal(rh_pttl(f->rc, n, "s:a"), -2);
        assert_int_equal(rh_pttl(f->rc, n, "s:b"), -2);
    }
    /* Again: nothing left to release, still exit 0. */
    fl(f, &r, "release", "s:a", "s:b", id, NULL);
    j = ok_json(&r);
    assert_false(jbool(j, "released"));
    json_decref(j);
    fl(f, &r, "status", "s:a", "s:b", NULL);
    j = ok_json(&r);
    assert_true(json_is_null(json_object_get(j, "set_holder")));
    json_decref(j);
}

/* A run of a set keeps the whole set alive past its TTL, gives the job
 * the set in FENCELOCK_RESOURCE (one name a line) and its kind. */
static void test_cli_kinds_run_keeps_a_set_alive(void **state)
{
    struct fixture *f = *state;
    char out[300], var[330];
    snprintf(out, sizeof(out), "%s/env", f->dir);
    snprintf(var, sizeof(var), "T_OUT=%s", out);
    char *env[] = {var, NULL};
    const char *args[] = {"--ttl",
                          "2s",
                          "run",
                          "ka:a",
                          "ka:b",
                          "--",
                          "sh",
                          "-c",
                          "printf '%s|%s|%s' \"$FENCELOCK_RESOURCE\" \"$FENCELOCK_LOCK_KIND\" "
                          "\"$FENCELOCK_TOKEN\" > \"$T_OUT\"; sleep 4.5",
                          NULL};
    struct child ch;
    spawn(f, &ch, env, args);
    hp_sleep_ms(3000); /* past the TTL */
    struct res r;
    fl(f, &r, "--wait", "0", "acquire", "ka:b", NULL);
    assert_int_equal(r.code, X_NOT_HELD);
    fl(f, &r, "--wait", "0", "acquire", "ka:a", NULL);
    assert_int_equal(r.code, X_NOT_HELD);
    collect(&ch, RUN_TIMEOUT_MS, &r);
    if (r.code != 0)
        fail_msg("run exited %d: %s", r.code, r.err);
    char got[256];
    read_file(out, got, sizeof(got));
    unsigned long long token = 0;
    assert_int_equal(strncmp(got, "ka:a\nka:b|multi|", 16), 0);
    assert_int_equal(sscanf(got + 16, "%llu", &token), 1);
    assert_true(token > 0);
    for (int n = 0; n < 3; n++) {
        assert_int_equal(rh_pttl(f->rc, n, "ka:a"), -2);
        assert_int_equal(rh_pttl(f->rc, n, "ka:b"), -2);
    }
}

/* ---- read-write ---- */

/*
 * Three readers run at once (each is inside while the others are); two
 * writers started while they read wait for them and run alone, one after
 * the other, never beside a reader. A reader's token is the fence it read,
 * below every later writer's.
 */
static void test_cli_kinds_readers_overlap_writer_excludes(void **state)
{
    struct fixture *f = *state;
    enum { READERS = 3, WRITERS = 2, K = READERS + WRITERS };
    char log[300], var[330];
    log_env(f, log, sizeof(log), var, sizeof(var));
    char *env[] = {var, NULL};
    struct child ch[K];
    char job[K][8];
    for (int i = 0; i < K; i++) {
        snprintf(job[i], sizeof(job[i]), "%d", i);
        int reader = i < READERS;
        const char *args[] = {"--ttl",
                              "5s",
                              "--wait",
                              "20s",
                              "--retry-delay",
                              "30ms",
                              reader ? "--read" : "--write",
                              "run",
                              "rw:doc",
                              "--",
                              "sh",
                              "-c",
                              job_script,
                              "sh",
                              job[i],
                              reader ? "1.2" : "0.3",
                              NULL};
        spawn(f, &ch[i], env, args);
        if (i == READERS - 1) {
            /* The writers only once every reader is inside. */
            char text[4096];
            long long end = hp_now_ms() + 10000;
            int entered = 0;
            while (entered < READERS && hp_now_ms() < end) {
                hp_sleep_ms(20);
                read_file(log, text, sizeof(text));
                entered = 0;
                for (char *p = text; (p = strstr(p, "S ")) != NULL; p += 2)
                    entered += p == text || p[-1] == '\n';
            }
            assert_int_equal(entered, READERS);
        }
    }
    for (int i = 0; i < K; i++) {
        struct res r;
        collect(&ch[i], RUN_TIMEOUT_MS, &r);
        if (r.code != 0)
            fail_msg("%s %d exited %d: %s", i < READERS ? "reader" : "writer", i, r.code, r.err);
    }
    struct stay s[K];
    assert_int_equal(read_stays(log, s, K), K);
    int reader_pairs = 0;
    for (int x = 0; x < K; x++) {
        for (int y = x + 1; y < K; y++) {
            int wx = s[x].job >= READERS, wy = s[y].job >= READERS;
            if (!wx && !wy) {
                reader_pairs += overlap(&s[x], &s[y]);
                continue;
            }
            if (overlap(&s[x], &s[y]))
                fail_msg("job %d (%s) and job %d (%s) were inside together", s[x].job,
                         wx ? "writer" : "reader", s[y].job, wy ? "writer" : "reader");
            /* A writer after a stay has a larger token than it. */
            const struct stay *first = s[x].enter < s[y].enter ? &s[x] : &s[y];
            const struct stay *later = first == &s[x] ? &s[y] : &s[x];
            if (later->job >= READERS)
                assert_true(later->token > first->token);
        }
    }
    assert_int_equal(reader_pairs, 3); /* every two readers were inside together */
    /* Every lock was released: no lock key is left on any node, but one
     * whose rollback a node never got (a busy machine) until its TTL. */
    assert_int_equal(keys_gone(f, (const char *[]){"rw:doc", NULL}, 6000), 0);
    redisReply *x = rh_command(f->rc, 0, "ZCARD {rw:doc}:readers");
    assert_int_equal(x->integer, 0);
    freeReplyObject(x);
}

/* ---- status of each kind ---- */

/* status --read names the readers, on each node and those a majority
 * lists, and the writer that waits for them: the one that then gets in. */
static void test_cli_kinds_status_names_readers(void **state)
{
    struct fixture *f = *state;
    struct res r;
    json_t *j;
    char rd[2][41];
    for (int k = 0; k < 2; k++) {
        fl(f, &r, "--ttl", "20s", "--read", "acquire", "st:names", NULL);
        j = ok_json(&r);
        snprintf(rd[k], sizeof(rd[k]), "%s", jstr(j, "lock_id"));
        json_decref(j);
        hp_sleep_ms(5); /* the second expires after the first */
    }
    hp_sleep_ms(50); /* granted at a majority: the others may still be running it */
    fl(f, &r, "--read", "status", "st:names", NULL);
    j = ok_json(&r);
    has_keys(j, "resource", "quorum", "nodes", "reachable", "state", "held_by_majority", "majority_holder",
             "majority_holder_info", "majority_remaining_ms", "writer", "readers", "mode", "reader_ids",
             "writer_waits", "writer_waits_nodes", NULL);
    json_t *ids = json_object_get(j, "reader_ids");
    assert_int_equal(json_array_size(ids), 2);
    assert_string_equal(json_string_value(json_array_get(ids, 0)), rd[0]);
    assert_string_equal(json_string_value(json_array_get(ids, 1)), rd[1]);
    assert_true(json_is_null(json_object_get(j, "writer_waits")));
    assert_int_equal(jint(j, "writer_waits_nodes"), 0);
    json_t *nodes = json_object_get(j, "nodes");
    for (size_t i = 0; i < json_array_size(nodes); i++) {
        json_t *e = json_array_get(nodes, i);
        json_t *list = json_object_get(e, "reader_list");
        assert_int_equal(json_array_size(list), 2);
        for (size_t k = 0; k < 2; k++) {
            json_t *x = json_array_get(list, k);
            assert_string_equal(jstr(x, "id"), rd[k]);
            assert_true(jint(x, "remaining_ms") > 0 && jint(x, "remaining_ms") <= 20000);
        }
        assert_true(json_is_null(json_object_get(e, "writer_waits")));
    }
    json_decref(j);

    /* A writer waits for them (in the background): every node names it. */
    struct child w;
    const char *wargs[] = {"--wait", "20s", "--retry-delay", "30ms", "--write", "acquire", "st:names", NULL};
    spawn(f, &w, NULL, wargs);
    char waiting[41] = "";
    long long until = hp_now_ms() + 10000;
    while (hp_now_ms() < until) {
        fl(f, &r, "--write", "status", "st:names", NULL);
        j = ok_json(&r);
        int on = (int)jint(j, "writer_waits_nodes");
        if (on == 3) {
            snprintf(waiting, sizeof(waiting), "%s", jstr(j, "writer_waits"));
            nodes = json_object_get(j, "nodes");
            for (size_t i = 0; i < json_array_size(nodes); i++)
                assert_string_equal(jstr(json_array_get(nodes, i), "writer_waits"), waiting);
            assert_int_equal(jint(j, "readers"), 2);
            assert_string_equal(jstr(j, "mode"), "read");
        }
        json_decref(j);
        if (on == 3)
            break;
        hp_sleep_ms(50);
    }
    assert_int_equal(strlen(waiting), 40);
    for (int k = 0; k < 2; k++) {
        fl(f, &r, "--read", "release", "st:names", rd[k], NULL);
        assert_int_equal(r.code, 0);
    }
    collect(&w, RUN_TIMEOUT_MS, &r);
    j = ok_json(&r);
    char wid[41], acq[41];
    snprintf(wid, sizeof(wid), "%s", jstr(j, "lock_id"));
    acq_of(wid, acq);
    assert_string_equal(acq, waiting); /* the intent named the writer's acquisition */
    json_decref(j);
    hp_sleep_ms(50);
    fl(f, &r, "--read", "status", "st:names", NULL);
    j = ok_json(&r);
    assert_string_equal(jstr(j, "writer"), wid);
    assert_string_equal(jstr(j, "mode"), "write");
    assert_int_equal(json_array_size(json_object_get(j, "reader_ids")), 0);
    assert_true(json_is_null(json_object_get(j, "writer_waits")));
    json_decref(j);
    fl(f, &r, "--write", "release", "st:names", wid, NULL);
    assert_int_equal(r.code, 0);
}

static void test_cli_kinds_status_of_each_kind(void **state)
{
    struct fixture *f = *state;
    struct res r;
    json_t *j;

    /* Two readers: status --read counts them; a writer is refused. */
    char r1[41], r2[41];
    fl(f, &r, "--read", "acquire", "st:rw", NULL);
    j = ok_json(&r);
    has_keys(j, "resource", "kind", "lock_id", "token", "validity_ms", "ttl_ms", "nodes_granted", "nodes",
             "granted_mono_ms", "granted_wall_ms", "valid_until_mono_ms", "valid_until_wall_ms", NULL);
    assert_string_equal(jstr(j, "kind"), "read");
    snprintf(r1, sizeof(r1), "%s", jstr(j, "lock_id"));
    json_decref(j);
    fl(f, &r, "acquire", "--read", "st:rw", NULL);
    j = ok_json(&r);
    snprintf(r2, sizeof(r2), "%s", jstr(j, "lock_id"));
    json_decref(j);
    fl(f, &r, "--wait", "0", "--write", "acquire", "st:rw", NULL);
    assert_int_equal(r.code, X_NOT_HELD);
    /* The writer is told it waits for readers, not for one of their ids. */
    if (strstr(r.err, "; held by 2 readers\n") == NULL || strstr(r.err, r1) != NULL ||
        strstr(r.err, r2) != NULL)
        fail_msg("stderr: %s", r.err);
    fl(f, &r, "--wait", "0", "--write", "run", "st:rw", "--", "true", NULL);
    assert_int_equal(r.code, X_NOT_HELD);
    assert_non_null(strstr(r.err, "; held by 2 readers\n"));
    fl(f, &r, "--read", "status", "st:rw", NULL);
    j = ok_json(&r);
    assert_int_equal(jint(j, "readers"), 2);
    assert_string_equal(jstr(j, "mode"), "read");
    assert_true(json_is_null(json_object_get(j, "writer")));
    json_t *node0 = json_array_get(json_object_get(j, "nodes"), 0);
    assert_true(jint(node0, "readers") >= 1);
    json_decref(j);
    /* A reader leaves by its id (--read): one reader is left. */
    fl(f, &r, "--read", "release", "st:rw", r1, NULL);
    j = ok_json(&r);
    assert_true(jbool(j, "released"));
    assert_string_equal(jstr(j, "kind"), "read");
    json_decref(j);
    fl(f, &r, "--read", "extend", "st:rw", r2, NULL);
    j = ok_json(&r);
    assert_true(jbool(j, "extended"));
    json_decref(j);
    fl(f, &r, "--write", "status", "st:rw", NULL);
    j = ok_json(&r);
    assert_int_equal(jint(j, "readers"), 1);
    json_decref(j);
    fl(f, &r, "--read", "release", "st:rw", r2, NULL);
    assert_int_equal(r.code, 0);

    /* Now a writer: status names it, no readers. */
    fl(f, &r, "--write", "acquire", "st:rw", NULL);
    j = ok_json(&r);
    assert_string_equal(jstr(j, "kind"), "write");
    char w[41];
    snprintf(w, sizeof(w), "%s", jstr(j, "lock_id"));
    json_decref(j);
    fl(f, &r, "--wait", "0", "--read", "acquire", "st:rw", NULL);
    assert_int_equal(r.code, X_NOT_HELD);
    fl(f, &r, "--read", "status", "st:rw", NULL);
    j = ok_json(&r);
    assert_string_equal(jstr(j, "writer"), w);
    assert_string_equal(jstr(j, "mode"), "write");
    assert_int_equal(jint(j, "readers"), 0);
    json_decref(j);
    fl(f, &r, "--write", "release", "st:rw", w, NULL);
    assert_int_equal(r.code, 0);
    fl(f, &r, "--read", "status", "st:rw", NULL);
    j = ok_json(&r);
    assert_string_equal(jstr(j, "mode"), "free");
    json_decref(j);

    /* A reentrant hold: re-entered by its id (a hold of its own, the same
     * token), counted by status --reentrant, freed by the last release;
     * the key holds the owner. */
    fl(f, &r, "--reentrant", "acquire", "st:re", NULL);
    j = ok_json(&r);
    assert_string_equal(jstr(j, "kind"), "reentrant");
    char id[41];
    snprintf(id, sizeof(id), "%s", jstr(j, "lock_id"));
    long long token = jint(j, "token");
    json_decref(j);
    fl(f, &r, "acquire", "--reentrant", "st:re", id, NULL);
    j = ok_json(&r);
    char id2[41], owner[41];
    snprintf(id2, sizeof(id2), "%s", jstr(j, "lock_id"));
    assert_string_not_equal(id2, id);
    assert_int_equal(jint(j, "token"), token);
    json_decref(j);
    acq_of(id, owner);
    fl(f, &r, "--wait", "0", "acquire", "st:re", NULL); /* anyone else is refused */
    assert_int_equal(r.code, X_NOT_HELD);
    fl(f, &r, "--reentrant", "status", "st:re", NULL);
    j = ok_json(&r);
    assert_int_equal(jint(j, "holds"), 2);
    assert_string_equal(jstr(j, "majority_holder"), owner);
    assert_int_equal(jint(json_array_get(json_object_get(j, "nodes"), 0), "holds"), 2);
    json_decref(j);
    fl(f, &r, "--reentrant", "release", "st:re", id2, NULL);
    assert_int_equal(r.code, 0);
    fl(f, &r, "--reentrant", "status", "st:re", NULL);
    j = ok_json(&r);
    assert_int_equal(jint(j, "holds"), 1);
    assert_string_equal(jstr(j, "state"), "held");
    json_decref(j);
    fl(f, &r, "--reentrant", "release", "st:re", id, NULL);
    assert_int_equal(r.code, 0);
    fl(f, &r, "--reentrant", "status", "st:re", NULL);
    j = ok_json(&r);
    assert_int_equal(jint(j, "holds"), 0);
    assert_string_equal(jstr(j, "state"), "free");
    json_decref(j);

    /* A run nested in a run of the same resource: two holds, one token. */
    char out[300], var[330];
    snprintf(out, sizeof(out), "%s/nested", f->dir);
    snprintf(var, sizeof(var), "T_OUT=%s", out);
    char *env[] = {var, NULL};
    char inner[1024];
    snprintf(inner, sizeof(inner),
             "\"%s\" --timeout 400ms --wait 0 run st:nest -- sh -c '\"%s\" --timeout 400ms --reentrant "
             "status st:nest > \"$T_OUT\"'",
             fencelock_bin(), fencelock_bin());
    const char *args[] = {"run", "st:nest", "--", "sh", "-c", inner, NULL};
    run_args(f, &r, env, args);
    if (r.code != 0)
        fail_msg("nested run exited %d: %s", r.code, r.err);
    char got[16384];
    read_file(out, got, sizeof(got));
    j = json_loads(got, 0, NULL);
    assert_non_null(j);
    assert_int_equal(jint(j, "holds"), 2);
    json_decref(j);
}

/* A run nested in a run of another kind of the same resource (the writer,
 * a set holding it) does not join it: only a reentrant hold is joined, so
 * the nested run is refused like any other client. (A reader is left out:
 * a plain lock does not look at readers, docs/lockcore.md, so a nested
 * run beside a reader is granted whether it joins or not.) */
static void test_cli_kinds_nested_run_joins_only_a_reentrant_hold(void **state)
{
    struct fixture *f = *state;
    char out[300], var[330];
    snprintf(out, sizeof(out), "%s/nested", f->dir);
    snprintf(var, sizeof(var), "T_OUT=%s", out);
    char *env[] = {var, NULL};
    char inner[1024];
    snprintf(inner, sizeof(inner),
             "\"%s\" --timeout 400ms --quiet --wait 0 run nj:r -- true 2>/dev/null; echo "
             "\"$FENCELOCK_LOCK_KIND $?\" >> "
             "\"$T_OUT\"",
             fencelock_bin());
    static const char *const kinds[][3] = {
        {"--write", "nj:r", NULL}, {"nj:r", "nj:other", NULL}, {"nj:r", NULL, NULL}};
    struct res r;
    for (size_t i = 0; i < sizeof(kinds) / sizeof(kinds[0]); i++) {
        const char *args[12];
        int n = 0;
        args[n++] = "run";
        for (int k = 0; k < 3 && kinds[i][k] != NULL; k++)
            args[n++] = kinds[i][k];
        args[n++] = "--";
        args[n++] = "sh";
        args[n++] = "-c";
        args[n++] = inner;
        args[n] = NULL;
        run_args(f, &r, env, args);
        if (r.code != 0)
            fail_msg("outer run %zu exited %d: %s", i, r.code, r.err);
        /* Nothing of a reentrant hold was left beside the writer's lock. */
        for (int n = 0; i == 0 && n < 3; n++) {
            redisReply *x = rh_command(f->rc, n, "EXISTS {nj:r}:holds");
            assert_int_equal(x->integer, 0);
            freeReplyObject(x);
        }
    }
    char got[1024];
    read_file(out, got, sizeof(got));
    /* The writer's and the set's: refused. A reentrant run's: joined. */
    if (strcmp(got, "write 75\nmulti 75\nreentrant 0\n") != 0)
        fail_msg("nested runs said: %s", got);
}

/* A run waits in the nodes' queue with the reentrant lock that a nested
 * run joins, by default and with --fair (in line from its first attempt
 * on). FENCELOCK_LOCK_KIND says which. A plain acquire waits in it by
 * default too (want_kind NULL); so do the other kinds (the last). */
static void waits_in_line(struct fixture *f, const char *mode, const char *want_kind)
{
    struct res r;
    fl(f, &r, "--ttl", "20s", "acquire", "fq:r", NULL);
    json_t *j = ok_json(&r);
    char id[41];
    snprintf(id, sizeof(id), "%s", jstr(j, "lock_id"));
    json_decref(j);
    char out[300], var[330];
    snprintf(out, sizeof(out), "%s/kind", f->dir);
    snprintf(var, sizeof(var), "T_OUT=%s", out);
    char *env[] = {var, NULL};
    const char *args[] = {mode ? mode : "--quiet",
                          "--quiet",
                          "--wait",
                          "15s",
                          want_kind ? "run" : "acquire",
                          "fq:r",
                          want_kind ? "--" : NULL,
                          "sh",
                          "-c",
                          "echo $FENCELOCK_LOCK_KIND > \"$T_OUT\"",
                          NULL};
    struct child ch;
    spawn(f, &ch, env, args);
    int queued = 0;
    for (long long end = hp_now_ms() + 5000; queued < 2 && hp_now_ms() < end;) {
        hp_sleep_ms(50);
        fl(f, &r, "status", "fq:r", NULL);
        j = ok_json(&r);
        queued = 0;
        json_t *nodes = json_object_get(j, "nodes");
        for (size_t i = 0; i < json_array_size(nodes); i++)
            queued += jint(json_array_get(nodes, i), "waiters") > 0;
        json_decref(j);
    }
    if (queued < 2)
        fail_msg("the %s (%s) is in no majority of the nodes' queues (%d)", want_kind ? "run" : "acquire",
                 mode ? mode : "default", queued);
    fl(f, &r, "release", "fq:r", id, NULL);
    assert_int_equal(r.code, 0);
    collect(&ch, RUN_TIMEOUT_MS, &r);
    if (r.code != 0)
        fail_msg("%s exited %d: %s", want_kind ? "run" : "acquire", r.code, r.err);
    if (want_kind == NULL) {
        json_decref(ok_json(&r)); /* the lock it was granted */
        return;
    }
    char got[64];
    read_file(out, got, sizeof(got));
    assert_string_equal(got, want_kind);
}

static void test_cli_kinds_fair_run_waits_in_line(void **state)
{
    waits_in_line(*state, "--fair", "reentrant\n");
}

static void test_cli_kinds_run_waits_in_line_by_default(void **state)
{
    waits_in_line(*state, NULL, "reentrant\n");
}

static void test_cli_kinds_acquire_waits_in_line_by_default(void **state)
{
    waits_in_line(*state, NULL, NULL);
}

/* A run of one resource (a reentrant lock) says what it waits for, as a
 * plain acquire does; a set waits silently (no one holder to name). */
static void test_cli_kinds_run_says_what_it_waits_for(void **state)
{
    struct fixture *f = *state;
    struct res r;
    fl(f, &r, "--ttl", "1500ms", "acquire", "wn:r", NULL);
    assert_int_equal(r.code, 0);
    fl(f, &r, "--verbose", "--wait", "10s", "run", "wn:r", "--", "true", NULL);
    assert_int_equal(r.code, 0);
    if (strstr(r.err, "fencelock: waiting for 'wn:r' (held by pid ") == NULL)
        fail_msg("stderr: %s", r.err);
    fl(f, &r, "--ttl", "1500ms", "acquire", "wn:r", NULL);
    assert_int_equal(r.code, 0);
    fl(f, &r, "--verbose", "--wait", "10s", "run", "wn:r", "wn:s", "--", "true", NULL);
    assert_int_equal(r.code, 0);
    assert_true(r.ms >= 1000);
    assert_string_equal(r.err, "");
}

/* ---- usage ---- */

static void test_cli_kinds_bad_combinations_are_usage_errors(void **state)
{
    struct fixture *f = *state;
    static const char id[] = "0123456789abcdef0123456789abcdef01234567";
    static const struct {
        const char *args[24];
        const char *says; /* in the message */
    } cases[] = {
        {{"--permits", "2", "acquire", "a", "b", NULL}, "--permits takes one resource"},
        {{"--read", "acquire", "a", "b", NULL}, "--read takes one resource"},
        {{"--write", "run", "a", "b", "--", "true", NULL}, "--write takes one resource"},
        {{"--reentrant", "status", "a", "b", NULL}, "--reentrant takes one resource"},
        {{"--reentrant", "acquire", "a", "b", "c", NULL}, "--reentrant takes one resource"},
        {{"--read", "--write", "acquire", "a", NULL}, "--read and --write"},
        {{"--write", "--read", "status", "a", NULL}, "--read and --write"},
        {{"--read", "--permits", "2", "acquire", "a", NULL}, "--permits and --read"},
        {{"--permits", "2", "--reentrant", "run", "a", "--", "true", NULL}, "--permits and --reentrant"},
        {{"--write", "--reentrant", "acquire", "a", NULL}, "--write and --reentrant"},
        {{"--permits", "2", "release", "a", id, NULL}, "--permits applies to"},
        {{"--reentrant", "acquire", "a", "not-an-id", NULL}, "is not a lock id"},
        {{"acquire", "a", id, NULL}, "looks like a lock id"},
        {{"acquire", "a", "b", "a", NULL}, "given twice"},
        {{"release", "a", "b", "a", id, NULL}, "given twice"},
        {{"release", "a", "b", NULL}, "lock id"},
        {{"extend", id, NULL}, "wrong number of arguments"},
        {{"run", "a", "b", "--", NULL}, "wrong number of arguments"},
        {{"run", "--", "true", NULL}, "wrong number of arguments"},
        {{"status", "a", "b", "--", "c", NULL}, "unexpected '--'"},
        {{"acquire", "1", "2", "3", "4", "5", "6", "7", "8", "9", "10", "11", "12", "13", "14", "15", "16",
          "17", NULL},
         "at most 16 resources"},
        {{"release", "1",  "2",  "3",  "4",  "5",  "6",  "7",  "8", "9",
          "10",      "11", "12", "13", "14", "15", "16", "17", id,  NULL},
         "at most 16 resources"},
    };
    struct res r;
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        run_args(f, &r, NULL, cases[i].args);
        if (r.code != X_USAGE || strstr(r.err, cases[i].says) == NULL)
            fail_msg("case %zu: exit %d (not %d), stderr '%s' (should say '%s')", i, r.code, X_USAGE, r.err,
                     cases[i].says);
        assert_string_equal(r.out, "");
        assert_true(r.ms < 5000); /* never reaches for a node */
    }
    /* Without "--", run takes one resource and the rest is the command (the
     * form fencelock always had): here `b` is a command, not a resource.
     * The node is unreachable, so the run fails before it: what matters is
     * that it is not a usage error. */
    fl(f, &r, "--wait", "0", "--retry-count", "0", "run", "a", "b", "c", NULL);
    assert_int_equal(r.code, 69);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_cli_kinds_overlapping_sets_never_share_a_resource, setup3,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_cli_kinds_acquire_extend_release_a_set, setup3, teardown),
        cmocka_unit_test_setup_teardown(test_cli_kinds_run_keeps_a_set_alive, setup3, teardown),
        cmocka_unit_test_setup_teardown(test_cli_kinds_readers_overlap_writer_excludes, setup3, teardown),
        cmocka_unit_test_setup_teardown(test_cli_kinds_status_of_each_kind, setup3, teardown),
        cmocka_unit_test_setup_teardown(test_cli_kinds_status_names_readers, setup3, teardown),
        cmocka_unit_test_setup_teardown(test_cli_kinds_nested_run_joins_only_a_reentrant_hold, setup3,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_cli_kinds_fair_run_waits_in_line, setup3, teardown),
        cmocka_unit_test_setup_teardown(test_cli_kinds_run_waits_in_line_by_default, setup3, teardown),
        cmocka_unit_test_setup_teardown(test_cli_kinds_acquire_waits_in_line_by_default, setup3, teardown),
        cmocka_unit_test_setup_teardown(test_cli_kinds_run_says_what_it_waits_for, setup3, teardown),
        cmocka_unit_test_setup_teardown(test_cli_kinds_bad_combinations_are_usage_errors, setup_none,
                                        teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
