/*
 * Records, the audit log and the fencing check in one SQLite database, or
 * in PostgreSQL: a store opened on a postgresql:// URL hands every call,
 * once its arguments are checked here, to store_pg.c.
 *
 * Every write is one BEGIN IMMEDIATE transaction: the write lock is taken
 * before the last token is read, so no other connection can admit a token
 * between our check and our write; fencestore_admit() raises the last
 * token, the record is written, and the audit row is appended, and all three
 * commit together. A stale write commits too, with only its audit row.
 *
 * Every statement is prepared once per connection and reused, and every
 * value reaches SQLite as a bound parameter, never as SQL text.
 */
#include <errno.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <sqlite3.h>

#include <fencestore/fencestore.h>

#include "store.h"
#include "store_pg.h"

#define ERRMSG_MAX 512

enum {
    ST_BEGIN,
    ST_COMMIT,
    ST_ROLLBACK,
    ST_UPSERT,
    ST_LOG_APPEND,
    ST_GET,
    ST_LOG_QUERY,
    ST_SAVEPOINT,
    ST_ROLLBACK_TO,
    ST_RELEASE,
    ST_VERSION,
    ST_DELETE,
    ST_TOMB_SET,
    ST_TOMB_CLEAR,
    ST_NEXT_SEQ,
    ST_FENCE_SET,
    ST_FENCE_CLEAR,
    ST_COUNT,
};

static const char *const stmt_sql[ST_COUNT] = {
    [ST_BEGIN] = "BEGIN IMMEDIATE",
    [ST_COMMIT] = "COMMIT",
    [ST_ROLLBACK] = "ROLLBACK",
    /* A new record continues from its key's last deleted version, if any. */
    [ST_UPSERT] =
        "INSERT INTO sg_records (key, resource, value, token, version, updated_at_ms)"
        " VALUES (?1, ?2, ?3, ?4, 1 + COALESCE((SELECT version FROM sg_deleted WHERE key = ?1), 0), ?5)"
        " ON CONFLICT (key) DO UPDATE SET resource = excluded.resource, value = excluded.value,"
        " token = excluded.token, version = version + 1, updated_at_ms = excluded.updated_at_ms"
        " RETURNING version",
    [ST_LOG_APPEND] =
        "INSERT INTO sg_log (time_ms, op, key, resource, token, last_token, outcome, version, batch, client)"
        " VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10)",
    [ST_GET] = "SELECT key, resource, value, token, version, updated_at_ms FROM sg_records WHERE key = ?1",
    [ST_LOG_QUERY] = "SELECT seq, time_ms, op, key, resource, token, last_token, outcome, version, batch, "
                     "client FROM sg_log"
                     " WHERE seq > ?1 AND (?2 IS NULL OR resource = ?2) AND (?3 IS NULL OR key = ?3)"
                     " ORDER BY seq LIMIT ?4",
    [ST_SAVEPOINT] = "SAVEPOINT sg_ops",
    [ST_ROLLBACK_TO] = "ROLLBACK TO sg_ops",
    [ST_RELEASE] = "RELEASE sg_ops",
    [ST_VERSION] = "SELECT version FROM sg_records WHERE key = ?1",
    [ST_DELETE] = "DELETE FROM sg_records WHERE key = ?1",
    [ST_TOMB_SET] = "INSERT INTO sg_deleted (key, version) VALUES (?1, ?2)"
                    " ON CONFLICT (key) DO UPDATE SET version = excluded.version",
    [ST_TOMB_CLEAR] = "DELETE FROM sg_deleted WHERE key = ?1",
    /* AUTOINCREMENT: the next seq is one above sqlite_sequence's, and no
     * other writer can take it inside our BEGIN IMMEDIATE. */
    [ST_NEXT_SEQ] = "SELECT COALESCE((SELECT seq FROM sqlite_sequence WHERE name = 'sg_log'), 0) + 1",
    /* fencestore only ever raises a fence (max); an operator's reset sets it.
     * fencestore keeps no cache, so the table is the whole truth. */
    [ST_FENCE_SET] = "INSERT INTO fencing_last_token (resource, token) VALUES (?1, ?2)"
                     " ON CONFLICT (resource) DO UPDATE SET token = excluded.token",
    /* Its table holds tokens > 0 only: no row is "no token yet". */
    [ST_FENCE_CLEAR] = "DELETE FROM fencing_last_token WHERE resource = ?1",
};

/* Keys and resources are BLOBs: any bytes, compared bytewise. The log keeps
 * refused writes too, so a replay can see exactly what was turned away. */
static const char schema_sql[] = "CREATE TABLE IF NOT EXISTS sg_records ("
                                 " key BLOB PRIMARY KEY NOT NULL,"
                                 " resource BLOB NOT NULL,"
                                 " value TEXT NOT NULL,"
                                 " token INTEGER NOT NULL,"
                                 " version INTEGER NOT NULL,"
                                 " updated_at_ms INTEGER NOT NULL);"
                                 "CREATE TABLE IF NOT EXISTS sg_log ("
                                 " seq INTEGER PRIMARY KEY AUTOINCREMENT,"
                                 " time_ms INTEGER NOT NULL,"
                                 " op TEXT NOT NULL,"
                                 " key BLOB NOT NULL,"
                                 " resource BLOB NOT NULL,"
                                 " token INTEGER NOT NULL,"
                                 " last_token INTEGER NOT NULL,"
                                 " outcome TEXT NOT NULL,"
                                 " version INTEGER NOT NULL,"
                                 " batch INTEGER NOT NULL DEFAULT 0,"
                                 " client TEXT NOT NULL DEFAULT '');"
                                 /* The last version of each deleted key, so that
                                  * a new record goes on from it: an If-Match taken
                                  * before a delete can never match its successor. */
                                 "CREATE TABLE IF NOT EXISTS sg_deleted ("
                                 " key BLOB PRIMARY KEY NOT NULL,"
                                 " version INTEGER NOT NULL);"
                                 "CREATE INDEX IF NOT EXISTS sg_log_by_resource ON sg_log (resource, seq);"
                                 "CREATE INDEX IF NOT EXISTS sg_log_by_key ON sg_log (key, seq);";

