/* Internal to fencestore: the handle, and the PostgreSQL side (pg.c) that
 * the public calls of store.c hand over to. */
#ifndef FENCESTORE_INTERNAL_H
#define FENCESTORE_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#include <fencestore/fencestore.h>

#define FENCESTORE__ERRMSG_MAX 256

struct fencestore {
    int backend; /* enum fencestore_backend */
    int owns_db; /* opened by fencestore_open: closed by fencestore_free */
    void *db;    /* sqlite3 * or PGconn * */
    void *get;   /* SQLite: prepared statements */
    void *put;
    char errmsg[FENCESTORE__ERRMSG_MAX];
};

void fencestore__fmt(char *buf, size_t cap, const char *f, ...) __attribute__((format(printf, 3, 4)));

/* Over a checked, owned or borrowed PGconn: see fencestore_new_pg. */
int fencestore__pg_new(fencestore *s, char *errbuf, size_t errcap);
/* Connect to a URI; a store that owns the connection. */
int fencestore__pg_open(const char *uri, fencestore **out, char *errbuf, size_t errcap);
void fencestore__pg_close(fencestore *s);
/* The calls of fencestore.h, arguments already checked. share: a reader's
 * FOR SHARE check instead of an admission. */
int fencestore__pg_admit(fencestore *s, const char *resource, size_t len, uint64_t token, int share,
                         uint64_t *last);
int fencestore__pg_last(fencestore *s, const char *resource, size_t len, uint64_t *out);
/* BEGIN, COMMIT or ROLLBACK. */
int fencestore__pg_exec(fencestore *s, const char *sql);

#endif
