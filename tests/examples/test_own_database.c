/* Guarding your own table (docs/guarding-your-database.md), as the docs
 * show it: the C example on SQLite and on PostgreSQL by its connection
 * string, the psql script, and the shell and Python replay clients writing
 * to PostgreSQL, where a holder stopped past its lease is refused once the
 * next holder has written. */
#include <errno.h>
#include <poll.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>
#include <jansson.h>
#include <libpq-fe.h>

#include <fencelock-testkit/testkit.h>

static struct tk_pg *pg;
static char dir[256];

static int group_setup(void **state)
{
    (void)state;
    if (tk_pg_start(NULL, &pg) != 0)
        fail_msg("PostgreSQL did not start (see above)");
    if (rh_mkdtemp("own-db", dir, sizeof(dir)) != 0)
        fail_msg("no temporary directory");
    /* What docs/guarding-your-database.md asks for first. */
    const char *cmd[] = {"psql", "-X",          "-q", "-1",          "-v", "ON_ERROR_STOP=1",
                         "-d",   tk_pg_url(pg), "-f", FENCELOCK_SQL, NULL};
    pid_t pid = hp_spawn((char *const *)cmd, NULL, NULL);
    int st = 0;
    if (pid < 0 || hp_wait(pid, 30000, &st) != 0 || !WIFEXITED(st) || WEXITSTATUS(st) != 0)
        fail_msg("psql -f fencelock.sql failed");
    if (tk_pg_exec(pg, "CREATE TABLE records (key text PRIMARY KEY, value text NOT NULL);"
                       " INSERT INTO records VALUES ('invoice-42', 'open')") != 0)
        fail_msg("could not create the table");
    return 0;
}

static int group_teardown(void **state)
{
    (void)state;
    tk_pg_free(pg);
    rh_rmtree(dir);
    return 0;
}

/* Run a program to its end (bounded); its exit status, or -1. */
static int run(char *const argv[], const char *log)
{
    return hp_run(argv, log, 30000);
}

/* The value of key in records, from PostgreSQL. */
static void pg_value(const char *key, char *out, size_t cap)
{
    PGconn *c = PQconnectdb(tk_pg_url(pg));
    const char *vals[1] = {key};
    PGresult *r = PQexecParams(c, "SELECT value FROM records WHERE key = $1", 1, NULL, vals, NULL, NULL, 0);
    snprintf(out, cap, "%s",
             PQresultStatus(r) == PGRES_TUPLES_OK && PQntuples(r) == 1 ? PQgetvalue(r, 0, 0) : "");
    PQclear(r);
    PQfinish(c);
}

/* True if the file holds the text. */
static int file_has(const char *path, const char *text)
{
    FILE *f = fopen(path, "r");
    char buf[4096];
    size_t n = f ? fread(buf, 1, sizeof(buf) - 1, f) : 0;
    if (f)
        fclose(f);
    buf[n] = '\0';
    return strstr(buf, text) != NULL;
}

static void test_own_database_c_example_on_both_databases(void **state)
{
    (void)state;
    char sqlite_db[320], log[320];
    snprintf(sqlite_db, sizeof(sqlite_db), "%s/own.db", dir);
    snprintf(log, sizeof(log), "%s/guarded_update.log", dir);
    const char *conns[] = {sqlite_db, tk_pg_url(pg)};
    for (int i = 0; i < 2; i++) {
        char *conn = (char *)conns[i];
        char *w1[] = {GUARDED_UPDATE, conn, "c-ex", "1731234567890123", "c-key", "by holder 1", NULL};
        char *late[] = {GUARDED_UPDATE, conn, "c-ex", "1731234567000000", "c-key", "by a late holder", NULL};
        char *w2[] = {GUARDED_UPDATE, conn, "c-ex", "1731234567890124", "c-key", "by holder 2", NULL};
        char *bad[] = {GUARDED_UPDATE, conn, "c-ex", "many", "c-key", "x", NULL};
        assert_int_equal(run(w1, log), 0);
        assert_int_equal(run(late, log), 3);
        assert_true(file_has(log, "refused: token 1731234567000000 is older than 1731234567890123"));
        assert_int_equal(run(w2, log), 0);
        assert_int_equal(run(bad, log), 2);
    }
    char v[64];
    pg_value("c-key", v, sizeof(v));
    assert_string_equal(v, "by holder 2");
    /* Not a database at all. */
    char nowhere[320];
    snprintf(nowhere, sizeof(nowhere), "postgresql://fencelock@127.0.0.1:%d/x?connect_timeout=2",
             rh_free_port());
    char *fail[] = {GUARDED_UPDATE, nowhere, "c-ex", "5", "c-key", "x", NULL};
    assert_int_equal(run(fail, log), 1);
}

static void test_own_database_psql_script(void **state)
{
    (void)state;
    char log[320];
    snprintf(log, sizeof(log), "%s/psql.log", dir);
    const char *url = tk_pg_url(pg);
    char *first[] = {"psql", "-X",
                     "-v",   "ON_ERROR_STOP=1",
                     "-v",   "VERBOSITY=sqlstate",
                     "-d",   (char *)url,
                     "-v",   "resource=invoice-42",
                     "-v",   "token=1731234567890123",
                     "-v",   "key=invoice-42",
                     "-v",   "value=paid",
                     "-f",   GUARDED_UPDATE_SQL,
                     NULL};
    assert_int_equal(run(first, log), 0);
    char *late[] = {"psql", "-X",
                    "-v",   "ON_ERROR_STOP=1",
                    "-v",   "VERBOSITY=sqlstate",
                    "-d",   (char *)url,
                    "-v",   "resource=invoice-42",
                    "-v",   "token=1731234567000000",
                    "-v",   "key=invoice-42",
                    "-v",   "value=refunded",
                    "-f",   GUARDED_UPDATE_SQL,
                    NULL};
    assert_int_equal(run(late, log), 3);
    assert_true(file_has(log, "ERROR:  FL409"));
    char v[64];
    pg_value("invoice-42", v, sizeof(v));
    assert_string_equal(v, "paid");
}

