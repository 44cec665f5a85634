/*
 * What every command of fencelock shares, below the commands themselves
 * (tools/cmd_<name>.c, dispatched from the table in tools/fencelock.c):
 * the parsed options and their parser (cli_args.c), the client, the exit
 * codes and error messages, the JSON printer and the acquisition with its
 * wait notice (cli.c), and a command run under a held lock (job.c). Nothing
 * here calls a command. Private to the fencelock program.
 */
#ifndef FENCELOCK_CLI_H
#define FENCELOCK_CLI_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/types.h>

#include <fencefile/fencefile.h>
#include <jansson.h>
#include <lockcore/lockcore.h>

/* Exit codes: the command's own status when `run` ran it, else these.
 * They are part of the interface: never renumber them. fencelock_fail()
 * maps lockcore's error codes onto them (the table in docs/cli.md). */
enum {
    EXIT_OK = 0,
    EXIT_USAGE = 64,       /* bad arguments (-EINVAL) */
    EXIT_STALE = 65,       /* write, append: refused, the token is stale */
    EXIT_UNREACHABLE = 69, /* no majority in time: unreachable, or granted too slowly */
    EXIT_ERROR = 70,       /* server/protocol error, no token, out of memory, anything else */
    EXIT_NOT_HELD = 75,    /* not acquired: held by another (within --wait); a file fence busy */
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
    uint64_t max_hold_ms; /* run --max-hold: stop the job once it held the lock this long; 0 = never */
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
    uint64_t repair_to;  /* repair --to TOKEN; 0 = each node's clock */
    int force;           /* repair --force: lower the fence indeed */
    const char *value;   /* elect --value V: what the leader proclaims; NULL = "" */
    int again;           /* elect --again: after a loss, campaign again */
    int watch;           /* leader --watch: print every change */
};

/* args.rw */
enum { RW_NONE = 0, RW_READ = 1, RW_WRITE = 2 };

/* The resources a command names: one, or a set (a multi-resource lock). */
struct target {
    const char *names[LOCKCORE_MULTI_MAX];
    size_t n;
};

/* Most operands: the command's name, a set's names, a lock id. */
#define OPERANDS_MAX (LOCKCORE_MULTI_MAX + 2)

/* The command line of a lock command, parsed. */
struct cmdline {
    struct args a;
    const char *operands[OPERANDS_MAX]; /* the command's name, then its operands */
    int nops;
    int too_many; /* more operands than OPERANDS_MAX */
    char **cmd;   /* run, elect: the command to run and its arguments */
    struct target t;
    const char *id; /* extend, release: the LOCK_ID (the last operand) */
};

/* A command, as the table in fencelock.c lists it. A lock command has
 * run: the generic parser reads its arguments and makes its client; a
 * file command has main and parses its own (it needs no nodes). */
struct command {
    const char *name;
    unsigned flags;    /* CMD_* below */
    const char *usage; /* `fencelock NAME --help` (lock commands) */
    int (*run)(lockcore_client *c, const struct cmdline *cl);
    int (*main)(int argc, char **argv);
};

/* command.flags */
enum {
    CMD_TAKES_ID = 1, /* the last operand is a LOCK_ID */
    CMD_ACQUIRE = 2,  /* acquire: takes a lock that the caller keeps */
    CMD_RUN = 4,      /* run: takes a lock for a command it runs */
    CMD_PERMITS = 8,  /* --permits applies */
    CMD_REPAIR = 16,  /* repair: --to and --force apply */
    CMD_ELECT = 32,   /* elect: campaigns, and runs a command while it leads */
    CMD_LEADER = 64,  /* leader: reads an election; --watch applies */
};

/* The commands (each in its own tools/cmd_<name>.c). */
extern const char cmd_acquire_usage[], cmd_extend_usage[], cmd_release_usage[], cmd_status_usage[],
    cmd_run_usage[], cmd_repair_usage[], cmd_elect_usage[], cmd_leader_usage[];
int cmd_acquire(lockcore_client *c, const struct cmdline *cl);
int cmd_extend(lockcore_client *c, const struct cmdline *cl);
int cmd_release(lockcore_client *c, const struct cmdline *cl);
int cmd_status(lockcore_client *c, const struct cmdline *cl);
int cmd_run(lockcore_client *c, const struct cmdline *cl);
int cmd_repair(lockcore_client *c, const struct cmdline *cl);
int cmd_elect(lockcore_client *c, const struct cmdline *cl);
int cmd_leader(lockcore_client *c, const struct cmdline *cl);
/* How far a node's fence is ahead of its own clock, in ms; null if not
 * known (cmd_repair.c, used by status too). */
