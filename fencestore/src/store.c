/*
 * The resource-side check backed by SQLite: the last admitted token per
 * resource in one table. fencestore_admit() runs inside the caller's
 * transaction, so the check, the new last token and the caller's own write
 * commit or roll back together.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <sqlite3.h>

#include <fencestore/fencestore.h>

#define STORE_ERRMSG_MAX 256

struct fencestore {
    sqlite3 *db;
    sqlite3_stmt *get;
    sqlite3_stmt *put;
    char errmsg[STORE_ERRMSG_MAX];
};

static const char create_sql[] = "CREATE TABLE IF NOT EXISTS fencing_last_token ("
                                 " resource BLOB PRIMARY KEY NOT NULL,"
                                 " token INTEGER NOT NULL CHECK (token > 0)"
                                 ") WITHOUT ROWID";
static const char get_sql[] = "SELECT token FROM fencing_last_token WHERE resource = ?1";
/* Only ever raises the stored token, even if a caller skipped the check. */
static const char put_sql[] = "INSERT INTO fencing_last_token (resource, token) VALUES (?1, ?2)"
                              " ON CONFLICT (resource) DO UPDATE SET token = max(token, excluded.token)";

static void fmt(char *buf, size_t cap, const char *f, ...)
{
    if (buf == NULL || cap == 0)
        return;
    va_list ap;
    va_start(ap, f);
    vsnprintf(buf, cap, f, ap);
    va_end(ap);
}

int fencestore_new(void *sqlite3_db, fencestore **out, char *errbuf, size_t errcap)
{
    if (sqlite3_db == NULL || out == NULL) {
        fmt(errbuf, errcap, "fencestore_new: %s is NULL", sqlite3_db == NULL ? "db" : "out");
        return -EINVAL;
    }
    sqlite3 *db = sqlite3_db;
    fencestore *s = calloc(1, sizeof(*s));
    if (s == NULL) {
        fmt(errbuf, errcap, "fencestore_new: out of memory");
        return -ENOMEM;
    }
    s->db = db;
    const char *step = "create table";
    if (sqlite3_exec(db, create_sql, NULL, NULL, NULL) != SQLITE_OK)
        goto fail;
    step = "prepare";
    if (sqlite3_prepare_v3(db, get_sql, -1, SQLITE_PREPARE_PERSISTENT, &s->get, NULL) != SQLITE_OK ||
        sqlite3_prepare_v3(db, put_sql, -1, SQLITE_PREPARE_PERSISTENT, &s->put, NULL) != SQLITE_OK)
        goto fail;
    *out = s;
    return 0;
fail:
    fmt(errbuf, errcap, "fencestore_new: %s: %s", step, sqlite3_errmsg(db));
    fencestore_free(s);
    return FENCING_ESTORE;
}

void fencestore_free(fencestore *s)
{
    if (s == NULL)
        return;
    sqlite3_finalize(s->get);
    sqlite3_finalize(s->put);
    free(s);
}

const char *fencestore_errmsg(const fencestore *s)
{
    return s == NULL ? "no store" : s->errmsg;
}

static int store_fail(fencestore *s, const char *what)
{
    fmt(s->errmsg, sizeof(s->errmsg), "%s: %s", what, sqlite3_errmsg(s->db));
    return FENCING_ESTORE;
}

static int check_args(fencestore *s, const char *resource, size_t len)
{
    if (s == NULL)
        return -EINVAL;
    if (resource == NULL || len == 0 || len > FENCING_RESOURCE_MAX) {
        fmt(s->errmsg, sizeof(s->errmsg), "resource must be 1..%d bytes", FENCING_RESOURCE_MAX);
        return -EINVAL;
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
    s->errmsg[0] = '\0';
    return read_last(s, resource, len, out);
}

int fencestore_admit(fencestore *s, const char *resource, size_t len, uint64_t token, uint64_t *last_out)
{
    int rc = check_args(s, resource, len);
    if (rc != 0)
        return rc;
    s->errmsg[0] = '\0';
    if (token >= FENCING_TOKEN_MAX) {
        fmt(s->errmsg, sizeof(s->errmsg), "token %llu is not below 2^53", (unsigned long long)token);
        return -EINVAL;
    }
    uint64_t last = 0;
    rc = read_last(s, resource, len, &last);
    if (rc != 0)
        return rc;
    if (last_out != NULL)
        *last_out = last;
    rc = fencing_check(last, token);
    if (rc == FENCING_ESTALE) {
        fmt(s->errmsg, sizeof(s->errmsg), "token %llu is older than %llu", (unsigned long long)token,
            (unsigned long long)last);
        return rc;
    }
    if (rc != 0) {
        fmt(s->errmsg, sizeof(s->errmsg), "%s", fencing_strerror(rc));
        return rc;
    }
    if (token == last)
        return 0; /* the same holder writing again: nothing to raise */
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