/* ---- the replay clients, writing to PostgreSQL ---- */

struct client {
    pid_t pid;
    int in, out;
    char buf[4096];
    size_t len;
};

/* The next JSON event of the client, waiting up to 20 s. */
static json_t *next_event(struct client *c)
{
    long long deadline = hp_now_ms() + 20000;
    for (;;) {
        char *nl = memchr(c->buf, '\n', c->len);
        if (nl != NULL) {
            *nl = '\0';
            json_t *j = json_loads(c->buf, 0, NULL);
            size_t used = (size_t)(nl + 1 - c->buf);
            memmove(c->buf, nl + 1, c->len - used);
            c->len -= used;
            if (j == NULL)
                fail_msg("not a JSON event");
            return j;
        }
        long long left = deadline - hp_now_ms();
        struct pollfd p = {.fd = c->out, .events = POLLIN};
        if (left <= 0 || poll(&p, 1, (int)left) <= 0)
            fail_msg("no event from the client in time");
        ssize_t n = read(c->out, c->buf + c->len, sizeof(c->buf) - 1 - c->len);
        if (n <= 0)
            fail_msg("the client ended without an event");
        c->len += (size_t)n;
    }
}

/* The next event, which must be ev; its integer field, if given. */
static long long expect_event(struct client *c, const char *ev, const char *field)
{
    json_t *j = next_event(c);
    const char *got = json_string_value(json_object_get(j, "ev"));
    if (got == NULL || strcmp(got, ev) != 0)
        fail_msg("event %s, wanted %s", got ? got : "(none)", ev);
    long long v = field ? json_integer_value(json_object_get(j, field)) : 0;
    json_decref(j);
    return v;
}

/* Start a client with one more option (--go or --wait) and its value. */
static void start_client(struct client *c, const char *program, const char *name, const char *nodes,
                         const char *opt, const char *val, const char *log)
{
    char value[32];
    snprintf(value, sizeof(value), "written by %s", name);
    char *argv[] = {(char *)program,
                    "--name",
                    (char *)name,
                    "--nodes",
                    (char *)nodes,
                    "--storage",
                    (char *)tk_pg_url(pg),
                    "--resource",
                    "ledger",
                    "--key",
                    "ledger",
                    "--value",
                    value,
                    "--ttl",
                    "600",
                    (char *)opt,
                    (char *)val,
                    NULL};
    memset(c, 0, sizeof(*c));
    c->pid = hp_spawn_io(argv, NULL, log, &c->in, &c->out);
    if (c->pid < 0)
        fail_msg("cannot run %s", program);
}

static void client_end(struct client *c)
{
    int st = 0;
    assert_int_equal(hp_wait(c->pid, 20000, &st), 0);
    assert_true(WIFEXITED(st) && WEXITSTATUS(st) == 0);
    close(c->in);
    close(c->out);
}

/* A holds the lock and stops before its write; its lease runs out; B
 * takes the lock and writes; A, let go, writes with its old token and is
 * refused by fencelock.admit in PostgreSQL. */
static void replay_client_story(const char *program)
{
    struct rh_cluster *nodes = NULL;
    assert_int_equal(rh_cluster_start(3, NULL, &nodes), 0);
    char list[256];
    snprintf(list, sizeof(list), "%s,%s,%s", rh_url(nodes, 0), rh_url(nodes, 1), rh_url(nodes, 2));
    char log[320];
    snprintf(log, sizeof(log), "%s/client.log", dir);
    struct client a, b;
    start_client(&a, program, "A", list, "--go", "before-write", log);
    long long token_a = expect_event(&a, "acquired", "token");
    expect_event(&a, "checked", NULL);
    hp_sleep_ms(900); /* A is stopped past its 600 ms lease */
    start_client(&b, program, "B", list, "--wait", "5000", log);
    long long token_b = expect_event(&b, "acquired", "token");
    assert_true(token_b > token_a);
    expect_event(&b, "checked", NULL);
    expect_event(&b, "writing", NULL);
    assert_int_equal(expect_event(&b, "written", "status"), 200);
    expect_event(&b, "released", NULL);
    client_end(&b);
    assert_int_equal(write(a.in, "go\n", 3), 3);
    expect_event(&a, "writing", NULL);
    assert_int_equal(expect_event(&a, "written", "status"), 409);
    expect_event(&a, "released", NULL);
    client_end(&a);
    char v[64];
    pg_value("ledger", v, sizeof(v));
    assert_string_equal(v, "written by B");
    rh_cluster_free(nodes);
}

static void test_own_database_shell_client(void **state)
{
    (void)state;
    replay_client_story(CLIENT_SH);
}

static void test_own_database_python_client(void **state)
{
    (void)state;
    replay_client_story(CLIENT_PY);
}

int main(void)
{
    if (getenv("FENCELOCK") == NULL) {
        fprintf(stderr, "FENCELOCK is not set (run the tests with meson test)\n");
        return 1;
    }
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_own_database_c_example_on_both_databases),
        cmocka_unit_test(test_own_database_psql_script),
        cmocka_unit_test(test_own_database_shell_client),
        cmocka_unit_test(test_own_database_python_client),
    };
    return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
