/* fencelock.sql against a hostile database user, on a real PostgreSQL: no
 * function planted by another role runs inside a fence function (for
 * every function the SQL calls, in every schema a caller could put first,
 * and in pg_temp), no role that guards its writes can lower a fence, no
 * non-owner can change the objects, reinstalls and upgrades keep every
 * fence, and repairs are an audited operator's step. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <libpq-fe.h>

#include <fencelock-testkit/testkit.h>
#include <fencestore/fencestore.h>

#include "new_fencelock_sql.h"
#include "old_fencelock_sql.h"

static struct tk_pg *pg;

static int group_setup(void **state)
{
    (void)state;
    int rc = tk_pg_start(NULL, &pg);
    if (rc != 0)
        fail_msg("PostgreSQL did not start: %s", strerror(-rc));
    return 0;
}

static int group_teardown(void **state)
{
    (void)state;
    tk_pg_free(pg);
    return 0;
}

static PGconn *connect_as(const char *role, const char *db)
{
    char url[256];
    snprintf(url, sizeof(url), "postgresql://%s@127.0.0.1:%u/%s", role, (unsigned)tk_pg_port(pg), db);
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

/* The SQLSTATE a statement fails with ("" if it did not fail). */
static void state_of(PGconn *c, const char *sql, char *out, size_t cap)
{
    PGresult *r = PQexec(c, sql);
    const char *s = PQresultStatus(r) == PGRES_FATAL_ERROR ? PQresultErrorField(r, PG_DIAG_SQLSTATE) : NULL;
    snprintf(out, cap, "%s", s ? s : "");
    PQclear(r);
}

static void expect_state(PGconn *c, const char *sql, const char *want)
{
    char got[16];
    state_of(c, sql, got, sizeof(got));
    if (strcmp(got, want) != 0)
        fail_msg("%.200s: wanted SQLSTATE %s, got '%s' (%s)", sql, want, got, PQerrorMessage(c));
}

static long long value(PGconn *c, const char *sql)
{
    PGresult *r = PQexec(c, sql);
    long long v = -1;
    if (PQresultStatus(r) == PGRES_TUPLES_OK && PQntuples(r) == 1 && !PQgetisnull(r, 0, 0))
        v = atoll(PQgetvalue(r, 0, 0));
    else if (PQresultStatus(r) != PGRES_TUPLES_OK)
        fail_msg("%.200s: %s", sql, PQerrorMessage(c));
    PQclear(r);
    return v;
}

static void new_db(const char *name)
{
    char sql[128];
    snprintf(sql, sizeof(sql), "CREATE DATABASE %s", name);
    assert_int_equal(tk_pg_exec(pg, sql), 0);
}

/* Install fencelock.sql as a superuser, through libfencestore. */
static void install(const char *db)
{
    PGconn *c = connect_as("fencelock", db);
    fencestore *s = NULL;
    char err[512];
    if (fencestore_new_pg(c, &s, err, sizeof(err)) != 0)
        fail_msg("install: %s", err);
    fencestore_free(s);
    PQfinish(c);
}

/* Every call a caller may make, on resource r (token t where it takes one). */
static void call_every_function(PGconn *c, const char *r, long long t)
{
    static const char *const fmts[] = {
        "SELECT fencelock.last('%s')",
        "SELECT fencelock.last(pg_catalog.convert_to('%s', 'UTF8'))",
        "BEGIN; SELECT fencelock.try_admit('%s', %lld); COMMIT",
        "BEGIN; SELECT fencelock.admit(pg_catalog.convert_to('%s', 'UTF8'), %lld); COMMIT",
        "BEGIN; SELECT fencelock.try_check('%s', %lld); COMMIT",
        "BEGIN; SELECT fencelock.check('%s', %lld); COMMIT",
        "BEGIN; SELECT fencelock.try_admit(pg_catalog.convert_to('%s', 'UTF8'), %lld); COMMIT",
        "BEGIN; SELECT fencelock.check(pg_catalog.convert_to('%s', 'UTF8'), %lld); COMMIT",
        "BEGIN; SELECT fencelock.try_check(pg_catalog.convert_to('%s', 'UTF8'), %lld); COMMIT",
        "BEGIN; SELECT fencelock.lock(pg_catalog.convert_to('%s', 'UTF8')); COMMIT",
        "BEGIN; SELECT fencelock.admit('%s', %lld); COMMIT",
    };
    for (size_t i = 0; i < sizeof(fmts) / sizeof(fmts[0]); i++) {
        char sql[256];
        if (strstr(fmts[i], "%lld") != NULL)
            snprintf(sql, sizeof(sql), fmts[i], r, t);
        else
            snprintf(sql, sizeof(sql), fmts[i], r);
        exec(c, sql);
    }
}

