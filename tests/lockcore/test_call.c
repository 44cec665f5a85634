/* lockcore_acquire_call against real redis-server processes: each
 * acquisition's own TTL, wait bound, retries and wait mode on one client,
 * owner tags in the ids of every kind, and the arguments it refuses. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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

/* A client whose own options are far from what the calls ask for. */
static lockcore_client *client(struct fixture *f, int wait_mode)
{
    struct lockcore_options o;
    lockcore_options_init(&o);
    o.nodes = f->urls;
    o.n_nodes = 3;
    o.ttl_ms = 30000;
    o.retry_count = 0;
    o.wait_mode = wait_mode;
    lockcore_client *c = NULL;
    char err[256];
    if (lockcore_client_new(&o, &c, err, sizeof(err)) != 0)
        fail_msg("client: %s", err);
    return c;
}

static long long zcard(struct fixture *f, int node, const char *key)
{
    redisReply *r = rh_command(f->rc, node, "ZCARD %s", key);
    assert_non_null(r);
    long long n = r->type == REDIS_REPLY_INTEGER ? r->integer : -1;
    freeReplyObject(r);
    return n;
}

static void test_call_ttl_is_the_acquisition_s_own(void **state)
{
    struct fixture *f = *state;
    lockcore_client *c = client(f, LOCKCORE_WAIT_NOTIFY);
    struct lockcore_call call;
    assert_int_equal(lockcore_call_init(c, &call), 0);
    assert_int_equal(call.ttl_ms, 30000);
    call.ttl_ms = 2000;
    struct lockcore_request rq = {.resource = "call:ttl"};
    struct lockcore_lock l;
    assert_int_equal(lockcore_acquire_call(c, &rq, &call, &l), 0);
    assert_int_equal(l.ttl_ms, 2000);
    assert_true(l.validity_ms <= 2000);
    /* On every node that has the key (a grant needs a majority; a busy
     * machine may leave the last node's reply in flight). */
    int on = 0;
    for (int i = 0; i < 3; i++) {
        long long pttl = rh_pttl(f->rc, i, "call:ttl");
        assert_true(pttl == -2 || (pttl > 0 && pttl <= 2000));
        on += pttl > 0;
    }
    assert_true(on >= 2);
    /* The next plain acquisition has the client's TTL again. */
    struct lockcore_lock l2;
    assert_int_equal(lockcore_acquire(c, "call:ttl2", &l2), 0);
    assert_int_equal(l2.ttl_ms, 30000);
    on = 0;
    for (int i = 0; i < 3; i++) {
        long long pttl = rh_pttl(f->rc, i, "call:ttl2");
        assert_true(pttl == -2 || pttl > 2000);
        on += pttl > 2000;
    }
    assert_true(on >= 2);
    lockcore_release(c, &l);
    lockcore_release(c, &l2);
    lockcore_client_free(c);
}

/* The client makes one attempt; the call waits, and is granted when the
 * holder releases. */
static void test_call_waits_where_the_client_would_not(void **state)
{
    struct fixture *f = *state;
    lockcore_client *holder = client(f, LOCKCORE_WAIT_NOTIFY);
    lockcore_client *c = client(f, LOCKCORE_WAIT_NOTIFY);
    struct lockcore_lock held, l;
    struct lockcore_call hc;
    lockcore_call_init(holder, &hc);
    hc.ttl_ms = 1500;
    struct lockcore_request rq = {.resource = "call:wait"};
    assert_int_equal(lockcore_acquire_call(holder, &rq, &hc, &held), 0);
    /* The client's own options: one attempt, refused at once. */
    assert_int_equal(lockcore_acquire(c, "call:wait", &l), LOCKCORE_ELOCKED);
    assert_int_equal(l.attempts, 1);
    /* With a wait of its own it outlasts the holder's TTL (nobody releases). */
    struct lockcore_call call;
    lockcore_call_init(c, &call);
    call.retry_count = -1;
    call.wait_ms = 10000;
    uint64_t t0 = lockcore_now_ms();
    assert_int_equal(lockcore_acquire_call(c, &rq, &call, &l), 0);
    assert_true(lockcore_now_ms() - t0 < 9000);
    assert_true(l.token > held.token);
    lockcore_release(c, &l);
    lockcore_client_free(c);
    lockcore_client_free(holder);
}

/* A wait bound of its own ends the retries, where the client's options
 * (no deadline, no retry limit) would retry on. */