struct sg_store {
    sqlite3 *db; /* NULL after a reopen failed (see recover) */
    fencestore *fence;
    sqlite3_stmt *st[ST_COUNT];
    /* Shared by the connections of one pool; NULL for a lone store. */
    pthread_mutex_t *write_lock;
    int unfenced;
    int busy_ms;
    char *path;                           /* to reopen the connection after a failed rollback */
    char client[SG_STORE_CLIENT_MAX + 1]; /* written in audit rows */
    char errmsg[ERRMSG_MAX];
    struct sg_pg *pg; /* PostgreSQL: the SQLite fields above are unused */
};

void sg_store_fmt(char *buf, size_t cap, const char *f, ...)
{
    if (buf == NULL || cap == 0)
        return;
    va_list ap;
    va_start(ap, f);
    vsnprintf(buf, cap, f, ap);
    va_end(ap);
}

#define fmt sg_store_fmt

/* Translate an SQLite failure once, here, keeping its message. */
static int fail(sg_store *s, const char *what)
{
    int code = sqlite3_errcode(s->db);
    fmt(s->errmsg, sizeof(s->errmsg), "%s: %s", what, sqlite3_errmsg(s->db));
    return (code & 0xff) == SQLITE_BUSY || (code & 0xff) == SQLITE_LOCKED ? SG_STORE_EBUSY : SG_STORE_EFAIL;
}

static void done(sqlite3_stmt *st)
{
    sqlite3_reset(st);
    sqlite3_clear_bindings(st);
}

/* Run a statement that returns no rows. */
static int run(sg_store *s, int which, const char *what)
{
    int rc = sqlite3_step(s->st[which]) == SQLITE_DONE ? 0 : fail(s, what);
    done(s->st[which]);
    return rc;
}

/* Read one integer or text pragma value. */
static int pragma_text(sqlite3 *db, const char *sql, char *out, size_t cap)
{
    sqlite3_stmt *st = NULL;
    int rc = sqlite3_prepare_v2(db, sql, -1, &st, NULL);
    if (rc != SQLITE_OK)
        goto out;
    rc = sqlite3_step(st);
    if (rc != SQLITE_ROW)
        goto out;
    const unsigned char *v = sqlite3_column_text(st, 0);
    snprintf(out, cap, "%s", v ? (const char *)v : "");
    rc = SQLITE_OK;
out:
    sqlite3_finalize(st);
    return rc;
}

/* A database made by an older storage-guard lacks the newer sg_log columns
 * (batch, client): add them. */
static int add_column(sqlite3 *db, const char *name, const char *decl)
{
    char probe[128], alter[192];
    snprintf(probe, sizeof(probe), "SELECT %s FROM sg_log LIMIT 0", name);
    snprintf(alter, sizeof(alter), "ALTER TABLE sg_log ADD COLUMN %s %s", name, decl);
    sqlite3_stmt *st = NULL;
    if (sqlite3_prepare_v2(db, probe, -1, &st, NULL) == SQLITE_OK) {
        sqlite3_finalize(st);
        return SQLITE_OK;
    }
    int rc = sqlite3_exec(db, alter, NULL, NULL, NULL);
    if (rc == SQLITE_OK)
        return rc;
    /* Another process may have added it meanwhile. */
    if (sqlite3_prepare_v2(db, probe, -1, &st, NULL) == SQLITE_OK) {
        sqlite3_finalize(st);
        return SQLITE_OK;
    }
    return rc;
}

/* Close the connection and everything prepared on it; s itself stays. */
static void disconnect(sg_store *s)
{
    for (int i = 0; i < ST_COUNT; i++) {
        sqlite3_finalize(s->st[i]);
        s->st[i] = NULL;
    }
    fencestore_free(s->fence);
    s->fence = NULL;
    /* close_v2: a statement someone else prepared on this connection must
     * not keep it open forever; it closes when that one is finalized. */
    sqlite3_close_v2(s->db);
    s->db = NULL;
}

/* Open s->path on s, set and check the durability pragmas, create the
 * schema and prepare the statements. On failure everything is closed again. */
static int connect_db(sg_store *s, char *errbuf, size_t errcap)
{
    const char *path = s->path;
    int rc = SG_STORE_EFAIL;
    const char *step = "open";
    char val[32];
    if (sqlite3_open_v2(path, &s->db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX,
                        NULL) != SQLITE_OK)
        goto fail;
    sqlite3_extended_result_codes(s->db, 1);
    sqlite3_busy_timeout(s->db, s->busy_ms);

    /* WAL lets readers run while a writer syncs; synchronous=FULL makes every
     * commit fsync the WAL, so an answered write survives power loss
     * (NORMAL would not). Both are checked, not assumed. */
    step = "journal_mode=WAL";
    if (pragma_text(s->db, "PRAGMA journal_mode=WAL", val, sizeof(val)) != SQLITE_OK)
        goto fail;
    if (strcmp(val, "wal") != 0 && !(strcmp(val, "memory") == 0 && strcmp(path, ":memory:") == 0)) {
        fmt(errbuf, errcap, "%s: journal_mode is '%s', not 'wal'", path, val);
        goto out_fail;
    }
    step = "synchronous=FULL";
    if (sqlite3_exec(s->db, "PRAGMA synchronous=FULL", NULL, NULL, NULL) != SQLITE_OK ||
        pragma_text(s->db, "PRAGMA synchronous", val, sizeof(val)) != SQLITE_OK)
        goto fail;
    if (strcmp(val, "2") != 0) {
        fmt(errbuf, errcap, "%s: synchronous is %s, not 2 (FULL)", path, val);
        goto out_fail;
    }
    step = "schema";
    if (sqlite3_exec(s->db, schema_sql, NULL, NULL, NULL) != SQLITE_OK ||
        add_column(s->db, "batch", "INTEGER NOT NULL DEFAULT 0") != SQLITE_OK ||
        add_column(s->db, "client", "TEXT NOT NULL DEFAULT ''") != SQLITE_OK)
        goto fail;
    char ferr[256];
    rc = fencestore_new(s->db, &s->fence, ferr, sizeof(ferr));
    if (rc != 0) {
        fmt(errbuf, errcap, "%s: %s", path, ferr);
        rc = rc == -ENOMEM ? -ENOMEM : SG_STORE_EFAIL;
        goto out_fail;
    }
    step = "prepare";
    for (int i = 0; i < ST_COUNT; i++)
        if (sqlite3_prepare_v3(s->db, stmt_sql[i], -1, SQLITE_PREPARE_PERSISTENT, &s->st[i], NULL) !=
            SQLITE_OK)
            goto fail;
    return 0;
fail:
    rc = s->db != NULL && (sqlite3_errcode(s->db) & 0xff) == SQLITE_BUSY ? SG_STORE_EBUSY : SG_STORE_EFAIL;
    fmt(errbuf, errcap, "%s: %s: %s", path, step, s->db ? sqlite3_errmsg(s->db) : "out of memory");
out_fail:
    disconnect(s);
    return rc;
}

