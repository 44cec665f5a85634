/* lockcore keep-alives against real redis-server processes: extension past
 * many TTLs, loss when a majority dies or another client takes the key,
 * loss reported once, and stopping at any moment. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "redis_harness.h"
#include <lockcore/lockcore.h>

struct fixture {
    struct rh_cluster *rc;
    unsigned n;
    const char *urls[3];
};

static int setup3(void **state)
{
    struct fixture *f = calloc(1, sizeof(*f));
    assert_non_null(f);
    f->n = 3;
    assert_int_equal(rh_cluster_start(3, NULL, &f->rc), 0);
    for (unsigned i = 0; i < f->n; i++)
        f->urls[i] = rh_url(f->rc, (int)i);
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

static lockcore_client *client(struct fixture *f, uint64_t ttl_ms)
{
    struct lockcore_options o;
    lockcore_options_init(&o);
    o.nodes = f->urls;
    o.n_nodes = f->n;
    o.ttl_ms = ttl_ms;
    o.retry_count = 0;
    lockcore_client *c = NULL;
    char err[256];
    if (lockcore_client_new(&o, &c, err, sizeof(err)) != 0)
        fail_msg("client: %s", err);
    return c;
}

/* Run the client's loop for ms milliseconds. */
static void run_for(lockcore_client *c, uint64_t ms)
{
    uint64_t end = lockcore_now_ms() + ms;
    for (uint64_t now = lockcore_now_ms(); now < end; now = lockcore_now_ms())
        lockcore_run(c, (int)(end - now));
}

struct lost {
    int calls;
    int rc;
    uint64_t at_ms;
    struct lockcore_lock lock;
};

static void on_lost(lockcore_client *c, int rc, const struct lockcore_lock *l, void *arg)
{
    (void)c;
    struct lost *s = arg;
    s->calls++;
    s->rc = rc;
    s->at_ms = lockcore_now_ms();
    s->lock = *l;
}

static void test_keepalive_extends_past_several_ttls(void **state)
{
    struct fixture *f = *state;
    lockcore_client *c = client(f, 600);
    struct lockcore_lock l;
    assert_int_equal(lockcore_acquire(c, "ka:long", &l), 0);
    struct lost lost = {0};
    lockcore_keepalive *k = NULL;
    assert_int_equal(lockcore_keepalive_start(c, &l, 0, 0, on_lost, &lost, &k), 0);
    assert_non_null(k);

    /* Five TTLs. Without extension the keys would be gone after one. */
    for (int round = 0; round < 5; round++) {
        run_for(c, 600);
        assert_int_equal(lost.calls, 0);
        assert_int_equal(rh_holders(f->rc, "ka:long", l.id), 3);
        long long pttl = rh_pttl(f->rc, 0, "ka:long");
        assert_true(pttl > 0 && pttl <= 600);
    }
    struct lockcore_lock now;
    assert_int_equal(lockcore_keepalive_get(k, &now), 0);
    assert_string_equal(now.id, l.id);
    assert_int_equal(now.token, l.token);
    assert_true(lockcore_remaining_ms(&now) > 0);
    assert_true(now.valid_until_ms > l.valid_until_ms + 2000);
    /* A third of the TTL left means an extension about every 400 ms: 3 s
     * needs at least 6; many more would mean the keep-alive spins. */
    unsigned ext = lockcore_keepalive_extensions(k);
    assert_true(ext >= 6);
    assert_true(ext <= 12);

    lockcore_keepalive_stop(k);
    assert_int_equal(lockcore_release(c, &now), 0);
    assert_int_equal(now.nodes_ok, 3);
    assert_int_equal(rh_holders(f->rc, "ka:long", l.id), 0);
    lockcore_client_free(c);
}

static void test_keepalive_renew_before_is_honoured(void **state)
{
    struct fixture *f = *state;
    lockcore_client *c = client(f, 1000);
    struct lockcore_lock l;
    assert_int_equal(lockcore_acquire(c, "ka:early", &l), 0);
    lockcore_keepalive *k = NULL;
    /* Renew when 800 of 1000 ms are left: every ~200 ms. */
    assert_int_equal(lockcore_keepalive_start(c, &l, 0, 800, NULL, NULL, &k), 0);
    run_for(c, 1100);
    unsigned ext = lockcore_keepalive_extensions(k);
    assert_true(ext >= 4 && ext <= 8);
    /* Just extended: more than 700 ms should be left on the nodes. */
    assert_true(rh_pttl(f->rc, 1, "ka:early") > 700);
    lockcore_keepalive_stop(k);
    lockcore_client_free(c);
}

