/* fencelock elect and fencelock leader against real redis-server
 * processes: the epoch in the command's environment, one leader's command
 * at a time with the handover at resignation, a leader stopped past its
 * TTL (SIGSTOP) deposed and its command stopped once it goes on, --again,
 * leader --watch told of each change, and the arguments refused.
 *
 * The commands the elections run leave an oracle: each mark is a line
 * "WORD EPOCH MS" appended to $T_LOG by this test program itself (run as
 * `$T_MARK WORD`), with MS read from CLOCK_MONOTONIC, the clock the test
 * reads too. */
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>
#include <jansson.h>

#include "cli_harness.h"
#include "fence_probe.h"
#include "proc.h"
#include "redis_harness.h"
#include <lockcore/lockcore.h>

#define RUN_TIMEOUT_MS 20000

/* Exit codes of fencelock (docs/cli.md). */
enum { X_USAGE = 64, X_UNREACHABLE = 69, X_NOT_HELD = 75, X_LOST = 79 };

static char self_exe[512];

static int setup(void **state)
{
    struct fixture *f = fx_new(3, "cli-elect");
    f->run_timeout_ms = RUN_TIMEOUT_MS;
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    return fx_teardown(state);
}

static long long mono_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* `$T_MARK WORD` (this program, with T_LOG set): the oracle's line. One write with
 * O_APPEND, so that the lines of several commands never mix. */
static int mark(const char *word)
{
    const char *log = getenv("T_LOG"), *epoch = getenv("FENCELOCK_EPOCH");
    char line[128];
    int n = snprintf(line, sizeof(line), "%s %s %lld\n", word, epoch ? epoch : "0", mono_ms());
    int fd = log ? open(log, O_WRONLY | O_APPEND | O_CREAT, 0644) : -1;
    if (fd < 0 || write(fd, line, (size_t)n) != n)
        return 1;
    close(fd);
    return 0;
}

/* The environment of an election's command: T_LOG (the oracle), T_MARK
 * (this program), T_FL (fencelock), T_DIR (the test's directory). */
struct oracle {
    char log[300];
    char v[4][700];
    char *env[5];
};

static void oracle(struct fixture *f, const char *name, struct oracle *o)
{
    path_in(f, name, o->log, sizeof(o->log));
    unlink(o->log);
    snprintf(o->v[0], sizeof(o->v[0]), "T_LOG=%s", o->log);
    snprintf(o->v[1], sizeof(o->v[1]), "T_MARK=%s", self_exe);
    snprintf(o->v[2], sizeof(o->v[2]), "T_FL=%s", fencelock_bin());
    snprintf(o->v[3], sizeof(o->v[3]), "T_DIR=%s", f->dir);
    for (int i = 0; i < 4; i++)
        o->env[i] = o->v[i];
    o->env[4] = NULL;
}

struct mark_line {
    char word[8];
    unsigned long long epoch;
    long long ms;
};

/* The oracle's lines into m[0..cap); returns how many. */
static int read_marks(const struct oracle *o, struct mark_line *m, int cap)
{
    static char text[65536];
    read_file(o->log, text, sizeof(text));
    int n = 0;
    for (char *save = NULL, *line = strtok_r(text, "\n", &save); line && n < cap;
         line = strtok_r(NULL, "\n", &save)) {
        if (sscanf(line, "%7s %llu %lld", m[n].word, &m[n].epoch, &m[n].ms) == 3)
            n++;
    }
    return n;
}

/* The first mark WORD of epoch (0: of any epoch other than not_epoch), or
 * NULL. */
static const struct mark_line *find_mark(const struct mark_line *m, int n, const char *word,
                                         unsigned long long epoch, unsigned long long not_epoch)
{
    for (int i = 0; i < n; i++)
        if (strcmp(m[i].word, word) == 0 && (epoch ? m[i].epoch == epoch : m[i].epoch != not_epoch))
            return &m[i];
    return NULL;
}

/* Wait up to ms for the oracle to hold a mark WORD (of epoch, or of any
 * epoch but not_epoch); returns it (copied), failing the test if none. */