int sg_store_open(const char *path, sg_store **out, char *errbuf, size_t errcap)
{
    if (path == NULL || out == NULL) {
        fmt(errbuf, errcap, "sg_store_open: NULL argument");
        return -EINVAL;
    }
    sg_store *s = calloc(1, sizeof(*s));
    if (s == NULL || (s->path = strdup(path)) == NULL) {
        free(s);
        fmt(errbuf, errcap, "out of memory");
        return -ENOMEM;
    }
    s->busy_ms = SG_STORE_BUSY_TIMEOUT_MS;
    int rc = sg_pg_is_url(path) ? sg_pg_open(path, s->busy_ms, &s->pg, errbuf, errcap)
                                : connect_db(s, errbuf, errcap);
    if (rc != 0) {
        sg_store_close(s);
        return rc;
    }
    *out = s;
    return 0;
}

void sg_store_close(sg_store *s)
{
    if (s == NULL)
        return;
    disconnect(s);
    sg_pg_close(s->pg);
    free(s->path);
    free(s);
}

void sg_store_set_busy_timeout(sg_store *s, int ms)
{
    if (s == NULL)
        return;
    s->busy_ms = ms;
    if (s->pg != NULL)
        sg_pg_set_lock_timeout(s->pg, ms);
    if (s->db != NULL)
        sqlite3_busy_timeout(s->db, ms);
}

void sg_store_set_client(sg_store *s, const char *name)
{
    if (s != NULL)
        snprintf(s->client, sizeof(s->client), "%s", name ? name : "");
}

void *sg_store_handle(sg_store *s)
{
    if (s != NULL && s->pg != NULL)
        return sg_pg_handle(s->pg);
    return s == NULL ? NULL : s->db;
}

/* The result of a call handed to PostgreSQL, with its message kept here. */
static int pg_done(sg_store *s, int rc)
{
    if (rc != 0)
        fmt(s->errmsg, sizeof(s->errmsg), "%s", rc == -ENOMEM ? "out of memory" : sg_pg_errmsg(s->pg));
    return rc;
}

/* A connection whose reopen failed tries again before each use; until it
 * succeeds every call fails with SG_STORE_EFAIL. */
static int usable(sg_store *s)
{
    if (s->db != NULL)
        return 0;
    char err[ERRMSG_MAX - 64];
    if (connect_db(s, err, sizeof(err)) == 0)
        return 0;
    fmt(s->errmsg, sizeof(s->errmsg), "the connection is closed and cannot be reopened: %s", err);
    return SG_STORE_EFAIL;
}

int sg_store_health(sg_store *s, char *journal, size_t cap, int *synchronous)
{
    if (s == NULL || journal == NULL || cap == 0 || synchronous == NULL)
        return -EINVAL;
    if (s->pg != NULL)
        return pg_done(s, sg_pg_health(s->pg, journal, cap, synchronous));
    int rc = usable(s);
    if (rc != 0)
        return rc;
    char sync[16];
    if (pragma_text(s->db, "PRAGMA journal_mode", journal, cap) != SQLITE_OK ||
        pragma_text(s->db, "PRAGMA synchronous", sync, sizeof(sync)) != SQLITE_OK)
        return fail(s, "health check");
    *synchronous = atoi(sync);
    return 0;
}

const char *sg_store_errmsg(const sg_store *s)
{
    return s == NULL ? "no store" : s->errmsg;
}

void sg_record_clear(struct sg_record *r)
{
    if (r == NULL)
        return;
    free(r->key);
    free(r->resource);
    free(r->value);
    memset(r, 0, sizeof(*r));
}

static int valid_name(const char *p, size_t len)
{
    return p != NULL && len >= 1 && len <= FENCING_RESOURCE_MAX;
}

/* Take the in-process write lock, then SQLite's. Serializing our own writers
 * on a mutex first means they queue on a futex instead of polling in
 * SQLite's busy handler, whose back-off sleeps add up to tens of ms; the busy
 * timeout still covers other processes that open the same file. */
static int begin_write(sg_store *s)
{
    if (s->write_lock)
        pthread_mutex_lock(s->write_lock);
    int rc = usable(s);
    if (rc == 0)
        rc = run(s, ST_BEGIN, "begin immediate");
    if (rc != 0 && s->write_lock)
        pthread_mutex_unlock(s->write_lock);
    return rc;
}

/* Step ROLLBACK once; its result code. */
static int rollback_once(sg_store *s)
{
    int rc = sqlite3_step(s->st[ST_ROLLBACK]);
    done(s->st[ST_ROLLBACK]);
    return rc;
}

