/*
 * storage-guard's store on PostgreSQL, through libpq. Every call is one
 * statement: a function of schema.sql (sg_apply, sg_read, sg_reset) or a
 * plain query, in its own implicit transaction, so that the admission, the
 * records and the audit rows commit together and a storage-guard process
 * never holds a lock between two round trips. Several storage-guard
 * processes may share one database: the fence row locks of fencelock.sql
 * serialize the writers of a resource across all of them.
 *
 * A call answers success only when libpq saw the whole exchange end
 * (ReadyForQuery after the commit), with synchronous_commit on: an answered
 * write is on the server's disk. A connection lost during a call is
 * reported as a failure whose outcome is unknown (it may have committed);
 * the next call reconnects.
 *
 * Every value is a bound parameter: keys and resources as binary bytea,
 * the ops of a batch as array literals built here, with every element
 * quoted or hex-encoded. Results come back in binary format.
 */
#include <endian.h>
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <libpq-fe.h>

#include "fencelock_sql.h"
#include <fencehttp/fencehttp.h>
#include "schema_sql.h"
#include "store_pg.h"

/* schema.sql's sg_schema_version(): a database with another number gets
 * the scripts again. */
#define SCHEMA_VERSION 2
#define ERRMSG_MAX 512
/* Serialization failures and deadlocks (with other clients of the fence
 * table) roll the call back entirely: it is retried this many times. */
#define RETRIES 3

/* The statements of the calls. The frequent ones are prepared once per
 * connection (and again after a reconnect): planning a call of a function
 * with ten parameters costs the server about as much as running it. The
 * log query is planned with its values, so that a filter left out folds
 * away and the index of the one given is used. */
enum { Q_APPLY, Q_READ, Q_GET, Q_CHECKED, Q_RESET, Q_FENCE, Q_LOG, Q_HEALTH, Q_COUNT };

static const struct {
    const char *name; /* prepared as; NULL: not prepared */
    const char *sql;
} queries[Q_COUNT] = {
    [Q_APPLY] = {"sg_apply",
                 "SELECT o_outcome, o_last, o_found, o_version, o_result, o_failed, o_failed_last, o_batch"
                 " FROM storage_guard.sg_apply($1::bigint, $2::boolean, $3::boolean, $4::bigint, $5::bytea, "
                 "$6::int[],"
                 " $7::bytea[], $8::bytea[], $9::text[], $10::bigint[])"},
    [Q_READ] =
        {"sg_read",
         "SELECT o_outcome, o_last, o_found, o_resource, o_value, o_token, o_version, o_updated_at_ms"
         " FROM storage_guard.sg_read($1::bigint, $2::boolean, $3::bigint, $4::bytea, $5::bytea, $6::bytea)"},
    [Q_GET] = {"sg_get", "SELECT resource, value, token, version, updated_at_ms FROM "
                         "storage_guard.sg_records WHERE key = $1::bytea"},
    [Q_CHECKED] = {"sg_checked",
                   "SELECT fencelock.last($2::bytea),"
                   " r.key IS NOT NULL, r.resource, r.value, r.token, r.version, r.updated_at_ms"
                   " FROM (SELECT 1) AS one LEFT JOIN storage_guard.sg_records r ON r.key = $1::bytea"},
    [Q_RESET] = {"sg_reset", "SELECT storage_guard.sg_reset($1::bytea, $2::bigint, $3::bigint, $4::bytea)"},
    [Q_FENCE] = {"sg_fence", "SELECT fencelock.last($1::bytea)"},
    [Q_LOG] =
        {NULL,
         "SELECT seq, time_ms, op, key, resource, token, last_token, outcome, version, batch, client"
         " FROM storage_guard.sg_log WHERE seq > $1::bigint AND ($2::bytea IS NULL OR resource = $2::bytea)"
         " AND ($3::bytea IS NULL OR key = $3::bytea) ORDER BY seq LIMIT $4::int"},
    [Q_HEALTH] =
        {NULL, "SELECT current_setting('fsync') = 'on' AND current_setting('synchronous_commit') <> 'off'"},
};