/* The reproduction: a role that may create in a schema a
 * superuser's search_path lists first plants convert_to(text, text); the
 * superuser calls the fence functions; the planter stays a planter. */
static void test_pg_security_planted_convert_to_never_runs(void **state)
{
    (void)state;
    new_db("hijack");
    install("hijack");
    PGconn *su = connect_as("fencelock", "hijack");
    exec(su, "CREATE ROLE mallory LOGIN; GRANT CREATE ON SCHEMA public TO mallory");
    PGconn *m = connect_as("mallory", "hijack");
    exec(m,
         "CREATE FUNCTION public.convert_to(text, text) RETURNS bytea LANGUAGE plpgsql AS $$"
         " BEGIN EXECUTE 'ALTER ROLE mallory SUPERUSER'; RETURN pg_catalog.convert_to($1, $2::name); END $$");
    exec(su, "SET search_path = public, pg_catalog");
    call_every_function(su, "invoice-42", 5);
    assert_int_equal(value(su, "SELECT rolsuper::int FROM pg_roles WHERE rolname = 'mallory'"), 0);
    PQfinish(m);
    PQfinish(su);
}

/* The same against the layout before the schema: it is what was broken
 * (the test's own check that it catches the defect). */
static void test_pg_security_old_layout_was_hijacked(void **state)
{
    (void)state;
    new_db("oldhijack");
    PGconn *su = connect_as("fencelock", "oldhijack");
    exec(su, old_fencelock_sql);
    exec(su, "CREATE ROLE eve LOGIN; GRANT CREATE ON SCHEMA public TO eve");
    PGconn *m = connect_as("eve", "oldhijack");
    exec(m, "CREATE FUNCTION public.convert_to(text, text) RETURNS bytea LANGUAGE plpgsql AS $$"
            " BEGIN EXECUTE 'ALTER ROLE eve SUPERUSER'; RETURN pg_catalog.convert_to($1, $2::name); END $$");
    exec(su, "SELECT fencelock_last('invoice-42')");
    assert_int_equal(value(su, "SELECT rolsuper::int FROM pg_roles WHERE rolname = 'eve'"), 1);
    /* Upgraded, the old names are gone (an overload planted beside them
     * would win), and the new functions never run eve's. */
    exec(su, "ALTER ROLE eve NOSUPERUSER");
    PQfinish(su);
    install("oldhijack");
    su = connect_as("fencelock", "oldhijack");
    exec(su, "SET search_path = public, pg_catalog");
    expect_state(su, "SELECT fencelock_last('invoice-42')", "42883");
    call_every_function(su, "invoice-42", 5);
    assert_int_equal(value(su, "SELECT rolsuper::int FROM pg_roles WHERE rolname = 'eve'"), 0);
    PQfinish(m);
    PQfinish(su);
}

/* A role that guards its writes cannot touch the fence table, and a
 * fence of 1001 refuses 2 whatever it tries. */
