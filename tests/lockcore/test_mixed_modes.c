/*
 * A per-call wait mode (lockcore_call) keeps every guarantee on a client
 * whose own mode differs: a waiter's give-up hands on as its own mode
 * says, not its client's. Against 3 real redis-server nodes (testkit).
 *
 * S1 fair-cancel: fair waiters F1, F2, F3 in line; a fair holder releases
 *    and names F1; F1 is canceled (its caller hung up) before it claims.
 *    Its give-up must hand the lock to F2 as a FAIR release would: F2
 *    keeps its place (a waiter that is only slow keeps its turn), F3 is
 *    not told to jump in. F1 is a FAIR call on a NOTIFY-default client
 *    (what fencelockd does for every "wait":"fair" request) vs, as the
 *    control, the same call on a FAIR-default client. F2 is then paused
 *    400 ms (< queue_ttl_ms 3000): F3 must not be granted meanwhile.
 * S2 poll-default give-up: a NOTIFY call W1 on a POLL-default client is
 *    named by a fair holder's release and canceled before it claims; the
 *    next waiter W2 must be granted about at once (the give-up hands the
 *    reservation on), as when W1's client is NOTIFY-default (control).
 *
 * Exits 1 when the call on the other-default client breaks what the
 * control keeps (both did before a give-up took its own mode).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <hiredis/hiredis.h>
#include <lockcore/lockcore.h>

#include "redis_harness.h"

static struct rh_cluster *rc;
static const char *urls[3];

struct seen {
    int done, rc;
    uint64_t at;
    struct lockcore_lock lock;
};

static void on_done(lockcore_client *c, int rc_, const struct lockcore_lock *l, void *arg)
{
    (void)c;
    struct seen *s = arg;
    s->done = 1;
    s->rc = rc_;
    s->at = lockcore_now_ms();
    if (l)
        s->lock = *l;
}

static lockcore_client *client(int mode)
{
    struct lockcore_options o;
    lockcore_options_init(&o);
    o.nodes = urls;
    o.n_nodes = 3;
    o.ttl_ms = 10000;
    o.retry_count = -1;
    o.wait_mode = mode;
    lockcore_client *c = NULL;
    char err[256];
    if (lockcore_client_new(&o, &c, err, sizeof(err)) != 0) {
        fprintf(stderr, "client: %s\n", err);
        exit(2);
    }
    return c;
}

static long long zcard_all(const char *key)
{
    long long min = -1;
    for (int i = 0; i < 3; i++) {
        redisReply *r = rh_command(rc, i, "ZCARD %s", key);
        long long n = r && r->type == REDIS_REPLY_INTEGER ? r->integer : -1;
        if (r)
            freeReplyObject(r);
        if (min < 0 || n < min)
            min = n;
    }
    return min;
}

/* Run the given clients (NULL-terminated) for ms, or until *until. */
static void run(lockcore_client **cs, int ms, const int *until)
{
    uint64_t end = lockcore_now_ms() + (uint64_t)ms;
    while (lockcore_now_ms() < end && !(until && *until))
        for (lockcore_client **c = cs; *c; c++)
            lockcore_run(*c, 2);
}

static long long node_ms(int i)
{
    redisReply *r = rh_command(rc, i, "TIME");
    long long ms = r && r->type == REDIS_REPLY_ARRAY && r->elements == 2
                       ? atoll(r->element[0]->str) * 1000 + atoll(r->element[1]->str) / 1000
                       : 0;
    if (r)
        freeReplyObject(r);
    return ms;
}

/* The place (ms left on node 0) of the i-th waiter of key's queue. */
static long long place_left(const char *res, int idx)
{
    char q[256], dl[256];
    snprintf(q, sizeof(q), "{%s}:waiters", res);
    snprintf(dl, sizeof(dl), "{%s}:waiting", res);
    redisReply *r = rh_command(rc, 0, "ZRANGE %s %d %d", q, idx, idx);
    if (!r || r->type != REDIS_REPLY_ARRAY || r->elements != 1) {
        if (r)
            freeReplyObject(r);
        return -1;
    }
    redisReply *d = rh_command(rc, 0, "HGET %s %s", dl, r->element[0]->str);
    long long left = d && d->type == REDIS_REPLY_STRING ? atoll(d->str) - node_ms(0) : -1;
    freeReplyObject(r);
    if (d)
        freeReplyObject(d);
    return left;
}