struct sg_pg {
    PGconn *conn;
    int lock_timeout_ms;
    unsigned prepared; /* a bit per query prepared on this connection */
    char errmsg[ERRMSG_MAX];
};

#define fmt sg_store_fmt

int sg_pg_is_url(const char *db)
{
    return db != NULL && (strncmp(db, "postgresql://", 13) == 0 || strncmp(db, "postgres://", 11) == 0);
}

/* The first line of libpq's message for r (or for the connection). */
static void first_line(PGconn *c, const PGresult *r, char *buf, size_t cap)
{
    const char *m = r ? PQresultErrorMessage(r) : NULL;
    if (m == NULL || m[0] == '\0')
        m = PQerrorMessage(c);
    fmt(buf, cap, "%.*s", (int)strcspn(m, "\n"), m);
}

static int is_state(const char *state, const char *a)
{
    return state != NULL && strcmp(state, a) == 0;
}

/* Retried inside the call: the transaction was rolled back whole. */
static int retryable(const PGresult *r)
{
    const char *state = r ? PQresultErrorField(r, PG_DIAG_SQLSTATE) : NULL;
    return is_state(state, "40001") || is_state(state, "40P01");
}

/* Translate a failed call once, here. A lock wait past the lock timeout
 * (the counterpart of SQLite's busy timeout), a cancel or too many
 * connections: nothing was written, retry (SG_STORE_EBUSY). A connection
 * lost during the call: the outcome is unknown. */
static int fail(struct sg_pg *p, const PGresult *r, const char *what, int writes)
{
    char msg[300];
    first_line(p->conn, r, msg, sizeof(msg));
    const char *state = r ? PQresultErrorField(r, PG_DIAG_SQLSTATE) : NULL;
    if (PQstatus(p->conn) != CONNECTION_OK) {
        fmt(p->errmsg, sizeof(p->errmsg), "%s: the connection to PostgreSQL was lost%s: %s", what,
            writes ? " during the call, which may or may not have been applied" : "", msg);
        return SG_STORE_EFAIL;
    }
    if (is_state(state, "42501")) {
        fmt(p->errmsg, sizeof(p->errmsg),
            "%s: storage-guard's PostgreSQL role may not: %s (a fence reset needs the role to be a member of "
            "fencelock_repairer, calls of fencelock_writer: docs/storage-guard.md, \"On PostgreSQL\")",
            what, msg);
        return SG_STORE_EPERM;
    }
    if (is_state(state, "55P03") || retryable(r) || is_state(state, "57014") || is_state(state, "53300")) {
        fmt(p->errmsg, sizeof(p->errmsg), "%s: nothing was written: %s", what, msg);
        return SG_STORE_EBUSY;
    }
    fmt(p->errmsg, sizeof(p->errmsg), "%s: %s", what, msg);
    return SG_STORE_EFAIL;
}

static int exec_cmd(PGconn *c, const char *sql, char *errbuf, size_t errcap, const char *what)
{
    PGresult *r = PQexec(c, sql);
    ExecStatusType st = PQresultStatus(r);
    int rc = 0;
    if (st != PGRES_COMMAND_OK && st != PGRES_TUPLES_OK) {
        char msg[300];
        first_line(c, r, msg, sizeof(msg));
        fmt(errbuf, errcap, "%s: %s", what, msg);
        rc = SG_STORE_EFAIL;
    }
    PQclear(r);
    return rc;
}

/* The session every call relies on: an answered commit is on disk
 * (whatever the role's or database's default), every statement after a
 * lock sees what the lock's previous holder committed, and a lock is not
 * waited for forever. */
static int setup_session(struct sg_pg *p, char *errbuf, size_t errcap)
{
    char sql[256];
    snprintf(sql, sizeof(sql),
             "SET search_path = pg_catalog, pg_temp; SET synchronous_commit = on;"
             " SET default_transaction_isolation = 'read committed';"
             " SET lock_timeout = %d; SET client_min_messages = warning",
             p->lock_timeout_ms);
    return exec_cmd(p->conn, sql, errbuf, errcap, "session settings");
}

