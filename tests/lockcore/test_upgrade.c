/*
 * From fences per resource to fences in buckets, against real redis-server
 * nodes (docs/fencing.md, "Upgrading from fences per resource"). A client
 * of the old layout is played here by the very scripts that layout sent
 * (tests/lockcore/old-layout/), with its own protocol: round one, up to
 * three second rounds, the compare-and-delete release. It reads and
 * writes only each resource's own fence key "{key}:fence".
 *
 * What must hold: a resource locked before the upgrade never gets a
 * smaller token after it; while old and new clients share resources, new
 * clients in transition mode keep T1 and T2 for everyone; node restarts
 * with their data change nothing.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "fence_probe.h"
#include "old_layout_acquire.h"
#include "old_layout_raise.h"
#include "redis_harness.h"
#include <lockcore/lockcore.h>

#define NODES 5
#define HOUR_US (3600LL * 1000000)

struct fixture {
    struct rh_cluster *rc;
    char url_buf[NODES][256];
    const char *urls[NODES];
    char dir[256];
};

static int setup(void **state)
{
    struct fixture *f = calloc(1, sizeof(*f));
    assert_non_null(f);
    struct rh_options ro;
    rh_options_init(&ro);
    ro.persistent = 1; /* restarts keep the fences (appendfsync always) */
    assert_int_equal(rh_cluster_start(NODES, &ro, &f->rc), 0);
    for (int i = 0; i < NODES; i++) {
        snprintf(f->url_buf[i], sizeof(f->url_buf[i]), "%s", rh_url(f->rc, i));
        f->urls[i] = f->url_buf[i];
    }
    assert_int_equal(rh_mkdtemp("upgrade", f->dir, sizeof(f->dir)), 0);
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

static uint64_t wall_us(int64_t offset_us)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (uint64_t)((int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000 + offset_us);
}

static uint64_t mono_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000u + (uint64_t)ts.tv_nsec / 1000u;
}

/* ---- a client of the old layout ---- */

struct old_client {
    redisContext *ctx[NODES];
    int64_t offset_us; /* its clock against the real one */
    const char *ahead; /* proposal_ahead_max_ms, in µs ("0": a version without the bound) */
    uint64_t seen;     /* the largest fence it has seen */
    uint64_t rng;
};

static void old_connect(struct fixture *f, struct old_client *o, int64_t offset_us)
{
    memset(o, 0, sizeof(*o));
    o->offset_us = offset_us;
    o->ahead = "5000000";
    o->rng = mono_us() ^ (uint64_t)getpid();
    for (int i = 0; i < NODES; i++) {
        struct timeval tv = {1, 0};
        o->ctx[i] = redisConnectWithTimeout("127.0.0.1", rh_port(f->rc, i), tv);
        assert_non_null(o->ctx[i]);
        redisSetTimeout(o->ctx[i], tv);
    }
}

static void old_close(struct old_client *o)
{
    for (int i = 0; i < NODES; i++)
        if (o->ctx[i] != NULL)
            redisFree(o->ctx[i]);
}

/* One command on node i; a node that failed (restarted) is reconnected
 * once and counts as not answering this time. */
static redisReply *old_cmd(struct fixture *f, struct old_client *o, int i, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    redisReply *r = o->ctx[i] && !o->ctx[i]->err ? redisvCommand(o->ctx[i], fmt, ap) : NULL;
    va_end(ap);
    if (r == NULL) {
        if (o->ctx[i] != NULL)
            redisFree(o->ctx[i]);
        struct timeval tv = {1, 0};
        o->ctx[i] = redisConnectWithTimeout("127.0.0.1", rh_port(f->rc, i), tv);
        if (o->ctx[i] != NULL)
            redisSetTimeout(o->ctx[i], tv);
    }
    return r;
}

static uint64_t reply_u64(const redisReply *e)
{
    return e->type == REDIS_REPLY_STRING ? strtoull(e->str, NULL, 10) : 0;
}

