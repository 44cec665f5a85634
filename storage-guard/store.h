/*
 * The storage side of storage-guard: records, the audit log, and the
 * fencing check run together in one transaction: on SQLite a BEGIN
 * IMMEDIATE one around fencestore_admit, on PostgreSQL (a postgresql://
 * URL, store_pg.c) one call of a function of schema.sql. No HTTP and no
 * JSON parsing here; values are stored as the JSON text the caller gives.
 * The calls answer the same on both databases.
 *
 * Thread safety: an sg_store is one database connection and must be used
 * by one thread at a time; an sg_store_pool hands stores out to worker
 * threads.
 */
#ifndef SG_STORE_H
#define SG_STORE_H

#include <stddef.h>
#include <stdint.h>

/* Errors besides -errno values: */
enum {
    SG_STORE_EFAIL = -12001, /* the database failed; see the message */
    SG_STORE_EBUSY = -12002, /* the database stayed locked past the busy timeout
                                (PostgreSQL: the lock timeout), or cannot be
                                reached; nothing was written */
    SG_STORE_EPERM = -12003, /* the database's role may not (PostgreSQL:
                                a fence reset without fencelock_repairer) */
};

/* How long a connection waits for a lock held by another connection or
 * process before giving up with SG_STORE_EBUSY. */
#define SG_STORE_BUSY_TIMEOUT_MS 5000

/* Outcome of a fenced operation, as written to the audit log. */
enum sg_outcome {
    SG_OUTCOME_ACCEPTED = 0,
    SG_OUTCOME_STALE,     /* the token was older than the resource's last one */
    SG_OUTCOME_MISMATCH,  /* its version precondition did not hold */
    SG_OUTCOME_ABORTED,   /* not applied: another operation of its batch failed */
    SG_OUTCOME_NOT_FOUND, /* a delete of a key without a record: token admitted, nothing deleted */
};

/* The audit log's name of an outcome ("accepted", "stale", "mismatch",
 * "aborted", "not_found"). */
const char *sg_outcome_name(enum sg_outcome o);

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
    const char *op; /* "write", "delete", "check" or "read" */
    const char *key;
    size_t key_len;
    const char *resource;
    size_t resource_len;
    uint64_t token;
    uint64_t last_token;
    const char *outcome; /* see sg_outcome_name() */
    int64_t version;     /* written, deleted or checked; 0 unless accepted */
    int64_t batch;       /* the batch of the row (the seq of its first row), 0 if none */
    const char *client;  /* who sent it (see sg_store_set_client); "" if unknown */
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
 * statements. path is copied; ":memory:" works (for tests). A path that is
 * a postgresql:// or postgres:// URI opens a PostgreSQL connection instead
 * (see sg_pg_open in store_pg.h). Writes *out only on success; on failure
 * a message goes to errbuf. Returns 0, -ENOMEM, SG_STORE_EFAIL or
 * SG_STORE_EBUSY.
 */
int sg_store_open(const char *path, sg_store **out, char *errbuf, size_t errcap);

/* Finalize every statement and close the connection. Accepts NULL. */
void sg_store_close(sg_store *s);

/* Unfenced mode (on != 0): writes and reads are never refused and need no
 * token; a token given is recorded in the record and the log but neither
 * checked nor raised. The store as it would be without fencing, for the
 * scenario replays to compare against. Off by default. */
void sg_store_set_unfenced(sg_store *s, int on);

/* Longest client name kept in the audit log, in bytes. */
#define SG_STORE_CLIENT_MAX 64

/* The client name written in the audit rows of the calls that follow on s
 * (copied, cut at SG_STORE_CLIENT_MAX bytes; NULL or "" for none). */
void sg_store_set_client(sg_store *s, const char *name);

/* Wait up to ms for a lock held elsewhere (default SG_STORE_BUSY_TIMEOUT_MS;
 * on PostgreSQL the session's lock_timeout); kept across a reopen. */
void sg_store_set_busy_timeout(sg_store *s, int ms);

/*
 * Check the connection answers, and report its durability settings: the
 * journal mode ("wal") into journal (cap bytes) and PRAGMA synchronous
 * (2 = FULL) into *synchronous. Returns 0 or SG_STORE_EFAIL.
 */
int sg_store_health(sg_store *s, char *journal, size_t cap, int *synchronous);

/*
 * The store's connection (an sqlite3 *, or a PGconn * on PostgreSQL),
 * borrowed: for diagnostics and for tests that must drive the connection
 * into states the store's own calls never reach. On SQLite it changes when
 * the store reopens its connection (after a rollback that failed), and is
 * NULL while a reopen keeps failing.
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

/* ---- several operations in one transaction ---- */

