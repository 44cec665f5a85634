/*
 * fencehttp: the HTTP/JSON server layer of fencelock's services
 * (storage-guard and fencelockd), so that both refuse the same hostile
 * requests the same way. It is program code, linked statically into both,
 * not an installed library.
 *
 * What it does for a service:
 *   - serves HTTP or HTTPS (libmicrohttpd over GnuTLS, TLS 1.2 and 1.3);
 *   - checks every request head before the service sees it: limits on the
 *     URL and the headers, NUL and control bytes, header names that are not
 *     tokens or that look like a header the service reads, conflicting
 *     framing (two Content-Lengths, Content-Length with chunked, unknown
 *     codings), a Host on HTTP/1.1, an oversize body;
 *   - bearer tokens from a file (--auth-file), checked in constant time,
 *     with the client's name handed to the service for its log;
 *   - answers every refusal as JSON {"error": code, "message": text};
 *   - lets a handler answer at once, or later from another thread, without
 *     holding a thread while it waits (long polling);
 *   - one log line per event on stderr, and the start-up chores of a
 *     daemon (--listen, --port-file, PEM files).
 *
 * Prefixes: fencehttp_ public, fencehttp__ internal. Errors are 0 or a
 * negative errno, with a message written to a caller's buffer.
 */
#ifndef FENCEHTTP_FENCEHTTP_H
#define FENCEHTTP_FENCEHTTP_H

#include <stdarg.h>
#include <signal.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/socket.h>
#include <sys/types.h>

/* ---- log ------------------------------------------------------------------ */

enum fencehttp_log_level {
    FENCEHTTP_LOG_ERROR = 0,
    FENCEHTTP_LOG_WARN,
    FENCEHTTP_LOG_INFO,
    FENCEHTTP_LOG_DEBUG,
};

/* Parse "error", "warn", "info" or "debug". Returns 0 or -EINVAL. */
int fencehttp_log_parse_level(const char *s, enum fencehttp_log_level *out);

/* The program name every line carries (a static string; default
 * "fencelock"), and the most verbose level printed (INFO until set). Call
 * both before any thread logs. */
void fencehttp_log_set_program(const char *name);
void fencehttp_log_set_level(enum fencehttp_log_level level);

/* Whether a message at level would be printed. */
int fencehttp_log_enabled(enum fencehttp_log_level level);

/* Print one line on stderr, "<UTC time> <program> <level>: <message>".
 * Thread-safe: one write per line. */