/* A renew point at or above the validity an extension leaves (slow nodes,
 * or renew_before close to the TTL) must not make the keep-alive extend in
 * a tight loop. */
static void test_keepalive_does_not_spin_when_validity_is_short(void **state)
{
    struct fixture *f = *state;
    lockcore_client *c = client(f, 1000);
    struct lockcore_lock l;
    assert_int_equal(lockcore_acquire(c, "ka:spin", &l), 0);
    lockcore_keepalive *k = NULL;
    /* Validity is TTL minus drift (12 ms) minus the round trip: below 999. */
    assert_int_equal(lockcore_keepalive_start(c, &l, 0, 999, NULL, NULL, &k), 0);
    run_for(c, 1000);
    assert_int_equal(lockcore_keepalive_get(k, NULL), 0);
    unsigned ext = lockcore_keepalive_extensions(k);
    assert_true(ext >= 1);
    assert_true(ext <= 10);
    assert_int_equal(rh_holders(f->rc, "ka:spin", l.id), 3);
    lockcore_keepalive_stop(k);
    lockcore_client_free(c);
}

static void test_keepalive_on_lost_fires_once_when_majority_killed(void **state)
{
    struct fixture *f = *state;
    lockcore_client *c = client(f, 600);
    struct lockcore_lock l;
    assert_int_equal(lockcore_acquire(c, "ka:lost", &l), 0);
    struct lost lost = {0};
    lockcore_keepalive *k = NULL;
    assert_int_equal(lockcore_keepalive_start(c, &l, 0, 0, on_lost, &lost, &k), 0);
    run_for(c, 700); /* at least one extension */
    assert_true(lockcore_keepalive_extensions(k) >= 1);
    assert_int_equal(lost.calls, 0);

    struct lockcore_lock before;
    assert_int_equal(lockcore_keepalive_get(k, &before), 0);
    assert_int_equal(rh_kill(f->rc, 0), 0);
    assert_int_equal(rh_kill(f->rc, 1), 0);

    uint64_t deadline = lockcore_now_ms() + 3000;
    while (lost.calls == 0 && lockcore_now_ms() < deadline)
        lockcore_run(c, 50);
    assert_int_equal(lost.calls, 1);
    /* With a majority unreachable the keep-alive retries while validity is
     * left: the lock is lost when it runs out, not at the first failure,
     * and not much later. */
    struct lockcore_lock last;
    int rc = lockcore_keepalive_get(k, &last);
    assert_true(rc == LOCKCORE_ENOQUORUM || rc == LOCKCORE_ELOST);
    assert_int_equal(rc, lost.rc);
    assert_string_equal(lost.lock.id, l.id);
    assert_true(last.valid_until_ms >= before.valid_until_ms);
    assert_true(lost.at_ms >= last.valid_until_ms);
    assert_true(lost.at_ms <= last.valid_until_ms + 300);
    unsigned ext = lockcore_keepalive_extensions(k);

    /* Once lost, never called again and never extended again, even with
     * the nodes back. */
    assert_int_equal(rh_restart(f->rc, 0, 1), 0);
    assert_int_equal(rh_restart(f->rc, 1, 1), 0);
    run_for(c, 1000);
    assert_int_equal(lost.calls, 1);
    assert_int_equal(lockcore_keepalive_get(k, NULL), rc);
    assert_int_equal(lockcore_keepalive_extensions(k), ext);
    lockcore_keepalive_stop(k);
    lockcore_client_free(c);
}

