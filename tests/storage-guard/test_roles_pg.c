/* storage-guard on PostgreSQL under the privilege model of fencelock.sql
 * and schema.sql, on a real server: an installer installs
 * (storage-guard --install), storage-guard runs as a member of
 * storage_guard_runner with no CREATE anywhere and cannot lower a fence
 * itself, an operator's reset needs fencelock_repairer and is audited, and
 * a database of the layout before the schemas (version 1) is upgraded with
 * its records, log and fences. */
#include <errno.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>
#include <jansson.h>
#include <libpq-fe.h>

#include <fencelock-testkit/testkit.h>

#include "old_fencelock_sql.h"
#include "old_sg_schema_sql.h"

static struct tk_pg *pg;
static char dir[256];

static int group_setup(void **state)
{
    (void)state;
    int rc = tk_pg_start(NULL, &pg);
    if (rc != 0)
        fail_msg("PostgreSQL did not start: %s", strerror(-rc));
    if (rh_mkdtemp("sg-roles", dir, sizeof(dir)) != 0)
        fail_msg("no temporary directory");
    return 0;
}

static int group_teardown(void **state)
{
    (void)state;
    tk_pg_free(pg);
    rh_rmtree(dir);
    return 0;
}

static void url_of(const char *role, const char *db, char *out, size_t cap)
{
    snprintf(out, cap, "postgresql://%s@127.0.0.1:%u/%s", role, (unsigned)tk_pg_port(pg), db);
}

static PGconn *connect_as(const char *role, const char *db)
{
    char url[256];
    url_of(role, db, url, sizeof(url));
    PGconn *c = PQconnectdb(url);
    if (PQstatus(c) != CONNECTION_OK)
        fail_msg("connect %s: %s", url, PQerrorMessage(c));
    PQclear(PQexec(c, "SET client_min_messages = warning"));
    return c;
}

static void exec(PGconn *c, const char *sql)
{
    PGresult *r = PQexec(c, sql);
    ExecStatusType st = PQresultStatus(r);
    if (st != PGRES_COMMAND_OK && st != PGRES_TUPLES_OK)
        fail_msg("%.300s: %s", sql, PQerrorMessage(c));
    PQclear(r);
}

/* The SQLSTATE sql fails with ("" if it succeeds). */
static const char *fails(PGconn *c, const char *sql, char *buf, size_t cap)
{
    PGresult *r = PQexec(c, sql);
    const char *s = PQresultErrorField(r, PG_DIAG_SQLSTATE);
    snprintf(buf, cap, "%s", s ? s : "");
    PQclear(r);
    return buf;
}

static long long value(PGconn *c, const char *sql)
{
    PGresult *r = PQexec(c, sql);
    if (PQresultStatus(r) != PGRES_TUPLES_OK || PQntuples(r) != 1)
        fail_msg("%.300s: %s", sql, PQerrorMessage(c));
    long long v = PQgetisnull(r, 0, 0) ? -1 : atoll(PQgetvalue(r, 0, 0));
    PQclear(r);
    return v;
}

/* Run storage-guard with args to completion (bounded); its exit code, its
 * output in log. */
static int run(const char *log, const char *const *args)
{
    char *argv[16];
    int n = 0;
    argv[n++] = getenv("SG_EXE");
    assert_non_null(argv[0]);
    for (int i = 0; args[i] && n < 15; i++)
        argv[n++] = (char *)args[i];
    argv[n] = NULL;
    unlink(log);
    pid_t pid = hp_spawn(argv, NULL, log);
    assert_true(pid > 0);
    int st = 0;
    if (hp_wait(pid, 20000, &st) != 0) {
        hp_signal(pid, SIGKILL, 0);
        fail_msg("storage-guard did not exit");
    }
    assert_true(WIFEXITED(st));
    return WEXITSTATUS(st);
}

static int file_has(const char *path, const char *text)
{
    FILE *f = fopen(path, "r");
    if (f == NULL)
        return 0;
    char buf[8192];
    size_t n = fread(buf, 1, sizeof(buf) - 1, f);
    fclose(f);
    buf[n] = '\0';
    return strstr(buf, text) != NULL;
}

