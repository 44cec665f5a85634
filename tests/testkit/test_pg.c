/* The kit's PostgreSQL cluster: initdb, start on a free port, SQL, a fast
 * and an immediate (crash-like) restart on the same port with the data
 * kept, a server that never runs as root, and nothing left behind. */
#include <errno.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>
#include <libpq-fe.h>

#include <fencelock-testkit/testkit.h>

/* The single integer a query returns, or -1. */
static long long query_int(const char *url, const char *sql)
{
    PGconn *c = PQconnectdb(url);
    long long v = -1;
    if (PQstatus(c) == CONNECTION_OK) {
        PGresult *r = PQexec(c, sql);
        if (PQresultStatus(r) == PGRES_TUPLES_OK && PQntuples(r) == 1)
            v = atoll(PQgetvalue(r, 0, 0));
        else
            fprintf(stderr, "%s: %s", sql, PQerrorMessage(c));
        PQclear(r);
    }
    PQfinish(c);
    return v;
}

/* The real user id of a running process, from /proc. */
static long proc_uid(pid_t pid)
{
    char path[64], line[256];
    snprintf(path, sizeof(path), "/proc/%d/status", (int)pid);
    FILE *f = fopen(path, "r");
    long uid = -1;
    while (f != NULL && fgets(line, sizeof(line), f))
        if (sscanf(line, "Uid: %ld", &uid) == 1)
            break;
    if (f != NULL)
        fclose(f);
    return uid;
}

static void test_pg_start_sql_restart_free(void **state)
{
    (void)state;
    struct tk_pg *pg = NULL;
    assert_int_equal(tk_pg_start(NULL, &pg), 0);
    uint16_t port = tk_pg_port(pg);
    assert_true(port > 0);
    assert_true(tk_pg_pid(pg) > 0);
    char want[96];
    snprintf(want, sizeof(want), "postgresql://fencelock@127.0.0.1:%u/postgres", (unsigned)port);
    assert_string_equal(tk_pg_url(pg), want);
    /* initdb and postgres refuse root: as root the server runs as another
     * user. */
    if (geteuid() == 0)
        assert_true(proc_uid(tk_pg_pid(pg)) > 0);
    else
        assert_int_equal(proc_uid(tk_pg_pid(pg)), (long)geteuid());
    assert_int_equal(query_int(tk_pg_url(pg), "SELECT (current_setting('fsync') = 'on')::int"), 1);

    assert_int_equal(tk_pg_exec(pg, "CREATE TABLE t (n int); INSERT INTO t VALUES (1)"), 0);
    assert_int_equal(tk_pg_exec(pg, "INSERT INTO no_such_table VALUES (1)"), -EIO);
    assert_int_equal(tk_pg_exec(pg, "INSERT INTO t VALUES (2)"), 0);

    /* An immediate stop is a crash to the data: committed rows come back
     * through WAL replay, on the same port. */
    assert_int_equal(tk_pg_restart(pg, 1), 0);
    assert_int_equal(tk_pg_port(pg), port);
    assert_int_equal(query_int(tk_pg_url(pg), "SELECT sum(n) FROM t"), 3);
    FILE *f = fopen(tk_pg_log(pg), "r");
    assert_non_null(f);
    char line[512];
    int recovered = 0;
    while (fgets(line, sizeof(line), f))
        recovered |= strstr(line, "database system was not properly shut down") != NULL;
    fclose(f);
    assert_true(recovered);

    assert_int_equal(tk_pg_stop(pg, 0), 0);
    assert_int_equal(tk_pg_pid(pg), 0);
    assert_int_equal(tk_pg_stop(pg, 0), -ESRCH);
    assert_int_equal(tk_pg_exec(pg, "SELECT 1"), -EINVAL);
    assert_int_equal(tk_pg_restart(pg, 0), 0);
    assert_int_equal(query_int(tk_pg_url(pg), "SELECT count(*) FROM t"), 2);

    char dir[256];
    snprintf(dir, sizeof(dir), "%s", tk_pg_dir(pg));
    pid_t pid = tk_pg_pid(pg);
    tk_pg_free(pg);
    struct stat st;
    assert_int_not_equal(stat(dir, &st), 0);
    assert_int_not_equal(kill(pid, 0), 0);
}

static void test_pg_bad_arguments(void **state)
{
    (void)state;
    struct tk_pg *pg = NULL;
    assert_int_equal(tk_pg_start(NULL, NULL), -EINVAL);
    struct tk_pg_options o;
    tk_pg_options_init(&o);
    o.start_timeout_ms = -1;
    assert_int_equal(tk_pg_start(&o, &pg), -EINVAL);
    /* A setting the server refuses: it exits at start-up, and so does the
     * call, with the log on stderr. */
    tk_pg_options_init(&o);
    const char *bad[] = {"no_such_setting_at_all=1", NULL};
    o.settings = bad;
    assert_int_equal(tk_pg_start(&o, &pg), -ECHILD);
    assert_null(pg);
    assert_int_equal(tk_pg_stop(NULL, 0), -ESRCH);
    assert_int_equal(tk_pg_restart(NULL, 0), -EINVAL);
    tk_pg_free(NULL);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_pg_start_sql_restart_free),
        cmocka_unit_test(test_pg_bad_arguments),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