enum sg_op_kind {
    SG_OP_PUT = 1,
    SG_OP_DELETE,
    SG_OP_CHECK,
};

/* Version preconditions (sg_store_op.expect): a version n >= 1 ("the
 * record's version is n"), 0 ("there is no record"), or: */
#define SG_EXPECT_NONE (-1)   /* no condition */
#define SG_EXPECT_EXISTS (-2) /* a record exists, any version */

/* Largest number of operations of one sg_store_apply() call. */
#define SG_STORE_OPS_MAX 1000

/* One operation; the inputs are borrowed for the call. */
struct sg_store_op {
    enum sg_op_kind kind;
    const char *key; /* 1..1024 bytes */
    size_t key_len;
    const char *resource; /* 1..1024 bytes: the fence it goes through */
    size_t resource_len;
    const char *value; /* SG_OP_PUT: JSON text */
    size_t value_len;
    int64_t expect; /* precondition; SG_OP_CHECK needs one */
    /* Outputs: */
    enum sg_outcome outcome;
    uint64_t last_token;   /* the resource's last token before the call */
    int64_t found_version; /* the record's version just before this op, 0: none */
    int64_t version;       /* put: the new version; delete: the one deleted; check: the one found */
};

/* What sg_store_apply() did as a whole. */
struct sg_apply_result {
    enum sg_outcome outcome; /* SG_OUTCOME_ACCEPTED, _STALE or _MISMATCH */
    size_t failed;           /* on STALE or MISMATCH: the index of the op that failed */
    uint64_t last_token;     /* on STALE: that op's resource's last token */
    int64_t batch;           /* the batch's id in the log (as_batch), else 0 */
};

/*
 * Apply ops[0..n) atomically, in one BEGIN IMMEDIATE transaction, all or
 * nothing. First token is admitted for the resource of every op, in order
 * (fencestore_admit): one stale resource makes every op SG_OUTCOME_STALE.
 * Then the ops run in order, each seeing the ones before it; each first
 * checks its precondition against the record as it is at that point, and
 * the first that does not hold makes the call SG_OUTCOME_MISMATCH (that op
 * MISMATCH, the others ABORTED). Then nothing is written, no fence raised
 * either, and the call still commits one audit row per op, with its outcome.
 * A put writes the record with version + 1 (versions continue across a
 * delete: a key's version numbers are never reused); a delete of a key with
 * no record is SG_OUTCOME_NOT_FOUND and does not fail the call; a check
 * writes nothing. With as_batch, the rows carry a batch id.
 * token: 1 .. 2^53-1 (0 too in unfenced mode); n: 1..SG_STORE_OPS_MAX.
 * Returns 0 with *res and every op's outputs filled, -EINVAL, -ENOMEM,
 * SG_STORE_EFAIL or SG_STORE_EBUSY (nothing was written then).
 */
int sg_store_apply(sg_store *s, uint64_t token, struct sg_store_op *ops, size_t n, int as_batch,
                   int64_t now_ms, struct sg_apply_result *res);

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

/*
 * A reader's read: the record only if no token larger than token was
 * admitted for the resource, in one transaction; the fence is not raised
 * and nothing is logged (it changes nothing). res->outcome is
 * SG_OUTCOME_ACCEPTED or SG_OUTCOME_STALE, res->last_token the fence.
 * *found and *rec as sg_store_get. token: 1 .. 2^53-1. Returns 0, -EINVAL,
 * -ENOMEM, SG_STORE_EFAIL or SG_STORE_EBUSY.
 */
int sg_store_get_checked(sg_store *s, const char *key, size_t key_len, const char *resource,
                         size_t resource_len, uint64_t token, struct sg_write_result *res, int *found,
                         struct sg_record *rec);

/*
 * Set the last token of a resource to token, lower or higher, in one
 * BEGIN IMMEDIATE transaction with an audit row (op "reset", last_token the
 * old value). For an operator undoing a poisoned fence: it breaks the
 * guarantee that a fence never moves back. *old gets the previous last
 * token. Returns 0, -EINVAL, SG_STORE_EFAIL or SG_STORE_EBUSY.
 */
int sg_store_reset_fence(sg_store *s, const char *resource, size_t resource_len, uint64_t token,
                         int64_t now_ms, uint64_t *old);

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

/* Open n connections (n >= 1) to path. On SQLite their writers take turns
 * through one in-process mutex; on PostgreSQL the server orders them. Same
 * errors as sg_store_open, plus -EINVAL. Writes *out only on success. */
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