static void old_release(struct fixture *f, struct old_client *o, const char *res, const char *id)
{
    for (int i = 0; i < NODES; i++) {
        redisReply *r =
            old_cmd(f, o, i, "EVAL %s 1 %s %s",
                    "if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) "
                    "end return 0",
                    res, id);
        if (r != NULL)
            freeReplyObject(r);
    }
}

/* The old layout's acquisition (one attempt): its token, or 0. */
static uint64_t old_acquire(struct fixture *f, struct old_client *o, const char *res, char id[41])
{
    for (int k = 0; k < 40; k++)
        id[k] = "0123456789abcdef"[(o->rng = o->rng * 6364136223846793005ULL + 1442695040888963407ULL) >> 60];
    id[40] = '\0';
    uint64_t now = wall_us(o->offset_us);
    uint64_t p = now > o->seen ? now : o->seen + 1;
    unsigned granted = 0, accepted = 0;
    uint64_t max = 0;
    for (int i = 0; i < NODES; i++) {
        redisReply *r = old_cmd(f, o, i, "EVAL %s 2 %s {%s}:fence %s 2000 %" PRIu64 " 604800000 %s",
                                old_layout_acquire, res, res, id, p, o->ahead);
        if (r != NULL && r->type == REDIS_REPLY_ARRAY && r->elements >= 3) {
            granted += r->element[0]->integer == 1;
            accepted += r->element[0]->integer == 1 && r->element[1]->integer == 1;
            uint64_t v = reply_u64(r->element[2]);
            max = v > max ? v : max;
        }
        if (r != NULL)
            freeReplyObject(r);
    }
    o->seen = max > o->seen ? max : o->seen;
    for (int round = 0; granted >= 3 && accepted < 3 && round < 3; round++) {
        p = max + 1;
        accepted = 0;
        for (int i = 0; i < NODES; i++) {
            redisReply *r =
                old_cmd(f, o, i, "EVAL %s 1 {%s}:fence %" PRIu64 " 604800000", old_layout_raise, res, p);
            if (r != NULL && r->type == REDIS_REPLY_ARRAY && r->elements == 2) {
                accepted += r->element[0]->integer == 1;
                uint64_t v = reply_u64(r->element[1]);
                max = v > max ? v : max;
            }
            if (r != NULL)
                freeReplyObject(r);
        }
        o->seen = max > o->seen ? max : o->seen;
    }
    if (granted >= 3 && accepted >= 3) {
        o->seen = p > o->seen ? p : o->seen;
        return p;
    }
    old_release(f, o, res, id);
    return 0;
}

/* ---- new clients ---- */

struct tuning {
    int64_t offset_us;
    int transition;
};

static uint64_t offset_clock(void *arg)
{
    return wall_us(((const struct tuning *)arg)->offset_us);
}

static lockcore_client *new_client(struct fixture *f, struct tuning *t)
{
    struct lockcore_options o;
    lockcore_options_init(&o);
    o.nodes = f->urls;
    o.n_nodes = NODES;
    o.ttl_ms = 2000;
    o.retry_count = 3; /* a node restarted under it: the first attempt fails */
    o.retry_delay_ms = 20;
    o.retry_jitter_ms = 20;
    o.request_timeout_ms = 300; /* tokens, not timeouts, are the point */
    o.fence_transition = t->transition;
    if (t->offset_us != 0) {
        o.clock_us = offset_clock;
        o.clock_arg = t;
    }
    lockcore_client *c = NULL;
    char err[256];
    if (lockcore_client_new(&o, &c, err, sizeof(err)) != 0)
        fail_msg("client: %s", err);
    return c;
}

static uint64_t new_grant(lockcore_client *c, const char *res)
{
    struct lockcore_lock l;
    if (lockcore_acquire(c, res, &l) != 0)
        fail_msg("acquire %s: %s", res, lockcore_errmsg(c));
    assert_int_equal(lockcore_release(c, &l), 0);
    return l.token;
}

