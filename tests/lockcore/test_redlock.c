/* lockcore against real redis-server processes: grants, refusals,
 * contention, compare-then-act release and extend, timeouts, rollback,
 * retries, reconnection, authentication, the non-blocking API. */
#include <errno.h>
#include <pthread.h>
#include <poll.h>
#include <signal.h>
#include <time.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "fault_proxy.h"
#include "fence_probe.h"
#include "redis_harness.h"
#include <lockcore/lockcore.h>

struct fixture {
    struct rh_cluster *rc;
    unsigned n;
    const char *urls[8];
    char url_buf[8][256];
};

static struct fixture *fx_new(unsigned n, const struct rh_options *ro)
{
    struct fixture *f = calloc(1, sizeof(*f));
    assert_non_null(f);
    f->n = n;
    assert_int_equal(rh_cluster_start((int)n, ro, &f->rc), 0);
    for (unsigned i = 0; i < n; i++) {
        snprintf(f->url_buf[i], sizeof(f->url_buf[i]), "%s", rh_url(f->rc, (int)i));
        f->urls[i] = f->url_buf[i];
    }
    return f;
}

static int setup5(void **state)
{
    *state = fx_new(5, NULL);
    return 0;
}

static int setup3(void **state)
{
    *state = fx_new(3, NULL);
    return 0;
}

static int teardown(void **state)
{
    struct fixture *f = *state;
    rh_cluster_free(f->rc);
    free(f);
    return 0;
}

static lockcore_client *client(struct fixture *f, void (*tune)(struct lockcore_options *))
{
    struct lockcore_options o;
    lockcore_options_init(&o);
    o.nodes = f->urls;
    o.n_nodes = f->n;
    o.retry_count = 0;
    if (tune)
        tune(&o);
    lockcore_client *c = NULL;
    char err[256];
    int rc = lockcore_client_new(&o, &c, err, sizeof(err));
    if (rc != 0)
        fail_msg("client: %s", err);
    return c;
}

static void test_redlock_grants_with_all_nodes_up(void **state)
{
    struct fixture *f = *state;
    lockcore_client *c = client(f, NULL);
    struct lockcore_lock l;
    assert_int_equal(lockcore_acquire(c, "acct:1", &l), 0);
    assert_string_equal(l.resource, "acct:1");
    assert_int_equal(strlen(l.id), LOCKCORE_ID_LEN);
    assert_true(l.nodes_ok >= 3);
    assert_int_equal(l.nodes, 5);
    assert_int_equal(l.attempts, 1);
    assert_true(l.validity_ms > 0 && l.validity_ms <= 10000 - 102);
    assert_true(lockcore_remaining_ms(&l) > 9000);
    assert_true(l.token > 1500000000000000ULL && l.token < (1ULL << 53));
    /* The key is set on every node (the late ones too), with our id. */
    for (int t = 0; t < 100 && rh_holders(f->rc, "acct:1", l.id) < 5; t++)
        lockcore_run(c, 10);
    assert_int_equal(rh_holders(f->rc, "acct:1", l.id), 5);
    long long ttl = rh_pttl(f->rc, 0, "acct:1");
    assert_true(ttl > 9000 && ttl <= 10000);

    assert_int_equal(lockcore_release(c, &l), 0);
    assert_int_equal(l.nodes_ok, 5);
    assert_int_equal(rh_holders(f->rc, "acct:1", l.id), 0);
    lockcore_client_free(c);
}

static void test_redlock_grants_with_minority_down(void **state)
{
    struct fixture *f = *state;
    assert_int_equal(rh_kill(f->rc, 1), 0);
    assert_int_equal(rh_kill(f->rc, 3), 0);
    lockcore_client *c = client(f, NULL);
    struct lockcore_lock l;
    assert_int_equal(lockcore_acquire(c, "minority", &l), 0);
    assert_int_equal(l.nodes_ok, 3);
    assert_int_equal(lockcore_release(c, &l), 0);
    /* A node whose NOSCRIPT reply came after the grant was decided never
     * set the key; a majority always did. */
    assert_true(l.nodes_ok >= 2);
    lockcore_client_free(c);
}

