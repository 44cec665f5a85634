/* Waiting without polling, and fair order: notified waiters in other
 * processes, a crashed holder, the fair lock's ticket order and its dead
 * waiters, SUBSCRIBE refused by an ACL, exponential backoff, and mutual
 * exclusion in every mode, against real redis-server processes.
 *
 * Children are forked from the test and end with _exit(): exit() would run
 * the testkit's atexit handler, which stops the nodes. */
#include <errno.h>
#include <inttypes.h>
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

#include "fault_proxy.h"
#include "proc.h"
#include "redis_harness.h"
#include <lockcore/lockcore.h>

struct fixture {
    struct rh_cluster *rc;
    unsigned n;
    const char *urls[5];
    char url_buf[5][256];
    char dir[256];
};

static int setup_n(void **state, unsigned n)
{
    struct fixture *f = calloc(1, sizeof(*f));
    assert_non_null(f);
    f->n = n;
    assert_int_equal(rh_cluster_start((int)n, NULL, &f->rc), 0);
    for (unsigned i = 0; i < n; i++) {
        snprintf(f->url_buf[i], sizeof(f->url_buf[i]), "%s", rh_url(f->rc, (int)i));
        f->urls[i] = f->url_buf[i];
    }
    assert_int_equal(rh_mkdtemp("wait", f->dir, sizeof(f->dir)), 0);
    *state = f;
    return 0;
}

static int setup3(void **state)
{
    return setup_n(state, 3);
}

static int setup5(void **state)
{
    return setup_n(state, 5);
}

static int teardown(void **state)
{
    struct fixture *f = *state;
    rh_cluster_free(f->rc);
    rh_rmtree(f->dir);
    free(f);
    return 0;
}

struct tuning {
    int wait_mode;
    uint64_t ttl_ms;
    uint64_t queue_ttl_ms;
    uint64_t wait_ms;
    int backoff;
    uint64_t retry_delay_ms, retry_delay_max_ms;
    int retry_count; /* 0 here means "no limit" */
    const char *const *urls;
};

static lockcore_client *client(struct fixture *f, const struct tuning *t)
{
    struct lockcore_options o;
    lockcore_options_init(&o);
    o.nodes = t->urls ? t->urls : f->urls;
    o.n_nodes = f->n;
    o.wait_mode = t->wait_mode;
    o.retry_count = t->retry_count ? t->retry_count : -1;
    if (t->ttl_ms)
        o.ttl_ms = t->ttl_ms;
    if (t->queue_ttl_ms)
        o.queue_ttl_ms = t->queue_ttl_ms;
    o.wait_ms = t->wait_ms ? t->wait_ms : 20000;
    o.backoff = t->backoff;
    if (t->retry_delay_ms)
        o.retry_delay_ms = t->retry_delay_ms;
    if (t->retry_delay_max_ms)
        o.retry_delay_max_ms = t->retry_delay_max_ms;
    lockcore_client *c = NULL;
    char err[256];
    if (lockcore_client_new(&o, &c, err, sizeof(err)) != 0) {
        fprintf(stderr, "client: %s\n", err);
        return NULL;
    }
    return c;
}

static uint64_t wall_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

/* Sum of a command's calls on every node (INFO commandstats). */
static long long calls(struct fixture *f, const char *cmd)
{
    long long total = 0;
    char needle[64];
    snprintf(needle, sizeof(needle), "cmdstat_%s:calls=", cmd);
    for (unsigned i = 0; i < f->n; i++) {
        redisReply *r = rh_command(f->rc, (int)i, "INFO commandstats");
        if (r == NULL)
            continue;
        if (r->type == REDIS_REPLY_STRING) {
            const char *p = strstr(r->str, needle);
            if (p != NULL)
                total += atoll(p + strlen(needle));
        }
        freeReplyObject(r);
    }
    return total;
}

/* A child that acquires `resource` and reports the wall ms of its grant on
 * a pipe (or 0 if it failed). */
static pid_t waiter(struct fixture *f, const struct tuning *t, const char *resource, int *rfd)
{
    int p[2];
    assert_int_equal(pipe(p), 0);
    fflush(NULL);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        close(p[0]);
        lockcore_client *c = client(f, t);
        struct lockcore_lock l;
        uint64_t at = 0;
        if (c != NULL && lockcore_acquire(c, resource, &l) == 0) {
            at = wall_ms();
            lockcore_release(c, &l);
        }
        ssize_t w = write(p[1], &at, sizeof(at));
        (void)w;
        lockcore_client_free(c);
        _exit(at ? 0 : 1);
    }
    close(p[1]);
    *rfd = p[0];
    return pid;
}

static uint64_t read_u64(int fd)
{
    uint64_t v = 0;
    ssize_t r = read(fd, &v, sizeof(v));
    close(fd);
    return r == sizeof(v) ? v : 0;
}

static void reap(pid_t pid)
{
    int status;
    if (hp_wait(pid, 20000, &status) != 0)
        hp_signal(pid, SIGKILL, 0);
}

/* Wait until n waiters sit in the queue of `resource` on node 0. */
static void await_queued(struct fixture *f, const char *resource, long long n)
{
    long long end = hp_now_ms() + 5000, have = -1;
    while (hp_now_ms() < end) {
        redisReply *r = rh_command(f->rc, 0, "ZCARD {%s}:waiters", resource);
        have = r && r->type == REDIS_REPLY_INTEGER ? r->integer : -1;
        if (r)
            freeReplyObject(r);
        if (have >= n)
            return;
        hp_sleep_ms(10);
    }
    fail_msg("%lld waiters queued on '%s', wanted %lld", have, resource, n);
}

/* ---- notified waiting ---- */

