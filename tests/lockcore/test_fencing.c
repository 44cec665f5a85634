/* Fencing tokens issued by lockcore against real redis-server processes:
 * T1 (unique) and T2 (monotonic) under divergent fence values, slow client
 * clocks, overlapping leases, node loss and restarts without data. */
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cmocka.h>

#include "fence_probe.h"
#include "redis_harness.h"
#include <lockcore/lockcore.h>

struct fixture {
    struct rh_cluster *rc;
    unsigned n;
    const char *urls[8];
    char url_buf[8][256];
};

static int setup5(void **state)
{
    struct fixture *f = calloc(1, sizeof(*f));
    assert_non_null(f);
    f->n = 5;
    assert_int_equal(rh_cluster_start(5, NULL, &f->rc), 0);
    for (unsigned i = 0; i < f->n; i++) {
        snprintf(f->url_buf[i], sizeof(f->url_buf[i]), "%s", rh_url(f->rc, (int)i));
        f->urls[i] = f->url_buf[i];
    }
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    struct fixture *f = *state;
    rh_cluster_free(f->rc);
    free(f);
    return 0;
}

struct tuning {
    uint64_t ttl_ms;
    int fencing;
    int64_t clock_offset_us;
    uint64_t fence_idle_ms;
    int retry_count;
    int unbounded; /* proposal_ahead_max_ms = 0 */
    int transition;
};

static uint64_t offset_clock(void *arg)
{
    const struct tuning *t = arg;
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    int64_t us = (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
    return (uint64_t)(us + t->clock_offset_us);
}

static lockcore_client *client(struct fixture *f, struct tuning *t)
{
    struct lockcore_options o;
    lockcore_options_init(&o);
    o.nodes = f->urls;
    o.n_nodes = f->n;
    o.retry_count = 0;
    /* These tests are about tokens, not timeouts: a loaded machine (or
     * valgrind) must not turn a slow answer into a failed release. */
    o.request_timeout_ms = 300;
    if (t != NULL) {
        if (t->ttl_ms) {
            o.ttl_ms = t->ttl_ms;
            if (o.request_timeout_ms >= o.ttl_ms)
                o.request_timeout_ms = o.ttl_ms / 3;
        }
        o.fencing = t->fencing;
        o.fence_idle_ms = t->fence_idle_ms ? t->fence_idle_ms : o.fence_idle_ms;
        o.retry_count = t->retry_count;
        o.fence_transition = t->transition;
        if (t->unbounded)
            o.proposal_ahead_max_ms = 0;
        if (t->clock_offset_us) {
            o.clock_us = offset_clock;
            o.clock_arg = t;
        }
    }
    lockcore_client *c = NULL;
    char err[256];
    if (lockcore_client_new(&o, &c, err, sizeof(err)) != 0)
        fail_msg("client: %s", err);
    return c;
}

static void set_fence(struct fixture *f, int i, const char *resource, uint64_t v)
{
    tf_set_bucket(f->rc, i, "", resource, v);
}

static uint64_t get_fence(struct fixture *f, int i, const char *resource)
{
    return tf_fence(f->rc, i, "", resource);
}

static uint64_t grant_release(lockcore_client *c, const char *resource)
{
    struct lockcore_lock l;
    int rc = lockcore_acquire(c, resource, &l);
    if (rc != 0)
        fail_msg("acquire: %s", lockcore_errmsg(c));
    assert_int_equal(lockcore_release(c, &l), 0);
    return l.token;
}

static void test_fencing_sequential_grants_strictly_increase(void **state)
{
    struct fixture *f = *state;
    lockcore_client *c = client(f, &(struct tuning){.fencing = 1});
    uint64_t prev = 0;
    for (int i = 0; i < 1000; i++) {
        struct lockcore_lock l;
        assert_int_equal(lockcore_acquire(c, "seq", &l), 0);
        assert_int_equal(l.rounds, 1); /* one client, one clock: the first round wins */
        assert_int_equal(lockcore_release(c, &l), 0);
        uint64_t t = l.token;
        assert_true(t > prev);
        assert_true(t < (1ULL << 53));
        prev = t;
    }
    /* A second client with no memory of the first still goes up. */
    lockcore_client *d = client(f, &(struct tuning){.fencing = 1});
    assert_true(grant_release(d, "seq") > prev);
    lockcore_client_free(d);
    lockcore_client_free(c);
}

/* Nodes disagree wildly; the first proposal (the time) is refused by a
 * majority, the second round proposes just above the fences of a majority
 * (the third smallest of five, + 1) and wins. */
static void test_fencing_divergent_fences_take_second_round(void **state)
{
    struct fixture *f = *state;
    lockcore_client *c = client(f, &(struct tuning){.fencing = 1});
    uint64_t now_us = (uint64_t)time(NULL) * 1000000;
    uint64_t high = now_us + 1000000000000ULL; /* ~11.6 days ahead */
    set_fence(f, 0, "div", high);
    set_fence(f, 1, "div", high - 5);
    set_fence(f, 2, "div", 3);
    set_fence(f, 3, "div", high - 9);
    set_fence(f, 4, "div", 17);

    struct lockcore_lock l;
    assert_int_equal(lockcore_acquire(c, "div", &l), 0);
    assert_true(l.token > high - 9);
    assert_int_equal(l.token, high - 8); /* the second round: above nodes 2, 3 and 4 */
    assert_int_equal(l.rounds, 2);
    unsigned stored = 0;
    for (int i = 0; i < 5; i++)
        stored += get_fence(f, i, "div") == l.token;
    assert_true(stored >= 3);
    assert_int_equal(lockcore_release(c, &l), 0);

    /* Push one node far beyond the rest: still strictly increasing. */
    set_fence(f, 2, "div", high + 1000000);
    uint64_t t2 = grant_release(c, "div");
    assert_true(t2 > l.token);
    uint64_t t3 = grant_release(c, "div");
    assert_true(t3 > t2);
    lockcore_client_free(c);
}

static void test_fencing_client_clock_behind_still_gets_larger_token(void **state)
{
    struct fixture *f = *state;
    lockcore_client *good = client(f, &(struct tuning){.fencing = 1});
    uint64_t t1 = grant_release(good, "clock");
    struct tuning behind = {.fencing = 1, .clock_offset_us = -3600LL * 1000000};
    lockcore_client *slow = client(f, &behind);
    uint64_t t2 = grant_release(slow, "clock");
    assert_true(t2 > t1);
    uint64_t t3 = grant_release(slow, "clock");
    assert_true(t3 > t2);
    /* A clock far ahead gets a larger token, from the nodes' fences in a
     * second round (its proposal runs too far ahead of the nodes' clocks
     * to count); the good client, after it, still a larger one. */
    struct tuning ahead = {.fencing = 1, .clock_offset_us = 3600LL * 1000000};
    lockcore_client *fast = client(f, &ahead);
    uint64_t t4 = grant_release(fast, "clock");
    assert_true(t4 > t3);
    assert_true(grant_release(good, "clock") > t4);
    lockcore_client_free(fast);
    lockcore_client_free(slow);
    lockcore_client_free(good);
}

static uint64_t wall_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (uint64_t)ts.tv_sec * 1000000u + (uint64_t)ts.tv_nsec / 1000u;
}