static void test_pg_security_writers_cannot_lower_a_fence(void **state)
{
    (void)state;
    new_db("lower");
    install("lower");
    PGconn *su = connect_as("fencelock", "lower");
    exec(su, "CREATE ROLE app LOGIN IN ROLE fencelock_writer");
    PQfinish(su);
    PGconn *a = connect_as("app", "lower");
    exec(a, "BEGIN; SELECT fencelock.admit('inv', 1001); COMMIT");
    static const char *const tries[] = {
        "UPDATE fencelock.last_token SET token = 1",
        "DELETE FROM fencelock.last_token",
        "INSERT INTO fencelock.last_token VALUES ('x', 1)",
        "TRUNCATE fencelock.last_token",
        "SELECT * FROM fencelock.last_token",
        "SELECT fencelock.repair('inv', 1, 'because')",
        "SELECT fencelock.lock_row('inv', false)",
        "SELECT fencelock.admit_row('inv', 1, false, true)",
        "ALTER TABLE fencelock.last_token DISABLE TRIGGER ALL",
        "CREATE TABLE fencelock.mine (x int)",
    };
    for (size_t i = 0; i < sizeof(tries) / sizeof(tries[0]); i++)
        expect_state(a, tries[i], "42501");
    expect_state(a, "BEGIN; SELECT fencelock.admit('inv', 2)", "FL409");
    exec(a, "ROLLBACK");
    assert_int_equal(value(a, "SELECT fencelock.last('inv')"), 1001);
    /* A role that is no writer calls nothing. */
    PQfinish(a);
    su = connect_as("fencelock", "lower");
    exec(su, "CREATE ROLE stranger LOGIN");
    PQfinish(su);
    PGconn *x = connect_as("stranger", "lower");
    expect_state(x, "SELECT fencelock.last('inv')", "42501");
    expect_state(x, "SELECT fencelock.admit('inv', 5000)", "42501");
    PQfinish(x);
}

/* Every pg_catalog function any fence function names, planted with more
 * specific signatures (each argument as text, and exact copies) in public
 * and in a schema of the attacker's that the caller puts first, and the
 * operators on the types the SQL compares, and a temp table named like the
 * fence table: none of them runs, for a superuser or a writer. The list
 * is read from the installed functions, so a function added later that
 * names something without its schema is caught. */