static void test_wait_notified_waiter_is_granted_at_the_release(void **state)
{
    struct fixture *f = *state;
    /* Long TTL, queue refresh and retry delay: only the notice can wake the
     * waiter soon (a polling one would sleep 5 s and more). */
    struct tuning t = {
        .wait_mode = LOCKCORE_WAIT_NOTIFY, .ttl_ms = 20000, .queue_ttl_ms = 30000, .retry_delay_ms = 5000};
    lockcore_client *c = client(f, &t);
    struct lockcore_lock held;
    assert_int_equal(lockcore_acquire(c, "notify", &held), 0);
    int fd;
    pid_t pid = waiter(f, &t, "notify", &fd);
    await_queued(f, "notify", 1);
    hp_sleep_ms(300);
    uint64_t released_at = wall_ms();
    assert_int_equal(lockcore_release(c, &held), 0);
    uint64_t granted_at = read_u64(fd);
    reap(pid);
    /* Granted after the release, long before any timer (10 s refresh,
     * 20 s TTL) could have woken it. */
    assert_true(granted_at >= released_at);
    assert_true(granted_at - released_at < 2000);
    lockcore_client_free(c);
}

/* A release names one waiter and tells only that waiter's client: on a
 * channel of its own, not one every waiting process listens to (16
 * processes on one resource used to wake 16 times per release per node). */
static void test_wait_notice_goes_to_the_named_client_only(void **state)
{
    struct fixture *f = *state;
    struct tuning t = {
        .wait_mode = LOCKCORE_WAIT_NOTIFY, .ttl_ms = 20000, .queue_ttl_ms = 30000, .retry_delay_ms = 5000};
    lockcore_client *c = client(f, &t);
    struct lockcore_lock held;
    assert_int_equal(lockcore_acquire(c, "herd", &held), 0);
    int fd[3];
    pid_t pid[3];
    for (int k = 0; k < 3; k++)
        pid[k] = waiter(f, &t, "herd", &fd[k]);
    await_queued(f, "herd", 3);
    /* Each waiting client listens on its own channel (it subscribes just
     * after it took its place). */
    redisReply *r = NULL;
    for (long long end = hp_now_ms() + 5000;;) {
        r = rh_command(f->rc, 0, "PUBSUB CHANNELS {herd}:released*");
        assert_non_null(r);
        assert_int_equal(r->type, REDIS_REPLY_ARRAY);
        if (r->elements >= 3 || hp_now_ms() > end)
            break;
        freeReplyObject(r);
        hp_sleep_ms(10);
    }
    assert_int_equal(r->elements, 3);
    for (size_t k = 0; k < r->elements; k++)
        assert_int_equal(r->element[k]->len, strlen("{herd}:released:") + 16);
    freeReplyObject(r);

    redisContext *spy = redisConnect("127.0.0.1", rh_port(f->rc, 0));
    assert_true(spy != NULL && spy->err == 0);
    struct timeval tv = {5, 0};
    redisSetTimeout(spy, tv);
    r = redisCommand(spy, "PSUBSCRIBE {herd}:released*");
    assert_non_null(r);
    freeReplyObject(r);
    assert_int_equal(lockcore_release(c, &held), 0);
    void *m = NULL;
    assert_int_equal(redisGetReply(spy, &m), REDIS_OK);
    r = m;
    /* pmessage, pattern, channel, the named waiter's lock id */
    assert_int_equal(r->type, REDIS_REPLY_ARRAY);
    assert_int_equal(r->elements, 4);
    const redisReply *chan = r->element[2], *who = r->element[3];
    assert_int_equal(who->len, LOCKCORE_ID_LEN);
    char want[64], named[LOCKCORE_ID_LEN + 1];
    snprintf(want, sizeof(want), "{herd}:released:%.16s", who->str);
    assert_string_equal(chan->str, want);
    snprintf(named, sizeof(named), "%s", who->str);
    freeReplyObject(r);
    /* Then the waiter behind it, on its own channel: try when the named
     * one's reservation (2 x 50 ms) ends. */
    assert_int_equal(redisGetReply(spy, &m), REDIS_OK);
    r = m;
    assert_int_equal(r->elements, 4);
    chan = r->element[2], who = r->element[3];
    assert_int_equal(who->len, LOCKCORE_ID_LEN + 4);
    assert_memory_not_equal(who->str, named, LOCKCORE_ID_LEN);
    assert_string_equal(who->str + LOCKCORE_ID_LEN, "+100");
    snprintf(want, sizeof(want), "{herd}:released:%.16s", who->str);
    assert_string_equal(chan->str, want);
    freeReplyObject(r);
    redisFree(spy);
    for (int k = 0; k < 3; k++) {
        assert_true(read_u64(fd[k]) > 0);
        reap(pid[k]);
    }
    lockcore_client_free(c);
}

/* A waiter granted on a majority is still queued where it was refused; its
 * release must take it out there too, or it stays first in that queue
 * (named, reserved for, waited behind) until its place lapses. */
static void test_wait_release_leaves_the_queue_where_refused(void **state)
{
    struct fixture *f = *state;
    struct tuning t = {
        .wait_mode = LOCKCORE_WAIT_NOTIFY, .ttl_ms = 20000, .queue_ttl_ms = 30000, .retry_delay_ms = 5000};
    lockcore_client *c = client(f, &t);
    struct lockcore_lock held;
    assert_int_equal(lockcore_acquire(c, "leave", &held), 0);
    int fd;
    pid_t pid = waiter(f, &t, "leave", &fd);
    await_queued(f, "leave", 1);
    /* Node 2 goes to somebody else: the waiter will be refused there. */
    assert_int_equal(rh_set(f->rc, 2, "leave", "ffffffffffffffffffffffffffffffffffffffff"), 0);
    assert_int_equal(lockcore_release(c, &held), 0);
    assert_true(read_u64(fd) > 0); /* granted on nodes 0 and 1, and released */
    reap(pid);
    redisReply *r = rh_command(f->rc, 2, "ZCARD {leave}:waiters");
    assert_non_null(r);
    assert_int_equal(r->type, REDIS_REPLY_INTEGER);
    assert_int_equal(r->integer, 0);
    freeReplyObject(r);
    lockcore_client_free(c);
}