static struct mark_line await_mark(const struct oracle *o, const char *word, unsigned long long epoch,
                                   unsigned long long not_epoch, long ms)
{
    static struct mark_line m[4096];
    long long end = hp_now_ms() + ms;
    for (;;) {
        int n = read_marks(o, m, 4096);
        const struct mark_line *hit = find_mark(m, n, word, epoch, not_epoch);
        if (hit != NULL)
            return *hit;
        if (hp_now_ms() >= end)
            fail_msg("no '%s' mark within %ld ms in %s", word, ms, o->log);
        hp_sleep_ms(10);
    }
}

/* `fencelock leader NAME`, which must print one reading. */
static json_t *leader_now(struct fixture *f, const char *name, int *code)
{
    struct res r;
    fl(f, &r, "leader", name, NULL);
    *code = r.code;
    return one_json_line(&r);
}

/* ---- elect ---- */

/* The command runs while elected, with the epoch (which is the token, and
 * the resource's fence) in its environment; fencelock leader, run from the
 * command, names the same epoch and the value; when the command ends the
 * leader resigns and fencelock exits with its status. */
static void test_cli_elect_runs_the_command_with_its_epoch(void **state)
{
    struct fixture *f = *state;
    struct oracle o;
    oracle(f, "marks-env", &o);
    struct res r;
    fl_env(f, &r, o.env, "--ttl", "5s", "elect", "el:env", "--value", "10.0.0.7:8080", "--", "sh", "-c",
           "env | grep -E '^FENCELOCK_(EPOCH|TOKEN|RESOURCE|LOCK_ID|LOCK_KIND|VALID_UNTIL_MONO_MS)=' | sort "
           "> \"$T_DIR/env\"; \"$T_FL\" leader el:env > \"$T_DIR/leader\"; exit 7",
           NULL);
    assert_int_equal(r.code, 7);
    assert_string_equal(r.out, "");
    char got[4096], path[300];
    path_in(f, "env", path, sizeof(path));
    read_file(path, got, sizeof(got));
    unsigned long long epoch = 0, token = 0, until = 0;
    char id[41] = "", kind[16] = "", res[32] = "";
    if (sscanf(got,
               "FENCELOCK_EPOCH=%llu\nFENCELOCK_LOCK_ID=%40s\nFENCELOCK_LOCK_KIND=%15s\nFENCELOCK_RESOURCE=%"
               "31s\n"
               "FENCELOCK_TOKEN=%llu\nFENCELOCK_VALID_UNTIL_MONO_MS=%llu\n",
               &epoch, id, kind, res, &token, &until) != 6)
        fail_msg("environment: %s", got);
    assert_true(epoch > 0);
    assert_int_equal(epoch, token);
    assert_string_equal(kind, "leader");
    assert_string_equal(res, "el:env");
    assert_int_equal(tf_fence(f->rc, 0, "", "el:env"), epoch);

    /* What the leader command read while it led. */
    path_in(f, "leader", path, sizeof(path));
    char line[2048];
    read_file(path, line, sizeof(line));
    struct res lr = {.code = 0};
    snprintf(lr.out, sizeof(lr.out), "%s", line);
    json_t *j = one_json_line(&lr);
    has_keys(j, "name", "leader", "epoch", "value", "lock_id", "ttl_ms_left", "reachable", "quorum", NULL);
    assert_string_equal(jstr(j, "name"), "el:env");
    assert_true(jbool(j, "leader"));
    assert_int_equal(jint(j, "epoch"), epoch);
    assert_string_equal(jstr(j, "value"), "10.0.0.7:8080");
    assert_string_equal(jstr(j, "lock_id"), id);
    assert_true(jint(j, "ttl_ms_left") > 0 && jint(j, "ttl_ms_left") <= 5000);
    assert_int_equal(jint(j, "reachable"), 3);
    assert_int_equal(jint(j, "quorum"), 2);
    json_decref(j);

    /* Resigned: nobody leads, which is exit 79, with nulls. */
    int code;
    j = leader_now(f, "el:env", &code);
    assert_int_equal(code, X_LOST);
    has_keys(j, "name", "leader", "epoch", "value", "lock_id", "ttl_ms_left", "reachable", "quorum", NULL);
    assert_false(jbool(j, "leader"));
    assert_true(json_is_null(json_object_get(j, "epoch")));
    assert_true(json_is_null(json_object_get(j, "value")));
    json_decref(j);
}