static void test_keepalive_lost_at_once_when_key_taken(void **state)
{
    struct fixture *f = *state;
    lockcore_client *c = client(f, 3000);
    struct lockcore_lock l;
    assert_int_equal(lockcore_acquire(c, "ka:taken", &l), 0);
    struct lost lost = {0};
    lockcore_keepalive *k = NULL;
    assert_int_equal(lockcore_keepalive_start(c, &l, 0, 2500, on_lost, &lost, &k), 0);
    /* Another client overwrote the key on a majority. */
    for (int i = 0; i < 2; i++) {
        redisReply *r = rh_command(f->rc, i, "SET ka:taken intruder PX 60000");
        assert_non_null(r);
        freeReplyObject(r);
    }
    uint64_t t0 = lockcore_now_ms();
    while (lost.calls == 0 && lockcore_now_ms() < t0 + 3000)
        lockcore_run(c, 50);
    assert_int_equal(lost.calls, 1);
    assert_int_equal(lost.rc, LOCKCORE_ELOST);
    assert_int_equal(lockcore_keepalive_get(k, NULL), LOCKCORE_ELOST);
    /* Known at the first extension (~500 ms), long before validity ends. */
    assert_true(lost.at_ms < l.valid_until_ms - 1000);
    char v[64];
    rh_get(f->rc, 0, "ka:taken", v, sizeof(v));
    assert_string_equal(v, "intruder");
    lockcore_keepalive_stop(k);
    lockcore_client_free(c);
}

static void test_keepalive_stop_is_safe(void **state)
{
    struct fixture *f = *state;
    lockcore_keepalive_stop(NULL);
    assert_int_equal(lockcore_keepalive_get(NULL, NULL), -EINVAL);
    assert_int_equal(lockcore_keepalive_extensions(NULL), 0);

    lockcore_client *c = client(f, 1000);
    struct lockcore_lock l;
    assert_int_equal(lockcore_acquire(c, "ka:stop", &l), 0);
    lockcore_keepalive *k = NULL;
    assert_int_equal(lockcore_keepalive_start(NULL, &l, 0, 0, NULL, NULL, &k), -EINVAL);
    assert_int_equal(lockcore_keepalive_start(c, &l, 1000, 1000, NULL, NULL, &k), -EINVAL);
    struct lockcore_lock expired = l;
    expired.valid_until_ms = lockcore_now_ms() - 1;
    assert_int_equal(lockcore_keepalive_start(c, &expired, 0, 0, NULL, NULL, &k), LOCKCORE_ELOST);
    assert_null(k);

    /* Stop with an extension in flight: renew at once, start it, stop. */
    struct lost lost = {0};
    assert_int_equal(lockcore_keepalive_start(c, &l, 1000, 999, on_lost, &lost, &k), 0);
    uint64_t deadline = lockcore_now_ms() + 1500;
    while (lockcore_inflight(c) == 0 && lockcore_now_ms() < deadline)
        lockcore_run(c, 10);
    assert_int_equal(lockcore_inflight(c), 1);
    lockcore_keepalive_stop(k);
    deadline = lockcore_now_ms() + 2000;
    while (lockcore_inflight(c) > 0 && lockcore_now_ms() < deadline)
        lockcore_run(c, 50);
    assert_int_equal(lockcore_inflight(c), 0);
    /* Stopped: no more extensions, the key runs out by its TTL. */
    long long p0 = rh_pttl(f->rc, 0, "ka:stop");
    run_for(c, 400);
    long long p1 = rh_pttl(f->rc, 0, "ka:stop");
    assert_true(p1 < p0 - 300);
    assert_int_equal(lost.calls, 0);

    /* Stop after a loss. */
    assert_int_equal(lockcore_acquire(c, "ka:stop2", &l), 0);
    assert_int_equal(lockcore_keepalive_start(c, &l, 0, 0, on_lost, &lost, &k), 0);
    for (int i = 0; i < 2; i++) {
        redisReply *r = rh_command(f->rc, i, "SET ka:stop2 intruder PX 60000");
        freeReplyObject(r);
    }
    deadline = lockcore_now_ms() + 2000;
    while (lost.calls == 0 && lockcore_now_ms() < deadline)
        lockcore_run(c, 50);
    assert_int_equal(lost.calls, 1);
    lockcore_keepalive_stop(k);

    /* Two keep-alives left running are freed with their client (the
     * sanitizer build checks nothing leaks or is freed twice). */
    lockcore_keepalive *k1 = NULL, *k2 = NULL;
    struct lockcore_lock m;
    assert_int_equal(lockcore_acquire(c, "ka:stop3", &m), 0);
    assert_int_equal(lockcore_keepalive_start(c, &m, 0, 0, NULL, NULL, &k1), 0);
    assert_int_equal(lockcore_keepalive_start(c, &m, 1000, 999, NULL, NULL, &k2), 0);
    deadline = lockcore_now_ms() + 1500;
    while (lockcore_inflight(c) == 0 && lockcore_now_ms() < deadline)
        lockcore_run(c, 10); /* until k2 starts an extension */
    assert_int_equal(lockcore_inflight(c), 1);
    lockcore_client_free(c);
}