/* The reservation a release makes for the waiter it names is the lock key
 * itself, set to the waiter's id: every other SET NX is refused without
 * looking anywhere else (a raw one as node-redlock sends, a polling
 * fencelock client's, a kind's), and the named waiter takes it over. The
 * waiter is stopped (SIGSTOP) while it is named, so the reservation is
 * looked at before it can claim it; the releaser's request timeout of 2 s
 * keeps it 4 s. */
static void test_wait_reservation_is_the_lock_key(void **state)
{
    struct fixture *f = *state;
    struct tuning t = {
        .wait_mode = LOCKCORE_WAIT_NOTIFY, .ttl_ms = 20000, .queue_ttl_ms = 30000, .retry_delay_ms = 5000};
    struct lockcore_options o;
    lockcore_options_init(&o);
    o.nodes = f->urls;
    o.n_nodes = f->n;
    o.wait_mode = LOCKCORE_WAIT_NOTIFY;
    o.request_timeout_ms = 2000;
    lockcore_client *c = NULL;
    assert_int_equal(lockcore_client_new(&o, &c, NULL, 0), 0);
    struct lockcore_lock held;
    assert_int_equal(lockcore_acquire(c, "resv", &held), 0);
    int fd;
    pid_t pid = waiter(f, &t, "resv", &fd);
    await_queued(f, "resv", 1);
    redisReply *r = rh_command(f->rc, 0, "ZRANGE {resv}:waiters 0 0");
    assert_true(r != NULL && r->type == REDIS_REPLY_ARRAY && r->elements == 1);
    char named[LOCKCORE_ID_LEN + 1];
    snprintf(named, sizeof(named), "%s", r->element[0]->str);
    freeReplyObject(r);
    assert_int_equal(hp_signal(pid, SIGSTOP, 0), 0);
    int released = lockcore_release(c, &held);

    /* What the others find, looked at before the waiter runs again; the
     * assertions come after SIGCONT, so that a failure leaves no stopped
     * process behind. */
    int reserved = 0, refused = 0;
    for (unsigned i = 0; i < f->n; i++) {
        redisReply *g = rh_command(f->rc, (int)i, "GET resv");
        reserved += g != NULL && g->type == REDIS_REPLY_STRING && strcmp(g->str, named) == 0;
        if (g != NULL)
            freeReplyObject(g);
        g = rh_command(f->rc, (int)i, "SET resv intruder NX PX 10000");
        refused += g != NULL && g->type == REDIS_REPLY_NIL;
        if (g != NULL)
            freeReplyObject(g);
    }
    struct lockcore_options po = o;
    po.wait_mode = LOCKCORE_WAIT_POLL;
    po.retry_count = 0;
    lockcore_client *poller = NULL;
    int made = lockcore_client_new(&po, &poller, NULL, 0);
    struct lockcore_lock l;
    int plain_rc = made == 0 ? lockcore_acquire(poller, "resv", &l) : made;
    int re_rc = made == 0 ? lockcore_reentrant_acquire(poller, "resv", NULL, &l) : made;

    /* Resumed, the waiter hears the notice and takes over what was kept
     * for it, long before the reservation would have lapsed. */
    uint64_t cont_at = wall_ms();
    assert_int_equal(hp_signal(pid, SIGCONT, 0), 0);
    uint64_t granted_at = read_u64(fd);
    reap(pid);
    assert_int_equal(released, 0);
    assert_int_equal(reserved, (int)f->n);
    assert_int_equal(refused, (int)f->n);
    assert_int_equal(plain_rc, LOCKCORE_ELOCKED);
    assert_int_equal(re_rc, LOCKCORE_ELOCKED);
    assert_true(granted_at >= cont_at);
    assert_true(granted_at - cont_at < 3000);
    lockcore_client_free(poller);
    lockcore_client_free(c);
}

/* The reentrant lock waits in the queue as a plain waiter does: it takes
 * its place, the release names it, and what it is granted is a reentrant
 * hold (count 1, its token kept for re-entries). Its retry delay of 5 s
 * would show if it polled; with one retry allowed, the attempt that only
 * takes its place must not use it up. The child reports its grant's wall
 * ms, its token, a re-entry's token and the hold count then. */
