/*
 * storage-guard: a sample HTTP/JSON record store, on SQLite or PostgreSQL,
 * that refuses writes carrying a fencing token older than the last one it
 * admitted for the resource. See docs/storage-guard.md.
 */
#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <netdb.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fencehttp/fencehttp.h>

#include "http.h"
#include "store.h"
#include "store_pg.h"

#ifndef SG_VERSION
#define SG_VERSION "unknown"
#endif

#define DRAIN_TIMEOUT_MS 10000

struct config {
    const char *db;
    const char *listen;
    const char *port_file;
    int threads;
    size_t max_body;
    enum fencehttp_log_level level;
    int unfenced;
    mode_t umask;
    const char *auth_file;
    long long max_ahead_ms;
    const char *tls_cert, *tls_key;
    int install;
    int check; /* --check-config */
};

static void usage(FILE *f)
{
    fprintf(f,
            "Usage: storage-guard --db PATH|URL [options]\n"
            "\n"
            "A record store over HTTP/JSON that refuses writes carrying a stale fencing token.\n"
            "\n"
            "Options:\n"
            "  --db PATH|URL       SQLite database file (created if missing), or a PostgreSQL URI\n"
            "                      postgresql://[user@]host[:port]/dbname (tables made if missing;\n"
            "                      several storage-guard processes may share it); required\n"
            "  --listen HOST:PORT  address to listen on (default 127.0.0.1:8080; port 0 picks a free one;\n"
            "                      IPv6 as [::1]:8080)\n"
            "  --port-file PATH    write the bound port to PATH once listening\n"
            "  --threads N         worker threads and database connections (default 4, 1..256)\n"
            "  --max-body BYTES    largest request body (default 1048576)\n"
            "  --log-level LEVEL   error, warn, info (default) or debug\n"
            "  --auth-file FILE    clients and their bearer tokens, one per line: TOKEN [NAME [admin]];\n"
            "                      without a known token every route but /healthz answers 401\n"
            "  --max-token-ahead DURATION\n"
            "                      refuse tokens (microsecond timestamps) further than this past the\n"
            "                      server's clock, e.g. 30s, 10m, 1h (default), 2d; 0 for no bound\n"
            "  --tls-cert FILE     serve HTTPS with this PEM certificate (chain); needs --tls-key\n"
            "  --tls-key FILE      the PEM private key of --tls-cert\n"
            "  --umask OCTAL       file mode mask of the files it creates (default 077: the database,\n"
            "                      its -wal and -shm files and the port file are 0600)\n"
            "  --install           create or upgrade the database's tables and functions (on\n"
            "                      PostgreSQL: as an installer, so that storage-guard itself may run as\n"
            "                      a member of storage_guard_runner without CREATE), then exit\n"
            "  --unfenced          accept every write, token or not, and never refuse one: the store\n"
            "                      as it is without fencing, to compare against (never in production)\n"
            "  --config FILE       read options from FILE first, one `key = value` per line (keys\n"
            "                      as the options without --; the command line overrides them)\n"
            "  --check-config      check the options, the files they name and the TLS pair, say\n"
            "                      OK (exit 0) or the first error and its line, and exit\n"
            "  --help              show this help\n"
            "  --version           show the version\n"
            "\n"
            "SIGINT or SIGTERM stops accepting connections, answers the requests in progress and exits.\n"
            "SIGHUP reads the configuration again (--config and the command line) and applies\n"
            "--auth-file, --tls-cert/--tls-key and --log-level without dropping connections; what\n"
            "does not load is refused with a log line and the one in use kept; other options take\n"
            "effect on restart.\n");
}

/* The configuration file's line being parsed ("path:N"), for messages. */
static const char *where;

static int bad(const char *what)
{
    fprintf(stderr, "storage-guard: %s%s%s\n", where ? where : "", where ? ": " : "", what);
    return 2;
}

