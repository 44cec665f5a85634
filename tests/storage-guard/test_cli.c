/* The storage-guard command line: --help, --version, usage errors, start-up
 * failures, a single worker thread and SIGINT. */
#include <errno.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "http.h"
#include "proc.h"
#include "sg_daemon.h"

static int setup(void **state)
{
    struct sgd *d = calloc(1, sizeof(*d));
    assert_non_null(d);
    sgd_init(d);
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

/* Run storage-guard with args to completion (bounded); return its exit code
 * and leave its output in d->log. */
static int run(struct sgd *d, const char *const *args)
{
    char *argv[16];
    int n = 0;
    argv[n++] = getenv("SG_EXE");
    assert_non_null(argv[0]);
    for (int i = 0; args[i] && n < 15; i++)
        argv[n++] = (char *)args[i];
    argv[n] = NULL;
    unlink(d->log);
    pid_t pid = hp_spawn(argv, NULL, d->log);
    assert_true(pid > 0);
    int st = 0;
    if (hp_wait(pid, 10000, &st) != 0) {
        hp_signal(pid, SIGKILL, 0);
        fail_msg("storage-guard did not exit");
    }
    assert_true(WIFEXITED(st));
    return WEXITSTATUS(st);
}

static int log_has(const struct sgd *d, const char *text)
{
    FILE *f = fopen(d->log, "r");
    if (f == NULL)
        return 0;
    char buf[8192];
    size_t n = fread(buf, 1, sizeof(buf) - 1, f);
    fclose(f);
    buf[n] = '\0';
    return strstr(buf, text) != NULL;
}

static void test_cli_help_and_version(void **state)
{
    struct sgd *d = *state;
    assert_int_equal(run(d, (const char *const[]){"--version", NULL}), 0);
    assert_true(log_has(d, "storage-guard "));
    assert_true(log_has(d, "(fencelock)"));
    assert_int_equal(run(d, (const char *const[]){"--help", NULL}), 0);
    assert_true(log_has(d, "--max-body"));
    assert_true(log_has(d, "--port-file"));
}

static void test_cli_usage_errors_exit_2(void **state)
{
    struct sgd *d = *state;
    assert_int_equal(run(d, (const char *const[]){"--listen", "127.0.0.1:0", NULL}), 2);
    assert_true(log_has(d, "--db PATH is required"));
    assert_int_equal(run(d, (const char *const[]){"--db", d->db, "--threads", "0", NULL}), 2);
    assert_int_equal(run(d, (const char *const[]){"--db", d->db, "--threads", "4x", NULL}), 2);
    assert_int_equal(run(d, (const char *const[]){"--db", d->db, "--max-body", "-1", NULL}), 2);
    assert_int_equal(run(d, (const char *const[]){"--db", d->db, "--log-level", "loud", NULL}), 2);
    assert_int_equal(run(d, (const char *const[]){"--db", d->db, "--listen", "nohostport", NULL}), 2);
    assert_int_equal(run(d, (const char *const[]){"--db", d->db, "--listen", "127.0.0.1:70000", NULL}), 2);
    assert_int_equal(run(d, (const char *const[]){"--db", d->db, "--bogus", NULL}), 2);
    assert_int_equal(run(d, (const char *const[]){"--db", d->db, "stray", NULL}), 2);
}

static void test_cli_startup_failures_exit_1(void **state)
{
    struct sgd *d = *state;
    char bad_db[600];
    snprintf(bad_db, sizeof(bad_db), "%s/no/such/dir/x.db", d->dir);
    assert_int_equal(run(d, (const char *const[]){"--db", bad_db, "--listen", "127.0.0.1:0", NULL}), 1);
    assert_true(log_has(d, "database"));
    /* The port is taken by a running storage-guard. */
    sgd_start(d, NULL);
    char listen[64], db2[600];
    snprintf(listen, sizeof(listen), "127.0.0.1:%u", (unsigned)d->port);
    snprintf(db2, sizeof(db2), "%s/other.db", d->dir);
    struct sgd other = *d;
    snprintf(other.log, sizeof(other.log), "%s/other.log", d->dir);
    assert_int_equal(run(&other, (const char *const[]){"--db", db2, "--listen", listen, NULL}), 1);
    /* The first one is unharmed. */
    struct hc_response r;
    assert_int_equal(hc_get(d->port, "/healthz", &r), 0);
    assert_int_equal(r.status, 200);
    hc_response_clear(&r);
}

static void test_cli_one_thread_and_sigint(void **state)
{
    struct sgd *d = *state;
    sgd_start(d, (const char *const[]){"--threads", "1", "--log-level", "warn", NULL});
    struct hc_response r;
    assert_int_equal(hc_put(d->port, "/v1/records/one", "{\"value\":1,\"token\":3}", NULL, &r), 0);
    assert_int_equal(r.status, 200);
    hc_response_clear(&r);
    assert_int_equal(hc_get(d->port, "/v1/records/one", &r), 0);
    assert_int_equal(r.status, 200);
    hc_response_clear(&r);
    assert_int_equal(kill(d->pid, SIGINT), 0);
    int st = sgd_wait(d, 15000);
    assert_true(WIFEXITED(st));
    assert_int_equal(WEXITSTATUS(st), 0);
    /* No libmicrohttpd warning about the thread pool, nothing at warn level. */
    assert_false(log_has(d, " warn: "));
}

#define T(f) cmocka_unit_test_setup_teardown(f, setup, teardown)

int main(void)
{
    const struct CMUnitTest tests[] = {
        T(test_cli_help_and_version),
        T(test_cli_usage_errors_exit_2),
        T(test_cli_startup_failures_exit_1),
        T(test_cli_one_thread_and_sigint),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