/* The one text value of a query into buf; 0 or SG_STORE_EFAIL. */
static int query_text(PGconn *c, const char *sql, char *buf, size_t cap, char *errbuf, size_t errcap)
{
    PGresult *r = PQexec(c, sql);
    int rc = 0;
    if (PQresultStatus(r) == PGRES_TUPLES_OK && PQntuples(r) == 1 && !PQgetisnull(r, 0, 0)) {
        fmt(buf, cap, "%s", PQgetvalue(r, 0, 0));
    } else {
        char msg[300];
        first_line(c, r, msg, sizeof(msg));
        fmt(errbuf, errcap, "%s: %s", sql, msg);
        rc = SG_STORE_EFAIL;
    }
    PQclear(r);
    return rc;
}

static int installed_version(PGconn *c, int *v, char *errbuf, size_t errcap)
{
    char val[32];
    int rc = query_text(c, "SELECT to_regprocedure('storage_guard.sg_schema_version()') IS NOT NULL", val,
                        sizeof(val), errbuf, errcap);
    *v = 0;
    if (rc == 0 && strcmp(val, "t") == 0 &&
        (rc = query_text(c, "SELECT storage_guard.sg_schema_version()", val, sizeof(val), errbuf, errcap)) ==
            0)
        *v = atoi(val);
    return rc;
}

/* fencelock.sql and schema.sql, in one transaction, when the database has
 * not got this version. The advisory lock makes storage-guard processes
 * that start together take turns (DDL is not safe against itself), and the
 * version is read again under it. */
static int install(PGconn *c, char *errbuf, size_t errcap)
{
    int v = 0;
    int rc = installed_version(c, &v, errbuf, errcap);
    if (rc != 0 || v == SCHEMA_VERSION)
        return rc;
    rc = exec_cmd(c,
                  "BEGIN ISOLATION LEVEL READ COMMITTED; SET LOCAL client_min_messages = warning;"
                  " SELECT pg_catalog.pg_advisory_xact_lock(pg_catalog.hashtext('fencelock.sql'))",
                  errbuf, errcap, "install: lock");
    if (rc == 0)
        rc = installed_version(c, &v, errbuf, errcap);
    if (rc == 0 && v != SCHEMA_VERSION) {
        rc = exec_cmd(c, sg__fencelock_sql, errbuf, errcap, "install fencelock.sql");
        if (rc == 0)
            rc = exec_cmd(c, sg__schema_sql, errbuf, errcap, "install schema.sql");
        if (rc != 0) {
            size_t n = strlen(errbuf);
            fmt(errbuf + n, errcap - n,
                " (storage-guard's tables are missing or older, and this role may not install them: run "
                "storage-guard --install --db URL as an installer once, then storage-guard as a member of "
                "storage_guard_runner: docs/storage-guard.md, \"On PostgreSQL\")");
        }
    }
    if (rc == 0)
        rc = exec_cmd(c, "COMMIT", errbuf, errcap, "install: commit");
    if (rc != 0)
        PQclear(PQexec(c, "ROLLBACK"));
    return rc;
}

/* The server's warnings go to storage-guard's log, not to stderr bare. */
static void notice(void *arg, const char *message)
{
    (void)arg;
    fencehttp_log(FENCEHTTP_LOG_WARN, "PostgreSQL: %.*s", (int)strcspn(message, "\n"), message);
}

static PGconn *connect_url(const char *url)
{
    /* Defaults the URL may override: a bounded connect, and a name in
     * pg_stat_activity. */
    const char *const keys[] = {"connect_timeout", "fallback_application_name", "dbname", NULL};
    const char *const vals[] = {"5", "storage-guard", url, NULL};
    PGconn *c = PQconnectdbParams(keys, vals, 1);
    if (c != NULL)
        PQsetNoticeProcessor(c, notice, NULL);
    return c;
}

