/*
 * The resource-side check in the caller's database: the last admitted
 * token per resource in one table. fencestore_admit() runs inside the
 * caller's transaction, so the check, the new last token and the caller's
 * own write commit or roll back together. This file holds the calls of
 * fencestore.h and the SQLite side; pg.c the PostgreSQL side.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <sqlite3.h>

#include "internal.h"

#define BUSY_TIMEOUT_MS 5000

static const char create_sql[] = "CREATE TABLE IF NOT EXISTS fencing_last_token ("
                                 " resource BLOB PRIMARY KEY NOT NULL,"
                                 " token INTEGER NOT NULL CHECK (token > 0)"
                                 ") WITHOUT ROWID";
static const char get_sql[] = "SELECT token FROM fencing_last_token WHERE resource = ?1";
/* Only ever raises the stored token, even if a caller skipped the check. */
static const char put_sql[] = "INSERT INTO fencing_last_token (resource, token) VALUES (?1, ?2)"
                              " ON CONFLICT (resource) DO UPDATE SET token = max(token, excluded.token)";

void fencestore__fmt(char *buf, size_t cap, const char *f, ...)
{
    if (buf == NULL || cap == 0)
        return;
    va_list ap;
    va_start(ap, f);
    vsnprintf(buf, cap, f, ap);
    va_end(ap);
}

#define fmt fencestore__fmt

static int is_pg(const fencestore *s)
{
    return s->backend == FENCESTORE_POSTGRESQL;
}

/* Prepare the SQLite statements on s->db (table created if missing). */
static int sqlite_prepare(fencestore *s, char *errbuf, size_t errcap)
{
    sqlite3 *db = s->db;
    const char *step = "create table";
    if (sqlite3_exec(db, create_sql, NULL, NULL, NULL) != SQLITE_OK)
        goto fail;
    step = "prepare";
    if (sqlite3_prepare_v3(db, get_sql, -1, SQLITE_PREPARE_PERSISTENT, (sqlite3_stmt **)&s->get, NULL) !=
            SQLITE_OK ||
        sqlite3_prepare_v3(db, put_sql, -1, SQLITE_PREPARE_PERSISTENT, (sqlite3_stmt **)&s->put, NULL) !=
            SQLITE_OK)
        goto fail;
    return 0;
fail:
    fmt(errbuf, errcap, "fencestore_new: %s: %s", step, sqlite3_errmsg(db));
    return FENCING_ESTORE;
}

/* A new handle over db, of the given backend; runs its set-up. */
static int new_store(int backend, void *db, int owns, fencestore **out, char *errbuf, size_t errcap)
{
    fencestore *s = calloc(1, sizeof(*s));
    if (s == NULL) {
        fmt(errbuf, errcap, "fencestore_new: out of memory");
        return -ENOMEM;
    }
    s->backend = backend;
    s->db = db;
    s->owns_db = owns;
    int rc = backend == FENCESTORE_POSTGRESQL ? fencestore__pg_new(s, errbuf, errcap)
                                              : sqlite_prepare(s, errbuf, errcap);
    if (rc != 0) {
        s->owns_db = 0; /* the caller closes what it opened */
        fencestore_free(s);
        return rc;
    }
    *out = s;
    return 0;
}

int fencestore_new(void *sqlite3_db, fencestore **out, char *errbuf, size_t errcap)
{
    if (sqlite3_db == NULL || out == NULL) {
        fmt(errbuf, errcap, "fencestore_new: %s is NULL", sqlite3_db == NULL ? "db" : "out");
        return -EINVAL;
    }
    return new_store(FENCESTORE_SQLITE, sqlite3_db, 0, out, errbuf, errcap);
}

int fencestore_new_pg(void *pgconn, fencestore **out, char *errbuf, size_t errcap)
{
    if (pgconn == NULL || out == NULL) {
        fmt(errbuf, errcap, "fencestore_new_pg: %s is NULL", pgconn == NULL ? "pgconn" : "out");
        return -EINVAL;
    }
    return new_store(FENCESTORE_POSTGRESQL, pgconn, 0, out, errbuf, errcap);
}

/* Read one pragma's value as text. */
static int pragma(sqlite3 *db, const char *sql, char *out, size_t cap)
{
    sqlite3_stmt *st = NULL;
    int rc = sqlite3_prepare_v2(db, sql, -1, &st, NULL);
    if (rc == SQLITE_OK && (rc = sqlite3_step(st)) == SQLITE_ROW) {
        const unsigned char *v = sqlite3_column_text(st, 0);
        snprintf(out, cap, "%s", v ? (const char *)v : "");
        rc = SQLITE_OK;
    }
    sqlite3_finalize(st);
    return rc;
}