/* One client whose clock runs two hours fast must not push the tokens of
 * everyone after it two hours ahead (a resource that refuses tokens more
 * than an hour ahead would then refuse every honest writer): its proposal
 * is more than proposal_ahead_max_ms ahead of the nodes' clocks, so it
 * counts nowhere, and its token comes from the fences. With no bound
 * (proposal_ahead_max_ms 0), it does push them. */
static void test_fencing_client_clock_ahead_does_not_push_tokens_ahead(void **state)
{
    struct fixture *f = *state;
    lockcore_client *good = client(f, &(struct tuning){.fencing = 1});
    uint64_t t1 = grant_release(good, "fast");
    struct tuning ahead = {.fencing = 1, .clock_offset_us = 2 * 3600LL * 1000000};
    lockcore_client *fast = client(f, &ahead);
    uint64_t t2 = grant_release(fast, "fast");
    assert_true(t2 > t1);
    uint64_t t3 = grant_release(good, "fast");
    assert_true(t3 > t2);
    /* Near the nodes' (and this machine's) clock, not two hours ahead. */
    assert_true(t2 < wall_us() + 60ULL * 1000000);
    assert_true(t3 < wall_us() + 60ULL * 1000000);
    lockcore_client_free(fast);

    struct tuning loose = {.fencing = 1, .clock_offset_us = 2 * 3600LL * 1000000, .unbounded = 1};
    fast = client(f, &loose);
    uint64_t t4 = grant_release(fast, "fast");
    assert_true(t4 > wall_us() + 3600ULL * 1000000); /* what the bound keeps out */
    assert_true(grant_release(good, "fast") > t4);
    lockcore_client_free(fast);
    lockcore_client_free(good);
}

/* A first hold of a reentrant lock, a writer and a set of resources, by
 * the kind's own call; its token. */
static uint64_t kind_grant_release(lockcore_client *c, int kind, const char *resource)
{
    struct lockcore_lock l;
    const char *set[] = {resource};
    int rc = kind == 0   ? lockcore_reentrant_acquire(c, resource, NULL, &l)
             : kind == 1 ? lockcore_rw_acquire(c, resource, 1, &l)
                         : lockcore_multi_acquire(c, set, 1, &l);
    if (rc != 0)
        fail_msg("kind %d acquire: %s", kind, lockcore_errmsg(c));
    assert_int_equal(lockcore_release(c, &l), 0);
    return l.token;
}

/* The same bound for the kinds whose scripts read the node's clock for
 * their own state anyway (a reentrant lock's first hold, a writer) and
 * give the bound that reading, in whole ms, and for a set of resources,
 * which checks it once for the set: a client two hours fast gets tokens
 * near the nodes' clocks, and with no bound it does not. */
