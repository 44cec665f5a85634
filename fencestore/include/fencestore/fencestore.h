/*
 * fencestore: the resource-side fencing check in your own database, SQLite
 * or PostgreSQL. It keeps the last admitted token of every resource in one
 * table of the caller's database (fencing_last_token in SQLite,
 * fencelock.last_token in PostgreSQL, which only fencelock's functions
 * may write), and admits or
 * refuses a token inside the caller's transaction, so that the check, the
 * new last token and the caller's own write commit or roll back together.
 *
 * The same calls work on both databases: fencestore_new() over an SQLite
 * connection, fencestore_new_pg() over a libpq one, or fencestore_open()
 * with a connection string that names either, so that a service switches
 * databases by its configuration. On PostgreSQL the check is the SQL
 * function of fencelock.sql (installed with the library, and by
 * fencestore_new_pg when missing); see docs/guarding-your-database.md.
 *
 * It is a library of its own so that a lock client (lockcore, the fencelock
 * CLI) links hiredis only and never SQLite or libpq. Tokens,
 * fencing_check() and the error codes (FENCING_ESTALE, FENCING_ENOTOKEN,
 * FENCING_ESTORE) come from <fencing/fencing.h>; besides them the calls
 * return -EINVAL for bad arguments and -EAGAIN when the database asks for
 * the whole transaction to be retried (SQLite busy past the busy timeout;
 * PostgreSQL serialization failure or deadlock, SQLSTATE 40001 or 40P01).
 *
 * Thread safety: a fencestore handle must be used by one thread at a time;
 * open one handle per thread (per connection).
 */
#ifndef FENCESTORE_FENCESTORE_H
#define FENCESTORE_FENCESTORE_H

#include <stddef.h>
#include <stdint.h>

#include <fencing/fencing.h>

#if defined(FENCESTORE_BUILD) && defined(__GNUC__)
#define FENCESTORE_API __attribute__((visibility("default")))
#else
#define FENCESTORE_API
#endif

