/*
 * storage-guard's store on PostgreSQL (--db postgresql://...): the calls of
 * store.h that store.c hands over once it has checked their arguments. One
 * sg_pg is one libpq connection, used by one thread at a time. Each call is
 * one statement (a function of schema.sql) and so one transaction on one
 * round trip. Returns as the store.h call of the same name.
 */
#ifndef SG_STORE_PG_H
#define SG_STORE_PG_H

#include <stddef.h>
#include <stdint.h>

#include "store.h"

struct sg_pg;

/* Shared by the two stores (defined in store.c): snprintf into buf, which
 * may be NULL (nothing written). */
void sg_store_fmt(char *buf, size_t cap, const char *f, ...) __attribute__((format(printf, 3, 4)));

/* A NUL-terminated copy of n bytes (malloc'ed), or NULL. */
char *sg_store_dup(const void *p, size_t n);

/* Whether a --db names PostgreSQL: a postgresql:// or postgres:// URI. */
int sg_pg_is_url(const char *db);

/*
 * Connect to url, set the session up (synchronous_commit on, READ
 * COMMITTED, the lock timeout), check that the server fsyncs, and install
 * fencelock.sql and schema.sql if they are missing or older. Writes *out
 * only on success. Returns 0, -ENOMEM, SG_STORE_EFAIL or SG_STORE_EBUSY
 * (the server cannot be reached).
 */
int sg_pg_open(const char *url, int lock_timeout_ms, struct sg_pg **out, char *errbuf, size_t errcap);
void sg_pg_close(struct sg_pg *p);
const char *sg_pg_errmsg(const struct sg_pg *p);
void *sg_pg_handle(struct sg_pg *p); /* the PGconn * */
void sg_pg_set_lock_timeout(struct sg_pg *p, int ms);

int sg_pg_health(struct sg_pg *p, char *journal, size_t cap, int *synchronous);
int sg_pg_apply(struct sg_pg *p, const char *client, int unfenced, uint64_t token, struct sg_store_op *ops,
                size_t n, int as_batch, int64_t now_ms, struct sg_apply_result *res);
/* A fenced read (token != 0, raise) or a plain one (token 0). */
int sg_pg_get(struct sg_pg *p, const char *client, int unfenced, const char *key, size_t key_len,
              const char *resource, size_t resource_len, uint64_t token, int64_t now_ms,
              struct sg_write_result *res, int *found, struct sg_record *rec);
int sg_pg_get_checked(struct sg_pg *p, int unfenced, const char *key, size_t key_len, const char *resource,
                      size_t resource_len, uint64_t token, struct sg_write_result *res, int *found,
                      struct sg_record *rec);
int sg_pg_reset_fence(struct sg_pg *p, const char *client, const char *resource, size_t resource_len,
                      uint64_t token, int64_t now_ms, uint64_t *old);
int sg_pg_fence(struct sg_pg *p, const char *resource, size_t resource_len, uint64_t *out);
int sg_pg_log(struct sg_pg *p, const struct sg_log_filter *f,
              int (*fn)(void *arg, const struct sg_log_entry *e), void *arg);

#endif