static unsigned old_keys(struct fixture *f, const char *res)
{
    unsigned n = 0;
    for (int i = 0; i < NODES; i++) {
        redisReply *r = rh_command(f->rc, i, "EXISTS {%s}:fence", res);
        n += r != NULL && r->integer == 1;
        if (r != NULL)
            freeReplyObject(r);
    }
    return n;
}

/* Old fence keys on the nodes holding v with no expiry. */
static unsigned old_keys_kept(struct fixture *f, const char *res, uint64_t v)
{
    unsigned n = 0;
    for (int i = 0; i < NODES; i++) {
        redisReply *r = rh_command(f->rc, i, "GET {%s}:fence", res);
        redisReply *t = rh_command(f->rc, i, "PTTL {%s}:fence", res);
        n += r != NULL && r->type == REDIS_REPLY_STRING && strtoull(r->str, NULL, 10) == v && t != NULL &&
             t->integer == -1;
        if (r != NULL)
            freeReplyObject(r);
        if (t != NULL)
            freeReplyObject(t);
    }
    return n;
}

/* A resource last locked by a client of the old layout, whose token came
 * from a clock an hour ahead (a version without the bound on proposals
 * ahead of the nodes' clocks): a new client (whose clock is right, or an
 * hour behind) still gets a larger token, before and after the nodes
 * restart with their data. Reading the old key is what does it: with the
 * buckets alone the new tokens would be an hour or two smaller. A token
 * that far ahead of the nodes' clocks stays the resource's own, in its
 * old key, now without expiry, and never goes into the bucket: there it
 * would give every resource of the bucket tokens an hour ahead, which a
 * resource with a bound on tokens ahead refuses. A later grant within the
 * bound takes the bucket over, and the old key goes. */
static void test_upgrade_old_fences_are_respected(void **state)
{
    struct fixture *f = *state;
    struct old_client o;
    old_connect(f, &o, HOUR_US);
    o.ahead = "0";
    char id[41];
    uint64_t a = old_acquire(f, &o, "up:old", id);
    assert_true(a > wall_us(HOUR_US / 2));
    old_release(f, &o, "up:old", id);
    assert_int_equal(old_keys(f, "up:old"), NODES);
    old_close(&o);

    for (int i = 0; i < NODES; i++)
        assert_int_equal(rh_restart(f->rc, i, 1), 0);
    struct tuning behind = {.offset_us = -HOUR_US};
    lockcore_client *c = new_client(f, &behind);
    uint64_t b = new_grant(c, "up:old");
    assert_true(b > a);
    unsigned in_bucket = 0;
    for (int i = 0; i < NODES; i++)
        in_bucket += tf_bucket(f->rc, i, "", "up:old") >= b;
    assert_int_equal(in_bucket, 0);
    assert_true(old_keys_kept(f, "up:old", b) >= 3);
    /* Another resource of the bucket: a token of now. */
    char sibling[32];
    unsigned bk = fencing_bucket("up:old", 6);
    for (int i = 0;; i++) {
        snprintf(sibling, sizeof(sibling), "up:sib:%d", i);
        if (fencing_bucket(sibling, strlen(sibling)) == bk)
            break;
    }
    struct tuning right = {0};
    lockcore_client *r = new_client(f, &right);
    uint64_t before = wall_us(0);
    uint64_t s = new_grant(r, sibling);
    assert_true(s >= before && s < wall_us(0) + 1000000);
    lockcore_client_free(r);

    for (int i = 0; i < NODES; i++)
        assert_int_equal(rh_restart(f->rc, i, 1), 0);
    uint64_t c2 = new_grant(c, "up:old");
    assert_true(c2 > b);
    lockcore_client_free(c);
    c = new_client(f, &right);
    assert_true(new_grant(c, "up:old") > c2);
    /* An extension puts a token back where a node lost it: that far ahead,
     * into the resource's own key too, not the bucket. */
    struct lockcore_lock l;
    assert_int_equal(lockcore_acquire(c, "up:old", &l), 0);
    redisReply *x = rh_command(f->rc, 0, "DEL {up:old}:fence");
    freeReplyObject(x);
    assert_int_equal(lockcore_extend(c, &l, 5000), 0);
    x = rh_command(f->rc, 0, "GET {up:old}:fence");
    assert_true(x != NULL && x->type == REDIS_REPLY_STRING && strtoull(x->str, NULL, 10) == l.token);
    freeReplyObject(x);
    assert_true(tf_bucket(f->rc, 0, "", "up:old") < l.token);
    assert_int_equal(lockcore_release(c, &l), 0);
    lockcore_client_free(c);

    /* Within the bound, the bucket takes over and the old key goes. */
    uint64_t near = wall_us(1000000);
    for (int i = 0; i < NODES; i++) {
        redisReply *x = rh_command(f->rc, i, "SET {up:near}:fence %llu PX 600000", (unsigned long long)near);
        if (x != NULL)
            freeReplyObject(x);
    }
    c = new_client(f, &right);
    uint64_t n = new_grant(c, "up:near");
    assert_true(n > near);
    in_bucket = 0;
    for (int i = 0; i < NODES; i++)
        in_bucket += tf_bucket(f->rc, i, "", "up:near") == n;
    assert_true(in_bucket >= 3);
    assert_true(old_keys(f, "up:near") <= NODES - in_bucket);
    lockcore_client_free(c);
}

