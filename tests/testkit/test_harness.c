/* The harness itself: nodes start on distinct free ports, are stopped,
 * paused and restarted by PID, lose or keep data as asked, and the fault
 * proxy delays, holds and drops bytes. */
#include <errno.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cmocka.h>

#include "fault_proxy.h"
#include "proc.h"
#include "redis_harness.h"

static int set_get(struct rh_cluster *c, int i, const char *k, const char *v)
{
    redisReply *r = rh_command(c, i, "SET %s %s", k, v);
    if (r == NULL)
        return -1;
    freeReplyObject(r);
    r = rh_command(c, i, "GET %s", k);
    int ok = r && r->type == REDIS_REPLY_STRING && strcmp(r->str, v) == 0;
    if (r)
        freeReplyObject(r);
    return ok ? 0 : -1;
}

static int exists(struct rh_cluster *c, int i, const char *k)
{
    redisReply *r = rh_command(c, i, "EXISTS %s", k);
    assert_non_null(r);
    int v = (int)r->integer;
    freeReplyObject(r);
    return v;
}

static void test_harness_starts_nodes_on_distinct_ports(void **state)
{
    (void)state;
    struct rh_cluster *c;
    assert_int_equal(rh_cluster_start(3, NULL, &c), 0);
    assert_int_equal(rh_size(c), 3);
    for (int i = 0; i < 3; i++) {
        assert_true(rh_port(c, i) > 0);
        assert_true(rh_pid(c, i) > 0);
        for (int j = 0; j < i; j++)
            assert_true(rh_port(c, i) != rh_port(c, j));
        assert_int_equal(set_get(c, i, "k", "v"), 0);
        char want[64];
        snprintf(want, sizeof(want), "redis://127.0.0.1:%d", rh_port(c, i));
        assert_string_equal(rh_url(c, i), want);
    }
    pid_t pid = rh_pid(c, 0);
    char dir[256];
    snprintf(dir, sizeof(dir), "%s", rh_dir(c, 0));
    rh_cluster_free(c);
    /* Stopped by PID, directory removed. */
    assert_int_equal(kill(pid, 0), -1);
    assert_int_equal(access(dir, F_OK), -1);
}

static void test_harness_kill_restart_and_data(void **state)
{
    (void)state;
    struct rh_cluster *c;
    struct rh_options o;
    rh_options_init(&o);
    o.persistent = 1;
    assert_int_equal(rh_cluster_start(1, &o, &c), 0);
    assert_int_equal(set_get(c, 0, "kept", "1"), 0);
    pid_t old = rh_pid(c, 0);
    assert_int_equal(rh_kill(c, 0), 0);
    assert_int_equal(rh_pid(c, 0), 0);
    assert_null(rh_command(c, 0, "PING"));
    /* Killed with appendfsync always: the data comes back. */
    assert_int_equal(rh_restart(c, 0, 1), 0);
    assert_true(rh_pid(c, 0) != old);
    assert_int_equal(exists(c, 0, "kept"), 1);
    /* Restarted without data: forgotten. */
    assert_int_equal(rh_restart(c, 0, 0), 0);
    assert_int_equal(exists(c, 0, "kept"), 0);
    rh_cluster_free(c);
}

static void test_harness_pause_and_resume(void **state)
{
    (void)state;
    struct rh_cluster *c;
    assert_int_equal(rh_cluster_start(1, NULL, &c), 0);
    assert_int_equal(rh_pause(c, 0), 0);
    /* A paused node accepts connections (the kernel does) but never
     * answers: a command times out. */
    redisContext *ctx = redisConnect("127.0.0.1", rh_port(c, 0));
    assert_non_null(ctx);
    struct timeval tv = {0, 200000};
    redisSetTimeout(ctx, tv);
    redisReply *r = redisCommand(ctx, "PING");
    assert_null(r);
    redisFree(ctx);
    assert_int_equal(rh_resume(c, 0), 0);
    r = rh_command(c, 0, "PING");
    assert_non_null(r);
    assert_string_equal(r->str, "PONG");
    freeReplyObject(r);
    rh_cluster_free(c);
}