/* An SQLite file as storage-guard opens one: WAL, and a commit that fsyncs
 * (synchronous=FULL), or an admitted token could vanish on power loss. */
static int sqlite_open(const char *path, fencestore **out, char *errbuf, size_t errcap)
{
    sqlite3 *db = NULL;
    char journal[16] = "", sync[8] = "";
    if (sqlite3_open_v2(path, &db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX, NULL) !=
            SQLITE_OK ||
        pragma(db, "PRAGMA journal_mode=WAL", journal, sizeof(journal)) != SQLITE_OK ||
        sqlite3_exec(db, "PRAGMA synchronous=FULL", NULL, NULL, NULL) != SQLITE_OK ||
        pragma(db, "PRAGMA synchronous", sync, sizeof(sync)) != SQLITE_OK) {
        fmt(errbuf, errcap, "fencestore_open: %s: %s", path, db ? sqlite3_errmsg(db) : "out of memory");
        sqlite3_close(db);
        return FENCING_ESTORE;
    }
    if ((strcmp(journal, "wal") != 0 && strcmp(path, ":memory:") != 0) || strcmp(sync, "2") != 0) {
        fmt(errbuf, errcap, "fencestore_open: %s: journal_mode %s, synchronous %s; want wal and 2 (FULL)",
            path, journal, sync);
        sqlite3_close(db);
        return FENCING_ESTORE;
    }
    sqlite3_busy_timeout(db, BUSY_TIMEOUT_MS);
    int rc = new_store(FENCESTORE_SQLITE, db, 1, out, errbuf, errcap);
    if (rc != 0)
        sqlite3_close(db);
    return rc;
}

int fencestore_open(const char *conn, fencestore **out, char *errbuf, size_t errcap)
{
    if (conn == NULL || conn[0] == '\0' || out == NULL) {
        fmt(errbuf, errcap, "fencestore_open: %s", out == NULL ? "out is NULL" : "no connection string");
        return -EINVAL;
    }
    if (strncmp(conn, "postgresql://", 13) == 0 || strncmp(conn, "postgres://", 11) == 0)
        return fencestore__pg_open(conn, out, errbuf, errcap);
    return sqlite_open(conn, out, errbuf, errcap);
}

void fencestore_free(fencestore *s)
{
    if (s == NULL)
        return;
    if (is_pg(s)) {
        if (s->owns_db)
            fencestore__pg_close(s);
    } else {
        sqlite3_finalize(s->get);
        sqlite3_finalize(s->put);
        if (s->owns_db)
            sqlite3_close_v2(s->db);
    }
    free(s);
}

int fencestore_backend(const fencestore *s)
{
    return s == NULL ? 0 : s->backend;
}

void *fencestore_db(const fencestore *s)
{
    return s == NULL ? NULL : s->db;
}

const char *fencestore_errmsg(const fencestore *s)
{
    return s == NULL ? "no store" : s->errmsg;
}

/* An SQLite failure: busy (past the busy timeout) asks for a retry. */
static int store_fail(fencestore *s, const char *what)
{
    sqlite3 *db = s->db;
    fmt(s->errmsg, sizeof(s->errmsg), "%s: %s", what, sqlite3_errmsg(db));
    int code = sqlite3_errcode(db) & 0xff;
    return code == SQLITE_BUSY || code == SQLITE_LOCKED ? -EAGAIN : FENCING_ESTORE;
}

static int sqlite_exec(fencestore *s, const char *sql)
{
    return sqlite3_exec(s->db, sql, NULL, NULL, NULL) == SQLITE_OK ? 0 : store_fail(s, sql);
}

int fencestore_begin(fencestore *s)
{
    if (s == NULL)
        return -EINVAL;
    s->errmsg[0] = '\0';
    return is_pg(s) ? fencestore__pg_exec(s, "BEGIN") : sqlite_exec(s, "BEGIN IMMEDIATE");
}

int fencestore_commit(fencestore *s)
{
    if (s == NULL)
        return -EINVAL;
    s->errmsg[0] = '\0';
    if (is_pg(s))
        return fencestore__pg_exec(s, "COMMIT");
    int rc = sqlite_exec(s, "COMMIT");
    /* A COMMIT that failed may leave the transaction open (busy): close it,
     * so that nothing of it is written later by accident. */
    if (rc != 0 && !sqlite3_get_autocommit(s->db))
        sqlite3_exec(s->db, "ROLLBACK", NULL, NULL, NULL);
    return rc;
}

int fencestore_rollback(fencestore *s)
{
    if (s == NULL)
        return -EINVAL;
    s->errmsg[0] = '\0';
    if (is_pg(s))
        return fencestore__pg_exec(s, "ROLLBACK");
    if (sqlite3_get_autocommit(s->db))
        return 0; /* no transaction (SQLite may have rolled it back itself) */
    return sqlite_exec(s, "ROLLBACK");
}

