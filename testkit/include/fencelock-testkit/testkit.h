/*
 * fencelock-testkit: the test kit fencelock's own tests use, installed for
 * yours. It starts real redis-server nodes and storage-guard processes on
 * free 127.0.0.1 ports, each in a temporary directory, stops, kills,
 * pauses and restarts them by the PID it started, moves a node's clock
 * (libfaketime), puts a delaying or dropping TCP proxy in front of any
 * port, speaks HTTP to storage-guard, reads storage-guard's audit log and
 * checks it.
 *
 * Works with any C test framework: every function returns a plain int (0,
 * a negative errno, or for the checkers the number of violations) and
 * never calls into a test framework. Unlike fencelock's libraries, the kit
 * prints why a start-up failed on stderr: it is test code, and the message
 * is for the person reading the test log.
 *
 * Prefixes: hp_ child processes, rh_ redis-server nodes, fp_ the fault
 * proxy, hc_ the HTTP client, tk_sg_ storage-guard, tk_log_ and tk_check_
 * its audit log, tk_pg_ a PostgreSQL cluster.
 *
 * Link with `pkg-config --cflags --libs fencelock-testkit`. A process that
 * uses the kit must not reap children it did not start itself with
 * waitpid(-1, ...): the kit reaps its own by PID.
 *
 * Thread safety: hp_ calls may be made from any thread; one rh_cluster,
 * fp_proxy, tk_sg or tk_pg is used by one thread at a time.
 */
#ifndef FENCELOCK_TESTKIT_H
#define FENCELOCK_TESTKIT_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include <hiredis/hiredis.h>
#include <jansson.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ---- proc ------------------------------------------------------ */

/*
 * Child processes for tests: start one with its output in a log file, stop
 * it by the PID we got, and never leave it running. Every child started here
 * is SIGKILLed when the test process exits (atexit) or dies (PR_SET_PDEATHSIG),
 * and only ever by its own PID.
 */

/*
 * Start argv[0] (searched in PATH) with argv, the environment plus
 * env_extra ("NAME=value" strings, NULL-terminated; may be NULL), stdin from
 * /dev/null and stdout+stderr appended to log_path (NULL: inherited).
 * Returns the PID, or a negative errno (and prints why on stderr).
 */
pid_t hp_spawn(char *const argv[], char *const env_extra[], const char *log_path);

/* Like hp_spawn, and when in_fd / out_fd are not NULL, the child's stdin /
 * stdout are pipes whose other ends are written there (close-on-exec; the
 * caller closes them). stderr still goes to log_path. */
pid_t hp_spawn_io(char *const argv[], char *const env_extra[], const char *log_path, int *in_fd, int *out_fd);

/* Send sig to pid. SIGKILL and SIGTERM also reap it (SIGTERM waits up to
 * timeout_ms, then SIGKILLs). Returns 0 or a negative errno. */
int hp_signal(pid_t pid, int sig, int timeout_ms);

/* Wait up to timeout_ms for pid to exit; *status gets waitpid's status.
 * Returns 0, -ETIMEDOUT (still running) or a negative errno. */
int hp_wait(pid_t pid, int timeout_ms, int *status);

/* Monotonic milliseconds, and a sleep in milliseconds. */
long long hp_now_ms(void);
void hp_sleep_ms(long ms);

/* One line (printf-style, at most 1 KiB, newline added) written to fd with
 * one write(): to an O_APPEND log shared by processes, a process killed -9
 * leaves whole lines only. 0, or -1 if the write failed. */