/*
 * Roll back the open transaction, and make sure the connection leaves it.
 * A connection still inside a transaction holds SQLite's write lock, and
 * every later writer, in this pool or in another process, would wait for
 * it until its busy timeout, forever. ROLLBACK itself can fail: with
 * SQLITE_INTERRUPT while another statement on the connection is still
 * running, with SQLITE_AUTH when an authorizer denies it, with SQLITE_NOMEM.
 * So: try; then reset every statement still running on the connection and
 * try again; then close the connection (closing rolls back) and open a new
 * one on the same file. Returns 0 when the transaction was rolled back by
 * the first two steps, else SG_STORE_EFAIL with the reason appended to
 * s->errmsg (the caller's error stays first).
 */
static int rollback(sg_store *s)
{
    int rc = rollback_once(s);
    if (sqlite3_get_autocommit(s->db))
        return 0;
    char why[160];
    fmt(why, sizeof(why), "%s (%d)", sqlite3_errmsg(s->db), rc);
    for (sqlite3_stmt *st = sqlite3_next_stmt(s->db, NULL); st != NULL; st = sqlite3_next_stmt(s->db, st))
        if (sqlite3_stmt_busy(st) && st != s->st[ST_ROLLBACK])
            sqlite3_reset(st);
    rollback_once(s);
    if (sqlite3_get_autocommit(s->db))
        return 0;
    size_t n = strlen(s->errmsg);
    char err[256] = "";
    disconnect(s);
    int reopened = connect_db(s, err, sizeof(err)) == 0;
    fmt(s->errmsg + n, sizeof(s->errmsg) - n, "%srollback failed: %s; connection closed%s%s",
        n > 0 ? "; " : "", why, reopened ? " and reopened" : ", reopen failed: ", reopened ? "" : err);
    return SG_STORE_EFAIL;
}

/* Commit if rc == 0, else roll back; release the write lock either way. */
static int end_write(sg_store *s, int rc)
{
    if (rc == 0)
        rc = run(s, ST_COMMIT, "commit");
    if (rc != 0 && !sqlite3_get_autocommit(s->db)) {
        int rb = rollback(s);
        if (rb != 0 && rc != SG_STORE_EFAIL && rc != SG_STORE_EBUSY)
            rc = rb;
    }
    if (s->write_lock)
        pthread_mutex_unlock(s->write_lock);
    return rc;
}

/* Admit token for the resource inside the open transaction. Returns 0 with
 * res->outcome set, or a store error. */
static int admit(sg_store *s, const char *resource, size_t resource_len, uint64_t token,
                 struct sg_write_result *res)
{
    uint64_t last = 0;
    if (s->unfenced) {
        /* Accept everything, leave the fence where it is. */
        res->outcome = SG_OUTCOME_ACCEPTED;
        int rc = fencestore_last(s->fence, resource, resource_len, &res->last_token);
        if (rc == 0)
            return 0;
        fmt(s->errmsg, sizeof(s->errmsg), "fencing: %s", fencestore_errmsg(s->fence));
        return SG_STORE_EFAIL;
    }
    int rc = fencestore_admit(s->fence, resource, resource_len, token, &last);
    res->last_token = last;
    if (rc == 0) {
        res->outcome = SG_OUTCOME_ACCEPTED;
        return 0;
    }
    if (rc == FENCING_ESTALE) {
        res->outcome = SG_OUTCOME_STALE;
        return 0;
    }
    fmt(s->errmsg, sizeof(s->errmsg), "fencing: %s", fencestore_errmsg(s->fence));
    return rc == -EINVAL || rc == FENCING_ENOTOKEN ? -EINVAL : SG_STORE_EFAIL;
}

const char *sg_outcome_name(enum sg_outcome o)
{
    switch (o) {
    case SG_OUTCOME_ACCEPTED:
        return "accepted";
    case SG_OUTCOME_STALE:
        return "stale";
    case SG_OUTCOME_MISMATCH:
        return "mismatch";
    case SG_OUTCOME_ABORTED:
        return "aborted";
    case SG_OUTCOME_NOT_FOUND:
        return "not_found";
    }
    return "unknown";
}

struct log_row {
    const char *op;
    const char *key;
    size_t key_len;
    const char *resource;
    size_t resource_len;
    uint64_t token;
    uint64_t last_token;
    enum sg_outcome outcome;
    int64_t version;
    int64_t batch;
};

static int log_append(sg_store *s, int64_t now_ms, const struct log_row *r)
{
    sqlite3_stmt *st = s->st[ST_LOG_APPEND];
    if (sqlite3_bind_int64(st, 1, now_ms) != SQLITE_OK ||
        sqlite3_bind_text(st, 2, r->op, -1, SQLITE_STATIC) != SQLITE_OK ||
        sqlite3_bind_blob(st, 3, r->key, (int)r->key_len, SQLITE_STATIC) != SQLITE_OK ||
        sqlite3_bind_blob(st, 4, r->resource, (int)r->resource_len, SQLITE_STATIC) != SQLITE_OK ||
        sqlite3_bind_int64(st, 5, (sqlite3_int64)r->token) != SQLITE_OK ||
        sqlite3_bind_int64(st, 6, (sqlite3_int64)r->last_token) != SQLITE_OK ||
        sqlite3_bind_text(st, 7, sg_outcome_name(r->outcome), -1, SQLITE_STATIC) != SQLITE_OK ||
        sqlite3_bind_int64(st, 8, r->outcome == SG_OUTCOME_ACCEPTED ? r->version : 0) != SQLITE_OK ||
        sqlite3_bind_int64(st, 9, r->batch) != SQLITE_OK ||
        sqlite3_bind_text(st, 10, s->client, -1, SQLITE_STATIC) != SQLITE_OK) {
        int rc = fail(s, "bind log row");
        done(st);
        return rc;
    }
    return run(s, ST_LOG_APPEND, "append log row");
}

/* Bind key to parameter 1 of statement which (if it has one), step it once,
 * and read an integer column 0 into *out if there is a row (else *out = 0). */