static const struct option opts[] = {
    {"db", required_argument, NULL, 'd'},
    {"listen", required_argument, NULL, 'l'},
    {"port-file", required_argument, NULL, 'p'},
    {"threads", required_argument, NULL, 't'},
    {"max-body", required_argument, NULL, 'm'},
    {"log-level", required_argument, NULL, 'L'},
    {"help", no_argument, NULL, 'h'},
    {"version", no_argument, NULL, 'V'},
    {"unfenced", no_argument, NULL, 'U'},
    {"umask", required_argument, NULL, 'u'},
    {"auth-file", required_argument, NULL, 'a'},
    {"max-token-ahead", required_argument, NULL, 'A'},
    {"tls-cert", required_argument, NULL, 'c'},
    {"tls-key", required_argument, NULL, 'k'},
    {"install", no_argument, NULL, 'I'},
    {"config", required_argument, NULL, 'f'},
    {"check-config", no_argument, NULL, 'Q'},
    {NULL, 0, NULL, 0},
};

/* One run of getopt over argv into c: 2 on a bad option, 0 after --help
 * or --version, -1 to go on. */
static int parse_opts(int argc, char **argv, struct config *c)
{
    long long n;
    int ch;
    while ((ch = getopt_long(argc, argv, "", opts, NULL)) != -1) {
        switch (ch) {
        case 'd':
            c->db = optarg;
            break;
        case 'l':
            c->listen = optarg;
            break;
        case 'p':
            c->port_file = optarg;
            break;
        case 't':
            if (fencehttp_parse_num(optarg, 1, 256, &n) != 0)
                return bad("--threads must be 1..256");
            c->threads = (int)n;
            break;
        case 'm':
            if (fencehttp_parse_num(optarg, 1, (long long)1 << 30, &n) != 0)
                return bad("--max-body must be 1..1073741824 bytes");
            c->max_body = (size_t)n;
            break;
        case 'L':
            if (fencehttp_log_parse_level(optarg, &c->level) != 0)
                return bad("--log-level must be error, warn, info or debug");
            break;
        case 'U':
            c->unfenced = 1;
            break;
        case 'I':
            c->install = 1;
            break;
        case 'a':
            c->auth_file = optarg;
            break;
        case 'c':
            c->tls_cert = optarg;
            break;
        case 'k':
            c->tls_key = optarg;
            break;
        case 'A':
            if (fencehttp_parse_duration_ms(optarg, &c->max_ahead_ms) != 0)
                return bad("--max-token-ahead wants a duration such as 90s, 10m, 1h, 2d or 0");
            break;
        case 'u': {
            char *end = NULL;
            errno = 0;
            long v = strtol(optarg, &end, 8);
            if (errno != 0 || end == optarg || *end != '\0' || v < 0 || v > 0777)
                return bad("--umask must be an octal mode mask 0..0777");
            c->umask = (mode_t)v;
            break;
        }
        case 'f': /* read before, by fencehttp_conf_path */
            break;
        case 'Q':
            c->check = 1;
            break;
        case 'h':
            usage(stdout);
            return 0;
        case 'V':
            printf("storage-guard %s (fencelock)\n", SG_VERSION);
            return 0;
        default:
            usage(stderr);
            return 2;
        }
    }
    if (optind < argc) {
        fprintf(stderr, "storage-guard: unexpected argument '%s'\n", argv[optind]);
        return 2;
    }
    return -1;
}

static const struct config defaults = {
    .listen = "127.0.0.1:8080",
    .threads = 4,
    .max_body = 1024 * 1024,
    .level = FENCEHTTP_LOG_INFO,
    .umask = 077,
    .max_ahead_ms = 3600 * 1000,
};

/* Read --config (if argv names one), then parse its options and argv's
 * into *c from the defaults (the command line last, so that it overrides
 * the file); *conf holds the strings c points to. 2 on an error, 0 after
 * --help or --version, -1 to go on. */
static int parse_into(int argc, char **argv, void *c)
{
    return parse_opts(argc, argv, c);
}

static int load_config(int argc, char **argv, struct config *c, struct fencehttp_conf **conf)
{
    char err[768];
    *c = defaults;
    if (fencehttp_conf_load(argc, argv, opts, conf, err, sizeof(err)) != 0)
        return bad(err);
    int rc = fencehttp_conf_parse(*conf, argc, argv, parse_into, c, &where);
    if (rc >= 0)
        return rc;
    if ((c->tls_cert == NULL) != (c->tls_key == NULL)) {
        fprintf(stderr, "storage-guard: --tls-cert and --tls-key go together\n");
        return 2;
    }
    if (c->db == NULL) {
        fprintf(stderr, "storage-guard: --db PATH is required (or --db postgresql://...)\n");
        usage(stderr);
        return 2;
    }
    return -1; /* go on */
}