static void test_redlock_refuses_with_majority_down(void **state)
{
    struct fixture *f = *state;
    for (int i = 0; i < 3; i++)
        assert_int_equal(rh_kill(f->rc, i), 0);
    lockcore_client *c = client(f, NULL);
    struct lockcore_lock l;
    assert_int_equal(lockcore_acquire(c, "majority", &l), LOCKCORE_ENOQUORUM);
    assert_non_null(strstr(lockcore_errmsg(c), "unreachable"));
    lockcore_client_free(c);
}

struct racer {
    struct fixture *f;
    pthread_barrier_t *go;
    int rc;
    struct lockcore_lock lock;
};

static void *race(void *arg)
{
    struct racer *r = arg;
    lockcore_client *c = client(r->f, NULL);
    /* Connect first, so the race is between requests, not handshakes. */
    struct lockcore_node_status st[8];
    lockcore_status(c, "warmup", st, 8);
    pthread_barrier_wait(r->go);
    r->rc = lockcore_acquire(c, "contended", &r->lock);
    lockcore_client_free(c);
    return NULL;
}

static void test_redlock_contention_has_one_winner(void **state)
{
    struct fixture *f = *state;
    enum { K = 8 };
    for (int round = 0; round < 5; round++) {
        pthread_t th[K];
        struct racer r[K];
        pthread_barrier_t go;
        pthread_barrier_init(&go, NULL, K);
        for (int i = 0; i < K; i++) {
            r[i] = (struct racer){.f = f, .go = &go};
            assert_int_equal(pthread_create(&th[i], NULL, race, &r[i]), 0);
        }
        int winners = 0;
        const char *id = NULL;
        for (int i = 0; i < K; i++) {
            pthread_join(th[i], NULL);
            if (r[i].rc == 0) {
                winners++;
                id = r[i].lock.id;
            } else {
                /* Losers split votes or saw a holder: never a different error. */
                assert_true(r[i].rc == LOCKCORE_ELOCKED);
            }
        }
        pthread_barrier_destroy(&go);
        assert_true(winners <= 1);
        if (winners == 1)
            assert_true(rh_holders(f->rc, "contended", id) >= 3);
        rh_flushall(f->rc);
    }
}

static void test_redlock_release_keeps_foreign_value(void **state)
{
    struct fixture *f = *state;
    lockcore_client *c = client(f, NULL);
    struct lockcore_lock l;
    assert_int_equal(lockcore_acquire(c, "shared", &l), 0);
    for (int t = 0; t < 100 && rh_holders(f->rc, "shared", l.id) < 5; t++)
        lockcore_run(c, 10);
    /* Our lease "expired" and another client took the key on two nodes. */
    assert_int_equal(0, rh_set(f->rc, 0, "shared", "someone-else"));
    assert_int_equal(0, rh_set(f->rc, 1, "shared", "someone-else"));
    assert_int_equal(lockcore_release(c, &l), 0);
    assert_int_equal(l.nodes_ok, 3);
    char v[64];
    rh_get(f->rc, 0, "shared", v, sizeof(v));
    assert_string_equal(v, "someone-else");
    rh_get(f->rc, 1, "shared", v, sizeof(v));
    assert_string_equal(v, "someone-else");
    assert_int_equal(rh_holders(f->rc, "shared", l.id), 0);
    lockcore_client_free(c);
}