static struct tk_sg *start_sg(const char *db_url, const char *auth_file)
{
    struct tk_sg_options o;
    tk_sg_options_init(&o);
    o.db = db_url;
    const char *args[] = {"--auth-file", auth_file, "--threads", "2", NULL};
    o.extra_args = auth_file ? args : args + 2;
    struct tk_sg *sg = NULL;
    int rc = tk_sg_start(&o, &sg);
    if (rc != 0)
        fail_msg("storage-guard did not start on %s: %s", db_url, strerror(-rc));
    return sg;
}

static const char *const OPS = "Authorization: Bearer ops-token-0123456789\r\n";

/* An answer's status, and its "error" (or "") in err. */
static int call(struct tk_sg *sg, const char *method, const char *path, const char *headers, const char *body,
                char *err, size_t cap)
{
    char h[512];
    snprintf(h, sizeof(h), "%s%s", body ? "Content-Type: application/json\r\n" : "", headers ? headers : "");
    struct hc_response r = {0};
    if (hc_request(tk_sg_port(sg), method, path, h, body, body ? strlen(body) : 0, &r) != 0)
        fail_msg("%s %s: no answer", method, path);
    json_t *e = r.json ? json_object_get(r.json, "error") : NULL;
    snprintf(err, cap, "%s", json_is_string(e) ? json_string_value(e) : "");
    int st = r.status;
    hc_response_clear(&r);
    return st;
}

static int put(struct tk_sg *sg, const char *key, const char *resource, unsigned long long token, char *err,
               size_t cap)
{
    char path[128], body[256];
    snprintf(path, sizeof(path), "/v1/records/%s", key);
    snprintf(body, sizeof(body), "{\"value\":\"v\",\"resource\":\"%s\",\"token\":%llu}", resource, token);
    return call(sg, "PUT", path, OPS, body, err, cap);
}

static void write_auth(char *path, size_t cap)
{
    snprintf(path, cap, "%s/tokens", dir);
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fputs("ops-token-0123456789 ops admin\n", f);
    fclose(f);
    chmod(path, 0600);
}

/* Installed by an installer, run by a member of storage_guard_runner with
 * no CREATE anywhere: it serves, it cannot lower a fence by hand, and an
 * operator's reset needs fencelock_repairer. Before the install, the
 * runner's start fails and says what to run. */