/* The database's name for the log: a PostgreSQL URI with its password (in
 * the user part, or as password=) shown as ***. */
static void db_name_for_log(const char *db, char *out, size_t cap)
{
    /* Up to two spans [from, to) of db to hide, in order. */
    size_t from[2] = {0, 0}, to[2] = {0, 0}, n = 0;
    if (sg_pg_is_url(db)) {
        const char *auth = strstr(db, "://") + 3;
        size_t auth_len = strcspn(auth, "/?");
        const char *at = NULL;
        for (const char *c = auth; c < auth + auth_len; c++)
            if (*c == '@')
                at = c;
        const char *colon = at ? memchr(auth, ':', (size_t)(at - auth)) : NULL;
        if (colon != NULL) {
            from[n] = (size_t)(colon + 1 - db);
            to[n++] = (size_t)(at - db);
        }
        const char *pw = strstr(auth + auth_len, "password=");
        if (pw != NULL) {
            from[n] = (size_t)(pw + 9 - db);
            to[n] = from[n] + strcspn(pw + 9, "&");
            n++;
        }
    }
    size_t len = 0, pos = 0;
    out[0] = '\0';
    for (size_t i = 0; i <= n && len < cap; i++) {
        size_t end = i < n ? from[i] : strlen(db);
        int w = snprintf(out + len, cap - len, "%.*s%s", (int)(end - pos), db + pos, i < n ? "***" : "");
        len += w > 0 ? (size_t)w : 0;
        pos = i < n ? to[i] : end;
    }
}

/* SIGHUP: the auth file again; a file that does not load, or says
 * fencelockd's rules, is refused with a log line and the clients in use
 * stay. */
static void reload_auth(const char *auth_file, sg_http *http)
{
    fencehttp_auth *a = NULL;
    if (fencehttp_load_secrets(auth_file, &a, NULL, NULL, NULL, NULL) != 0) {
        fencehttp_log(FENCEHTTP_LOG_ERROR, "SIGHUP: auth file %s refused; the clients in use stay",
                      auth_file);
    } else if (fencehttp_auth_rules(a) != 0 || sg_http_set_auth(http, a) != 0) {
        fencehttp_log(
            FENCEHTTP_LOG_ERROR,
            "SIGHUP: auth file %s refused (fencelockd's rules, or out of memory); the clients in use "
            "stay",
            auth_file);
        fencehttp_auth_free(a);
    } else {
        fencehttp_log(FENCEHTTP_LOG_INFO, "SIGHUP: auth file %s reloaded, %zu clients", auth_file,
                      fencehttp_auth_count(a));
    }
}

/* Say which options a reload changed but cannot apply while serving. */
static void restart_note(const struct config *run, const struct config *c)
{
    struct fencehttp_restart r = {.len = 0};
#define CHANGED(cond, name) fencehttp_restart_if(&r, cond, name)
    CHANGED(fencehttp_differ(run->db, c->db), "db");
    CHANGED(fencehttp_differ(run->listen, c->listen), "listen");
    CHANGED(fencehttp_differ(run->port_file, c->port_file), "port-file");
    CHANGED(run->threads != c->threads, "threads");
    CHANGED(run->max_body != c->max_body, "max-body");
    CHANGED(run->unfenced != c->unfenced, "unfenced");
    CHANGED(run->umask != c->umask, "umask");
    CHANGED(run->max_ahead_ms != c->max_ahead_ms, "max-token-ahead");
    CHANGED((run->auth_file == NULL) != (c->auth_file == NULL), "auth-file (given or taken away)");
    CHANGED((run->tls_cert == NULL) != (c->tls_cert == NULL), "tls-cert (given or taken away)");
#undef CHANGED
    fencehttp_restart_log(&r);
}

/* SIGHUP: read the configuration again (--config and the command line, as
 * at start) and apply, without dropping connections, the log level, the
 * auth file and the TLS certificate and key: each that does not load is
 * refused with a log line and the one in use stays; a configuration that
 * does not parse changes nothing. The rest waits for a restart. */
