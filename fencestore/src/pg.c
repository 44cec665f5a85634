/*
 * fencestore on PostgreSQL, through libpq: the check is fencelock.sql's
 * functions, run in the caller's transaction on the caller's connection.
 * fencelock.try_admit() locks the resource's row FOR UPDATE until the
 * transaction ends and never raises an error for a stale token, so that a
 * refusal leaves the caller's transaction usable, as on SQLite. Every value
 * is a bound parameter (the resource as binary bytea).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <libpq-fe.h>

#include "fencelock_sql.h"
#include "internal.h"

#define fmt fencestore__fmt

/* Functions the calls below use: if one is missing, fencelock.sql is run. */
static const char probe_sql[] =
    "SELECT pg_catalog.to_regprocedure('fencelock.try_admit(bytea,bigint)') IS NOT NULL"
    " AND to_regprocedure('fencelock.try_check(bytea,bigint)') IS NOT NULL"
    " AND to_regprocedure('fencelock.last(bytea)') IS NOT NULL";

/* What a role that cannot install, or may not call, is told to do. */
#define ROLES_HINT                                                                                           \
    " (fencelock.sql is installed by a superuser or a role with CREATEROLE, and callers are members of "     \
    "fencelock_writer: docs/guarding-your-database.md, \"Roles\")"

/* The message of a failed result, on one line, into buf. */
static void result_msg(PGconn *c, const PGresult *r, const char *what, char *buf, size_t cap)
{
    const char *m = r ? PQresultErrorMessage(r) : NULL;
    if (m == NULL || m[0] == '\0')
        m = PQerrorMessage(c);
    size_t n = strcspn(m, "\n");
    fmt(buf, cap, "%s: %.*s", what, (int)n, m);
}

/* Translate a failed result once, here: a retry of the transaction for
 * serialization failures and deadlocks, FENCING_ESTORE for the rest. */
static int fail(fencestore *s, const PGresult *r, const char *what)
{
    result_msg(s->db, r, what, s->errmsg, sizeof(s->errmsg));
    const char *state = r ? PQresultErrorField(r, PG_DIAG_SQLSTATE) : NULL;
    if (state != NULL && (strcmp(state, "40001") == 0 || strcmp(state, "40P01") == 0))
        return -EAGAIN;
    if (state != NULL && (strcmp(state, "22023") == 0 || strcmp(state, "FL428") == 0))
        return -EINVAL; /* our own checks ran first: not reached in practice */
    if (state != NULL && strcmp(state, "42501") == 0) {
        size_t n = strlen(s->errmsg);
        fmt(s->errmsg + n, sizeof(s->errmsg) - n, "%s", ROLES_HINT);
    }
    return FENCING_ESTORE;
}

/* Run sql on c; 0 or a message in errbuf. */
static int exec_ok(PGconn *c, const char *sql, const char *what, char *errbuf, size_t errcap)
{
    PGresult *r = PQexec(c, sql);
    ExecStatusType st = PQresultStatus(r);
    int rc = 0;
    if (st != PGRES_COMMAND_OK && st != PGRES_TUPLES_OK) {
        result_msg(c, r, what, errbuf, errcap);
        rc = FENCING_ESTORE;
    }
    PQclear(r);
    return rc;
}

/* Whether fencelock.sql's functions are there: 1, 0, or an error. */
static int installed(PGconn *c, char *errbuf, size_t errcap)
{
    PGresult *r = PQexec(c, probe_sql);
    int rc;
    if (PQresultStatus(r) == PGRES_TUPLES_OK && PQntuples(r) == 1) {
        rc = strcmp(PQgetvalue(r, 0, 0), "t") == 0;
    } else {
        result_msg(c, r, "fencestore_new_pg: look for fencelock's functions", errbuf, errcap);
        rc = FENCING_ESTORE;
    }
    PQclear(r);
    return rc;
}

/* Run fencelock.sql in a transaction of its own. The advisory lock makes
 * concurrent installers (several processes starting at once) take turns:
 * CREATE TABLE IF NOT EXISTS and CREATE OR REPLACE FUNCTION are not safe
 * against each other. Notices ("already exists") are not printed. */
static int install(PGconn *c, char *errbuf, size_t errcap)
{
    int rc = exec_ok(c,
                     "BEGIN ISOLATION LEVEL READ COMMITTED; SET LOCAL client_min_messages = warning;"
                     " SELECT pg_catalog.pg_advisory_xact_lock(pg_catalog.hashtext('fencelock.sql'))",
                     "fencestore_new_pg: begin install", errbuf, errcap);
    if (rc == 0 &&
        (rc = exec_ok(c, fencestore__sql, "fencestore_new_pg: fencelock.sql", errbuf, errcap)) != 0) {
        size_t n = strlen(errbuf);
        fmt(errbuf + n, errcap - n, "%s", ROLES_HINT);
    }
    if (rc == 0)
        rc = exec_ok(c, "COMMIT", "fencestore_new_pg: commit install", errbuf, errcap);
    if (rc != 0)
        PQclear(PQexec(c, "ROLLBACK"));
    return rc;
}

