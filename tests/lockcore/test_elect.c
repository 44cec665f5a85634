/* Leader election against real redis-server processes: campaigns in line,
 * resignation handing over at once, a leader that dies and one that waits
 * and dies, proclamations, observers told of every change, cancel, and the
 * arguments refused. */
#include <errno.h>
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

#include "redis_harness.h"
#include <lockcore/lockcore.h>

struct fixture {
    struct rh_cluster *rc;
    const char *urls[3];
    char url_buf[3][256];
};

static int setup(void **state)
{
    struct fixture *f = calloc(1, sizeof(*f));
    assert_non_null(f);
    assert_int_equal(rh_cluster_start(3, NULL, &f->rc), 0);
    for (int i = 0; i < 3; i++) {
        snprintf(f->url_buf[i], sizeof(f->url_buf[i]), "%s", rh_url(f->rc, i));
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

static lockcore_client *client_q(struct fixture *f, uint64_t ttl_ms, uint64_t queue_ttl_ms)
{
    struct lockcore_options o;
    lockcore_options_init(&o);
    o.nodes = f->urls;
    o.n_nodes = 3;
    o.ttl_ms = ttl_ms;
    o.queue_ttl_ms = queue_ttl_ms;
    lockcore_client *c = NULL;
    char err[256];
    if (lockcore_client_new(&o, &c, err, sizeof(err)) != 0)
        fail_msg("client: %s", err);
    return c;
}

static lockcore_client *client(struct fixture *f, uint64_t ttl_ms)
{
    return client_q(f, ttl_ms, 600);
}

struct seen {
    int done, rc;
    struct lockcore_lock lock;
    uint64_t at;
};

static void on_done(lockcore_client *c, int rc, const struct lockcore_lock *lock, void *arg)
{
    (void)c;
    struct seen *s = arg;
    s->done = 1;
    s->rc = rc;
    s->lock = *lock;
    s->at = lockcore_now_ms();
}

/* Run every client until *done or ms pass. */
static void run_until(lockcore_client **cs, int n, const int *done, uint64_t ms)
{
    uint64_t end = lockcore_now_ms() + ms;
    while (!*done && lockcore_now_ms() < end)
        for (int i = 0; i < n; i++)
            lockcore_run(cs[i], 5);
}

static void test_elect_one_candidate_leads_with_its_epoch_and_value(void **state)
{
    struct fixture *f = *state;
    lockcore_client *c = client(f, 5000);
    struct lockcore_lock lead;
    assert_int_equal(lockcore_campaign(c, "el:one", "10.0.0.7:8080", NULL, &lead), 0);
    assert_true(lead.flags & LOCKCORE_LOCK_LEADER);
    assert_true(lead.token > 0);
    assert_true(lockcore_remaining_ms(&lead) > 0);
    lockcore_client *reader = client(f, 5000);
    struct lockcore_leader l;
    assert_int_equal(lockcore_leader(reader, "el:one", &l), 1);
    assert_true(l.held);
    assert_int_equal(l.epoch, lead.token);
    assert_string_equal(l.value, "10.0.0.7:8080");
    assert_string_equal(l.id, lead.id);
    assert_true(l.ttl_ms_left > 0 && l.ttl_ms_left <= 5000);
    /* The epoch is the resource's fence: a token like any other. */
    assert_int_equal(lockcore_resign(c, &lead), 0);
    assert_int_equal(lockcore_leader(reader, "el:one", &l), 0);
    assert_false(l.held);
    lockcore_client_free(reader);
    lockcore_client_free(c);
}

/* Candidates are elected in the order they asked; each resignation hands
 * over at once (well before any TTL), and every epoch is greater. */
static void test_elect_resignation_hands_over_in_order(void **state)
{
    struct fixture *f = *state;
    enum { N = 4 };
    lockcore_client *cs[N];
    struct seen s[N];
    memset(s, 0, sizeof(s));
    for (int i = 0; i < N; i++)
        cs[i] = client(f, 30000);
    struct lockcore_lock lead;
    assert_int_equal(lockcore_campaign(cs[0], "el:order", "c0", NULL, &lead), 0);
    for (int i = 1; i < N; i++) {
        char v[8];
        snprintf(v, sizeof(v), "c%d", i);
        assert_int_equal(lockcore_campaign_async(cs[i], "el:order", v, NULL, on_done, &s[i]), 0);
        /* Each in line before the next asks. */
        int never = 0;
        run_until(cs, N, &never, 100);
    }
    uint64_t prev = lead.token;
    for (int i = 1; i < N; i++) {
        uint64_t t0 = lockcore_now_ms();
        struct lockcore_lock old = i == 1 ? lead : s[i - 1].lock;
        assert_int_equal(lockcore_resign(cs[i - 1], &old), 0);
        run_until(cs, N, &s[i].done, 5000);
        assert_true(s[i].done);
        assert_int_equal(s[i].rc, 0);
        assert_true(s[i].at - t0 < 1000); /* TTL 30 s: handed over, not expired */
        assert_true(s[i].lock.token > prev);
        prev = s[i].lock.token;
        for (int j = i + 1; j < N; j++)
            assert_false(s[j].done); /* nobody jumped the line */
        struct lockcore_leader l;
        assert_int_equal(lockcore_leader(cs[0], "el:order", &l), 1);
        char v[8];
        snprintf(v, sizeof(v), "c%d", i);
        assert_string_equal(l.value, v);
        assert_int_equal(l.epoch, s[i].lock.token);
    }
    assert_int_equal(lockcore_resign(cs[N - 1], &s[N - 1].lock), 0);
    for (int i = 0; i < N; i++)
        lockcore_client_free(cs[i]);
}

/* A leader that dies (its client gone without resigning) is followed
 * after its TTL; a candidate that dies while it waits in line (SIGKILL)
 * does not stall the one behind it. */
static void test_elect_dead_leader_and_dead_candidate(void **state)
{
    struct fixture *f = *state;
    lockcore_client *a = client(f, 800);
    struct lockcore_lock lead;
    assert_int_equal(lockcore_campaign(a, "el:dead", "a", NULL, &lead), 0);
    /* A candidate in another process, killed while it waits. */
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        lockcore_client *b = client(f, 800);
        struct lockcore_lock l;
        lockcore_campaign(b, "el:dead", "b", NULL, &l);
        _exit(3);
    }
    usleep(300 * 1000); /* in line */
    kill(pid, SIGKILL);
    waitpid(pid, NULL, 0);
    lockcore_client *cc = client(f, 800);
    struct seen s = {0};
    assert_int_equal(lockcore_campaign_async(cc, "el:dead", "c", NULL, on_done, &s), 0);
    lockcore_client *cs[] = {cc};
    int never = 0;
    run_until(cs, 1, &never, 50);
    /* The leader dies: its client goes, the lock is not released. */
    uint64_t t0 = lockcore_now_ms();
    lockcore_client_free(a);
    run_until(cs, 1, &s.done, 5000);
    assert_true(s.done);
    assert_int_equal(s.rc, 0);
    assert_true(s.lock.token > lead.token);
    /* The TTL, then at most the dead candidate's place (queue_ttl 600 ms)
     * and its reservation. */
    assert_true(s.at - t0 < 800 + 600 + 500);
    struct lockcore_leader l;
    assert_int_equal(lockcore_leader(cc, "el:dead", &l), 1);
    assert_string_equal(l.value, "c");
    assert_int_equal(lockcore_resign(cc, &s.lock), 0);
    lockcore_client_free(cc);
}

struct told {
    int n, done, rc;
    struct lockcore_leader l;
};

static void on_told(lockcore_client *c, int rc, const struct lockcore_leader *l, void *arg)
{
    (void)c;
    struct told *t = arg;
    t->done = 1;
    t->rc = rc;
    t->l = *l;
    t->n++;
}

/* An observer is told of a proclamation (same epoch, new value), of a
 * resignation that hands over (the next epoch, not a moment of "none"),
 * and of a resignation with nobody in line (none). */
static void test_elect_observers_are_told_of_every_change(void **state)
{
    struct fixture *f = *state;
    lockcore_client *a = client(f, 30000), *b = client(f, 30000), *o = client(f, 30000);
    lockcore_client *cs[] = {a, b, o};
    struct lockcore_lock lead;
    assert_int_equal(lockcore_campaign(a, "el:obs", "v1", NULL, &lead), 0);
    struct lockcore_leader now;
    assert_int_equal(lockcore_observe(o, "el:obs", NULL, 0, &now), 0);
    assert_true(now.held);
    assert_string_equal(now.value, "v1");

    /* Nothing changes: the wait runs out, -ETIMEDOUT with the reading. */
    struct lockcore_leader same;
    assert_int_equal(lockcore_observe(o, "el:obs", &now, 300, &same), -ETIMEDOUT);
    assert_int_equal(same.epoch, now.epoch);

    struct told t = {0};
    assert_int_equal(lockcore_observe_async(o, "el:obs", &now, 10000, on_told, &t), 0);
    int never = 0;
    run_until(cs, 3, &never, 50);
    uint64_t t0 = lockcore_now_ms();
    assert_int_equal(lockcore_proclaim(a, &lead, "v2", 0), 0);
    run_until(cs, 3, &t.done, 5000);
    assert_int_equal(t.rc, 0);
    assert_true(lockcore_now_ms() - t0 < 500);
    assert_int_equal(t.l.epoch, lead.token); /* the epoch stays */
    assert_string_equal(t.l.value, "v2");

    struct seen s = {0};
    assert_int_equal(lockcore_campaign_async(b, "el:obs", "b", NULL, on_done, &s), 0);
    run_until(cs, 3, &never, 100);
    struct lockcore_leader prev = t.l;
    memset(&t, 0, sizeof(t));
    assert_int_equal(lockcore_observe_async(o, "el:obs", &prev, 10000, on_told, &t), 0);
    run_until(cs, 3, &never, 50);
    assert_int_equal(lockcore_resign(a, &lead), 0);
    run_until(cs, 3, &t.done, 5000);
    assert_int_equal(t.rc, 0);
    assert_true(t.l.held);
    assert_true(t.l.epoch > prev.epoch);
    assert_string_equal(t.l.value, "b");
    run_until(cs, 3, &s.done, 5000);
    assert_int_equal(s.rc, 0);
    assert_int_equal(s.lock.token, t.l.epoch);

    prev = t.l;
    memset(&t, 0, sizeof(t));
    assert_int_equal(lockcore_observe_async(o, "el:obs", &prev, 10000, on_told, &t), 0);
    run_until(cs, 3, &never, 50);
    assert_int_equal(lockcore_resign(b, &s.lock), 0);
    run_until(cs, 3, &t.done, 5000);
    assert_int_equal(t.rc, 0);
    assert_false(t.l.held);

    /* Cancel: the callback runs before the call returns. */
    memset(&t, 0, sizeof(t));
    assert_int_equal(lockcore_observe_async(o, "el:obs", &t.l, 0, on_told, &t), 0);
    assert_int_equal(lockcore_observe_cancel(o, on_told, &t), 1);
    assert_true(t.done);
    assert_int_equal(t.rc, LOCKCORE_ECANCELED);
    lockcore_client_free(a);
    lockcore_client_free(b);
    lockcore_client_free(o);
}

/* A leader told nothing dies: the observer reads again when its lock runs
 * out, and is told of the next leader. */
static void test_elect_observer_sees_a_dead_leader_replaced(void **state)
{
    struct fixture *f = *state;
    lockcore_client *a = client(f, 700), *b = client(f, 700), *o = client(f, 700);
    struct lockcore_lock lead;
    assert_int_equal(lockcore_campaign(a, "el:died", "a", NULL, &lead), 0);
    struct seen s = {0};
    assert_int_equal(lockcore_campaign_async(b, "el:died", "b", NULL, on_done, &s), 0);
    struct lockcore_leader now;
    assert_int_equal(lockcore_leader(o, "el:died", &now), 1);
    struct told t = {0};
    assert_int_equal(lockcore_observe_async(o, "el:died", &now, 10000, on_told, &t), 0);
    lockcore_client_free(a); /* dies holding it */
    lockcore_client *cs[] = {b, o};
    uint64_t t0 = lockcore_now_ms();
    run_until(cs, 2, &t.done, 5000);
    assert_int_equal(t.rc, 0);
    /* Told when its lock ran out: no leader for a moment, or already b. */
    assert_true(lockcore_now_ms() - t0 >= 600);
    if (!t.l.held) {
        struct lockcore_leader none = t.l;
        memset(&t, 0, sizeof(t));
        assert_int_equal(lockcore_observe_async(o, "el:died", &none, 10000, on_told, &t), 0);
        run_until(cs, 2, &t.done, 5000);
        assert_int_equal(t.rc, 0);
    }
    assert_true(t.l.held);
    assert_string_equal(t.l.value, "b");
    assert_true(t.l.epoch > now.epoch);
    lockcore_client_free(b);
    lockcore_client_free(o);
}

/* A deposed leader's proclamation and resignation change nothing. */
static void test_elect_deposed_leader_changes_nothing(void **state)
{
    struct fixture *f = *state;
    lockcore_client *a = client(f, 400), *b = client(f, 30000);
    struct lockcore_lock old;
    assert_int_equal(lockcore_campaign(a, "el:deposed", "a", NULL, &old), 0);
    usleep(600 * 1000); /* a's lock runs out */
    struct lockcore_lock lead;
    assert_int_equal(lockcore_campaign(b, "el:deposed", "b", NULL, &lead), 0);
    assert_true(lead.token > old.token);
    struct lockcore_lock late = old;
    assert_int_equal(lockcore_proclaim(a, &late, "a again", 0), LOCKCORE_ELOST);
    late = old;
    lockcore_resign(a, &late);
    assert_true(late.nodes_ok == 0);
    struct lockcore_leader l;
    assert_int_equal(lockcore_leader(b, "el:deposed", &l), 1);
    assert_string_equal(l.value, "b");
    assert_int_equal(l.epoch, lead.token);
    assert_int_equal(lockcore_resign(b, &lead), 0);
    lockcore_client_free(a);
    lockcore_client_free(b);
}

/* A leader known by its id alone (another process's, as through
 * fencelockd) proclaims and resigns: the epoch stays the node's. */
static void test_elect_leader_by_id_proclaims_and_resigns(void **state)
{
    struct fixture *f = *state;
    lockcore_client *a = client(f, 30000), *b = client(f, 30000);
    struct lockcore_lock lead;
    assert_int_equal(lockcore_campaign(a, "el:byid", "first", NULL, &lead), 0);
    struct lockcore_lock by_id;
    assert_int_equal(lockcore_lock_from_id(b, "el:byid", lead.id, &by_id), 0);
    by_id.flags |= LOCKCORE_LOCK_LEADER;
    if (lockcore_proclaim(b, &by_id, "second", 20000) != 0)
        fail_msg("proclaim: %s", lockcore_errmsg(b));
    assert_true(by_id.nodes_ok >= 2);
    struct lockcore_leader l;
    assert_int_equal(lockcore_leader(b, "el:byid", &l), 1);
    assert_int_equal(l.epoch, lead.token);
    assert_string_equal(l.value, "second");
    /* Without the leader flag it is no leader's lock. */
    struct lockcore_lock plain;
    assert_int_equal(lockcore_lock_from_id(b, "el:byid", lead.id, &plain), 0);
    assert_int_equal(lockcore_proclaim(b, &plain, "x", 0), -EINVAL);
    assert_int_equal(lockcore_resign(b, &by_id), 0);
    assert_int_equal(lockcore_leader(b, "el:byid", &l), 0);
    lockcore_client_free(a);
    lockcore_client_free(b);
}

/* A leader that resigned is not revived by a late lock step ("ghost",
 * docs/election.md): a resigns, its resignation misses node 0 (its keys
 * stay there), b is elected on nodes 1 and 2 and resigns, then a's lock
 * step reaches node 2 late and sets a's id there again. a's late
 * proclamation, its keep-alive and an extension by its id (as through
 * fencelockd) must not take node 2, where b's greater epoch was
 * proclaimed, so they miss a majority; and no reading shows a as leader
 * again, with an epoch below b's. The late bytes are stood in for by
 * writes to the nodes: what a late SET NX and a missed DEL leave. */
static void test_elect_late_lock_step_revives_no_leader(void **state)
{
    struct fixture *f = *state;
    lockcore_client *a = client(f, 30000), *b = client(f, 30000), *r = client(f, 30000);
    struct lockcore_lock lead, old;
    assert_int_equal(lockcore_campaign(a, "el:ghost", "a", NULL, &lead), 0);
    old = lead;
    char info[64];
    rh_get(f->rc, 0, "{el:ghost}:holder", info, sizeof(info));
    assert_int_equal(lockcore_resign(a, &lead), 0);
    /* The resignation missed node 0. */
    redisReply *x = rh_command(f->rc, 0, "SET el:ghost %s PX 30000", old.id);
    freeReplyObject(x);
    x = rh_command(f->rc, 0, "SET {el:ghost}:holder %s PX 30000", info);
    freeReplyObject(x);
    struct lockcore_lock blead;
    assert_int_equal(lockcore_campaign(b, "el:ghost", "b", NULL, &blead), 0);
    assert_true(blead.token > old.token);
    struct lockcore_leader l;
    assert_int_equal(lockcore_leader(r, "el:ghost", &l), 1);
    assert_int_equal(l.epoch, blead.token);
    assert_int_equal(lockcore_resign(b, &blead), 0);
    /* a's lock step reaches node 2 late. */
    x = rh_command(f->rc, 2, "SET el:ghost %s NX PX 30000", old.id);
    assert_non_null(x);
    assert_int_equal(x->type, REDIS_REPLY_STATUS);
    freeReplyObject(x);

    struct lockcore_lock late = old;
    assert_int_equal(lockcore_proclaim(a, &late, "a again", 0), LOCKCORE_ELOST);
    late = old;
    assert_int_equal(lockcore_extend(a, &late, 0), LOCKCORE_ELOST);
    struct lockcore_lock by_id;
    assert_int_equal(lockcore_lock_from_id(r, "el:ghost", old.id, &by_id), 0);
    by_id.flags |= LOCKCORE_LOCK_LEADER;
    assert_int_equal(lockcore_extend(r, &by_id, 0), LOCKCORE_ELOST);
    assert_int_equal(lockcore_lock_from_id(r, "el:ghost", old.id, &by_id), 0);
    by_id.flags |= LOCKCORE_LOCK_LEADER;
    assert_int_equal(lockcore_proclaim(r, &by_id, "a by id", 0), LOCKCORE_ELOST);
    rh_get(f->rc, 2, "{el:ghost}:holder", info, sizeof(info));
    assert_string_equal(info, ""); /* nothing proclaimed on node 2 */
    int rc = lockcore_leader(r, "el:ghost", &l);
    assert_true(rc == -EAGAIN || rc == 0);
    /* An observer that was told of b is not told of a. */
    struct lockcore_leader bl = {.held = 1, .epoch = blead.token};
    snprintf(bl.value, sizeof(bl.value), "b");
    snprintf(bl.id, sizeof(bl.id), "%s", blead.id);
    rc = lockcore_observe(r, "el:ghost", &bl, 300, &l);
    assert_true(rc == -ETIMEDOUT || (rc == 0 && (!l.held || l.epoch > blead.token)));
    /* The epoch key is the node's record: b's on nodes 1 and 2, a's on 0. */
    char e[32], want[32];
    snprintf(want, sizeof(want), "%llu", (unsigned long long)blead.token);
    rh_get(f->rc, 2, "{el:ghost}:epoch", e, sizeof(e));
    assert_string_equal(e, want);
    lockcore_client_free(a);
    lockcore_client_free(b);
    lockcore_client_free(r);
}

/* Every release of a leader's lock is a resignation: a plain
 * lockcore_release tells observers at once, and keeps the named
 * candidate's place in line (b, in line but slow to take it, still
 * leads next; c behind it waits). */
static void test_elect_plain_release_keeps_the_line(void **state)
{
    struct fixture *f = *state;
    lockcore_client *a = client_q(f, 30000, 3000), *b = client_q(f, 30000, 3000),
                    *c = client_q(f, 30000, 3000), *o = client(f, 30000);
    struct lockcore_lock lead;
    assert_int_equal(lockcore_campaign(a, "el:plain-rel", "a", NULL, &lead), 0);
    struct seen sb = {0}, sc = {0};
    int never = 0;
    assert_int_equal(lockcore_campaign_async(b, "el:plain-rel", "b", NULL, on_done, &sb), 0);
    lockcore_client *bs[] = {b};
    run_until(bs, 1, &never, 100);
    assert_int_equal(lockcore_campaign_async(c, "el:plain-rel", "c", NULL, on_done, &sc), 0);
    lockcore_client *cs[] = {c, o};
    run_until(cs, 1, &never, 100);
    struct lockcore_leader now;
    assert_int_equal(lockcore_leader(o, "el:plain-rel", &now), 1);
    struct told t = {0};
    assert_int_equal(lockcore_observe_async(o, "el:plain-rel", &now, 10000, on_told, &t), 0);
    run_until(cs, 2, &never, 50);
    /* b's client does not run from here: it is slow to take its turn
     * (its place lasts queue_ttl_ms, 3 s, from its last refresh). */
    assert_int_equal(lockcore_release(a, &lead), 0);
    run_until(cs, 2, &sc.done, 300);
    assert_false(sc.done); /* c did not jump the line */
    assert_true(t.done);   /* told well before a's TTL */
    assert_int_equal(t.rc, 0);
    assert_true(t.l.held == 0 || t.l.epoch > now.epoch);
    lockcore_client *all[] = {b, c};
    run_until(all, 2, &sb.done, 5000);
    assert_true(sb.done);
    assert_int_equal(sb.rc, 0);
    assert_false(sc.done);
    assert_int_equal(lockcore_release(b, &sb.lock), 0);
    run_until(all, 2, &sc.done, 5000);
    assert_int_equal(sc.rc, 0);
    assert_int_equal(lockcore_release(c, &sc.lock), 0);
    lockcore_client_free(a);
    lockcore_client_free(b);
    lockcore_client_free(c);
    lockcore_client_free(o);
}

/* A release of the leader's lock by its id without the leader flag (as
 * fencelockd's DELETE without kind=leader) still elects the next
 * candidate in line at once (the release names it), not when the lock
 * would have run out; only the observers' notice is a resignation's
 * alone (docs/election.md). */
static void test_elect_flagless_release_elects_the_next(void **state)
{
    struct fixture *f = *state;
    lockcore_client *a = client(f, 30000), *b = client(f, 30000), *r = client(f, 30000);
    struct lockcore_lock lead, by_id;
    assert_int_equal(lockcore_campaign(a, "el:flagless", "a", NULL, &lead), 0);
    struct seen sb = {0};
    int never = 0;
    assert_int_equal(lockcore_campaign_async(b, "el:flagless", "b", NULL, on_done, &sb), 0);
    lockcore_client *bs[] = {b};
    run_until(bs, 1, &never, 200);
    assert_false(sb.done);
    assert_int_equal(lockcore_lock_from_id(r, "el:flagless", lead.id, &by_id), 0);
    assert_int_equal(by_id.flags & LOCKCORE_LOCK_LEADER, 0);
    uint64_t t0 = lockcore_now_ms();
    assert_int_equal(lockcore_release(r, &by_id), 0);
    run_until(bs, 1, &sb.done, 5000); /* the lock's TTL is 30 s */
    assert_true(sb.done);
    assert_int_equal(sb.rc, 0);
    assert_true(sb.at - t0 < 5000);
    assert_true(sb.lock.token > lead.token);
    assert_int_equal(lockcore_resign(b, &sb.lock), 0);
    /* A plain lock of a name never used for an election is not touched by
     * this: extended and released as before, and no observer key appears. */
    struct lockcore_lock plain;
    assert_int_equal(lockcore_acquire(r, "el:never-an-election", &plain), 0);
    assert_int_equal(lockcore_extend(r, &plain, 0), 0);
    assert_int_equal(lockcore_release(r, &plain), 0);
    char e[32];
    rh_get(f->rc, 0, "{el:never-an-election}:epoch", e, sizeof(e));
    assert_string_equal(e, "");
    lockcore_client_free(a);
    lockcore_client_free(b);
    lockcore_client_free(r);
}

/* A repair of the fence (a leader's clock ran hours fast, and pushed the
 * fence and the election's epoch key with it) lowers the epoch key too:
 * the next leader, with a token of today, is proclaimed again. */
static void test_elect_repair_lowers_the_epoch_key(void **state)
{
    struct fixture *f = *state;
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    unsigned long long far = ((unsigned long long)ts.tv_sec + 7200) * 1000000ULL;
    for (int i = 0; i < 3; i++) {
        redisReply *x = rh_command(f->rc, i, "SET {el:rep}:fence %llu", far);
        freeReplyObject(x);
        x = rh_command(f->rc, i, "SET {el:rep}:epoch %llu", far);
        freeReplyObject(x);
    }
    lockcore_client *c = client(f, 5000);
    struct lockcore_node_status st[3];
    assert_int_equal(lockcore_fence_repair(c, "el:rep", 0, st, 3), 3);
    for (int i = 0; i < 3; i++) {
        char e[32];
        rh_get(f->rc, i, "{el:rep}:epoch", e, sizeof(e));
        assert_true(strtoull(e, NULL, 10) <= st[i].fence);
    }
    struct lockcore_lock lead;
    assert_int_equal(lockcore_campaign(c, "el:rep", "after repair", NULL, &lead), 0);
    assert_true(lead.token < far);
    struct lockcore_leader l;
    assert_int_equal(lockcore_leader(c, "el:rep", &l), 1);
    assert_int_equal(l.epoch, lead.token);
    assert_int_equal(lockcore_resign(c, &lead), 0);
    lockcore_client_free(c);
}

static long long zcard(struct fixture *f, int node, const char *key)
{
    redisReply *r = rh_command(f->rc, node, "ZCARD %s", key);
    assert_non_null(r);
    long long n = r->integer;
    freeReplyObject(r);
    return n;
}

/* A campaign canceled while it waits leaves the line; a wait bound ends
 * one with LOCKCORE_ELOCKED. */
static void test_elect_cancel_and_wait_bound(void **state)
{
    struct fixture *f = *state;
    lockcore_client *a = client(f, 30000), *b = client(f, 30000);
    struct lockcore_lock lead;
    assert_int_equal(lockcore_campaign(a, "el:cancel", "a", NULL, &lead), 0);
    struct seen s = {0};
    assert_int_equal(lockcore_campaign_async(b, "el:cancel", "b", NULL, on_done, &s), 0);
    lockcore_client *cs[] = {b};
    int never = 0;
    run_until(cs, 1, &never, 100);
    assert_true(zcard(f, 0, "{el:cancel}:waiters") + zcard(f, 1, "{el:cancel}:waiters") >= 1);
    assert_int_equal(lockcore_cancel(b, on_done, &s), 1);
    assert_true(s.done);
    assert_int_equal(s.rc, LOCKCORE_ECANCELED);
    run_until(cs, 1, &never, 100);
    /* Only the leader's own place is left (a holder leaves the line when
     * it releases): the canceled candidate's is gone. */
    char qid[LOCKCORE_ID_LEN + 1];
    snprintf(qid, sizeof(qid), "%.*s000000", LOCKCORE_ID_LEN - 6, lead.id);
    for (int i = 0; i < 3; i++) {
        redisReply *r = rh_command(f->rc, i, "ZRANGE {el:cancel}:waiters 0 -1");
        assert_non_null(r);
        for (size_t k = 0; k < r->elements; k++)
            assert_string_equal(r->element[k]->str, qid);
        freeReplyObject(r);
    }
    struct lockcore_call call;
    lockcore_call_init(b, &call);
    call.retry_count = -1;
    call.wait_ms = 300;
    struct lockcore_lock l;
    assert_int_equal(lockcore_campaign(b, "el:cancel", "b", &call, &l), LOCKCORE_ELOCKED);
    assert_int_equal(lockcore_resign(a, &lead), 0);
    lockcore_client_free(a);
    lockcore_client_free(b);
}

static void test_elect_refuses_bad_arguments(void **state)
{
    struct fixture *f = *state;
    lockcore_client *c = client(f, 5000);
    struct lockcore_lock l;
    char big[LOCKCORE_VALUE_MAX + 2];
    memset(big, 'v', sizeof(big) - 1);
    big[sizeof(big) - 1] = '\0';
    assert_int_equal(lockcore_campaign(c, "el:bad", big, NULL, &l), -EINVAL);
    assert_int_equal(lockcore_campaign(c, "", "v", NULL, &l), -EINVAL);
    assert_int_equal(lockcore_campaign(c, "el:bad", "v", NULL, NULL), -EINVAL);
    assert_int_equal(lockcore_campaign_async(c, "el:bad", "v", NULL, NULL, NULL), -EINVAL);
    /* A plain lock is not a leader's. */
    struct lockcore_lock plain;
    assert_int_equal(lockcore_acquire(c, "el:plain", &plain), 0);
    assert_int_equal(lockcore_proclaim(c, &plain, "v", 0), -EINVAL);
    assert_int_equal(lockcore_resign(c, &plain), -EINVAL);
    lockcore_release(c, &plain);
    struct lockcore_leader out;
    assert_int_equal(lockcore_leader(c, "", &out), -EINVAL);
    assert_int_equal(lockcore_leader(c, "el:bad", NULL), -EINVAL);
    assert_int_equal(lockcore_observe_async(c, "el:bad", NULL, 0, NULL, NULL), -EINVAL);
    lockcore_client_free(c);
    /* Without fencing there is no epoch. */
    struct lockcore_options o;
    lockcore_options_init(&o);
    o.nodes = f->urls;
    o.n_nodes = 3;
    o.fencing = 0;
    char err[256];
    assert_int_equal(lockcore_client_new(&o, &c, err, sizeof(err)), 0);
    assert_int_equal(lockcore_campaign(c, "el:bad", "v", NULL, &l), -EINVAL);
    assert_non_null(strstr(lockcore_errmsg(c), "fencing"));
    lockcore_client_free(c);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_elect_one_candidate_leads_with_its_epoch_and_value),
        cmocka_unit_test(test_elect_resignation_hands_over_in_order),
        cmocka_unit_test(test_elect_dead_leader_and_dead_candidate),
        cmocka_unit_test(test_elect_observers_are_told_of_every_change),
        cmocka_unit_test(test_elect_observer_sees_a_dead_leader_replaced),
        cmocka_unit_test(test_elect_deposed_leader_changes_nothing),
        cmocka_unit_test(test_elect_leader_by_id_proclaims_and_resigns),
        cmocka_unit_test(test_elect_cancel_and_wait_bound),
        cmocka_unit_test(test_elect_late_lock_step_revives_no_leader),
        cmocka_unit_test(test_elect_plain_release_keeps_the_line),
        cmocka_unit_test(test_elect_flagless_release_elects_the_next),
        cmocka_unit_test(test_elect_repair_lowers_the_epoch_key),
        cmocka_unit_test(test_elect_refuses_bad_arguments),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