static int key_int(sg_store *s, int which, const char *key, size_t key_len, int64_t *out, const char *what)
{
    sqlite3_stmt *st = s->st[which];
    int rc = 0;
    *out = 0;
    if (sqlite3_bind_parameter_count(st) >= 1 &&
        sqlite3_bind_blob(st, 1, key, (int)key_len, SQLITE_STATIC) != SQLITE_OK) {
        rc = fail(s, what);
        goto out;
    }
    int step = sqlite3_step(st);
    if (step == SQLITE_ROW)
        *out = sqlite3_column_int64(st, 0);
    else if (step != SQLITE_DONE)
        rc = fail(s, what);
out:
    done(st);
    return rc;
}

/* Run a statement whose parameter 1 is a key (and 2 an optional integer). */
static int key_run(sg_store *s, int which, const char *key, size_t key_len, int64_t arg2, const char *what)
{
    sqlite3_stmt *st = s->st[which];
    if (sqlite3_bind_blob(st, 1, key, (int)key_len, SQLITE_STATIC) != SQLITE_OK ||
        (sqlite3_bind_parameter_count(st) >= 2 && sqlite3_bind_int64(st, 2, arg2) != SQLITE_OK)) {
        int rc = fail(s, what);
        done(st);
        return rc;
    }
    return run(s, which, what);
}

static int write_record(sg_store *s, const struct sg_store_op *op, uint64_t token, int64_t now_ms,
                        int64_t *version)
{
    sqlite3_stmt *st = s->st[ST_UPSERT];
    int rc = 0;
    if (sqlite3_bind_blob(st, 1, op->key, (int)op->key_len, SQLITE_STATIC) != SQLITE_OK ||
        sqlite3_bind_blob(st, 2, op->resource, (int)op->resource_len, SQLITE_STATIC) != SQLITE_OK ||
        sqlite3_bind_text(st, 3, op->value, (int)op->value_len, SQLITE_STATIC) != SQLITE_OK ||
        sqlite3_bind_int64(st, 4, (sqlite3_int64)token) != SQLITE_OK ||
        sqlite3_bind_int64(st, 5, now_ms) != SQLITE_OK) {
        rc = fail(s, "bind record");
        goto out;
    }
    if (sqlite3_step(st) != SQLITE_ROW) {
        rc = fail(s, "write record");
        goto out;
    }
    *version = sqlite3_column_int64(st, 0);
    /* RETURNING made its change on the first step; finish it. */
    rc = sqlite3_step(st) == SQLITE_DONE ? 0 : fail(s, "write record");
out:
    done(st);
    return rc;
}

static int expect_holds(int64_t expect, int64_t found)
{
    if (expect == SG_EXPECT_NONE)
        return 1;
    if (expect == SG_EXPECT_EXISTS)
        return found > 0;
    return expect == found;
}

static int same_name(const char *a, size_t a_len, const char *b, size_t b_len)
{
    return a_len == b_len && memcmp(a, b, a_len) == 0;
}

/* The body of sg_store_apply, inside its transaction and savepoint. Returns
 * 0 with res->outcome set, or a store error. */
static int apply_ops(sg_store *s, uint64_t token, struct sg_store_op *ops, size_t n, int64_t now_ms,
                     struct sg_apply_result *res)
{
    /* Admit the token for every resource first: a batch is either all under
     * a current token or not at all. */
    for (size_t i = 0; i < n; i++) {
        size_t j = 0;
        while (j < i &&
               !same_name(ops[j].resource, ops[j].resource_len, ops[i].resource, ops[i].resource_len))
            j++;
        if (j < i) {
            ops[i].last_token = ops[j].last_token;
            continue;
        }
        struct sg_write_result wr;
        int rc = admit(s, ops[i].resource, ops[i].resource_len, token, &wr);
        if (rc != 0)
            return rc;
        ops[i].last_token = wr.last_token;
        if (wr.outcome == SG_OUTCOME_STALE) {
            res->outcome = SG_OUTCOME_STALE;
            res->failed = i;
            res->last_token = wr.last_token;
            return 0;
        }
    }
    for (size_t i = 0; i < n; i++) {
        struct sg_store_op *op = &ops[i];
        int rc = key_int(s, ST_VERSION, op->key, op->key_len, &op->found_version, "read version");
        if (rc != 0)
            return rc;
        if (!expect_holds(op->expect, op->found_version)) {
            res->outcome = SG_OUTCOME_MISMATCH;
            res->failed = i;
            return 0;
        }
        op->outcome = SG_OUTCOME_ACCEPTED;
        op->version = op->found_version;
        switch (op->kind) {
        case SG_OP_PUT:
            rc = write_record(s, op, token, now_ms, &op->version);
            if (rc == 0 && op->found_version == 0)
                rc = key_run(s, ST_TOMB_CLEAR, op->key, op->key_len, 0, "clear tombstone");
            break;
        case SG_OP_DELETE:
            if (op->found_version == 0) {
                op->outcome = SG_OUTCOME_NOT_FOUND;
                break;
            }
            rc = key_run(s, ST_DELETE, op->key, op->key_len, 0, "delete record");
            if (rc == 0)
                rc = key_run(s, ST_TOMB_SET, op->key, op->key_len, op->found_version, "write tombstone");
            break;
        case SG_OP_CHECK:
            break;
        }
        if (rc != 0)
            return rc;
    }
    res->outcome = SG_OUTCOME_ACCEPTED;
    return 0;
}

static const char *const op_log_name[] = {
    [SG_OP_PUT] = "write", [SG_OP_DELETE] = "delete", [SG_OP_CHECK] = "check"};