json_t *fencelock_fence_ahead(const struct lockcore_node_status *st);
int cmd_write(int argc, char **argv);
int cmd_append(int argc, char **argv);
int cmd_fence(int argc, char **argv);

/* ---- cli_args.c: the command line ---- */

/* The command argv names (its first operand, past the options and their
 * values), or NULL if none comes before a "--". */
const char *fencelock_command_name(int argc, char **argv);

/* A lock command (or no command, or an unknown one): parse argv, check it
 * against the command found in table[0..n), make the client and run the
 * command. Returns the exit code. */
int fencelock_lock_main(int argc, char **argv, const struct command *table, size_t n);

/* The arguments of write, append and fence. */
struct file_args {
    const char *name;      /* the command */
    const char *token_opt; /* --token, or NULL */
    const char *file;      /* the one operand */
    struct fencefile_options o;
};

/* Parse the arguments of file command name into *fa; on --help print
 * usage(stdout, name). Returns -1 to go on, or the exit code (after saying
 * why). */
int fencelock_file_args(int argc, char **argv, const char *name, void (*usage)(FILE *, const char *),
                        struct file_args *fa);

/* ---- cli.c: what the commands share ---- */

/* write, append, fence: open the fence store fa asks for into *h. Returns
 * -1 to go on, or the exit code (after saying why). */
int fencelock_file_open(const struct file_args *fa, fencefile **h);

/* write, append, fence: the exit code of fencefile's rc (after saying why
 * it failed); frees h. */
int fencelock_file_done(fencefile *h, int rc);

/* A duration: digits and an optional unit (ms, s, m, h); a bare number is
 * ms. Returns 0, or -1 for anything else. */
int fencelock_parse_duration(const char *s, uint64_t *out);

/* CLOCK_REALTIME in ms since the epoch. */
uint64_t fencelock_wall_ms(void);

/* Print j as one line on stdout and release it (NULL: out of memory). */
void fencelock_print_json(json_t *j);

/* lockcore's error code rc as an exit code (EXIT_*). */
int fencelock_exit_code(int rc);

/* The client's message for a failure rc, or the code's name where the
 * message has nothing to say about it (never a "success" left over). */
const char *fencelock_errtext(const lockcore_client *c, int rc);

/* Say "fencelock: WHAT: message" on stderr; returns rc's exit code. */
int fencelock_fail(lockcore_client *c, const char *what, int rc);

/* fencelock_fail for a failed acquisition of the target: a writer refused
 * by readers is told how many readers hold the lock. */
int fencelock_acquire_failed(lockcore_client *c, const struct args *a, const struct target *t, int rc);

/* The TTL a client made from these arguments uses: --ttl, else lockcore's
 * default. */
uint64_t fencelock_ttl_ms(const struct args *a);

/* Who holds a lock, for `status`: {"host","pid","cmd","acquired_at"} into
 * buf (at most LOCKCORE_INFO_MAX bytes; cmd is cut to fit), "" if out of
 * memory. */
void fencelock_holder_info(char *buf, size_t cap, pid_t pid, const char *cmd);

/* The command line of process pid, arguments joined by spaces ("" if it
 * cannot be read). */
void fencelock_process_cmdline(pid_t pid, char *buf, size_t cap);

/* The quorum-th largest of v[0..m) (sorts v): what at least a majority of
 * the nodes report (0 if fewer than quorum values). */
int64_t fencelock_quorum_th(int64_t *v, int m, int quorum);

/* The index of a node holding the id a majority holds (one with holder
 * info if any has it), or -1; *remaining gets how long that majority
 * lasts: the quorum-th longest remaining TTL among its nodes. */
int fencelock_majority_of(const struct lockcore_node_status *st, int n, int quorum, int64_t *remaining);

/* The kind of a lock, as FENCELOCK_LOCK_KIND and the JSON's "kind" name
 * it: plain, reentrant, multi, read, write, permit, leader. */
const char *fencelock_kind(const struct lockcore_lock *l);

/* The id of a reentrant hold of resource that this process may join (the
 * one of a `run` it runs under), else NULL. */
const char *fencelock_joinable_id(const char *resource);

/* Acquire the target as the arguments say (a plain lock, a permit, a
 * set, a side of a read-write lock, a reentrant hold), and while a plain
 * or reentrant acquisition waits for another holder, say so on stderr (at
 * a terminal, or --verbose; never with --quiet). */