static void reload(int argc, char **argv, const struct config *run, sg_http *http)
{
    fencehttp_notify("RELOADING=1");
    fencehttp_log(FENCEHTTP_LOG_INFO, "SIGHUP: reading the configuration again");
    struct config c;
    struct fencehttp_conf *conf = NULL;
    if (load_config(argc, argv, &c, &conf) >= 0 || c.check || c.install) {
        fencehttp_log(FENCEHTTP_LOG_ERROR,
                      "SIGHUP: the configuration is refused (see above); nothing changes");
    } else {
        fencehttp_log_set_level(c.level); /* lines logged from now on, in every thread */
        if (run->auth_file != NULL && c.auth_file != NULL)
            reload_auth(c.auth_file, http);
        if (run->tls_cert != NULL && c.tls_cert != NULL)
            sg_http_reload_tls(http, c.tls_cert, c.tls_key);
        restart_note(run, &c);
    }
    fencehttp_conf_free(conf);
    fencehttp_notify("READY=1");
}

/* --install: open the database as the store does (which creates or
 * upgrades what is missing or older, in one transaction), then exit. */
static int install(const struct config *c)
{
    char db_name[512], err[512] = "";
    db_name_for_log(c->db, db_name, sizeof(db_name));
    umask(c->umask);
    sg_store_pool *pool = NULL;
    int rc = sg_store_pool_open(c->db, 1, &pool, err, sizeof(err));
    if (rc != 0) {
        fencehttp_log(FENCEHTTP_LOG_ERROR, "database %s: %s", db_name, err);
        return 1;
    }
    sg_store_pool_close(pool);
    fencehttp_log(FENCEHTTP_LOG_INFO, "database %s: installed, up to date", db_name);
    return 0;
}