static void test_pg_security_no_planted_object_runs(void **state)
{
    (void)state;
    new_db("plant");
    install("plant");
    PGconn *su = connect_as("fencelock", "plant");
    exec(su, "CREATE ROLE trudy LOGIN; GRANT CREATE ON SCHEMA public TO trudy;"
             " GRANT CREATE ON DATABASE plant TO trudy; CREATE ROLE app2 LOGIN IN ROLE fencelock_writer");
    PGconn *t = connect_as("trudy", "plant");
    exec(t, "CREATE SCHEMA trap; GRANT USAGE ON SCHEMA trap TO PUBLIC;"
            " CREATE TABLE public.ran (what text); GRANT INSERT, SELECT ON public.ran TO PUBLIC");
    /* The names the functions call, from their own text. */
    PGresult *r = PQexec(t, "SELECT DISTINCT m[1] FROM pg_proc p, pg_namespace n,"
                            " regexp_matches(pg_get_functiondef(p.oid), '([a-z_]+)\\s*\\(', 'g') AS m"
                            " WHERE p.pronamespace = n.oid AND n.nspname = 'fencelock'"
                            " AND EXISTS (SELECT 1 FROM pg_proc q WHERE q.proname = m[1]"
                            " AND q.pronamespace = 'pg_catalog'::regnamespace)");
    assert_int_equal(PQresultStatus(r), PGRES_TUPLES_OK);
    int names = PQntuples(r), planted = 0;
    assert_true(names >= 2); /* convert_to and length at least */
    for (int i = 0; i < names; i++) {
        const char *fn = PQgetvalue(r, i, 0);
        char q[512];
        snprintf(q, sizeof(q),
                 "SELECT pg_get_function_identity_arguments(p.oid), pg_get_function_result(p.oid),"
                 " p.proretset FROM pg_proc p WHERE p.proname = '%s' AND p.pronamespace = "
                 "'pg_catalog'::regnamespace"
                 " AND p.prokind = 'f' AND pg_get_function_result(p.oid) NOT IN ('trigger', 'internal',"
                 " 'event_trigger', 'void', 'record') AND p.proargtypes::text NOT LIKE '%%2281%%'"
                 " AND pg_get_function_identity_arguments(p.oid) NOT LIKE '%%any%%'",
                 fn);
        PGresult *sig = PQexec(t, q);
        for (int k = 0; k < PQntuples(sig) && k < 12; k++) {
            const char *args = PQgetvalue(sig, k, 0), *ret = PQgetvalue(sig, k, 1);
            if (strcmp(PQgetvalue(sig, k, 2), "t") == 0)
                continue;
            /* The exact signature, and every argument as text. */
            char textargs[256] = "";
            int nargs = args[0] ? 1 : 0;
            for (const char *p = args; *p; p++)
                nargs += *p == ',';
            for (int a = 0; a < nargs; a++)
                snprintf(textargs + strlen(textargs), sizeof(textargs) - strlen(textargs), "%stext",
                         a ? ", " : "");
            const char *schemas[] = {"public", "trap"};
            for (int sc = 0; sc < 2; sc++) {
                for (int v = 0; v < 2; v++) {
                    char plant[1024];
                    snprintf(
                        plant, sizeof(plant),
                        "CREATE FUNCTION %s.%s(%s) RETURNS %s LANGUAGE plpgsql AS $$ BEGIN"
                        " INSERT INTO public.ran VALUES ('%s'); RAISE EXCEPTION 'planted %s ran'; END $$",
                        schemas[sc], fn, v ? textargs : args, ret, fn, fn);
                    PGresult *pr = PQexec(t, plant);
                    planted += PQresultStatus(pr) == PGRES_COMMAND_OK;
                    PQclear(pr);
                }
            }
        }
        PQclear(sig);
    }
    PQclear(r);
    assert_true(planted >= 4);
    /* Operators on the types the SQL compares and joins. */
    static const char *const ops[] = {"=", "<", ">", "<=", ">=", "<>", "||"};
    static const char *const types[][2] = {{"bytea", "bytea"},    {"bigint", "bigint"},
                                           {"bigint", "integer"}, {"integer", "integer"},
                                           {"text", "text"},      {"text", "unknown"}};
    exec(t, "CREATE FUNCTION trap.op_ran(anyelement, anyelement) RETURNS boolean LANGUAGE plpgsql AS $$"
            " BEGIN INSERT INTO public.ran VALUES ('operator'); RETURN true; END $$");
    for (size_t o = 0; o < sizeof(ops) / sizeof(ops[0]); o++) {
        for (size_t ty = 0; ty < sizeof(types) / sizeof(types[0]); ty++) {
            char sql[512];
            snprintf(sql, sizeof(sql),
                     "CREATE FUNCTION trap.op_%zu_%zu(%s, %s) RETURNS boolean LANGUAGE plpgsql AS $$"
                     " BEGIN INSERT INTO public.ran VALUES ('operator'); RETURN true; END $$;"
                     " CREATE OPERATOR public.%s (LEFTARG = %s, RIGHTARG = %s, FUNCTION = trap.op_%zu_%zu);"
                     " CREATE OPERATOR trap.%s (LEFTARG = %s, RIGHTARG = %s, FUNCTION = trap.op_%zu_%zu)",
                     o, ty, types[ty][0], types[ty][1], ops[o], types[ty][0], types[ty][1], o, ty, ops[o],
                     types[ty][0], types[ty][1], o, ty);
            PQclear(PQexec(t, sql)); /* some are refused (unknown): the rest plant */
        }
    }
    const char *callers[] = {"fencelock", "app2"};
    for (int i = 0; i < 2; i++) {
        PGconn *c = connect_as(callers[i], "plant");
        exec(c, "SET search_path = trap, public, pg_catalog");
        exec(c, "CREATE TEMP TABLE last_token (resource bytea, token bigint);"
                " INSERT INTO last_token VALUES ('x', 999999); CREATE TEMP TABLE fencing_last_token (x int)");
        call_every_function(c, "plant-r", 10 + i);
        assert_int_equal(value(c, "SELECT fencelock.last('plant-r')"), 11 > 10 + i ? 10 + i : 11);
        PQfinish(c);
    }
    assert_int_equal(value(t, "SELECT count(*) FROM public.ran"), 0);
    PQfinish(t);
    PQfinish(su);
}