static int check_args(fencestore *s, const char *resource, size_t len)
{
    if (s == NULL)
        return -EINVAL;
    if (resource == NULL || len == 0 || len > FENCING_RESOURCE_MAX) {
        fmt(s->errmsg, sizeof(s->errmsg), "resource must be 1..%d bytes", FENCING_RESOURCE_MAX);
        return -EINVAL;
    }
    s->errmsg[0] = '\0';
    return 0;
}

/* The token rules of fencing_check() that need no last token: 0 is no
 * token, 2^53 and above cannot be compared safely everywhere. */
static int check_token(fencestore *s, uint64_t token)
{
    if (token >= FENCING_TOKEN_MAX) {
        fmt(s->errmsg, sizeof(s->errmsg), "token %llu is not below 2^53", (unsigned long long)token);
        return -EINVAL;
    }
    if (token == 0) {
        fmt(s->errmsg, sizeof(s->errmsg), "%s", fencing_strerror(FENCING_ENOTOKEN));
        return FENCING_ENOTOKEN;
    }
    return 0;
}

/* Read the last token into *out (0 if none). */
static int read_last(fencestore *s, const char *resource, size_t len, uint64_t *out)
{
    sqlite3_stmt *st = s->get;
    int rc = sqlite3_bind_blob(st, 1, resource, (int)len, SQLITE_STATIC);
    if (rc != SQLITE_OK) {
        rc = store_fail(s, "bind");
        goto out;
    }
    rc = sqlite3_step(st);
    if (rc == SQLITE_ROW) {
        *out = (uint64_t)sqlite3_column_int64(st, 0);
        rc = 0;
    } else if (rc == SQLITE_DONE) {
        *out = 0;
        rc = 0;
    } else {
        rc = store_fail(s, "read last token");
    }
out:
    sqlite3_reset(st);
    sqlite3_clear_bindings(st);
    return rc;
}

int fencestore_last(fencestore *s, const char *resource, size_t len, uint64_t *out)
{
    int rc = check_args(s, resource, len);
    if (rc != 0)
        return rc;
    if (out == NULL) {
        fmt(s->errmsg, sizeof(s->errmsg), "out is NULL");
        return -EINVAL;
    }
    return is_pg(s) ? fencestore__pg_last(s, resource, len, out) : read_last(s, resource, len, out);
}

/* Compare token with last as fencing_check() does. */
static int judge(fencestore *s, uint64_t last, uint64_t token)
{
    int rc = fencing_check(last, token);
    if (rc == FENCING_ESTALE)
        fmt(s->errmsg, sizeof(s->errmsg), "token %llu is older than %llu", (unsigned long long)token,
            (unsigned long long)last);
    else if (rc != 0)
        fmt(s->errmsg, sizeof(s->errmsg), "%s", fencing_strerror(rc));
    return rc;
}

/* Admit (raise) or only check (share) a token. */
static int admit_or_check(fencestore *s, const char *resource, size_t len, uint64_t token, int share,
                          uint64_t *last_out)
{
    int rc = check_args(s, resource, len);
    if (rc == 0)
        rc = check_token(s, token);
    if (rc != 0)
        return rc;
    uint64_t last = 0;
    if (is_pg(s))
        rc = fencestore__pg_admit(s, resource, len, token, share, &last);
    else
        rc = read_last(s, resource, len, &last);
    if (rc != 0)
        return rc;
    if (last_out != NULL)
        *last_out = last;
    rc = judge(s, last, token);
    /* PostgreSQL raised the fence already; SQLite does it here. An equal
     * token is the same holder writing again: nothing to raise. */
    if (rc != 0 || share || is_pg(s) || token == last)
        return rc;
    sqlite3_stmt *st = s->put;
    if (sqlite3_bind_blob(st, 1, resource, (int)len, SQLITE_STATIC) != SQLITE_OK ||
        sqlite3_bind_int64(st, 2, (sqlite3_int64)token) != SQLITE_OK) {
        rc = store_fail(s, "bind");
        goto out;
    }
    rc = sqlite3_step(st) == SQLITE_DONE ? 0 : store_fail(s, "store token");
out:
    sqlite3_reset(st);
    sqlite3_clear_bindings(st);
    return rc;
}

int fencestore_admit(fencestore *s, const char *resource, size_t len, uint64_t token, uint64_t *last_out)
{
    return admit_or_check(s, resource, len, token, 0, last_out);
}

int fencestore_check(fencestore *s, const char *resource, size_t len, uint64_t token, uint64_t *last_out)
{
    return admit_or_check(s, resource, len, token, 1, last_out);
}