static int valid_op(const sg_store *s, const struct sg_store_op *op)
{
    if (op->kind != SG_OP_PUT && op->kind != SG_OP_DELETE && op->kind != SG_OP_CHECK)
        return 0;
    if (!valid_name(op->key, op->key_len) || !valid_name(op->resource, op->resource_len))
        return 0;
    if (op->kind == SG_OP_PUT && (op->value == NULL || op->value_len > INT32_MAX))
        return 0;
    if (op->expect < SG_EXPECT_EXISTS || (op->kind == SG_OP_CHECK && op->expect == SG_EXPECT_NONE))
        return 0;
    (void)s;
    return 1;
}

int sg_store_apply(sg_store *s, uint64_t token, struct sg_store_op *ops, size_t n, int as_batch,
                   int64_t now_ms, struct sg_apply_result *res)
{
    if (s == NULL || ops == NULL || res == NULL || n == 0 || n > SG_STORE_OPS_MAX ||
        (token == 0 && !s->unfenced) || token >= FENCING_TOKEN_MAX)
        return -EINVAL;
    for (size_t i = 0; i < n; i++)
        if (!valid_op(s, &ops[i]))
            return -EINVAL;
    s->errmsg[0] = '\0';
    memset(res, 0, sizeof(*res));
    for (size_t i = 0; i < n; i++) {
        ops[i].outcome = SG_OUTCOME_ABORTED;
        ops[i].last_token = 0;
        ops[i].found_version = 0;
        ops[i].version = 0;
    }
    if (s->pg != NULL)
        return pg_done(s, sg_pg_apply(s->pg, s->client, s->unfenced, token, ops, n, as_batch, now_ms, res));
    int rc = begin_write(s);
    if (rc != 0)
        return rc;
    /* A savepoint inside the transaction: a stale token or a failed
     * precondition undoes the ops and the raised fences, and the audit rows
     * written after it still commit. */
    rc = run(s, ST_SAVEPOINT, "savepoint");
    if (rc != 0)
        goto out;
    rc = apply_ops(s, token, ops, n, now_ms, res);
    if (rc != 0)
        goto out;
    if (res->outcome != SG_OUTCOME_ACCEPTED) {
        rc = run(s, ST_ROLLBACK_TO, "rollback to savepoint");
        if (rc != 0)
            goto out;
        for (size_t i = 0; i < n; i++) {
            ops[i].outcome = res->outcome == SG_OUTCOME_STALE ? SG_OUTCOME_STALE : SG_OUTCOME_ABORTED;
            ops[i].version = 0;
        }
        ops[res->failed].outcome = res->outcome;
    }
    rc = run(s, ST_RELEASE, "release savepoint");
    if (rc != 0)
        goto out;
    if (as_batch) {
        rc = key_int(s, ST_NEXT_SEQ, "", 0, &res->batch, "next log seq");
        if (rc != 0)
            goto out;
    }
    for (size_t i = 0; i < n && rc == 0; i++) {
        struct log_row row = {
            .op = op_log_name[ops[i].kind],
            .key = ops[i].key,
            .key_len = ops[i].key_len,
            .resource = ops[i].resource,
            .resource_len = ops[i].resource_len,
            .token = token,
            .last_token = ops[i].last_token,
            .outcome = ops[i].outcome,
            .version = ops[i].version,
            .batch = res->batch,
        };
        rc = log_append(s, now_ms, &row);
    }
out:
    return end_write(s, rc);
}

int sg_store_put(sg_store *s, const char *key, size_t key_len, const char *resource, size_t resource_len,
                 uint64_t token, const char *value, size_t value_len, int64_t now_ms,
                 struct sg_write_result *res)
{
    if (res == NULL)
        return -EINVAL;
    struct sg_store_op op = {
        .kind = SG_OP_PUT,
        .key = key,
        .key_len = key_len,
        .resource = resource,
        .resource_len = resource_len,
        .value = value,
        .value_len = value_len,
        .expect = SG_EXPECT_NONE,
    };
    struct sg_apply_result ar;
    memset(res, 0, sizeof(*res));
    int rc = sg_store_apply(s, token, &op, 1, 0, now_ms, &ar);
    if (rc != 0)
        return rc;
    res->outcome = ar.outcome;
    res->last_token = op.last_token;
    res->version = op.version;
    return 0;
}

char *sg_store_dup(const void *p, size_t n)
{
    char *d = malloc(n + 1);
    if (d == NULL)
        return NULL;
    if (n > 0)
        memcpy(d, p, n);
    d[n] = '\0';
    return d;
}

/* Read the record of key into *rec; *found = 0 when there is none. */
static int read_record(sg_store *s, const char *key, size_t key_len, int *found, struct sg_record *rec)
{
    sqlite3_stmt *st = s->st[ST_GET];
    int rc = 0;
    *found = 0;
    if (sqlite3_bind_blob(st, 1, key, (int)key_len, SQLITE_STATIC) != SQLITE_OK) {
        rc = fail(s, "bind key");
        goto out;
    }
    int step = sqlite3_step(st);
    if (step == SQLITE_DONE)
        goto out;
    if (step != SQLITE_ROW) {
        rc = fail(s, "read record");
        goto out;
    }
    memset(rec, 0, sizeof(*rec));
    rec->key_len = (size_t)sqlite3_column_bytes(st, 0);
    rec->key = sg_store_dup(sqlite3_column_blob(st, 0), rec->key_len);
    rec->resource_len = (size_t)sqlite3_column_bytes(st, 1);
    rec->resource = sg_store_dup(sqlite3_column_blob(st, 1), rec->resource_len);
    const unsigned char *v = sqlite3_column_text(st, 2);
    rec->value_len = (size_t)sqlite3_column_bytes(st, 2);
    rec->value = sg_store_dup(v, v ? rec->value_len : 0);
    rec->token = (uint64_t)sqlite3_column_int64(st, 3);
    rec->version = sqlite3_column_int64(st, 4);
    rec->updated_at_ms = sqlite3_column_int64(st, 5);
    if (rec->key == NULL || rec->resource == NULL || rec->value == NULL) {
        sg_record_clear(rec);
        rc = -ENOMEM;
        goto out;
    }
    *found = 1;
out:
    done(st);
    return rc;
}