int sg_pg_open(const char *url, int lock_timeout_ms, struct sg_pg **out, char *errbuf, size_t errcap)
{
    struct sg_pg *p = calloc(1, sizeof(*p));
    if (p == NULL || (p->conn = connect_url(url)) == NULL) {
        sg_pg_close(p);
        fmt(errbuf, errcap, "out of memory");
        return -ENOMEM;
    }
    p->lock_timeout_ms = lock_timeout_ms;
    int rc = SG_STORE_EBUSY;
    char fsync[16] = "";
    if (PQstatus(p->conn) != CONNECTION_OK) {
        /* libpq names host and port, never the password. */
        char msg[300];
        first_line(p->conn, NULL, msg, sizeof(msg));
        fmt(errbuf, errcap, "PostgreSQL: %s", msg);
        goto fail;
    }
    rc = SG_STORE_EFAIL;
    if (PQserverVersion(p->conn) < 130000) {
        fmt(errbuf, errcap, "PostgreSQL %d is too old: storage-guard needs 13 or later",
            PQserverVersion(p->conn) / 10000);
        goto fail;
    }
    if (setup_session(p, errbuf, errcap) != 0 ||
        query_text(p->conn, "SELECT current_setting('fsync')", fsync, sizeof(fsync), errbuf, errcap) != 0)
        goto fail;
    /* With fsync off a committed write does not survive a crash of the
     * server: refuse, as on SQLite without synchronous=FULL. */
    if (strcmp(fsync, "on") != 0) {
        fmt(errbuf, errcap, "PostgreSQL runs with fsync=%s: an answered write would not survive a crash",
            fsync);
        goto fail;
    }
    /* A standby, or a database or role set read-only: every write would
     * fail. Say so at start-up rather than answer 500 to each. */
    char ro[16] = "";
    if (query_text(p->conn, "SELECT current_setting('transaction_read_only')", ro, sizeof(ro), errbuf,
                   errcap) != 0)
        goto fail;
    if (strcmp(ro, "off") != 0) {
        fmt(errbuf, errcap,
            "the database is read-only for this session (a standby, or default_transaction_read_only on): "
            "storage-guard needs to write");
        goto fail;
    }
    if ((rc = install(p->conn, errbuf, errcap)) != 0)
        goto fail;
    *out = p;
    return 0;
fail:
    sg_pg_close(p);
    return rc;
}

void sg_pg_close(struct sg_pg *p)
{
    if (p == NULL)
        return;
    PQfinish(p->conn);
    free(p);
}

const char *sg_pg_errmsg(const struct sg_pg *p)
{
    return p->errmsg;
}

void *sg_pg_handle(struct sg_pg *p)
{
    return p->conn;
}

void sg_pg_set_lock_timeout(struct sg_pg *p, int ms)
{
    p->lock_timeout_ms = ms;
    if (PQstatus(p->conn) == CONNECTION_OK) {
        char sql[64];
        snprintf(sql, sizeof(sql), "SET lock_timeout = %d", ms);
        PQclear(PQexec(p->conn, sql));
    }
}

/* A connection lost (the server restarted, an idle timeout, a network
 * cut) is opened again before the next call; while that fails, calls fail
 * with SG_STORE_EBUSY: nothing was sent, so nothing was written. Reading
 * what is waiting on the socket first (libpq does not block there) finds
 * a connection the server has closed since the last call, so that a call
 * is not sent into it and failed with an outcome it cannot know. */
static int usable(struct sg_pg *p)
{
    /* Between calls the server sends nothing but a notice, or the error it
     * closes the connection with and then the end of the stream: read
     * while something waits, and libpq marks a closed connection bad. */
    for (int i = 0; i < 4 && PQstatus(p->conn) == CONNECTION_OK; i++) {
        struct pollfd pfd = {.fd = PQsocket(p->conn), .events = POLLIN};
        if (poll(&pfd, 1, 0) <= 0 || !PQconsumeInput(p->conn))
            break;
    }
    if (PQstatus(p->conn) == CONNECTION_OK)
        return 0;
    PQreset(p->conn);
    p->prepared = 0; /* a new session has none */
    char err[300] = "";
    if (PQstatus(p->conn) == CONNECTION_OK && setup_session(p, err, sizeof(err)) == 0)
        return 0;
    if (err[0] == '\0')
        first_line(p->conn, NULL, err, sizeof(err));
    fmt(p->errmsg, sizeof(p->errmsg), "PostgreSQL cannot be reached; nothing was written: %s", err);
    return SG_STORE_EBUSY;
}