void fencehttp_log(enum fencehttp_log_level level, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* ---- auth ----------------------------------------------------------------- */

/* Shortest and longest accepted token, in bytes; longest client name. */
#define FENCEHTTP_AUTH_TOKEN_MIN 16
#define FENCEHTTP_AUTH_TOKEN_MAX 256
#define FENCEHTTP_AUTH_NAME_MAX 64

/* A rule of a client line: the resources it may name (fencelockd). */
struct fencehttp_rule {
    char *value; /* percent-decoded; NUL-terminated, may hold no NUL */
    size_t len;
    int prefix; /* "prefix=": any resource that starts with value; else "resource=": exactly it */
};

struct fencehttp_client {
    char name[FENCEHTTP_AUTH_NAME_MAX + 1];
    int named;     /* the line gave a NAME (else it is "line-N") */
    int admin;     /* the line said "admin" (an operator) */
    int read_only; /* the line said "read-only": it may only read (fencelockd) */
    /* The line's resource= and prefix= rules; none: every resource. */
    const struct fencehttp_rule *rules;
    size_t n_rules;
};

/* Which of the rules above any line of a loaded file uses. */
#define FENCEHTTP_RULE_READ_ONLY 1u
#define FENCEHTTP_RULE_RESOURCES 2u

/* A loaded set of clients; read-only once loaded, so any thread may check
 * against it. */
typedef struct fencehttp_auth fencehttp_auth;

/*
 * Load path: one client per line, "TOKEN [NAME [RULE...]]", separated by
 * spaces or tabs; empty lines and lines starting with '#' are skipped.
 * NAME defaults to "line-N" (which no NAME may be, nor a rule's word).
 * Tokens are 16..256 printable ASCII bytes
 * without spaces, each at most once; several tokens may name one client.
 * A RULE is "admin", "read-only", "resource=R" or "prefix=P" (R and P
 * percent-encoded, 1..1024 bytes decoded; at most 64 per line). Writes
 * *out only on success. Returns 0, -ENOMEM, -EINVAL (the message names
 * the line) or -errno of open/read.
 */
int fencehttp_auth_load(const char *path, fencehttp_auth **out, char *errbuf, size_t errcap);

/* The clients of a loaded set: their number, and the i-th (borrowed from
 * a), in the order of the file. */
size_t fencehttp_auth_count(const fencehttp_auth *a);
const struct fencehttp_client *fencehttp_auth_client(const fencehttp_auth *a, size_t i);

/* FENCEHTTP_RULE_* bits: the rules some line of a uses (0 for NULL). */
unsigned fencehttp_auth_rules(const fencehttp_auth *a);

/* 1 if the client's rules allow resource (len bytes): it has no resource=
 * or prefix= rule, or one matches. 0 otherwise, and for NULL. */
int fencehttp_client_allows(const struct fencehttp_client *cl, const char *resource, size_t len);

/* Free a loaded set (its tokens are wiped). Accepts NULL. */
void fencehttp_auth_free(fencehttp_auth *a);

/*
 * The client whose token the Authorization header value carries
 * ("Bearer TOKEN", scheme case-insensitive), or NULL. The header is
 * compared with every token in time independent of where they differ.
 * header may be NULL. The result is borrowed from a.
 */
const struct fencehttp_client *fencehttp_auth_check(const fencehttp_auth *a, const char *header);

/* ---- JSON answers --------------------------------------------------------- */

/* An answer. body is malloc'ed and owned by the struct; content_type and
 * allow are static strings. */
struct fencehttp_response {
    int status;
    char *body;
    size_t body_len;
    const char *content_type; /* NULL: application/json */
    const char *allow;        /* the Allow header of a 405, else NULL */
    char etag[32];            /* the ETag header ("\"3\""), empty if none */
};

/* Free the body and zero the struct. Accepts NULL. */
void fencehttp_response_clear(struct fencehttp_response *r);

/*
 * The JSON text {"error": code, "message": message}, compact, in a new
 * malloc'ed buffer (*len its length), or NULL on no memory. Bytes of the
 * message outside printable ASCII (it may quote a client's bytes) become '?'.
 */
char *fencehttp_error_json(const char *code, const char *message, size_t *len);

/* Fill *resp with status and that JSON error (on no memory, a fixed 500
 * body). Returns status. */
int fencehttp_error(struct fencehttp_response *resp, int status, const char *code, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
int fencehttp_verror(struct fencehttp_response *resp, int status, const char *code, const char *fmt,
                     va_list ap) __attribute__((format(printf, 4, 0)));

/*
 * Decode percent-encoding of [s, s+len) into a new buffer (*out, *out_len;
 * NUL-terminated, caller frees). Returns 0, -EINVAL for a bad escape or a
 * decoded NUL byte, -ENOMEM.
 */
int fencehttp_decode(const char *s, size_t len, char **out, size_t *out_len);

/* A text answer built piece by piece (/metrics): p is malloc'ed, NUL-
 * terminated, len long; oom is set (and p freed) if memory ran out. Start
 * from {0}. */
struct fencehttp_text {
    char *p;
    size_t len, cap;
    int oom;
};

/* Append printf-style text. */
void fencehttp_text_printf(struct fencehttp_text *t, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* ---- the server ----------------------------------------------------------- */

/* Most query arguments of a request; more are refused with 400. */
#define FENCEHTTP_ARGS_MAX 32

/* One query argument as received: still percent-encoded. Borrowed. */
struct fencehttp_arg {
    const char *name;
    const char *value; /* NULL for "?name" without '=' */
};

/* A request in progress: its connection, its headers, and the way to
 * answer it later. */
typedef struct fencehttp_conn fencehttp_conn;

/* A request whose head passed every check and whose body is in. Every
 * pointer is borrowed for the handler call. */
struct fencehttp_request {
    const char *method;
    const char *path; /* still percent-encoded, without the query */
    const struct fencehttp_arg *args;
    size_t n_args;
    const char *body; /* not NUL-terminated; NULL when empty */
    size_t body_len;
    int body_too_large;                    /* over max_body (sent chunked): dropped */
    const struct fencehttp_client *client; /* with auth: who it is; else NULL */
    fencehttp_conn *conn;
};

/* What a handler returns to answer later (see fencehttp_answer_later). */
#define FENCEHTTP_LATER 1

/*
 * A service's handler. Either fill *resp and return 0 (it is sent at
 * once), or keep req->conn, return FENCEHTTP_LATER and call
 * fencehttp_answer_later(conn, ...) exactly once, from any thread, when the
 * answer is ready: the connection waits meanwhile without a thread.
 */
typedef int (*fencehttp_handler)(void *arg, const struct fencehttp_request *req,
                                 struct fencehttp_response *resp);

/* The value of header name (case-insensitive) of the request, or NULL; the
 * number of such headers in *count when count is not NULL (the value is
 * then the last one's). Only from inside the handler call. */
const char *fencehttp_header(fencehttp_conn *conn, const char *name, int *count);

/* The request's socket, to watch for the client hanging up while its
 * answer is pending (poll for POLLRDHUP); -1 if unknown. */
int fencehttp_conn_fd(fencehttp_conn *conn);

/* Answer a request whose handler returned FENCEHTTP_LATER: resp's body is
 * taken (resp is cleared). Once per such request, from any thread; after
 * the client hung up the answer is dropped. */
void fencehttp_answer_later(fencehttp_conn *conn, struct fencehttp_response *resp);

struct fencehttp_options {
    const char *name;            /* the service's name, in messages and the
                                    WWW-Authenticate realm; static */
    const struct sockaddr *addr; /* where to listen; port 0 picks one */
    socklen_t addr_len;
    int threads;                     /* threads serving connections, >= 1 */
    size_t max_body;                 /* largest accepted request body in bytes */
    const fencehttp_auth *auth;      /* borrowed until fencehttp_stop(); NULL: no authentication */
    const char *const *open_paths;   /* paths served without a token; NULL-terminated; may be NULL */
    const char *const *read_headers; /* headers the service reads: a name that is one of them with '_'
                                        for '-' is refused; NULL-terminated; may be NULL */
    unsigned max_connections;        /* 0: 1000 */
    unsigned idle_timeout_s;         /* an idle connection is closed after this; 0: 30 */
    /* 1: epoll instead of poll, for many connections (with poll, each
     * serving thread spends time in proportion to its connections on
     * every event, and accepts one connection per round). libmicrohttpd
     * 0.9.75's edge-triggered epoll can miss the end of a half-closed
     * connection whose last bytes and FIN arrive together: such a client
     * gets its answer only at the idle timeout. */
    int use_epoll;
    /* HTTPS: the certificate chain and its private key as PEM text, both
     * or neither; borrowed until fencehttp_stop(). NULL: plain HTTP. */
    const char *tls_cert_pem;
    const char *tls_key_pem;
    fencehttp_handler handler;
    void *handler_arg;
    /* Called once per answer with its status and the seconds since the
     * head was in (metrics); may be NULL. From the serving threads. */
    void (*on_answer)(void *arg, int status, double seconds);
};

typedef struct fencehttp fencehttp;

/* Start listening and serving. Writes *out only on success. Returns 0,
 * -EINVAL, -ENOMEM or -EIO (message in errbuf). */
int fencehttp_start(const struct fencehttp_options *o, fencehttp **out, char *errbuf, size_t errcap);

/* The TCP port actually bound. */
uint16_t fencehttp_port(const fencehttp *h);

/* Requests received and not yet answered (those waiting for a later answer
 * included). */
int fencehttp_in_flight(const fencehttp *h);

/* Stop accepting connections; requests already received keep being served. */
void fencehttp_quiesce(fencehttp *h);

/* Wait up to timeout_ms for requests in progress to be answered. Returns 0
 * or -ETIMEDOUT. */
int fencehttp_drain(fencehttp *h, int timeout_ms);

/* Serve from now on with the clients and tokens of auth (a reload of the
 * auth file), for a server started with an auth file; h takes auth and
 * frees it at fencehttp_stop (requests under way keep the table they were
 * checked against, so none is freed before). Returns 0, or -EINVAL
 * (NULL, or a server started without auth) or -ENOMEM, when auth is
 * still the caller's. */
int fencehttp_set_auth(fencehttp *h, fencehttp_auth *auth);

/* Serve new TLS connections from now on with this certificate chain and
 * key (PEM text; a reload of --tls-cert and --tls-key), for a server
 * started with HTTPS. Connections already open keep theirs. The pair is
 * checked first (it parses, the key is the first certificate's): a bad
 * one is refused and the one in use stays. The PEM is the caller's (the
 * server keeps its own parsed copy). Returns 0, or -EINVAL (message in
 * errbuf) or -ENOMEM. */
int fencehttp_set_tls(fencehttp *h, const char *cert_pem, const char *key_pem, char *errbuf, size_t errcap);

/* Would fencehttp_start (or fencehttp_set_tls) take this certificate chain
 * and key? For --check-config. Returns 0, or -EINVAL (message in errbuf). */
int fencehttp_tls_check(const char *cert_pem, const char *key_pem, char *errbuf, size_t errcap);

/* Stop the serving threads (each finishes the request it is running), close
 * every connection and free h. Requests waiting for a later answer must
 * have been answered. Accepts NULL. */
void fencehttp_stop(fencehttp *h);

/* ---- a daemon's start-up -------------------------------------------------- */

/* Parse a decimal in [min, max]. Returns 0 or -EINVAL. */
int fencehttp_parse_num(const char *s, long long min, long long max, long long *out);

/* A duration: digits and a unit (ms, s, m, h, d), or 0; at most 10 years.
 * Returns 0 or -EINVAL. */
int fencehttp_parse_duration_ms(const char *s, long long *out);

/* Resolve HOST:PORT (or [HOST]:PORT) to a socket address. Returns 0 or
 * -EINVAL. */
int fencehttp_resolve(const char *listen, struct sockaddr_storage *ss, socklen_t *len);

/* Read a whole small file (at most 1 MiB: a PEM file, say) into a new
 * NUL-terminated buffer. Returns 0, -EFBIG, -ENOMEM, -EIO, -EINVAL (not a
 * regular file) or -errno. */
int fencehttp_read_file(const char *path, char **out);

/* fopen(path, "r") of a regular file only: a FIFO or a device planted at
 * a configured path would block the reader (a reload, in the main thread)
 * or never end. NULL with errno set (EINVAL: not a regular file). */
FILE *fencehttp_fopen_regular(const char *path);

/* The reason for errno e (positive) of fencehttp_fopen_regular or
 * fencehttp_read_file (negated there), for a message: "not a regular
 * file" for EINVAL, else strerror's. */
const char *fencehttp_file_error(int e);

/* May this process create files in the directory of path (where
 * fencehttp_write_port_file will)? 0, or -1 with errno set. */
int fencehttp_check_writable_dir(const char *path);

/* Write the port to path atomically (a temporary from mkstemp, renamed),
 * with the mode 0666 & ~mask. Returns 0 or -errno. */
int fencehttp_write_port_file(const char *path, unsigned port, mode_t mask);

/*
 * systemd's service notifications (sd_notify(3), the protocol written out:
 * one datagram to the unix socket $NOTIFY_SOCKET, "@" for the abstract
 * namespace): send state ("READY=1", "STOPPING=1", "STATUS=..."). Without
 * $NOTIFY_SOCKET it does nothing and returns 0; else 0 or -errno.
 */
int fencehttp_notify(const char *state);

/*
 * Wait for one of the signals of set (blocked by the caller) into *sig,
 * sending "WATCHDOG=1" every half of $WATCHDOG_USEC meanwhile when systemd
 * asked for it (and $WATCHDOG_PID, if set, is this process). Returns 0.
 */
int fencehttp_wait_signal(const sigset_t *set, int *sig);

/* Load --auth-file (warning when others may read it) and --tls-cert /
 * --tls-key (warning likewise for the key): what both services do at
 * start-up. Any path may be NULL. Logs why and returns -1 on failure. */
int fencehttp_load_secrets(const char *auth_file, fencehttp_auth **auth, const char *cert_file, char **cert,
                           const char *key_file, char **key);

/* Free what fencehttp_load_secrets loaded, wiping the key. */
void fencehttp_free_secrets(fencehttp_auth *auth, char *cert, char *key);

/* A reload of --tls-cert and --tls-key: read both files and serve new
 * connections with them (fencehttp_set_tls), logging that, or why they
 * are refused and the pair in use stays. Returns 0 or -1. */
int fencehttp_reload_tls(fencehttp *h, const char *cert_file, const char *key_file);

/*
 * A service's configuration file (docs/operations.md): one option per line
 * as `key = value`, the keys the long options without "--"; `#` at the
 * start of a line or after a space starts a comment; a value may be in
 * double quotes (kept as written inside, `#` and spaces too); a flag takes
 * yes/no, true/false, on/off or 1/0 (no adds nothing: a flag the file
 * sets cannot be unset later). Each line becomes the
 * argument "--key=value" (a flag "--key", or nothing for no), to be parsed
 * with the command line's getopt_long before the command line itself, so
 * that the command line overrides the file.
 */
struct option; /* <getopt.h> */
struct fencehttp_conf_item {
    char *where; /* "path:line", for messages */
    char *arg;   /* "--key=value" or "--flag" */
};
struct fencehttp_conf {
    struct fencehttp_conf_item *items;
    size_t n;
};

/* The FILE of --config FILE or --config=FILE in argv (the last one given),
 * or NULL when there is none. Returns 0, or -EINVAL when --config has no
 * value. */
int fencehttp_conf_path(int argc, char **argv, const char **path);

/* Read path against the options of opts (a getopt_long table ending in a
 * zero entry); config, check-config, help and version cannot be keys.
 * Returns 0 with *out (free with fencehttp_conf_free), or -EINVAL /
 * -ENOMEM / -errno with "path:line: why" in errbuf. */
int fencehttp_conf_read(const char *path, const struct option *opts, struct fencehttp_conf **out,
                        char *errbuf, size_t errcap);

/* Accepts NULL. */
void fencehttp_conf_free(struct fencehttp_conf *c);

/* What a service does first: the --config of argv (fencehttp_conf_path),
 * read against opts (fencehttp_conf_read) into *out, which is NULL when
 * argv names no file. Returns 0, or non-zero with the reason in errbuf. */
int fencehttp_conf_load(int argc, char **argv, const struct option *opts, struct fencehttp_conf **out,
                        char *errbuf, size_t errcap);

/* A reload's note of the options it read changed but cannot apply while
 * serving: fencehttp_restart_if adds "--name" where changed (for two
 * strings, either NULL: fencehttp_differ); fencehttp_restart_log logs the
 * list, if any, once. */
struct fencehttp_restart {
    char list[512];
    size_t len;
};
int fencehttp_differ(const char *a, const char *b);
void fencehttp_restart_if(struct fencehttp_restart *r, int changed, const char *name);
void fencehttp_restart_log(const struct fencehttp_restart *r);

/* Parse a service's options with parse (a getopt_long loop over its argv
 * into arg: 2 for a bad option, 0 after --help or --version, -1 to go on):
 * each item of conf (may be NULL) as the argv {argv[0], item}, then argv,
 * getopt started again for each, and *where set to the item's
 * "path:line" while it is parsed (NULL for the command line). Returns the
 * first parse's answer that is not -1, else -1. */
int fencehttp_conf_parse(const struct fencehttp_conf *conf, int argc, char **argv,
                         int (*parse)(int argc, char **argv, void *arg), void *arg, const char **where);

#endif