static void test_fencing_client_clock_ahead_bounded_for_every_kind(void **state)
{
    struct fixture *f = *state;
    lockcore_client *good = client(f, &(struct tuning){.fencing = 1});
    struct tuning ahead = {.fencing = 1, .clock_offset_us = 2 * 3600LL * 1000000};
    lockcore_client *fast = client(f, &ahead);
    struct tuning loose = {.fencing = 1, .clock_offset_us = 2 * 3600LL * 1000000, .unbounded = 1};
    lockcore_client *unbounded = client(f, &loose);
    for (int kind = 0; kind < 3; kind++) {
        char name[32];
        snprintf(name, sizeof(name), "fast-kind:%d", kind);
        uint64_t t1 = kind_grant_release(good, kind, name);
        uint64_t t2 = kind_grant_release(fast, kind, name);
        assert_true(t2 > t1);
        assert_true(t2 < wall_us() + 60ULL * 1000000);
        uint64_t t3 = kind_grant_release(good, kind, name);
        assert_true(t3 > t2 && t3 < wall_us() + 60ULL * 1000000);
        uint64_t t4 = kind_grant_release(unbounded, kind, name);
        assert_true(t4 > wall_us() + 3600ULL * 1000000); /* what the bound keeps out */
        assert_true(kind_grant_release(good, kind, name) > t4);
    }
    lockcore_client_free(unbounded);
    lockcore_client_free(fast);
    lockcore_client_free(good);
}

/* lockcore's slot of a lock key in a client's memory of fences seen:
 * FNV-1a, mod 256 (op.c). */
static unsigned seen_slot(const char *key)
{
    uint64_t h = 1469598103934665603ULL;
    for (const char *p = key; *p; p++)
        h = (h ^ (unsigned char)*p) * 1099511628211ULL;
    return (unsigned)(h & 255);
}

/* A client remembers the largest fence it saw for a resource, in a slot of
 * 256 by its hash, and proposes above it. Another resource of the slot is
 * not that resource: a fence two hours ahead seen for one must not make a
 * client with no bound on proposals take a token two hours ahead for the
 * other (it did, and from there its bucket's). */
static void test_fencing_memory_of_one_resource_is_not_another_s(void **state)
{
    struct fixture *f = *state;
    char other[32];
    for (int i = 0;; i++) {
        snprintf(other, sizeof(other), "slot:%d", i);
        if (seen_slot(other) == seen_slot("slot:far") && strcmp(other, "slot:far") != 0)
            break;
    }
    lockcore_client *c = client(f, &(struct tuning){.fencing = 1, .unbounded = 1});
    for (int i = 0; i < 5; i++)
        set_fence(f, i, "slot:far", wall_us() + 7200ULL * 1000000);
    assert_true(grant_release(c, "slot:far") > wall_us() + 7000ULL * 1000000);
    uint64_t before = wall_us();
    uint64_t t = grant_release(c, other);
    assert_true(t >= before && t < wall_us() + 1000000);
    assert_true(grant_release(c, "slot:far") > wall_us() + 7000ULL * 1000000);
    lockcore_client_free(c);
}

/* Names of resources that share one bucket (the first is prefix "0"). */
static void same_bucket(const char *prefix, int n, char (*names)[32])
{
    snprintf(names[0], 32, "%s0", prefix);
    unsigned b = fencing_bucket(names[0], strlen(names[0]));
    for (int i = 1, found = 1; found < n; i++) {
        char name[32];
        snprintf(name, sizeof(name), "%s%d", prefix, i);
        if (fencing_bucket(name, strlen(name)) == b)
            snprintf(names[found++], 32, "%s", name);
    }
}

/* Two nodes of five hold a bucket two hours ahead (nodes whose clocks run
 * that fast took a fast client's proposals), and two others are down: the
 * three that answer need the far value for a majority. Round two must not
 * carry it there (it would stay, in the resource's own key, after the
 * nodes came back): the attempt fails instead, and once the nodes are back
 * a grant takes a token of now. A reader then asks the five: the far
 * value of two is not its token. */
static void test_fencing_far_value_of_a_minority_is_not_carried_while_nodes_are_missing(void **state)
{
    struct fixture *f = *state;
    char names[2][32];
    same_bucket("miss:", 2, names);
    const uint64_t two_h = 7200ULL * 1000000;
    uint64_t before = wall_us();
    for (int i = 0; i < 2; i++)
        set_fence(f, i, names[0], before + two_h);
    set_fence(f, 2, names[0], before);
    assert_int_equal(rh_kill(f->rc, 3), 0);
    assert_int_equal(rh_kill(f->rc, 4), 0);
    lockcore_client *c = client(f, &(struct tuning){.fencing = 1});
    struct lockcore_lock l;
    int rc = lockcore_acquire(c, names[1], &l);
    if (rc == 0)
        fail_msg("granted with token %+.3f s of now", ((double)l.token - (double)wall_us()) / 1e6);
    assert_int_equal(rc, LOCKCORE_EFENCE);
    for (int i = 0; i < 2; i++) { /* nothing of it went into a key */
        redisReply *r = rh_command(f->rc, 2, "EXISTS {%s}:fence", names[1]);
        assert_int_equal(r->integer, 0);
        freeReplyObject(r);
    }
    assert_true(tf_bucket(f->rc, 2, "", names[1]) < before + 1000000);
    assert_int_equal(rh_restart(f->rc, 3, 1), 0);
    assert_int_equal(rh_restart(f->rc, 4, 1), 0);
    uint64_t t = grant_release(c, names[1]);
    assert_true(t > before && t < wall_us() + 1000000);
    /* A reader of five nodes, two of them far: a token of now. */
    assert_int_equal(lockcore_rw_acquire(c, names[0], 0, &l), 0);
    assert_int_equal(lockcore_release(c, &l), 0);
    assert_true(l.token < wall_us() + 1000000);
    lockcore_client_free(c);
}