static void test_call_wait_bound_ends_the_retries(void **state)
{
    struct fixture *f = *state;
    lockcore_client *holder = client(f, LOCKCORE_WAIT_NOTIFY);
    struct lockcore_options o;
    lockcore_options_init(&o);
    o.nodes = f->urls;
    o.n_nodes = 3;
    o.retry_count = -1;
    o.wait_mode = LOCKCORE_WAIT_POLL;
    lockcore_client *c = NULL;
    char err[256];
    assert_int_equal(lockcore_client_new(&o, &c, err, sizeof(err)), 0);
    struct lockcore_lock held, l;
    assert_int_equal(lockcore_acquire(holder, "call:bound", &held), 0);
    struct lockcore_call call;
    lockcore_call_init(c, &call);
    call.wait_ms = 600;
    struct lockcore_request rq = {.resource = "call:bound"};
    uint64_t t0 = lockcore_now_ms();
    assert_int_equal(lockcore_acquire_call(c, &rq, &call, &l), LOCKCORE_ELOCKED);
    uint64_t took = lockcore_now_ms() - t0;
    assert_true(took >= 550 && took < 5000);
    assert_true(l.attempts >= 2);
    lockcore_release(holder, &held);
    lockcore_client_free(c);
    lockcore_client_free(holder);
}

struct seen {
    int done, rc;
    struct lockcore_lock lock;
};

static void on_done(lockcore_client *c, int rc, const struct lockcore_lock *lock, void *arg)
{
    (void)c;
    struct seen *s = arg;
    s->done = 1;
    s->rc = rc;
    s->lock = *lock;
}

/* A waiter's place in the nodes' queue: taken by a notified call on a
 * polling client, never by a polling call on a notifying one. */
static void test_call_wait_mode_is_the_acquisition_s_own(void **state)
{
    struct fixture *f = *state;
    lockcore_client *holder = client(f, LOCKCORE_WAIT_NOTIFY);
    struct lockcore_lock held;
    assert_int_equal(lockcore_acquire(holder, "call:mode", &held), 0);
    for (int round = 0; round < 2; round++) {
        int client_mode = round == 0 ? LOCKCORE_WAIT_POLL : LOCKCORE_WAIT_NOTIFY;
        int call_mode = round == 0 ? LOCKCORE_WAIT_NOTIFY : LOCKCORE_WAIT_POLL;
        lockcore_client *c = client(f, client_mode);
        struct lockcore_call call;
        lockcore_call_init(c, &call);
        call.wait_mode = call_mode;
        call.retry_count = -1;
        call.wait_ms = 1500;
        struct lockcore_request rq = {.resource = "call:mode"};
        struct seen s = {0};
        assert_int_equal(lockcore_acquire_call_async(c, &rq, &call, on_done, &s), 0);
        uint64_t end = lockcore_now_ms() + 700;
        while (!s.done && lockcore_now_ms() < end)
            lockcore_run(c, 50);
        assert_false(s.done);
        long long places = zcard(f, 0, "{call:mode}:waiters") + zcard(f, 1, "{call:mode}:waiters") +
                           zcard(f, 2, "{call:mode}:waiters");
        if (call_mode == LOCKCORE_WAIT_NOTIFY)
            assert_true(places >= 2);
        else
            assert_int_equal(places, 0);
        end = lockcore_now_ms() + 5000;
        while (!s.done && lockcore_now_ms() < end)
            lockcore_run(c, 50);
        assert_true(s.done);
        assert_int_equal(s.rc, LOCKCORE_ELOCKED);
        lockcore_client_free(c);
    }
    lockcore_release(holder, &held);
    lockcore_client_free(holder);
}

struct order {
    char seen[8];
    int n;
};

struct grantee {
    struct order *o;
    char name;
    int done, rc;
};

static void ignore(lockcore_client *c, int rc, const struct lockcore_lock *lock, void *arg)
{
    (void)c, (void)rc, (void)lock, (void)arg;
}

static void grant_then_release(lockcore_client *c, int rc, const struct lockcore_lock *lock, void *arg)
{
    struct grantee *g = arg;
    g->done = 1;
    g->rc = rc;
    if (rc == 0) {
        g->o->seen[g->o->n++] = g->name;
        assert_int_equal(lockcore_release_async(c, lock, ignore, NULL), 0);
    }
}

/* Fair waiters of one client take their places in the nodes' queues at
 * once, so a later fair waiter of another client is not granted between
 * them (one client serving many callers, as fencelockd does). */