static void test_wait_reentrant_waiter_is_notified(void **state)
{
    struct fixture *f = *state;
    struct tuning t = {.wait_mode = LOCKCORE_WAIT_NOTIFY,
                       .ttl_ms = 20000,
                       .queue_ttl_ms = 30000,
                       .retry_delay_ms = 5000,
                       .retry_count = 1};
    lockcore_client *c = client(f, &t);
    struct lockcore_lock held;
    assert_int_equal(lockcore_acquire(c, "rq", &held), 0);
    int p[2];
    assert_int_equal(pipe(p), 0);
    fflush(NULL);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        close(p[0]);
        uint64_t out[4] = {0, 0, 0, 0};
        lockcore_client *w = client(f, &t);
        struct lockcore_lock a, b;
        struct lockcore_node_status st[3];
        if (w != NULL && lockcore_reentrant_acquire(w, "rq", NULL, &a) == 0) {
            out[0] = wall_ms();
            out[1] = a.token;
            if (lockcore_reentrant_acquire(w, "rq", a.id, &b) == 0) {
                out[2] = b.token;
                if (lockcore_reentrant_status(w, "rq", st, 3) == 3)
                    out[3] = st[0].holds;
                lockcore_release(w, &b);
            }
            lockcore_release(w, &a);
        }
        ssize_t wr = write(p[1], out, sizeof(out));
        (void)wr;
        lockcore_client_free(w);
        _exit(out[0] ? 0 : 1);
    }
    close(p[1]);
    await_queued(f, "rq", 1);
    hp_sleep_ms(300);
    uint64_t released_at = wall_ms();
    assert_int_equal(lockcore_release(c, &held), 0);
    uint64_t got[4] = {0, 0, 0, 0};
    ssize_t r = read(p[0], got, sizeof(got));
    close(p[0]);
    reap(pid);
    assert_int_equal(r, (ssize_t)sizeof(got));
    assert_true(got[0] >= released_at);
    assert_true(got[0] - released_at < 2000);
    assert_true(got[1] > held.token);
    assert_int_equal(got[2], got[1]);
    assert_int_equal(got[3], 2);
    lockcore_client_free(c);
}

static void test_wait_crashed_holder_costs_one_ttl_without_polling(void **state)
{
    struct fixture *f = *state;
    struct tuning t = {.wait_mode = LOCKCORE_WAIT_NOTIFY, .ttl_ms = 2000, .queue_ttl_ms = 30000};
    /* The holder: a child that acquires and is then killed with SIGKILL. */
    int p[2];
    assert_int_equal(pipe(p), 0);
    fflush(NULL);
    pid_t holder = fork();
    assert_true(holder >= 0);
    if (holder == 0) {
        lockcore_client *c = client(f, &t);
        struct lockcore_lock l;
        char ok = c != NULL && lockcore_acquire(c, "crash", &l) == 0 ? 'y' : 'n';
        ssize_t w = write(p[1], &ok, 1);
        (void)w;
        pause();
        _exit(0);
    }
    close(p[1]);
    char ok = 0;
    assert_int_equal(read(p[0], &ok, 1), 1);
    close(p[0]);
    assert_int_equal(ok, 'y');
    long long evals_before = calls(f, "evalsha") + calls(f, "eval");
    uint64_t killed_at = wall_ms();
    assert_int_equal(hp_signal(holder, SIGKILL, 1000), 0);

    lockcore_client *c = client(f, &t);
    struct lockcore_lock l;
    assert_int_equal(lockcore_acquire(c, "crash", &l), 0);
    uint64_t granted_at = wall_ms();
    long long evals = calls(f, "evalsha") + calls(f, "eval") - evals_before;
    /* One TTL (the holder's keys expire), plus slack; not TTL plus polling. */
    assert_true(granted_at - killed_at <= 2000 + 500);
    /* Per node: the first attempt, the queued one, the one at the holder's
     * expiry, the release of the rollbacks and the dequeue: a handful, where
     * polling every 200-300 ms for 2 s would be 20 and more. */
    assert_true(evals <= 8 * (long long)f->n);
    assert_int_equal(lockcore_release(c, &l), 0);
    lockcore_client_free(c);
}

/* ---- fair ---- */

#define FAIR_PROCS 16
#define FAIR_GRANTS 4

struct grant {
    uint64_t ticket_us;
    uint64_t start_ms;   /* wall ms when it asked */
    uint64_t granted_ms; /* wall ms when granted */
    uint64_t left_ms;    /* wall ms when it released */
    int proc;
};

static void fair_child(struct fixture *f, const struct tuning *t, int proc, const char *log)
{
    lockcore_client *c = client(f, t);
    FILE *fp = fopen(log, "a");
    if (c == NULL || fp == NULL)
        _exit(2);
    setvbuf(fp, NULL, _IONBF, 0);
    /* Connect first: a waiter counts from when its first attempt reaches
     * the nodes, and the first call of a process also opens connections. */
    struct lockcore_node_status st[5];
    lockcore_status(c, "fair", st, 5);
    for (int k = 0; k < FAIR_GRANTS; k++) {
        struct lockcore_lock l;
        uint64_t start = wall_ms();
        if (lockcore_acquire(c, "fair", &l) != 0)
            _exit(3);
        uint64_t got = wall_ms();
        hp_sleep_ms(2);
        uint64_t left = wall_ms();
        /* One line per grant, written before the release: lines of one
         * write() to an O_APPEND file do not interleave. */
        char line[160];
        int n = snprintf(line, sizeof(line), "%" PRIu64 " %" PRIu64 " %" PRIu64 " %" PRIu64 " %d\n", l.ticket,
                         start, got, left, proc);
        if (write(fileno(fp), line, (size_t)n) != n)
            _exit(4);
        lockcore_release(c, &l);
    }
    fclose(fp);
    lockcore_client_free(c);
    _exit(0);
}

static int load_grants(const char *log, struct grant *g, int cap)
{
    FILE *fp = fopen(log, "r");
    int n = 0;
    if (fp == NULL)
        return 0;
    while (n < cap && fscanf(fp, "%" SCNu64 " %" SCNu64 " %" SCNu64 " %" SCNu64 " %d", &g[n].ticket_us,
                             &g[n].start_ms, &g[n].granted_ms, &g[n].left_ms, &g[n].proc) == 5)
        n++;
    fclose(fp);
    return n;
}

/* No two grants overlap: sorted by grant time, each starts after the
 * previous one left. */
static int cmp_granted(const void *a, const void *b)
{
    const struct grant *x = a, *y = b;
    return x->granted_ms < y->granted_ms ? -1 : x->granted_ms > y->granted_ms;
}