static void test_roles_runner_needs_no_create(void **state)
{
    (void)state;
    PGconn *su = connect_as("fencelock", "postgres");
    exec(su, "CREATE DATABASE run");
    exec(su, "CREATE ROLE sgapp LOGIN");
    PQfinish(su);
    su = connect_as("fencelock", "run");
    exec(su, "REVOKE ALL ON SCHEMA public FROM PUBLIC; REVOKE TEMP ON DATABASE run FROM PUBLIC");
    char auth[300], log[300], su_url[256], app_url[256], st[8], err[64];
    write_auth(auth, sizeof(auth));
    snprintf(log, sizeof(log), "%s/install.log", dir);
    url_of("fencelock", "run", su_url, sizeof(su_url));
    url_of("sgapp", "run", app_url, sizeof(app_url));

    /* Not installed: the runner may not, and is told what to run. */
    assert_int_equal(run(log, (const char *const[]){"--install", "--db", app_url, NULL}), 1);
    assert_true(file_has(log, "storage-guard --install"));
    assert_int_equal(
        value(su, "SELECT count(*) FROM pg_namespace WHERE nspname IN ('fencelock', 'storage_guard')"), 0);

    assert_int_equal(run(log, (const char *const[]){"--install", "--db", su_url, NULL}), 0);
    assert_true(file_has(log, "installed"));
    exec(su, "GRANT storage_guard_runner TO sgapp");
    PGconn *app = connect_as("sgapp", "run");
    assert_string_equal(fails(app, "CREATE TABLE public.x (a int)", st, sizeof(st)), "42501");
    assert_string_equal(fails(app, "CREATE SCHEMA mine", st, sizeof(st)), "42501");
    assert_int_equal(value(app, "SELECT has_database_privilege('run', 'TEMP')::int"), 0);

    struct tk_sg *sg = start_sg(app_url, auth);
    assert_int_equal(put(sg, "k", "r", 1000, err, sizeof(err)), 200);
    assert_int_equal(put(sg, "k", "r", 999, err, sizeof(err)), 409);
    assert_string_equal(err, "stale_token");
    /* Its own role cannot lower the fence behind the functions' back. */
    assert_string_equal(fails(app, "UPDATE fencelock.last_token SET token = 1", st, sizeof(st)), "42501");
    assert_string_equal(fails(app, "DELETE FROM fencelock.last_token", st, sizeof(st)), "42501");
    assert_string_equal(fails(app, "SELECT fencelock.repair('r', 1, 'mine')", st, sizeof(st)), "42501");
    assert_int_equal(put(sg, "k", "r", 999, err, sizeof(err)), 409);

    /* An operator's reset: refused until the role is a repairer. */
    assert_int_equal(call(sg, "POST", "/v1/fences/r/reset", OPS, "{\"token\":0}", err, sizeof(err)), 403);
    assert_string_equal(err, "forbidden");
    assert_int_equal(put(sg, "k", "r", 999, err, sizeof(err)), 409);
    exec(su, "GRANT fencelock_repairer TO sgapp");
    assert_int_equal(call(sg, "POST", "/v1/fences/r/reset", OPS, "{\"token\":0}", err, sizeof(err)), 200);
    assert_int_equal(put(sg, "k", "r", 999, err, sizeof(err)), 200);
    assert_int_equal(
        value(su, "SELECT count(*) FROM fencelock.repairs WHERE by_role = 'sgapp' AND old_token = 1000"
                  " AND new_token = 0 AND resource = convert_to('r', 'UTF8')"),
        1);
    tk_sg_free(sg);

    /* Installing again (a restart of the installer) keeps the fence. */
    assert_int_equal(run(log, (const char *const[]){"--install", "--db", su_url, NULL}), 0);
    assert_int_equal(value(su, "SELECT fencelock.last('r')"), 999);
    PQfinish(app);
    PQfinish(su);
}

/* A database of version 1 (fencing_last_token and sg_* in public, as
 * storage-guard made them before the schemas) is upgraded at the first
 * start: records, log and fences kept, the old objects gone. */
static void test_roles_version_1_is_upgraded(void **state)
{
    (void)state;
    PGconn *su = connect_as("fencelock", "postgres");
    exec(su, "CREATE DATABASE mig");
    PQfinish(su);
    su = connect_as("fencelock", "mig");
    exec(su, old_fencelock_sql);
    exec(su, old_sg_schema_sql);
    exec(su,
         "INSERT INTO sg_records (key, resource, value, token, version, updated_at_ms)"
         " VALUES (convert_to('k', 'UTF8'), convert_to('r', 'UTF8'), '\"old\"', 5000, 3, 1);"
         "INSERT INTO sg_log (time_ms, op, key, resource, token, last_token, outcome, version)"
         " VALUES (1, 'write', convert_to('k', 'UTF8'), convert_to('r', 'UTF8'), 5000, 4000, 'accepted', 3);"
         "INSERT INTO fencing_last_token VALUES (convert_to('r', 'UTF8'), 5000)");
    char url[256], err[64];
    url_of("fencelock", "mig", url, sizeof(url));
    struct tk_sg *sg = start_sg(url, NULL);

    struct hc_response r = {0};
    assert_int_equal(hc_get(tk_sg_port(sg), "/v1/records/k", &r), 0);
    assert_int_equal(r.status, 200);
    assert_string_equal(json_string_value(json_object_get(r.json, "value")), "old");
    assert_int_equal(json_integer_value(json_object_get(r.json, "version")), 3);
    hc_response_clear(&r);
    assert_int_equal(put(sg, "k", "r", 4999, err, sizeof(err)), 409); /* the fence came along */
    assert_int_equal(put(sg, "k", "r", 5001, err, sizeof(err)), 200);
    assert_int_equal(hc_get(tk_sg_port(sg), "/v1/log?key=k", &r), 0);
    assert_int_equal(r.status, 200);
    json_t *entries = json_object_get(r.json, "entries");
    assert_int_equal(json_array_size(entries), 3); /* the old row, the refusal, the write */
    assert_int_equal(json_integer_value(json_object_get(json_array_get(entries, 0), "token")), 5000);
    hc_response_clear(&r);
    tk_sg_free(sg);

    assert_int_equal(value(su, "SELECT storage_guard.sg_schema_version()"), 2);
    assert_int_equal(
        value(su, "SELECT count(*) FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace"
                  " WHERE n.nspname = 'public' AND c.relname IN ('sg_records', 'sg_log', 'sg_deleted',"
                  " 'fencing_last_token')"),
        0);
    assert_int_equal(value(su, "SELECT fencelock.last('r')"), 5001);
    PQfinish(su);
}