/* Run query q (prepared first if it is one of those, and not yet) with
 * binary results; *out gets its rows. */
static int call(struct sg_pg *p, int q, int n, const char *const *vals, const int *lens, const int *fmts,
                const char *what, int writes, PGresult **out)
{
    int rc = SG_STORE_EFAIL;
    *out = NULL;
    for (int attempt = 0; attempt <= RETRIES; attempt++) {
        if ((rc = usable(p)) != 0)
            return rc;
        const char *name = queries[q].name;
        if (name != NULL && !(p->prepared & 1u << q)) {
            PGresult *r = PQprepare(p->conn, name, queries[q].sql, 0, NULL);
            if (PQresultStatus(r) != PGRES_COMMAND_OK) {
                rc = fail(p, r, what, 0);
                PQclear(r);
                return rc;
            }
            PQclear(r);
            p->prepared |= 1u << q;
        }
        PGresult *r = name ? PQexecPrepared(p->conn, name, n, vals, lens, fmts, 1)
                           : PQexecParams(p->conn, queries[q].sql, n, NULL, vals, lens, fmts, 1);
        if (PQresultStatus(r) == PGRES_TUPLES_OK) {
            *out = r;
            return 0;
        }
        rc = fail(p, r, what, writes);
        /* A pooler in between, or DISCARD ALL, may have dropped it: the
         * statement never ran; prepare it again. */
        const char *state = PQresultErrorField(r, PG_DIAG_SQLSTATE);
        int lost = name != NULL && is_state(state, "26000");
        if (lost)
            p->prepared &= ~(1u << q);
        int again = (retryable(r) || lost) && PQstatus(p->conn) == CONNECTION_OK;
        PQclear(r);
        if (!again)
            break;
    }
    return rc;
}

/* ---- binary results ---- */

static int64_t col_i64(const PGresult *r, int row, int col)
{
    uint64_t v = 0;
    if (!PQgetisnull(r, row, col) && PQgetlength(r, row, col) == 8)
        memcpy(&v, PQgetvalue(r, row, col), 8);
    return (int64_t)be64toh(v);
}

static int32_t col_i32(const PGresult *r, int row, int col)
{
    uint32_t v = 0;
    if (!PQgetisnull(r, row, col) && PQgetlength(r, row, col) == 4)
        memcpy(&v, PQgetvalue(r, row, col), 4);
    return (int32_t)be32toh(v);
}

static int col_bool(const PGresult *r, int row, int col)
{
    return !PQgetisnull(r, row, col) && PQgetlength(r, row, col) == 1 && PQgetvalue(r, row, col)[0] != 0;
}

static char *col_dup(const PGresult *r, int row, int col, size_t *len)
{
    *len = (size_t)PQgetlength(r, row, col);
    return sg_store_dup(PQgetvalue(r, row, col), *len);
}

/* The record in columns [first, first+5): resource, value, token, version,
 * updated_at_ms; the key is the one asked for. */
static int fill_record(const PGresult *r, int first, const char *key, size_t key_len, struct sg_record *rec)
{
    memset(rec, 0, sizeof(*rec));
    rec->key = sg_store_dup(key, key_len);
    rec->key_len = key_len;
    rec->resource = col_dup(r, 0, first, &rec->resource_len);
    rec->value = col_dup(r, 0, first + 1, &rec->value_len);
    rec->token = (uint64_t)col_i64(r, 0, first + 2);
    rec->version = col_i64(r, 0, first + 3);
    rec->updated_at_ms = col_i64(r, 0, first + 4);
    if (rec->key == NULL || rec->resource == NULL || rec->value == NULL) {
        sg_record_clear(rec);
        return -ENOMEM;
    }
    return 0;
}

static int unexpected(struct sg_pg *p, PGresult *r, const char *what)
{
    fmt(p->errmsg, sizeof(p->errmsg), "%s: unexpected answer from PostgreSQL (%d rows, %d columns)", what,
        PQntuples(r), PQnfields(r));
    PQclear(r);
    return SG_STORE_EFAIL;
}

/* ---- array literals for the ops of a call ---- */

struct buf {
    char *p;
    size_t len, cap;
    int oom;
};