static void test_upgrade_transition_mode_keeps_old_clients_monotonic(void **state)
{
    struct fixture *f = *state;
    struct old_client o;
    old_connect(f, &o, -HOUR_US);
    char id[41];

    struct tuning transition = {.transition = 1};
    lockcore_client *c = new_client(f, &transition);
    uint64_t b = new_grant(c, "up:mixed");
    assert_true(old_keys(f, "up:mixed") >= 3);
    uint64_t a = old_acquire(f, &o, "up:mixed", id);
    assert_true(a > b);
    old_release(f, &o, "up:mixed", id);
    assert_true(new_grant(c, "up:mixed") > a);
    lockcore_client_free(c);

    struct tuning buckets = {0};
    c = new_client(f, &buckets);
    uint64_t d = new_grant(c, "up:alone");
    assert_int_equal(old_keys(f, "up:alone"), 0);
    uint64_t e = old_acquire(f, &o, "up:alone", id);
    assert_true(e != 0 && e < d); /* the old client went back */
    old_release(f, &o, "up:alone", id);
    lockcore_client_free(c);
    old_close(&o);
}

/* ---- many processes ---- */

/* One line per grant: resource index, when its attempt began and when it
 * completed (monotonic µs), its token. */
static void log_grant(const char *path, int res, uint64_t begin, uint64_t done, uint64_t token)
{
    char line[128];
    int n = snprintf(line, sizeof(line), "%d %" PRIu64 " %" PRIu64 " %" PRIu64 "\n", res, begin, done, token);
    int fd = open(path, O_WRONLY | O_APPEND | O_CREAT, 0644);
    if (fd < 0 || write(fd, line, (size_t)n) != n)
        _exit(3);
    close(fd);
}

struct grant {
    int res;
    uint64_t begin, done, token;
};

static int by_done(const void *a, const void *b)
{
    const struct grant *x = a, *y = b;
    return (x->done > y->done) - (x->done < y->done);
}

static int by_begin(const void *a, const void *b)
{
    const struct grant *x = a, *y = b;
    return (x->begin > y->begin) - (x->begin < y->begin);
}

static int by_token(const void *a, const void *b)
{
    const struct grant *x = a, *y = b;
    return (x->token > y->token) - (x->token < y->token);
}