/* Leadership is kept alive past its TTL while the command runs: an
 * observer still sees the same epoch and value after three TTLs. */
static void test_cli_elect_keeps_leading_past_its_ttl(void **state)
{
    struct fixture *f = *state;
    struct oracle o;
    oracle(f, "marks-ttl", &o);
    const char *args[] = {"--ttl", "600ms", "elect", "el:ttl", "--value",
                          "v",     "--",    "sh",    "-c",     "\"$T_MARK\" start; sleep 2",
                          NULL};
    struct child ch;
    spawn(f, &ch, o.env, args);
    struct mark_line s = await_mark(&o, "start", 0, 0, 5000);
    hp_sleep_ms(1800);
    int code;
    json_t *j = leader_now(f, "el:ttl", &code);
    assert_int_equal(code, 0);
    assert_int_equal(jint(j, "epoch"), s.epoch);
    assert_string_equal(jstr(j, "value"), "v");
    json_decref(j);
    struct res r;
    collect(&ch, RUN_TIMEOUT_MS, &r);
    assert_int_equal(r.code, 0);
    assert_string_equal(r.err, "");
}

/* Three candidates, each started once the one before is in line: their
 * commands run one at a time, in the order they asked, each epoch larger,
 * and each next one starts as soon as the command before exits (the
 * resignation hands over), well before the 10 s TTL. */
static void test_cli_elect_one_command_at_a_time_handed_over_at_once(void **state)
{
    struct fixture *f = *state;
    enum { K = 3 };
    struct oracle o;
    oracle(f, "marks-order", &o);
    const char *args[] = {"--ttl", "10s", "elect", "el:order",
                          "--",    "sh",  "-c",    "\"$T_MARK\" start; sleep 0.4; \"$T_MARK\" stop",
                          NULL};
    struct child ch[K];
    for (int i = 0; i < K; i++) {
        spawn(f, &ch[i], o.env, args);
        /* In line (or leading) before the next asks. */
        hp_sleep_ms(i == 0 ? 0 : 150);
        if (i == 0)
            await_mark(&o, "start", 0, 0, 5000);
    }
    for (int i = 0; i < K; i++) {
        struct res r;
        collect(&ch[i], RUN_TIMEOUT_MS, &r);
        if (r.code != 0)
            fail_msg("candidate %d exited %d: %s", i, r.code, r.err);
    }
    struct mark_line m[16];
    int n = read_marks(&o, m, 16);
    assert_int_equal(n, 2 * K);
    for (int i = 0; i < K; i++) {
        /* start, stop of one epoch, then the next one's */
        const struct mark_line *s = &m[2 * i], *e = &m[2 * i + 1];
        assert_string_equal(s->word, "start");
        assert_string_equal(e->word, "stop");
        assert_int_equal(s->epoch, e->epoch);
        assert_true(e->ms - s->ms >= 400);
        if (i > 0) {
            const struct mark_line *prev = &m[2 * i - 1];
            assert_true(s->epoch > prev->epoch);
            assert_true(s->ms >= prev->ms);
            if (s->ms - prev->ms > 1500)
                fail_msg("candidate %d started %lld ms after the one before stopped (TTL 10 s)", i,
                         s->ms - prev->ms);
        }
    }
}

/* The leading fencelock is stopped (SIGSTOP) past its TTL while its
 * command goes on: the next candidate is elected with a larger epoch, and
 * when the stopped fencelock goes on it stops its command at once (79),
 * whose last mark is then within a moment of SIGCONT. */
