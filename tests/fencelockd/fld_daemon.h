/*
 * fencelockd processes for the tests: started on a free loopback port with
 * a port file in a temporary directory, against a cluster of real
 * redis-server nodes from the test kit, and HTTP/JSON calls to them. The
 * binary is $FLD_EXE.
 */
#ifndef FLD_TEST_DAEMON_H
#define FLD_TEST_DAEMON_H

#include <stdint.h>
#include <sys/types.h>

#include <fencelock-testkit/testkit.h>

struct fld {
    pid_t pid; /* 0 once stopped */
    uint16_t port;
    char dir[256];
    char log[320];
};

/* A cmocka fixture: three real nodes, and a fencelockd on them (started
 * by fld_fx_setup_started, not by fld_fx_setup). */
struct fld_fx {
    struct rh_cluster *rc;
    char nodes[512];
    struct fld d;
};
int fld_fx_setup(void **state);
int fld_fx_setup_started(void **state);
int fld_fx_teardown(void **state);

/* The nodes of rc as fencelockd's --nodes wants them, into buf. */
void fld_nodes(struct rh_cluster *rc, char *buf, size_t cap);

/* Start fencelockd for nodes (--nodes) with extra_args (NULL-terminated,
 * may be NULL) and wait up to 10 s for its port. Fails the test on error. */
void fld_start(struct fld *d, const char *nodes, const char *const *extra_args);

/* SIGTERM, wait up to timeout_ms; returns waitpid's status. */
int fld_stop(struct fld *d, int timeout_ms);

/* SIGKILL if running, remove the directory. */
void fld_destroy(struct fld *d);

/* A request to d with a JSON body (may be NULL) and extra headers (may be
 * NULL); fails the test when no answer came. The caller clears *r. */
void fld_call(const struct fld *d, const char *method, const char *path, const char *body,
              const char *headers, struct hc_response *r);

/* The same, failing the test unless the status is want; returns the JSON
 * body's string field name copied into buf (or "" if none). */
const char *fld_expect(const struct fld *d, const char *method, const char *path, const char *body, int want,
                       const char *field, char *buf, size_t cap);

/* An integer field of a JSON object, or -1. */
long long fld_int(const struct hc_response *r, const char *field);

/* Acquire resource with body; returns the status, and the lock id (buf)
 * and token (*token) on 200. */
int fld_acquire(const struct fld *d, const char *resource, const char *body, char *id, size_t cap,
                unsigned long long *token);

#endif