/* T1 and T2 of the grants of one resource: no token twice; a grant whose
 * attempt began after another grant completed has the larger token.
 * Returns the number of violations (the first few printed). */
static unsigned check_grants(struct grant *g, size_t n, const char *what)
{
    unsigned bad = 0;
    qsort(g, n, sizeof(*g), by_token);
    for (size_t i = 1; i < n; i++)
        if (g[i].token == g[i - 1].token && bad++ < 5)
            fprintf(stderr, "%s: token %" PRIu64 " twice\n", what, g[i].token);
    /* Sweep the attempts in the order they began against the grants in the
     * order they completed: the largest token completed before each. */
    struct grant *done = malloc(n * sizeof(*g));
    assert_non_null(done);
    memcpy(done, g, n * sizeof(*g));
    qsort(done, n, sizeof(*g), by_done);
    qsort(g, n, sizeof(*g), by_begin);
    size_t k = 0;
    uint64_t max = 0;
    for (size_t i = 0; i < n; i++) {
        while (k < n && done[k].done < g[i].begin)
            max = done[k++].token > max ? done[k - 1].token : max;
        if (g[i].token <= max && bad++ < 5)
            fprintf(stderr, "%s: token %" PRIu64 " began after %" PRIu64 " was granted\n", what, g[i].token,
                    max);
    }
    free(done);
    return bad;
}

/* A child: old (the old layout's protocol) or new (lockcore, transition
 * mode or not), its clock off by offset_us, locking resources of res[]
 * until the parent has restarted its nodes (*done) and it has made 40
 * acquisitions, or until stop (monotonic µs: valgrind is slow). */
static void child(struct fixture *f, const char *log, int old, int transition, int64_t offset_us,
                  const char *const *res, int nres, uint64_t stop, const volatile int *done)
{
    struct old_client o;
    lockcore_client *c = NULL;
    struct tuning t = {.offset_us = offset_us, .transition = transition};
    if (old)
        old_connect(f, &o, offset_us);
    else
        c = new_client(f, &t);
    uint64_t rng = mono_us() ^ ((uint64_t)getpid() << 20);
    for (int n = 0; (!*done || n < 40) && mono_us() < stop; n++) {
        rng = rng * 6364136223846793005ULL + 1442695040888963407ULL;
        int r = (int)((rng >> 33) % (uint64_t)nres);
        uint64_t begin = mono_us(), token = 0;
        if (old) {
            char id[41];
            token = old_acquire(f, &o, res[r], id);
            if (token != 0) {
                log_grant(log, r, begin, mono_us(), token);
                old_release(f, &o, res[r], id);
            }
        } else {
            struct lockcore_lock l;
            if (lockcore_acquire(c, res[r], &l) == 0) {
                log_grant(log, r, begin, mono_us(), l.token);
                lockcore_release(c, &l);
            }
        }
    }
    if (old)
        old_close(&o);
    else
        lockcore_client_free(c);
    _exit(0);
}

struct role {
    int old, transition;
    int64_t offset_us;
};

/* Run the roles at once, restarting node 1 with its data and then node 3
 * with its data or without (keep), ms apart; then check every resource's
 * grants. */
