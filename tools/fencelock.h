/*
 * What the lock commands of fencelock (tools/fencelock.c) and `run`'s
 * process supervision (tools/cmd_run.c) share: the parsed options, the
 * exit codes and a few helpers. Private to the fencelock program.
 */
#ifndef FENCELOCK_FENCELOCK_H
#define FENCELOCK_FENCELOCK_H

#include <stdint.h>

#include <jansson.h>
#include <lockcore/lockcore.h>

/* Exit codes: the command's own status when `run` ran it, else these.
 * They are part of the interface: never renumber them. code_for() maps
 * lockcore's error codes onto them (the table in docs/cli.md). */
enum {
    EXIT_OK = 0,
    EXIT_USAGE = 64,       /* bad arguments (-EINVAL) */
    EXIT_UNREACHABLE = 69, /* no majority in time: unreachable, or granted too slowly */
    EXIT_ERROR = 70,       /* server/protocol error, no token, out of memory, anything else */
    EXIT_NOT_HELD = 75,    /* not acquired: held by another (within --wait) */
    EXIT_LOST = 79,        /* the lock was lost, or is not held under the given id */
};

/* The command line. Options that may legitimately be 0 have a *_set flag;
 * the others use 0 for "not given, take the lockcore default". */
struct args {
    const char *nodes;
    uint64_t ttl_ms;
    int retry_count;
    int retry_set;
    uint64_t retry_delay_ms;
    int retry_delay_set;
    uint64_t wait_ms;
    int wait_set;
    const char *key_prefix;
    int fencing;
    uint64_t extend_at_ms; /* run: extend when this much validity is left; 0 = TTL/3 */
    uint64_t kill_after_ms;
    uint64_t request_timeout_ms;
    const char *undo; /* run --undo: a shell command for a failed job or a lost lock */
    int verbose;      /* --verbose: say what a wait waits for, even without a terminal */
    int quiet;        /* --quiet: never */
    int help;
    int wait_mode;               /* --notify (default), --fair, --no-notify: enum lockcore_wait_mode */
    int wait_mode_set;           /* one of them was given */
    int backoff;                 /* --backoff: enum lockcore_backoff */
    uint64_t retry_delay_max_ms; /* --retry-delay-max; 0 = lockcore's default */
    const char *password_file;   /* --password-file */
    const char *cacert, *cert, *key, *tls_server_name; /* TLS to rediss:// nodes */
    unsigned permits;    /* --permits N: a permit of a semaphore of N; 0 = a lock */
    int reentrant;       /* --reentrant, and run of one resource: a reentrant lock, joined
                            by nested runs of the resource */
    int rw;              /* --read, --write: a side of a read-write lock (enum below) */
    const char *lock_id; /* acquire --reentrant RESOURCE LOCK_ID: the hold to re-enter */
};

/* args.rw */
enum { RW_NONE = 0, RW_READ = 1, RW_WRITE = 2 };

/* The resources a command names: one, or a set (a multi-resource lock). */
struct target {
    const char *names[LOCKCORE_MULTI_MAX];
    size_t n;
};

/* The kind of a lock, as FENCELOCK_LOCK_KIND and the JSON's "kind" name
 * it: plain, reentrant, multi, read, write, permit. */
const char *fencelock_kind(const struct lockcore_lock *l);

/* The client's message for a failure rc, or the code's name where the
 * message has nothing to say about it (never a "success" left over). */
const char *fencelock_errtext(const lockcore_client *c, int rc);

/* Say "fencelock: WHAT: message" on stderr; returns rc's exit code. */
int fencelock_fail(lockcore_client *c, const char *what, int rc);

/* Acquire the target as the arguments say (a plain lock, a permit, a
 * set, a side of a read-write lock, a reentrant hold), and while a plain
 * or reentrant acquisition waits for another holder, say so on stderr (at
 * a terminal, or --verbose; never with --quiet). */
int fencelock_acquire(lockcore_client *c, const struct args *a, const struct target *t,
                      struct lockcore_lock *out);

/* A duration: digits and an optional unit (ms, s, m, h); a bare number is
 * ms. Returns 0, or -1 for anything else. */
int fencelock_parse_duration(const char *s, uint64_t *out);

/* CLOCK_REALTIME in ms since the epoch. */
uint64_t fencelock_wall_ms(void);

/* Print j as one line on stdout and release it (NULL: out of memory). */
void fencelock_print_json(json_t *j);

/* `run`: acquire the target, run cmd under it (tools/cmd_run.c). Returns
 * the exit code. */
int fencelock_run(lockcore_client *c, const struct args *a, const struct target *t, char **cmd);

#endif