int fencelock_acquire(lockcore_client *c, const struct args *a, const struct target *t,
                      struct lockcore_lock *out);

/* extend, release: the record of the lock cl names, which another process
 * acquired (known by its id; see cli.c). Returns -1 with *l made, or the
 * exit code after saying why not ("fencelock: WHAT: ..."). */
int fencelock_lock_for(lockcore_client *c, const struct cmdline *cl, const char *what,
                       struct lockcore_lock *l);

/* When a lock's validity began (the start of the round that granted or
 * extended it: validity_ms counts from there) and when it ends, on
 * CLOCK_MONOTONIC (lockcore_now_ms, Python's time.monotonic) and on the
 * wall clock (ms since the epoch, derived from the monotonic ones). */
struct lock_times {
    uint64_t granted_mono_ms, granted_wall_ms, valid_until_mono_ms, valid_until_wall_ms;
};
void fencelock_lock_times(const struct lockcore_lock *l, struct lock_times *t);

/* The four times as JSON members (a new object): "granted_mono_ms",
 * "granted_wall_ms", "valid_until_mono_ms", "valid_until_wall_ms"; null
 * if l is NULL (not held). */
json_t *fencelock_times_json(const struct lockcore_lock *l);

/* What acquire, extend and release print first (a new object): "resource"
 * or "resources", and the kind unless it is a plain lock or a permit. */
json_t *fencelock_lock_head(const struct target *t, const char *resource, const struct lockcore_lock *l);

/* Add the members of b to a (a JSON object), release b; returns a. */
json_t *fencelock_merged(json_t *a, json_t *b);

/* ---- job.c: a command run under a held lock (run, elect) ---- */

/* What became of a job's lock while the job ran. */
struct job_report {
    int leader;    /* elect: the messages speak of leadership, not of a lock */
    int lost_rc;   /* 0 while held; else why it was lost */
    int announced; /* the loss (or --max-hold) was reported while the job still ran */
    int max_hold;  /* the job was stopped at --max-hold (the lock was not lost) */
    char why[1200];
};

/* Catch SIGINT, SIGTERM and SIGHUP (unless ignored when fencelock
 * started) and SIGCHLD: each wakes fencelock_wait_events at once. Returns
 * 0, or -errno if the pipe that wakes it cannot be made. */
int fencelock_catch_signals(void);

/* The signal caught and not yet passed on to a job (0: none), cleared; and
 * the last one caught at all. */
int fencelock_signal_pending(void);
int fencelock_signal_received(void);

/* Wait up to timeout_ms for a node's answer, a timer of the client or a
 * caught signal, and run what is due (keep-alives, callbacks). */
void fencelock_wait_events(lockcore_client *c, int timeout_ms);

/* A keep-alive's on_lost for a job's lock: arg is the job's report. */
void fencelock_job_lost(lockcore_client *c, int rc, const struct lockcore_lock *l, void *arg);

/* "exited with status 3" / "was killed by signal 9 (Killed)" */
void fencelock_describe_status(int status, char *buf, size_t cap);

/*
 * Run cmd in a process group of its own with l's variables in its
 * environment (FENCELOCK_TOKEN, ..., FENCELOCK_EPOCH for a leader's lock;
 * with undo_reason, --undo's FENCELOCK_UNDO_REASON and
 * FENCELOCK_JOB_STATUS = job_code), a guardian that stops it if fencelock dies, and caught signals passed on
 * to it; until it ends. k keeps l alive (NULL: nothing to watch): when it is lost (its on_lost,
 * fencelock_job_lost with rep, or its validity run out) or at stop_at (lockcore_now_ms(); 0: never), the
 * group gets SIGTERM, then SIGKILL after --kill-after. Then whatever is
 * left in the group is stopped the same way. Returns 0 with *status the
 * job's wait status, or -1 if it could not be started (said why).
 * fencelock_catch_signals must have been called.
 */
int fencelock_job_run(lockcore_client *c, const struct args *a, lockcore_keepalive *k,
                      const struct lockcore_lock *l, char **cmd, const char *undo_reason, int job_code,
                      uint64_t stop_at, struct job_report *rep, int *status);

/* After the job named name ended with status: a loss not seen while it ran
 * into rep (*l gets k's lock), and on stderr how it ended when it failed
 * or the lock was lost. Returns its exit code as run reports it (128 + N
 * for signal N). */
int fencelock_job_outcome(lockcore_client *c, lockcore_keepalive *k, struct lockcore_lock *l,
                          const char *name, int status, struct job_report *rep);

#endif