#ifdef __cplusplus
extern "C" {
#endif

/* A store of the last admitted token per resource, in an SQLite or a
 * PostgreSQL database. */
typedef struct fencestore fencestore;

/* The database of a store (fencestore_backend). */
enum fencestore_backend {
    FENCESTORE_SQLITE = 1,
    FENCESTORE_POSTGRESQL = 2,
};

/*
 * Open (creating if needed) the table `fencing_last_token` in an SQLite
 * database. db is borrowed: it must stay open until fencestore_free(),
 * and the caller keeps owning it. The store prepares its statements once.
 * Writes *out only on success. Returns 0, -EINVAL, -ENOMEM or
 * FENCING_ESTORE (message via fencestore_errmsg on a NULL store is
 * unavailable, so the detail is written to errbuf if errbuf != NULL).
 */
FENCESTORE_API int fencestore_new(void *sqlite3_db, fencestore **out, char *errbuf, size_t errcap);

/*
 * The same over a PostgreSQL connection: pgconn is a PGconn * (libpq),
 * borrowed like fencestore_new's db. If fencelock.sql's functions are
 * missing and the connection is not inside a transaction, installs them
 * (in a transaction of its own, one installer at a time), which needs a
 * superuser or a role with CREATEROLE; inside a transaction it only
 * checks. The connection's role must be a member of fencelock_writer
 * (docs/guarding-your-database.md, "Roles"). The SQL needs PostgreSQL 13
 * or later; fencelock is tested on 15.
 * Writes *out only on success. Returns 0, -EINVAL, -ENOMEM or
 * FENCING_ESTORE (detail in errbuf).
 */
FENCESTORE_API int fencestore_new_pg(void *pgconn, fencestore **out, char *errbuf, size_t errcap);

/*
 * Open a connection by its string, and a store over it that owns it:
 * "postgresql://..." or "postgres://..." is a PostgreSQL URI (libpq; the
 * session gets synchronous_commit=on, so that a commit is durable when it
 * returns); anything else is the path of an SQLite database file, created
 * if missing, switched to WAL with synchronous=FULL (both checked) and a
 * busy timeout of 5 s. conn is copied. fencestore_free() closes the
 * connection. Writes *out only on success. Returns 0, -EINVAL, -ENOMEM or
 * FENCING_ESTORE (detail in errbuf).
 */
FENCESTORE_API int fencestore_open(const char *conn, fencestore **out, char *errbuf, size_t errcap);

/* Finalize the store's statements, and close the connection if
 * fencestore_open() opened it (else the caller keeps it open). Accepts NULL. */
FENCESTORE_API void fencestore_free(fencestore *s);

/* FENCESTORE_SQLITE or FENCESTORE_POSTGRESQL (0 for NULL). */
FENCESTORE_API int fencestore_backend(const fencestore *s);

/* The store's connection, an sqlite3 * or a PGconn *, borrowed: run your
 * own statements on it, inside the transaction of fencestore_begin(). */
FENCESTORE_API void *fencestore_db(const fencestore *s);

/*
 * The transaction of a guarded write, the same on both databases:
 * fencestore_begin() runs BEGIN IMMEDIATE on SQLite (the write lock first,
 * so no other connection admits a token between the check and the write)
 * and BEGIN on PostgreSQL (where fencestore_admit's row lock does that).
 * fencestore_commit() reports a transaction that PostgreSQL had already
 * aborted (an earlier statement failed) as FENCING_ESTORE: nothing was
 * written. fencestore_rollback() leaves the transaction; it never fails on
 * a connection that can still talk. Each returns 0, -EINVAL, -EAGAIN or
 * FENCING_ESTORE.
 */
FENCESTORE_API int fencestore_begin(fencestore *s);
FENCESTORE_API int fencestore_commit(fencestore *s);
FENCESTORE_API int fencestore_rollback(fencestore *s);

/*
 * Admit a token for a resource inside the caller's transaction: read the
 * last token, apply fencing_check(), and on admission store the token (if
 * greater). Call it inside fencestore_begin()'s transaction (on SQLite a
 * BEGIN IMMEDIATE one) so that check and write are one atomic step together
 * with the caller's own write; the caller commits or rolls back. On
 * PostgreSQL the resource's row stays locked until the transaction ends, so
 * writers of one resource take turns, and a refusal does not abort the
 * transaction (the caller may commit an audit row).
 * resource: bytes [resource, resource+len), borrowed for the call; any
 * bytes, len 1..FENCING_RESOURCE_MAX.
 * *last_out (if not NULL) receives the last token before this call (0 if
 * none) on success and on FENCING_ESTALE.
 * Returns 0, -EINVAL, FENCING_ENOTOKEN, FENCING_ESTALE, -EAGAIN or
 * FENCING_ESTORE.
 */
FENCESTORE_API int fencestore_admit(fencestore *s, const char *resource, size_t len, uint64_t token,
                                    uint64_t *last_out);

/*
 * A reader's check, for the holder of a read lock: 0 if no token newer than
 * token was admitted for the resource, FENCING_ESTALE if one was; the last
 * token never moves (a reader's token is not a new token; see
 * docs/fencing.md). Call it in the same transaction as the read: on
 * PostgreSQL it locks the resource's row FOR SHARE until the transaction
 * ends, so no writer admits a newer token while the reader reads on (readers
 * do not block each other); on SQLite use a BEGIN IMMEDIATE transaction (or
 * any, as long as the read is in it: one snapshot).
 * Arguments and *last_out as fencestore_admit. Returns 0, -EINVAL,
 * FENCING_ENOTOKEN, FENCING_ESTALE, -EAGAIN or FENCING_ESTORE.
 */
FENCESTORE_API int fencestore_check(fencestore *s, const char *resource, size_t len, uint64_t token,
                                    uint64_t *last_out);

/*
 * Read the last admitted token of a resource (0 if none) into *out.
 * Returns 0, -EINVAL or FENCING_ESTORE.
 */
FENCESTORE_API int fencestore_last(fencestore *s, const char *resource, size_t len, uint64_t *out);

/* The detail of the last error on this store; valid until the next call. */
FENCESTORE_API const char *fencestore_errmsg(const fencestore *s);
#ifdef __cplusplus
}
#endif

#endif