static int fair_acquire(lockcore_client *c, const char *res, int mode, struct seen *s)
{
    struct lockcore_call call;
    lockcore_call_init(c, &call);
    call.wait_mode = mode;
    call.retry_count = -1;
    call.wait_ms = 20000;
    call.ttl_ms = 10000;
    struct lockcore_request rq = {.resource = res};
    return lockcore_acquire_call_async(c, &rq, &call, on_done, s);
}

/* S1; returns 1 if F3 was granted before F2 (fairness broken). */
static int s1(int c1_default, const char *res)
{
    lockcore_client *h = client(LOCKCORE_WAIT_FAIR), *c1 = client(c1_default),
                    *c2 = client(LOCKCORE_WAIT_FAIR), *c3 = client(LOCKCORE_WAIT_FAIR);
    struct lockcore_lock held;
    if (lockcore_acquire(h, res, &held) != 0) {
        fprintf(stderr, "holder: %s\n", lockcore_errmsg(h));
        exit(2);
    }
    char q[256];
    snprintf(q, sizeof(q), "{%s}:waiters", res);
    /* A fair holder keeps its place until it releases; the blocking
     * acquire returned at a majority, so let the last node's reply in. */
    lockcore_client *only_h[] = {h, NULL};
    for (int i = 0; i < 100 && zcard_all(q) < 1; i++)
        run(only_h, 10, NULL);
    long long base = zcard_all(q);
    struct seen f1 = {0}, f2 = {0}, f3 = {0};
    lockcore_client *only1[] = {c1, NULL}, *only2[] = {c2, NULL}, *only3[] = {c3, NULL};
    lockcore_client *all23[] = {c2, c3, NULL}, *all[] = {c1, c2, c3, NULL};
    fair_acquire(c1, res, LOCKCORE_WAIT_FAIR, &f1);
    for (int i = 0; i < 200 && zcard_all(q) < base + 1; i++)
        run(only1, 5, NULL);
    fair_acquire(c2, res, LOCKCORE_WAIT_FAIR, &f2);
    for (int i = 0; i < 200 && zcard_all(q) < base + 2; i++)
        run(only2, 5, NULL);
    fair_acquire(c3, res, LOCKCORE_WAIT_FAIR, &f3);
    for (int i = 0; i < 200 && zcard_all(q) < base + 3; i++)
        run(only3, 5, NULL);
    run(all, 100, NULL); /* everyone subscribed and asleep */
    if (zcard_all(q) != base + 3) {
        fprintf(stderr, "setup: %lld waiters\n", zcard_all(q));
        redisReply *r = rh_command(rc, 0, "ZRANGE %s 0 -1 WITHSCORES", q);
        for (size_t i = 0; r && i < r->elements; i++)
            fprintf(stderr, "  %s\n", r->element[i]->str);
        exit(2);
    }
    /* The holder releases: F1 is named. F1's client is not run: it is
     * canceled (its caller hung up) before it claims. */
    lockcore_release(h, &held);
    lockcore_cancel(c1, on_done, &f1);
    run(only1, 30, NULL);                   /* its give-up goes out */
    long long f2_left = place_left(res, 0); /* F2 heads the line now */
    /* F2 is paused 400 ms; F3 runs. */
    run(only3, 400, &f3.done);
    int overtaken = f3.done && f3.rc == 0 && !f2.done;
    printf("  %s-default F1: F2's place after F1's give-up: %lld ms left; F3 granted while F2 paused: %s\n",
           c1_default == LOCKCORE_WAIT_FAIR ? "FAIR" : "NOTIFY", f2_left, overtaken ? "YES" : "no");
    if (f3.done && f3.rc == 0)
        lockcore_release(c3, &f3.lock);
    run(all23, 3000, &f2.done);
    if (f2.done && f2.rc == 0)
        lockcore_release(c2, &f2.lock);
    lockcore_cancel(c3, on_done, &f3);
    run(all23, 100, NULL);
    lockcore_client_free(c1);
    lockcore_client_free(c2);
    lockcore_client_free(c3);
    lockcore_client_free(h);
    return overtaken;
}

