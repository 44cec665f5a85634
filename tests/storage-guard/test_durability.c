/* What storage-guard keeps across a restart, a SIGTERM and a kill -9: every
 * write that was answered 200 is there afterwards, with its fence. */
#include <errno.h>
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#include <cmocka.h>
#include <jansson.h>

#include "http.h"
#include "proc.h"
#include "sg_daemon.h"

static int setup(void **state)
{
    struct sgd *d = calloc(1, sizeof(*d));
    assert_non_null(d);
    sgd_init(d);
    sgd_start(d, NULL);
    *state = d;
    return 0;
}

static int teardown(void **state)
{
    struct sgd *d = *state;
    sgd_destroy(d);
    free(d);
    return 0;
}

static void put_ok(uint16_t port, const char *path, const char *body, int status)
{
    struct hc_response r;
    assert_int_equal(hc_put(port, path, body, NULL, &r), 0);
    if (r.status != status)
        fail_msg("want %d, got %d %s", status, r.status, r.body);
    hc_response_clear(&r);
}

static json_t *get_json(uint16_t port, const char *path, int status)
{
    struct hc_response r;
    assert_int_equal(hc_get(port, path, &r), 0);
    if (r.status != status)
        fail_msg("GET %s: want %d, got %d %s", path, status, r.status, r.body);
    json_t *j = json_incref(r.json);
    hc_response_clear(&r);
    assert_non_null(j);
    return j;
}

static void test_durability_restart_keeps_everything(void **state)
{
    struct sgd *d = *state;
    put_ok(d->port, "/v1/records/a", "{\"value\":{\"n\":1},\"token\":10,\"resource\":\"r\"}", 200);
    put_ok(d->port, "/v1/records/a", "{\"value\":{\"n\":2},\"token\":11,\"resource\":\"r\"}", 200);
    put_ok(d->port, "/v1/records/b", "{\"value\":\"x\",\"token\":9,\"resource\":\"r\"}", 409);
    json_decref(get_json(d->port, "/v1/records/b?token=40&resource=r", 404));
    int st = sgd_stop(d);
    assert_true(WIFEXITED(st) && WEXITSTATUS(st) == 0);

    sgd_start(d, NULL);
    json_t *j = get_json(d->port, "/v1/records/a", 200);
    assert_int_equal(json_integer_value(json_object_get(json_object_get(j, "value"), "n")), 2);
    assert_int_equal(json_integer_value(json_object_get(j, "version")), 2);
    assert_int_equal(json_integer_value(json_object_get(j, "token")), 11);
    json_decref(j);
    json_decref(get_json(d->port, "/v1/records/b", 404));
    j = get_json(d->port, "/v1/fences/r", 200);
    assert_int_equal(json_integer_value(json_object_get(j, "last_token")), 40);
    json_decref(j);
    j = get_json(d->port, "/v1/log?resource=r", 200);
    json_t *e = json_object_get(j, "entries");
    assert_int_equal(json_array_size(e), 4);
    assert_string_equal(json_string_value(json_object_get(json_array_get(e, 2), "outcome")), "stale");
    assert_string_equal(json_string_value(json_object_get(json_array_get(e, 3), "op")), "read");
    json_decref(j);
    /* The fence survived: the old holder is still refused after the restart. */
    put_ok(d->port, "/v1/records/a", "{\"value\":3,\"token\":39,\"resource\":\"r\"}", 409);
    put_ok(d->port, "/v1/records/a", "{\"value\":3,\"token\":40,\"resource\":\"r\"}", 200);
}

/* ---- a write burst interrupted by a signal ---- */

#define BURST_THREADS 8
#define BURST_MAX_WRITES 400
#define BURST_MAX_MS 8000

struct burster {
    uint16_t port;
    int id;
    int acked; /* writes 0..acked-1 were answered 200 */
    int errors;
};

