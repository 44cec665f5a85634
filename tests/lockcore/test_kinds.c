/* The lock kinds against real redis-server nodes: the counting semaphore,
 * the multi-resource lock and the reentrant lock, each with many processes
 * (fork), paused holders, node restarts, and a checker over a shared log of
 * critical sections. */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "proc.h"
#include "fence_probe.h"
#include "redis_harness.h"
#include <lockcore/lockcore.h>

#define NODES 5

struct fixture {
    struct rh_cluster *rc;
    unsigned n;
    const char *urls[NODES];
    char url_buf[NODES][256];
    char dir[256];
    char log[300];
};

/* The acquisition a lock id belongs to: its attempt digits (the last six)
 * zeroed. A reentrant lock's key holds its owner, the acquisition of its
 * first hold; a writer's intent names its acquisition. */
static void acq_of(const char *id, char *out)
{
    memmove(out, id, 34); /* out may be id */
    memset(out + 34, '0', 6);
    out[40] = '\0';
}

static int setup(void **state)
{
    struct fixture *f = calloc(1, sizeof(*f));
    assert_non_null(f);
    struct rh_options ro;
    rh_options_init(&ro);
    ro.persistent = 1; /* restarts keep the locks (appendfsync always) */
    f->n = NODES;
    assert_int_equal(rh_cluster_start(NODES, &ro, &f->rc), 0);
    for (unsigned i = 0; i < f->n; i++) {
        snprintf(f->url_buf[i], sizeof(f->url_buf[i]), "%s", rh_url(f->rc, (int)i));
        f->urls[i] = f->url_buf[i];
    }
    assert_int_equal(rh_mkdtemp("kinds", f->dir, sizeof(f->dir)), 0);
    snprintf(f->log, sizeof(f->log), "%s/sections.log", f->dir);
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    struct fixture *f = *state;
    rh_cluster_free(f->rc);
    rh_rmtree(f->dir);
    free(f);
    return 0;
}

struct tune {
    uint64_t ttl_ms;
    int retry_count;
    uint64_t wait_ms;
    uint64_t request_timeout_ms; /* 0: 100 ms */
    uint64_t retry_delay_ms;     /* 0: 10 ms */
};

static void tune_options(const char *const *urls, unsigned n, const struct tune *t,
                         struct lockcore_options *o)
{
    lockcore_options_init(o);
    o->nodes = urls;
    o->n_nodes = n;
    o->ttl_ms = t && t->ttl_ms ? t->ttl_ms : 2000;
    o->retry_count = t ? t->retry_count : 0;
    o->retry_delay_ms = t && t->retry_delay_ms ? t->retry_delay_ms : 10;
    o->retry_jitter_ms = 30;
    o->wait_ms = t ? t->wait_ms : 0;
    o->request_timeout_ms = t && t->request_timeout_ms ? t->request_timeout_ms : 100;
}

static lockcore_client *client_new(const struct lockcore_options *o)
{
    lockcore_client *c = NULL;
    char err[256];
    if (lockcore_client_new(o, &c, err, sizeof(err)) != 0) {
        fprintf(stderr, "client: %s\n", err);
        return NULL;
    }
    return c;
}

static lockcore_client *client_on(const char *const *urls, unsigned n, const struct tune *t)
{
    struct lockcore_options o;
    tune_options(urls, n, t, &o);
    return client_new(&o);
}

static uint64_t now_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000u + (uint64_t)ts.tv_nsec / 1000u;
}

/* ---- the shared log and its checker ----
 * One line per critical section, appended with one write() to a file
 * opened O_APPEND by every process: "I <res> <who> <enter_us> <end_us>
 * <token>". end_us is when the holder left, or when its lease ran out if
 * that came first (a paused holder): the time it held a valid lease. */

static void log_section(const char *path, const char *res, int who, uint64_t enter, uint64_t end,
                        uint64_t token)
{
    char line[700];
    int len = snprintf(line, sizeof(line), "I %s %d %llu %llu %llu\n", res, who, (unsigned long long)enter,
                       (unsigned long long)end, (unsigned long long)token);
    int fd = open(path, O_WRONLY | O_APPEND | O_CREAT, 0644);
    if (fd >= 0) {
        if (write(fd, line, (size_t)len) != len)
            perror("log write");
        close(fd);
    }
}

/* The end of a section: now, or the lease's end if that came first. */
static uint64_t section_end(const struct lockcore_lock *l)
{
    uint64_t t = now_us(), until = l->valid_until_ms * 1000u;
    return t < until ? t : until;
}

struct section {
    char res[128];
    int who;
    uint64_t enter, end, token;
};

static size_t read_log(const char *path, struct section *s, size_t cap)
{
    FILE *fp = fopen(path, "r");
    size_t n = 0;
    if (fp == NULL)
        return 0;
    char line[800];
    while (n < cap && fgets(line, sizeof(line), fp) != NULL) {
        unsigned long long a, b, t;
        if (sscanf(line, "I %127s %d %llu %llu %llu", s[n].res, &s[n].who, &a, &b, &t) == 5) {
            s[n].enter = a;
            s[n].end = b;
            s[n].token = t;
            n++;
        }
    }
    fclose(fp);
    return n;
}

/* The most sections whose res starts with prefix that overlap at any time
 * (a section that ends when another begins does not overlap it). */
static unsigned max_overlap(const struct section *s, size_t n, const char *prefix)
{
    unsigned best = 0;
    for (size_t i = 0; i < n; i++) {
        if (strncmp(s[i].res, prefix, strlen(prefix)) != 0)
            continue;
        /* Sections open at s[i]'s start. */
        unsigned open = 0;
        for (size_t j = 0; j < n; j++)
            if (strncmp(s[j].res, prefix, strlen(prefix)) == 0 && s[j].enter <= s[i].enter &&
                s[j].end > s[i].enter)
                open++;
        if (open > best)
            best = open;
    }
    return best;
}

/* Tokens of one resource: unique, and larger for a section that began
 * after another ended (T1, T2 of docs/fencing.md). Returns the sections
 * checked; fails the test on a violation. */
static unsigned check_tokens(const struct section *s, size_t n, const char *res)
{
    unsigned count = 0;
    for (size_t i = 0; i < n; i++) {
        if (strcmp(s[i].res, res) != 0)
            continue;
        count++;
        assert_true(s[i].token > 0);
        for (size_t j = 0; j < n; j++) {
            if (j == i || strcmp(s[j].res, res) != 0)
                continue;
            if (s[i].token == s[j].token && s[i].who != s[j].who)
                fail_msg("%s: token %llu granted twice", res, (unsigned long long)s[i].token);
            if (s[i].end <= s[j].enter && s[i].token >= s[j].token)
                fail_msg("%s: token %llu after %llu", res, (unsigned long long)s[j].token,
                         (unsigned long long)s[i].token);
        }
    }
    return count;
}

/* The checker must be able to fail: a log with 4 overlapping sections of
 * a 3-permit room, and one with a token that goes back. */
static void test_kinds_checker_sees_overlap(void **state)
{
    struct fixture *f = *state;
    log_section(f->log, "r:permit:0", 1, 100, 200, 5);
    log_section(f->log, "r:permit:1", 2, 150, 250, 6);
    log_section(f->log, "r:permit:2", 3, 160, 260, 7);
    log_section(f->log, "r:permit:0", 4, 199, 300, 8);
    log_section(f->log, "r:permit:1", 5, 250, 300, 9);
    struct section s[8];
    size_t n = read_log(f->log, s, 8);
    assert_int_equal(n, 5);
    assert_int_equal(max_overlap(s, n, "r:permit:"), 4);
    assert_int_equal(max_overlap(s, n, "r:permit:1"), 1);
    assert_int_equal(check_tokens(s, n, "r:permit:0"), 2);
}

/* ---- processes ---- */

/* Fork a child that runs fn(arg, who) and _exits with its result: no
 * atexit handler of the test (which stops the nodes) runs in it. */
static pid_t spawn(int (*fn)(struct fixture *, int), struct fixture *f, int who)
{
    pid_t parent = getpid();
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        if (getppid() != parent)
            _exit(99);
        _exit(fn(f, who));
    }
    return pid;
}

/* Wait for every pid, up to deadline_ms in all; returns how many exited 0.
 * Those still running are killed. */
static int reap(pid_t *pids, int n, long deadline_ms)
{
    long long end = hp_now_ms() + deadline_ms;
    int ok = 0;
    for (int i = 0; i < n; i++) {
        int st = 0;
        long long left = end - hp_now_ms();
        int rc = hp_wait(pids[i], left > 0 ? (int)left : 1, &st);
        if (rc != 0) {
            fprintf(stderr, "child %d did not end in time\n", i);
            hp_signal(pids[i], SIGKILL, 1000);
            continue;
        }
        if (WIFEXITED(st) && WEXITSTATUS(st) == 0)
            ok++;
        else
            fprintf(stderr, "child %d: status %d\n", i, st);
    }
    return ok;
}

/* Wait until the log has at least n lines starting with prefix "R <who>"
 * (a ready mark), up to ms. */
static int wait_mark(const char *path, const char *mark, long ms)
{
    long long end = hp_now_ms() + ms;
    while (hp_now_ms() < end) {
        FILE *fp = fopen(path, "r");
        if (fp != NULL) {
            char line[800];
            while (fgets(line, sizeof(line), fp) != NULL) {
                if (strncmp(line, mark, strlen(mark)) == 0) {
                    fclose(fp);
                    return 0;
                }
            }
            fclose(fp);
        }
        hp_sleep_ms(10);
    }
    return -ETIMEDOUT;
}

static void mark(const char *path, const char *text)
{
    int fd = open(path, O_WRONLY | O_APPEND | O_CREAT, 0644);
    if (fd >= 0) {
        if (write(fd, text, strlen(text)) < 0)
            perror("mark");
        close(fd);
    }
}

/* ---- counting semaphore ---- */

#define ROOM "room-42"
#define ROOM_PERMITS 3
#define JOINERS 30

/* Seed 004's room: join (a permit), stay a moment, leave. */
static int sem_joiner(struct fixture *f, int who)
{
    struct tune t = {.ttl_ms = 2000, .retry_count = -1, .wait_ms = 40000};
    lockcore_client *c = client_on(f->urls, f->n, &t);
    if (c == NULL)
        return 2;
    struct lockcore_lock l;
    int rc = lockcore_sem_acquire(c, ROOM, ROOM_PERMITS, &l);
    if (rc != 0) {
        fprintf(stderr, "joiner %d: %s: %s\n", who, lockcore_strerror(rc), lockcore_errmsg(c));
        lockcore_client_free(c);
        return 3;
    }
    uint64_t enter = now_us();
    hp_sleep_ms(30);
    uint64_t end = section_end(&l);
    log_section(f->log, l.resource, who, enter, end, l.token);
    rc = (l.flags & LOCKCORE_LOCK_PERMIT) && strncmp(l.resource, ROOM ":permit:", 13) == 0 ? 0 : 4;
    lockcore_release(c, &l);
    lockcore_client_free(c);
    return rc;
}

/* Holds a permit, is stopped past its TTL by the test, and must find its
 * permit lost when it runs again: its section ends at its lease's end. */
static int sem_pauser(struct fixture *f, int who)
{
    struct tune t = {.ttl_ms = 500, .retry_count = -1, .wait_ms = 10000};
    lockcore_client *c = client_on(f->urls, f->n, &t);
    if (c == NULL)
        return 2;
    struct lockcore_lock l;
    if (lockcore_sem_acquire(c, ROOM, ROOM_PERMITS, &l) != 0)
        return 3;
    uint64_t enter = now_us();
    mark(f->log, "R pauser\n");
    hp_sleep_ms(2500); /* stopped in here for longer than the TTL */
    uint64_t end = section_end(&l);
    log_section(f->log, l.resource, who, enter, end, l.token);
    int lost = lockcore_remaining_ms(&l) == 0 && lockcore_extend(c, &l, 0) == LOCKCORE_ELOST;
    lockcore_client_free(c);
    return lost ? 0 : 5;
}

static void test_kinds_sem_room_of_three_with_faults(void **state)
{
    struct fixture *f = *state;
    pid_t pids[JOINERS + 1];
    pids[JOINERS] = spawn(sem_pauser, f, 1000);
    assert_int_equal(wait_mark(f->log, "R pauser", 10000), 0);
    assert_int_equal(kill(pids[JOINERS], SIGSTOP), 0);
    /* 30 join at once while one permit is held by a stopped process. */
    for (int i = 0; i < JOINERS; i++)
        pids[i] = spawn(sem_joiner, f, i);
    hp_sleep_ms(200);
    assert_int_equal(rh_restart(f->rc, 1, 1), 0);
    hp_sleep_ms(300);
    assert_int_equal(rh_restart(f->rc, 3, 1), 0);
    hp_sleep_ms(1000); /* well past the pauser's 500 ms TTL */
    assert_int_equal(kill(pids[JOINERS], SIGCONT), 0);
    assert_int_equal(reap(pids, JOINERS + 1, 60000), JOINERS + 1);

    struct section s[JOINERS + 8];
    size_t n = read_log(f->log, s, JOINERS + 8);
    assert_int_equal(n, JOINERS + 1);
    unsigned most = max_overlap(s, n, ROOM ":permit:");
    fprintf(stderr, "room of %d: at most %u inside at once\n", ROOM_PERMITS, most);
    assert_true(most <= ROOM_PERMITS);
    assert_true(most >= 2); /* the run did contend */
    for (int p = 0; p < ROOM_PERMITS; p++) {
        char res[64];
        snprintf(res, sizeof(res), ROOM ":permit:%d", p);
        check_tokens(s, n, res);
    }
}

/* Each process enters and leaves the room several times; the room's status
 * shows the permits held. */
static void test_kinds_sem_status_shows_permits(void **state)
{
    struct fixture *f = *state;
    struct tune t = {.ttl_ms = 5000, .retry_count = 0};
    lockcore_client *c = client_on(f->urls, f->n, &t);
    assert_non_null(c);
    struct lockcore_lock l[3];
    assert_int_equal(lockcore_sem_acquire(c, "hall", 2, &l[0]), 0);
    assert_int_equal(lockcore_sem_acquire(c, "hall", 2, &l[1]), 0);
    assert_string_not_equal(l[0].resource, l[1].resource);
    assert_int_equal(lockcore_sem_acquire(c, "hall", 2, &l[2]), LOCKCORE_ELOCKED);
    assert_string_equal(l[2].id, "");
    struct lockcore_permit_status ps[2];
    assert_int_equal(lockcore_sem_status(c, "hall", 2, ps, 2), 2);
    for (int p = 0; p < 2; p++) {
        assert_int_equal(ps[p].held, 1);
        assert_int_equal(ps[p].nodes, NODES);
        assert_true(ps[p].pttl_ms > 0);
        assert_true(ps[p].fence > 0);
        int mine = strcmp(ps[p].holder, l[0].id) == 0 || strcmp(ps[p].holder, l[1].id) == 0;
        assert_true(mine);
    }
    /* A permit is an ordinary lock: a keep-alive extends it, a release
     * frees it for the next. */
    lockcore_keepalive *ka;
    assert_int_equal(lockcore_keepalive_start(c, &l[0], 0, 0, NULL, NULL, &ka), 0);
    lockcore_keepalive_stop(ka);
    assert_int_equal(lockcore_extend(c, &l[1], 0), 0);
    assert_int_equal(lockcore_release(c, &l[1]), 0);
    assert_int_equal(lockcore_sem_status(c, "hall", 2, ps, 2), 1);
    assert_int_equal(lockcore_sem_acquire(c, "hall", 2, &l[2]), 0);
    assert_string_equal(l[2].resource, l[1].resource);
    assert_true(l[2].token > l[1].token);
    assert_int_equal(lockcore_sem_acquire(c, "hall", 0, &l[2]), -EINVAL);
    lockcore_client_free(c);
}

/* The non-blocking form: several acquisitions of one client in flight. */
struct sem_count {
    int done, ok, locked;
    struct lockcore_lock held[8];
};

static void sem_cb(lockcore_client *c, int rc, const struct lockcore_lock *lock, void *arg)
{
    (void)c;
    struct sem_count *k = arg;
    k->done++;
    if (rc == 0)
        k->held[k->ok++] = *lock;
    else if (rc == LOCKCORE_ELOCKED)
        k->locked++;
}

static void test_kinds_sem_async_in_flight(void **state)
{
    struct fixture *f = *state;
    /* A TTL that outlives the waits: the two left over wait in line for
     * their retry and give up, and no permit expires meanwhile. */
    struct tune t = {.ttl_ms = 30000, .retry_count = 1};
    lockcore_client *c = client_on(f->urls, f->n, &t);
    assert_non_null(c);
    struct sem_count k = {0};
    for (int i = 0; i < 5; i++)
        assert_int_equal(lockcore_sem_acquire_async(c, "lobby", 3, sem_cb, &k), 0);
    long long end = hp_now_ms() + 10000;
    while (k.done < 5 && hp_now_ms() < end)
        assert_true(lockcore_run(c, 100) >= 0);
    assert_int_equal(k.done, 5);
    assert_int_equal(k.ok, 3);
    assert_int_equal(k.locked, 2);
    for (int i = 0; i < k.ok; i++)
        assert_int_equal(lockcore_release(c, &k.held[i]), 0);
    /* Freed with a round pending: the callback runs with ECANCELED. */
    struct sem_count k2 = {0};
    struct lockcore_lock a, b;
    assert_int_equal(lockcore_sem_acquire(c, "lobby2", 1, &a), 0);
    (void)b;
    assert_int_equal(lockcore_sem_acquire_async(c, "lobby2", 1, sem_cb, &k2), 0);
    lockcore_run(c, 50);
    lockcore_client_free(c);
    assert_int_equal(k2.done, 1);
    assert_int_equal(k2.ok, 0);
}

/* The 3 x 3 <= 2 x 5 case. Five nodes, a semaphore of 2 permits, three
 * clients that each reach a different three of the nodes (the other two
 * are addresses nobody listens on, a partition as each client sees it):
 * A {0,1,2}, B {2,3,4}, C {0,1,3}. No node is reached by more than two of
 * them, so a semaphore that counts holders per node and takes a majority
 * admits all three; the permit design admits two. */
static const int reach[3][3] = {{0, 1, 2}, {2, 3, 4}, {0, 1, 3}};

