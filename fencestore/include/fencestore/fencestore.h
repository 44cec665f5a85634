/*
 * fencestore: the resource-side fencing check backed by SQLite. It keeps the
 * last admitted token of every resource in one table of the caller's
 * database, and admits or refuses a token inside the caller's transaction,
 * so that the check, the new last token and the caller's own write commit
 * or roll back together.
 *
 * It is a library of its own so that a lock client (lockcore, the fencelock
 * CLI) links hiredis only and never SQLite. Tokens, fencing_check() and the
 * error codes (FENCING_ESTALE, FENCING_ENOTOKEN, FENCING_ESTORE) come from
 * <fencing/fencing.h>.
 *
 * Thread safety: a fencestore handle must be used by one thread at a time;
 * open one handle per thread (per SQLite connection).
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

/* A store of the last admitted token per resource, in an SQLite database. */
typedef struct fencestore fencestore;

/*
 * Open (creating if needed) the table `fencing_last_token` in an SQLite
 * database. db is borrowed: it must stay open until fencestore_free(),
 * and the caller keeps owning it. The store prepares its statements once.
 * Writes *out only on success. Returns 0, -EINVAL, -ENOMEM or
 * FENCING_ESTORE (message via fencestore_errmsg on a NULL store is
 * unavailable, so the detail is written to errbuf if errbuf != NULL).
 */
FENCESTORE_API int fencestore_new(void *sqlite3_db, fencestore **out, char *errbuf, size_t errcap);

/* Finalize the store's statements. Accepts NULL. Does not close the db. */
FENCESTORE_API void fencestore_free(fencestore *s);

/*
 * Admit a token for a resource inside the caller's transaction: read the
 * last token, apply fencing_check(), and on admission store the token (if
 * greater). Call it inside a BEGIN IMMEDIATE transaction so that check and
 * write are one atomic step together with the caller's own write; the
 * caller commits or rolls back.
 * resource: bytes [resource, resource+len), borrowed for the call; any
 * bytes, len 1..FENCING_RESOURCE_MAX.
 * *last_out (if not NULL) receives the last token before this call (0 if
 * none) on success and on FENCING_ESTALE.
 * Returns 0, -EINVAL, FENCING_ENOTOKEN, FENCING_ESTALE or FENCING_ESTORE.
 */
FENCESTORE_API int fencestore_admit(fencestore *s, const char *resource, size_t len, uint64_t token,
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