static void check_exclusive(struct grant *g, int n)
{
    qsort(g, (size_t)n, sizeof(*g), cmp_granted);
    for (int i = 1; i < n; i++)
        if (g[i].granted_ms < g[i - 1].left_ms)
            fail_msg("grants overlap: proc %d held [%" PRIu64 ", %" PRIu64 "], proc %d granted at %" PRIu64,
                     g[i - 1].proc, g[i - 1].granted_ms, g[i - 1].left_ms, g[i].proc, g[i].granted_ms);
}

static void test_wait_fair_grants_in_ticket_order(void **state)
{
    struct fixture *f = *state;
    struct tuning t = {.wait_mode = LOCKCORE_WAIT_FAIR, .ttl_ms = 5000, .queue_ttl_ms = 3000};
    char log[300];
    snprintf(log, sizeof(log), "%s/fair.log", f->dir);
    pid_t pids[FAIR_PROCS];
    for (int p = 0; p < FAIR_PROCS; p++) {
        fflush(NULL);
        pids[p] = fork();
        assert_true(pids[p] >= 0);
        if (pids[p] == 0)
            fair_child(f, &t, p, log);
    }
    for (int p = 0; p < FAIR_PROCS; p++) {
        int status = -1;
        assert_int_equal(hp_wait(pids[p], 60000, &status), 0);
        assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    }
    struct grant g[FAIR_PROCS * FAIR_GRANTS];
    int n = load_grants(log, g, FAIR_PROCS * FAIR_GRANTS);
    assert_int_equal(n, FAIR_PROCS * FAIR_GRANTS);
    check_exclusive(g, n);
    /* Ticket order: once a waiter has taken its place (its first attempt
     * reached the nodes: within `reg` ms of asking), no grant goes to a
     * later ticket before it. Under valgrind or ASan, 16 processes on two
     * cores take several times longer for that first round trip. */
    uint64_t reg = 150;
    const char *preload = getenv("LD_PRELOAD");
    if (preload != NULL && strstr(preload, "vgpreload") != NULL)
        reg *= 10;
#ifdef __SANITIZE_ADDRESS__
    reg *= 4;
#endif
    for (int i = 0; i < n; i++)
        for (int j = i + 1; j < n; j++)
            if (g[j].ticket_us < g[i].ticket_us && g[j].start_ms + reg < g[i].granted_ms)
                fail_msg("proc %d (ticket %" PRIu64 ", asked at %" PRIu64 ") was granted at %" PRIu64
                         " after proc %d (ticket %" PRIu64 ") at %" PRIu64,
                         g[j].proc, g[j].ticket_us, g[j].start_ms, g[j].granted_ms, g[i].proc, g[i].ticket_us,
                         g[i].granted_ms);
}

static void test_wait_fair_dead_waiter_leaves_the_queue(void **state)
{
    struct fixture *f = *state;
    struct tuning t = {.wait_mode = LOCKCORE_WAIT_FAIR, .ttl_ms = 5000, .queue_ttl_ms = 1000};
    lockcore_client *c = client(f, &t);
    struct lockcore_lock held;
    assert_int_equal(lockcore_acquire(c, "dead", &held), 0);
    int fd;
    pid_t pid = waiter(f, &t, "dead", &fd);
    await_queued(f, "dead", 2); /* the holder keeps its place until it releases */
    assert_int_equal(hp_signal(pid, SIGKILL, 1000), 0);
    close(fd);
    uint64_t killed_at = wall_ms();
    assert_int_equal(lockcore_release(c, &held), 0);
    /* The dead waiter is first in line and the release names it: its
     * place lapses with its reservation (two request timeouts), and a
     * newcomer waits for that, and at most one refresh of its own place. */
    struct lockcore_lock l;
    assert_int_equal(lockcore_acquire(c, "dead", &l), 0);
    uint64_t took = wall_ms() - killed_at;
    assert_true(took >= 100);
    assert_true(took <= 1000 + 1000);
    assert_int_equal(lockcore_release(c, &l), 0);
    lockcore_client_free(c);
}

static struct lockcore_lock waited_lock;

static void on_code_wait(lockcore_client *c, int rc, const struct lockcore_lock *l, void *arg)
{
    (void)c;
    *(int *)arg = rc;
    if (rc == 0)
        waited_lock = *l;
}

/* A release that names a waiter who has died (stopped here, its place
 * still fresh) keeps the lock for it two request timeouts; the live waiter
 * behind it is told to try when that ends, and is granted then. Before, it
 * slept until its own place needed a refresh (queue_ttl_ms / 3: 10 s
 * here). Fair waiting keeps a slow named waiter's turn instead (the
 * order is its promise): there a dead one costs until its place lapses. */