static lockcore_client *partitioned_client(struct fixture *f, int who, char urls[NODES][256])
{
    const char *u[NODES];
    for (int i = 0; i < NODES; i++) {
        int in = reach[who][0] == i || reach[who][1] == i || reach[who][2] == i;
        if (in)
            snprintf(urls[i], 256, "%s", f->urls[i]);
        else
            snprintf(urls[i], 256, "127.0.0.1:%d", rh_free_port());
        u[i] = urls[i];
    }
    struct tune t = {.ttl_ms = 5000, .retry_count = 0};
    return client_on(u, NODES, &t);
}

static void test_kinds_sem_counting_would_admit_three(void **state)
{
    struct fixture *f = *state;
    /* First the counting design, run by hand: each node admits while it
     * counts fewer than 2 holders; a client is in with 3 of 5 nodes. */
    int admitted = 0;
    for (int who = 0; who < 3; who++) {
        int yes = 0;
        for (int k = 0; k < 3; k++) {
            redisReply *r = rh_command(f->rc, reach[who][k], "EVAL %s 1 counted %d",
                                       "if redis.call('SCARD', KEYS[1]) < 2 then "
                                       "return redis.call('SADD', KEYS[1], ARGV[1]) end return 0",
                                       who);
            assert_non_null(r);
            yes += r->type == REDIS_REPLY_INTEGER && r->integer == 1;
            freeReplyObject(r);
        }
        admitted += yes >= 3;
    }
    assert_int_equal(admitted, 3);

    /* Then the permits, in every order of arrival and at once. */
    static const int orders[6][3] = {{0, 1, 2}, {0, 2, 1}, {1, 0, 2}, {1, 2, 0}, {2, 0, 1}, {2, 1, 0}};
    for (int o = 0; o < 7; o++) {
        lockcore_client *c[3];
        char urls[3][NODES][256];
        for (int w = 0; w < 3; w++) {
            c[w] = partitioned_client(f, w, urls[w]);
            assert_non_null(c[w]);
        }
        struct lockcore_lock l[3];
        int rc[3], held = 0;
        if (o < 6) {
            for (int k = 0; k < 3; k++) {
                int w = orders[o][k];
                rc[w] = lockcore_sem_acquire(c[w], "split", 2, &l[w]);
            }
        } else {
            struct sem_count k[3] = {{0}};
            for (int w = 0; w < 3; w++)
                assert_int_equal(lockcore_sem_acquire_async(c[w], "split", 2, sem_cb, &k[w]), 0);
            long long end = hp_now_ms() + 5000;
            while ((k[0].done + k[1].done + k[2].done) < 3 && hp_now_ms() < end)
                for (int w = 0; w < 3; w++)
                    lockcore_run(c[w], 5);
            for (int w = 0; w < 3; w++) {
                assert_int_equal(k[w].done, 1);
                rc[w] = k[w].ok ? 0 : LOCKCORE_ELOCKED;
                if (k[w].ok)
                    l[w] = k[w].held[0];
            }
        }
        for (int w = 0; w < 3; w++)
            held += rc[w] == 0;
        fprintf(stderr, "order %d: %d of 3 hold a permit of 2\n", o, held);
        assert_true(held <= 2);
        if (o < 6)
            assert_int_equal(held, 2); /* the first two in always get one */
        for (int w = 0; w < 3; w++) {
            if (rc[w] == 0)
                assert_int_equal(lockcore_release(c[w], &l[w]), 0);
            lockcore_client_free(c[w]);
        }
    }
}

/* ---- multi-resource ---- */

static const char *const sets[4][2] = {
    {"acct:a", "acct:b"}, {"acct:b", "acct:a"}, {"acct:b", "acct:c"}, {"acct:c", "acct:b"}};

/* Takes its set (in its own order) or a single resource, many times. */
static int multi_worker(struct fixture *f, int who)
{
    struct tune t = {.ttl_ms = 2000, .retry_count = -1, .wait_ms = 30000};
    lockcore_client *c = client_on(f->urls, f->n, &t);
    if (c == NULL)
        return 2;
    int rcode = 0;
    for (int it = 0; it < 12 && rcode == 0; it++) {
        struct lockcore_lock l;
        int single = who >= 8;
        const char *one[1] = {who == 8 ? "acct:a" : who == 9 ? "acct:b" : "acct:c"};
        int rc = single ? lockcore_acquire(c, one[0], &l)
                        : lockcore_multi_acquire(c, (const char *const *)sets[who % 4], 2, &l);
        if (rc != 0) {
            fprintf(stderr, "worker %d: %s: %s\n", who, lockcore_strerror(rc), lockcore_errmsg(c));
            rcode = 3;
            break;
        }
        uint64_t enter = now_us();
        hp_sleep_ms(3);
        uint64_t end = section_end(&l);
        if (single) {
            log_section(f->log, one[0], who, enter, end, l.token);
        } else {
            log_section(f->log, sets[who % 4][0], who, enter, end, l.token);
            log_section(f->log, sets[who % 4][1], who, enter, end, l.token);
            if (!(l.flags & LOCKCORE_LOCK_MULTI))
                rcode = 4;
        }
        /* A release that misses its majority (a node restarting, a slow
         * machine) leaves keys to expire: not what is checked here. */
        lockcore_release(c, &l);
    }
    lockcore_client_free(c);
    return rcode;
}

/* Holds {a, b}, is stopped past its TTL, must find it lost. */
static int multi_pauser(struct fixture *f, int who)
{
    struct tune t = {.ttl_ms = 500, .retry_count = -1, .wait_ms = 10000};
    lockcore_client *c = client_on(f->urls, f->n, &t);
    if (c == NULL)
        return 2;
    struct lockcore_lock l;
    if (lockcore_multi_acquire(c, (const char *const *)sets[0], 2, &l) != 0)
        return 3;
    uint64_t enter = now_us();
    mark(f->log, "R pauser\n");
    hp_sleep_ms(2500);
    uint64_t end = section_end(&l);
    log_section(f->log, "acct:a", who, enter, end, l.token);
    log_section(f->log, "acct:b", who, enter, end, l.token);
    int lost = lockcore_remaining_ms(&l) == 0 && lockcore_extend(c, &l, 0) == LOCKCORE_ELOST;
    lockcore_client_free(c);
    return lost ? 0 : 5;
}

static void test_kinds_multi_overlapping_sets_with_faults(void **state)
{
    struct fixture *f = *state;
    enum { W = 11 };
    pid_t pids[W + 1];
    pids[W] = spawn(multi_pauser, f, 100);
    assert_int_equal(wait_mark(f->log, "R pauser", 10000), 0);
    assert_int_equal(kill(pids[W], SIGSTOP), 0);
    for (int i = 0; i < W; i++)
        pids[i] = spawn(multi_worker, f, i);
    hp_sleep_ms(300);
    assert_int_equal(rh_restart(f->rc, 2, 1), 0);
    hp_sleep_ms(700);
    assert_int_equal(kill(pids[W], SIGCONT), 0);
    /* Opposite orders of the same set never deadlock: everyone ends. */
    assert_int_equal(reap(pids, W + 1, 90000), W + 1);

    enum { MAXS = 400 };
    struct section *s = calloc(MAXS, sizeof(*s));
    assert_non_null(s);
    size_t n = read_log(f->log, s, MAXS);
    assert_int_equal(n, 8 * 12 * 2 + 3 * 12 + 2);
    const char *res[3] = {"acct:a", "acct:b", "acct:c"};
    for (int r = 0; r < 3; r++) {
        unsigned most = max_overlap(s, n, res[r]);
        unsigned k = check_tokens(s, n, res[r]);
        fprintf(stderr, "%s: %u sections, at most %u at once\n", res[r], k, most);
        assert_int_equal(most, 1);
    }
    free(s);
}

/* A failed attempt leaves nothing: {a, b} while b is held sets a nowhere,
 * even on the nodes where only a was free. */
static void test_kinds_multi_no_partial_hold(void **state)
{
    struct fixture *f = *state;
    /* A refusal, not silence: a slow client (valgrind) must not turn the
     * nodes' answers into timeouts. */
    struct tune t = {.ttl_ms = 5000, .retry_count = 1, .request_timeout_ms = 1000};
    lockcore_client *c = client_on(f->urls, f->n, &t);
    assert_non_null(c);
    struct lockcore_lock b, ab;
    assert_int_equal(lockcore_acquire(c, "p:b", &b), 0);
    /* b also disappears from two nodes: there, the set is free. */
    for (int i = 0; i < 2; i++)
        freeReplyObject(rh_command(f->rc, i, "DEL p:b"));
    const char *set[] = {"p:a", "p:b"};
    assert_int_equal(lockcore_multi_acquire(c, set, 2, &ab), LOCKCORE_ELOCKED);
    /* The rollback is sent behind the attempt: give it up to 2 s to land
     * (a client under valgrind is slow), then every node must be clean. */
    long long end = hp_now_ms() + 2000;
    int left = NODES;
    while (left > 0 && hp_now_ms() < end) {
        left = 0;
        for (int i = 0; i < NODES; i++)
            left += rh_pttl(f->rc, i, "p:a") != -2;
        if (left > 0) {
            lockcore_run(c, 10);
            hp_sleep_ms(10);
        }
    }
    for (int i = 0; i < NODES; i++)
        assert_int_equal(rh_pttl(f->rc, i, "p:a"), -2);
    assert_int_equal(lockcore_release(c, &b), 0);
    /* Bad sets. */
    const char *dup[] = {"x", "x"};
    assert_int_equal(lockcore_multi_acquire(c, dup, 2, &ab), -EINVAL);
    const char *nl[] = {"x\ny"};
    assert_int_equal(lockcore_multi_acquire(c, nl, 1, &ab), -EINVAL);
    assert_int_equal(lockcore_multi_acquire(c, set, 0, &ab), -EINVAL);
    lockcore_client_free(c);
}

/* One token for the set, stored in every member's fence; single and multi
 * grants of one resource keep its tokens unique and growing, and a
 * keep-alive extends every key of the set. b's fence is an old layout's
 * fence key, far ahead: the set's token passes it too. */
static void test_kinds_multi_tokens_mix_with_single(void **state)
{
    struct fixture *f = *state;
    struct tune t = {.ttl_ms = 3000, .retry_count = 0};
    lockcore_client *c = client_on(f->urls, f->n, &t);
    assert_non_null(c);
    /* b's fence far ahead of a's: the multi token must pass both. */
    struct lockcore_lock l, m;
    char far[32];
    snprintf(far, sizeof(far), "%llu", 4000000000000000ULL);
    for (int i = 0; i < NODES; i++) {
        redisReply *r = rh_command(f->rc, i, "SET {t:b}:fence %s", far);
        freeReplyObject(r);
    }
    uint64_t last_a = 0, last_b = 0;
    for (int round = 0; round < 4; round++) {
        assert_int_equal(lockcore_acquire(c, "t:a", &l), 0);
        assert_true(l.token > last_a);
        last_a = l.token;
        assert_int_equal(lockcore_release(c, &l), 0);
        const char *set[] = {"t:a", "t:b", "t:c"};
        assert_int_equal(lockcore_multi_acquire(c, set, 3, &m), 0);
        assert_true(m.token > last_a);
        assert_true(m.token > last_b);
        assert_true(m.token > 4000000000000000ULL);
        assert_string_equal(m.resource, "t:a\nt:b\nt:c");
        last_a = last_b = m.token;
        /* Stored in every member's fence on a majority. */
        hp_sleep_ms(100); /* granted at a majority: the others may still be running it */
        char got[64];
        for (int k = 0; k < 3; k++) {
            unsigned same = 0;
            for (int i = 0; i < NODES; i++) {
                same += tf_fence(f->rc, i, "", set[k]) == m.token;
                rh_get(f->rc, i, set[k], got, sizeof(got));
                assert_string_equal(got, m.id); /* plain keys, the id as value */
            }
            assert_true(same >= 3);
        }
        /* A single of a member is excluded while the set is held. */
        assert_int_equal(lockcore_acquire(c, "t:b", &l), LOCKCORE_ELOCKED);
        lockcore_keepalive *ka;
        assert_int_equal(lockcore_extend(c, &m, 600), 0);
        assert_int_equal(lockcore_keepalive_start(c, &m, 600, 300, NULL, NULL, &ka), 0);
        long long end = hp_now_ms() + 1000;
        while (hp_now_ms() < end)
            lockcore_run(c, 50);
        assert_true(lockcore_keepalive_extensions(ka) >= 2);
        assert_int_equal(lockcore_keepalive_get(ka, &m), 0);
        lockcore_keepalive_stop(ka);
        for (int i = 0; i < NODES; i++)
            assert_true(rh_pttl(f->rc, i, "t:c") > 0);
        assert_int_equal(lockcore_release(c, &m), 0);
        for (int i = 0; i < NODES; i++)
            assert_int_equal(rh_pttl(f->rc, i, "t:c"), -2);
        assert_int_equal(lockcore_acquire(c, "t:b", &l), 0);
        assert_true(l.token > last_b);
        last_b = l.token;
        assert_int_equal(lockcore_release(c, &l), 0);
    }
    lockcore_client_free(c);
}

/* ---- reentrant ---- */

static void test_kinds_reentrant_counts_holds(void **state)
{
    struct fixture *f = *state;
    struct tune t = {.ttl_ms = 3000, .retry_count = 0};
    lockcore_client *c = client_on(f->urls, f->n, &t);
    lockcore_client *other = client_on(f->urls, f->n, &t);
    assert_non_null(c);
    assert_non_null(other);
    struct lockcore_lock outer, inner[3], x;
    struct lockcore_node_status st[NODES];
    char owner[LOCKCORE_ID_LEN + 1];
    assert_int_equal(lockcore_reentrant_acquire(c, "doc:7", NULL, &outer), 0);
    assert_true(outer.flags & LOCKCORE_LOCK_REENTRANT);
    acq_of(outer.id, owner);
    for (int d = 0; d < 3; d++) {
        /* Each re-entry names a live hold (the outer one, or the last) and
         * is a hold of its own, with its own id and the outer's token. */
        assert_int_equal(lockcore_reentrant_acquire(c, "doc:7", d ? inner[d - 1].id : outer.id, &inner[d]),
                         0);
        assert_string_not_equal(inner[d].id, outer.id);
        assert_int_equal(inner[d].token, outer.token);
        assert_int_equal(lockcore_reentrant_status(c, "doc:7", st, NODES), NODES);
        for (int i = 0; i < NODES; i++) {
            assert_int_equal(st[i].holds, (unsigned)d + 2);
            assert_string_equal(st[i].holder, owner); /* the key's value stays the owner */
        }
        /* Another owner stays out, plain or reentrant. */
        assert_int_equal(lockcore_acquire(other, "doc:7", &x), LOCKCORE_ELOCKED);
        assert_int_equal(lockcore_reentrant_acquire(other, "doc:7", NULL, &x), LOCKCORE_ELOCKED);
    }
    /* An extension of the outer hold pushes out the holds' key too. */
    assert_int_equal(lockcore_extend(c, &outer, 5000), 0);
    hp_sleep_ms(100); /* decided at a majority: the others may still be running it */
    for (int i = 0; i < NODES; i++) {
        assert_true(rh_pttl(f->rc, i, "{doc:7}:holds") > 3000);
        assert_true(rh_pttl(f->rc, i, "doc:7") > 3000);
    }
    for (int d = 2; d >= 0; d--) {
        assert_int_equal(lockcore_release(c, &inner[d]), 0);
        assert_int_equal(lockcore_reentrant_status(c, "doc:7", st, NODES), NODES);
        assert_int_equal(st[0].holds, (unsigned)d + 1);
        assert_int_equal(lockcore_acquire(other, "doc:7", &x), LOCKCORE_ELOCKED);
    }
    assert_int_equal(lockcore_release(c, &outer), 0);
    assert_int_equal(lockcore_reentrant_status(c, "doc:7", st, NODES), NODES);
    assert_int_equal(st[0].holds, 0);
    assert_string_equal(st[0].holder, "");
    assert_int_equal(rh_pttl(f->rc, 0, "{doc:7}:holds"), -2);
    assert_int_equal(lockcore_acquire(other, "doc:7", &x), 0);
    assert_true(x.token > outer.token);
    /* The id of a hold that is gone acquires afresh, with a new token. */
    assert_int_equal(lockcore_release(other, &x), 0);
    assert_int_equal(lockcore_reentrant_acquire(c, "doc:7", outer.id, &inner[0]), 0);
    assert_true(inner[0].token > x.token);
    assert_int_equal(lockcore_release(c, &inner[0]), 0);
    assert_int_equal(lockcore_reentrant_acquire(c, "doc:7", "xyz", &x), -EINVAL);
    lockcore_client_free(other);
    lockcore_client_free(c);
}

/* One round of every kind: acquire, re-enter, extend, release. */
static void every_kind_once(lockcore_client *c)
{
    const char *set[] = {"sha:a", "sha:b"};
    struct lockcore_lock l, in;
    assert_int_equal(lockcore_reentrant_acquire(c, "sha:r", NULL, &l), 0);
    assert_int_equal(lockcore_reentrant_acquire(c, "sha:r", l.id, &in), 0);
    assert_int_equal(lockcore_extend(c, &in, 3000), 0);
    assert_int_equal(lockcore_release(c, &in), 0);
    assert_int_equal(lockcore_release(c, &l), 0);
    assert_int_equal(lockcore_multi_acquire(c, set, 2, &l), 0);
    assert_int_equal(lockcore_extend(c, &l, 3000), 0);
    assert_int_equal(lockcore_release(c, &l), 0);
    for (int w = 0; w < 2; w++) {
        assert_int_equal(lockcore_rw_acquire(c, "sha:rw", w, &l), 0);
        assert_int_equal(lockcore_extend(c, &l, 3000), 0);
        assert_int_equal(lockcore_release(c, &l), 0);
    }
    assert_int_equal(lockcore_acquire(c, "sha:p", &l), 0);
    assert_int_equal(lockcore_extend(c, &l, 3000), 0);
    assert_int_equal(lockcore_release(c, &l), 0);
}

/* Released, and on every node. */
static void released_everywhere(lockcore_client *c, struct lockcore_lock *l)
{
    assert_int_equal(lockcore_release(c, l), 0);
    assert_int_equal(l->nodes_ok, NODES);
}