static void test_redlock_extend_only_extends_own_key(void **state)
{
    struct fixture *f = *state;
    lockcore_client *c = client(f, NULL);
    struct lockcore_lock l;
    assert_int_equal(lockcore_acquire(c, "ext", &l), 0);
    uint64_t token = l.token;
    assert_int_equal(lockcore_extend(c, &l, 30000), 0);
    assert_int_equal(l.token, token);
    assert_int_equal(l.ttl_ms, 30000);
    assert_true(l.validity_ms > 29000);
    assert_true(rh_pttl(f->rc, 0, "ext") > 29000);

    for (int i = 0; i < 3; i++)
        assert_int_equal(0, rh_set(f->rc, i, "ext", "intruder"));
    assert_int_equal(lockcore_extend(c, &l, 50000), LOCKCORE_ELOST);
    for (int i = 0; i < 3; i++) {
        long long ttl = rh_pttl(f->rc, i, "ext");
        assert_true(ttl <= 60000 && ttl > 50000); /* the intruder's own TTL, untouched */
    }
    /* A lock whose validity ran out is not extended, even if its keys live. */
    struct lockcore_lock m;
    assert_int_equal(lockcore_acquire(c, "ext2", &m), 0);
    m.valid_until_ms = lockcore_now_ms() - 1;
    assert_int_equal(lockcore_extend(c, &m, 1000), LOCKCORE_ELOST);
    assert_non_null(strstr(lockcore_errmsg(c), "ran out"));
    lockcore_client_free(c);
}

static void tune_slow(struct lockcore_options *o)
{
    o->request_timeout_ms = 400;
}

/* A node that answers 150 ms late and is needed for the majority: the grant
 * waits for it, and the validity pays for the wait. */
static void test_redlock_validity_shrinks_by_elapsed_time(void **state)
{
    struct fixture *f = *state;
    struct fp_proxy *p;
    assert_int_equal(fp_new(rh_port(f->rc, 2), &p), 0);
    char url[64];
    snprintf(url, sizeof(url), "127.0.0.1:%d", fp_port(p));
    const char *saved = f->urls[2];
    f->urls[2] = url;
    lockcore_client *c = client(f, tune_slow);
    struct lockcore_node_status st[5];
    assert_int_equal(lockcore_status(c, "warm", st, 5), 5);
    fp_set_delay(p, FP_BOTH, 150);
    assert_int_equal(0, rh_set(f->rc, 0, "slow", "intruder")); /* so nodes 1..3 are not enough... */
    assert_int_equal(0, rh_set(f->rc, 4, "slow", "intruder")); /* ...and the delayed node 2 is needed */
    struct lockcore_lock l;
    uint64_t t0 = lockcore_now_ms();
    assert_int_equal(lockcore_acquire(c, "slow", &l), 0);
    uint64_t took = lockcore_now_ms() - t0;
    assert_true(took >= 150);
    assert_true(l.validity_ms <= 10000 - 102 - 150);
    assert_true(l.validity_ms >= 10000 - 102 - took - 1);
    lockcore_client_free(c);
    fp_free(p);
    f->urls[2] = saved;
}

/* A stopped node is given exactly the per-node timeout, then counted as
 * failed; the client does not hang on it. */
static void test_redlock_per_node_timeout_is_respected(void **state)
{
    struct fixture *f = *state;
    lockcore_client *c = client(f, tune_slow);
    struct lockcore_node_status st[5];
    assert_int_equal(lockcore_status(c, "warm", st, 5), 5);
    assert_int_equal(rh_pause(f->rc, 0), 0);
    assert_int_equal(rh_pause(f->rc, 1), 0);
    assert_int_equal(0, rh_set(f->rc, 2, "stopped", "intruder"));
    struct lockcore_lock l;
    uint64_t t0 = lockcore_now_ms();
    int rc = lockcore_acquire(c, "stopped", &l);
    uint64_t took = lockcore_now_ms() - t0;
    assert_int_equal(rc, LOCKCORE_ENOQUORUM);
    assert_true(took >= 400);
    assert_true(took < 400 + 1000);
    assert_non_null(strstr(lockcore_errmsg(c), "no reply within"));
    /* With the nodes back, the connections still work and replies that
     * arrive late do not leak into the next operation. */
    assert_int_equal(rh_resume(f->rc, 0), 0);
    assert_int_equal(rh_resume(f->rc, 1), 0);
    assert_int_equal(lockcore_acquire(c, "after-pause", &l), 0);
    assert_int_equal(lockcore_status(c, "after-pause", st, 5), 5);
    unsigned ours = 0;
    for (int i = 0; i < 5; i++)
        ours += st[i].reachable && strcmp(st[i].holder, l.id) == 0;
    assert_true(ours >= 3);
    assert_int_equal(lockcore_release(c, &l), 0);
    lockcore_client_free(c);
}