static void put(struct buf *b, const void *s, size_t n)
{
    if (b->oom)
        return;
    if (b->len + n + 1 > b->cap) {
        size_t cap = b->cap ? b->cap : 256;
        while (cap < b->len + n + 1)
            cap *= 2;
        char *q = realloc(b->p, cap);
        if (q == NULL) {
            b->oom = 1;
            return;
        }
        b->p = q;
        b->cap = cap;
    }
    memcpy(b->p + b->len, s, n);
    b->len += n;
    b->p[b->len] = '\0';
}

static void puts_(struct buf *b, const char *s)
{
    put(b, s, strlen(s));
}

static void put_i64(struct buf *b, int64_t v)
{
    char t[24];
    put(b, t, (size_t)snprintf(t, sizeof(t), "%lld", (long long)v));
}

/* A bytea element: "\\x" and hex, which any byte survives. */
static void put_bytea(struct buf *b, const char *s, size_t n)
{
    static const char hex[] = "0123456789abcdef";
    puts_(b, "\"\\\\x");
    for (size_t i = 0; i < n; i++) {
        char h[2] = {hex[(unsigned char)s[i] >> 4], hex[(unsigned char)s[i] & 15]};
        put(b, h, 2);
    }
    puts_(b, "\"");
}

/* A text element: quoted, with quote and backslash escaped; NULL unquoted. */
static void put_text(struct buf *b, const char *s, size_t n)
{
    if (s == NULL) {
        puts_(b, "NULL");
        return;
    }
    puts_(b, "\"");
    size_t from = 0;
    for (size_t i = 0; i < n; i++) {
        if (s[i] == '"' || s[i] == '\\') {
            put(b, s + from, i - from);
            put(b, "\\", 1);
            from = i;
        }
    }
    put(b, s + from, n - from);
    puts_(b, "\"");
}

int sg_pg_apply(struct sg_pg *p, const char *client, int unfenced, uint64_t token, struct sg_store_op *ops,
                size_t n, int as_batch, int64_t now_ms, struct sg_apply_result *res)
{
    struct buf a[5] = {{0}}; /* kinds, keys, resources, values, expects */
    for (int k = 0; k < 5; k++)
        puts_(&a[k], "{");
    for (size_t i = 0; i < n; i++) {
        const struct sg_store_op *o = &ops[i];
        if (i > 0)
            for (int k = 0; k < 5; k++)
                puts_(&a[k], ",");
        put_i64(&a[0], o->kind);
        put_bytea(&a[1], o->key, o->key_len);
        put_bytea(&a[2], o->resource, o->resource_len);
        put_text(&a[3], o->kind == SG_OP_PUT ? o->value : NULL, o->value_len);
        put_i64(&a[4], o->expect);
    }
    int rc = 0;
    for (int k = 0; k < 5; k++) {
        puts_(&a[k], "}");
        if (a[k].oom)
            rc = -ENOMEM;
    }
    PGresult *r = NULL;
    if (rc == 0) {
        char tok[24], now[24];
        snprintf(tok, sizeof(tok), "%llu", (unsigned long long)token);
        snprintf(now, sizeof(now), "%lld", (long long)now_ms);
        const char *vals[10] = {
            tok,   unfenced ? "t" : "f", as_batch ? "t" : "f", now, client, a[0].p, a[1].p, a[2].p, a[3].p,
            a[4].p};
        int lens[10] = {0, 0, 0, 0, (int)strlen(client)}, fmts[10] = {0, 0, 0, 0, 1};
        rc = call(p, Q_APPLY, 10, vals, lens, fmts, "apply", 1, &r);
    }
    for (int k = 0; k < 5; k++)
        free(a[k].p);
    if (rc != 0)
        return rc;
    if (PQntuples(r) != (int)n || PQnfields(r) != 8)
        return unexpected(p, r, "apply");
    for (size_t i = 0; i < n; i++) {
        int row = (int)i;
        ops[i].outcome = (enum sg_outcome)col_i32(r, row, 0);
        ops[i].last_token = (uint64_t)col_i64(r, row, 1);
        ops[i].found_version = col_i64(r, row, 2);
        ops[i].version = col_i64(r, row, 3);
    }
    int result = col_i32(r, 0, 4);
    res->outcome = result == 1 ? SG_OUTCOME_STALE : result == 2 ? SG_OUTCOME_MISMATCH : SG_OUTCOME_ACCEPTED;
    res->failed = result == 0 ? 0 : (size_t)col_i32(r, 0, 5);
    res->last_token = (uint64_t)col_i64(r, 0, 6);
    res->batch = col_i64(r, 0, 7);
    PQclear(r);
    if (res->failed >= n) {
        fmt(p->errmsg, sizeof(p->errmsg), "apply: PostgreSQL named op %zu of %zu", res->failed, n);
        return SG_STORE_EFAIL;
    }
    return 0;
}