/* Every kind without fencing (plain Redlock: a plain lock and a
 * semaphore's permits go by SET NX PX, the other kinds by their scripts),
 * in every wait mode: each is granted, kept and released, a full
 * semaphore refuses and takes again after a release, and no token is
 * given. A permit's SET NX once answered OK where a script's array was
 * expected: every unfenced semaphore failed. */
static void test_kinds_every_kind_without_fencing(void **state)
{
    struct fixture *f = *state;
    static const int modes[] = {LOCKCORE_WAIT_POLL, LOCKCORE_WAIT_NOTIFY, LOCKCORE_WAIT_FAIR};
    struct tune t = {.ttl_ms = 5000, .retry_count = 0};
    for (int m = 0; m < 3; m++) {
        struct lockcore_options o;
        tune_options(f->urls, f->n, &t, &o);
        o.wait_mode = modes[m];
        o.fencing = 0;
        lockcore_client *c = client_new(&o);
        assert_non_null(c);
        char r[6][32];
        for (int k = 0; k < 6; k++)
            snprintf(r[k], sizeof(r[k]), "nf%d:%d", m, k);
        const char *set[] = {r[2], r[3]};
        struct lockcore_lock l, in, s[3];
        assert_int_equal(lockcore_acquire(c, r[0], &l), 0);
        assert_int_equal(l.token, 0);
        assert_int_equal(lockcore_extend(c, &l, 3000), 0);
        released_everywhere(c, &l);
        assert_int_equal(lockcore_reentrant_acquire(c, r[1], NULL, &l), 0);
        assert_int_equal(lockcore_reentrant_acquire(c, r[1], l.id, &in), 0);
        released_everywhere(c, &in);
        released_everywhere(c, &l);
        assert_int_equal(lockcore_multi_acquire(c, set, 2, &l), 0);
        assert_int_equal(lockcore_extend(c, &l, 3000), 0);
        released_everywhere(c, &l);
        for (int w = 0; w < 2; w++) {
            assert_int_equal(lockcore_rw_acquire(c, r[4], w, &l), 0);
            assert_int_equal(lockcore_extend(c, &l, 3000), 0);
            released_everywhere(c, &l);
        }
        assert_int_equal(lockcore_sem_acquire(c, r[5], 2, &s[0]), 0);
        assert_int_equal(lockcore_sem_acquire(c, r[5], 2, &s[1]), 0);
        assert_int_equal(s[0].token, 0);
        assert_int_equal(lockcore_sem_acquire(c, r[5], 2, &s[2]), LOCKCORE_ELOCKED);
        assert_int_equal(lockcore_extend(c, &s[1], 3000), 0);
        released_everywhere(c, &s[0]);
        assert_int_equal(lockcore_sem_acquire(c, r[5], 2, &s[2]), 0);
        released_everywhere(c, &s[1]);
        released_everywhere(c, &s[2]);
        lockcore_client_free(c);
    }
}

/* How many calls of cmd ("fcall", "evalsha") node i counted. */
static long calls_of(struct fixture *f, int i, const char *cmd)
{
    redisReply *r = rh_command(f->rc, i, "INFO commandstats");
    assert_non_null(r);
    assert_int_equal(r->type, REDIS_REPLY_STRING);
    char pat[64];
    snprintf(pat, sizeof(pat), "cmdstat_%s:calls=", cmd);
    const char *e = strstr(r->str, pat);
    long n = e ? atol(e + strlen(pat)) : 0;
    freeReplyObject(r);
    return n;
}

/* cmd (no arguments of its own to quote) on the first n nodes. */
static void on_nodes(struct fixture *f, int n, const char *cmd)
{
    for (int i = 0; i < n; i++) {
        redisReply *r = rh_command(f->rc, i, cmd);
        assert_non_null(r);
        assert_int_not_equal(r->type, REDIS_REPLY_ERROR);
        freeReplyObject(r);
    }
}

/* No node answered that it lacks a script or a function. */
static void no_script_missed(struct fixture *f)
{
    for (int i = 0; i < NODES; i++) {
        redisReply *r = rh_command(f->rc, i, "INFO errorstats");
        assert_non_null(r);
        assert_int_equal(r->type, REDIS_REPLY_STRING);
        assert_null(strstr(r->str, "NOSCRIPT"));
        freeReplyObject(r);
    }
}

/* Two rounds of every kind; the second's calls, on every node, went by
 * `by` (at least one a step) and none by `not_by`; no NOSCRIPT. */
static void second_round_goes_by(struct fixture *f, lockcore_client *c, const char *by, const char *not_by)
{
    every_kind_once(c);
    on_nodes(f, NODES, "CONFIG RESETSTAT");
    every_kind_once(c);
    hp_sleep_ms(100); /* decided at a majority: the others may still be running theirs */
    for (int i = 0; i < NODES; i++) {
        assert_true(calls_of(f, i, by) >= 16);
        assert_int_equal(calls_of(f, i, not_by), 0);
    }
    no_script_missed(f);
}

static lockcore_client *client_fn(const char *const *urls, const struct tune *t)
{
    struct lockcore_options o;
    tune_options(urls, NODES, t, &o);
    o.redis_functions = 1;
    return client_new(&o);
}

/* A user with every right but the one taken away (e.g. "-function"). */
static void acl_user(struct fixture *f, const char *name, const char *minus, char urls[NODES][256],
                     const char *u[NODES])
{
    for (int i = 0; i < NODES; i++) {
        redisReply *r = rh_command(f->rc, i, "ACL SETUSER %s on >pw ~* &* +@all %s", name, minus);
        assert_non_null(r);
        assert_int_equal(r->type, REDIS_REPLY_STATUS);
        freeReplyObject(r);
        snprintf(urls[i], 256, "redis://%s:pw@127.0.0.1:%d", name, rh_port(f->rc, i));
        u[i] = urls[i];
    }
}

/* With redis_functions, every script of every kind runs as a function of
 * the library lockcore loads on each connection (FCALL); a node that loses
 * the library (FUNCTION FLUSH) costs no operation. By default, and where a
 * node refuses the library, the scripts go by EVALSHA after a script's
 * first use on a connection, under the sha the build computed. No node
 * ever answers NOSCRIPT (a wrong sha would cost a second round trip on
 * every call, and nothing else would show it). */
static void test_kinds_scripts_go_by_function_or_sha(void **state)
{
    struct fixture *f = *state;
    struct tune t = {.ttl_ms = 3000};
    lockcore_client *c = client_fn(f->urls, &t);
    assert_non_null(c);
    second_round_goes_by(f, c, "fcall", "evalsha");

    /* The library gone from two nodes: the next calls there go whole, by
     * EVAL, then by EVALSHA; nothing fails. */
    on_nodes(f, 2, "FUNCTION FLUSH");
    every_kind_once(c);
    every_kind_once(c);
    lockcore_client_free(c);

    /* By default: no library, EVALSHA. */
    on_nodes(f, NODES, "FUNCTION FLUSH");
    c = client_on(f->urls, f->n, &t);
    assert_non_null(c);
    second_round_goes_by(f, c, "evalsha", "fcall");
    for (int i = 0; i < NODES; i++) { /* nothing loaded since the flush */
        redisReply *r = rh_command(f->rc, i, "FUNCTION LIST");
        assert_non_null(r);
        assert_int_equal(r->type, REDIS_REPLY_ARRAY);
        assert_int_equal(r->elements, 0);
        freeReplyObject(r);
    }
    lockcore_client_free(c);

    /* A user without FUNCTION: the library is refused, EVALSHA. */
    char urls[NODES][256];
    const char *u[NODES];
    acl_user(f, "nofn", "-function", urls, u);
    c = client_fn(u, &t);
    assert_non_null(c);
    second_round_goes_by(f, c, "evalsha", "fcall");
    lockcore_client_free(c);
}

/* A node that takes the library but refuses its calls costs no operation:
 * a user allowed FUNCTION LOAD but not FCALL, and a node over maxmemory,
 * which refuses a function whole where a script runs and only its
 * commands that need memory fail. */
static void test_kinds_refused_functions_fall_back_to_scripts(void **state)
{
    struct fixture *f = *state;
    struct tune t = {.ttl_ms = 3000};
    char urls[NODES][256];
    const char *u[NODES];
    acl_user(f, "nofcall", "-fcall", urls, u);
    lockcore_client *c = client_fn(u, &t);
    assert_non_null(c);
    every_kind_once(c);
    every_kind_once(c);
    lockcore_client_free(c);
    /* The first steps of a fresh client with holder info: the info sent
     * behind each lands (a refused FCALL resent after it would have run
     * the info before the lock). */
    struct lockcore_options o;
    tune_options(u, NODES, &t, &o);
    o.redis_functions = 1;
    o.holder_info = "host-1 pid 7";
    c = client_new(&o);
    assert_non_null(c);
    const char *set[] = {"hi:a", "hi:b"};
    struct lockcore_lock h[2];
    assert_int_equal(lockcore_reentrant_acquire(c, "hi:r", NULL, &h[0]), 0);
    assert_int_equal(lockcore_multi_acquire(c, set, 2, &h[1]), 0);
    hp_sleep_ms(100);
    for (int i = 0; i < NODES; i++) {
        char v[64];
        rh_get(f->rc, i, "{hi:r}:holder", v, sizeof(v));
        assert_string_equal(v, "host-1 pid 7");
        rh_get(f->rc, i, "{hi:b}:holder", v, sizeof(v));
        assert_string_equal(v, "host-1 pid 7");
    }
    assert_int_equal(lockcore_release(c, &h[0]), 0);
    assert_int_equal(lockcore_release(c, &h[1]), 0);
    lockcore_client_free(c);

    /* A plain lock's extension and release need no memory: by EVALSHA
     * they run over maxmemory (a kind whose extension adds to a set, a
     * reader's, is refused there either way). */
    c = client_fn(f->urls, &t);
    assert_non_null(c);
    struct lockcore_lock l;
    assert_int_equal(lockcore_acquire(c, "oom:p", &l), 0);
    assert_int_equal(lockcore_extend(c, &l, 3000), 0); /* by FCALL by now */
    on_nodes(f, NODES, "CONFIG SET maxmemory 1");
    int e = lockcore_extend(c, &l, 3000);
    char why[512];
    snprintf(why, sizeof(why), "%s", lockcore_errmsg(c));
    int r = lockcore_release(c, &l);
    on_nodes(f, NODES, "CONFIG SET maxmemory 0");
    if (e != 0)
        fail_msg("extend over maxmemory: %s", why);
    assert_int_equal(r, 0);
    assert_int_equal(rh_holders(f->rc, "oom:p", l.id), 0);
    lockcore_client_free(c);
}

/* A client that reaches only the nodes in `in` (a bit per node): the
 * others are addresses nobody listens on, a partition as it sees it. */
static lockcore_client *reaching(struct fixture *f, unsigned in, const struct tune *t, char urls[NODES][256])
{
    const char *u[NODES];
    for (int i = 0; i < NODES; i++) {
        if (in & (1u << i))
            snprintf(urls[i], 256, "%s", f->urls[i]);
        else
            snprintf(urls[i], 256, "127.0.0.1:%d", rh_free_port());
        u[i] = urls[i];
    }
    return client_on(u, NODES, t);
}

/* Re-entries that miss different minorities, released everywhere, must
 * not free the lock while the outer hold is valid. With counted holds they
 * did: the outer hold 1 on all five nodes, a re-entry that misses nodes 0
 * and 1 (2 on nodes 2..4), one that misses 2 and 3 (2 on 0, 1, 2; 3 on 4),
 * each release taking one from all five: 0 on nodes 0..3, a majority, and
 * another client was granted beside the valid outer hold. */
static void test_kinds_reentrant_holds_survive_missed_minorities(void **state)
{
    struct fixture *f = *state;
    struct tune t = {.ttl_ms = 8000, .retry_count = 0};
    char u1[NODES][256], u2[NODES][256];
    lockcore_client *c = client_on(f->urls, f->n, &t);
    lockcore_client *miss01 = reaching(f, 0x1c, &t, u1); /* nodes 2, 3, 4 */
    lockcore_client *miss23 = reaching(f, 0x13, &t, u2); /* nodes 0, 1, 4 */
    lockcore_client *other = client_on(f->urls, f->n, &t);
    assert_non_null(c);
    assert_non_null(miss01);
    assert_non_null(miss23);
    assert_non_null(other);
    struct lockcore_lock outer, r1, r2, x;
    assert_int_equal(lockcore_reentrant_acquire(c, "nest:m", NULL, &outer), 0);
    hp_sleep_ms(50); /* granted at a majority: the others may still be running it */
    assert_int_equal(lockcore_reentrant_acquire(miss01, "nest:m", outer.id, &r1), 0);
    assert_int_equal(lockcore_reentrant_acquire(miss23, "nest:m", outer.id, &r2), 0);
    assert_int_equal(r1.token, outer.token);
    assert_int_equal(r2.token, outer.token);
    assert_int_equal(lockcore_release(c, &r1), 0);
    assert_int_equal(lockcore_release(c, &r2), 0);
    assert_true(lockcore_remaining_ms(&outer) > 1000);
    assert_int_equal(lockcore_acquire(other, "nest:m", &x), LOCKCORE_ELOCKED);
    assert_int_equal(lockcore_reentrant_acquire(other, "nest:m", NULL, &x), LOCKCORE_ELOCKED);
    char owner[LOCKCORE_ID_LEN + 1];
    acq_of(outer.id, owner);
    assert_int_equal(rh_holders(f->rc, "nest:m", owner), NODES);
    /* A release that came twice, or of a hold a node never had, changes
     * nothing: the outer hold still holds. */
    assert_int_equal(lockcore_release(c, &r1), 0);
    assert_int_equal(lockcore_acquire(other, "nest:m", &x), LOCKCORE_ELOCKED);
    assert_int_equal(lockcore_release(c, &outer), 0);
    assert_int_equal(lockcore_acquire(other, "nest:m", &x), 0);
    assert_true(x.token > outer.token);
    assert_int_equal(lockcore_release(other, &x), 0);
    lockcore_client_free(other);
    lockcore_client_free(miss23);
    lockcore_client_free(miss01);
    lockcore_client_free(c);
}

/* A hold with a short TTL that extends, then releases (or dies), must not
 * shorten the lock under a hold with a longer TTL. With the key's TTL set
 * to the extender's, the key expired 600 ms later while the outer hold had
 * seconds left, and another client was granted. */
static void test_kinds_reentrant_extend_never_shortens_the_hold(void **state)
{
    struct fixture *f = *state;
    struct tune tl = {.ttl_ms = 8000, .retry_count = 0}, ts = {.ttl_ms = 600, .retry_count = 0};
    lockcore_client *c = client_on(f->urls, f->n, &tl);
    lockcore_client *brief = client_on(f->urls, f->n, &ts);
    lockcore_client *other = client_on(f->urls, f->n, &tl);
    assert_non_null(c);
    assert_non_null(brief);
    assert_non_null(other);
    struct lockcore_lock outer, in1, in2, x;
    assert_int_equal(lockcore_reentrant_acquire(c, "nest:t", NULL, &outer), 0);
    assert_int_equal(lockcore_reentrant_acquire(brief, "nest:t", outer.id, &in1), 0);
    assert_int_equal(lockcore_extend(brief, &in1, 600), 0);
    assert_int_equal(lockcore_release(brief, &in1), 0);
    /* One more that extends and then dies without a release. */
    assert_int_equal(lockcore_reentrant_acquire(brief, "nest:t", outer.id, &in2), 0);
    assert_int_equal(lockcore_extend(brief, &in2, 600), 0);
    hp_sleep_ms(1500);
    assert_true(lockcore_remaining_ms(&outer) > 1000);
    assert_int_equal(lockcore_acquire(other, "nest:t", &x), LOCKCORE_ELOCKED);
    for (int i = 0; i < NODES; i++)
        assert_true(rh_pttl(f->rc, i, "nest:t") > 1000);
    /* An extension with a shorter TTL shortens nothing on the nodes (a
     * late one must not undo a newer one): the outer hold stays live there
     * until its own expiry, and only its release frees the lock. */
    assert_int_equal(lockcore_reentrant_acquire(c, "nest:t", outer.id, &in1), 0);
    assert_int_equal(lockcore_extend(brief, &outer, 600), 0);
    hp_sleep_ms(900);
    assert_true(lockcore_remaining_ms(&in1) > 1000);
    assert_int_equal(lockcore_acquire(other, "nest:t", &x), LOCKCORE_ELOCKED);
    assert_int_equal(lockcore_release(c, &in1), 0);
    assert_int_equal(lockcore_acquire(other, "nest:t", &x), LOCKCORE_ELOCKED);
    assert_int_equal(lockcore_release(c, &outer), 0);
    assert_int_equal(lockcore_acquire(other, "nest:t", &x), 0);
    assert_int_equal(lockcore_release(other, &x), 0);
    lockcore_client_free(other);
    lockcore_client_free(brief);
    lockcore_client_free(c);
}

/* Processes that each nest three holds of one resource: one owner at a
 * time, the same token at every depth. */
static int reentrant_worker(struct fixture *f, int who)
{
    struct tune t = {.ttl_ms = 2000, .retry_count = -1, .wait_ms = 30000};
    lockcore_client *c = client_on(f->urls, f->n, &t);
    if (c == NULL)
        return 2;
    int rcode = 0;
    for (int it = 0; it < 8 && rcode == 0; it++) {
        struct lockcore_lock outer, in1, in2;
        if (lockcore_reentrant_acquire(c, "nest", NULL, &outer) != 0) {
            rcode = 3;
            break;
        }
        uint64_t enter = now_us();
        int r1 = lockcore_reentrant_acquire(c, "nest", outer.id, &in1);
        int r2 = lockcore_reentrant_acquire(c, "nest", outer.id, &in2);
        if (r1 != 0 || r2 != 0 || in1.token != outer.token || in2.token != outer.token) {
            fprintf(stderr, "worker %d: nested: %d %d tokens %llu %llu %llu: %s\n", who, r1, r2,
                    (unsigned long long)outer.token, (unsigned long long)in1.token,
                    (unsigned long long)in2.token, lockcore_errmsg(c));
            fprintf(stderr, "  id %s attempts %u %u %u nodes_ok %u %u %u\n", outer.id, outer.attempts,
                    in1.attempts, in2.attempts, outer.nodes_ok, in1.nodes_ok, in2.nodes_ok);
            for (int i = 0; i < NODES; i++) {
                redisReply *r = rh_command(f->rc, i, "HGETALL {nest}:holds");
                char v[64];
                rh_get(f->rc, i, "nest", v, sizeof(v));
                fprintf(stderr, "  node %d: %s n=%s t=%s\n", i, v,
                        r && r->elements >= 2 ? r->element[1]->str : "-",
                        r && r->elements >= 4 ? r->element[3]->str : "-");
                freeReplyObject(r);
            }
            rcode = 4;
        }
        lockcore_release(c, &in2);
        lockcore_release(c, &in1);
        hp_sleep_ms(2); /* still held by the outer hold */
        log_section(f->log, "nest", who, enter, section_end(&outer), outer.token);
        lockcore_release(c, &outer);
    }
    lockcore_client_free(c);
    return rcode;
}