static void test_call_fair_waiters_of_one_client_keep_their_order(void **state)
{
    struct fixture *f = *state;
    lockcore_client *h = client(f, LOCKCORE_WAIT_NOTIFY);
    lockcore_client *c1 = client(f, LOCKCORE_WAIT_NOTIFY), *c2 = client(f, LOCKCORE_WAIT_NOTIFY);
    struct lockcore_lock held;
    assert_int_equal(lockcore_acquire(h, "call:fairq", &held), 0);
    struct order o = {0};
    struct grantee g[3] = {{&o, '1', 0, 0}, {&o, '2', 0, 0}, {&o, '3', 0, 0}};
    lockcore_client *who[3] = {c1, c1, c2};
    struct lockcore_request rq = {.resource = "call:fairq"};
    for (int i = 0; i < 3; i++) {
        struct lockcore_call call;
        lockcore_call_init(who[i], &call);
        call.wait_mode = LOCKCORE_WAIT_FAIR;
        call.retry_count = -1;
        call.wait_ms = 10000;
        call.ttl_ms = 5000 + 1000 * (unsigned)i; /* different options, one client */
        assert_int_equal(lockcore_acquire_call_async(who[i], &rq, &call, grant_then_release, &g[i]), 0);
        uint64_t end = lockcore_now_ms() + 40;
        while (lockcore_now_ms() < end) {
            lockcore_run(c1, 5);
            lockcore_run(c2, 5);
        }
    }
    lockcore_release(h, &held);
    uint64_t end = lockcore_now_ms() + 8000;
    while (!(g[0].done && g[1].done && g[2].done) && lockcore_now_ms() < end) {
        lockcore_run(c1, 5);
        lockcore_run(c2, 5);
    }
    assert_int_equal(o.n, 3);
    assert_memory_equal(o.seen, "123", 3);
    for (int i = 0; i < 50; i++) { /* the releases go out */
        lockcore_run(c1, 2);
        lockcore_run(c2, 2);
    }
    lockcore_client_free(c1);
    lockcore_client_free(c2);
    lockcore_client_free(h);
}

/* Every kind's ids carry the owner's tag: the first hold and a re-entry,
 * a permit taken in line and without a wait, a set, a reader, a writer. */
static void test_call_owner_tag_in_every_kind_s_ids(void **state)
{
    struct fixture *f = *state;
    lockcore_client *c = client(f, LOCKCORE_WAIT_NOTIFY);
    struct lockcore_call call;
    lockcore_call_init(c, &call);
    call.owner = "alice";
    const char *set[] = {"call:set:a", "call:set:b"};
    struct lockcore_request rqs[] = {
        {.resource = "call:own:plain"},
        {.kind = LOCKCORE_LOCK_PERMIT, .resource = "call:own:sem", .permits = 2},
        {.kind = LOCKCORE_LOCK_MULTI, .resources = set, .n_resources = 2},
        {.kind = LOCKCORE_LOCK_REENTRANT, .resource = "call:own:re"},
        {.kind = LOCKCORE_LOCK_READ, .resource = "call:own:rw"},
        {.kind = LOCKCORE_LOCK_WRITE, .resource = "call:own:w"},
    };
    char tag[LOCKCORE_OWNER_TAG_LEN + 1];
    assert_int_equal(lockcore_owner_tag("alice", tag), 0);
    assert_int_equal(strlen(tag), LOCKCORE_OWNER_TAG_LEN);
    for (int wait = 0; wait < 2; wait++) {
        /* In line (a waiter's id is made up front) and not. */
        call.retry_count = wait ? -1 : 0;
        call.wait_ms = wait ? 2000 : 0;
        for (size_t i = 0; i < sizeof(rqs) / sizeof(rqs[0]); i++) {
            struct lockcore_lock l;
            assert_int_equal(lockcore_acquire_call(c, &rqs[i], &call, &l), 0);
            assert_true(lockcore_id_owned_by(l.id, "alice"));
            assert_false(lockcore_id_owned_by(l.id, "bob"));
            assert_memory_equal(l.id + 16, tag, LOCKCORE_OWNER_TAG_LEN);
            /* The id keeps its layout: the client's prefix, digits, the attempt. */
            assert_int_equal(strlen(l.id), LOCKCORE_ID_LEN);
            if (rqs[i].kind == LOCKCORE_LOCK_REENTRANT) {
                struct lockcore_request join = rqs[i];
                join.join = l.id;
                struct lockcore_lock hold;
                assert_int_equal(lockcore_acquire_call(c, &join, &call, &hold), 0);
                assert_true(lockcore_id_owned_by(hold.id, "alice"));
                assert_string_not_equal(hold.id, l.id);
                assert_int_equal(hold.token, l.token);
                assert_int_equal(lockcore_release(c, &hold), 0);
            }
            assert_int_equal(lockcore_release(c, &l), 0);
        }
    }
    /* Without an owner, the digits are random. */
    struct lockcore_lock l;
    assert_int_equal(lockcore_acquire(c, "call:own:none", &l), 0);
    assert_false(lockcore_id_owned_by(l.id, "alice"));
    lockcore_release(c, &l);
    lockcore_client_free(c);
}