static void test_harness_auth_user(void **state)
{
    (void)state;
    struct rh_cluster *c;
    struct rh_options o;
    rh_options_init(&o);
    o.user = "u1";
    o.password = "pw";
    assert_int_equal(rh_cluster_start(1, &o, &c), 0);
    assert_int_equal(set_get(c, 0, "k", "v"), 0);
    /* Anonymous access is refused. */
    redisContext *ctx = redisConnect("127.0.0.1", rh_port(c, 0));
    redisReply *r = redisCommand(ctx, "GET k");
    assert_int_equal(r->type, REDIS_REPLY_ERROR);
    freeReplyObject(r);
    redisFree(ctx);
    assert_non_null(strstr(rh_url(c, 0), "u1:pw@"));
    rh_cluster_free(c);
}

static void test_harness_proxy_delays_holds_drops(void **state)
{
    (void)state;
    struct rh_cluster *c;
    assert_int_equal(rh_cluster_start(1, NULL, &c), 0);
    struct fp_proxy *p;
    assert_int_equal(fp_new(rh_port(c, 0), &p), 0);
    redisContext *ctx = redisConnect("127.0.0.1", fp_port(p));
    assert_non_null(ctx);
    assert_int_equal(ctx->err, 0);
    redisReply *r = redisCommand(ctx, "PING");
    assert_non_null(r);
    freeReplyObject(r);
    assert_int_equal(fp_accepted(p), 1);

    fp_set_delay(p, FP_DOWN, 200);
    long long t0 = hp_now_ms();
    r = redisCommand(ctx, "PING");
    long long took = hp_now_ms() - t0;
    assert_non_null(r);
    freeReplyObject(r);
    assert_true(took >= 200 && took < 2000);
    fp_set_delay(p, FP_BOTH, 0);

    /* Held bytes arrive once released, not before. */
    fp_set_hold(p, FP_UP, 1);
    struct timeval tv = {0, 300000};
    redisSetTimeout(ctx, tv);
    assert_int_equal(redisAppendCommand(ctx, "SET held yes"), REDIS_OK);
    int done = 0;
    while (!done)
        assert_int_equal(redisBufferWrite(ctx, &done), REDIS_OK);
    hp_sleep_ms(200);
    assert_int_equal(exists(c, 0, "held"), 0);
    fp_set_hold(p, FP_UP, 0);
    void *reply = NULL;
    assert_int_equal(redisGetReply(ctx, &reply), REDIS_OK);
    freeReplyObject(reply);
    assert_int_equal(exists(c, 0, "held"), 1);

    /* Dropped bytes never arrive. */
    fp_set_drop(p, FP_UP, 1);
    assert_int_equal(redisAppendCommand(ctx, "SET dropped yes"), REDIS_OK);
    done = 0;
    while (!done)
        assert_int_equal(redisBufferWrite(ctx, &done), REDIS_OK);
    hp_sleep_ms(200);
    assert_int_equal(exists(c, 0, "dropped"), 0);
    redisFree(ctx);

    /* A reset closes the connection; a new one works. */
    fp_set_drop(p, FP_UP, 0);
    ctx = redisConnect("127.0.0.1", fp_port(p));
    r = redisCommand(ctx, "PING");
    assert_non_null(r);
    freeReplyObject(r);
    fp_reset(p); /* done when it returns */
    r = redisCommand(ctx, "PING");
    assert_null(r);
    redisFree(ctx);
    fp_free(p);
    rh_cluster_free(c);
}

/* Write one command on ctx without waiting for its answer. */
static void send_only(redisContext *ctx, const char *cmd)
{
    assert_int_equal(redisAppendCommand(ctx, cmd), REDIS_OK);
    int done = 0;
    while (!done)
        assert_int_equal(redisBufferWrite(ctx, &done), REDIS_OK);
}

/* fp_reset_late: a request held on a connection that is then closed
 * reaches the server after a request sent on a new connection. */