/* S2; returns W2's wait after W1's cancel, in ms. */
static long long s2(int c1_default, const char *res)
{
    lockcore_client *h = client(LOCKCORE_WAIT_FAIR), *c1 = client(c1_default),
                    *c2 = client(LOCKCORE_WAIT_NOTIFY);
    struct lockcore_lock held;
    if (lockcore_acquire(h, res, &held) != 0)
        exit(2);
    char q[256];
    snprintf(q, sizeof(q), "{%s}:waiters", res);
    lockcore_client *only_h[] = {h, NULL};
    for (int i = 0; i < 100 && zcard_all(q) < 1; i++)
        run(only_h, 10, NULL); /* as in s1 */
    long long base = zcard_all(q);
    struct seen w1 = {0}, w2 = {0};
    lockcore_client *only1[] = {c1, NULL}, *only2[] = {c2, NULL};
    fair_acquire(c1, res, LOCKCORE_WAIT_NOTIFY, &w1);
    for (int i = 0; i < 200 && zcard_all(q) < base + 1; i++)
        run(only1, 5, NULL);
    fair_acquire(c2, res, LOCKCORE_WAIT_NOTIFY, &w2);
    for (int i = 0; i < 200 && zcard_all(q) < base + 2; i++)
        run(only2, 5, NULL);
    lockcore_client *both[] = {c1, c2, NULL};
    run(both, 100, NULL);
    lockcore_release(h, &held); /* a fair release names W1 and tells nobody else */
    uint64_t t0 = lockcore_now_ms();
    lockcore_cancel(c1, on_done, &w1);
    run(both, 5000, &w2.done);
    long long waited = w2.done && w2.rc == 0 ? (long long)(w2.at - t0) : -1;
    printf("  %s-default W1: W2 granted %lld ms after W1 gave up\n",
           c1_default == LOCKCORE_WAIT_POLL ? "POLL" : "NOTIFY", waited);
    if (w2.done && w2.rc == 0)
        lockcore_release(c2, &w2.lock);
    lockcore_client_free(c1);
    lockcore_client_free(c2);
    lockcore_client_free(h);
    return waited;
}

int main(void)
{
    if (rh_cluster_start(3, NULL, &rc) != 0) {
        fprintf(stderr, "no redis\n");
        return 2;
    }
    for (int i = 0; i < 3; i++)
        urls[i] = rh_url(rc, i);
    int bad = 0;
    int rounds = getenv("ROUNDS") ? atoi(getenv("ROUNDS")) : 3;
    int ctl = 0, bug = 0;
    char res[64];
    printf("S1: a fair waiter named and canceled; the next fair waiter paused\n");
    for (int r = 0; r < rounds; r++) {
        snprintf(res, sizeof(res), "s1:ctl:%d", r);
        ctl += s1(LOCKCORE_WAIT_FAIR, res);
        snprintf(res, sizeof(res), "s1:bug:%d", r);
        bug += s1(LOCKCORE_WAIT_NOTIFY, res);
    }
    printf("S1: F3 overtook paused F2: FAIR-default %d/%d, NOTIFY-default %d/%d\n", ctl, rounds, bug, rounds);
    if (bug > ctl) {
        printf("FAIL S1: a fair call on a NOTIFY-default client gives up as a notified one\n");
        bad = 1;
    }
    printf("S2: a notified waiter named and canceled; the next waiter's wait\n");
    long long wc = 0, wb = 0;
    for (int r = 0; r < rounds; r++) {
        snprintf(res, sizeof(res), "s2:ctl:%d", r);
        long long a = s2(LOCKCORE_WAIT_NOTIFY, res);
        snprintf(res, sizeof(res), "s2:bug:%d", r);
        long long b = s2(LOCKCORE_WAIT_POLL, res);
        wc = a > wc || a < 0 ? (a < 0 ? 99999 : a) : wc;
        wb = b > wb || b < 0 ? (b < 0 ? 99999 : b) : wb;
    }
    printf("S2: longest wait of W2: NOTIFY-default W1 %lld ms, POLL-default W1 %lld ms\n", wc, wb);
    if (wb > wc + 300) {
        printf("FAIL S2: a notified call on a POLL-default client does not hand its reservation on\n");
        bad = 1;
    }
    rh_cluster_free(rc);
    printf(bad ? "DEFECT\n" : "held\n");
    return bad;
}