/* One node's fence runs 3 s ahead of the others' (a proposal of a client
 * whose clock runs 3 s fast reached it alone, within the bound). A reader's
 * token must be at least every earlier write's and below every later
 * write's, or a reader whose lease ended while a write happened passes the
 * resource's check. Every node answering, the token is the third largest
 * of five (what a majority holds), not that node's; with two nodes down
 * it is the largest of the three, which the reader writes back to a
 * majority first. Either way the next writer, with a right clock, gets a
 * larger token. (The reader took the largest and wrote nothing back.) */
static void test_fencing_a_reader_s_token_is_below_every_later_write_s(void **state)
{
    struct fixture *f = *state;
    lockcore_client *c = client(f, &(struct tuning){.fencing = 1});
    uint64_t w0 = grant_release(c, "rd"); /* an earlier write */
    uint64_t ahead = wall_us() + 3000000;
    set_fence(f, 0, "rd", ahead);
    struct lockcore_lock r, w;
    assert_int_equal(lockcore_rw_acquire(c, "rd", 0, &r), 0);
    assert_int_equal(lockcore_release(c, &r), 0);
    assert_true(r.token >= w0 && r.token < ahead);
    assert_int_equal(lockcore_rw_acquire(c, "rd", 1, &w), 0);
    assert_int_equal(lockcore_release(c, &w), 0);
    assert_true(w.token > r.token);

    ahead = wall_us() + 3000000;
    set_fence(f, 0, "rd", ahead);
    assert_int_equal(rh_kill(f->rc, 3), 0);
    assert_int_equal(rh_kill(f->rc, 4), 0);
    assert_int_equal(lockcore_rw_acquire(c, "rd", 0, &r), 0);
    assert_int_equal(lockcore_release(c, &r), 0);
    assert_true(r.token == ahead && r.token > w.token);
    unsigned at = 0;
    for (int i = 0; i < 3; i++)
        at += get_fence(f, i, "rd") >= r.token;
    assert_int_equal(at, 3);
    assert_int_equal(lockcore_rw_acquire(c, "rd", 1, &w), 0);
    assert_int_equal(lockcore_release(c, &w), 0);
    assert_true(w.token > r.token);
    lockcore_client_free(c);
}

/* A fence pushed two hours ahead (a fast client with no bound) shows in
 * status against each node's clock, and an operator lowers it: not while
 * the lock is held, never upwards, and afterwards tokens are near the
 * nodes' clocks again. */
static void test_fencing_repair_lowers_a_fence_pushed_ahead(void **state)
{
    struct fixture *f = *state;
    struct lockcore_node_status st[5];
    struct tuning loose = {.fencing = 1, .clock_offset_us = 2 * 3600LL * 1000000, .unbounded = 1};
    lockcore_client *fast = client(f, &loose);
    lockcore_client *good = client(f, &(struct tuning){.fencing = 1});
    uint64_t far = grant_release(fast, "poisoned");
    assert_int_equal(lockcore_status(good, "poisoned", st, 5), 5);
    unsigned ahead = 0;
    for (int i = 0; i < 5; i++)
        ahead +=
            st[i].reachable && st[i].node_time_us > 0 && st[i].fence > st[i].node_time_us + 3600ULL * 1000000;
    assert_true(ahead >= 3);
    /* Held: no node lowers it, and says who holds. */
    struct lockcore_lock l;
    assert_int_equal(lockcore_acquire(good, "poisoned", &l), 0);
    assert_true(l.token > far);
    hp_sleep_ms(50); /* granted at a majority: the others may still be running it */
    assert_int_equal(lockcore_fence_repair(good, "poisoned", 0, st, 5), 0);
    for (int i = 0; i < 5; i++)
        assert_string_equal(st[i].holder, l.id);
    assert_int_equal(lockcore_release(good, &l), 0);
    /* Never upwards; then down to each node's clock. */
    assert_int_equal(lockcore_fence_repair(good, "poisoned", far + 1000, st, 5), 0);
    assert_int_equal(lockcore_fence_repair(good, "poisoned", 0, st, 5), 5);
    for (int i = 0; i < 5; i++)
        assert_true(st[i].fence <= st[i].node_time_us + 1000);
    uint64_t t = grant_release(good, "poisoned");
    assert_true(t < wall_us() + 60ULL * 1000000);
    assert_int_equal(lockcore_fence_repair(good, "", 0, st, 5), -EINVAL);
    assert_int_equal(lockcore_fence_repair(good, "poisoned", 1ULL << 53, st, 5), -EINVAL);
    assert_int_equal(lockcore_fence_repair(good, "poisoned", 0, st, 2), -ENOSPC);
    lockcore_client_free(good);
    lockcore_client_free(fast);
}

/* A repair of one resource lowers its own fence, and its bucket only from
 * a value far ahead of the nodes' clocks: a bucket within the bound may
 * hold another resource's token (from a client whose clock runs a second
 * fast), which that resource's next grant must still exceed. */