/* A program whose critical section blocks (it sleeps 5 s with a 2 s TTL,
 * never turning its client's loop) keeps its lock with a keeper, which
 * extends from a thread and client of its own; another client is refused
 * all along. Then a loss (every node stopped past the validity) is seen
 * before the next write, even with the keeper unable to extend. */
static void test_keepalive_keeper_keeps_a_blocking_section(void **state)
{
    struct fixture *f = *state;
    struct lockcore_options o;
    lockcore_options_init(&o);
    o.nodes = f->urls;
    o.n_nodes = f->n;
    o.ttl_ms = 2000;
    o.retry_count = 0;
    lockcore_client *c = NULL, *other = client(f, 2000);
    assert_int_equal(lockcore_client_new(&o, &c, NULL, 0), 0);
    struct lockcore_lock l, cur, x;
    assert_int_equal(lockcore_acquire(c, "keeper", &l), 0);
    lockcore_keeper *k = NULL;
    char err[256];
    assert_int_equal(lockcore_keeper_start(&o, &l, 0, 0, &k, err, sizeof(err)), 0);
    for (int s = 0; s < 5; s++) {
        sleep(1); /* the work: blocking, no lockcore_run */
        assert_int_equal(lockcore_keeper_get(k, &cur), 0);
        assert_true(lockcore_remaining_ms(&cur) > 0);
        assert_int_equal(lockcore_acquire(other, "keeper", &x), LOCKCORE_ELOCKED);
    }
    assert_int_equal(lockcore_keeper_stop(k, &cur), 0);
    assert_string_equal(cur.id, l.id);
    assert_int_equal(lockcore_release(c, &cur), 0);

    /* Lost: every node stopped for longer than the validity. */
    assert_int_equal(lockcore_acquire(c, "keeper", &l), 0);
    assert_int_equal(lockcore_keeper_start(&o, &l, 0, 0, &k, err, sizeof(err)), 0);
    for (unsigned i = 0; i < f->n; i++)
        assert_int_equal(rh_pause(f->rc, (int)i), 0);
    uint64_t until = l.valid_until_ms;
    while (lockcore_now_ms() < until + 100)
        usleep(50 * 1000);
    int rc = lockcore_keeper_get(k, &cur);
    for (unsigned i = 0; i < f->n; i++)
        assert_int_equal(rh_resume(f->rc, (int)i), 0);
    assert_int_not_equal(rc, 0);
    assert_non_null(strstr(lockcore_keeper_errmsg(k), "lost"));
    assert_int_not_equal(lockcore_keeper_stop(k, NULL), 0);
    /* Bad arguments. */
    assert_int_equal(lockcore_keeper_start(NULL, &l, 0, 0, &k, err, sizeof(err)), -EINVAL);
    assert_int_equal(lockcore_keeper_start(&o, &l, 0, 0, &k, err, sizeof(err)), LOCKCORE_ELOST);
    assert_int_equal(lockcore_keeper_get(NULL, NULL), -EINVAL);
    assert_int_equal(lockcore_keeper_stop(NULL, NULL), 0);
    lockcore_client_free(other);
    lockcore_client_free(c);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_keepalive_extends_past_several_ttls, setup3, teardown),
        cmocka_unit_test_setup_teardown(test_keepalive_renew_before_is_honoured, setup3, teardown),
        cmocka_unit_test_setup_teardown(test_keepalive_does_not_spin_when_validity_is_short, setup3,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_keepalive_on_lost_fires_once_when_majority_killed, setup3,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_keepalive_lost_at_once_when_key_taken, setup3, teardown),
        cmocka_unit_test_setup_teardown(test_keepalive_stop_is_safe, setup3, teardown),
        cmocka_unit_test_setup_teardown(test_keepalive_keeper_keeps_a_blocking_section, setup3, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