int sg_pg_get(struct sg_pg *p, const char *client, int unfenced, const char *key, size_t key_len,
              const char *resource, size_t resource_len, uint64_t token, int64_t now_ms,
              struct sg_write_result *res, int *found, struct sg_record *rec)
{
    PGresult *r = NULL;
    int rc;
    if (token == 0) {
        /* A plain read: one statement is one snapshot. */
        const char *vals[1] = {key};
        int lens[1] = {(int)key_len}, fmts[1] = {1};
        rc = call(p, Q_GET, 1, vals, lens, fmts, "read record", 0, &r);
        if (rc != 0)
            return rc;
        if (PQntuples(r) == 1)
            rc = fill_record(r, 0, key, key_len, rec);
        *found = rc == 0 && PQntuples(r) == 1;
        PQclear(r);
        return rc;
    }
    char tok[24], now[24];
    snprintf(tok, sizeof(tok), "%llu", (unsigned long long)token);
    snprintf(now, sizeof(now), "%lld", (long long)now_ms);
    const char *vals[6] = {tok, unfenced ? "t" : "f", now, client, key, resource};
    int lens[6] = {0, 0, 0, (int)strlen(client), (int)key_len, (int)resource_len},
        fmts[6] = {0, 0, 0, 1, 1, 1};
    rc = call(p, Q_READ, 6, vals, lens, fmts, "fenced read", 1, &r);
    if (rc != 0)
        return rc;
    if (PQntuples(r) != 1 || PQnfields(r) != 8)
        return unexpected(p, r, "fenced read");
    res->outcome = col_i32(r, 0, 0) == 0 ? SG_OUTCOME_ACCEPTED : SG_OUTCOME_STALE;
    res->last_token = (uint64_t)col_i64(r, 0, 1);
    if (col_bool(r, 0, 2))
        rc = fill_record(r, 3, key, key_len, rec);
    *found = rc == 0 && col_bool(r, 0, 2);
    PQclear(r);
    return rc;
}

int sg_pg_get_checked(struct sg_pg *p, int unfenced, const char *key, size_t key_len, const char *resource,
                      size_t resource_len, uint64_t token, struct sg_write_result *res, int *found,
                      struct sg_record *rec)
{
    /* The fence and the record from one snapshot, without a lock: a writer
     * commits its admission and its record together, so the snapshot has
     * both or neither. Nothing is written. */
    const char *vals[2] = {key, resource};
    int lens[2] = {(int)key_len, (int)resource_len}, fmts[2] = {1, 1};
    PGresult *r = NULL;
    int rc = call(p, Q_CHECKED, 2, vals, lens, fmts, "checked read", 0, &r);
    if (rc != 0)
        return rc;
    if (PQntuples(r) != 1 || PQnfields(r) != 7)
        return unexpected(p, r, "checked read");
    res->last_token = (uint64_t)col_i64(r, 0, 0);
    res->outcome = unfenced || res->last_token <= token ? SG_OUTCOME_ACCEPTED : SG_OUTCOME_STALE;
    if (res->outcome == SG_OUTCOME_ACCEPTED && col_bool(r, 0, 1))
        rc = fill_record(r, 2, key, key_len, rec);
    *found = rc == 0 && res->outcome == SG_OUTCOME_ACCEPTED && col_bool(r, 0, 1);
    PQclear(r);
    return rc;
}