static void test_cli_elect_deposed_leader_stops_its_command(void **state)
{
    struct fixture *f = *state;
    struct oracle o;
    oracle(f, "marks-zombie", &o);
    const char *ticking = "\"$T_MARK\" start; trap '\"$T_MARK\" stop; exit 0' TERM; "
                          "while :; do \"$T_MARK\" tick; sleep 0.05; done";
    const char *a_args[] = {"--ttl", "1s", "--kill-after", "2s", "elect", "el:zombie", "--value",
                            "A",     "--", "sh",           "-c", ticking, NULL};
    const char *b_args[] = {"--ttl", "1s", "elect", "el:zombie", "--value", "B",
                            "--",    "sh", "-c",    ticking,     NULL};
    struct child a, b;
    spawn(f, &a, o.env, a_args);
    struct mark_line a_start = await_mark(&o, "start", 0, 0, 5000);
    spawn(f, &b, o.env, b_args);
    hp_sleep_ms(300); /* b in line */
    assert_int_equal(kill(a.pid, SIGSTOP), 0);
    assert_int_equal(hp__wait_stopped(a.pid, 2000), 0);
    long long stopped = mono_ms();
    struct mark_line b_start = await_mark(&o, "start", 0, a_start.epoch, 5000);
    assert_true(b_start.epoch > a_start.epoch);
    /* b was elected only once a's leadership had run out: at least the
     * part of a TTL a had left when it stopped (it extends at a third). */
    assert_true(b_start.ms - stopped >= 300);
    int code;
    json_t *j = leader_now(f, "el:zombie", &code);
    assert_int_equal(code, 0);
    assert_int_equal(jint(j, "epoch"), b_start.epoch);
    assert_string_equal(jstr(j, "value"), "B");
    json_decref(j);

    /* a's command ticked on, unaware, while its fencelock was stopped. */
    hp_sleep_ms(300);
    long long cont = mono_ms();
    assert_int_equal(kill(a.pid, SIGCONT), 0);
    struct res r;
    collect(&a, RUN_TIMEOUT_MS, &r);
    assert_int_equal(r.code, X_LOST);
    if (strstr(r.err, "leadership of 'el:zombie' lost: ") == NULL ||
        strstr(r.err, "was still running") == NULL)
        fail_msg("stderr: %s", r.err);
    static struct mark_line m[4096];
    int n = read_marks(&o, m, 4096);
    const struct mark_line *a_stop = find_mark(m, n, "stop", a_start.epoch, 0);
    assert_non_null(a_stop);
    long long last_a = 0;
    for (int i = 0; i < n; i++)
        if (m[i].epoch == a_start.epoch && m[i].ms > last_a)
            last_a = m[i].ms;
    if (a_stop->ms - cont > 500 || last_a > a_stop->ms)
        fail_msg("a's command stopped %lld ms after SIGCONT, last wrote at %+lld ms", a_stop->ms - cont,
                 last_a - cont);
    /* It had ticked during the stop: that is what the epoch is for. */
    int during = 0;
    for (int i = 0; i < n; i++)
        during += m[i].epoch == a_start.epoch && m[i].ms > b_start.ms && m[i].ms < cont;
    assert_true(during > 0);

    /* b still leads; SIGTERM reaches its command, which ends it. */
    j = leader_now(f, "el:zombie", &code);
    assert_int_equal(code, 0);
    assert_int_equal(jint(j, "epoch"), b_start.epoch);
    json_decref(j);
    assert_int_equal(kill(b.pid, SIGTERM), 0);
    collect(&b, RUN_TIMEOUT_MS, &r);
    assert_int_equal(r.code, 0); /* the command's own status: its trap exits 0 */
    await_mark(&o, "stop", b_start.epoch, 0, 1000);
    j = leader_now(f, "el:zombie", &code);
    assert_int_equal(code, X_LOST);
    json_decref(j);
}

/* --again: deposed while its command ran, the candidate campaigns again,
 * waits in line behind the new leader, and runs its command anew once
 * elected, with a larger epoch; when that command exits on its own,
 * fencelock resigns and exits with its status. */