/* Tables of version 1 planted by another role in public (a trigger on
 * its sg_log), and a schema storage_guard of another role: the install
 * takes over neither. */
static void test_roles_planted_tables_are_not_adopted(void **state)
{
    (void)state;
    PGconn *su = connect_as("fencelock", "postgres");
    exec(su, "CREATE DATABASE plant");
    exec(su, "CREATE ROLE mal LOGIN");
    PQfinish(su);
    su = connect_as("fencelock", "plant");
    exec(su, "GRANT CREATE ON SCHEMA public TO mal; GRANT CREATE ON DATABASE plant TO mal");
    PGconn *m = connect_as("mal", "plant");
    exec(m, old_sg_schema_sql);
    exec(m, "CREATE FUNCTION public.spy() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN RETURN NEW; END $$;"
            " CREATE TRIGGER spy BEFORE INSERT ON public.sg_log FOR EACH ROW EXECUTE FUNCTION public.spy()");
    char log[300], url[256];
    snprintf(log, sizeof(log), "%s/plant.log", dir);
    url_of("fencelock", "plant", url, sizeof(url));
    /* Refused, not adopted and not passed over (they might be version 1
     * made by storage-guard running as that role). */
    assert_int_equal(run(log, (const char *const[]){"--install", "--db", url, NULL}), 1);
    assert_true(file_has(log, "belongs to another role"));
    assert_int_equal(value(su, "SELECT count(*) FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace"
                               " WHERE n.nspname = 'storage_guard' AND pg_get_userbyid(c.relowner) = 'mal'"),
                     0);
    /* Made the installer's, they are upgraded. */
    exec(su, "ALTER TABLE public.sg_records OWNER TO fencelock; ALTER TABLE public.sg_log OWNER TO fencelock;"
             " ALTER TABLE public.sg_deleted OWNER TO fencelock; DROP TRIGGER spy ON public.sg_log");
    assert_int_equal(run(log, (const char *const[]){"--install", "--db", url, NULL}), 0);
    assert_int_equal(value(su, "SELECT (to_regclass('storage_guard.sg_log') IS NOT NULL)::int"), 1);
    PQfinish(m);
    PQfinish(su);

    su = connect_as("fencelock", "postgres");
    exec(su, "CREATE DATABASE squat");
    PQfinish(su);
    su = connect_as("fencelock", "squat");
    exec(su, "GRANT CREATE ON DATABASE squat TO mal");
    m = connect_as("mal", "squat");
    exec(m, "CREATE SCHEMA storage_guard");
    PQfinish(m);
    url_of("fencelock", "squat", url, sizeof(url));
    assert_int_equal(run(log, (const char *const[]){"--install", "--db", url, NULL}), 1);
    assert_true(file_has(log, "belongs to mal"));
    PQfinish(su);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_roles_runner_needs_no_create),
        cmocka_unit_test(test_roles_version_1_is_upgraded),
        cmocka_unit_test(test_roles_planted_tables_are_not_adopted),
    };
    return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