int sg_pg_reset_fence(struct sg_pg *p, const char *client, const char *resource, size_t resource_len,
                      uint64_t token, int64_t now_ms, uint64_t *old)
{
    char tok[24], now[24];
    snprintf(tok, sizeof(tok), "%llu", (unsigned long long)token);
    snprintf(now, sizeof(now), "%lld", (long long)now_ms);
    const char *vals[4] = {resource, tok, now, client};
    int lens[4] = {(int)resource_len, 0, 0, (int)strlen(client)}, fmts[4] = {1, 0, 0, 1};
    PGresult *r = NULL;
    int rc = call(p, Q_RESET, 4, vals, lens, fmts, "reset fence", 1, &r);
    if (rc != 0)
        return rc;
    if (PQntuples(r) != 1)
        return unexpected(p, r, "reset fence");
    *old = (uint64_t)col_i64(r, 0, 0);
    PQclear(r);
    return 0;
}

int sg_pg_fence(struct sg_pg *p, const char *resource, size_t resource_len, uint64_t *out)
{
    const char *vals[1] = {resource};
    int lens[1] = {(int)resource_len}, fmts[1] = {1};
    PGresult *r = NULL;
    int rc = call(p, Q_FENCE, 1, vals, lens, fmts, "read fence", 0, &r);
    if (rc != 0)
        return rc;
    if (PQntuples(r) != 1)
        return unexpected(p, r, "read fence");
    *out = (uint64_t)col_i64(r, 0, 0);
    PQclear(r);
    return 0;
}

int sg_pg_log(struct sg_pg *p, const struct sg_log_filter *f,
              int (*fn)(void *arg, const struct sg_log_entry *e), void *arg)
{
    char after[24], limit[16];
    snprintf(after, sizeof(after), "%lld", (long long)f->after);
    snprintf(limit, sizeof(limit), "%d", f->limit);
    const char *vals[4] = {after, f->resource, f->key, limit};
    int lens[4] = {0, (int)f->resource_len, (int)f->key_len, 0}, fmts[4] = {0, 1, 1, 0};
    PGresult *r = NULL;
    /* NULL parameters are folded away: the statement is planned with its
     * values, and uses the index of the filter given. */
    int rc = call(p, Q_LOG, 4, vals, lens, fmts, "read log", 0, &r);
    if (rc != 0)
        return rc;
    if (PQnfields(r) != 11)
        return unexpected(p, r, "read log");
    for (int i = 0; i < PQntuples(r) && rc == 0; i++) {
        /* Text and bytea columns are NUL-terminated by libpq in binary
         * format too; the client's name has no NUL (it is a C string). */
        struct sg_log_entry e = {
            .seq = col_i64(r, i, 0),
            .time_ms = col_i64(r, i, 1),
            .op = PQgetvalue(r, i, 2),
            .key = PQgetvalue(r, i, 3),
            .key_len = (size_t)PQgetlength(r, i, 3),
            .resource = PQgetvalue(r, i, 4),
            .resource_len = (size_t)PQgetlength(r, i, 4),
            .token = (uint64_t)col_i64(r, i, 5),
            .last_token = (uint64_t)col_i64(r, i, 6),
            .outcome = PQgetvalue(r, i, 7),
            .version = col_i64(r, i, 8),
            .batch = col_i64(r, i, 9),
            .client = PQgetvalue(r, i, 10),
        };
        rc = fn(arg, &e);
    }
    PQclear(r);
    return rc;
}

int sg_pg_health(struct sg_pg *p, char *journal, size_t cap, int *synchronous)
{
    PGresult *r = NULL;
    int rc = call(p, Q_HEALTH, 0, NULL, NULL, NULL, "health check", 0, &r);
    if (rc != 0)
        return rc;
    if (PQntuples(r) != 1)
        return unexpected(p, r, "health check");
    /* PostgreSQL always writes ahead; with fsync on and a synchronous
     * commit, every answered commit is on disk: what WAL with
     * synchronous=FULL means on SQLite. */
    fmt(journal, cap, "wal");
    *synchronous = col_bool(r, 0, 0) ? 2 : 1;
    PQclear(r);
    return 0;
}