static void test_cli_elect_again_campaigns_after_a_loss(void **state)
{
    struct fixture *f = *state;
    struct oracle o;
    oracle(f, "marks-again", &o);
    const char *a_cmd = "\"$T_MARK\" start; if [ -e \"$T_DIR/again\" ]; then \"$T_MARK\" stop; exit 3; fi; "
                        "touch \"$T_DIR/again\"; trap '\"$T_MARK\" stop; exit 0' TERM; "
                        "while :; do sleep 0.05; done";
    const char *a_args[] = {"--ttl", "1s", "elect", "el:again", "--again", "--", "sh", "-c", a_cmd, NULL};
    const char *b_args[] = {"--ttl", "1s", "elect", "el:again",
                            "--",    "sh", "-c",    "\"$T_MARK\" start; sleep 1; \"$T_MARK\" stop",
                            NULL};
    char flag[300];
    path_in(f, "again", flag, sizeof(flag));
    unlink(flag);
    struct child a, b;
    spawn(f, &a, o.env, a_args);
    struct mark_line a1 = await_mark(&o, "start", 0, 0, 5000);
    spawn(f, &b, o.env, b_args);
    hp_sleep_ms(300);
    assert_int_equal(kill(a.pid, SIGSTOP), 0);
    assert_int_equal(hp__wait_stopped(a.pid, 2000), 0);
    struct mark_line b1 = await_mark(&o, "start", 0, a1.epoch, 5000);
    assert_int_equal(kill(a.pid, SIGCONT), 0);
    struct res r;
    collect(&b, RUN_TIMEOUT_MS, &r);
    assert_int_equal(r.code, 0);
    collect(&a, RUN_TIMEOUT_MS, &r);
    assert_int_equal(r.code, 3); /* its second command's own status */
    assert_non_null(strstr(r.err, "campaigning again"));

    static struct mark_line m[64];
    int n = read_marks(&o, m, 64);
    const struct mark_line *a1_stop = find_mark(m, n, "stop", a1.epoch, 0);
    const struct mark_line *b1_stop = find_mark(m, n, "stop", b1.epoch, 0);
    assert_non_null(a1_stop);
    assert_non_null(b1_stop);
    /* The third leadership: a's again, after b's. */
    const struct mark_line *a2 = NULL;
    for (int i = 0; i < n; i++)
        if (strcmp(m[i].word, "start") == 0 && m[i].epoch != a1.epoch && m[i].epoch != b1.epoch)
            a2 = &m[i];
    assert_non_null(a2);
    assert_true(a1.epoch < b1.epoch && b1.epoch < a2->epoch);
    assert_true(a2->ms >= b1_stop->ms);
    assert_true(a2->ms - b1_stop->ms < 1000); /* b resigned: handed over */
    int code;
    json_t *j = leader_now(f, "el:again", &code);
    assert_int_equal(code, X_LOST);
    json_decref(j);
}

/* --wait bounds the campaign (75, as run's "not acquired"); a signal while
 * in line ends the campaign and leaves the line (128 + N). */
static void test_cli_elect_wait_and_signals_while_in_line(void **state)
{
    struct fixture *f = *state;
    struct oracle o;
    oracle(f, "marks-wait", &o);
    const char *lead_args[] = {
        "--ttl", "10s", "elect", "el:wait", "--", "sh", "-c", "\"$T_MARK\" start; sleep 3", NULL};
    struct child lead;
    spawn(f, &lead, o.env, lead_args);
    await_mark(&o, "start", 0, 0, 5000);
    struct res r;
    fl(f, &r, "--wait", "0", "elect", "el:wait", "--", "true", NULL);
    assert_int_equal(r.code, X_NOT_HELD);
    assert_true(r.ms < 3000);
    fl(f, &r, "--wait", "400ms", "elect", "el:wait", "--", "true", NULL);
    assert_int_equal(r.code, X_NOT_HELD);
    assert_true(r.ms >= 400 && r.ms < 3000);
    assert_true(strlen(r.err) > 10);

    const char *waiting[] = {"elect", "el:wait", "--", "true", NULL};
    struct child w;
    spawn(f, &w, NULL, waiting);
    hp_sleep_ms(300);
    assert_int_equal(kill(w.pid, SIGTERM), 0);
    collect(&w, 3000, &r);
    assert_int_equal(r.code, 128 + SIGTERM);
    assert_non_null(strstr(r.err, "left the line"));
    /* Only the leader's own place is left in line on every node (a holder
     * leaves the line when it releases): the signalled candidate's is
     * gone, well before it would lapse (queue_ttl_ms, 3 s). Read until
     * then: the nodes may not have run what fencelock sent before it
     * exited when the test asks. */
    int code;
    json_t *j = leader_now(f, "el:wait", &code);
    assert_int_equal(code, 0);
    char place[41], other[64] = "";
    acq_of(jstr(j, "lock_id"), place);
    json_decref(j);
    for (long long end = hp_now_ms() + 1000;; hp_sleep_ms(20)) {
        other[0] = '\0';
        for (int i = 0; i < 3; i++) {
            redisReply *z = rh_command(f->rc, i, "ZRANGE {el:wait}:waiters 0 -1");
            assert_non_null(z);
            for (size_t k = 0; k < z->elements; k++)
                if (strcmp(z->element[k]->str, place) != 0)
                    snprintf(other, sizeof(other), "%s", z->element[k]->str);
            freeReplyObject(z);
        }
        if (other[0] == '\0')
            break;
        if (hp_now_ms() >= end)
            fail_msg("%s still in line 1 s after it left (the leader's place is %s)", other, place);
    }
    collect(&lead, RUN_TIMEOUT_MS, &r);
    assert_int_equal(r.code, 0);
}