static void test_kinds_reentrant_processes_with_restart(void **state)
{
    struct fixture *f = *state;
    enum { W = 6 };
    pid_t pids[W];
    for (int i = 0; i < W; i++)
        pids[i] = spawn(reentrant_worker, f, i);
    hp_sleep_ms(300);
    assert_int_equal(rh_restart(f->rc, 4, 1), 0);
    assert_int_equal(reap(pids, W, 60000), W);
    struct section s[W * 8 + 4];
    size_t n = read_log(f->log, s, W * 8 + 4);
    assert_int_equal(n, W * 8);
    assert_int_equal(max_overlap(s, n, "nest"), 1);
    check_tokens(s, n, "nest");
}

/* A kind's release tells the plain waiters of its resources, as a plain
 * release does: a notified waiter (LOCKCORE_WAIT_NOTIFY) of a member of a
 * set, or of a reentrant lock, gets the lock within a few ms of the last
 * release, not when its wait for the holder's TTL ends (up to a second). */
struct waited {
    int done, rc;
    long long at;
    struct lockcore_lock lock;
};

static void waited_cb(lockcore_client *c, int rc, const struct lockcore_lock *lock, void *arg)
{
    (void)c;
    struct waited *w = arg;
    w->done++; /* how many times it ran: once */
    w->rc = rc;
    w->at = hp_now_ms();
    w->lock = *lock;
}

/* What a waiter asks for (wake_after_release_of): a plain lock of
 * resource, the set of resource and "<resource>:2", the read or the write
 * side of the read-write lock resource, a permit of the semaphore of one
 * permit resource. */
enum want { W_PLAIN, W_SET, W_READ, W_WRITE, W_PERMIT };

/* Start an acquisition of what `want` says on resource. */
static int start_want(lockcore_client *c, const char *resource, enum want want, lockcore_cb cb, void *arg)
{
    char second[LOCKCORE_RESOURCE_MAX + 3];
    snprintf(second, sizeof(second), "%s:2", resource);
    const char *set[] = {resource, second};
    return want == W_SET      ? lockcore_multi_acquire_async(c, set, 2, cb, arg)
           : want == W_READ   ? lockcore_rw_acquire_async(c, resource, 0, cb, arg)
           : want == W_WRITE  ? lockcore_rw_acquire_async(c, resource, 1, cb, arg)
           : want == W_PERMIT ? lockcore_sem_acquire_async(c, resource, 1, cb, arg)
                              : lockcore_acquire_async(c, resource, cb, arg);
}

/* A waiter that asks while held is refused, waits, and is granted when
 * the holder releases: how long after the release. */
static long long wake_after_release_of(lockcore_client *holder, struct lockcore_lock *held,
                                       lockcore_client *waiter, const char *resource, enum want want)
{
    struct waited w = {0};
    assert_int_equal(start_want(waiter, resource, want, waited_cb, &w), 0);
    long long end = hp_now_ms() + 300;
    while (hp_now_ms() < end)
        lockcore_run(waiter, 20); /* refused, then waiting for a notice */
    assert_int_equal(w.done, 0);
    long long released = hp_now_ms();
    assert_int_equal(lockcore_release(holder, held), 0);
    end = hp_now_ms() + 5000;
    while (!w.done && hp_now_ms() < end)
        lockcore_run(waiter, 20);
    assert_int_equal(w.done, 1);
    assert_int_equal(w.rc, 0);
    assert_int_equal(lockcore_release(waiter, &w.lock), 0);
    return w.at - released;
}

static long long wake_after_release(lockcore_client *holder, struct lockcore_lock *held,
                                    lockcore_client *waiter, const char *resource)
{
    return wake_after_release_of(holder, held, waiter, resource, W_PLAIN);
}

static void test_kinds_release_tells_plain_waiters(void **state)
{
    struct fixture *f = *state;
    /* Both clients notified (a polling client's release tells nobody, as
     * a plain one); the waiter's polling alone would take 2 s. */
    struct lockcore_options o;
    lockcore_options_init(&o);
    o.nodes = f->urls;
    o.n_nodes = f->n;
    o.ttl_ms = 10000;
    o.retry_count = -1;
    o.wait_ms = 8000;
    o.retry_delay_ms = 2000;
    o.request_timeout_ms = 100;
    o.wait_mode = LOCKCORE_WAIT_NOTIFY;
    lockcore_client *w = NULL, *c = NULL;
    char err[256];
    assert_int_equal(lockcore_client_new(&o, &w, err, sizeof(err)), 0);
    assert_int_equal(lockcore_client_new(&o, &c, err, sizeof(err)), 0);
    const char *set[] = {"q:a", "q:b"};
    struct lockcore_lock m, r1, r2;
    assert_int_equal(lockcore_multi_acquire(c, set, 2, &m), 0);
    long long ms = wake_after_release(c, &m, w, "q:b");
    fprintf(stderr, "plain waiter of a set's member granted %lld ms after the release\n", ms);
    assert_true(ms < 200);
    assert_int_equal(lockcore_reentrant_acquire(c, "q:r", NULL, &r1), 0);
    assert_int_equal(lockcore_reentrant_acquire(c, "q:r", r1.id, &r2), 0);
    assert_int_equal(lockcore_release(c, &r2), 0); /* one hold left: no notice */
    ms = wake_after_release(c, &r1, w, "q:r");
    fprintf(stderr, "plain waiter of a reentrant lock granted %lld ms after the last release\n", ms);
    assert_true(ms < 200);
    lockcore_client_free(w);
    lockcore_client_free(c);
}

/* Every kind waits in the nodes' queue when refused, and a release wakes
 * it: a set when a member is released. Its polling alone would take 2 s. */
static void test_kinds_every_kind_waits_in_line(void **state)
{
    struct fixture *f = *state;
    struct lockcore_options o;
    lockcore_options_init(&o);
    o.nodes = f->urls;
    o.n_nodes = f->n;
    o.ttl_ms = 10000;
    o.retry_count = -1;
    o.wait_ms = 8000;
    o.retry_delay_ms = 2000;
    o.request_timeout_ms = 100;
    static const int modes[] = {LOCKCORE_WAIT_NOTIFY, LOCKCORE_WAIT_FAIR};
    for (int m = 0; m < 2; m++) {
        o.wait_mode = modes[m];
        lockcore_client *w = NULL, *c = NULL;
        char err[256];
        assert_int_equal(lockcore_client_new(&o, &w, err, sizeof(err)), 0);
        assert_int_equal(lockcore_client_new(&o, &c, err, sizeof(err)), 0);
        char res[32];
        struct lockcore_lock l;
        snprintf(res, sizeof(res), "line:set:%d", m);
        assert_int_equal(lockcore_acquire(c, res, &l), 0);
        long long ms = wake_after_release_of(c, &l, w, res, W_SET);
        fprintf(stderr, "%s: a set granted %lld ms after the release of a member\n", m ? "fair" : "notify",
                ms);
        assert_true(ms < 1000);
        /* A reader waits for the writer, a writer for the last reader. */
        snprintf(res, sizeof(res), "line:rw:%d", m);
        assert_int_equal(lockcore_rw_acquire(c, res, 1, &l), 0);
        ms = wake_after_release_of(c, &l, w, res, W_READ);
        fprintf(stderr, "%s: a reader granted %lld ms after the writer's release\n", m ? "fair" : "notify",
                ms);
        assert_true(ms < 1000);
        assert_int_equal(lockcore_rw_acquire(c, res, 0, &l), 0);
        ms = wake_after_release_of(c, &l, w, res, W_WRITE);
        fprintf(stderr, "%s: a writer granted %lld ms after the last reader's release\n",
                m ? "fair" : "notify", ms);
        assert_true(ms < 1000);
        /* A semaphore's waiter, when a permit is released: that permit is
         * kept for it and named. */
        snprintf(res, sizeof(res), "line:sem:%d", m);
        assert_int_equal(lockcore_sem_acquire(c, res, 1, &l), 0);
        ms = wake_after_release_of(c, &l, w, res, W_PERMIT);
        fprintf(stderr, "%s: a semaphore's waiter granted %lld ms after a permit's release\n",
                m ? "fair" : "notify", ms);
        assert_true(ms < 1000);
        lockcore_client_free(w);
        lockcore_client_free(c);
    }
}

/* Whether no node has key (EXISTS; for a queue, an empty one is no key),
 * within 2 s: what a canceled waiter sent on its way out has run. */
static int gone_everywhere(struct fixture *f, const char *key)
{
    long long end = hp_now_ms() + 2000;
    for (;;) {
        int left = 0;
        for (unsigned i = 0; i < f->n; i++) {
            redisReply *r = rh_command(f->rc, i, "EXISTS %s", key);
            left += r != NULL && r->type == REDIS_REPLY_INTEGER && r->integer != 0;
            if (r)
                freeReplyObject(r);
        }
        if (left == 0)
            return 1;
        if (hp_now_ms() >= end) {
            fprintf(stderr, "%s still on %d nodes\n", key, left);
            return 0;
        }
        hp_sleep_ms(20);
    }
}

/* An extension's callback that cancels a waiter of its client. */
struct cancel_from_cb {
    struct waited *target;
    int n, target_done_before;
    int calls, rc; /* its own */
    struct lockcore_lock lock;
};

static void cancel_in_cb(lockcore_client *c, int rc, const struct lockcore_lock *lock, void *arg)
{
    struct cancel_from_cb *x = arg;
    x->calls++;
    x->rc = rc;
    x->lock = *lock;
    x->target_done_before = x->target->done;
    x->n = lockcore_cancel(c, waited_cb, x->target);
}

/* lockcore_cancel ends a waiting acquisition of every kind: its callback
 * runs with LOCKCORE_ECANCELED before the call returns, it leaves every
 * queue (and a writer its intent) without the waiter's client running
 * again, and the holder's release keeps nothing for it: a newcomer is
 * granted at once. */
static void test_kinds_cancel_ends_a_waiter_of_every_kind(void **state)
{
    struct fixture *f = *state;
    struct lockcore_options o;
    lockcore_options_init(&o);
    o.nodes = f->urls;
    o.n_nodes = f->n;
    o.ttl_ms = 10000;
    o.retry_count = -1;
    o.wait_ms = 8000;
    o.request_timeout_ms = 200;
    static const int modes[] = {LOCKCORE_WAIT_NOTIFY, LOCKCORE_WAIT_FAIR};
    static const enum want wants[] = {W_PLAIN, W_SET, W_READ, W_WRITE, W_PERMIT};
    lockcore_client *holder = NULL, *w = NULL, *late = NULL;
    char err[256];
    assert_int_equal(lockcore_client_new(&o, &holder, err, sizeof(err)), 0);
    o.retry_count = 0;
    assert_int_equal(lockcore_client_new(&o, &late, err, sizeof(err)), 0);
    o.retry_count = -1;
    for (int m = 0; m < 2; m++) {
        o.wait_mode = modes[m];
        assert_int_equal(lockcore_client_new(&o, &w, err, sizeof(err)), 0);
        for (int k = 0; k < 5; k++) {
            enum want want = wants[k];
            char res[32], second[48], key[64];
            snprintf(res, sizeof(res), "cancel:%d:%d", m, k);
            snprintf(second, sizeof(second), "%s:2", res);
            const char *set[] = {res, second};
            struct lockcore_lock held, got;
            int rc = want == W_SET      ? lockcore_acquire(holder, second, &held)
                     : want == W_READ   ? lockcore_rw_acquire(holder, res, 1, &held)
                     : want == W_WRITE  ? lockcore_rw_acquire(holder, res, 0, &held)
                     : want == W_PERMIT ? lockcore_sem_acquire(holder, res, 1, &held)
                                        : lockcore_acquire(holder, res, &held);
            assert_int_equal(rc, 0);
            struct waited wt = {0}, other = {0};
            assert_int_equal(start_want(w, res, want, waited_cb, &wt), 0);
            long long end = hp_now_ms() + 300;
            while (hp_now_ms() < end)
                lockcore_run(w, 20); /* refused, in line */
            assert_int_equal(wt.done, 0);
            assert_int_equal(lockcore_cancel(w, waited_cb, &other), 0); /* not its argument */
            assert_int_equal(lockcore_cancel(w, waited_cb, &wt), 1);
            assert_int_equal(wt.done, 1);
            assert_int_equal(wt.rc, LOCKCORE_ECANCELED);
            assert_int_equal(lockcore_inflight(w), 0);
            assert_int_equal(lockcore_cancel(w, waited_cb, &wt), 0);
            snprintf(key, sizeof(key), "{%s}:waiters", res);
            assert_true(gone_everywhere(f, key));
            if (want == W_SET) {
                snprintf(key, sizeof(key), "{%s}:waiters", second);
                assert_true(gone_everywhere(f, key));
                assert_true(gone_everywhere(f, res)); /* the member it could take, rolled back */
            }
            if (want == W_WRITE) {
                snprintf(key, sizeof(key), "{%s}:wintent", res);
                assert_true(gone_everywhere(f, key));
            }
            assert_int_equal(lockcore_release(holder, &held), 0);
            rc = want == W_SET      ? lockcore_multi_acquire(late, set, 2, &got)
                 : want == W_READ   ? lockcore_rw_acquire(late, res, 0, &got)
                 : want == W_WRITE  ? lockcore_rw_acquire(late, res, 1, &got)
                 : want == W_PERMIT ? lockcore_sem_acquire(late, res, 1, &got)
                                    : lockcore_acquire(late, res, &got);
            assert_int_equal(rc, 0);
            assert_int_equal(lockcore_release(late, &got), 0);
        }
        lockcore_client_free(w);
    }
    /* From a callback: the canceled waiter's callback runs before the
     * lockcore call that ran it returns. */
    assert_int_equal(lockcore_client_new(&o, &w, err, sizeof(err)), 0);
    struct lockcore_lock held, mine;
    assert_int_equal(lockcore_acquire(holder, "cancel:cb", &held), 0);
    assert_int_equal(lockcore_acquire(w, "cancel:mine", &mine), 0);
    struct waited wt = {0};
    assert_int_equal(lockcore_acquire_async(w, "cancel:cb", waited_cb, &wt), 0);
    long long end = hp_now_ms() + 300;
    while (hp_now_ms() < end)
        lockcore_run(w, 20);
    struct cancel_from_cb x = {.target = &wt, .n = -1};
    assert_int_equal(lockcore_extend_async(w, &mine, 5000, cancel_in_cb, &x), 0);
    end = hp_now_ms() + 3000;
    while (x.n < 0 && hp_now_ms() < end)
        lockcore_run(w, 20);
    assert_int_equal(x.n, 1);
    assert_int_equal(x.target_done_before, 0);
    assert_int_equal(wt.done, 1);
    assert_int_equal(wt.rc, LOCKCORE_ECANCELED);
    assert_true(gone_everywhere(f, "{cancel:cb}:waiters"));
    assert_int_equal(lockcore_release(holder, &held), 0);
    lockcore_client_free(w);
    assert_int_equal(lockcore_cancel(NULL, waited_cb, NULL), -EINVAL);
    assert_int_equal(lockcore_cancel(holder, NULL, NULL), -EINVAL);
    lockcore_client_free(late);
    lockcore_client_free(holder);
}

/* ---- read-write ---- */

static void test_kinds_rw_readers_share_writer_waits(void **state)
{
    struct fixture *f = *state;
    struct tune t = {.ttl_ms = 3000, .retry_count = 0};
    lockcore_client *c = client_on(f->urls, f->n, &t);
    assert_non_null(c);
    struct lockcore_lock r1, r2, r3, w, w2;
    assert_int_equal(lockcore_rw_acquire(c, "doc", 0, &r1), 0);
    assert_int_equal(lockcore_rw_acquire(c, "doc", 0, &r2), 0);
    assert_true(r1.flags & LOCKCORE_LOCK_READ);
    assert_int_equal(r1.token, 0); /* no write was ever granted */
    struct lockcore_node_status st[NODES];
    hp_sleep_ms(50); /* granted at a majority: the others may still be running it */
    assert_int_equal(lockcore_rw_status(c, "doc", st, NODES), NODES);
    for (int i = 0; i < NODES; i++) {
        assert_int_equal(st[i].holds, 2); /* two live readers */
        assert_string_equal(st[i].holder, "");
    }
    /* A writer is refused while readers hold; while it waits, new readers
     * are refused too: a stream of readers cannot starve it. */
    assert_int_equal(lockcore_rw_acquire(c, "doc", 1, &w), LOCKCORE_ELOCKED);
    assert_int_equal(lockcore_rw_acquire(c, "doc", 0, &r3), 0); /* it gave up: no intent left */
    assert_int_equal(lockcore_release(c, &r3), 0);
    struct tune tw = {.ttl_ms = 3000, .retry_count = -1, .wait_ms = 5000};
    lockcore_client *cw = client_on(f->urls, f->n, &tw);
    assert_non_null(cw);
    struct waited ww = {0};
    assert_int_equal(lockcore_rw_acquire_async(cw, "doc", 1, waited_cb, &ww), 0);
    long long until = hp_now_ms() + 300;
    while (hp_now_ms() < until)
        lockcore_run(cw, 20);
    assert_int_equal(ww.done, 0);
    assert_int_equal(lockcore_rw_acquire(c, "doc", 0, &r3), LOCKCORE_ELOCKED);
    assert_int_equal(lockcore_extend(c, &r1, 3000), 0);
    assert_int_equal(lockcore_release(c, &r1), 0);
    assert_int_equal(lockcore_release(c, &r2), 0);
    until = hp_now_ms() + 3000;
    while (!ww.done && hp_now_ms() < until)
        lockcore_run(cw, 20);
    assert_int_equal(ww.rc, 0);
    w = ww.lock;
    assert_true(w.flags & LOCKCORE_LOCK_WRITE);
    assert_true(w.token > 0);
    assert_int_equal(lockcore_rw_acquire(c, "doc", 0, &r3), LOCKCORE_ELOCKED);
    assert_int_equal(lockcore_acquire(c, "doc", &w2), LOCKCORE_ELOCKED);
    assert_int_equal(lockcore_extend(cw, &w, 3000), 0);
    assert_int_equal(lockcore_release(cw, &w), 0);
    lockcore_client_free(cw);
    /* A reader after a write carries at least its token; the next writer a
     * larger one. */
    assert_int_equal(lockcore_rw_acquire(c, "doc", 0, &r3), 0);
    assert_true(r3.token >= w.token);
    lockcore_keepalive *ka;
    assert_int_equal(lockcore_extend(c, &r3, 300), 0);
    assert_int_equal(lockcore_keepalive_start(c, &r3, 300, 150, NULL, NULL, &ka), 0);
    long long end = hp_now_ms() + 800;
    while (hp_now_ms() < end)
        lockcore_run(c, 50);
    assert_true(lockcore_keepalive_extensions(ka) >= 2);
    assert_int_equal(lockcore_keepalive_get(ka, &r3), 0);
    lockcore_keepalive_stop(ka);
    assert_int_equal(lockcore_release(c, &r3), 0);
    assert_int_equal(lockcore_rw_acquire(c, "doc", 1, &w2), 0);
    assert_true(w2.token > w.token);
    assert_int_equal(lockcore_release(c, &w2), 0);
    lockcore_client_free(c);
}