static void test_harness_proxy_reset_late_delivers_after_reconnect(void **state)
{
    (void)state;
    struct rh_cluster *c;
    assert_int_equal(rh_cluster_start(1, NULL, &c), 0);
    struct fp_proxy *p;
    assert_int_equal(fp_new(rh_port(c, 0), &p), 0);
    redisContext *old = redisConnect("127.0.0.1", fp_port(p));
    assert_true(old != NULL && old->err == 0);
    fp_set_hold(p, FP_UP, 1);
    send_only(old, "SET k first");
    hp_sleep_ms(100); /* read by the proxy, held there */
    fp_reset_late(p, 400);
    fp_set_hold(p, FP_UP, 0);
    long long t0 = hp_now_ms();
    /* The old connection is closed for its client at once. */
    void *reply = NULL;
    assert_int_equal(redisGetReply(old, &reply), REDIS_ERR);
    redisFree(old);
    redisContext *now = redisConnect("127.0.0.1", fp_port(p));
    assert_true(now != NULL && now->err == 0);
    redisReply *r = redisCommand(now, "SET k second");
    assert_non_null(r);
    freeReplyObject(r);
    char v[32];
    rh_get(c, 0, "k", v, sizeof(v));
    assert_string_equal(v, "second");
    /* Then the old request lands, over the newer one. */
    long long until = t0 + 3000;
    while (hp_now_ms() < until) {
        rh_get(c, 0, "k", v, sizeof(v));
        if (strcmp(v, "first") == 0)
            break;
        hp_sleep_ms(10);
    }
    assert_string_equal(v, "first");
    assert_true(hp_now_ms() - t0 >= 350);
    redisFree(now);
    fp_free(p);
    rh_cluster_free(c);
}

/* A client that closes while the proxy still has bytes for it must not
 * take the process that runs the proxy down with SIGPIPE. */
static void test_harness_proxy_survives_a_client_that_closed(void **state)
{
    (void)state;
    void (*old)(int) = signal(SIGPIPE, SIG_DFL);
    struct rh_cluster *c;
    assert_int_equal(rh_cluster_start(1, NULL, &c), 0);
    size_t big = 512 * 1024;
    char *v = malloc(big + 1);
    assert_non_null(v);
    memset(v, 'x', big);
    v[big] = '\0';
    redisReply *r = rh_command(c, 0, "SET big %s", v);
    assert_non_null(r);
    freeReplyObject(r);
    free(v);
    struct fp_proxy *p;
    assert_int_equal(fp_new(rh_port(c, 0), &p), 0);
    for (int round = 0; round < 3; round++) {
        redisContext *ctx = redisConnect("127.0.0.1", fp_port(p));
        assert_true(ctx != NULL && ctx->err == 0);
        fp_set_delay(p, FP_DOWN, 200);
        send_only(ctx, "GET big");
        hp_sleep_ms(50); /* the answer is in the proxy, not yet due */
        /* A request held in the proxy keeps the connection open there
         * after its client has closed it (held bytes still go on). */
        fp_set_hold(p, FP_UP, 1);
        send_only(ctx, "PING");
        hp_sleep_ms(20);
        redisFree(ctx);
        hp_sleep_ms(300); /* the answer is written to a closed socket, chunk after chunk */
        fp_set_hold(p, FP_UP, 0);
        fp_set_delay(p, FP_DOWN, 0);
    }
    redisContext *ctx = redisConnect("127.0.0.1", fp_port(p));
    r = redisCommand(ctx, "PING");
    assert_non_null(r);
    freeReplyObject(r);
    redisFree(ctx);
    fp_free(p);
    rh_cluster_free(c);
    signal(SIGPIPE, old);
}

static void test_harness_spawn_reports_missing_binary(void **state)
{
    (void)state;
    char *argv[] = {"/nonexistent/fencelock-no-such-binary", NULL};
    assert_int_equal(hp_spawn(argv, NULL, NULL), -ENOENT);
    char *sleeper[] = {"sleep", "30", NULL};
    pid_t pid = hp_spawn(sleeper, NULL, NULL);
    assert_true(pid > 0);
    assert_int_equal(hp_wait(pid, 50, NULL), -ETIMEDOUT);
    assert_int_equal(hp_signal(pid, SIGTERM, 2000), 0);
    assert_int_equal(kill(pid, 0), -1);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_harness_starts_nodes_on_distinct_ports),
        cmocka_unit_test(test_harness_kill_restart_and_data),
        cmocka_unit_test(test_harness_pause_and_resume),
        cmocka_unit_test(test_harness_auth_user),
        cmocka_unit_test(test_harness_proxy_delays_holds_drops),
        cmocka_unit_test(test_harness_proxy_reset_late_delivers_after_reconnect),
        cmocka_unit_test(test_harness_proxy_survives_a_client_that_closed),
        cmocka_unit_test(test_harness_spawn_reports_missing_binary),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