static void tune_retry(struct lockcore_options *o)
{
    o->wait_mode = LOCKCORE_WAIT_POLL; /* the retry delays themselves */
    o->retry_count = 3;
    o->retry_delay_ms = 20;
    o->retry_jitter_ms = 60;
}

static void test_redlock_retry_jitter_spreads_retries(void **state)
{
    struct fixture *f = *state;
    for (int i = 0; i < 3; i++)
        assert_int_equal(0, rh_set(f->rc, i, "busy", "holder"));
    lockcore_client *c = client(f, tune_retry);
    uint64_t lo = UINT64_MAX, hi = 0;
    for (int k = 0; k < 6; k++) {
        struct lockcore_lock l;
        uint64_t t0 = lockcore_now_ms();
        assert_int_equal(lockcore_acquire(c, "busy", &l), LOCKCORE_ELOCKED);
        uint64_t took = lockcore_now_ms() - t0;
        assert_true(took >= 3 * 20);
        assert_true(took <= 3 * 80 + 500);
        lo = took < lo ? took : lo;
        hi = took > hi ? took : hi;
    }
    /* Three uniform draws over 60 ms per run: six equal sums are all but
     * impossible; equal sums would mean no jitter. */
    assert_true(hi - lo >= 10);
    lockcore_client_free(c);
}

static void test_redlock_partial_grant_is_rolled_back(void **state)
{
    struct fixture *f = *state;
    for (int i = 0; i < 3; i++)
        assert_int_equal(0, rh_set(f->rc, i, "partial", "holder"));
    lockcore_client *c = client(f, NULL);
    struct lockcore_lock l;
    assert_int_equal(lockcore_acquire(c, "partial", &l), LOCKCORE_ELOCKED);
    /* Nodes 3 and 4 granted us the key; the failed attempt must remove it. */
    char v3[64] = "x", v4[64] = "x";
    for (int t = 0; t < 100; t++) {
        rh_get(f->rc, 3, "partial", v3, sizeof(v3));
        rh_get(f->rc, 4, "partial", v4, sizeof(v4));
        if (!v3[0] && !v4[0])
            break;
        lockcore_run(c, 10);
    }
    assert_string_equal(v3, "");
    assert_string_equal(v4, "");
    rh_get(f->rc, 0, "partial", v3, sizeof(v3));
    assert_string_equal(v3, "holder");
    lockcore_client_free(c);
}

static void tune_reconnect(struct lockcore_options *o)
{
    o->retry_count = 5;
    o->retry_delay_ms = 50;
    o->retry_jitter_ms = 20;
}

static void test_redlock_reconnects_after_node_restart(void **state)
{
    struct fixture *f = *state;
    lockcore_client *c = client(f, tune_reconnect);
    struct lockcore_lock l;
    assert_int_equal(lockcore_acquire(c, "r1", &l), 0);
    assert_int_equal(lockcore_release(c, &l), 0);
    for (int i = 0; i < 3; i++)
        assert_int_equal(rh_restart(f->rc, i, 0), 0);
    /* Every old connection is dead; the client notices, reconnects with
     * backoff, reloads its scripts, and grants within its retries. */
    assert_int_equal(lockcore_acquire(c, "r2", &l), 0);
    /* Granted at a majority: the harness's own connections to the restarted
     * nodes may still be reconnecting on a busy machine. */
    for (int t = 0; t < 100 && rh_holders(f->rc, "r2", l.id) < 3; t++)
        hp_sleep_ms(20);
    assert_int_equal(rh_holders(f->rc, "r2", l.id) >= 3, 1);
    assert_int_equal(lockcore_release(c, &l), 0);
    /* Scripts flushed behind our back: NOSCRIPT falls back to EVAL. */
    for (int i = 0; i < 3; i++) {
        redisReply *r = rh_command(f->rc, i, "SCRIPT FLUSH");
        freeReplyObject(r);
    }
    assert_int_equal(lockcore_acquire(c, "r3", &l), 0);
    assert_int_equal(lockcore_extend(c, &l, 5000), 0);
    assert_int_equal(lockcore_release(c, &l), 0);
    /* A node whose NOSCRIPT reply came after the grant was decided never
     * set the key; a majority always did. */
    assert_true(l.nodes_ok >= 2);
    lockcore_client_free(c);
}