int fencestore__pg_new(fencestore *s, char *errbuf, size_t errcap)
{
    PGconn *c = s->db;
    if (PQstatus(c) != CONNECTION_OK) {
        fmt(errbuf, errcap, "fencestore_new_pg: the connection is not open: %s", PQerrorMessage(c));
        return FENCING_ESTORE;
    }
    int rc = installed(c, errbuf, errcap);
    if (rc != 0)
        return rc < 0 ? rc : 0;
    if (PQtransactionStatus(c) != PQTRANS_IDLE) {
        fmt(errbuf, errcap,
            "fencestore_new_pg: fencelock.sql is not installed in this database, and the connection is "
            "inside a transaction: run psql -1 -f fencelock.sql, or call fencestore_new_pg outside a "
            "transaction");
        return FENCING_ESTORE;
    }
    return install(c, errbuf, errcap);
}

int fencestore__pg_open(const char *uri, fencestore **out, char *errbuf, size_t errcap)
{
    PGconn *c = PQconnectdb(uri);
    if (c == NULL) {
        fmt(errbuf, errcap, "fencestore_open: out of memory");
        return -ENOMEM;
    }
    int rc = FENCING_ESTORE;
    if (PQstatus(c) != CONNECTION_OK) {
        /* libpq's message names host and port, never the password. */
        fmt(errbuf, errcap, "fencestore_open: %s", PQerrorMessage(c));
        goto fail;
    }
    /* A commit that returns is on disk: the fence and the caller's write
     * survive a crash of the server once it answered (the server default,
     * which a database or role may have changed). */
    if ((rc = exec_ok(c, "SET synchronous_commit = on", "fencestore_open", errbuf, errcap)) != 0)
        goto fail;
    if ((rc = fencestore_new_pg(c, out, errbuf, errcap)) != 0)
        goto fail;
    (*out)->owns_db = 1;
    return 0;
fail:
    PQfinish(c);
    return rc;
}

void fencestore__pg_close(fencestore *s)
{
    PQfinish(s->db);
}

int fencestore__pg_exec(fencestore *s, const char *sql)
{
    /* No transaction to leave (a failed COMMIT ended it): nothing to send,
     * and no warning for libpq to print. */
    if (strcmp(sql, "ROLLBACK") == 0 && PQtransactionStatus(s->db) == PQTRANS_IDLE)
        return 0;
    PGresult *r = PQexec(s->db, sql);
    int rc = 0;
    if (PQresultStatus(r) != PGRES_COMMAND_OK)
        rc = fail(s, r, sql);
    else if (strcmp(sql, "COMMIT") == 0 && strcmp(PQcmdStatus(r), "COMMIT") != 0) {
        /* PostgreSQL answers COMMIT of an aborted transaction with
         * ROLLBACK, and no error: nothing of it was written. */
        fmt(s->errmsg, sizeof(s->errmsg), "COMMIT: the transaction had failed and was rolled back");
        rc = FENCING_ESTORE;
    }
    PQclear(r);
    return rc;
}

/* Run a one-value query with the resource as $1 (binary bytea) and, if
 * token != 0, the token as $2; the value into *out. */
static int query_u64(fencestore *s, const char *sql, const char *resource, size_t len, uint64_t token,
                     uint64_t *out, const char *what)
{
    char tok[24];
    snprintf(tok, sizeof(tok), "%llu", (unsigned long long)token);
    const char *values[2] = {resource, tok};
    int lengths[2] = {(int)len, 0};
    int formats[2] = {1, 0};
    PGresult *r = PQexecParams(s->db, sql, token != 0 ? 2 : 1, NULL, values, lengths, formats, 0);
    int rc = 0;
    if (PQresultStatus(r) != PGRES_TUPLES_OK || PQntuples(r) != 1 || PQgetisnull(r, 0, 0))
        rc = fail(s, r, what);
    else
        *out = strtoull(PQgetvalue(r, 0, 0), NULL, 10);
    PQclear(r);
    return rc;
}

int fencestore__pg_admit(fencestore *s, const char *resource, size_t len, uint64_t token, int share,
                         uint64_t *last)
{
    return query_u64(s,
                     share ? "SELECT fencelock.try_check($1::pg_catalog.bytea, $2::bigint)"
                           : "SELECT fencelock.try_admit($1::pg_catalog.bytea, $2::bigint)",
                     resource, len, token, last, share ? "check token" : "admit token");
}

int fencestore__pg_last(fencestore *s, const char *resource, size_t len, uint64_t *out)
{
    return query_u64(s, "SELECT fencelock.last($1::pg_catalog.bytea)", resource, len, 0, out,
                     "read last token");
}