struct read_done {
    int done, rc;
};

static void on_read(lockcore_client *c, int rc, const struct lockcore_lock *lock, void *arg)
{
    (void)c, (void)lock;
    struct read_done *d = arg;
    d->done = 1;
    d->rc = rc;
}

static void run_for(lockcore_client *c, const int *done)
{
    uint64_t end = lockcore_now_ms() + 3000;
    while (!*done && lockcore_now_ms() < end)
        lockcore_run(c, 10);
}

/* Status reads without blocking give what the blocking ones give, for
 * the plain lock, a reentrant one, a read-write one and a semaphore. */
static void test_call_status_without_blocking(void **state)
{
    struct fixture *f = *state;
    lockcore_client *c = client(f, LOCKCORE_WAIT_NOTIFY);
    struct lockcore_lock a, r, w, p;
    assert_int_equal(lockcore_acquire(c, "st:plain", &a), 0);
    assert_int_equal(lockcore_reentrant_acquire(c, "st:re", NULL, &r), 0);
    assert_int_equal(lockcore_rw_acquire(c, "st:rw", 0, &w), 0);
    assert_int_equal(lockcore_sem_acquire(c, "st:sem", 3, &p), 0);
    struct lockcore_node_status sync[3], async[3];
    struct {
        const char *res;
        unsigned kind;
    } cases[] = {{"st:plain", 0}, {"st:re", LOCKCORE_LOCK_REENTRANT}, {"st:rw", LOCKCORE_LOCK_READ}};
    for (size_t i = 0; i < 3; i++) {
        int want = cases[i].kind == 0 ? lockcore_status(c, cases[i].res, sync, 3)
                   : cases[i].kind == LOCKCORE_LOCK_REENTRANT
                       ? lockcore_reentrant_status(c, cases[i].res, sync, 3)
                       : lockcore_rw_status(c, cases[i].res, sync, 3);
        assert_int_equal(want, 3);
        struct read_done d = {0};
        assert_int_equal(lockcore_status_async(c, cases[i].res, cases[i].kind, async, 3, on_read, &d), 0);
        assert_false(d.done); /* never from inside the call */
        run_for(c, &d.done);
        assert_true(d.done);
        assert_int_equal(d.rc, 3);
        for (int n = 0; n < 3; n++) {
            assert_string_equal(async[n].holder, sync[n].holder);
            assert_int_equal(async[n].holds, sync[n].holds);
            assert_int_equal(async[n].fence, sync[n].fence);
        }
    }
    assert_string_equal(async[0].holder, ""); /* a reader holds no key */
    assert_int_equal(async[0].holds, 1);
    struct lockcore_permit_status ps[3], pa[3];
    assert_int_equal(lockcore_sem_status(c, "st:sem", 3, ps, 3), 1);
    struct read_done d = {0};
    assert_int_equal(lockcore_sem_status_async(c, "st:sem", 3, pa, 3, on_read, &d), 0);
    run_for(c, &d.done);
    assert_int_equal(d.rc, 1);
    for (int i = 0; i < 3; i++) {
        assert_int_equal(pa[i].held, ps[i].held);
        assert_string_equal(pa[i].holder, ps[i].holder);
    }
    assert_int_equal(lockcore_status_async(c, "st:plain", 3, async, 3, on_read, &d), -EINVAL);
    assert_int_equal(lockcore_status_async(c, "st:plain", 0, async, 2, on_read, &d), -ENOSPC);
    assert_int_equal(lockcore_sem_status_async(c, "st:sem", 0, pa, 3, on_read, &d), -EINVAL);
    lockcore_release(c, &a);
    lockcore_release(c, &r);
    lockcore_release(c, &w);
    lockcore_release(c, &p);
    lockcore_client_free(c);
}