static void test_fencing_repair_leaves_a_bucket_within_the_bound(void **state)
{
    struct fixture *f = *state;
    char names[2][32];
    same_bucket("rep:", 2, names);
    lockcore_client *fast = client(f, &(struct tuning){.fencing = 1, .clock_offset_us = 1000000});
    lockcore_client *good = client(f, &(struct tuning){.fencing = 1});
    uint64_t other = grant_release(fast, names[1]);
    assert_true(other > wall_us() + 500000);
    /* names[0]'s own fence, two hours ahead (a version before buckets). */
    for (int i = 0; i < 5; i++) {
        redisReply *r = rh_command(f->rc, i, "SET {%s}:fence %llu", names[0],
                                   (unsigned long long)(wall_us() + 7200ULL * 1000000));
        freeReplyObject(r);
    }
    struct lockcore_node_status st[5];
    assert_int_equal(lockcore_fence_repair(good, names[0], 0, st, 5), 5);
    for (int i = 0; i < 5; i++) {
        assert_true(tf_bucket(f->rc, i, "", names[1]) >= other);
        assert_true(st[i].fence >= other && st[i].fence < wall_us() + 2000000);
    }
    assert_true(grant_release(good, names[1]) > other);
    uint64_t t = grant_release(good, names[0]);
    assert_true(t > other && t < wall_us() + 2000000);
    lockcore_client_free(good);
    lockcore_client_free(fast);
}

struct grant {
    uint64_t begin_ms, end_ms, token;
};

struct worker {
    struct fixture *f;
    uint64_t stop_ms, last_ms; /* stop after stop_ms once all grants reach 60; at last_ms anyway */
    unsigned *all;             /* the grants of every worker */
    struct grant g[4096];
    size_t n;
};

/* Leases of 30 ms that are never released: holders overlap constantly
 * (a client's lease runs out while it "works"), the situation fencing
 * tokens exist for. A loaded machine (or valgrind) grants fewer in a
 * given time: the run goes on until there are enough. */
static void *churn(void *arg)
{
    struct worker *w = arg;
    struct tuning t = {.fencing = 1, .ttl_ms = 30};
    lockcore_client *c = client(w->f, &t);
    for (;;) {
        uint64_t now = lockcore_now_ms();
        if (now >= w->last_ms || w->n == sizeof(w->g) / sizeof(w->g[0]) ||
            (now >= w->stop_ms && __atomic_load_n(w->all, __ATOMIC_RELAXED) >= 60))
            break;
        struct lockcore_lock l;
        uint64_t b = lockcore_now_ms();
        if (lockcore_acquire(c, "overlap", &l) == 0) {
            w->g[w->n++] = (struct grant){b, lockcore_now_ms(), l.token};
            __atomic_add_fetch(w->all, 1, __ATOMIC_RELAXED);
        }
        struct timespec ts = {0, 2 * 1000000};
        nanosleep(&ts, NULL);
    }
    lockcore_client_free(c);
    return NULL;
}

static int cmp_token(const void *a, const void *b)
{
    const struct grant *x = a, *y = b;
    return (x->token > y->token) - (x->token < y->token);
}

static void test_fencing_overlapping_leases_never_share_a_token(void **state)
{
    struct fixture *f = *state;
    enum { K = 8 };
    static struct worker w[K];
    pthread_t th[K];
    uint64_t stop = lockcore_now_ms() + 2500;
    static unsigned granted;
    granted = 0;
    for (int i = 0; i < K; i++) {
        w[i].f = f;
        w[i].stop_ms = stop;
        w[i].last_ms = stop + 20000;
        w[i].all = &granted;
        w[i].n = 0;
        assert_int_equal(pthread_create(&th[i], NULL, churn, &w[i]), 0);
    }
    /* Meanwhile, lose and restart nodes (without data). */
    struct timespec ts = {0, 500 * 1000000};
    nanosleep(&ts, NULL);
    assert_int_equal(rh_kill(f->rc, 4), 0);
    nanosleep(&ts, NULL);
    assert_int_equal(rh_restart(f->rc, 4, 0), 0);
    assert_int_equal(rh_restart(f->rc, 0, 0), 0);
    for (int i = 0; i < K; i++)
        pthread_join(th[i], NULL);

    size_t total = 0;
    for (int i = 0; i < K; i++)
        total += w[i].n;
    assert_true(total >= 50);
    struct grant *all = calloc(total, sizeof(*all));
    assert_non_null(all);
    size_t k = 0;
    for (int i = 0; i < K; i++)
        for (size_t j = 0; j < w[i].n; j++)
            all[k++] = w[i].g[j];
    qsort(all, total, sizeof(*all), cmp_token);
    /* T1: no two grants share a token. */
    for (size_t i = 1; i < total; i++)
        assert_true(all[i].token != all[i - 1].token);
    /* T2: a grant whose attempt began after another grant ended has the
     * larger token. */
    for (size_t a = 0; a < total; a++)
        for (size_t b = 0; b < total; b++)
            if (all[b].begin_ms > all[a].end_ms)
                assert_true(all[b].token > all[a].token);
    free(all);
}

static void test_fencing_holds_with_minority_down(void **state)
{
    struct fixture *f = *state;
    lockcore_client *c = client(f, &(struct tuning){.fencing = 1});
    uint64_t prev = grant_release(c, "mdown");
    assert_int_equal(rh_kill(f->rc, 0), 0);
    assert_int_equal(rh_kill(f->rc, 2), 0);
    for (int i = 0; i < 50; i++) {
        uint64_t t = grant_release(c, "mdown");
        assert_true(t > prev);
        prev = t;
    }
    lockcore_client_free(c);
}