int main(int argc, char **argv)
{
    struct config c;
    struct fencehttp_conf *conf = NULL;
    int rc = load_config(argc, argv, &c, &conf);
    if (rc >= 0) {
        fencehttp_conf_free(conf);
        return rc;
    }
    fencehttp_log_set_program("storage-guard");
    fencehttp_log_set_level(c.level);

    struct sockaddr_storage ss;
    socklen_t ss_len = 0;
    if (fencehttp_resolve(c.listen, &ss, &ss_len) != 0) {
        fprintf(stderr, "storage-guard: bad --listen '%s' (want HOST:PORT)\n", c.listen);
        fencehttp_conf_free(conf);
        return 2;
    }

    /* Handle SIGINT/SIGTERM in this thread only: block them before any
     * worker thread exists, so every thread inherits the mask. */
    sigset_t stop_set;
    sigemptyset(&stop_set);
    sigaddset(&stop_set, SIGINT);
    sigaddset(&stop_set, SIGTERM);
    sigaddset(&stop_set, SIGHUP); /* a reload of the auth file, not a stop */
    pthread_sigmask(SIG_BLOCK, &stop_set, NULL);
    signal(SIGPIPE, SIG_IGN);

    /* Records and the audit log are nobody else's business: the database,
     * the -wal and -shm files SQLite makes next to it, and the port file are
     * created 0600 unless --umask says otherwise. (SQLite gives -wal and -shm
     * the mode of an existing database file.) */
    umask(c.umask);
    if (c.port_file && !c.check)
        unlink(c.port_file); /* never leave a previous run's port for a reader */

    if (c.install && !c.check) {
        rc = install(&c);
        fencehttp_conf_free(conf);
        return rc;
    }

    int status = 1;
    char *tls_cert = NULL, *tls_key = NULL;
    fencehttp_auth *auth = NULL;
    sg_store_pool *pool = NULL;
    sg_http *http = NULL;
    char err[512] = "";
    if (fencehttp_load_secrets(c.auth_file, &auth, c.tls_cert, &tls_cert, c.tls_key, &tls_key) != 0)
        goto out;
    /* The lock rules are fencelockd's: a file that says them here would
     * promise limits that storage-guard does not keep. */
    if (fencehttp_auth_rules(auth) != 0) {
        fencehttp_log(FENCEHTTP_LOG_ERROR,
                      "auth file %s: read-only, resource= and prefix= are fencelockd's rules; storage-guard "
                      "takes TOKEN [NAME [admin]]",
                      c.auth_file);
        goto out;
    }
    if (c.check) { /* the database is not opened: it may be down while a configuration is checked */
        if (tls_cert != NULL && fencehttp_tls_check(tls_cert, tls_key, err, sizeof(err)) != 0) {
            fencehttp_log(FENCEHTTP_LOG_ERROR, "--tls-cert %s, --tls-key %s: %s", c.tls_cert, c.tls_key, err);
            goto out;
        }
        if (c.port_file != NULL && fencehttp_check_writable_dir(c.port_file) != 0) {
            fencehttp_log(FENCEHTTP_LOG_ERROR, "--port-file %s: its directory cannot be written (%s)",
                          c.port_file, strerror(errno));
            goto out;
        }
        printf("storage-guard: the configuration is OK\n");
        status = 0;
        goto out;
    }
    char db_name[512];
    db_name_for_log(c.db, db_name, sizeof(db_name));
    rc = sg_store_pool_open(c.db, c.threads, &pool, err, sizeof(err));
    if (rc != 0) {
        fencehttp_log(FENCEHTTP_LOG_ERROR, "database %s: %s", db_name, err);
        goto out;
    }
    struct stat sb;
    if (!sg_pg_is_url(c.db) && stat(c.db, &sb) == 0 && (sb.st_mode & 0777 & c.umask) != 0)
        fencehttp_log(FENCEHTTP_LOG_WARN,
                      "database %s is mode %04o, more open than --umask %03o allows; chmod it", c.db,
                      (unsigned)(sb.st_mode & 0777), (unsigned)c.umask);
    struct sg_http_options ho = {
        .addr = (const struct sockaddr *)&ss,
        .addr_len = ss_len,
        .threads = c.threads,
        .max_body = c.max_body,
        .pool = pool,
        .unfenced = c.unfenced,
        .auth = auth,
        .max_token_ahead_ms = c.max_ahead_ms,
        .tls_cert_pem = tls_cert,
        .tls_key_pem = tls_key,
    };
    if (c.unfenced) {
        sg_store_pool_set_unfenced(pool, 1);
        fencehttp_log(FENCEHTTP_LOG_WARN,
                      "unfenced: tokens are recorded but never checked; late writes are accepted");
    }
    rc = sg_http_start(&ho, &http, err, sizeof(err));
    if (rc != 0) {
        fencehttp_log(FENCEHTTP_LOG_ERROR, "%s: %s", c.listen, err);
        goto out;
    }
    unsigned port = sg_http_port(http);
    if (c.port_file && (rc = fencehttp_write_port_file(c.port_file, port, c.umask)) != 0) {
        fencehttp_log(FENCEHTTP_LOG_ERROR, "port file %s: %s", c.port_file, strerror(-rc));
        goto out;
    }
    fencehttp_log(FENCEHTTP_LOG_INFO, "listening on port %u (%s), database %s (%s), %d threads", port,
                  tls_cert ? "HTTPS" : "HTTP", db_name,
                  sg_pg_is_url(c.db) ? "PostgreSQL, synchronous_commit=on" : "WAL, synchronous=FULL",
                  c.threads);

    char st[128];
    snprintf(st, sizeof(st), "READY=1\nSTATUS=listening on port %u", port);
    fencehttp_notify(st);
    int sig = 0;
    while (fencehttp_wait_signal(&stop_set, &sig) == 0 && sig == SIGHUP)
        reload(argc, argv, &c, http);
    fencehttp_notify("STOPPING=1");
    fencehttp_log(FENCEHTTP_LOG_INFO, "%s: stopping", sig == SIGINT ? "SIGINT" : "SIGTERM");
    /* Every answered write is already committed with a full sync; draining
     * lets the requests in progress get their answer too. */
    sg_http_quiesce(http);
    if (sg_http_drain(http, DRAIN_TIMEOUT_MS) != 0)
        fencehttp_log(FENCEHTTP_LOG_WARN, "requests still in progress after %d ms; closing them",
                      DRAIN_TIMEOUT_MS);
    status = 0;
out:
    sg_http_stop(http);
    sg_store_pool_close(pool);
    fencehttp_free_secrets(auth, tls_cert, tls_key);
    if (status == 0 && c.port_file && !c.check)
        unlink(c.port_file);
    if (status == 0 && !c.check)
        fencehttp_log(FENCEHTTP_LOG_INFO, "stopped");
    fencehttp_conf_free(conf);
    return status;
}