static void test_wait_dead_named_waiter_costs_one_reservation(void **state)
{
    struct fixture *f = *state;
    static const int modes[] = {LOCKCORE_WAIT_NOTIFY, LOCKCORE_WAIT_FAIR};
    for (int m = 0; m < 2; m++) {
        /* Fair: a place of 900 ms, refreshed every 300. */
        uint64_t qttl = m == 1 ? 900 : 30000;
        char res[32];
        snprintf(res, sizeof(res), "deadhead-%d", m);
        struct tuning t = {
            .wait_mode = modes[m], .ttl_ms = 20000, .queue_ttl_ms = qttl, .retry_delay_ms = 5000};
        lockcore_client *c = client(f, &t);
        struct lockcore_lock held;
        assert_int_equal(lockcore_acquire(c, res, &held), 0);
        int fd1, fd2;
        pid_t first = waiter(f, &t, res, &fd1);
        await_queued(f, res, m == 1 ? 2 : 1); /* a fair holder keeps its place */
        pid_t second = waiter(f, &t, res, &fd2);
        await_queued(f, res, m == 1 ? 3 : 2);
        assert_int_equal(hp_signal(first, SIGSTOP, 0), 0);
        uint64_t released_at = wall_ms();
        int released = lockcore_release(c, &held);
        uint64_t granted_at = read_u64(fd2);
        reap(second);
        hp_signal(first, SIGKILL, 1000);
        close(fd1);
        assert_int_equal(released, 0);
        assert_true(granted_at >= released_at);
        /* Notified: the reservation is 100 ms (2 x 50 ms); allow for a
         * busy machine, far below the 10 s a refresh would take. Fair: the
         * dead one's place (900 ms) and one refresh (300 ms) at most. */
        if (m == 1 && granted_at - released_at < 100)
            fail_msg("fair: the waiter behind a paused one passed it %llu ms after the release",
                     (unsigned long long)(granted_at - released_at));
        if (granted_at - released_at > 2000)
            fail_msg("%s: the waiter behind a dead one was granted %llu ms after the release",
                     m ? "fair" : "notify", (unsigned long long)(granted_at - released_at));
        lockcore_client_free(c);
    }
}

/* A waiter in line behind another live waiter refreshes its place every
 * queue_ttl_ms / 3; those refreshes are not retries. With retry_count 3 it
 * used to give up after three of them (here 300 ms) while still in line. */
static void test_wait_refresh_in_line_is_not_a_retry(void **state)
{
    struct fixture *f = *state;
    struct tuning t = {.wait_mode = LOCKCORE_WAIT_NOTIFY, .ttl_ms = 20000, .queue_ttl_ms = 300};
    lockcore_client *c = client(f, &t);
    struct lockcore_lock held;
    assert_int_equal(lockcore_acquire(c, "line", &held), 0);
    int fd1, fd2;
    pid_t first = waiter(f, &t, "line", &fd1);
    await_queued(f, "line", 1);
    struct tuning t3 = t;
    t3.retry_count = 3;
    pid_t second = waiter(f, &t3, "line", &fd2);
    await_queued(f, "line", 2);
    hp_sleep_ms(1500); /* fifteen refreshes of its place */
    assert_int_equal(lockcore_release(c, &held), 0);
    uint64_t g1 = read_u64(fd1), g2 = read_u64(fd2);
    reap(first);
    reap(second);
    assert_true(g1 != 0);
    assert_true(g2 != 0); /* granted, not given up */
    assert_true(g2 >= g1);
    lockcore_client_free(c);
}

/* Connections subscribed to a channel on node 0 (CLIENT LIST: sub=N). */
static int subscribers(struct fixture *f)
{
    redisReply *r = rh_command(f->rc, 0, "CLIENT LIST");
    int n = 0;
    for (const char *p = r && r->type == REDIS_REPLY_STRING ? r->str : ""; (p = strstr(p, " sub=")) != NULL;
         p++)
        n += p[5] != '0';
    if (r)
        freeReplyObject(r);
    return n;
}

/* A client whose waits are over closes its subscriber connections once it
 * has had no waiter for queue_ttl_ms; it keeps them that long, for a
 * client that waits again soon. */
static void test_wait_idle_subscribers_are_closed(void **state)
{
    struct fixture *f = *state;
    struct tuning t = {.wait_mode = LOCKCORE_WAIT_NOTIFY, .ttl_ms = 20000, .queue_ttl_ms = 400};
    lockcore_client *holder = client(f, &t), *c = client(f, &t);
    struct lockcore_lock held, l;
    assert_int_equal(lockcore_acquire(holder, "idle", &held), 0);
    int rc = 1;
    assert_int_equal(lockcore_acquire_async(c, "idle", on_code_wait, &rc), 0);
    long long end = hp_now_ms() + 3000;
    while (subscribers(f) == 0 && hp_now_ms() < end)
        lockcore_run(c, 20);
    assert_int_equal(subscribers(f), 1);
    assert_int_equal(lockcore_release(holder, &held), 0);
    while (rc == 1 && hp_now_ms() < end)
        lockcore_run(c, 20);
    assert_int_equal(rc, 0);
    l = waited_lock;
    assert_int_equal(lockcore_release(c, &l), 0);
    assert_int_equal(subscribers(f), 1); /* kept a while */
    end = hp_now_ms() + 2000;
    while (subscribers(f) > 0 && hp_now_ms() < end)
        lockcore_run(c, 20);
    assert_int_equal(subscribers(f), 0);
    /* And it waits notified again as before. */
    assert_int_equal(lockcore_acquire(holder, "idle", &held), 0);
    rc = 1;
    assert_int_equal(lockcore_acquire_async(c, "idle", on_code_wait, &rc), 0);
    end = hp_now_ms() + 3000;
    while (subscribers(f) == 0 && hp_now_ms() < end)
        lockcore_run(c, 20);
    uint64_t released_at = lockcore_now_ms();
    assert_int_equal(lockcore_release(holder, &held), 0);
    while (rc == 1 && hp_now_ms() < end)
        lockcore_run(c, 20);
    assert_int_equal(rc, 0);
    assert_true(lockcore_now_ms() - released_at < 1000);
    l = waited_lock;
    assert_int_equal(lockcore_release(c, &l), 0);
    lockcore_client_free(c);
    lockcore_client_free(holder);
}

static long long queue_len(struct fixture *f, int node, const char *resource)
{
    redisReply *r = rh_command(f->rc, node, "ZCARD {%s}:waiters", resource);
    long long n = r && r->type == REDIS_REPLY_INTEGER ? r->integer : -1;
    if (r)
        freeReplyObject(r);
    return n;
}