/* What a role without ownership may not do to the objects. */
static void test_pg_security_non_owners_change_nothing(void **state)
{
    (void)state;
    new_db("owners");
    install("owners");
    PGconn *su = connect_as("fencelock", "owners");
    exec(su, "CREATE ROLE wendy LOGIN IN ROLE fencelock_writer; CREATE ROLE tempo LOGIN;"
             " REVOKE CREATE ON SCHEMA public FROM PUBLIC");
    PQfinish(su);
    PGconn *w = connect_as("wendy", "owners");
    static const char *const tries[] = {
        "ALTER FUNCTION fencelock.admit(bytea, bigint) SECURITY INVOKER",
        "ALTER FUNCTION fencelock.admit(bytea, bigint) RESET search_path",
        "CREATE OR REPLACE FUNCTION fencelock.last(bytea) RETURNS bigint LANGUAGE sql AS $$ SELECT 0::bigint "
        "$$",
        "CREATE FUNCTION t() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN RETURN NULL; END $$",
        "CREATE TRIGGER t BEFORE UPDATE ON fencelock.last_token FOR EACH ROW EXECUTE FUNCTION "
        "pg_catalog.suppress_redundant_updates_trigger()",
        "ALTER TABLE fencelock.last_token ENABLE ROW LEVEL SECURITY",
        "CREATE POLICY p ON fencelock.last_token USING (false)",
        "GRANT UPDATE ON fencelock.last_token TO wendy",
        "ALTER SCHEMA fencelock RENAME TO x",
        "DROP FUNCTION fencelock.admit(bytea, bigint)",
    };
    for (size_t i = 0; i < sizeof(tries) / sizeof(tries[0]); i++) {
        char st[16];
        state_of(w, tries[i], st, sizeof(st));
        if (strcmp(st, "42501") != 0)
            fail_msg("%s: wanted 42501, got '%s'", tries[i], st);
    }
    PQfinish(w);
    /* A role with TEMP only: its temp objects are not looked at. */
    PGconn *tc = connect_as("tempo", "owners");
    exec(tc, "CREATE TEMP TABLE last_token (resource bytea, token bigint); INSERT INTO last_token VALUES "
             "('a', 1)");
    expect_state(tc, "SELECT fencelock.last('a')", "42501");
    PQfinish(tc);
}

/* Reinstalling keeps every fence, also by another member of
 * fencelock_owner than the first installer (not a superuser). */
static void test_pg_security_reinstall_by_another_installer(void **state)
{
    (void)state;
    new_db("again");
    install("again");
    PGconn *su = connect_as("fencelock", "again");
    exec(su,
         "BEGIN; SELECT fencelock.admit('kept', 77); COMMIT;"
         " CREATE ROLE ops LOGIN CREATEROLE; GRANT CREATE ON DATABASE again TO ops;"
         " GRANT fencelock_owner TO ops WITH ADMIN OPTION; GRANT fencelock_writer, fencelock_repairer TO ops"
         " WITH ADMIN OPTION");
    PQfinish(su);
    PGconn *o = connect_as("ops", "again");
    fencestore *s = NULL;
    char err[512];
    /* Present: fencestore only checks. */
    assert_int_equal(fencestore_new_pg(o, &s, err, sizeof(err)), 0);
    fencestore_free(s);
    /* ops runs fencelock.sql itself (as psql -f would): it owns nothing
     * of the first install, and is no superuser. */
    exec(o, new_fencelock_sql);
    assert_int_equal(value(o, "SELECT fencelock.last('kept')"), 77);
    PQfinish(o);
}

/* An install of the layout before the schema, with an application role
 * that could write its table: fences move, the old table and names are
 * gone, and the application works through the new names. */