static void on_any(lockcore_client *c, int rc, const struct lockcore_lock *l, void *arg)
{
    (void)c, (void)rc, (void)l;
    ++*(int *)arg;
}

/* Writing to a node that died must not raise SIGPIPE, whose default action
 * would kill the program linking lockcore. lockcore_pollfds() writes what
 * is queued without reading: the first write to the dead node draws a
 * reset, the second one meets it. */
static void test_redlock_dead_node_raises_no_sigpipe(void **state)
{
    (void)state;
    signal(SIGPIPE, SIG_DFL);
    struct fixture *f = fx_new(1, NULL);
    lockcore_client *c = client(f, NULL);
    struct lockcore_lock l;
    assert_int_equal(lockcore_acquire(c, "pipe", &l), 0);
    assert_int_equal(rh_kill(f->rc, 0), 0);
    int ended = 0;
    struct pollfd fds[1];
    int t;
    for (int k = 0; k < 3; k++) {
        assert_int_equal(lockcore_acquire_async(c, "pipe2", on_any, &ended), 0);
        lockcore_pollfds(c, fds, 1, &t);
        struct timespec ts = {0, 20 * 1000000};
        nanosleep(&ts, NULL);
    }
    uint64_t deadline = lockcore_now_ms() + 5000;
    while (ended < 3 && lockcore_now_ms() < deadline)
        lockcore_run(c, 50);
    assert_int_equal(ended, 3);
    lockcore_client_free(c);
    rh_cluster_free(f->rc);
    free(f);
}

static void test_redlock_single_node_is_a_valid_cluster(void **state)
{
    (void)state;
    struct fixture *f = fx_new(1, NULL);
    lockcore_client *c = client(f, NULL);
    struct lockcore_lock a, b;
    assert_int_equal(lockcore_acquire(c, "solo", &a), 0);
    assert_int_equal(a.nodes_ok, 1);
    assert_int_equal(lockcore_acquire(c, "solo", &b), LOCKCORE_ELOCKED);
    assert_int_equal(lockcore_release(c, &a), 0);
    assert_int_equal(lockcore_acquire(c, "solo", &b), 0);
    assert_true(b.token > a.token);
    lockcore_client_free(c);
    rh_cluster_free(f->rc);
    free(f);
}

static void test_redlock_auth_and_select_work(void **state)
{
    (void)state;
    struct rh_options ro;
    rh_options_init(&ro);
    ro.user = "locker";
    ro.password = "s3cret";
    struct fixture *f = fx_new(3, &ro);
    /* rh_url carries the credentials; add a database number. */
    char urls[3][256];
    for (int i = 0; i < 3; i++) {
        snprintf(urls[i], sizeof(urls[i]), "redis://locker:s3cret@127.0.0.1:%d/2", rh_port(f->rc, i));
        f->urls[i] = urls[i];
    }
    lockcore_client *c = client(f, NULL);
    struct lockcore_lock l;
    assert_int_equal(lockcore_acquire(c, "authed", &l), 0);
    /* In database 2 of a majority (a loaded node may answer after the
     * grant). */
    int in_db2 = 0;
    redisReply *r;
    for (int i = 0; i < 3; i++) {
        freeReplyObject(rh_command(f->rc, i, "SELECT 2"));
        r = rh_command(f->rc, i, "EXISTS authed");
        in_db2 += r->integer == 1;
        freeReplyObject(r);
    }
    assert_true(in_db2 >= 2);
    assert_int_equal(lockcore_release(c, &l), 0);
    lockcore_client_free(c);

    /* A wrong password is a protocol error, with the server's words. */
    for (int i = 0; i < 3; i++) {
        snprintf(urls[i], sizeof(urls[i]), "redis://locker:wrong@127.0.0.1:%d", rh_port(f->rc, i));
        f->urls[i] = urls[i];
    }
    c = client(f, NULL);
    assert_int_equal(lockcore_acquire(c, "authed", &l), LOCKCORE_EPROTO);
    assert_non_null(strstr(lockcore_errmsg(c), "AUTH"));
    lockcore_client_free(c);
    rh_cluster_free(f->rc);
    free(f);
}