struct outcome {
    int done, rc;
    uint64_t at_ms;
    struct lockcore_lock lock;
};

static void on_outcome(lockcore_client *c, int rc, const struct lockcore_lock *l, void *arg)
{
    (void)c;
    struct outcome *o = arg;
    o->done = 1;
    o->rc = rc;
    o->at_ms = lockcore_now_ms();
    o->lock = *l;
}

/* Two fair waiters whose queues disagree: A (the earlier ticket) reaches
 * only nodes 0 and 1, B only nodes 2 and 3, node 4 neither (2-2-1). Once
 * the network heals, A is first everywhere it is known and is granted at
 * its next attempt: no livelock, no waiting out a TTL or a queue place. */
static void test_wait_fair_split_queues_resolve_at_once(void **state)
{
    struct fixture *f = *state;
    struct fp_proxy *pa[5] = {0}, *pb[5] = {0};
    char ua[5][64], ub[5][64];
    const char *urls_a[5], *urls_b[5];
    for (int i = 0; i < 5; i++) {
        snprintf(ua[i], sizeof(ua[i]), "%s", rh_url(f->rc, i));
        snprintf(ub[i], sizeof(ub[i]), "%s", rh_url(f->rc, i));
        if (i >= 2) { /* A cannot reach 2, 3, 4 */
            assert_int_equal(fp_new(rh_port(f->rc, i), &pa[i]), 0);
            fp_set_hold(pa[i], FP_BOTH, 1);
            snprintf(ua[i], sizeof(ua[i]), "127.0.0.1:%d", fp_port(pa[i]));
        }
        if (i <= 1 || i == 4) { /* B cannot reach 0, 1, 4 */
            assert_int_equal(fp_new(rh_port(f->rc, i), &pb[i]), 0);
            fp_set_hold(pb[i], FP_BOTH, 1);
            snprintf(ub[i], sizeof(ub[i]), "127.0.0.1:%d", fp_port(pb[i]));
        }
        urls_a[i] = ua[i];
        urls_b[i] = ub[i];
    }
    struct tuning t = {.wait_mode = LOCKCORE_WAIT_FAIR,
                       .ttl_ms = 10000,
                       .queue_ttl_ms = 30000,
                       .retry_delay_ms = 100,
                       .wait_ms = 20000};
    t.urls = urls_a;
    lockcore_client *a = client(f, &t);
    t.urls = urls_b;
    lockcore_client *b = client(f, &t);
    struct outcome oa = {0}, ob = {0};
    assert_int_equal(lockcore_acquire_async(a, "split", on_outcome, &oa), 0);
    hp_sleep_ms(20);
    assert_int_equal(lockcore_acquire_async(b, "split", on_outcome, &ob), 0);
    /* Shorter than a node's stall limit (1 s): the held connections stay
     * open, so every attempt's rollback follows it to the node. (A closed
     * one could deliver a late attempt without its rollback, which would
     * hold the key until its TTL: Redlock's stray lock.) */
    uint64_t end = lockcore_now_ms() + 700;
    while (lockcore_now_ms() < end) {
        lockcore_run(a, 5);
        lockcore_run(b, 5);
    }
    assert_false(oa.done);
    assert_false(ob.done);
    /* The split: each waiter is known only where it could reach. */
    assert_int_equal(queue_len(f, 0, "split"), 1);
    assert_int_equal(queue_len(f, 1, "split"), 1);
    assert_int_equal(queue_len(f, 2, "split"), 1);
    assert_int_equal(queue_len(f, 3, "split"), 1);
    assert_true(queue_len(f, 4, "split") <= 0);

    uint64_t healed = lockcore_now_ms();
    for (int i = 0; i < 5; i++) {
        fp_set_hold(pa[i], FP_BOTH, 0);
        fp_set_hold(pb[i], FP_BOTH, 0);
    }
    /* One of them is granted at once. Usually A, the earlier ticket; B only
     * if its attempt reaches nodes 2-4 before A's held backlog does (A is
     * not queued there yet: a waiter counts from when it reaches a node). */
    end = lockcore_now_ms() + 8000;
    while (!oa.done && !ob.done && lockcore_now_ms() < end) {
        lockcore_run(a, 5);
        lockcore_run(b, 5);
    }
    assert_true(oa.done || ob.done);
    struct outcome *first = oa.done ? &oa : &ob, *second = oa.done ? &ob : &oa;
    lockcore_client *fc = oa.done ? a : b, *sc = oa.done ? b : a;
    assert_int_equal(first->rc, 0);
    assert_false(second->done); /* the other waits its turn */
    assert_true(first->at_ms - healed < 2000);
    assert_int_equal(lockcore_release(fc, &first->lock), 0);
    /* The release names the other, first in line now: granted soon after,
     * well before its 10 s refresh. */
    uint64_t released = lockcore_now_ms();
    end = released + 8000;
    while (!second->done && lockcore_now_ms() < end)
        lockcore_run(sc, 20);
    assert_true(second->done);
    assert_int_equal(second->rc, 0);
    assert_true(second->at_ms - released < 2000);
    assert_int_equal(lockcore_release(sc, &second->lock), 0);
    lockcore_client_free(a);
    lockcore_client_free(b);
    for (int i = 0; i < 5; i++) {
        fp_free(pa[i]);
        fp_free(pb[i]);
    }
}

/* ---- SUBSCRIBE refused ---- */