static void *burst_main(void *arg)
{
    struct burster *b = arg;
    long long deadline = hp_now_ms() + BURST_MAX_MS;
    for (int i = 0; i < BURST_MAX_WRITES && hp_now_ms() < deadline; i++) {
        char path[64], body[128];
        snprintf(path, sizeof(path), "/v1/records/burst-%d-%d", b->id, i);
        snprintf(body, sizeof(body), "{\"value\":{\"t\":%d,\"i\":%d},\"token\":%d,\"resource\":\"burst-%d\"}",
                 b->id, i, i + 1, b->id);
        struct hc_response r;
        int rc = hc_put(b->port, path, body, NULL, &r);
        int status = rc == 0 ? r.status : 0;
        hc_response_clear(&r);
        if (status != 200) {
            /* The server is gone (or going): stop at the first failure, so
             * "answered" means exactly writes 0..acked-1. */
            b->errors++;
            break;
        }
        b->acked = i + 1;
    }
    return NULL;
}

/* Run a burst, send sig to the server after some writes were answered, and
 * return the per-thread acknowledged counts. */
static void burst_then_signal(struct sgd *d, int sig, struct burster *b)
{
    pthread_t th[BURST_THREADS];
    for (int i = 0; i < BURST_THREADS; i++) {
        b[i] = (struct burster){.port = d->port, .id = i};
        assert_int_equal(pthread_create(&th[i], NULL, burst_main, &b[i]), 0);
    }
    /* Wait until the burst is well under way (bounded), then strike. */
    long long deadline = hp_now_ms() + 5000;
    for (;;) {
        int total = 0;
        for (int i = 0; i < BURST_THREADS; i++)
            total += b[i].acked;
        if (total >= 80 || hp_now_ms() > deadline)
            break;
        hp_sleep_ms(2);
    }
    if (sig == SIGKILL) {
        sgd_kill9(d);
    } else {
        int st = sgd_stop(d);
        assert_true(WIFEXITED(st));
        assert_int_equal(WEXITSTATUS(st), 0);
    }
    for (int i = 0; i < BURST_THREADS; i++)
        pthread_join(th[i], NULL);
}

static void check_burst_survived(struct sgd *d, const struct burster *b)
{
    int total = 0, interrupted = 0;
    for (int t = 0; t < BURST_THREADS; t++) {
        total += b[t].acked;
        interrupted += b[t].errors;
        for (int i = 0; i < b[t].acked; i++) {
            char path[64];
            snprintf(path, sizeof(path), "/v1/records/burst-%d-%d", t, i);
            json_t *j = get_json(d->port, path, 200);
            json_t *v = json_object_get(j, "value");
            assert_int_equal(json_integer_value(json_object_get(v, "t")), t);
            assert_int_equal(json_integer_value(json_object_get(v, "i")), i);
            assert_int_equal(json_integer_value(json_object_get(j, "token")), i + 1);
            json_decref(j);
        }
        /* The fence is at least the last answered token (a write that was
         * committed but not answered may have raised it one more). */
        char path[64];
        snprintf(path, sizeof(path), "/v1/fences/burst-%d", t);
        json_t *j = get_json(d->port, path, 200);
        long long last = json_integer_value(json_object_get(j, "last_token"));
        json_decref(j);
        assert_true(last >= b[t].acked && last <= b[t].acked + 1);
    }
    /* The signal really landed in the middle of the burst. */
    assert_true(total >= 8);
    assert_true(interrupted > 0);
    print_message("%d answered writes, all present after the restart\n", total);
}

static void test_durability_kill9_loses_no_answered_write(void **state)
{
    struct sgd *d = *state;
    struct burster b[BURST_THREADS];
    burst_then_signal(d, SIGKILL, b);
    sgd_start(d, NULL);
    check_burst_survived(d, b);
}

static void test_durability_sigterm_mid_burst_loses_no_answered_write(void **state)
{
    struct sgd *d = *state;
    struct burster b[BURST_THREADS];
    burst_then_signal(d, SIGTERM, b);
    sgd_start(d, NULL);
    check_burst_survived(d, b);
}

#define T(f) cmocka_unit_test_setup_teardown(f, setup, teardown)

int main(void)
{
    const struct CMUnitTest tests[] = {
        T(test_durability_restart_keeps_everything),
        T(test_durability_kill9_loses_no_answered_write),
        T(test_durability_sigterm_mid_burst_loses_no_answered_write),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