/* rw status names the readers (the first LOCKCORE_STATUS_READERS, the
 * soonest to expire first) and the writer that waits for them. */
static void test_kinds_rw_status_names_readers(void **state)
{
    struct fixture *f = *state;
    struct tune t = {.ttl_ms = 5000, .retry_count = 0};
    lockcore_client *c = client_on(f->urls, f->n, &t);
    assert_non_null(c);
    enum { READERS = LOCKCORE_STATUS_READERS + 2 };
    struct lockcore_lock r[READERS];
    for (int k = 0; k < READERS; k++) {
        assert_int_equal(lockcore_rw_acquire(c, "shelf", 0, &r[k]), 0);
        hp_sleep_ms(3); /* node time is in ms: expiries one after another */
    }
    struct lockcore_node_status st[NODES];
    /* Granted at a majority: the others may still be running it (bounded). */
    long long settle = hp_now_ms() + 3000;
    for (int all = 0; !all && hp_now_ms() < settle;) {
        assert_int_equal(lockcore_rw_status(c, "shelf", st, NODES), NODES);
        all = 1;
        for (int i = 0; i < NODES; i++)
            all &= st[i].holds == READERS;
        if (!all)
            hp_sleep_ms(20);
    }
    for (int i = 0; i < NODES; i++) {
        assert_int_equal(st[i].holds, READERS);
        for (int k = 0; k < LOCKCORE_STATUS_READERS; k++) {
            assert_string_equal(st[i].readers[k].id, r[k].id);
            assert_true(st[i].readers[k].pttl_ms > 0 && st[i].readers[k].pttl_ms <= 5000);
            if (k > 0)
                assert_true(st[i].readers[k].pttl_ms >= st[i].readers[k - 1].pttl_ms);
        }
        assert_string_equal(st[i].writer_waits, "");
    }
    /* The plain status of the resource lists no readers. */
    assert_int_equal(lockcore_status(c, "shelf", st, NODES), NODES);
    assert_string_equal(st[0].readers[0].id, "");

    /* A writer waits: every node names it, and it is the writer that
     * gets the lock once the readers left. */
    struct tune tw = {.ttl_ms = 5000, .retry_count = -1, .wait_ms = 5000};
    lockcore_client *cw = client_on(f->urls, f->n, &tw);
    assert_non_null(cw);
    struct waited ww = {0};
    assert_int_equal(lockcore_rw_acquire_async(cw, "shelf", 1, waited_cb, &ww), 0);
    long long until = hp_now_ms() + 300;
    while (hp_now_ms() < until)
        lockcore_run(cw, 20);
    assert_int_equal(ww.done, 0);
    assert_int_equal(lockcore_rw_status(c, "shelf", st, NODES), NODES);
    char waiting[LOCKCORE_ID_LEN + 1];
    snprintf(waiting, sizeof(waiting), "%s", st[0].writer_waits);
    assert_int_equal(strlen(waiting), LOCKCORE_ID_LEN);
    for (int i = 0; i < NODES; i++) {
        assert_string_equal(st[i].writer_waits, waiting);
        assert_int_equal(st[i].holds, READERS);
    }
    for (int k = 0; k < READERS; k++)
        assert_int_equal(lockcore_release(c, &r[k]), 0);
    until = hp_now_ms() + 3000;
    while (!ww.done && hp_now_ms() < until)
        lockcore_run(cw, 20);
    assert_int_equal(ww.rc, 0);
    char acq[LOCKCORE_ID_LEN + 1];
    acq_of(ww.lock.id, acq);
    assert_string_equal(acq, waiting); /* the intent named the writer's acquisition */
    hp_sleep_ms(50);
    assert_int_equal(lockcore_rw_status(c, "shelf", st, NODES), NODES);
    for (int i = 0; i < NODES; i++) {
        assert_string_equal(st[i].holder, ww.lock.id);
        assert_int_equal(st[i].holds, 0);
        assert_string_equal(st[i].readers[0].id, "");
        assert_string_equal(st[i].writer_waits, ""); /* granted: its intent went */
    }
    struct lockcore_lock w = ww.lock;
    assert_int_equal(lockcore_release(cw, &w), 0);
    lockcore_client_free(cw);
    lockcore_client_free(c);
}

#define RW_WRITES 6

/* Readers come back as soon as they leave, for as long as the writers
 * work: someone is always reading unless writers get in. */
static int rw_reader(struct fixture *f, int who)
{
    struct tune t = {.ttl_ms = 2000, .retry_count = -1, .wait_ms = 30000};
    lockcore_client *c = client_on(f->urls, f->n, &t);
    if (c == NULL)
        return 2;
    long long end = hp_now_ms() + 25000;
    int rcode = 0;
    char done[320];
    snprintf(done, sizeof(done), "%s.writers-done", f->log);
    while (hp_now_ms() < end && access(done, F_OK) != 0) {
        struct lockcore_lock l;
        int rc = lockcore_rw_acquire(c, "rw", 0, &l);
        if (rc != 0) {
            fprintf(stderr, "reader %d: %s: %s\n", who, lockcore_strerror(rc), lockcore_errmsg(c));
            rcode = 3;
            break;
        }
        uint64_t enter = now_us();
        hp_sleep_ms(15);
        log_section(f->log, "rw:r", who, enter, section_end(&l), l.token ? l.token : 1);
        lockcore_release(c, &l);
    }
    lockcore_client_free(c);
    return rcode;
}

static int rw_writer(struct fixture *f, int who)
{
    struct tune t = {.ttl_ms = 2000, .retry_count = -1, .wait_ms = 30000};
    lockcore_client *c = client_on(f->urls, f->n, &t);
    if (c == NULL)
        return 2;
    hp_sleep_ms(200); /* the readers are in first */
    for (int it = 0; it < RW_WRITES; it++) {
        struct lockcore_lock l;
        int rc = lockcore_rw_acquire(c, "rw", 1, &l);
        if (rc != 0) {
            fprintf(stderr, "writer %d: %s: %s\n", who, lockcore_strerror(rc), lockcore_errmsg(c));
            lockcore_client_free(c);
            return 3;
        }
        uint64_t enter = now_us();
        hp_sleep_ms(5);
        log_section(f->log, "rw:w", who, enter, section_end(&l), l.token);
        lockcore_release(c, &l);
        hp_sleep_ms(20);
    }
    lockcore_client_free(c);
    return 0;
}

/* A reader stopped past its TTL while holding: writers go in meanwhile. */
static int rw_pauser(struct fixture *f, int who)
{
    struct tune t = {.ttl_ms = 500, .retry_count = -1, .wait_ms = 10000};
    lockcore_client *c = client_on(f->urls, f->n, &t);
    if (c == NULL)
        return 2;
    struct lockcore_lock l;
    if (lockcore_rw_acquire(c, "rw", 0, &l) != 0)
        return 3;
    uint64_t enter = now_us();
    mark(f->log, "R pauser\n");
    hp_sleep_ms(2500);
    log_section(f->log, "rw:r", who, enter, section_end(&l), l.token ? l.token : 1);
    int lost = lockcore_remaining_ms(&l) == 0 && lockcore_extend(c, &l, 0) == LOCKCORE_ELOST;
    lockcore_client_free(c);
    return lost ? 0 : 5;
}

static void test_kinds_rw_processes_with_faults(void **state)
{
    struct fixture *f = *state;
    enum { R = 6, W = 2 };
    pid_t pids[R + W + 1];
    pids[R + W] = spawn(rw_pauser, f, 100);
    assert_int_equal(wait_mark(f->log, "R pauser", 10000), 0);
    assert_int_equal(kill(pids[R + W], SIGSTOP), 0);
    long long start = hp_now_ms();
    for (int i = 0; i < R; i++)
        pids[i] = spawn(rw_reader, f, i);
    for (int i = 0; i < W; i++)
        pids[R + i] = spawn(rw_writer, f, 10 + i);
    hp_sleep_ms(400);
    assert_int_equal(rh_restart(f->rc, 1, 1), 0);
    hp_sleep_ms(600);
    assert_int_equal(kill(pids[R + W], SIGCONT), 0);
    /* The writers finish while the readers keep coming. */
    assert_int_equal(reap(pids + R, W, 40000), W);
    long long writers_ms = hp_now_ms() - start;
    char done[320];
    snprintf(done, sizeof(done), "%s.writers-done", f->log);
    mark(done, "done\n");
    assert_int_equal(reap(pids, R, 30000), R);
    assert_int_equal(reap(pids + R + W, 1, 10000), 1);

    enum { MAXS = 4000 };
    struct section *s = calloc(MAXS, sizeof(*s));
    assert_non_null(s);
    size_t n = read_log(f->log, s, MAXS);
    unsigned reads = 0, writes = 0, most_readers = max_overlap(s, n, "rw:r");
    for (size_t i = 0; i < n; i++) {
        if (strcmp(s[i].res, "rw:w") != 0) {
            reads++;
            continue;
        }
        writes++;
        /* No section of anyone overlaps a write. */
        for (size_t j = 0; j < n; j++)
            if (j != i && s[j].enter < s[i].end && s[i].enter < s[j].end)
                fail_msg("a write [%llu, %llu] overlaps %s [%llu, %llu]", (unsigned long long)s[i].enter,
                         (unsigned long long)s[i].end, s[j].res, (unsigned long long)s[j].enter,
                         (unsigned long long)s[j].end);
    }
    fprintf(stderr, "%u reads (up to %u at once), %u writes, writers done in %lld ms\n", reads, most_readers,
            writes, writers_ms);
    assert_int_equal(writes, W * RW_WRITES);
    assert_true(most_readers >= 2); /* readers did share */
    check_tokens(s, n, "rw:w");
    /* A read that began after a write ended carries at least its token. */
    for (size_t i = 0; i < n; i++)
        for (size_t j = 0; j < n; j++)
            if (strcmp(s[i].res, "rw:w") == 0 && strcmp(s[j].res, "rw:r") == 0 && s[i].end <= s[j].enter)
                assert_true(s[j].token >= s[i].token);
    free(s);
}

/* ---- waiting in line: what a waiter leaves behind, and who goes first ----
 * One process, a client per party: a client whose loop the test stops
 * running is a program that works without calling lockcore (a blocking
 * caller without a keep-alive), so what its calls left unsent stays
 * unsent. Bounds are at most half of what the defect costs (a
 * reservation, a refresh of a place, a TTL), far above a handoff's few
 * round trips. */

/* A client of the fixture's nodes that waits in wait_mode, its place in a
 * line lasting queue_ttl_ms (0: the default). */
static lockcore_client *client_mode(struct fixture *f, const struct tune *t, int wait_mode,
                                    uint64_t queue_ttl_ms)
{
    struct lockcore_options o;
    tune_options(f->urls, f->n, t, &o);
    o.wait_mode = wait_mode;
    if (queue_ttl_ms != 0)
        o.queue_ttl_ms = queue_ttl_ms;
    return client_new(&o);
}

/* Run every client's loop in turn, at least once and for about ms. */
static void run_all(lockcore_client *const *cs, int n, long ms)
{
    long long end = hp_now_ms() + ms;
    do
        for (int k = 0; k < n; k++)
            lockcore_run(cs[k], 1);
    while (hp_now_ms() < end);
}

/* ... until *done, up to ms; returns *done. */
static int run_until(lockcore_client *const *cs, int n, const int *done, long ms)
{
    long long end = hp_now_ms() + ms;
    while (!*done && hp_now_ms() < end)
        run_all(cs, n, 0);
    return *done;
}

/* The nodes where the line of `key` holds the acquisition of lock id
 * `id`, once it has left on every node or ms have passed. */
static unsigned in_line_after(struct fixture *f, const char *key, const char *id, long ms)
{
    char acq[LOCKCORE_ID_LEN + 1];
    acq_of(id, acq);
    long long end = hp_now_ms() + ms;
    for (;;) {
        unsigned n = 0;
        for (unsigned i = 0; i < f->n; i++) {
            redisReply *r = rh_command(f->rc, (int)i, "ZSCORE {%s}:waiters %s", key, acq);
            n += r != NULL && r->type == REDIS_REPLY_STRING;
            if (r != NULL)
                freeReplyObject(r);
        }
        if (n == 0 || hp_now_ms() >= end)
            return n;
        hp_sleep_ms(10);
    }
}

/* The nodes where the line of `key` holds a waiter other than the
 * acquisition of lock id `id`. */
static unsigned others_in_line(struct fixture *f, const char *key, const char *id)
{
    char acq[LOCKCORE_ID_LEN + 1];
    acq_of(id, acq);
    unsigned n = 0;
    for (unsigned i = 0; i < f->n; i++) {
        redisReply *r = rh_command(f->rc, (int)i, "ZRANGE {%s}:waiters 0 -1", key);
        int other = 0;
        for (size_t k = 0; r != NULL && r->type == REDIS_REPLY_ARRAY && k < r->elements; k++)
            other |= strcmp(r->element[k]->str, acq) != 0;
        n += other;
        if (r != NULL)
            freeReplyObject(r);
    }
    return n;
}

/* Waiters in the line of `key` on node i. */
static long long line_len(struct fixture *f, int i, const char *key)
{
    redisReply *r = rh_command(f->rc, i, "ZCARD {%s}:waiters", key);
    long long n = r != NULL && r->type == REDIS_REPLY_INTEGER ? r->integer : -1;
    if (r != NULL)
        freeReplyObject(r);
    return n;
}

/* Run the clients until the line of `key` holds at least n waiters on
 * every node (up to 5 s). */
static void run_until_in_line(struct fixture *f, lockcore_client *const *cs, int k, const char *key,
                              long long n)
{
    long long end = hp_now_ms() + 5000;
    for (;;) {
        unsigned ok = 0;
        for (unsigned i = 0; i < f->n; i++)
            ok += line_len(f, (int)i, key) >= n;
        if (ok == f->n)
            return;
        if (hp_now_ms() >= end)
            fail_msg("the line of '%s' holds %lld waiters on %u of %u nodes only", key, n, ok, f->n);
        run_all(cs, k, 10);
    }
}

/* The nodes where a writer's intent on `res` is left, once it is gone
 * everywhere or ms have passed. */
static unsigned intent_after(struct fixture *f, const char *res, long ms)
{
    char key[160], v[64];
    snprintf(key, sizeof(key), "{%s}:wintent", res);
    long long end = hp_now_ms() + ms;
    for (;;) {
        unsigned n = 0;
        for (unsigned i = 0; i < f->n; i++) {
            rh_get(f->rc, (int)i, key, v, sizeof(v));
            n += v[0] != '\0';
        }
        if (n == 0 || hp_now_ms() >= end)
            return n;
        hp_sleep_ms(10);
    }
}

/* The nodes where `key` holds the acquisition of lock id `id` (a
 * reservation a release made for it, or its grant). */
static unsigned kept_for(struct fixture *f, const char *key, const char *id)
{
    char acq[LOCKCORE_ID_LEN + 1], v[LOCKCORE_ID_LEN + 8];
    acq_of(id, acq);
    unsigned n = 0;
    for (unsigned i = 0; i < f->n; i++) {
        rh_get(f->rc, (int)i, key, v, sizeof(v));
        if (strlen(v) == LOCKCORE_ID_LEN) {
            acq_of(v, v);
            n += strcmp(v, acq) == 0;
        }
    }
    return n;
}

/* A semaphore's driver leaves its line when it is done, and what its
 * callback queues for that is sent before the call returns, not at the
 * client's next run, which a caller that works without a keep-alive never
 * makes. Left at the head of the line, the holder kept every fair waiter
 * out (a fair semaphore of 2 admitted one holder at a time), and a
 * notified release named it and kept the next permit for it. */
