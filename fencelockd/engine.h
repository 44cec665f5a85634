/*
 * The lock side of fencelockd: lock loops, each a thread that runs the
 * lock operations and reads of its resources on lockcore's non-blocking
 * API from its own poll loop (lockcore_pollfds / lockcore_process), so a
 * waiting acquisition holds no thread, only a few hundred bytes. They
 * answer through fencehttp_answer_later.
 */
#ifndef FLD_ENGINE_H
#define FLD_ENGINE_H

#include <stddef.h>
#include <stdint.h>

#include <fencehttp/fencehttp.h>
#include <lockcore/lockcore.h>

#include "api.h"

struct fld_engine_options {
    /* lockcore options of the clients (nodes, password, TLS, key prefix,
     * timeouts); the strings are borrowed until fld_engine_free. ttl_ms,
     * wait_ms, wait_mode and retry_count are set per request. */
    const struct lockcore_options *base;
    struct fld_limits limits;
    /* Lock loops, each a thread with a lockcore client of its own:
     * resources are spread over them by a hash of the name, so one
     * resource's waiters are on one loop. 1..FLD_LOOPS_MAX. */
    int loops;
};

#define FLD_LOOPS_MAX 64

typedef struct fld_engine fld_engine;

/* Start the threads. Writes *out only on success. Returns 0, -EINVAL (a
 * bad node address or option: errbuf says which), -ENOMEM or -errno. */
int fld_engine_start(const struct fld_engine_options *o, fld_engine **out, char *errbuf, size_t errcap);

/* Run op (copied) for the request of conn, and answer it with
 * fencehttp_answer_later. client: who asked, for the log (may be NULL). */
void fld_engine_submit(fld_engine *e, const struct fld_op *op, fencehttp_conn *conn, const char *client);

/* SIGTERM: answer every waiting acquisition 503 "shutting_down" now (an
 * acquisition that was already under way is rolled back or, if granted,
 * released), let the other operations in flight end for up to drain_ms,
 * then cancel what is left. Requests submitted from now on are answered
 * 503 at once. Returns once every request given to the engine has its
 * answer. */
void fld_engine_shutdown(fld_engine *e, int drain_ms);

/* Stop the threads and free e. Accepts NULL. */
void fld_engine_free(fld_engine *e);

/* The clients' names by owner tag that status answers name holders with
 * (borrowed: keep it until fld_engine_free, or until another replaces it
 * and no status answer can be under way). NULL: none. */
void fld_engine_set_owners(fld_engine *e, const struct fld_owners *owners);

/* The number of nodes and the majority. */
unsigned fld_engine_nodes(const fld_engine *e);

#endif