static void test_fencing_survives_restart_without_data(void **state)
{
    struct fixture *f = *state;
    struct tuning t = {.fencing = 1, .retry_count = 5};
    lockcore_client *c = client(f, &t);
    /* Fence values far ahead of the clock, then forgotten by a majority:
     * only the restart rule (fresh proposals) protects T2 now, and it cannot
     * beat values from the future. Show what the docs say: with values from
     * the clock, tokens keep growing across the restart. */
    uint64_t before = grant_release(c, "restart");
    for (int i = 0; i < 3; i++)
        assert_int_equal(rh_restart(f->rc, i, 0), 0);
    uint64_t after = grant_release(c, "restart");
    assert_true(after > before);
    lockcore_client *fresh = client(f, &t); /* no memory of earlier tokens */
    assert_true(grant_release(fresh, "restart") > after);
    lockcore_client_free(fresh);
    lockcore_client_free(c);
}

static void test_fencing_plain_mode_creates_no_fence_keys(void **state)
{
    struct fixture *f = *state;
    lockcore_client *c = client(f, &(struct tuning){.fencing = 0});
    struct lockcore_lock l;
    assert_int_equal(lockcore_acquire(c, "plain", &l), 0);
    assert_int_equal(l.token, 0);
    for (int i = 0; i < 5; i++) {
        redisReply *r = rh_command(f->rc, i, "KEYS *");
        assert_true(r->elements <= 1);
        if (r->elements == 1)
            assert_string_equal(r->element[0]->str, "plain");
        freeReplyObject(r);
    }
    assert_int_equal(lockcore_release(c, &l), 0);
    lockcore_client_free(c);
}

/* Resources locked and released leave nothing of their own on the nodes:
 * only their buckets' hashes, which never expire (and so need no clock),
 * at most FENCING_BUCKETS / FENCING_BUCKET_FIELDS of them. In transition
 * mode each resource also keeps the old layout's fence key, with its idle
 * expiry. */
static void test_fencing_idle_resources_leave_only_their_buckets(void **state)
{
    struct fixture *f = *state;
    lockcore_client *c = client(f, &(struct tuning){.fencing = 1});
    char name[32];
    for (int i = 0; i < 500; i++) {
        snprintf(name, sizeof(name), "idle:%d", i);
        grant_release(c, name);
    }
    /* The release waits for every node, so every node has run it. */
    for (int i = 0; i < 5; i++) {
        assert_int_equal(tf_other_keys(f->rc, i), 0);
        redisReply *r = rh_command(f->rc, i, "KEYS *");
        assert_true(r->elements > 0 && r->elements <= FENCING_BUCKETS / FENCING_BUCKET_FIELDS);
        for (size_t k = 0; k < r->elements; k++) {
            redisReply *t = rh_command(f->rc, i, "PTTL %b", r->element[k]->str, r->element[k]->len);
            assert_int_equal(t->integer, -1);
            freeReplyObject(t);
        }
        freeReplyObject(r);
    }
    lockcore_client_free(c);

    c = client(f, &(struct tuning){.fencing = 1, .fence_idle_ms = 60000, .transition = 1});
    uint64_t t = grant_release(c, "idle");
    redisReply *r = rh_command(f->rc, 0, "PTTL {idle}:fence");
    assert_true(r->integer > 50000 && r->integer <= 60000);
    freeReplyObject(r);
    r = rh_command(f->rc, 0, "GET {idle}:fence");
    assert_true(r->type == REDIS_REPLY_STRING && strtoull(r->str, NULL, 10) == t);
    freeReplyObject(r);
    assert_true(tf_bucket(f->rc, 0, "", "idle") == t);
    lockcore_client_free(c);
}

/* A client whose clock lags another's by 2 s locks a resource of the
 * bucket the other has just used: its first proposal loses, and round two
 * gives it a token above the other's, in the bucket's order, whatever the
 * clocks. It learns nothing from that: a client whose clock is right goes
 * on proposing from its clock, and a resource of another bucket gets a
 * token of now, not of the fences it met. (A client that proposed ahead of
 * its clock by what it had met issued tokens ahead of every clock for
 * hours, and a node restarted without its data then let a later grant with
 * a right clock take a smaller token.) */
static void test_fencing_a_lagging_client_takes_round_two_and_stays_on_its_clock(void **state)
{
    struct fixture *f = *state;
    char names[2][32];
    same_bucket("lag:", 2, names);
    lockcore_client *a = client(f, &(struct tuning){.fencing = 1});
    struct tuning behind = {.fencing = 1, .clock_offset_us = -2000000};
    lockcore_client *b = client(f, &behind);
    uint64_t last = 0;
    for (int i = 0; i < 10; i++) {
        uint64_t t = grant_release(a, names[0]);
        assert_true(t > last);
        struct lockcore_lock l;
        assert_int_equal(lockcore_acquire(b, names[1], &l), 0);
        assert_int_equal(lockcore_release(b, &l), 0);
        assert_true(l.token > t); /* the bucket's order, whatever the clocks */
        assert_int_equal(l.rounds, 2);
        last = l.token;
    }
    lockcore_client_free(b);
    lockcore_client_free(a);

    /* A bucket 2.4 s ahead on every node (a client 2.4 s fast, inside the
     * bound, used it): a right clock loses its first round there, once. */
    lockcore_client *c = client(f, &(struct tuning){.fencing = 1});
    for (int i = 0; i < 5; i++)
        set_fence(f, i, "lag:far", wall_us() + 2400000);
    uint64_t far = grant_release(c, "lag:far");
    assert_true(far > wall_us() + 2000000);
    uint64_t before = wall_us();
    uint64_t t = grant_release(c, "lag:near");
    assert_true(t >= before && t < wall_us() + 500000);
    lockcore_client_free(c);
}