struct many {
    int granted, released, failed;
};

static void on_released(lockcore_client *c, int rc, const struct lockcore_lock *l, void *arg)
{
    (void)c, (void)l;
    struct many *m = arg;
    if (rc == 0)
        m->released++;
    else
        m->failed++;
}

static void on_granted(lockcore_client *c, int rc, const struct lockcore_lock *l, void *arg)
{
    struct many *m = arg;
    if (rc != 0) {
        m->failed++;
        return;
    }
    m->granted++;
    assert_int_equal(lockcore_release_async(c, l, on_released, m), 0);
}

/* 300 steps pipelined at once: the last reply may take a while to be read
 * on a loaded machine or under valgrind; this test is not about timeouts. */
static void tune_patient(struct lockcore_options *o)
{
    o->request_timeout_ms = 2000;
}

static void test_redlock_async_keeps_hundreds_in_flight(void **state)
{
    struct fixture *f = *state;
    lockcore_client *c = client(f, tune_patient);
    struct many m = {0};
    enum { K = 300 };
    for (int i = 0; i < K; i++) {
        char name[32];
        snprintf(name, sizeof(name), "many:%d", i);
        assert_int_equal(lockcore_acquire_async(c, name, on_granted, &m), 0);
    }
    assert_int_equal(lockcore_inflight(c), K);
    assert_int_equal(m.granted, 0); /* callbacks never run inside the start call */
    uint64_t deadline = lockcore_now_ms() + 10000;
    while (lockcore_inflight(c) > 0 && lockcore_now_ms() < deadline)
        lockcore_run(c, 100);
    assert_int_equal(m.granted, K);
    assert_int_equal(m.released, K);
    assert_int_equal(m.failed, 0);
    /* Only the fences' buckets remain: no key per resource, one hash per
     * FENCING_BUCKET_FIELDS buckets the resources fell into. */
    unsigned char seen[FENCING_BUCKETS / FENCING_BUCKET_FIELDS] = {0};
    long long hashes = 0;
    for (int i = 0; i < K; i++) {
        char name[32];
        snprintf(name, sizeof(name), "many:%d", i);
        unsigned h = fencing_bucket(name, strlen(name)) / FENCING_BUCKET_FIELDS;
        hashes += !seen[h];
        seen[h] = 1;
    }
    redisReply *r = rh_command(f->rc, 0, "DBSIZE");
    assert_int_equal(r->integer, hashes);
    freeReplyObject(r);
    assert_int_equal(tf_other_keys(f->rc, 0), 0);
    lockcore_client_free(c);
}

struct queue {
    int order[8];
    unsigned attempts[8];
    int granted, released, failed;
};

struct waiter_arg {
    struct queue *q;
    int index;
};

static void on_queue_released(lockcore_client *c, int rc, const struct lockcore_lock *l, void *arg)
{
    (void)c, (void)l;
    struct queue *q = ((struct waiter_arg *)arg)->q;
    if (rc == 0)
        q->released++;
    else
        q->failed++;
}

