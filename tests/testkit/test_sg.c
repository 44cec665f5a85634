/* The kit's storage-guard process and audit-log checks: a real
 * storage-guard started, killed -9 and restarted on its port; the log read
 * back; the checkers see a stale write and a lost acknowledged write. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <errno.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include <fencelock-testkit/testkit.h>

static int put(uint16_t port, const char *key, long long value, unsigned long long token, uint64_t *version)
{
    char body[128];
    snprintf(body, sizeof(body), "{\"value\": %lld, \"token\": %llu}", value, token);
    struct hc_response r = {0};
    int rc = hc_put(port, key, body, NULL, &r);
    int status = rc == 0 ? r.status : rc;
    if (version != NULL)
        *version = (uint64_t)json_integer_value(json_object_get(r.json, "version"));
    hc_response_clear(&r);
    return status;
}

static void test_sg_kill9_keeps_acked_writes(void **state)
{
    (void)state;
    struct tk_sg *sg = NULL;
    assert_int_equal(tk_sg_start(NULL, &sg), 0);
    uint16_t port = tk_sg_port(sg);
    assert_true(port > 0);
    struct tk_ack acks[2];
    uint64_t v1 = 0, v2 = 0;
    assert_int_equal(put(port, "/v1/records/k", 1, 10, &v1), 200);
    assert_int_equal(put(port, "/v1/records/k", 2, 20, &v2), 200);
    acks[0] = (struct tk_ack){"k", v1, 10};
    acks[1] = (struct tk_ack){"k", v2, 20};
    assert_int_equal(put(port, "/v1/records/k", 3, 15, NULL), 409);

    assert_int_equal(tk_sg_kill(sg), 0);
    assert_int_equal(tk_sg_pid(sg), 0);
    assert_int_equal(tk_sg_restart(sg), 0);
    assert_int_equal(tk_sg_port(sg), port);

    struct tk_log log = {0};
    assert_int_equal(tk_log_fetch(port, "k", &log), 0);
    assert_int_equal(log.n, 3);
    assert_string_equal(log.entries[2].outcome, "stale");
    char msg[256];
    assert_int_equal(tk_check_no_stale_write(&log, msg, sizeof(msg)), 0);
    assert_int_equal(tk_check_no_ack_lost(&log, acks, 2, msg, sizeof(msg)), 0);

    /* An acknowledgement the log does not hold is reported. */
    struct tk_ack ghost = {"k", v2 + 1, 30};
    assert_int_equal(tk_check_no_ack_lost(&log, &ghost, 1, msg, sizeof(msg)), 1);
    assert_non_null(strstr(msg, "missing"));
    tk_log_clear(&log);
    assert_int_equal(tk_sg_stop(sg), 0);
    tk_sg_free(sg);
}

static void test_sg_unfenced_accepts_stale_and_the_check_sees_it(void **state)
{
    (void)state;
    struct tk_sg_options o;
    tk_sg_options_init(&o);
    o.unfenced = 1;
    struct tk_sg *sg = NULL;
    assert_int_equal(tk_sg_start(&o, &sg), 0);
    uint16_t port = tk_sg_port(sg);
    assert_int_equal(put(port, "/v1/records/a", 1, 20, NULL), 200);
    assert_int_equal(put(port, "/v1/records/a", 2, 10, NULL), 200);
    struct tk_log log = {0};
    assert_int_equal(tk_log_fetch(port, NULL, &log), 0);
    char msg[256];
    int bad = tk_check_no_stale_write(&log, msg, sizeof(msg));
    /* storage-guard --unfenced never moves the fence, but the log still
     * records the token each accepted write carried. */
    assert_int_equal(bad, 1);
    assert_non_null(strstr(msg, "token 10"));
    tk_log_clear(&log);
    tk_sg_free(sg);
}

static void test_sg_log_pages_past_one_answer(void **state)
{
    (void)state;
    struct tk_sg *sg = NULL;
    assert_int_equal(tk_sg_start(NULL, &sg), 0);
    uint16_t port = tk_sg_port(sg);
    for (int i = 1; i <= 1005; i++)
        assert_int_equal(put(port, "/v1/records/p", i, (unsigned long long)i, NULL), 200);
    struct tk_log log = {0};
    assert_int_equal(tk_log_fetch(port, "p", &log), 0);
    assert_int_equal(log.n, 1005);
    assert_int_equal(log.entries[1004].token, 1005);
    assert_int_equal(tk_check_no_stale_write(&log, NULL, 0), 0);
    tk_log_clear(&log);
    tk_sg_free(sg);
}

/* In a directory of the caller's, which it keeps; stopped by a signal of
 * the caller's and reaped with tk_sg_wait. */
static void test_sg_in_the_callers_dir_and_waited_for(void **state)
{
    (void)state;
    char dir[256], probe[320];
    assert_int_equal(rh_mkdtemp("tksg", dir, sizeof(dir)), 0);
    struct tk_sg_options o;
    tk_sg_options_init(&o);
    o.dir = dir;
    struct tk_sg *sg = NULL;
    assert_int_equal(tk_sg_start(&o, &sg), 0);
    assert_string_equal(tk_sg_dir(sg), dir);
    snprintf(probe, sizeof(probe), "%s/records.db", dir);
    assert_string_equal(tk_sg_db(sg), probe);
    assert_int_equal(access(probe, F_OK), 0);
    assert_int_equal(tk_sg_wait(sg, 0, NULL), -ETIMEDOUT); /* still running */
    assert_int_equal(kill(tk_sg_pid(sg), SIGINT), 0);
    int st = -1;
    assert_int_equal(tk_sg_wait(sg, 15000, &st), 0);
    assert_true(WIFEXITED(st));
    assert_int_equal(WEXITSTATUS(st), 0);
    assert_int_equal(tk_sg_pid(sg), 0);
    assert_int_equal(tk_sg_wait(sg, 0, NULL), -ESRCH);
    tk_sg_free(sg);
    assert_int_equal(access(probe, F_OK), 0); /* the caller's directory stays */
    assert_int_equal(rh_rmtree(dir), 0);
}

static void test_sg_bad_arguments(void **state)
{
    (void)state;
    assert_int_equal(tk_sg_start(NULL, NULL), -EINVAL);
    assert_int_equal(tk_log_fetch(0, NULL, NULL), -EINVAL);
    assert_int_equal(tk_check_no_stale_write(NULL, NULL, 0), -EINVAL);
    assert_int_equal(tk_check_no_ack_lost(NULL, NULL, 0, NULL, 0), -EINVAL);
    assert_int_equal(tk_sg_stop(NULL), -ESRCH);
    tk_sg_free(NULL);
    tk_log_clear(NULL);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_sg_kill9_keeps_acked_writes),
        cmocka_unit_test(test_sg_unfenced_accepts_stale_and_the_check_sees_it),
        cmocka_unit_test(test_sg_log_pages_past_one_answer),
        cmocka_unit_test(test_sg_in_the_callers_dir_and_waited_for),
        cmocka_unit_test(test_sg_bad_arguments),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