static void test_call_refuses_bad_arguments(void **state)
{
    struct fixture *f = *state;
    lockcore_client *c = client(f, LOCKCORE_WAIT_NOTIFY);
    struct lockcore_call call;
    struct lockcore_lock l;
    struct lockcore_request rq = {.resource = "call:bad"};
    assert_int_equal(lockcore_call_init(NULL, &call), -EINVAL);
    assert_int_equal(lockcore_call_init(c, NULL), -EINVAL);
    lockcore_call_init(c, &call);
    call.ttl_ms = 0;
    assert_int_equal(lockcore_acquire_call(c, &rq, &call, &l), -EINVAL);
    assert_non_null(strstr(lockcore_errmsg(c), "ttl_ms"));
    lockcore_call_init(c, &call);
    call.wait_mode = 7;
    assert_int_equal(lockcore_acquire_call(c, &rq, &call, &l), -EINVAL);
    assert_non_null(strstr(lockcore_errmsg(c), "wait_mode"));
    lockcore_call_init(c, &call);
    call.retry_count = -2;
    assert_int_equal(lockcore_acquire_call(c, &rq, &call, &l), -EINVAL);
    char long_owner[LOCKCORE_OWNER_MAX + 2];
    memset(long_owner, 'x', sizeof(long_owner) - 1);
    long_owner[sizeof(long_owner) - 1] = '\0';
    lockcore_call_init(c, &call);
    call.owner = long_owner;
    assert_int_equal(lockcore_acquire_call(c, &rq, &call, &l), -EINVAL);
    assert_non_null(strstr(lockcore_errmsg(c), "owner"));
    call.owner = "";
    assert_int_equal(lockcore_acquire_call(c, &rq, &call, &l), -EINVAL);
    struct lockcore_request bad = {.kind = 3, .resource = "call:bad"};
    assert_int_equal(lockcore_acquire_call(c, &bad, NULL, &l), -EINVAL);
    struct lockcore_request join_plain = {.resource = "call:bad",
                                          .join = "0000000000000000000000000000000000000000"};
    assert_int_equal(lockcore_acquire_call(c, &join_plain, NULL, &l), -EINVAL);
    assert_int_equal(lockcore_acquire_call(c, NULL, NULL, &l), -EINVAL);
    assert_int_equal(lockcore_acquire_call(c, &rq, NULL, NULL), -EINVAL);
    assert_int_equal(lockcore_acquire_call_async(c, &rq, NULL, NULL, NULL), -EINVAL);
    /* Nothing of those was set on the nodes. */
    for (int i = 0; i < 3; i++)
        assert_int_equal(rh_pttl(f->rc, i, "call:bad"), -2);
    char tag[LOCKCORE_OWNER_TAG_LEN + 1];
    assert_int_equal(lockcore_owner_tag(NULL, tag), -EINVAL);
    assert_int_equal(lockcore_owner_tag("", tag), -EINVAL);
    assert_int_equal(lockcore_owner_tag(long_owner, tag), -EINVAL);
    assert_false(lockcore_id_owned_by("not an id", "alice"));
    assert_false(lockcore_id_owned_by(NULL, "alice"));
    /* Tags differ between names and repeat for one. */
    char a[LOCKCORE_OWNER_TAG_LEN + 1], b[LOCKCORE_OWNER_TAG_LEN + 1], a2[LOCKCORE_OWNER_TAG_LEN + 1];
    lockcore_owner_tag("alice", a);
    lockcore_owner_tag("bob", b);
    lockcore_owner_tag("alice", a2);
    assert_string_not_equal(a, b);
    assert_string_equal(a, a2);
    lockcore_client_free(c);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_call_ttl_is_the_acquisition_s_own),
        cmocka_unit_test(test_call_waits_where_the_client_would_not),
        cmocka_unit_test(test_call_wait_bound_ends_the_retries),
        cmocka_unit_test(test_call_wait_mode_is_the_acquisition_s_own),
        cmocka_unit_test(test_call_fair_waiters_of_one_client_keep_their_order),
        cmocka_unit_test(test_call_owner_tag_in_every_kind_s_ids),
        cmocka_unit_test(test_call_status_without_blocking),
        cmocka_unit_test(test_call_refuses_bad_arguments),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
