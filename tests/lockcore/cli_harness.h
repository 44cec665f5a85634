/*
 * Running the fencelock command in tests: a cluster of real redis-server
 * nodes, each invocation a child process (through sh, so that the PID is
 * fencelock's) with its stdout and stderr in files of the test directory,
 * and checks of its one-line JSON output. The binary is $FENCELOCK_BIN.
 */
#ifndef FENCELOCK_TESTS_CLI_HARNESS_H
#define FENCELOCK_TESTS_CLI_HARNESS_H

#include <stdarg.h>
#include <sys/types.h>

#include <jansson.h>

#include "redis_harness.h"

struct fixture {
    struct rh_cluster *rc; /* NULL for tests that never reach a node */
    char nodes[1024];      /* FENCELOCK_NODES */
    char dir[256];
    int seq;
    const char *timeout; /* --timeout given to every invocation, or NULL */
    int run_timeout_ms;  /* how long one invocation may run */
};

struct res {
    int code;     /* exit status, or 128 + signal */
    long long ms; /* how long it ran */
    char out[32768];
    char err[16384];
};

/* A child's pid and the files its output goes to. */
struct child {
    pid_t pid;
    long long started_ms;
    char out_path[320];
    char err_path[320];
};

const char *fencelock_bin(void);
/* n nodes (0: none; FENCELOCK_NODES then names a closed port); tag names
 * the temp dir. */
struct fixture *fx_new(int n, const char *tag);
int fx_teardown(void **state);
void path_in(struct fixture *f, const char *name, char *buf, size_t cap);

/* Start fencelock with args (NULL-terminated). env: extra "NAME=value"
 * strings (NULL-terminated, may be NULL); FENCELOCK_NODES is the
 * cluster's unless env sets it. */
void spawn(struct fixture *f, struct child *ch, char *const *env, const char *const *args);
void read_file(const char *path, char *buf, size_t cap);
/* Wait for the child (SIGKILL and fail after timeout_ms) and collect it. */
void collect(struct child *ch, int timeout_ms, struct res *r);
void run_args(struct fixture *f, struct res *r, char *const *env, const char *const *args);
void vfl(struct fixture *f, struct res *r, char *const *env, va_list ap);
/* Run fencelock with the arguments that follow (NULL-terminated). */
void fl(struct fixture *f, struct res *r, ...);
void fl_env(struct fixture *f, struct res *r, char *const *env, ...);

/* stdout must be exactly one JSON object on one line. */
json_t *one_json_line(const struct res *r);
const char *jstr(json_t *j, const char *key);
long long jint(json_t *j, const char *key);
int jbool(json_t *j, const char *key);
/* The object has exactly these keys (NULL-terminated). */
void has_keys(json_t *j, ...);

/* The acquisition a lock id belongs to (its last six digits zeroed): the
 * owner a reentrant lock's key holds, the writer a write intent names. */
void acq_of(const char *id, char out[41]);

#endif