static void test_pg_security_upgrade_keeps_every_fence(void **state)
{
    (void)state;
    new_db("upgrade");
    PGconn *su = connect_as("fencelock", "upgrade");
    exec(su, old_fencelock_sql);
    exec(su, "CREATE ROLE olduser LOGIN; GRANT SELECT, INSERT, UPDATE ON fencing_last_token TO olduser;"
             " SELECT fencelock_admit('a', 1001); SELECT fencelock_admit('b', 5)");
    PQfinish(su);
    install("upgrade");
    su = connect_as("fencelock", "upgrade");
    assert_int_equal(value(su, "SELECT (to_regclass('public.fencing_last_token') IS NULL)::int"), 1);
    assert_int_equal(value(su, "SELECT fencelock.last('a')"), 1001);
    assert_int_equal(value(su, "SELECT fencelock.last('b')"), 5);
    PQfinish(su);
    PGconn *a = connect_as("olduser", "upgrade");
    expect_state(a, "BEGIN; SELECT fencelock.admit('a', 2)", "FL409");
    exec(a, "ROLLBACK");
    exec(a, "BEGIN; SELECT fencelock.admit('a', 2000); COMMIT");
    assert_int_equal(value(a, "SELECT fencelock.last('a')"), 2000);
    expect_state(a, "SELECT fencelock_admit('a', 3000)", "42883"); /* the old names are gone */
    expect_state(a, "UPDATE fencelock.last_token SET token = 1", "42501");
    PQfinish(a);
}

/* What a role may plant before a superuser (re)installs: a table named
 * as the old layout's in public, with an operator the upgrade compared
 * with; a database search_path of the database owner's that puts its own
 * operators first (bound into the table's CHECK at install); a schema
 * fencelock of its own. None of it is adopted, run or installed into. */
static void test_pg_security_planted_before_the_install(void **state)
{
    (void)state;
    new_db("preplant");
    install("preplant");
    PGconn *su = connect_as("fencelock", "preplant");
    exec(su, "BEGIN; SELECT fencelock.admit('invoice-42', 5); COMMIT;"
             " CREATE ROLE mal LOGIN; GRANT CREATE ON SCHEMA public TO mal");
    PGconn *m = connect_as("mal", "preplant");
    exec(m,
         "CREATE TABLE public.fencing_last_token (resource bytea PRIMARY KEY, token bigint);"
         " INSERT INTO public.fencing_last_token VALUES (convert_to('invoice-42', 'UTF8'), 9007199254740991);"
         " CREATE FUNCTION public.sqlid_eq(information_schema.sql_identifier, "
         "information_schema.sql_identifier)"
         " RETURNS boolean LANGUAGE plpgsql AS $$ BEGIN EXECUTE 'ALTER ROLE mal SUPERUSER';"
         " RETURN $1::text = $2::text; END $$;"
         " CREATE OPERATOR public.= (LEFTARG = information_schema.sql_identifier,"
         " RIGHTARG = information_schema.sql_identifier, FUNCTION = public.sqlid_eq)");
    PQfinish(m);
    /* A superuser's reinstall: refused (the table might hold fences of an
     * install by another role; it is never adopted nor passed over). */
    expect_state(su, new_fencelock_sql, "42501");
    assert_int_equal(value(su, "SELECT rolsuper::int FROM pg_roles WHERE rolname = 'mal'"), 0);
    assert_int_equal(value(su, "SELECT pg_has_role('mal', 'fencelock_writer', 'MEMBER')::int"), 0);
    assert_int_equal(value(su, "SELECT fencelock.last('invoice-42')"), 5);
    assert_int_equal(value(su, "SELECT (to_regclass('public.fencing_last_token') IS NOT NULL)::int"), 1);
    PQfinish(su);

    /* The database owner's search_path with its own >= first. */
    PGconn *pc = connect_as("fencelock", "postgres");
    exec(pc, "CREATE DATABASE dbpath");
    exec(pc, "CREATE ROLE dbo LOGIN; ALTER DATABASE dbpath OWNER TO dbo");
    PQfinish(pc);
    PGconn *o = connect_as("dbo", "dbpath");
    exec(o, "CREATE SCHEMA evil; CREATE TABLE evil.ran (who name);"
            " GRANT USAGE ON SCHEMA evil TO PUBLIC; GRANT INSERT ON evil.ran TO PUBLIC;"
            " CREATE FUNCTION evil.ge(bigint, integer) RETURNS boolean LANGUAGE plpgsql AS $$"
            " BEGIN INSERT INTO evil.ran VALUES (current_user); RETURN $1 OPERATOR(pg_catalog.>=) $2; END $$;"
            " GRANT EXECUTE ON FUNCTION evil.ge(bigint, integer) TO PUBLIC;"
            " CREATE OPERATOR evil.>= (LEFTARG = bigint, RIGHTARG = integer, FUNCTION = evil.ge);"
            " ALTER DATABASE dbpath SET search_path = evil, pg_catalog, public");
    PQfinish(o);
    su = connect_as("fencelock", "dbpath");
    exec(su, new_fencelock_sql);
    exec(su, "BEGIN; SELECT fencelock.admit('r', 50); COMMIT");
    o = connect_as("dbo", "dbpath");
    assert_int_equal(value(o, "SELECT count(*) FROM evil.ran"), 0);
    PQfinish(o);
    PQfinish(su);

    /* A schema fencelock of another role: refused, nothing installed. */
    new_db("preschema");
    su = connect_as("fencelock", "preschema");
    exec(su, "CREATE ROLE squat LOGIN; GRANT CREATE ON DATABASE preschema TO squat");
    PGconn *q = connect_as("squat", "preschema");
    exec(q, "CREATE SCHEMA fencelock; CREATE TABLE fencelock.last_token (resource bytea PRIMARY KEY, token "
            "bigint)");
    PQfinish(q);
    expect_state(su, new_fencelock_sql, "42501");
    assert_int_equal(value(su, "SELECT count(*) FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace"
                               " WHERE n.nspname = 'fencelock'"),
                     0);
    PQfinish(su);
}