/* ---- leader ---- */

/* A majority that cannot be reached is 69 with nothing on stdout; --wait
 * waits for a leader to be elected. */
static void test_cli_leader_waits_and_says_when_no_majority_answers(void **state)
{
    struct fixture *f = *state;
    char nodes[1200];
    snprintf(nodes, sizeof(nodes), "FENCELOCK_NODES=127.0.0.1:1,127.0.0.1:2,%s", rh_url(f->rc, 0));
    char *env[] = {nodes, NULL};
    struct res r;
    fl_env(f, &r, env, "leader", "el:nobody", NULL);
    assert_int_equal(r.code, X_UNREACHABLE);
    assert_string_equal(r.out, "");
    assert_non_null(strstr(r.err, "1 of 3 nodes answered"));

    struct oracle o;
    oracle(f, "marks-waitleader", &o);
    const char *waiter[] = {"--wait", "5s", "leader", "el:later", NULL};
    struct child w;
    spawn(f, &w, NULL, waiter);
    hp_sleep_ms(400);
    const char *cand[] = {
        "elect", "el:later", "--value", "late", "--", "sh", "-c", "\"$T_MARK\" start; sleep 0.5", NULL};
    struct child e;
    spawn(f, &e, o.env, cand);
    collect(&w, RUN_TIMEOUT_MS, &r);
    assert_int_equal(r.code, 0);
    assert_true(r.ms >= 400);
    json_t *j = one_json_line(&r);
    assert_true(jbool(j, "leader"));
    assert_string_equal(jstr(j, "value"), "late");
    struct mark_line s = await_mark(&o, "start", 0, 0, 5000);
    assert_int_equal(jint(j, "epoch"), s.epoch);
    json_decref(j);
    collect(&e, RUN_TIMEOUT_MS, &r);
    assert_int_equal(r.code, 0);
    /* --wait that runs out with nobody: the reading, and 79. */
    fl(f, &r, "--wait", "300ms", "leader", "el:later", NULL);
    assert_int_equal(r.code, X_LOST);
    j = one_json_line(&r);
    assert_false(jbool(j, "leader"));
    json_decref(j);
}

/* The lines of a watch so far (each checked to be one JSON object). */
static int watch_lines(const char *path, json_t **out, int cap)
{
    static char text[65536];
    read_file(path, text, sizeof(text));
    int n = 0;
    for (char *save = NULL, *line = strtok_r(text, "\n", &save); line && n < cap;
         line = strtok_r(NULL, "\n", &save)) {
        json_error_t e;
        out[n] = json_loads(line, 0, &e);
        if (out[n] == NULL || !json_is_object(out[n]))
            fail_msg("watch printed '%s'", line);
        n++;
    }
    return n;
}

/* Wait up to ms for the watch to have printed n lines; returns line n-1
 * (a new reference) and when it was seen. */