static void test_wait_subscribe_refused_falls_back_to_timers(void **state)
{
    struct fixture *f = *state;
    /* An ACL user with every command and key but no channel. */
    for (unsigned i = 0; i < f->n; i++) {
        redisReply *r = rh_command(f->rc, (int)i, "ACL SETUSER waiter on >pw ~* resetchannels +@all");
        assert_non_null(r);
        assert_int_not_equal(r->type, REDIS_REPLY_ERROR);
        freeReplyObject(r);
    }
    char urls[3][128];
    const char *nodes[3];
    for (int i = 0; i < 3; i++) {
        snprintf(urls[i], sizeof(urls[i]), "redis://waiter:pw@127.0.0.1:%d", rh_port(f->rc, i));
        nodes[i] = urls[i];
    }
    struct tuning t = {.wait_mode = LOCKCORE_WAIT_NOTIFY, .ttl_ms = 1000, .queue_ttl_ms = 600, .urls = nodes};
    lockcore_client *holder = client(f, &t);
    lockcore_client *c = client(f, &t);
    struct lockcore_lock held, l;
    assert_int_equal(lockcore_acquire(holder, "acl", &held), 0);
    /* The holder never releases: its lock runs out after its 1 s TTL. */
    uint64_t t0 = lockcore_now_ms();
    assert_int_equal(lockcore_acquire(c, "acl", &l), 0);
    uint64_t took = lockcore_now_ms() - t0;
    assert_non_null(lockcore_notify_error(c));
    assert_non_null(strstr(lockcore_notify_error(c), "SUBSCRIBE"));
    /* Granted by its timers once the holder's lock ran out. */
    assert_true(took >= 500);
    assert_true(took <= 3000);
    assert_int_equal(lockcore_release(c, &l), 0);
    lockcore_client_free(c);
    lockcore_client_free(holder);
}

/* ---- exponential backoff ---- */

static void test_wait_exponential_backoff_is_capped(void **state)
{
    struct fixture *f = *state;
    for (unsigned i = 0; i < f->n; i++)
        assert_int_equal(rh_set(f->rc, (int)i, "spin", "someone"), 0);
    struct tuning t = {.wait_mode = LOCKCORE_WAIT_POLL,
                       .backoff = LOCKCORE_BACKOFF_EXPONENTIAL,
                       .retry_delay_ms = 10,
                       .retry_delay_max_ms = 40,
                       .retry_count = 6,
                       .wait_ms = 60000};
    lockcore_client *c = client(f, &t);
    struct lockcore_lock l;
    uint64_t t0 = lockcore_now_ms();
    assert_int_equal(lockcore_acquire(c, "spin", &l), LOCKCORE_ELOCKED);
    uint64_t took = lockcore_now_ms() - t0;
    assert_int_equal(l.attempts, 7);
    /* Six waits of at most 10, 20, 40, 40, 40, 40 ms (full jitter), plus
     * seven round trips: far below six fixed delays of 200-300 ms. */
    assert_true(took <= 190 + 7 * 50);
    lockcore_client_free(c);
}

/* ---- mutual exclusion in every mode, many processes ---- */

static void test_wait_every_mode_excludes(void **state)
{
    struct fixture *f = *state;
    static const int modes[] = {LOCKCORE_WAIT_POLL, LOCKCORE_WAIT_NOTIFY, LOCKCORE_WAIT_FAIR};
    for (size_t m = 0; m < 3; m++) {
        struct tuning t = {.wait_mode = modes[m], .ttl_ms = 5000, .retry_delay_ms = 20};
        char log[300];
        snprintf(log, sizeof(log), "%s/mode%zu.log", f->dir, m);
        pid_t pids[6];
        for (int p = 0; p < 6; p++) {
            fflush(NULL);
            pids[p] = fork();
            assert_true(pids[p] >= 0);
            if (pids[p] == 0)
                fair_child(f, &t, p, log);
        }
        for (int p = 0; p < 6; p++) {
            int status = -1;
            assert_int_equal(hp_wait(pids[p], 60000, &status), 0);
            assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
        }
        struct grant g[6 * FAIR_GRANTS];
        int n = load_grants(log, g, 6 * FAIR_GRANTS);
        assert_int_equal(n, 6 * FAIR_GRANTS);
        check_exclusive(g, n);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_wait_notified_waiter_is_granted_at_the_release, setup3,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_wait_notice_goes_to_the_named_client_only, setup3, teardown),
        cmocka_unit_test_setup_teardown(test_wait_release_leaves_the_queue_where_refused, setup3, teardown),
        cmocka_unit_test_setup_teardown(test_wait_reservation_is_the_lock_key, setup3, teardown),
        cmocka_unit_test_setup_teardown(test_wait_reentrant_waiter_is_notified, setup3, teardown),
        cmocka_unit_test_setup_teardown(test_wait_crashed_holder_costs_one_ttl_without_polling, setup3,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_wait_fair_grants_in_ticket_order, setup3, teardown),
        cmocka_unit_test_setup_teardown(test_wait_fair_dead_waiter_leaves_the_queue, setup3, teardown),
        cmocka_unit_test_setup_teardown(test_wait_dead_named_waiter_costs_one_reservation, setup3, teardown),
        cmocka_unit_test_setup_teardown(test_wait_refresh_in_line_is_not_a_retry, setup3, teardown),
        cmocka_unit_test_setup_teardown(test_wait_idle_subscribers_are_closed, setup3, teardown),
        cmocka_unit_test_setup_teardown(test_wait_fair_split_queues_resolve_at_once, setup5, teardown),
        cmocka_unit_test_setup_teardown(test_wait_subscribe_refused_falls_back_to_timers, setup3, teardown),
        cmocka_unit_test_setup_teardown(test_wait_exponential_backoff_is_capped, setup3, teardown),
        cmocka_unit_test_setup_teardown(test_wait_every_mode_excludes, setup3, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