/* A read with a token, in one write transaction: a fenced read (raise)
 * admits the token as a write would and is logged; a reader's read only
 * compares it with the fence and writes nothing. */
static int get_with_token(sg_store *s, const char *key, size_t key_len, const char *resource,
                          size_t resource_len, uint64_t token, int raise, int64_t now_ms,
                          struct sg_write_result *res, int *found, struct sg_record *rec)
{
    memset(res, 0, sizeof(*res));
    int rc = begin_write(s);
    if (rc != 0)
        return rc;
    if (raise) {
        rc = admit(s, resource, resource_len, token, res);
        if (rc != 0)
            goto out;
        struct log_row row = {
            .op = "read",
            .key = key,
            .key_len = key_len,
            .resource = resource,
            .resource_len = resource_len,
            .token = token,
            .last_token = res->last_token,
            .outcome = res->outcome,
        };
        rc = log_append(s, now_ms, &row);
    } else if ((rc = fencestore_last(s->fence, resource, resource_len, &res->last_token)) != 0) {
        fmt(s->errmsg, sizeof(s->errmsg), "fencing: %s", fencestore_errmsg(s->fence));
        rc = SG_STORE_EFAIL;
    } else {
        res->outcome = s->unfenced || res->last_token <= token ? SG_OUTCOME_ACCEPTED : SG_OUTCOME_STALE;
    }
    if (rc == 0 && res->outcome == SG_OUTCOME_ACCEPTED)
        rc = read_record(s, key, key_len, found, rec);
out:
    rc = end_write(s, rc);
    if (rc != 0 && *found) {
        sg_record_clear(rec);
        *found = 0;
    }
    return rc;
}

int sg_store_get(sg_store *s, const char *key, size_t key_len, const char *resource, size_t resource_len,
                 uint64_t token, int64_t now_ms, struct sg_write_result *res, int *found,
                 struct sg_record *rec)
{
    if (s == NULL || found == NULL || rec == NULL || !valid_name(key, key_len) || token >= FENCING_TOKEN_MAX)
        return -EINVAL;
    if (token != 0 && (res == NULL || !valid_name(resource, resource_len)))
        return -EINVAL;
    s->errmsg[0] = '\0';
    *found = 0;
    if (res)
        memset(res, 0, sizeof(*res));
    if (s->pg != NULL)
        return pg_done(s, sg_pg_get(s->pg, s->client, s->unfenced, key, key_len, resource, resource_len,
                                    token, now_ms, res, found, rec));
    int rc = usable(s);
    if (rc != 0)
        return rc;
    if (token != 0)
        return get_with_token(s, key, key_len, resource, resource_len, token, 1, now_ms, res, found, rec);
    /* A plain read needs no transaction: one statement is a consistent
     * snapshot under WAL. */
    return read_record(s, key, key_len, found, rec);
}

int sg_store_get_checked(sg_store *s, const char *key, size_t key_len, const char *resource,
                         size_t resource_len, uint64_t token, struct sg_write_result *res, int *found,
                         struct sg_record *rec)
{
    if (s == NULL || res == NULL || found == NULL || rec == NULL || !valid_name(key, key_len) ||
        !valid_name(resource, resource_len) || token == 0 || token >= FENCING_TOKEN_MAX)
        return -EINVAL;
    s->errmsg[0] = '\0';
    *found = 0;
    if (s->pg != NULL) {
        memset(res, 0, sizeof(*res));
        return pg_done(s, sg_pg_get_checked(s->pg, s->unfenced, key, key_len, resource, resource_len, token,
                                            res, found, rec));
    }
    return get_with_token(s, key, key_len, resource, resource_len, token, 0, 0, res, found, rec);
}

int sg_store_reset_fence(sg_store *s, const char *resource, size_t resource_len, uint64_t token,
                         int64_t now_ms, uint64_t *old)
{
    if (s == NULL || old == NULL || !valid_name(resource, resource_len) || token >= FENCING_TOKEN_MAX)
        return -EINVAL;
    s->errmsg[0] = '\0';
    *old = 0;
    if (s->pg != NULL)
        return pg_done(s, sg_pg_reset_fence(s->pg, s->client, resource, resource_len, token, now_ms, old));
    int rc = begin_write(s);
    if (rc != 0)
        return rc;
    rc = fencestore_last(s->fence, resource, resource_len, old);
    if (rc != 0) {
        fmt(s->errmsg, sizeof(s->errmsg), "fencing: %s", fencestore_errmsg(s->fence));
        rc = SG_STORE_EFAIL;
        goto out;
    }
    int which = token == 0 ? ST_FENCE_CLEAR : ST_FENCE_SET;
    sqlite3_stmt *st = s->st[which];
    if (sqlite3_bind_blob(st, 1, resource, (int)resource_len, SQLITE_STATIC) != SQLITE_OK ||
        (token != 0 && sqlite3_bind_int64(st, 2, (sqlite3_int64)token) != SQLITE_OK)) {
        rc = fail(s, "bind fence");
        done(st);
        goto out;
    }
    rc = run(s, which, "reset fence");
    if (rc != 0)
        goto out;
    struct log_row row = {
        .op = "reset",
        .key = resource,
        .key_len = resource_len,
        .resource = resource,
        .resource_len = resource_len,
        .token = token,
        .last_token = *old,
        .outcome = SG_OUTCOME_ACCEPTED,
    };
    rc = log_append(s, now_ms, &row);
out:
    return end_write(s, rc);
}

int sg_store_fence(sg_store *s, const char *resource, size_t resource_len, uint64_t *out)
{
    if (s == NULL || out == NULL || !valid_name(resource, resource_len))
        return -EINVAL;
    s->errmsg[0] = '\0';
    if (s->pg != NULL)
        return pg_done(s, sg_pg_fence(s->pg, resource, resource_len, out));
    int rc = usable(s);
    if (rc != 0)
        return rc;
    rc = fencestore_last(s->fence, resource, resource_len, out);
    if (rc == 0)
        return 0;
    fmt(s->errmsg, sizeof(s->errmsg), "fencing: %s", fencestore_errmsg(s->fence));
    return rc == -EINVAL ? -EINVAL : SG_STORE_EFAIL;
}