static void run_roles(struct fixture *f, const struct role *roles, int n, const char *const *res, int nres,
                      int ms, int keep, const char *tag)
{
    char log[320];
    snprintf(log, sizeof(log), "%s/%s.log", f->dir, tag);
    uint64_t stop = mono_us() + 60ULL * 1000000;
    int *done = mmap(NULL, sizeof(int), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    assert_true(done != MAP_FAILED);
    *done = 0;
    pid_t pid[16];
    for (int i = 0; i < n; i++) {
        pid[i] = fork();
        assert_true(pid[i] >= 0);
        if (pid[i] == 0)
            child(f, log, roles[i].old, roles[i].transition, roles[i].offset_us, res, nres, stop, done);
    }
    hp_sleep_ms(ms);
    assert_int_equal(rh_restart(f->rc, 1, 1), 0);
    hp_sleep_ms(ms);
    assert_int_equal(rh_restart(f->rc, 3, keep), 0);
    hp_sleep_ms(ms);
    __atomic_store_n(done, 1, __ATOMIC_SEQ_CST);
    for (int i = 0; i < n; i++) {
        int st;
        assert_int_equal(waitpid(pid[i], &st, 0), pid[i]);
        assert_true(WIFEXITED(st) && WEXITSTATUS(st) == 0);
    }
    munmap(done, sizeof(int));
    FILE *fp = fopen(log, "r");
    assert_non_null(fp);
    size_t cap = 1 << 16, total = 0;
    struct grant *all = malloc(cap * sizeof(*all));
    assert_non_null(all);
    struct grant g;
    while (total < cap &&
           fscanf(fp, "%d %" SCNu64 " %" SCNu64 " %" SCNu64, &g.res, &g.begin, &g.done, &g.token) == 4)
        all[total++] = g;
    fclose(fp);
    unsigned bad = 0;
    struct grant *mine = malloc(cap * sizeof(*mine));
    assert_non_null(mine);
    for (int r = 0; r < nres; r++) {
        size_t k = 0;
        for (size_t i = 0; i < total; i++)
            if (all[i].res == r)
                mine[k++] = all[i];
        fprintf(stderr, "%s: %s: %zu grants\n", tag, res[r], k);
        assert_true(k >= 20);
        bad += check_grants(mine, k, res[r]);
    }
    free(mine);
    free(all);
    assert_int_equal(bad, 0);
}

/* Names whose fences share one bucket, and one that does not. */
static void same_bucket(char names[4][32])
{
    snprintf(names[0], 32, "up:0");
    unsigned b = fencing_bucket(names[0], strlen(names[0]));
    int found = 1;
    for (int i = 1; found < 3; i++) {
        char n[32];
        snprintf(n, sizeof(n), "up:%d", i);
        if (fencing_bucket(n, strlen(n)) == b)
            snprintf(names[found++], 32, "%s", n);
    }
    snprintf(names[3], 32, "up:other");
    assert_true(fencing_bucket(names[3], strlen(names[3])) != b);
}

/* Old clients and new clients in transition mode on the same resources
 * (three sharing one bucket), clocks right and an hour behind, nodes
 * restarted with their data; then, the old clients gone, new clients in
 * both modes; then new clients with right clocks while a node restarts
 * without its data (T2 then rests on fresh proposals: every clock here is
 * the machine's). No token twice, none smaller than one granted before
 * the attempt began, for any resource. */
static void test_upgrade_mixed_processes_keep_t1_and_t2(void **state)
{
    struct fixture *f = *state;
    char names[4][32];
    same_bucket(names);
    const char *res[4] = {names[0], names[1], names[2], names[3]};
    const struct role during[] = {
        {1, 0, 0}, {1, 0, -HOUR_US}, {1, 0, 0}, {0, 1, 0}, {0, 1, -HOUR_US}, {0, 1, 0},
    };
    run_roles(f, during, 6, res, 4, 700, 1, "during");
    const struct role after[] = {
        {0, 0, 0}, {0, 0, -HOUR_US}, {0, 1, 0}, {0, 0, 0}, {0, 1, -HOUR_US}, {0, 0, 0},
    };
    run_roles(f, after, 6, res, 4, 700, 1, "after");
    const struct role forgetful[] = {
        {0, 0, 0}, {0, 1, 0}, {0, 0, 0}, {0, 0, 0}, {0, 1, 0}, {0, 0, 0},
    };
    run_roles(f, forgetful, 6, res, 4, 700, 0, "without data");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_upgrade_old_fences_are_respected, setup, teardown),
        cmocka_unit_test_setup_teardown(test_upgrade_transition_mode_keeps_old_clients_monotonic, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_upgrade_mixed_processes_keep_t1_and_t2, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
