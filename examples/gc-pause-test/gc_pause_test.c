/*
 * A GC-pause test of your own, written against the installed test kit:
 * three real redis-server nodes and a real storage-guard, two lockcore
 * clients. Client A takes the lock, reads, then stalls past its TTL (the
 * "GC pause"); client B takes the lock, reads and writes; A wakes up and
 * writes with its old token. The test asserts that storage-guard refused
 * A's write, and checks the audit log: no stale write accepted, no
 * acknowledged write lost.
 *
 * Build: make (see the Makefile: pkg-config fencelock-testkit lockcore cmocka).
 */
#include <inttypes.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include <fencelock-testkit/testkit.h>
#include <lockcore/lockcore.h>

#define TTL_MS 500

struct env {
    struct rh_cluster *nodes;
    struct tk_sg *sg;
    lockcore_client *a, *b;
};

static lockcore_client *client(struct rh_cluster *nodes)
{
    const char *urls[3];
    for (int i = 0; i < 3; i++)
        urls[i] = rh_url(nodes, i);
    struct lockcore_options o;
    lockcore_options_init(&o);
    o.nodes = urls;
    o.n_nodes = 3;
    o.ttl_ms = TTL_MS;
    o.retry_count = -1;
    o.wait_ms = 5000;
    lockcore_client *c = NULL;
    char err[256];
    if (lockcore_client_new(&o, &c, err, sizeof(err)) != 0)
        fail_msg("lockcore_client_new: %s", err);
    return c;
}

static int setup(void **state)
{
    static struct env e;
    memset(&e, 0, sizeof(e));
    /* The kit finds storage-guard in $SG_EXE or PATH, redis-server in
     * $REDIS_SERVER or PATH. */
    if (rh_cluster_start(3, NULL, &e.nodes) != 0 || tk_sg_start(NULL, &e.sg) != 0)
        return -1;
    e.a = client(e.nodes);
    e.b = client(e.nodes);
    *state = &e;
    return 0;
}

static int teardown(void **state)
{
    struct env *e = *state;
    lockcore_client_free(e->a);
    lockcore_client_free(e->b);
    tk_sg_free(e->sg);
    rh_cluster_free(e->nodes);
    return 0;
}

/* A fenced read (?token=) or write of the record "balance". Returns the
 * HTTP status; *value gets the value read. */
static int sg_read(struct env *e, uint64_t token, long long *value)
{
    char path[128];
    snprintf(path, sizeof(path), "/v1/records/balance?token=%" PRIu64, token);
    struct hc_response r = {0};
    assert_int_equal(hc_get(tk_sg_port(e->sg), path, &r), 0);
    int status = r.status;
    *value = status == 200 ? json_integer_value(json_object_get(r.json, "value")) : 0;
    hc_response_clear(&r);
    return status;
}

static int sg_write(struct env *e, uint64_t token, long long value, uint64_t *version)
{
    char body[128];
    snprintf(body, sizeof(body), "{\"value\": %lld, \"token\": %" PRIu64 "}", value, token);
    struct hc_response r = {0};
    assert_int_equal(hc_put(tk_sg_port(e->sg), "/v1/records/balance", body, NULL, &r), 0);
    int status = r.status;
    *version = (uint64_t)json_integer_value(json_object_get(r.json, "version"));
    hc_response_clear(&r);
    return status;
}

static void test_gc_pause_write_is_refused(void **state)
{
    struct env *e = *state;
    struct lockcore_lock la, lb;
    long long va, vb;
    uint64_t ver_b = 0, ver_a = 0;

    assert_int_equal(lockcore_acquire(e->a, "balance", &la), 0);
    assert_int_equal(sg_read(e, la.token, &va), 404); /* no record yet */

    hp_sleep_ms(TTL_MS + 300); /* A's "GC pause": its lease runs out */

    assert_int_equal(lockcore_acquire(e->b, "balance", &lb), 0);
    assert_true(lb.token > la.token);
    assert_int_equal(sg_read(e, lb.token, &vb), 404);
    assert_int_equal(sg_write(e, lb.token, vb + 100, &ver_b), 200);
    lockcore_release(e->b, &lb);

    /* A wakes up and writes what it computed before the pause. */
    assert_int_equal(sg_write(e, la.token, va + 1, &ver_a), 409);

    struct tk_log log = {0};
    assert_int_equal(tk_log_fetch(tk_sg_port(e->sg), "balance", &log), 0);
    char msg[512];
    int bad = tk_check_no_stale_write(&log, msg, sizeof(msg));
    if (bad != 0)
        fail_msg("%s", msg);
    struct tk_ack acked = {"balance", ver_b, lb.token};
    bad = tk_check_no_ack_lost(&log, &acked, 1, msg, sizeof(msg));
    if (bad != 0)
        fail_msg("%s", msg);
    tk_log_clear(&log);
}

/* storage-guard killed -9 right after acknowledging a write: the write is
 * still there after the restart. */
static void test_gc_pause_ack_survives_kill9(void **state)
{
    struct env *e = *state;
    struct lockcore_lock l;
    long long v;
    uint64_t ver = 0;
    assert_int_equal(lockcore_acquire(e->a, "balance", &l), 0);
    assert_int_equal(sg_read(e, l.token, &v), 200);
    assert_int_equal(sg_write(e, l.token, v + 1, &ver), 200);
    lockcore_release(e->a, &l);

    assert_int_equal(tk_sg_kill(e->sg), 0);
    assert_int_equal(tk_sg_restart(e->sg), 0);

    struct tk_log log = {0};
    assert_int_equal(tk_log_fetch(tk_sg_port(e->sg), "balance", &log), 0);
    struct tk_ack acked = {"balance", ver, l.token};
    char msg[512];
    int bad = tk_check_no_ack_lost(&log, &acked, 1, msg, sizeof(msg));
    if (bad != 0)
        fail_msg("%s", msg);
    tk_log_clear(&log);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_gc_pause_write_is_refused),
        cmocka_unit_test(test_gc_pause_ack_survives_kill9),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