/* A plain member of fencelock_owner (no CREATE on the database, no
 * CREATEROLE) reinstalls, as the docs grant it. */
static void test_pg_security_reinstall_by_a_plain_member(void **state)
{
    (void)state;
    new_db("plainre");
    install("plainre");
    PGconn *su = connect_as("fencelock", "plainre");
    exec(su, "BEGIN; SELECT fencelock.admit('kept', 9); COMMIT; CREATE ROLE dba LOGIN; GRANT fencelock_owner "
             "TO dba");
    PQfinish(su);
    PGconn *d = connect_as("dba", "plainre");
    assert_int_equal(value(d, "SELECT has_database_privilege('plainre', 'CREATE')::int"), 0);
    exec(d, new_fencelock_sql);
    PQfinish(d);
    su = connect_as("fencelock", "plainre");
    assert_int_equal(value(su, "SELECT fencelock.last('kept')"), 9);
    PQfinish(su);
}

/* Outside one transaction the file refuses to run at all (its search_path
 * could not be pinned). */
static void test_pg_security_install_needs_one_transaction(void **state)
{
    (void)state;
    new_db("onetx");
    PGconn *su = connect_as("fencelock", "onetx");
    /* The first statement alone, as psql without -1 sends it. */
    exec(su, "SET LOCAL search_path = pg_catalog, pg_temp");
    const char *install_block = strstr(new_fencelock_sql, "DO $install$");
    assert_non_null(install_block);
    char *first = strndup(install_block, (size_t)(strstr(install_block, "$install$;") - install_block) + 10);
    expect_state(su, first, "55000");
    free(first);
    PQfinish(su);
}

/* A database whose default isolation is REPEATABLE READ or SERIALIZABLE:
 * the install still runs at READ COMMITTED (the fences an upgrade moves
 * are read after it locks their table, and must be the last committed),
 * through fencestore and as psql -1 sends it. */
static void test_pg_security_install_at_read_committed(void **state)
{
    (void)state;
    static const char *const levels[] = {"repeatable read", "serializable"};
    for (size_t i = 0; i < 2; i++) {
        char db[32], sql[160];
        snprintf(db, sizeof(db), "iso%zu", i);
        new_db(db);
        PGconn *su = connect_as("fencelock", db);
        snprintf(sql, sizeof(sql), "ALTER DATABASE %s SET default_transaction_isolation = '%s'", db,
                 levels[i]);
        exec(su, sql);
        PQfinish(su);
        su = connect_as("fencelock", db);
        exec(su, old_fencelock_sql);
        exec(su, "SELECT fencelock_admit('r', 100)");
        PQfinish(su);
        install(db); /* the upgrade, through fencestore */
        su = connect_as("fencelock", db);
        assert_int_equal(value(su, "SELECT fencelock.last('r')"), 100);
        exec(su, "BEGIN; SELECT fencelock.admit('r', 200); COMMIT");
        exec(su, new_fencelock_sql); /* a reinstall, as psql -1 */
        assert_int_equal(value(su, "SELECT fencelock.last('r')"), 200);
        PQfinish(su);
    }
}