static void test_kinds_sem_holder_leaves_the_line_before_the_call_returns(void **state)
{
    struct fixture *f = *state;
    /* Fair: even the first attempt takes a place, which a grant cuts to
     * the TTL (10 s); the second comer gives up after 2 s. */
    struct tune t = {.ttl_ms = 10000, .retry_count = -1, .wait_ms = 2000, .request_timeout_ms = 1000};
    lockcore_client *h1 = client_mode(f, &t, LOCKCORE_WAIT_FAIR, 0);
    lockcore_client *h2 = client_mode(f, &t, LOCKCORE_WAIT_FAIR, 0);
    assert_non_null(h1);
    assert_non_null(h2);
    struct lockcore_lock l1, l2;
    assert_int_equal(lockcore_sem_acquire(h1, "hl", 2, &l1), 0);
    int rc = lockcore_sem_acquire(h2, "hl", 2, &l2);
    if (rc != 0)
        fail_msg(
            "fair: a second holder of 2 permits was refused (%s: %s); the first holder in line on %u nodes",
            lockcore_strerror(rc), lockcore_errmsg(h2), in_line_after(f, "hl", l1.id, 0));
    assert_int_equal(in_line_after(f, "hl", l1.id, 1000), 0);
    assert_int_equal(lockcore_release(h2, &l2), 0);
    assert_int_equal(lockcore_release(h1, &l1), 0);
    lockcore_client_free(h2);
    lockcore_client_free(h1);

    /* Notified: H waits behind X1 and X2 and is granted X1's permit in
     * its callback; its client is not run again. D waits behind it, and
     * X2's release must name D: kept for H, the permit would wait out
     * X2's reservation (2 x 1.5 s). */
    struct tune tx = {.ttl_ms = 10000, .request_timeout_ms = 1500},
                tw = {.ttl_ms = 10000, .retry_count = -1, .request_timeout_ms = 1000};
    lockcore_client *x1 = client_mode(f, &tx, LOCKCORE_WAIT_NOTIFY, 30000);
    lockcore_client *x2 = client_mode(f, &tx, LOCKCORE_WAIT_NOTIFY, 30000);
    lockcore_client *h = client_mode(f, &tw, LOCKCORE_WAIT_NOTIFY, 30000);
    lockcore_client *d = client_mode(f, &tw, LOCKCORE_WAIT_NOTIFY, 30000);
    assert_true(x1 && x2 && h && d);
    struct lockcore_lock p1, p2;
    assert_int_equal(lockcore_sem_acquire(x1, "hn", 2, &p1), 0);
    assert_int_equal(lockcore_sem_acquire(x2, "hn", 2, &p2), 0);
    struct waited wh = {0}, wd = {0};
    assert_int_equal(lockcore_sem_acquire_async(h, "hn", 2, waited_cb, &wh), 0);
    lockcore_client *xh[] = {x1, x2, h};
    run_until_in_line(f, xh, 3, "hn", 1);
    assert_int_equal(lockcore_release(x1, &p1), 0);
    assert_true(run_until(xh, 3, &wh.done, 3000));
    assert_int_equal(wh.rc, 0);
    /* From here on H's loop is not run. */
    assert_int_equal(lockcore_sem_acquire_async(d, "hn", 2, waited_cb, &wd), 0);
    lockcore_client *xd[] = {x1, x2, d};
    run_all(xd, 3, 300);
    assert_int_equal(wd.done, 0);
    long long released = hp_now_ms();
    assert_int_equal(lockcore_release(x2, &p2), 0);
    unsigned for_h = kept_for(f, p2.resource, wh.lock.id);
    run_until(xd, 3, &wd.done, 1500);
    if (for_h > 0 || !wd.done)
        fail_msg("notified: the permit released was kept for the holder on %u nodes; the waiter %s", for_h,
                 wd.done ? "was granted" : "was not granted within 1.5 s");
    assert_int_equal(wd.rc, 0);
    fprintf(stderr, "notified: the waiter behind a holder granted %lld ms after the release\n",
            wd.at - released);
    assert_int_equal(lockcore_release(d, &wd.lock), 0);
    assert_int_equal(lockcore_release(h, &wh.lock), 0);
    lockcore_client_free(d);
    lockcore_client_free(h);
    lockcore_client_free(x2);
    lockcore_client_free(x1);
}

/* A semaphore's waiter whose client is freed leaves the line (sent before
 * the connections close), as a plain waiter does. Left in a fair line, it
 * was named by the next release, which kept its place, and the waiter
 * behind it waited with the permit free until that place lapsed (up to
 * queue_ttl_ms, 6 s here; a refresh of a place every 2 s). */
static void test_kinds_sem_freed_waiter_leaves_the_line(void **state)
{
    struct fixture *f = *state;
    struct tune t = {.ttl_ms = 10000, .retry_count = -1, .request_timeout_ms = 1000};
    lockcore_client *h = client_mode(f, &t, LOCKCORE_WAIT_FAIR, 6000);
    lockcore_client *d1 = client_mode(f, &t, LOCKCORE_WAIT_FAIR, 6000);
    lockcore_client *d2 = client_mode(f, &t, LOCKCORE_WAIT_FAIR, 6000);
    assert_true(h && d1 && d2);
    struct lockcore_lock held;
    assert_int_equal(lockcore_sem_acquire(h, "fl", 1, &held), 0);
    lockcore_client *hd1[] = {h, d1}, *all[] = {h, d1, d2};
    run_all(hd1, 1, 20);
    assert_int_equal(in_line_after(f, "fl", held.id, 1000), 0); /* the holder left */
    struct waited w1 = {0}, w2 = {0};
    assert_int_equal(lockcore_sem_acquire_async(d1, "fl", 1, waited_cb, &w1), 0);
    run_until_in_line(f, hd1, 2, "fl", 1);
    redisReply *r = rh_command(f->rc, 0, "ZRANGE {fl}:waiters 0 -1");
    assert_true(r != NULL && r->type == REDIS_REPLY_ARRAY && r->elements == 1);
    char first[LOCKCORE_ID_LEN + 1];
    snprintf(first, sizeof(first), "%s", r->element[0]->str);
    freeReplyObject(r);
    assert_int_equal(lockcore_sem_acquire_async(d2, "fl", 1, waited_cb, &w2), 0);
    run_until_in_line(f, all, 3, "fl", 2);
    lockcore_client_free(d1);
    assert_int_equal(w1.done, 1);
    assert_int_equal(w1.rc, LOCKCORE_ECANCELED);
    long long released = hp_now_ms();
    assert_int_equal(lockcore_release(h, &held), 0);
    lockcore_client *hd2[] = {h, d2};
    run_until(hd2, 2, &w2.done, 1500);
    if (!w2.done)
        fail_msg(
            "the waiter behind a freed one was not granted within 1.5 s of the release; the freed one in "
            "line on %u nodes",
            in_line_after(f, "fl", first, 0));
    assert_int_equal(w2.rc, 0);
    fprintf(stderr, "the waiter behind a freed one granted %lld ms after the release\n", w2.at - released);
    assert_int_equal(in_line_after(f, "fl", first, 1000), 0);
    assert_int_equal(lockcore_release(d2, &w2.lock), 0);
    lockcore_client_free(d2);
    lockcore_client_free(h);
}

/* Two permits released at once both reach the waiters. Both releases name
 * the first waiter, which takes one permit and hands the other back to the
 * next waiter when it leaves the line; before, that permit stayed kept for
 * it until the reservation lapsed (notified: 2 x 1.5 s, the releasers'
 * request timeouts) or the next waiter refreshed its place (fair: every
 * 10 s), with the permit free. */
static void test_kinds_sem_permits_released_together_reach_two_waiters(void **state)
{
    struct fixture *f = *state;
    static const int modes[] = {LOCKCORE_WAIT_NOTIFY, LOCKCORE_WAIT_FAIR};
    for (int m = 0; m < 2; m++) {
        struct tune th = {.ttl_ms = 20000, .request_timeout_ms = 1500},
                    tw = {.ttl_ms = 20000, .retry_count = -1, .request_timeout_ms = 1000};
        lockcore_client *h1 = client_mode(f, &th, modes[m], 30000),
                        *h2 = client_mode(f, &th, modes[m], 30000);
        lockcore_client *d1 = client_mode(f, &tw, modes[m], 30000),
                        *d2 = client_mode(f, &tw, modes[m], 30000);
        assert_true(h1 && h2 && d1 && d2);
        char res[32];
        snprintf(res, sizeof(res), "burst:%d", m);
        struct lockcore_lock l1, l2;
        assert_int_equal(lockcore_sem_acquire(h1, res, 2, &l1), 0);
        assert_int_equal(lockcore_sem_acquire(h2, res, 2, &l2), 0);
        struct waited w1 = {0}, w2 = {0};
        lockcore_client *cs[] = {h1, h2, d1, d2};
        run_all(cs, 2, 20); /* the holders left the line */
        assert_int_equal(in_line_after(f, res, l1.id, 1000) + in_line_after(f, res, l2.id, 1000), 0);
        assert_int_equal(lockcore_sem_acquire_async(d1, res, 2, waited_cb, &w1), 0);
        run_until_in_line(f, cs, 4, res, 1);
        assert_int_equal(lockcore_sem_acquire_async(d2, res, 2, waited_cb, &w2), 0);
        run_until_in_line(f, cs, 4, res, 2);
        run_all(cs, 4, 200); /* subscribed */
        assert_false(w1.done || w2.done);
        long long released = hp_now_ms();
        struct waited r1 = {0}, r2 = {0};
        assert_int_equal(lockcore_release_async(h1, &l1, waited_cb, &r1), 0);
        assert_int_equal(lockcore_release_async(h2, &l2, waited_cb, &r2), 0);
        long long end = released + 1500;
        while (!(w1.done && w2.done) && hp_now_ms() < end)
            run_all(cs, 4, 0);
        const char *mode = m ? "fair" : "notified";
        if (!w1.done || !w2.done)
            fail_msg("%s: two permits released together: the first waiter %s, the second %s within 1.5 s",
                     mode, w1.done ? "granted" : "not granted", w2.done ? "granted" : "not granted");
        assert_int_equal(w1.rc, 0);
        assert_int_equal(w2.rc, 0);
        assert_string_not_equal(w1.lock.resource, w2.lock.resource);
        fprintf(stderr, "%s: two permits released together: granted after %lld and %lld ms\n", mode,
                w1.at - released, w2.at - released);
        assert_int_equal(lockcore_release(d1, &w1.lock), 0);
        assert_int_equal(lockcore_release(d2, &w2.lock), 0);
        for (int k = 0; k < 4; k++)
            lockcore_client_free(cs[k]);
    }
}

/* A writer that stops waiting takes its intent away, or readers are
 * refused for the writer's TTL though nobody waits to write: one that gives
 * up in the blocking call (the clearing is sent before the call returns)
 * and one whose client is freed while it waits (sent before the
 * connections close). The writer's client is not run again. */
static void test_kinds_rw_writer_that_stops_waiting_clears_its_intent(void **state)
{
    struct fixture *f = *state;
    struct tune tr = {.ttl_ms = 10000, .request_timeout_ms = 1000},
                tg = {.ttl_ms = 10000, .retry_count = -1, .wait_ms = 300, .request_timeout_ms = 1000},
                tf = {.ttl_ms = 10000, .retry_count = -1, .request_timeout_ms = 1000};
    lockcore_client *r = client_on(f->urls, f->n, &tr);
    lockcore_client *gives_up = client_on(f->urls, f->n, &tg), *freed = client_on(f->urls, f->n, &tf);
    assert_true(r && gives_up && freed);
    struct lockcore_lock rl, wl;
    for (int k = 0; k < 2; k++) {
        const char *res = k ? "intent:freed" : "intent:gave-up";
        assert_int_equal(lockcore_rw_acquire(r, res, 0, &rl), 0);
        if (k == 0) {
            assert_int_equal(lockcore_rw_acquire(gives_up, res, 1, &wl), LOCKCORE_ELOCKED);
        } else {
            struct waited ww = {0};
            assert_int_equal(lockcore_rw_acquire_async(freed, res, 1, waited_cb, &ww), 0);
            long long end = hp_now_ms() + 5000;
            while (intent_after(f, res, 0) < f->n && hp_now_ms() < end)
                lockcore_run(freed, 10);
            assert_int_equal(intent_after(f, res, 0), f->n);
            assert_int_equal(ww.done, 0);
            lockcore_client_free(freed);
            assert_int_equal(ww.done, 1);
            assert_int_equal(ww.rc, LOCKCORE_ECANCELED);
        }
        assert_int_equal(lockcore_release(r, &rl), 0);
        unsigned left = intent_after(f, res, 1000);
        int rc = lockcore_rw_acquire(r, res, 0, &rl);
        if (left > 0 || rc != 0)
            fail_msg("%s: the writer's intent left on %u nodes; a reader then: %s", res, left,
                     rc ? lockcore_errmsg(r) : "granted");
        assert_int_equal(lockcore_release(r, &rl), 0);
    }
    lockcore_client_free(gives_up);
    lockcore_client_free(r);
}

/* A writer granted at its first attempt by a majority, while a reader on
 * one node refused it there (and that node took its intent), clears the
 * intent there: the grant's count of nodes is not where it is known to be
 * gone. */
static void test_kinds_rw_writer_granted_by_a_majority_clears_a_minority_s_intent(void **state)
{
    struct fixture *f = *state;
    struct tune t = {.ttl_ms = 10000, .request_timeout_ms = 1000};
    lockcore_client *c = client_on(f->urls, f->n, &t);
    assert_non_null(c);
    const char *res = "intent:minority";
    /* A reader on node 0 alone, live for 10 s on that node's clock. */
    redisReply *r = rh_command(f->rc, 0, "EVAL %s 1 %s",
                               "local t = redis.call('TIME') "
                               "return redis.call('ZADD', KEYS[1], t[1] * 1000 + 10000, 'planted')",
                               "{intent:minority}:readers");
    assert_non_null(r);
    assert_int_equal(r->type, REDIS_REPLY_INTEGER);
    freeReplyObject(r);
    struct lockcore_lock wl;
    assert_int_equal(lockcore_rw_acquire(c, res, 1, &wl), 0);
    assert_int_equal(wl.attempts, 1);
    assert_true(wl.nodes_ok < f->n);
    unsigned left = intent_after(f, res, 1000);
    if (left > 0)
        fail_msg("the granted writer's intent left on %u nodes", left);
    assert_int_equal(lockcore_release(c, &wl), 0);
    lockcore_client_free(c);
}

/* Fair readers are kept out by a writer's intent when the writer does not
 * wait in their line (a polling writer): they used to look at their line
 * only, and overlapping fair readers starved such a writer (docs/lockcore.md,
 * "No writer starvation"). */
static void test_kinds_rw_fair_readers_wait_for_a_polling_writer(void **state)
{
    struct fixture *f = *state;
    struct tune tr = {.ttl_ms = 10000, .request_timeout_ms = 1000},
                tw = {.ttl_ms = 10000, .retry_count = -1, .wait_ms = 5000, .request_timeout_ms = 1000};
    lockcore_client *r1 = client_mode(f, &tr, LOCKCORE_WAIT_FAIR, 0),
                    *r2 = client_mode(f, &tr, LOCKCORE_WAIT_FAIR, 0);
    lockcore_client *w = client_mode(f, &tw, LOCKCORE_WAIT_POLL, 0);
    assert_true(r1 && r2 && w);
    struct lockcore_lock l1, l2;
    assert_int_equal(lockcore_rw_acquire(r1, "fw", 0, &l1), 0);
    struct waited ww = {0};
    assert_int_equal(lockcore_rw_acquire_async(w, "fw", 1, waited_cb, &ww), 0);
    long long end = hp_now_ms() + 5000;
    while (intent_after(f, "fw", 0) < f->n && hp_now_ms() < end)
        lockcore_run(w, 10);
    assert_int_equal(intent_after(f, "fw", 0), f->n);
    assert_int_equal(ww.done, 0);
    /* A reader that comes while the writer waits is refused... */
    int rc = lockcore_rw_acquire(r2, "fw", 0, &l2);
    if (rc == 0)
        fail_msg("a fair reader was admitted while a polling writer waited");
    assert_int_equal(rc, LOCKCORE_ELOCKED);
    /* ... and once the one inside leaves, the writer gets in. */
    assert_int_equal(lockcore_release(r1, &l1), 0);
    lockcore_client *cw[] = {w};
    assert_true(run_until(cw, 1, &ww.done, 3000));
    assert_int_equal(ww.rc, 0);
    assert_true(ww.lock.flags & LOCKCORE_LOCK_WRITE);
    assert_int_equal(lockcore_release(w, &ww.lock), 0);
    lockcore_client_free(w);
    lockcore_client_free(r2);
    lockcore_client_free(r1);
}

/* Readers that wait in line do not starve a polling writer either: the
 * last reader's release keeps the key for the first waiter, and a reader
 * it kept it for was admitted whatever the writer's intent said. Now the
 * release keeps nothing while a writer that is not in the line waits, and
 * the writer, polling, gets in before the reader in line (both modes). */
static void test_kinds_rw_readers_in_line_wait_for_a_polling_writer(void **state)
{
    struct fixture *f = *state;
    static const int modes[] = {LOCKCORE_WAIT_NOTIFY, LOCKCORE_WAIT_FAIR};
    for (int m = 0; m < 2; m++) {
        char res[32];
        snprintf(res, sizeof(res), "pw:%d", m);
        struct tune tr = {.ttl_ms = 10000, .retry_count = -1, .wait_ms = 8000, .request_timeout_ms = 1000},
                    tw = {.ttl_ms = 10000,
                          .retry_count = -1,
                          .wait_ms = 5000,
                          .request_timeout_ms = 1000,
                          .retry_delay_ms = 200};
        lockcore_client *r1 = client_mode(f, &tr, modes[m], 0), *r2 = client_mode(f, &tr, modes[m], 0);
        lockcore_client *w = client_mode(f, &tw, LOCKCORE_WAIT_POLL, 0);
        assert_true(r1 && r2 && w);
        struct lockcore_lock l1;
        assert_int_equal(lockcore_rw_acquire(r1, res, 0, &l1), 0);
        struct waited ww = {0}, wr = {0};
        assert_int_equal(lockcore_rw_acquire_async(w, res, 1, waited_cb, &ww), 0);
        long long end = hp_now_ms() + 5000;
        while (intent_after(f, res, 0) < f->n && hp_now_ms() < end)
            lockcore_run(w, 10);
        assert_int_equal(intent_after(f, res, 0), f->n);
        /* A reader that waits in line behind the writer's intent. */
        assert_int_equal(lockcore_rw_acquire_async(r2, res, 0, waited_cb, &wr), 0);
        lockcore_client *both[] = {w, r2};
        run_all(both, 2, 300);
        assert_int_equal(wr.done, 0);
        assert_int_equal(lockcore_release(r1, &l1), 0);
        assert_true(run_until(both, 2, &ww.done, 3000));
        assert_int_equal(ww.rc, 0);
        if (wr.done)
            fail_msg("%s: the reader in line was admitted before the polling writer",
                     m ? "fair" : "notified");
        assert_int_equal(lockcore_release(w, &ww.lock), 0);
        assert_true(run_until(both, 2, &wr.done, 3000));
        assert_int_equal(wr.rc, 0);
        assert_int_equal(lockcore_release(r2, &wr.lock), 0);
        lockcore_client_free(w);
        lockcore_client_free(r2);
        lockcore_client_free(r1);
    }
}

