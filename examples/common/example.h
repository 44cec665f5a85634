/*
 * What the examples share: their own redis-server nodes and storage-guard on
 * free loopback ports (temporary directories, stopped by PID), client
 * processes released at once, and small HTTP/JSON calls to storage-guard.
 * This is example code: it prints, and a failure to start ends the program.
 */
#ifndef FENCELOCK_EXAMPLE_H
#define FENCELOCK_EXAMPLE_H

#include <stdint.h>
#include <sys/types.h>

#include <jansson.h>

#include "redis_harness.h"
#include <fencelock-testkit/testkit.h>

struct ex_store {
    struct tk_sg *sg; /* the test kit's storage-guard */
    uint16_t port;
    char dir[256]; /* its temporary directory */
};

/* Start storage-guard in a fresh temporary directory; unfenced 1 runs it
 * with --unfenced (the store without fencing). Returns 0 or -1 (printed). */
int ex_store_start(struct ex_store *s, const char *tag, int unfenced);
void ex_store_stop(struct ex_store *s);

/* Start n redis-server nodes; their URLs go to urls[0..n-1]. */
int ex_redis_start(int n, struct rh_cluster **out, const char **urls);

/*
 * One HTTP request with a JSON body (may be NULL; not stolen). Returns the
 * status (0 if no answer) and, if out is not NULL, the answer's JSON (new
 * reference, may be NULL). *version gets the ETag's version if not NULL.
 */
int ex_http(uint16_t port, const char *method, const char *path, json_t *body, json_t **out,
            uint64_t *version);

/*
 * Client processes. ex_barrier_init makes a pipe; a child calls
 * ex_barrier_wait, which returns when the parent calls ex_barrier_open (or
 * after timeout_ms). ex_fork runs fn(arg) in a child and _exits with its
 * value: children must never run the parent's atexit handlers, which stop
 * the nodes.
 */
struct ex_barrier {
    int fd[2];
};
int ex_barrier_init(struct ex_barrier *b);
void ex_barrier_wait(struct ex_barrier *b, int timeout_ms);
void ex_barrier_open(struct ex_barrier *b);
pid_t ex_fork(int (*fn)(void *), void *arg, struct ex_barrier *close_in_child);

/* Wait (bounded) until child pid has stopped itself (SIGSTOP). 0 or -1. */
int ex_wait_stopped(pid_t pid, int timeout_ms);

/* Wait for every pid in pids[0..n-1] until deadline_ms (monotonic);
 * status[i] gets the exit status (0..255), or -1 if it was killed or did not
 * end in time (then it is killed). Returns the number that ended in time. */
int ex_wait_all(const pid_t *pids, int *status, int n, long long deadline_ms);

/* A program of the build: $env if set, else rel under the top of the build
 * tree this example runs from (examples/X/prog -> ../../rel), else name
 * from PATH. The string stays valid for the next 7 calls. */
const char *ex_program(const char *env, const char *rel, const char *name);

long long ex_now_ms(void);
void ex_sleep_ms(long ms);

#endif