/* Default privileges that would give another role rights on the objects
 * refuse the install; another session's temporary table named as the old
 * layout's does not block it. */
static void test_pg_security_default_privileges_and_temp_tables(void **state)
{
    (void)state;
    new_db("defpriv");
    PGconn *su = connect_as("fencelock", "defpriv");
    install("defpriv"); /* the roles exist */
    exec(su, "DROP SCHEMA fencelock CASCADE; CREATE ROLE grabber LOGIN;"
             " ALTER DEFAULT PRIVILEGES FOR ROLE fencelock_owner GRANT ALL ON TABLES TO grabber");
    expect_state(su, new_fencelock_sql, "42501");
    exec(su, "ALTER DEFAULT PRIVILEGES FOR ROLE fencelock_owner REVOKE ALL ON TABLES FROM grabber");
    exec(su, new_fencelock_sql);
    PGconn *t = connect_as("grabber", "defpriv");
    exec(t, "CREATE TEMP TABLE fencing_last_token (x int)");
    exec(su, new_fencelock_sql); /* not another role's old layout */
    PQfinish(t);
    PQfinish(su);
}

/* A repair is a repairer's, audited; a writer may not. */
static void test_pg_security_repair_is_audited(void **state)
{
    (void)state;
    new_db("repair");
    install("repair");
    PGconn *su = connect_as("fencelock", "repair");
    exec(su, "CREATE ROLE fixer LOGIN IN ROLE fencelock_repairer; CREATE ROLE plainapp LOGIN IN ROLE"
             " fencelock_writer");
    exec(su, "BEGIN; SELECT fencelock.admit('poisoned', 9000000000000000); COMMIT");
    PQfinish(su);
    PGconn *w = connect_as("plainapp", "repair");
    expect_state(w, "SELECT fencelock.repair('poisoned', 5, 'no')", "42501");
    PQfinish(w);
    PGconn *f = connect_as("fixer", "repair");
    expect_state(f, "SELECT fencelock.repair('poisoned', 5, '')", "22023");
    expect_state(f, "SELECT fencelock.repair('poisoned', 5, E' \\t\\n')", "22023"); /* blanks are no reason */
    assert_int_equal(value(f, "SELECT fencelock.repair('poisoned', 5, 'a client clock hours ahead')"),
                     9000000000000000LL);
    assert_int_equal(value(f, "SELECT fencelock.last('poisoned')"), 5);
    assert_int_equal(value(f, "SELECT count(*) FROM fencelock.repairs WHERE by_role = 'fixer' AND old_token ="
                              " 9000000000000000 AND new_token = 5 AND reason LIKE 'a client clock%'"),
                     1);
    expect_state(f, "DELETE FROM fencelock.repairs", "42501");
    expect_state(f, "SELECT fencelock.admit('poisoned', 7)", "42501");
    PQfinish(f);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_pg_security_planted_convert_to_never_runs),
        cmocka_unit_test(test_pg_security_old_layout_was_hijacked),
        cmocka_unit_test(test_pg_security_writers_cannot_lower_a_fence),
        cmocka_unit_test(test_pg_security_no_planted_object_runs),
        cmocka_unit_test(test_pg_security_non_owners_change_nothing),
        cmocka_unit_test(test_pg_security_reinstall_by_another_installer),
        cmocka_unit_test(test_pg_security_upgrade_keeps_every_fence),
        cmocka_unit_test(test_pg_security_repair_is_audited),
        cmocka_unit_test(test_pg_security_planted_before_the_install),
        cmocka_unit_test(test_pg_security_reinstall_by_a_plain_member),
        cmocka_unit_test(test_pg_security_install_needs_one_transaction),
        cmocka_unit_test(test_pg_security_install_at_read_committed),
        cmocka_unit_test(test_pg_security_default_privileges_and_temp_tables),
    };
    return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