static json_t *await_line(const char *path, int n, long ms, long long *seen)
{
    json_t *l[32];
    long long end = hp_now_ms() + ms;
    for (;;) {
        int got = watch_lines(path, l, 32);
        json_t *want = got >= n ? json_incref(l[n - 1]) : NULL;
        for (int i = 0; i < got; i++)
            json_decref(l[i]);
        if (want != NULL) {
            *seen = hp_now_ms();
            if (got > n)
                fail_msg("watch printed %d lines, %d expected", got, n);
            return want;
        }
        if (hp_now_ms() >= end)
            fail_msg("watch printed %d lines within %ld ms, %d expected", got, ms, n);
        hp_sleep_ms(5);
    }
}

static lockcore_client *lib_client(struct fixture *f)
{
    const char *urls[3];
    for (int i = 0; i < 3; i++)
        urls[i] = rh_url(f->rc, i);
    struct lockcore_options o;
    lockcore_options_init(&o);
    o.nodes = urls;
    o.n_nodes = 3;
    o.ttl_ms = 10000;
    lockcore_client *c = NULL;
    char err[256];
    if (lockcore_client_new(&o, &c, err, sizeof(err)) != 0)
        fail_msg("client: %s", err);
    return c;
}

/* leader --watch prints the reading, then one line for each change, each
 * within a moment of the change: a new leader, a new value (same epoch),
 * nobody, a leader elected with the command, nobody again; SIGTERM ends it
 * (exit 0). Unchanged readings (extensions) print nothing. */
static void test_cli_leader_watch_prints_each_change(void **state)
{
    struct fixture *f = *state;
    const char *args[] = {"--wait", "20s", "leader", "el:watch", "--watch", NULL};
    struct child w;
    spawn(f, &w, NULL, args);
    long long seen;
    json_t *j = await_line(w.out_path, 1, 5000, &seen);
    assert_false(jbool(j, "leader"));
    json_decref(j);

    lockcore_client *c = lib_client(f);
    struct lockcore_lock lead;
    long long t0 = hp_now_ms();
    assert_int_equal(lockcore_campaign(c, "el:watch", "v1", NULL, &lead), 0);
    j = await_line(w.out_path, 2, 2000, &seen);
    assert_true(seen - t0 < 1000);
    assert_true(jbool(j, "leader"));
    assert_int_equal(jint(j, "epoch"), lead.token);
    assert_string_equal(jstr(j, "value"), "v1");
    json_decref(j);

    t0 = hp_now_ms();
    assert_int_equal(lockcore_proclaim(c, &lead, "v2", 0), 0);
    j = await_line(w.out_path, 3, 2000, &seen);
    assert_true(seen - t0 < 1000);
    assert_int_equal(jint(j, "epoch"), lead.token);
    assert_string_equal(jstr(j, "value"), "v2");
    json_decref(j);

    /* An extension is no change. */
    assert_int_equal(lockcore_extend(c, &lead, 0), 0);
    hp_sleep_ms(300);
    json_t *l[32];
    int got = watch_lines(w.out_path, l, 32);
    for (int i = 0; i < got; i++)
        json_decref(l[i]);
    assert_int_equal(got, 3);

    t0 = hp_now_ms();
    assert_int_equal(lockcore_resign(c, &lead), 0);
    j = await_line(w.out_path, 4, 2000, &seen);
    assert_true(seen - t0 < 1000);
    assert_false(jbool(j, "leader"));
    json_decref(j);
    lockcore_client_free(c);

    struct oracle o;
    oracle(f, "marks-watch", &o);
    const char *cand[] = {
        "elect", "el:watch", "--value", "cli", "--", "sh", "-c", "\"$T_MARK\" start; sleep 0.5", NULL};
    struct child e;
    t0 = hp_now_ms();
    spawn(f, &e, o.env, cand);
    j = await_line(w.out_path, 5, 3000, &seen);
    assert_true(seen - t0 < 2000);
    assert_true(jbool(j, "leader"));
    assert_string_equal(jstr(j, "value"), "cli");
    struct mark_line s = await_mark(&o, "start", 0, 0, 5000);
    assert_int_equal(jint(j, "epoch"), s.epoch);
    assert_true(s.epoch > lead.token);
    json_decref(j);
    struct res r;
    collect(&e, RUN_TIMEOUT_MS, &r);
    assert_int_equal(r.code, 0);
    j = await_line(w.out_path, 6, 2000, &seen);
    assert_false(jbool(j, "leader"));
    json_decref(j);

    assert_int_equal(kill(w.pid, SIGTERM), 0);
    collect(&w, 3000, &r);
    assert_int_equal(r.code, 0);
    assert_string_equal(r.err, "");
}