/* A waiting set is named by every release of a member it can already
 * have. Those wake-ups are not retries (a set spent its retry_count on
 * them and gave up in a third of a second), and they do not put off the
 * attempts that count either (it would never give up). Here a waiter at
 * the head of a line makes a counted attempt every queue_ttl_ms / 3
 * (500 ms), so with retry_count 3 it gives up after about 1.5 s: not
 * before two of those, and long before 6 s, while another client takes
 * and releases the member it can have. With the suite's short backoff: an
 * attempt that races a handoff of a finds the nodes naming different
 * holders (a on some, b on others) and retries after the backoff, and in
 * line only one refusal per refresh period counts. */
static void test_kinds_multi_gives_up_by_its_retries_under_churn(void **state)
{
    struct fixture *f = *state;
    struct tune th = {.ttl_ms = 20000, .request_timeout_ms = 1000},
                ts = {.ttl_ms = 10000, .retry_count = 3, .request_timeout_ms = 50},
                tp = {.ttl_ms = 10000, .retry_count = -1, .request_timeout_ms = 50};
    lockcore_client *h = client_mode(f, &th, LOCKCORE_WAIT_NOTIFY, 1500);
    lockcore_client *s = client_mode(f, &ts, LOCKCORE_WAIT_NOTIFY, 1500);
    lockcore_client *p = client_mode(f, &tp, LOCKCORE_WAIT_NOTIFY, 1500);
    assert_true(h && s && p);
    struct lockcore_lock hb;
    assert_int_equal(lockcore_acquire(h, "gu:b", &hb), 0);
    const char *set[] = {"gu:a", "gu:b"};
    struct waited ws = {0};
    long long start = hp_now_ms();
    assert_int_equal(lockcore_multi_acquire_async(s, set, 2, waited_cb, &ws), 0);
    lockcore_client *cs[] = {s, p};
    run_until_in_line(f, cs, 1, "gu:a", 1);
    int takes = 0;
    while (!ws.done && hp_now_ms() - start < 6000) {
        struct waited wp = {0};
        assert_int_equal(lockcore_acquire_async(p, "gu:a", waited_cb, &wp), 0);
        run_until(cs, 2, &wp.done, 6000);
        assert_int_equal(wp.rc, 0);
        takes++;
        run_all(cs, 2, 10);
        struct waited rp = {0};
        assert_int_equal(lockcore_release_async(p, &wp.lock, waited_cb, &rp), 0);
        run_until(cs, 2, &rp.done, 6000);
    }
    long long waited = ws.at - start;
    if (!ws.done)
        fail_msg("the set did not give up in 6 s (a member taken %d times meanwhile)", takes);
    assert_int_equal(ws.rc, LOCKCORE_ELOCKED);
    fprintf(stderr, "the set gave up after %lld ms, its member a taken %d times meanwhile\n", waited, takes);
    if (waited < 1000)
        fail_msg("the set gave up after %lld ms, its member a taken %d times meanwhile", waited, takes);
    assert_true(takes >= 3);
    assert_int_equal(lockcore_release(h, &hb), 0);
    lockcore_client_free(p);
    lockcore_client_free(s);
    lockcore_client_free(h);
}

/* A notified set that waits for b, first in a's line, is named by each
 * release of a, and refused on b it hands a back to the next waiter at
 * once: it kept the reservation it could not use, and every handoff of a
 * waited for it to lapse (2 x 1.5 s, the releaser's request timeouts).
 * Each handoff of a here is granted within 1.5 s, while the set still
 * waits; and once b is free the set gets both. */
static void test_kinds_multi_waiting_set_does_not_stall_a_member(void **state)
{
    struct fixture *f = *state;
    struct tune th = {.ttl_ms = 20000, .request_timeout_ms = 1000},
                ts = {.ttl_ms = 10000, .retry_count = -1, .request_timeout_ms = 1000},
                tp = {.ttl_ms = 10000, .retry_count = -1, .request_timeout_ms = 1500};
    lockcore_client *h = client_mode(f, &th, LOCKCORE_WAIT_NOTIFY, 30000);
    lockcore_client *s = client_mode(f, &ts, LOCKCORE_WAIT_NOTIFY, 30000);
    lockcore_client *p[2] = {client_mode(f, &tp, LOCKCORE_WAIT_NOTIFY, 30000),
                             client_mode(f, &tp, LOCKCORE_WAIT_NOTIFY, 30000)};
    assert_true(h && s && p[0] && p[1]);
    struct lockcore_lock hb, held;
    assert_int_equal(lockcore_acquire(h, "st:b", &hb), 0);
    const char *set[] = {"st:a", "st:b"};
    struct waited ws = {0};
    assert_int_equal(lockcore_multi_acquire_async(s, set, 2, waited_cb, &ws), 0);
    lockcore_client *cs[] = {s, p[0], p[1]};
    run_until_in_line(f, cs, 1, "st:a", 1);
    assert_int_equal(lockcore_acquire(p[0], "st:a", &held), 0);
    for (int k = 1; k <= 3; k++) {
        lockcore_client *from = p[(k - 1) % 2], *to = p[k % 2];
        struct waited wt = {0};
        assert_int_equal(lockcore_acquire_async(to, "st:a", waited_cb, &wt), 0);
        /* Behind the set (and a holder that came from the line, which
         * keeps its place until its release). */
        run_until_in_line(f, cs, 3, "st:a", k == 1 ? 2 : 3);
        long long released = hp_now_ms();
        assert_int_equal(lockcore_release(from, &held), 0);
        run_until(cs, 3, &wt.done, 1500);
        if (!wt.done)
            fail_msg("handoff %d of a member of a waiting set: not granted within 1.5 s of the release", k);
        assert_int_equal(wt.rc, 0);
        assert_int_equal(ws.done, 0);
        fprintf(stderr, "handoff %d of a member of a waiting set: %lld ms\n", k, wt.at - released);
        held = wt.lock;
    }
    /* b is released while a is held, then a: the set gets both. */
    assert_int_equal(lockcore_release(h, &hb), 0);
    run_all(cs, 3, 100);
    int rrc = lockcore_release(p[1], &held);
    if (rrc != 0)
        fail_msg("release: %s", lockcore_errmsg(p[1]));
    assert_true(run_until(cs, 3, &ws.done, 3000));
    assert_int_equal(ws.rc, 0);
    assert_int_equal(lockcore_release(s, &ws.lock), 0);
    lockcore_client_free(p[1]);
    lockcore_client_free(p[0]);
    lockcore_client_free(s);
    lockcore_client_free(h);
}

/* A re-entry whose hold is gone goes on as a first hold, and in fair
 * waiting a first hold waits in line: it does not take the lock ahead of
 * a waiter already there (its next attempt was the one that ignores the
 * line). The waiter in line is not run meanwhile: a slow one keeps its
 * turn, as the fair lock promises. */
static void test_kinds_reentrant_gone_hold_waits_in_line(void **state)
{
    struct fixture *f = *state;
    struct tune ta = {.ttl_ms = 1000, .retry_count = -1, .wait_ms = 600, .request_timeout_ms = 500},
                tw = {.ttl_ms = 10000, .retry_count = -1, .request_timeout_ms = 1000};
    lockcore_client *a = client_mode(f, &ta, LOCKCORE_WAIT_FAIR, 30000);
    lockcore_client *w = client_mode(f, &tw, LOCKCORE_WAIT_FAIR, 30000);
    assert_true(a && w);
    struct lockcore_lock hold, again;
    assert_int_equal(lockcore_reentrant_acquire(a, "gone", NULL, &hold), 0);
    struct waited ww = {0};
    assert_int_equal(lockcore_reentrant_acquire_async(w, "gone", NULL, waited_cb, &ww), 0);
    lockcore_client *cw[] = {w};
    long long end = hp_now_ms() + 5000;
    while (others_in_line(f, "gone", hold.id) < f->n && hp_now_ms() < end)
        run_all(cw, 1, 10);
    assert_int_equal(others_in_line(f, "gone", hold.id), f->n);
    assert_int_equal(ww.done, 0);
    /* The hold runs out (on the nodes a little after the client's
     * validity, which counts from before its request); the lock is free,
     * the waiter first in line. */
    end = hp_now_ms() + 5000;
    unsigned held = f->n;
    while (held > 0 && hp_now_ms() < end) {
        hp_sleep_ms(20);
        held = 0;
        for (unsigned i = 0; i < f->n; i++)
            held += rh_pttl(f->rc, (int)i, "gone") != -2;
    }
    assert_int_equal(held, 0);
    int rc = lockcore_reentrant_acquire(a, "gone", hold.id, &again);
    if (rc == 0)
        fail_msg("a re-entry whose hold was gone took the lock ahead of a waiter in line");
    assert_int_equal(rc, LOCKCORE_ELOCKED);
    assert_true(run_until(cw, 1, &ww.done, 3000));
    assert_int_equal(ww.rc, 0);
    assert_int_equal(lockcore_release(w, &ww.lock), 0);
    lockcore_client_free(w);
    lockcore_client_free(a);
}

/* Another process holds a lock of a kind and passes its id on: the lock
 * is rebuilt with lockcore_lock_from_id and the kind's flag, extended and
 * released by the nodes' say. */
static void test_kinds_locks_from_ids(void **state)
{
    struct fixture *f = *state;
    struct tune t = {.ttl_ms = 3000, .retry_count = 0};
    lockcore_client *c = client_on(f->urls, f->n, &t);
    lockcore_client *d = client_on(f->urls, f->n, &t);
    assert_non_null(c);
    assert_non_null(d);
    struct lockcore_lock m, r, r2, rd, x;
    const char *set[] = {"id:a", "id:b"};
    assert_int_equal(lockcore_multi_acquire(c, set, 2, &m), 0);
    assert_int_equal(lockcore_lock_from_id(d, "id:a\nid:b", m.id, &x), 0);
    x.flags |= LOCKCORE_LOCK_MULTI;
    assert_int_equal(lockcore_extend(d, &x, 5000), 0);
    assert_int_equal(lockcore_release(d, &x), 0);
    assert_int_equal(lockcore_acquire(d, "id:b", &x), 0);
    assert_int_equal(lockcore_release(d, &x), 0);

    assert_int_equal(lockcore_reentrant_acquire(c, "id:r", NULL, &r), 0);
    assert_int_equal(lockcore_reentrant_acquire(d, "id:r", r.id, &r2), 0); /* a child joins */
    assert_int_equal(r2.token, r.token);
    assert_int_equal(lockcore_lock_from_id(d, "id:r", r2.id, &x), 0);
    x.flags |= LOCKCORE_LOCK_REENTRANT;
    assert_int_equal(lockcore_release(d, &x), 0); /* the child's hold, by its id */
    assert_int_equal(lockcore_acquire(d, "id:r", &x), LOCKCORE_ELOCKED);
    assert_int_equal(lockcore_release(c, &r), 0);
    assert_int_equal(lockcore_acquire(d, "id:r", &x), 0);
    assert_int_equal(lockcore_release(d, &x), 0);

    assert_int_equal(lockcore_rw_acquire(c, "id:rw", 0, &rd), 0);
    assert_int_equal(lockcore_lock_from_id(d, "id:rw", rd.id, &x), 0);
    x.flags |= LOCKCORE_LOCK_READ;
    assert_int_equal(lockcore_extend(d, &x, 5000), 0);
    assert_int_equal(lockcore_release(d, &x), 0);
    assert_int_equal(lockcore_rw_acquire(d, "id:rw", 1, &x), 0);
    assert_int_equal(lockcore_release(d, &x), 0);
    lockcore_client_free(d);
    lockcore_client_free(c);
}

/* The first acquisition of a kind on fresh nodes leaves its holder info:
 * what is pipelined behind a script's first use must not run before it
 * (an EVALSHA answered NOSCRIPT would be resent after it). */
static void test_kinds_first_use_keeps_holder_info(void **state)
{
    struct fixture *f = *state;
    struct lockcore_options o;
    lockcore_options_init(&o);
    o.nodes = f->urls;
    o.n_nodes = f->n;
    o.retry_count = 0;
    o.request_timeout_ms = 1000; /* a first use loads the scripts: slow on a busy machine */
    o.holder_info = "{\"who\":\"test\"}";
    lockcore_client *c = NULL;
    char err[256];
    assert_int_equal(lockcore_client_new(&o, &c, err, sizeof(err)), 0);
    struct lockcore_lock r, m;
    const char *set[] = {"hi:a", "hi:b"};
    assert_int_equal(lockcore_reentrant_acquire(c, "hi:r", NULL, &r), 0);
    assert_int_equal(lockcore_multi_acquire(c, set, 2, &m), 0);
    hp_sleep_ms(100);
    char got[64];
    const char *keys[] = {"{hi:r}:holder", "{hi:a}:holder", "{hi:b}:holder"};
    for (int k = 0; k < 3; k++)
        for (int i = 0; i < NODES; i++) {
            rh_get(f->rc, i, keys[k], got, sizeof(got));
            assert_string_equal(got, "{\"who\":\"test\"}");
        }
    lockcore_client_free(c);
}

/* ---- a waiter that stops: what it leaves behind ---- */

/* lockcore_cancel, from a callback, of an acquisition granted by the same
 * replies as the one whose callback runs (ended in this turn, its callback
 * not run yet), of every kind: its grant is released, its callback runs
 * once, with LOCKCORE_ECANCELED, and the operations in flight go on. A
 * semaphore's permit was finished a second time: the operations in flight
 * were dropped, the driver used after it was freed, and the permit left
 * held; a plain acquisition, and later a writer (whose callback is the
 * kind's own wrapper), got its callback with the grant its caller had
 * given up, which nobody released. */
static void test_kinds_cancel_of_a_grant_due_in_the_same_turn(void **state)
{
    struct fixture *f = *state;
    struct tune t = {.ttl_ms = 10000, .retry_count = -1, .wait_ms = 8000, .request_timeout_ms = 1000};
    lockcore_client *h = client_mode(f, &t, LOCKCORE_WAIT_NOTIFY, 0);
    lockcore_client *c = client_mode(f, &t, LOCKCORE_WAIT_NOTIFY, 0);
    assert_true(h && c);
    static const enum want wants[] = {W_PERMIT, W_PLAIN, W_SET, W_READ, W_WRITE};
    static const char *const names[] = {"semaphore", "plain", "set", "reader", "writer"};
    for (int k = 0; k < 5; k++) {
        char busy[32], first[32], res[32], key[64];
        snprintf(busy, sizeof(busy), "turn:busy:%d", k);
        snprintf(first, sizeof(first), "turn:first:%d", k);
        snprintf(res, sizeof(res), "turn:%d", k);
        struct lockcore_lock held;
        assert_int_equal(lockcore_acquire(h, busy, &held), 0);
        /* In flight throughout: a waiter of a lock held elsewhere. */
        struct waited wb = {0}, wt = {0};
        assert_int_equal(lockcore_acquire_async(c, busy, waited_cb, &wb), 0);
        lockcore_client *cs[] = {c};
        run_until_in_line(f, cs, 1, busy, 1);
        /* The first acquisition's command goes first on every connection,
         * the same kind's, so both are granted by the replies one turn
         * reads: it waits until they have all come. */
        struct cancel_from_cb x = {.target = &wt, .n = -1};
        assert_int_equal(start_want(c, first, wants[k], cancel_in_cb, &x), 0);
        assert_int_equal(start_want(c, res, wants[k], waited_cb, &wt), 0);
        long long end = hp_now_ms() + 5000;
        while (x.calls == 0 && hp_now_ms() < end) {
            assert_true(lockcore_run(c, 0) >= 0);
            if (x.calls == 0)
                hp_sleep_ms(30);
        }
        assert_int_equal(x.calls, 1);
        assert_int_equal(x.rc, 0);
        assert_int_equal(x.target_done_before, 0);
        run_all(cs, 1, 100); /* a second callback would come here */
        fprintf(
            stderr,
            "%s: canceled from a sibling's callback: cancel returned %d; its callback ran %d times, rc %d\n",
            names[k], x.n, wt.done, wt.rc);
        assert_int_equal(x.n, 1);
        assert_int_equal(wt.done, 1);
        assert_int_equal(wt.rc, LOCKCORE_ECANCELED);
        /* Nothing of it is left held. */
        if (wants[k] == W_PERMIT) {
            snprintf(key, sizeof(key), "%s:permit:0", res);
            assert_true(gone_everywhere(f, key));
            snprintf(key, sizeof(key), "{%s}:waiters", res);
            assert_true(gone_everywhere(f, key));
        } else if (wants[k] == W_READ) {
            snprintf(key, sizeof(key), "{%s}:readers", res);
            assert_true(gone_everywhere(f, key));
        } else {
            assert_true(gone_everywhere(f, res));
            snprintf(key, sizeof(key), "%s:2", res);
            assert_true(wants[k] != W_SET || gone_everywhere(f, key));
        }
        /* The waiter in flight goes on: the release of its lock grants it. */
        assert_int_equal(wb.done, 0);
        assert_int_equal(lockcore_release(h, &held), 0);
        assert_true(run_until(cs, 1, &wb.done, 3000));
        assert_int_equal(wb.rc, 0);
        assert_int_equal(lockcore_release(c, &wb.lock), 0);
        assert_int_equal(lockcore_release(c, &x.lock), 0);
    }
    lockcore_client_free(c);
    lockcore_client_free(h);
}

/* A keep-alive's on_lost that frees its client (deferred until the call
 * that ran it returns). */
static void free_on_lost(lockcore_client *c, int rc, const struct lockcore_lock *lock, void *arg)
{
    (void)rc, (void)lock;
    (*(int *)arg)++;
    lockcore_client_free(c);
}

/* A semaphore's driver due for its next round while its client is being
 * freed ends (no round starts then), and its callback cancels a sibling
 * driver, which ends at once: each callback runs once. The drivers' timer
 * walk went on to the sibling it had just freed (a use after free, which
 * the sanitizers and valgrind report). Here a keep-alive's on_lost frees
 * the client, in the same turn in which both drivers are due. */