int sg_store_log(sg_store *s, const struct sg_log_filter *f,
                 int (*fn)(void *arg, const struct sg_log_entry *e), void *arg)
{
    if (s == NULL || f == NULL || fn == NULL || f->limit <= 0)
        return -EINVAL;
    s->errmsg[0] = '\0';
    if (s->pg != NULL)
        return pg_done(s, sg_pg_log(s->pg, f, fn, arg));
    int rc = usable(s);
    if (rc != 0)
        return rc;
    sqlite3_stmt *st = s->st[ST_LOG_QUERY];
    if (sqlite3_bind_int64(st, 1, f->after) != SQLITE_OK ||
        (f->resource &&
         sqlite3_bind_blob(st, 2, f->resource, (int)f->resource_len, SQLITE_STATIC) != SQLITE_OK) ||
        (f->key && sqlite3_bind_blob(st, 3, f->key, (int)f->key_len, SQLITE_STATIC) != SQLITE_OK) ||
        sqlite3_bind_int(st, 4, f->limit) != SQLITE_OK) {
        rc = fail(s, "bind log filter");
        goto out;
    }
    int step;
    while ((step = sqlite3_step(st)) == SQLITE_ROW) {
        struct sg_log_entry e = {
            .seq = sqlite3_column_int64(st, 0),
            .time_ms = sqlite3_column_int64(st, 1),
            .op = (const char *)sqlite3_column_text(st, 2),
            .key = sqlite3_column_blob(st, 3),
            .key_len = (size_t)sqlite3_column_bytes(st, 3),
            .resource = sqlite3_column_blob(st, 4),
            .resource_len = (size_t)sqlite3_column_bytes(st, 4),
            .token = (uint64_t)sqlite3_column_int64(st, 5),
            .last_token = (uint64_t)sqlite3_column_int64(st, 6),
            .outcome = (const char *)sqlite3_column_text(st, 7),
            .version = sqlite3_column_int64(st, 8),
            .batch = sqlite3_column_int64(st, 9),
            .client = (const char *)sqlite3_column_text(st, 10),
        };
        if (e.op == NULL || e.outcome == NULL || e.key == NULL || e.resource == NULL || e.client == NULL) {
            rc = fail(s, "read log row");
            goto out;
        }
        rc = fn(arg, &e);
        if (rc != 0)
            goto out;
    }
    if (step != SQLITE_DONE)
        rc = fail(s, "read log");
out:
    done(st);
    return rc;
}

/* ---- pool ---- */

/*
 * One connection per concurrent request rather than one connection behind a
 * mutex: under WAL, plain reads, fence and log queries run in parallel with
 * a writer that is waiting for its fsync, and each fencestore stays with
 * one thread at a time as fencing.h requires. Writers still go one at a time,
 * through the pool's write lock (see begin_write).
 */
struct sg_store_pool {
    pthread_mutex_t lock;
    pthread_cond_t freed;
    pthread_mutex_t write_lock;
    int n;
    int n_free;
    sg_store **all;
    sg_store **free_list;
};

void sg_store_set_unfenced(sg_store *s, int on)
{
    if (s)
        s->unfenced = on != 0;
}

void sg_store_pool_set_unfenced(sg_store_pool *p, int on)
{
    for (int i = 0; p && i < p->n; i++)
        sg_store_set_unfenced(p->all[i], on);
}

int sg_store_pool_open(const char *path, int n, sg_store_pool **out, char *errbuf, size_t errcap)
{
    if (path == NULL || out == NULL || n < 1) {
        fmt(errbuf, errcap, "sg_store_pool_open: bad argument");
        return -EINVAL;
    }
    sg_store_pool *p = calloc(1, sizeof(*p));
    if (p == NULL)
        return -ENOMEM;
    pthread_mutex_init(&p->lock, NULL);
    pthread_cond_init(&p->freed, NULL);
    pthread_mutex_init(&p->write_lock, NULL);
    p->all = calloc((size_t)n, sizeof(*p->all));
    p->free_list = calloc((size_t)n, sizeof(*p->free_list));
    int rc = -ENOMEM;
    if (p->all == NULL || p->free_list == NULL)
        goto fail;
    for (int i = 0; i < n; i++) {
        rc = sg_store_open(path, &p->all[i], errbuf, errcap);
        if (rc != 0)
            goto fail;
        /* SQLite has one writer at a time; PostgreSQL locks per resource. */
        if (p->all[i]->pg == NULL)
            p->all[i]->write_lock = &p->write_lock;
        p->free_list[i] = p->all[i];
        p->n++;
    }
    p->n_free = n;
    *out = p;
    return 0;
fail:
    sg_store_pool_close(p);
    return rc;
}

void sg_store_pool_close(sg_store_pool *p)
{
    if (p == NULL)
        return;
    for (int i = 0; i < p->n; i++)
        sg_store_close(p->all[i]);
    free(p->all);
    free(p->free_list);
    pthread_mutex_destroy(&p->lock);
    pthread_cond_destroy(&p->freed);
    pthread_mutex_destroy(&p->write_lock);
    free(p);
}

sg_store *sg_store_pool_get(sg_store_pool *p)
{
    pthread_mutex_lock(&p->lock);
    while (p->n_free == 0)
        pthread_cond_wait(&p->freed, &p->lock);
    sg_store *s = p->free_list[--p->n_free];
    pthread_mutex_unlock(&p->lock);
    return s;
}

void sg_store_pool_put(sg_store_pool *p, sg_store *s)
{
    if (s == NULL)
        return;
    pthread_mutex_lock(&p->lock);
    p->free_list[p->n_free++] = s;
    pthread_cond_signal(&p->freed);
    pthread_mutex_unlock(&p->lock);
}