/* Two nodes of five took a fast client's first-round proposal, two hours
 * ahead (nodes whose clocks run as fast as the client's): the bucket is
 * that far ahead there alone. The fast client's next lock of a resource of that
 * bucket is refused a first round (the other nodes' bound; that node's
 * fence), and its second round must not carry the two hours to a majority:
 * a raise has no bound, and an honest client of another resource of the
 * bucket would then get a token two hours ahead, which a resource with
 * --max-token-ahead refuses. */
static void test_fencing_round_two_does_not_carry_one_node_ahead_to_a_majority(void **state)
{
    struct fixture *f = *state;
    char names[2][32];
    same_bucket("fast:", 2, names);
    const uint64_t two_h = 7200ULL * 1000000;
    uint64_t before = wall_us();
    for (int i = 0; i < 2; i++) /* a minority ahead */
        set_fence(f, i, names[0], before + two_h + 1000000);
    for (int i = 2; i < 5; i++) /* an honest grant of the bucket, just now */
        set_fence(f, i, names[1], before);
    lockcore_client *fast = client(f, &(struct tuning){.fencing = 1, .clock_offset_us = (int64_t)two_h});
    lockcore_client *honest = client(f, &(struct tuning){.fencing = 1});
    struct lockcore_lock l;
    assert_int_equal(lockcore_acquire(fast, names[0], &l), 0);
    assert_int_equal(lockcore_release(fast, &l), 0);
    fprintf(stderr, "the fast client: token %+.3f s of now, %u rounds\n",
            ((double)l.token - (double)wall_us()) / 1e6, l.rounds);
    assert_int_equal(l.rounds, 2);
    assert_true(l.token > before && l.token < wall_us() + 1000000); /* above a majority's fences, no more */
    uint64_t t = grant_release(honest, names[1]);
    assert_true(t > l.token);             /* the bucket's order */
    assert_true(t < wall_us() + 1000000); /* not two hours ahead */
    /* The nodes ahead keep their value (only a majority counts), and the
     * fast client's resource still gets larger tokens. */
    assert_true(tf_bucket(f->rc, 0, "", names[0]) > before + two_h);
    uint64_t again = grant_release(honest, names[0]);
    assert_true(again > l.token);
    lockcore_client_free(honest);
    lockcore_client_free(fast);
}

struct set_result {
    int done, rc;
    struct lockcore_lock l;
};

static void on_set(lockcore_client *c, int rc, const struct lockcore_lock *l, void *arg)
{
    (void)c;
    struct set_result *r = arg;
    r->done = 1;
    r->rc = rc;
    r->l = *l;
}

struct contender {
    struct fixture *f;
    const char *resource;
    uint64_t stop_ms;
    unsigned granted, failed;
};

/* 60 acquisitions (fewer if it takes over 20 s: valgrind). */
static void *contend(void *arg)
{
    struct contender *w = arg;
    lockcore_client *c = client(w->f, &(struct tuning){.fencing = 1});
    while (w->granted + w->failed < 60 && lockcore_now_ms() < w->stop_ms) {
        struct lockcore_lock l;
        if (lockcore_acquire(c, w->resource, &l) == 0) {
            w->granted++;
            lockcore_release(c, &l);
        } else {
            w->failed++;
        }
    }
    lockcore_client_free(c);
    return NULL;
}

/* Eight clients, each locking its own resource, all of one bucket, whose
 * fence runs an hour ahead of their clocks: every grant takes a second
 * round, all at once, on the same fence. Each proposes the largest fence
 * it saw + 1, ties split the nodes so that nobody gets a majority; after
 * a refused second round a random spread makes the proposals differ, and
 * a client raises again while its lock is valid (ten times at most). With
 * three raises and no spread, about a third of these acquisitions failed
 * (LOCKCORE_EFENCE); now almost none do. */
static void test_fencing_second_rounds_in_one_bucket_do_not_starve(void **state)
{
    struct fixture *f = *state;
    enum { K = 8 };
    char names[K][32];
    same_bucket("busy:", K, names);
    for (int i = 0; i < 5; i++)
        set_fence(f, i, names[0], wall_us() + 3600ULL * 1000000);
    static struct contender w[K];
    pthread_t th[K];
    uint64_t stop = lockcore_now_ms() + 20000;
    for (int i = 0; i < K; i++) {
        w[i] = (struct contender){.f = f, .resource = names[i], .stop_ms = stop};
        assert_int_equal(pthread_create(&th[i], NULL, contend, &w[i]), 0);
    }
    unsigned granted = 0, failed = 0;
    for (int i = 0; i < K; i++) {
        pthread_join(th[i], NULL);
        granted += w[i].granted;
        failed += w[i].failed;
    }
    fprintf(stderr, "one bucket, %d clients: %u granted, %u failed\n", K, granted, failed);
    assert_true(granted >= 50);
    assert_true(failed * 50 <= granted + failed); /* at most 2% */
}

/* A set of LOCKCORE_MULTI_MAX resources, each with a bucket of its own
 * and one of them an hour ahead: one token above every member's fence,
 * stored in each member's bucket on a majority; the extension's fence step
 * over all of them; and a waiting set (its queued attempt names six keys
 * per member, 96 in all) granted when the member another client held is
 * released. */