int hp_log_line(int fd, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Run argv (as hp_spawn, output appended to log_path) to its end, at most
 * timeout_ms (then it is killed by its PID). Returns its exit status, or
 * -1 if it could not start, was killed by a signal or ran out of time. */
int hp_run(char *const argv[], const char *log_path, int timeout_ms);

/* A self-signed P-256 certificate for 127.0.0.1 (CN and subjectAltName),
 * valid two days, made with openssl(1): dir/NAME-cert.pem and
 * dir/NAME-key.pem (mode 0600), their paths into cert and key (cap bytes
 * each). openssl's output goes to dir/openssl.log. Returns 0 or -1. */
int hp_self_signed(const char *dir, const char *name, char *cert, char *key, size_t cap);

/* ---- redis harness --------------------------------------------- */

/*
 * A test harness that runs real redis-server processes on free 127.0.0.1
 * ports, each in its own temporary directory, and lets a test stop, kill,
 * restart (with or without data), pause and resume them, or move one
 * node's wall clock (libfaketime).
 *
 * Processes are only ever signalled by the PID the harness started. They
 * are also killed when the test process exits (atexit) or dies (the
 * children ask the kernel for SIGKILL when their parent thread ends), so a
 * failed or crashed test leaves nothing behind.
 *
 * Errors: functions returning int give 0 or a negative errno, and print
 * why on stderr (this is test code: the message is for the person reading
 * the test log).
 */

struct rh_options {
    const char *user;     /* ACL user (needs password); NULL: default user */
    const char *password; /* NULL: no authentication */
    int persistent;       /* 1: appendonly yes, appendfsync always */
    int faketime;         /* 1: run under libfaketime; see rh_clock_offset() */
    const char *server;   /* redis-server binary; default $REDIS_SERVER or "redis-server" */
    /* TLS: with tls_cert, each node also listens with TLS on a port of its
     * own, and rh_url() names that port as rediss://. The plain port stays
     * open for the harness's own connection (rh_command). PEM paths, copied. */
    const char *tls_cert;
    const char *tls_key;
    const char *tls_ca;   /* CA the nodes verify client certificates with */
    int tls_auth_clients; /* 1: nodes require a client certificate */
};

void rh_options_init(struct rh_options *o);

struct rh_cluster;

/* Start n (1..16) nodes. o may be NULL for the defaults. */
int rh_cluster_start(int n, const struct rh_options *o, struct rh_cluster **out);

/* Kill every node (by PID), remove their directories, free. Accepts NULL. */
void rh_cluster_free(struct rh_cluster *c);

int rh_size(const struct rh_cluster *c);
int rh_port(const struct rh_cluster *c, int i);
int rh_tls_port(const struct rh_cluster *c, int i); /* 0 without TLS */
pid_t rh_pid(const struct rh_cluster *c, int i);    /* 0 while the node is down */
const char *rh_dir(const struct rh_cluster *c, int i);

/* "redis://[user:password@]127.0.0.1:port", valid until rh_cluster_free. */
const char *rh_url(const struct rh_cluster *c, int i);

/* Run a command on node i over the harness's own connection (authenticated,
 * db 0), reconnecting if needed. Returns the reply (free it with
 * freeReplyObject) or NULL if the node cannot be reached. */
redisReply *rh_command(struct rh_cluster *c, int i, const char *fmt, ...);

/* Shorthands for tests that look at one key on the nodes. A node that is
 * down reads as "" / -2. */
void rh_get(struct rh_cluster *c, int i, const char *key, char *out, size_t cap); /* "" if none */
long long rh_pttl(struct rh_cluster *c, int i, const char *key);                  /* -2 if none */
int rh_set(struct rh_cluster *c, int i, const char *key, const char *val);        /* SET ... PX 60000 */
unsigned rh_holders(struct rh_cluster *c, const char *key, const char *val);      /* nodes where key == val */

/* FLUSHALL on every running node. */
int rh_flushall(struct rh_cluster *c);

/* SIGKILL node i and reap it. */
int rh_kill(struct rh_cluster *c, int i);

/* Start node i again on its port; keep_data 0 wipes its directory first
 * (a node restarted without its data). Kills it first if it runs. */
int rh_restart(struct rh_cluster *c, int i, int keep_data);

/* SIGSTOP / SIGCONT node i. */
int rh_pause(struct rh_cluster *c, int i);
int rh_resume(struct rh_cluster *c, int i);

/* Move node i's wall clock by offset_s seconds from real time (needs
 * faketime in the options). Redis reads the change within about 2 s; this
 * call waits until the node's TIME shows it, up to 10 s. */
int rh_clock_offset(struct rh_cluster *c, int i, long offset_s);

/* A free TCP port on 127.0.0.1 (bound and released: another process may
 * take it before the caller does, so callers retry on EADDRINUSE). */
int rh_free_port(void);

/* Make a fresh temporary directory "/tmp/fencelock-<tag>-XXXXXX" into buf;
 * rh_rmtree removes a directory tree. */
int rh_mkdtemp(const char *tag, char *buf, size_t cap);
int rh_rmtree(const char *dir);

/* ---- fault proxy ----------------------------------------------- */

/*
 * A fault-injecting TCP proxy on 127.0.0.1, for tests: clients connect to
 * fp_port(), the proxy connects each of them to 127.0.0.1:target_port and
 * forwards bytes both ways, delayed, held or dropped as the test says.
 * It runs in its own thread; every setting takes effect at once, and bytes
 * already waiting keep the delay they were read with.
 */

enum fp_dir {
    FP_UP = 1,   /* client -> server */
    FP_DOWN = 2, /* server -> client */
    FP_BOTH = 3,
};

struct fp_proxy;

/* Start a proxy to 127.0.0.1:target_port on a free port. Returns 0 or a
 * negative errno. */
int fp_new(int target_port, struct fp_proxy **out);

/* Stop the thread, close every connection, free. Accepts NULL. */
void fp_free(struct fp_proxy *p);

int fp_port(const struct fp_proxy *p);

/* Delay bytes in the given direction(s) by ms (0: none). */
void fp_set_delay(struct fp_proxy *p, enum fp_dir dir, int ms);

/* Hold (1) or release (0) bytes in the given direction(s): held bytes are
 * buffered, not lost, and go on when released. */
void fp_set_hold(struct fp_proxy *p, enum fp_dir dir, int on);

/* Drop (1) bytes in the given direction(s): read and thrown away while on. */
void fp_set_drop(struct fp_proxy *p, enum fp_dir dir, int on);

/* Close every connection now (a network failure); new ones are accepted.
 * Bytes the proxy held or delayed on them are lost. Returns once the proxy
 * has closed them (up to 2 s). */
void fp_reset(struct fp_proxy *p);

/* Close the client side of every connection now, but let what the proxy
 * already read from those clients reach the server delay_ms from now (in
 * order; no hold applies to it any more), as bytes in flight do when a
 * connection dies: a request or rollback sent on a connection its client
 * then gave up arrives after the client has reconnected. The server's
 * answers on those connections are thrown away; each closes once its
 * bytes are delivered. New connections are accepted and proxied as usual.
 * Returns once the client sides are closed (up to 2 s). */
void fp_reset_late(struct fp_proxy *p, int delay_ms);

/* Connections accepted so far. */
int fp_accepted(const struct fp_proxy *p);

/* ---- http ------------------------------------------------------ */

/*
 * A minimal HTTP/1.1 client for tests and the scenario replays: one request per
 * connection over loopback, "Connection: close", read to EOF. Every call is
 * bounded in time by socket timeouts.
 */

struct hc_response {
    int status; /* 0 if no status line arrived */
    char *head; /* status line and headers, NUL-terminated */
    char *body; /* NUL-terminated; body_len excludes the NUL */
    size_t body_len;
    json_t *json; /* the body parsed as JSON, or NULL */
};

/* Socket timeout of every call, in ms. */
#define HC_TIMEOUT_MS 15000

/*
 * Send method path (already percent-encoded) to 127.0.0.1:port with
 * extra_headers (each line ending in "\r\n"; may be NULL) and body (may be
 * NULL). Returns 0 with *r filled (caller clears), or a negative errno when
 * the connection failed or was dropped without an answer.
 */
int hc_request(uint16_t port, const char *method, const char *path, const char *extra_headers,
               const char *body, size_t body_len, struct hc_response *r);

/* Send raw bytes, then read the answer (shut_write: half-close after
 * sending). Same returns as hc_request. */
int hc_raw(uint16_t port, const char *bytes, size_t len, int shut_write, struct hc_response *r);

/* Shorthands: PUT a JSON body, GET a path. */
int hc_put(uint16_t port, const char *path, const char *json_body, const char *extra_headers,
           struct hc_response *r);
int hc_get(uint16_t port, const char *path, struct hc_response *r);

/* The value of header name (case-insensitive) copied into buf, or NULL. */
const char *hc_header(const struct hc_response *r, const char *name, char *buf, size_t cap);

/* Percent-encode every byte of [s, s+len) that is not unreserved. The
 * result is malloc'ed. */
char *hc_escape(const char *s, size_t len);

void hc_response_clear(struct hc_response *r);

/* ---- storage-guard ------------------------------------------------ */

/*
 * A storage-guard process in a temporary directory of its own (database,
 * port file, log), on a free 127.0.0.1 port that it keeps across restarts.
 */
struct tk_sg_options {
    const char *exe;               /* storage-guard binary; default $SG_EXE, else
                                      "storage-guard" searched in PATH. Copied */
    int unfenced;                  /* 1: --unfenced (accept every write) */
    const char *log_level;         /* --log-level; default "info". Copied */
    const char *const *extra_args; /* more arguments, NULL-terminated; may be
                                      NULL. Copied */
    int start_timeout_ms;          /* wait for the port file; default 15000 */
    const char *dir;               /* an existing directory of the caller's to run
                                      in (kept by tk_sg_free); default a new
                                      temporary one. Copied */
    const char *db;                /* --db: a file or a postgresql:// URL (see
                                      tk_pg_url); default records.db in its
                                      directory. Copied */
};

void tk_sg_options_init(struct tk_sg_options *o);

struct tk_sg;

/* Start storage-guard (o may be NULL for the defaults) and wait until it
 * has written its port. Writes *out only on success. Returns 0, -EINVAL,
 * -ENOMEM, -ETIMEDOUT (no port in time) or -ECHILD (it exited at start-up;
 * its log is printed on stderr). */
int tk_sg_start(const struct tk_sg_options *o, struct tk_sg **out);

/* SIGTERM and wait up to 20 s (then SIGKILL). Returns 0 if it exited with
 * status 0, -ETIMEDOUT if it had to be killed, -ECHILD for another exit
 * status, -ESRCH if it was not running. */
int tk_sg_stop(struct tk_sg *s);

/* Wait up to timeout_ms for it to exit after a signal the caller sent to
 * tk_sg_pid() (e.g. SIGINT); *status (may be NULL) gets waitpid's status.
 * Returns 0, -ETIMEDOUT (still running) or -ESRCH (not running). */
int tk_sg_wait(struct tk_sg *s, int timeout_ms, int *status);

/* SIGKILL and reap (a crash: kill -9). Returns 0 or -ESRCH. */
int tk_sg_kill(struct tk_sg *s);

/* SIGSTOP / SIGCONT. tk_sg_pause returns once every thread of the process
 * has stopped (kill() returns before they have). Return 0, -ESRCH, or
 * -ETIMEDOUT (not stopped within 5 s). */
int tk_sg_pause(struct tk_sg *s);
int tk_sg_resume(struct tk_sg *s);

/* Start it again with the same database on the same port (killed first if
 * it runs). Returns as tk_sg_start. */
int tk_sg_restart(struct tk_sg *s);

/* Kill it if it runs, remove its directory (unless $SG_KEEP_TMP is set),
 * free. Accepts NULL. */
void tk_sg_free(struct tk_sg *s);

uint16_t tk_sg_port(const struct tk_sg *s);
pid_t tk_sg_pid(const struct tk_sg *s); /* 0 while it is down */
/* Valid until tk_sg_free: its directory, database (path or URL) and stderr
 * log. */
const char *tk_sg_dir(const struct tk_sg *s);
const char *tk_sg_db(const struct tk_sg *s);
const char *tk_sg_log(const struct tk_sg *s);

/* ---- storage-guard's audit log ------------------------------------ */

/* One row of GET /v1/log (see docs/storage-guard.md). Absent numbers are 0. */
struct tk_log_entry {
    uint64_t seq;
    uint64_t time_ms;
    char op[16];      /* write, delete, check, read, reset */
    char outcome[16]; /* accepted, stale, mismatch, aborted, not_found */
    char *key;        /* owned by the log */
    char *resource;   /* owned by the log */
    uint64_t token;
    uint64_t last_token;
    uint64_t version; /* accepted rows only */
    uint64_t batch;
};

struct tk_log {
    struct tk_log_entry *entries; /* in seq order */
    size_t n;
};

/* Read the whole audit log of the storage-guard on 127.0.0.1:port (only the
 * rows of resource, unless NULL), page by page, into *out (caller clears
 * it with tk_log_clear). Returns 0, -EINVAL, -ENOMEM, -EPROTO (an answer
 * that is not the log) or the HTTP client's negative errno. */
int tk_log_fetch(uint16_t port, const char *resource, struct tk_log *out);

/* Free the rows and zero *log. Accepts NULL. */
void tk_log_clear(struct tk_log *log);

/*
 * The checkers return 0 when the property holds, the number of violations
 * when it does not (msg, if not NULL, gets the first one described), or
 * -EINVAL for bad arguments.
 */

/* No stale write accepted: per resource, the tokens of accepted rows never
 * decrease in seq order. */
int tk_check_no_stale_write(const struct tk_log *log, char *msg, size_t cap);

/* A write the client saw answered 200: key, the version and the token the
 * answer carried. Borrowed by the checker. */
struct tk_ack {
    const char *key;
    uint64_t version;
    uint64_t token;
};

/* No acknowledged write lost: each ack has an accepted write row in the log
 * with its key, version and token, and the log shows each (key, version)
 * accepted once only. */
int tk_check_no_ack_lost(const struct tk_log *log, const struct tk_ack *acks, size_t n, char *msg,
                         size_t cap);

/* ---- PostgreSQL ---------------------------------------------------- */

/*
 * A throwaway PostgreSQL cluster: initdb in a temporary directory, the
 * postmaster on a free 127.0.0.1 port (no Unix socket), trust
 * authentication, superuser "fencelock", database "postgres", fsync on.
 * initdb and postgres refuse to run as root: when the test runs as root,
 * they run as os_user, who gets the directory. The postmaster is stopped by
 * the PID the kit started, and killed with the test process like every
 * child of the kit.
 */
struct tk_pg_options {
    const char *bindir;          /* where initdb and postgres are; default
                                    $PG_BINDIR, else /usr/lib/postgresql/15/bin
                                    (Debian's) if it has them, else PATH. Copied */
    const char *os_user;         /* as root: run the server as this user; default
                                    "postgres", else "nobody" */
    const char *const *settings; /* more server settings, "name=value" (-c),
                                    NULL-terminated; may be NULL. Copied */
    int start_timeout_ms;        /* wait for connections; default 30000 */
};

void tk_pg_options_init(struct tk_pg_options *o);

struct tk_pg;

/* initdb and start the server (o may be NULL for the defaults), and wait
 * until it accepts connections. Writes *out only on success. Returns 0,
 * -EINVAL, -ENOMEM, -ENOENT (no user to run as), -ECHILD (initdb or the
 * server failed; the log is printed on stderr) or -ETIMEDOUT. */
int tk_pg_start(const struct tk_pg_options *o, struct tk_pg **out);

/* Stop the server: immediate 0 is a fast shutdown (SIGINT: sessions ended,
 * a checkpoint); 1 an immediate one (SIGQUIT: no checkpoint, so the next
 * start replays the WAL, as after a crash). Waits up to 30 s, then
 * SIGKILLs. Returns 0, -ETIMEDOUT or -ESRCH (not running). */
int tk_pg_stop(struct tk_pg *p, int immediate);

/* Stop it as tk_pg_stop (if it runs) and start it again with the same data
 * on the same port. Returns as tk_pg_start. */
int tk_pg_restart(struct tk_pg *p, int immediate);

/* Run SQL (one statement or several) in database "postgres" as the
 * superuser, on a connection of its own. Returns 0, -EINVAL, -ECONNREFUSED
 * or -EIO (the error is printed on stderr). */
int tk_pg_exec(struct tk_pg *p, const char *sql);

/* Kill it if it runs, remove its directory (unless $FENCELOCK_KEEP_TMP is
 * set), free. Accepts NULL. */
void tk_pg_free(struct tk_pg *p);

uint16_t tk_pg_port(const struct tk_pg *p);
pid_t tk_pg_pid(const struct tk_pg *p); /* 0 while it is down */
/* Valid until tk_pg_free: "postgresql://fencelock@127.0.0.1:PORT/postgres",
 * the cluster's directory (data/ and postgres.log in it) and the log. */
const char *tk_pg_url(const struct tk_pg *p);
const char *tk_pg_dir(const struct tk_pg *p);
const char *tk_pg_log(const struct tk_pg *p);

#ifdef __cplusplus
}
#endif

#endif