static void test_kinds_sem_driver_cancels_a_sibling_as_the_client_is_freed(void **state)
{
    struct fixture *f = *state;
    struct tune th = {.ttl_ms = 20000, .request_timeout_ms = 1000},
                tc = {.ttl_ms = 300, .retry_count = -1, .request_timeout_ms = 200};
    lockcore_client *h = client_mode(f, &th, LOCKCORE_WAIT_NOTIFY, 0);
    lockcore_client *c = client_mode(f, &tc, LOCKCORE_WAIT_NOTIFY, 900); /* a refresh every 300 ms */
    assert_true(h && c);
    struct lockcore_lock held, kept;
    lockcore_keepalive *ka = NULL;
    int lost = 0;
    assert_int_equal(lockcore_sem_acquire(h, "sib", 1, &held), 0);
    assert_int_equal(lockcore_acquire(c, "sib:kept", &kept), 0);
    assert_int_equal(lockcore_keepalive_start(c, &kept, 0, 0, free_on_lost, &lost, &ka), 0);
    /* The second one started is first on the client's list of drivers. */
    struct waited w2 = {0};
    struct cancel_from_cb x = {.target = &w2, .n = -1};
    assert_int_equal(lockcore_sem_acquire_async(c, "sib", 1, waited_cb, &w2), 0);
    assert_int_equal(lockcore_sem_acquire_async(c, "sib", 1, cancel_in_cb, &x), 0);
    lockcore_client *cs[] = {c};
    run_until_in_line(f, cs, 1, "sib", 2);
    /* Both refused, waiting for their refresh, with nothing in flight: a
     * round whose reply came in the next turn would not be due in it. */
    long long end = hp_now_ms() + 2000;
    do
        lockcore_run(c, 1);
    while (lockcore_inflight(c) != 0 && hp_now_ms() < end);
    assert_int_equal(lockcore_inflight(c), 0);
    assert_int_equal(lost + x.calls + w2.done, 0);
    /* The loop is not run: the keep-alive's validity runs out and both
     * drivers are due, all in the next turn, which frees the client. */
    hp_sleep_ms(700);
    assert_true(lockcore_run(c, 0) >= 0);
    fprintf(stderr,
            "on_lost ran %d times; the driver's callback %d times (rc %d), its cancel returned %d; the "
            "sibling's callback %d times (rc %d)\n",
            lost, x.calls, x.rc, x.n, w2.done, w2.rc);
    assert_int_equal(lost, 1);
    assert_int_equal(x.calls, 1);
    assert_int_equal(x.rc, LOCKCORE_ECANCELED);
    assert_int_equal(x.n, 1);
    assert_int_equal(w2.done, 1);
    assert_int_equal(w2.rc, LOCKCORE_ECANCELED);
    assert_int_equal(lockcore_release(h, &held), 0);
    lockcore_client_free(h);
}

/* How a waiter named by a release (the lock, or a permit, kept for it)
 * stops waiting before its client has read the notice. */
enum stop { STOP_CANCEL, STOP_GIVE_UP };

#define NAMED_QUEUE_TTL_MS 6000 /* a place is refreshed every 2 s */
#define NAMED_WAIT_MS 1000      /* the waiter that gives up: its wait_ms */

/* H holds res; W1 waits for what `want` says (a set: res and "res:2"),
 * then W2 waits for res (a permit, for a permit), or nobody (!behind:
 * then a newcomer asks once). H releases, which names W1, and W1 stops
 * as `how` says: canceled at once, or given up at its deadline, its last
 * attempt refused just before the release. Returns the ms from W1's end
 * to the next one's grant. A release keeps the lock for the waiter it
 * names for 2 request timeouts (rt_ms). */
static long long named_waiter_stops(struct fixture *f, int mode, enum want want, enum stop how, int behind,
                                    uint64_t rt_ms, const char *res)
{
    struct tune th = {.ttl_ms = 10000, .request_timeout_ms = rt_ms},
                tw = {.ttl_ms = 10000,
                      .retry_count = -1,
                      .wait_ms = how == STOP_GIVE_UP ? NAMED_WAIT_MS : 0,
                      .request_timeout_ms = rt_ms},
                tn = {.ttl_ms = 10000, .retry_count = -1, .request_timeout_ms = rt_ms};
    lockcore_client *h = client_mode(f, &th, mode, NAMED_QUEUE_TTL_MS);
    lockcore_client *w1 = client_mode(f, &tw, mode, NAMED_QUEUE_TTL_MS);
    lockcore_client *next = client_mode(f, behind ? &tn : &th, mode, NAMED_QUEUE_TTL_MS);
    assert_true(h && w1 && next);
    enum want held_as = want == W_PERMIT ? W_PERMIT : W_PLAIN;
    struct lockcore_lock held;
    assert_int_equal(
        held_as == W_PERMIT ? lockcore_sem_acquire(h, res, 1, &held) : lockcore_acquire(h, res, &held), 0);
    struct waited o1 = {0}, o2 = {0};
    lockcore_client *cs[] = {w1, next};
    long long start = hp_now_ms();
    assert_int_equal(start_want(w1, res, want, waited_cb, &o1), 0);
    run_until_in_line(f, cs, 1, res, 1);
    if (behind) {
        assert_int_equal(start_want(next, res, held_as, waited_cb, &o2), 0);
        run_until_in_line(f, cs, 2, res, 2);
    }
    run_all(cs, behind ? 2 : 1, 200); /* subscribed */
    assert_int_equal(o1.done + o2.done, 0);
    if (how == STOP_GIVE_UP) {
        /* W1's last attempt, at its deadline: its refusals are read after
         * the release. */
        long long due = start + NAMED_WAIT_MS + 20;
        if (hp_now_ms() < due)
            hp_sleep_ms((int)(due - hp_now_ms()));
        assert_true(lockcore_run(w1, 0) >= 0);
        assert_int_equal(o1.done, 0);
        hp_sleep_ms(100);
    }
    assert_int_equal(lockcore_release(h, &held), 0);
    long long stopped = hp_now_ms();
    if (how == STOP_CANCEL) {
        assert_int_equal(lockcore_cancel(w1, waited_cb, &o1), 1);
        assert_int_equal(o1.rc, LOCKCORE_ECANCELED);
    } else {
        assert_true(run_until(cs, 1, &o1.done, 3000));
        assert_int_equal(o1.rc, LOCKCORE_ELOCKED);
        stopped = o1.at;
    }
    assert_int_equal(o1.done, 1);
    if (behind) {
        if (!run_until(&cs[1], 1, &o2.done, 5000))
            fail_msg("%s: the waiter behind one that stopped when named was not granted in 5 s", res);
    } else {
        o2.rc = lockcore_acquire(next, res, &o2.lock);
        o2.at = hp_now_ms();
    }
    if (o2.rc != 0)
        fail_msg("%s: the %s after one that stopped when named: %s", res, behind ? "waiter" : "newcomer",
                 lockcore_errmsg(next));
    assert_int_equal(lockcore_release(next, &o2.lock), 0);
    lockcore_client_free(next);
    lockcore_client_free(w1);
    lockcore_client_free(h);
    return o2.at - stopped;
}

/* A waiter canceled right after a release named it hands what the release
 * kept for it on, as the release would have: the waiter behind it is
 * named (plain: at once, well within a refresh of its place; a semaphore:
 * the permit kept for it is found by the next when its reservation ends,
 * a few request timeouts), and with nobody behind the lock is free at
 * once. The reservation used to stay, and the next waiter slept until it
 * refreshed its place (fair) or the reservation ended (notified), with
 * the lock free; a newcomer was refused meanwhile. */
static void test_kinds_cancel_of_a_named_waiter_hands_on_its_reservation(void **state)
{
    struct fixture *f = *state;
    static const int modes[] = {LOCKCORE_WAIT_NOTIFY, LOCKCORE_WAIT_FAIR};
    for (int m = 0; m < 2; m++) {
        const char *mode = m ? "fair" : "notified";
        char res[32];
        /* A 2 s reservation; a place refreshed every 2 s. */
        snprintf(res, sizeof(res), "named:plain:%d", m);
        long long ms = named_waiter_stops(f, modes[m], W_PLAIN, STOP_CANCEL, 1, 1000, res);
        fprintf(stderr, "%s: the waiter behind a canceled named one granted after %lld ms\n", mode, ms);
        if (ms > 500)
            fail_msg("%s: the waiter behind a canceled named one granted after %lld ms", mode, ms);
        snprintf(res, sizeof(res), "named:alone:%d", m);
        ms = named_waiter_stops(f, modes[m], W_PLAIN, STOP_CANCEL, 0, 1000, res);
        fprintf(stderr, "%s: a newcomer after a canceled named waiter granted after %lld ms\n", mode, ms);
        if (ms > 500)
            fail_msg("%s: a newcomer after a canceled named waiter granted after %lld ms", mode, ms);
        /* A 200 ms reservation. */
        snprintf(res, sizeof(res), "named:sem:%d", m);
        ms = named_waiter_stops(f, modes[m], W_PERMIT, STOP_CANCEL, 1, 100, res);
        fprintf(stderr, "%s: a semaphore's waiter behind a canceled named one granted after %lld ms\n", mode,
                ms);
        if (ms > 800)
            fail_msg("%s: a semaphore's waiter behind a canceled named one granted after %lld ms", mode, ms);
    }
}

/* A waiter whose wait_ms runs out right after a release named it (its
 * last attempt refused just before) hands the reservation on likewise: a
 * plain waiter and a set. */
static void test_kinds_waiter_that_gives_up_when_named_hands_on_its_reservation(void **state)
{
    struct fixture *f = *state;
    static const int modes[] = {LOCKCORE_WAIT_NOTIFY, LOCKCORE_WAIT_FAIR};
    static const enum want wants[] = {W_PLAIN, W_SET};
    for (int m = 0; m < 2; m++) {
        for (int k = 0; k < 2; k++) {
            const char *what = k ? "set" : "plain waiter";
            char res[32];
            snprintf(res, sizeof(res), "gave-up:%d:%d", m, k);
            long long ms = named_waiter_stops(f, modes[m], wants[k], STOP_GIVE_UP, 1, 1000, res);
            fprintf(stderr, "%s: the waiter behind a %s that gave up when named granted after %lld ms\n",
                    m ? "fair" : "notified", what, ms);
            if (ms > 500)
                fail_msg("%s: the waiter behind a %s that gave up when named granted after %lld ms",
                         m ? "fair" : "notified", what, ms);
        }
    }
}

/* In line, a semaphore's waiter counts at most one refused round per
 * refresh period (queue_ttl_ms / 3), as any waiter does (docs/fairness.md,
 * "Retries"): behind holders that keep their lock and permit alive with a
 * short TTL, it gives up after about the time a plain waiter does. Each of
 * its rounds counted, and its rounds come when the holder's lease would
 * run out: it spent retry_count in a few leases. */
static void test_kinds_sem_waiter_in_line_counts_a_round_per_refresh(void **state)
{
    struct fixture *f = *state;
    const uint64_t queue_ttl_ms = 3000; /* a refresh every second */
    struct tune th = {.ttl_ms = 400, .request_timeout_ms = 300},
                tw = {.ttl_ms = 400, .retry_count = 3, .request_timeout_ms = 300};
    lockcore_client *h = client_mode(f, &th, LOCKCORE_WAIT_NOTIFY, queue_ttl_ms);
    lockcore_client *wp = client_mode(f, &tw, LOCKCORE_WAIT_NOTIFY, queue_ttl_ms);
    lockcore_client *ws = client_mode(f, &tw, LOCKCORE_WAIT_NOTIFY, queue_ttl_ms);
    assert_true(h && wp && ws);
    struct lockcore_lock lp, ls;
    lockcore_keepalive *kp = NULL, *ks = NULL;
    assert_int_equal(lockcore_acquire(h, "counts", &lp), 0);
    assert_int_equal(lockcore_sem_acquire(h, "counts:sem", 1, &ls), 0);
    /* Extended every 150 ms or so: a lease of 250 to 400 ms left. */
    assert_int_equal(lockcore_keepalive_start(h, &lp, 0, 250, NULL, NULL, &kp), 0);
    assert_int_equal(lockcore_keepalive_start(h, &ls, 0, 250, NULL, NULL, &ks), 0);
    struct waited op = {0}, os = {0};
    long long start = hp_now_ms();
    assert_int_equal(lockcore_acquire_async(wp, "counts", waited_cb, &op), 0);
    assert_int_equal(lockcore_sem_acquire_async(ws, "counts:sem", 1, waited_cb, &os), 0);
    lockcore_client *cs[] = {h, wp, ws};
    long long end = start + 10000;
    while (!(op.done && os.done) && hp_now_ms() < end)
        run_all(cs, 3, 0);
    assert_int_equal(lockcore_keepalive_get(kp, NULL), 0); /* held throughout */
    assert_int_equal(lockcore_keepalive_get(ks, NULL), 0);
    assert_true(op.done && os.done);
    assert_int_equal(op.rc, LOCKCORE_ELOCKED);
    assert_int_equal(os.rc, LOCKCORE_ELOCKED);
    long long tp = op.at - start, ts = os.at - start;
    fprintf(stderr,
            "behind a holder kept alive: the plain waiter gave up after %lld ms (%u attempts), the "
            "semaphore's after %lld ms (%u attempts)\n",
            tp, op.lock.attempts, ts, os.lock.attempts);
    /* Four counted rounds, one per refresh period at most: 3 periods. */
    if (ts < (long long)(2 * (queue_ttl_ms / 3)) || 2 * ts < tp)
        fail_msg("the semaphore's waiter gave up after %lld ms, the plain one after %lld ms", ts, tp);
    lockcore_keepalive_stop(kp);
    lockcore_keepalive_stop(ks);
    assert_int_equal(lockcore_release(h, &lp), 0);
    assert_int_equal(lockcore_release(h, &ls), 0);
    lockcore_client_free(ws);
    lockcore_client_free(wp);
    lockcore_client_free(h);
}

int main(void)
{
    signal(SIGPIPE, SIG_IGN);
    /* One test alone, to repeat it: FENCELOCK_TEST_ONLY=<name pattern>. */
    if (getenv("FENCELOCK_TEST_ONLY") != NULL)
        cmocka_set_test_filter(getenv("FENCELOCK_TEST_ONLY"));
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_kinds_checker_sees_overlap, setup, teardown),
        cmocka_unit_test_setup_teardown(test_kinds_sem_room_of_three_with_faults, setup, teardown),
        cmocka_unit_test_setup_teardown(test_kinds_sem_status_shows_permits, setup, teardown),
        cmocka_unit_test_setup_teardown(test_kinds_every_kind_without_fencing, setup, teardown),
        cmocka_unit_test_setup_teardown(test_kinds_sem_async_in_flight, setup, teardown),
        cmocka_unit_test_setup_teardown(test_kinds_sem_counting_would_admit_three, setup, teardown),
        cmocka_unit_test_setup_teardown(test_kinds_multi_overlapping_sets_with_faults, setup, teardown),
        cmocka_unit_test_setup_teardown(test_kinds_multi_no_partial_hold, setup, teardown),
        cmocka_unit_test_setup_teardown(test_kinds_multi_tokens_mix_with_single, setup, teardown),
        cmocka_unit_test_setup_teardown(test_kinds_reentrant_counts_holds, setup, teardown),
        cmocka_unit_test_setup_teardown(test_kinds_scripts_go_by_function_or_sha, setup, teardown),
        cmocka_unit_test_setup_teardown(test_kinds_refused_functions_fall_back_to_scripts, setup, teardown),
        cmocka_unit_test_setup_teardown(test_kinds_reentrant_holds_survive_missed_minorities, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_kinds_reentrant_extend_never_shortens_the_hold, setup, teardown),
        cmocka_unit_test_setup_teardown(test_kinds_reentrant_processes_with_restart, setup, teardown),
        cmocka_unit_test_setup_teardown(test_kinds_release_tells_plain_waiters, setup, teardown),
        cmocka_unit_test_setup_teardown(test_kinds_every_kind_waits_in_line, setup, teardown),
        cmocka_unit_test_setup_teardown(test_kinds_cancel_ends_a_waiter_of_every_kind, setup, teardown),
        cmocka_unit_test_setup_teardown(test_kinds_rw_readers_share_writer_waits, setup, teardown),
        cmocka_unit_test_setup_teardown(test_kinds_rw_status_names_readers, setup, teardown),
        cmocka_unit_test_setup_teardown(test_kinds_rw_processes_with_faults, setup, teardown),
        cmocka_unit_test_setup_teardown(test_kinds_sem_holder_leaves_the_line_before_the_call_returns, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_kinds_sem_freed_waiter_leaves_the_line, setup, teardown),
        cmocka_unit_test_setup_teardown(test_kinds_sem_permits_released_together_reach_two_waiters, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_kinds_rw_writer_that_stops_waiting_clears_its_intent, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_kinds_rw_writer_granted_by_a_majority_clears_a_minority_s_intent,
                                        setup, teardown),
        cmocka_unit_test_setup_teardown(test_kinds_rw_fair_readers_wait_for_a_polling_writer, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_kinds_rw_readers_in_line_wait_for_a_polling_writer, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_kinds_multi_gives_up_by_its_retries_under_churn, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_kinds_multi_waiting_set_does_not_stall_a_member, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_kinds_reentrant_gone_hold_waits_in_line, setup, teardown),
        cmocka_unit_test_setup_teardown(test_kinds_locks_from_ids, setup, teardown),
        cmocka_unit_test_setup_teardown(test_kinds_first_use_keeps_holder_info, setup, teardown),
        cmocka_unit_test_setup_teardown(test_kinds_cancel_of_a_grant_due_in_the_same_turn, setup, teardown),
        cmocka_unit_test_setup_teardown(test_kinds_sem_driver_cancels_a_sibling_as_the_client_is_freed, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_kinds_cancel_of_a_named_waiter_hands_on_its_reservation, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_kinds_waiter_that_gives_up_when_named_hands_on_its_reservation,
                                        setup, teardown),
        cmocka_unit_test_setup_teardown(test_kinds_sem_waiter_in_line_counts_a_round_per_refresh, setup,
                                        teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