static void on_queue_granted(lockcore_client *c, int rc, const struct lockcore_lock *l, void *arg)
{
    struct waiter_arg *w = arg;
    if (rc != 0) {
        w->q->failed++;
        return;
    }
    w->q->attempts[w->q->granted] = l->attempts;
    w->q->order[w->q->granted++] = w->index;
    assert_int_equal(lockcore_release_async(c, l, on_queue_released, w), 0);
}

static void long_retries(struct lockcore_options *o)
{
    o->retry_count = -1;
    o->retry_delay_ms = 600000; /* only a release of this client can wake a waiter in time */
    o->retry_jitter_ms = 0;
}

/* Acquisitions of one client on one resource queue behind each other and
 * are granted in the order they were started, each at its first attempt,
 * as the release before it frees the resource. */
static void test_redlock_waiters_of_one_client_are_served_in_order(void **state)
{
    struct fixture *f = *state;
    lockcore_client *c = client(f, long_retries);
    struct queue q = {0};
    struct waiter_arg args[8];
    for (int i = 0; i < 8; i++) {
        args[i] = (struct waiter_arg){&q, i};
        assert_int_equal(lockcore_acquire_async(c, "fifo", on_queue_granted, &args[i]), 0);
    }
    uint64_t deadline = lockcore_now_ms() + 10000;
    while (lockcore_inflight(c) > 0 && lockcore_now_ms() < deadline)
        lockcore_run(c, 100);
    assert_int_equal(q.granted, 8);
    assert_int_equal(q.released, 8);
    assert_int_equal(q.failed, 0);
    for (int i = 0; i < 8; i++) {
        assert_int_equal(q.order[i], i);
        assert_int_equal(q.attempts[i], 1);
    }
    lockcore_client_free(c);
}

static void on_canceled(lockcore_client *c, int rc, const struct lockcore_lock *l, void *arg)
{
    (void)c, (void)l;
    *(int *)arg = rc;
}

static void test_redlock_free_cancels_operations_in_flight(void **state)
{
    struct fixture *f = *state;
    lockcore_client *c = client(f, NULL);
    int rc = 1;
    assert_int_equal(lockcore_acquire_async(c, "cancel", on_canceled, &rc), 0);
    lockcore_client_free(c);
    assert_int_equal(rc, LOCKCORE_ECANCELED);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_redlock_grants_with_all_nodes_up, setup5, teardown),
        cmocka_unit_test_setup_teardown(test_redlock_grants_with_minority_down, setup5, teardown),
        cmocka_unit_test_setup_teardown(test_redlock_refuses_with_majority_down, setup5, teardown),
        cmocka_unit_test_setup_teardown(test_redlock_contention_has_one_winner, setup5, teardown),
        cmocka_unit_test_setup_teardown(test_redlock_release_keeps_foreign_value, setup5, teardown),
        cmocka_unit_test_setup_teardown(test_redlock_extend_only_extends_own_key, setup5, teardown),
        cmocka_unit_test_setup_teardown(test_redlock_validity_shrinks_by_elapsed_time, setup5, teardown),
        cmocka_unit_test_setup_teardown(test_redlock_per_node_timeout_is_respected, setup5, teardown),
        cmocka_unit_test_setup_teardown(test_redlock_retry_jitter_spreads_retries, setup5, teardown),
        cmocka_unit_test_setup_teardown(test_redlock_partial_grant_is_rolled_back, setup5, teardown),
        cmocka_unit_test_setup_teardown(test_redlock_reconnects_after_node_restart, setup3, teardown),
        cmocka_unit_test(test_redlock_dead_node_raises_no_sigpipe),
        cmocka_unit_test(test_redlock_single_node_is_a_valid_cluster),
        cmocka_unit_test(test_redlock_auth_and_select_work),
        cmocka_unit_test_setup_teardown(test_redlock_async_keeps_hundreds_in_flight, setup3, teardown),
        cmocka_unit_test_setup_teardown(test_redlock_free_cancels_operations_in_flight, setup3, teardown),
        cmocka_unit_test_setup_teardown(test_redlock_waiters_of_one_client_are_served_in_order, setup3,
                                        teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