static void test_fencing_a_full_set_takes_a_token_above_every_member(void **state)
{
    struct fixture *f = *state;
    char names[LOCKCORE_MULTI_MAX][32];
    const char *set[LOCKCORE_MULTI_MAX];
    for (int k = 0; k < LOCKCORE_MULTI_MAX; k++) {
        snprintf(names[k], sizeof(names[k]), "full:%d", k);
        set[k] = names[k];
    }
    uint64_t far = wall_us() + 3600ULL * 1000000;
    for (int i = 0; i < 5; i++)
        set_fence(f, i, names[7], far);
    lockcore_client *c = client(f, &(struct tuning){.fencing = 1});
    struct lockcore_lock m;
    assert_int_equal(lockcore_multi_acquire(c, set, LOCKCORE_MULTI_MAX, &m), 0);
    assert_true(m.token > far);
    assert_int_equal(lockcore_extend(c, &m, 0), 0);
    hp_sleep_ms(50); /* granted at a majority: the others may still be running it */
    for (int k = 0; k < LOCKCORE_MULTI_MAX; k++) {
        unsigned same = 0;
        for (int i = 0; i < 5; i++)
            same += get_fence(f, i, names[k]) == m.token;
        assert_true(same >= 3);
    }
    assert_int_equal(lockcore_release(c, &m), 0);

    struct tuning waits = {.fencing = 1, .retry_count = -1};
    lockcore_client *w = client(f, &waits);
    struct lockcore_lock one;
    assert_int_equal(lockcore_acquire(c, names[3], &one), 0);
    struct set_result got = {0};
    assert_int_equal(lockcore_multi_acquire_async(w, set, LOCKCORE_MULTI_MAX, on_set, &got), 0);
    uint64_t until = lockcore_now_ms() + 300;
    while (lockcore_now_ms() < until)
        lockcore_run(w, 20);
    assert_false(got.done);
    assert_int_equal(lockcore_release(c, &one), 0);
    until = lockcore_now_ms() + 10000;
    while (!got.done && lockcore_now_ms() < until)
        lockcore_run(w, 20);
    assert_true(got.done);
    assert_int_equal(got.rc, 0);
    assert_true(got.l.token > one.token);
    assert_int_equal(lockcore_release(w, &got.l), 0);
    lockcore_client_free(w);
    lockcore_client_free(c);
}

static void test_fencing_refuses_to_pass_two_pow_53(void **state)
{
    struct fixture *f = *state;
    lockcore_client *c = client(f, &(struct tuning){.fencing = 1});
    for (int i = 0; i < 3; i++)
        set_fence(f, i, "max", (1ULL << 53) - 1);
    struct lockcore_lock l;
    assert_int_equal(lockcore_acquire(c, "max", &l), LOCKCORE_EFENCE);
    /* The refused attempt left no lock behind. */
    for (int i = 0; i < 5; i++) {
        redisReply *r = rh_command(f->rc, i, "EXISTS max");
        for (int t = 0; t < 50 && r->integer != 0; t++) {
            freeReplyObject(r);
            lockcore_run(c, 10);
            r = rh_command(f->rc, i, "EXISTS max");
        }
        assert_int_equal(r->integer, 0);
        freeReplyObject(r);
    }
    lockcore_client_free(c);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_fencing_sequential_grants_strictly_increase, setup5, teardown),
        cmocka_unit_test_setup_teardown(test_fencing_divergent_fences_take_second_round, setup5, teardown),
        cmocka_unit_test_setup_teardown(test_fencing_client_clock_behind_still_gets_larger_token, setup5,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_fencing_client_clock_ahead_does_not_push_tokens_ahead, setup5,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_fencing_client_clock_ahead_bounded_for_every_kind, setup5,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_fencing_repair_lowers_a_fence_pushed_ahead, setup5, teardown),
        cmocka_unit_test_setup_teardown(test_fencing_repair_leaves_a_bucket_within_the_bound, setup5,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_fencing_memory_of_one_resource_is_not_another_s, setup5,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_fencing_a_reader_s_token_is_below_every_later_write_s, setup5,
                                        teardown),
        cmocka_unit_test_setup_teardown(
            test_fencing_far_value_of_a_minority_is_not_carried_while_nodes_are_missing, setup5, teardown),
        cmocka_unit_test_setup_teardown(test_fencing_overlapping_leases_never_share_a_token, setup5,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_fencing_holds_with_minority_down, setup5, teardown),
        cmocka_unit_test_setup_teardown(test_fencing_survives_restart_without_data, setup5, teardown),
        cmocka_unit_test_setup_teardown(test_fencing_plain_mode_creates_no_fence_keys, setup5, teardown),
        cmocka_unit_test_setup_teardown(test_fencing_idle_resources_leave_only_their_buckets, setup5,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_fencing_a_lagging_client_takes_round_two_and_stays_on_its_clock,
                                        setup5, teardown),
        cmocka_unit_test_setup_teardown(test_fencing_round_two_does_not_carry_one_node_ahead_to_a_majority,
                                        setup5, teardown),
        cmocka_unit_test_setup_teardown(test_fencing_second_rounds_in_one_bucket_do_not_starve, setup5,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_fencing_a_full_set_takes_a_token_above_every_member, setup5,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_fencing_refuses_to_pass_two_pow_53, setup5, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
