/*
 * The SQLite side of storage-guard: records, the audit log, and the fencing
 * check (fencestore_admit) run together in one BEGIN IMMEDIATE
 * transaction. No HTTP and no JSON parsing here; values are stored as the
 * JSON text the caller gives.
 *
 * Thread safety: an sg_store is one SQLite connection and must be used by one
 * thread at a time; an sg_store_pool hands stores out to worker threads.
 */
#ifndef SG_STORE_H
#define SG_STORE_H

#include <stddef.h>
#include <stdint.h>

/* Errors besides -errno values: */
enum {
    SG_STORE_EFAIL = -12001, /* SQLite failed; see the message */
    SG_STORE_EBUSY = -12002, /* the database stayed locked past the busy timeout */
};

/* How long a connection waits for a lock held by another connection or
 * process before giving up with SG_STORE_EBUSY. */
#define SG_STORE_BUSY_TIMEOUT_MS 5000

/* Outcome of a fenced operation, as written to the audit log. */
enum sg_outcome {
    SG_OUTCOME_ACCEPTED = 0,
    SG_OUTCOME_STALE,
};

/* What a write or fenced read did. */
struct sg_write_result {
    enum sg_outcome outcome;
    uint64_t last_token; /* the resource's last token before this call */
    int64_t version;     /* the record's version after an accepted write */
};

/* A stored record. value is heap-allocated JSON text (NUL-terminated),
 * owned by the struct: release with sg_record_clear(). */
struct sg_record {
    char *key;
    size_t key_len;
    char *resource;
    size_t resource_len;
    char *value;
    size_t value_len;
    uint64_t token;
    int64_t version;
    int64_t updated_at_ms;
};

void sg_record_clear(struct sg_record *r);

/* One audit log row. The pointers are borrowed for the callback only. */
struct sg_log_entry {
    int64_t seq;
    int64_t time_ms;
    const char *op; /* "write" or "read" */
    const char *key;
    size_t key_len;
    const char *resource;
    size_t resource_len;
    uint64_t token;
    uint64_t last_token;
    const char *outcome; /* "accepted" or "stale" */
    int64_t version;     /* 0 unless an accepted write */
};

/* Filter of sg_store_log(); a NULL pointer means "any". */
struct sg_log_filter {
    const char *resource;
    size_t resource_len;
    const char *key;
    size_t key_len;
    int64_t after; /* only rows with seq > after */
    int limit;     /* at most this many rows, > 0 */
};

typedef struct sg_store sg_store;

/*
 * Open (creating if missing) the database at path, switch it to WAL with
 * synchronous=FULL and check that both took, create the schema, prepare the
 * statements. path is copied; ":memory:" works (for tests). Writes *out only
 * on success; on failure a message goes to errbuf. Returns 0, -ENOMEM,
 * SG_STORE_EFAIL or SG_STORE_EBUSY.
 */
int sg_store_open(const char *path, sg_store **out, char *errbuf, size_t errcap);

/* Finalize every statement and close the connection. Accepts NULL. */
void sg_store_close(sg_store *s);

/* Unfenced mode (on != 0): writes and reads are never refused and need no
 * token; a token given is recorded in the record and the log but neither
 * checked nor raised. The store as it would be without fencing, for the
 * scenario replays to compare against. Off by default. */
void sg_store_set_unfenced(sg_store *s, int on);

/* Wait up to ms for a lock held elsewhere (default SG_STORE_BUSY_TIMEOUT_MS);
 * kept across a reopen. */
void sg_store_set_busy_timeout(sg_store *s, int ms);

/*
 * Check the connection answers, and report its durability settings: the
 * journal mode ("wal") into journal (cap bytes) and PRAGMA synchronous
 * (2 = FULL) into *synchronous. Returns 0 or SG_STORE_EFAIL.
 */
int sg_store_health(sg_store *s, char *journal, size_t cap, int *synchronous);

/*
 * The store's SQLite connection (an sqlite3 *), borrowed: for diagnostics
 * and for tests that must drive the connection into states the store's own
 * calls never reach. It changes when the store reopens its connection (after
 * a rollback that failed), and is NULL while a reopen keeps failing.
 */
void *sg_store_handle(sg_store *s);

/* The detail of the last failure on this store; valid until the next call. */
const char *sg_store_errmsg(const sg_store *s);

/*
 * A fenced write: in one BEGIN IMMEDIATE transaction, admit token for the
 * resource (fencestore_admit), on admission insert or replace the record
 * (version + 1), and in both cases append an audit log row, then commit.
 * If the transaction cannot be rolled back after a failure, the connection
 * is closed (which rolls it back) and reopened, and SG_STORE_EFAIL says so:
 * a connection is never left inside a transaction, where it would hold the
 * write lock against every other writer.
 * All buffers are borrowed for the call. key and resource: 1..1024 bytes;
 * value: JSON text; token: 1 .. 2^53-1 (0 too in unfenced mode). Returns 0 with *res filled (an
 * accepted or a stale outcome both return 0), -EINVAL, SG_STORE_EFAIL or
 * SG_STORE_EBUSY (nothing was written then).
 */
int sg_store_put(sg_store *s, const char *key, size_t key_len, const char *resource, size_t resource_len,
                 uint64_t token, const char *value, size_t value_len, int64_t now_ms,
                 struct sg_write_result *res);

/*
 * Read a record. With token != 0 the read is fenced: in one BEGIN IMMEDIATE
 * transaction the token is admitted for the resource exactly like a write
 * (raising the last token), the outcome is logged with op "read", and the
 * record is read only if admitted. *res (may be NULL for plain reads) gets
 * the outcome. *found is set to 1 and *rec filled (caller clears it) when
 * the record exists and the read was admitted, else *found = 0.
 * Returns 0, -EINVAL, -ENOMEM, SG_STORE_EFAIL or SG_STORE_EBUSY.
 */
int sg_store_get(sg_store *s, const char *key, size_t key_len, const char *resource, size_t resource_len,
                 uint64_t token, int64_t now_ms, struct sg_write_result *res, int *found,
                 struct sg_record *rec);

/* The last admitted token of a resource (0 if none). Returns 0, -EINVAL or
 * SG_STORE_EFAIL. */
int sg_store_fence(sg_store *s, const char *resource, size_t resource_len, uint64_t *out);

/*
 * Call fn for each audit log row matching the filter, in seq order. A
 * non-zero return from fn stops the walk and is returned. Returns 0,
 * -EINVAL, SG_STORE_EFAIL or fn's value.
 */
int sg_store_log(sg_store *s, const struct sg_log_filter *f,
                 int (*fn)(void *arg, const struct sg_log_entry *e), void *arg);

/* ---- a pool of connections shared by worker threads ---- */

typedef struct sg_store_pool sg_store_pool;

/* Open n connections (n >= 1) to path. Same errors as sg_store_open, plus
 * -EINVAL. Writes *out only on success. */
int sg_store_pool_open(const char *path, int n, sg_store_pool **out, char *errbuf, size_t errcap);

/* sg_store_set_unfenced on every connection of the pool. */
void sg_store_pool_set_unfenced(sg_store_pool *p, int on);

/* Close every connection; none may be checked out. Accepts NULL. */
void sg_store_pool_close(sg_store_pool *p);

/* Take a connection, waiting while all are in use; give it back with
 * sg_store_pool_put. */
sg_store *sg_store_pool_get(sg_store_pool *p);
void sg_store_pool_put(sg_store_pool *p, sg_store *s);

#endif