/* ---- arguments ---- */

static void test_cli_elect_bad_arguments_are_usage_errors(void **state)
{
    struct fixture *f = *state;
    static char big[LOCKCORE_VALUE_MAX + 2];
    memset(big, 'v', sizeof(big) - 1);
    static const char *const cases[][10] = {
        {"elect", NULL},
        {"elect", "x", NULL},
        {"elect", "x", "--", NULL},
        {"elect", "a", "b", "--", "true", NULL},
        {"elect", "--read", "x", "--", "true", NULL},
        {"elect", "--reentrant", "x", "--", "true", NULL},
        {"elect", "--permits", "2", "x", "--", "true", NULL},
        {"elect", "--undo", "u", "x", "--", "true", NULL},
        {"elect", "--max-hold", "1s", "x", "--", "true", NULL},
        {"--no-notify", "elect", "x", "--", "true", NULL},
        {"--no-fencing", "elect", "x", "--", "true", NULL},
        {"--value", big, "elect", "x", "--", "true", NULL},
        {"--value", "v", "leader", "x", NULL},
        {"--again", "run", "x", "true", NULL},
        {"--watch", "status", "x", NULL},
        {"leader", NULL},
        {"leader", "a", "b", NULL},
        {"leader", "x", "--write", NULL},
    };
    struct res r;
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        struct child ch;
        spawn(f, &ch, NULL, cases[i]);
        collect(&ch, RUN_TIMEOUT_MS, &r);
        if (r.code != X_USAGE)
            fail_msg("case %zu (%s %s): exit %d, not %d: %s", i, cases[i][0] ? cases[i][0] : "",
                     cases[i][0] && cases[i][1] ? cases[i][1] : "", r.code, X_USAGE, r.err);
        assert_string_equal(r.out, "");
        assert_true(strlen(r.err) > 10);
        assert_true(r.ms < 5000);
    }
    static const char *const cmds[] = {"elect", "leader"};
    for (size_t i = 0; i < 2; i++) {
        fl(f, &r, cmds[i], "--help", NULL);
        assert_int_equal(r.code, 0);
        char want[64];
        snprintf(want, sizeof(want), "usage: fencelock [options] %s", cmds[i]);
        assert_non_null(strstr(r.out, want));
    }
    fl(f, &r, "--help", NULL);
    assert_non_null(strstr(r.out, "elect NAME"));
    assert_non_null(strstr(r.out, "leader NAME"));
}

int main(int argc, char **argv)
{
    /* Run by an election's command: one mark, no tests. */
    if (argc == 2 && getenv("T_LOG") != NULL && argv[1][0] != '-')
        return mark(argv[1]);
    ssize_t n = readlink("/proc/self/exe", self_exe, sizeof(self_exe) - 1);
    if (n <= 0)
        return 1;
    self_exe[n] = '\0';
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_cli_elect_runs_the_command_with_its_epoch),
        cmocka_unit_test(test_cli_elect_keeps_leading_past_its_ttl),
        cmocka_unit_test(test_cli_elect_one_command_at_a_time_handed_over_at_once),
        cmocka_unit_test(test_cli_elect_deposed_leader_stops_its_command),
        cmocka_unit_test(test_cli_elect_again_campaigns_after_a_loss),
        cmocka_unit_test(test_cli_elect_wait_and_signals_while_in_line),
        cmocka_unit_test(test_cli_leader_waits_and_says_when_no_majority_answers),
        cmocka_unit_test(test_cli_leader_watch_prints_each_change),
        cmocka_unit_test(test_cli_elect_bad_arguments_are_usage_errors),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
