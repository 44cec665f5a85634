/*
 * fencelockd: fencelock's locks over HTTP/JSON, for programs in any
 * language. Stateless: a lock is named by its resource, kind and id, so any
 * instance serving the same nodes can extend or release it. See
 * docs/fencelockd.md.
 */
#include <errno.h>
#include <getopt.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <fencehttp/fencehttp.h>
#include <lockcore/lockcore.h>

#include "api.h"
#include "engine.h"
#include "metrics.h"

#ifndef FLD_VERSION
#define FLD_VERSION "unknown"
#endif

#define DRAIN_TIMEOUT_MS 10000

struct config {
    const char *nodes;
    const char *listen;
    const char *port_file;
    int threads;
    int loops;
    enum fencehttp_log_level level;
    const char *auth_file;
    const char *tls_cert, *tls_key;
    const char *password_file;
    const char *cacert, *cert, *key, *tls_server_name;
    const char *key_prefix;
    int fence_transition;
    int redis_functions;
    long long ttl_ms, max_ttl_ms, max_wait_ms, request_timeout_ms;
    long long max_connections, max_clients;
    int check; /* --check-config */
};

static void usage(FILE *f)
{
    fprintf(f, "Usage: fencelockd --nodes URL,URL,... [options]\n"
               "\n"
               "fencelock's fenced locks over HTTP/JSON (docs/fencelockd.md).\n"
               "\n"
               "Options:\n"
               "  --nodes URL,...     the Redis nodes (default $FENCELOCK_NODES); each\n"
               "                      redis://[user:pass@]host:port[/db], rediss://... or host:port\n"
               "  --listen HOST:PORT  address to listen on (default 127.0.0.1:7600; port 0 picks a free\n"
               "                      one; IPv6 as [::1]:7600)\n"
               "  --port-file PATH    write the bound port to PATH once listening\n"
               "  --threads N         threads serving HTTP connections (default 2, 1..64)\n"
               "  --loops N           lock loops, each a thread and a lockcore client; resources\n"
               "                      are spread over them (default: the number of cores, 1..64)\n"
               "  --ttl D             a lock's TTL when a request gives none (default 10s)\n"
               "  --max-ttl D         the longest TTL a request may ask for (default 1h)\n"
               "  --max-wait D        the longest a request may wait for a lock (default 60s)\n"
               "  --timeout D         per-node request timeout (default 50ms)\n"
               "  --key-prefix P      prefix of every lock key (default none; as the library's)\n"
               "  --fence-transition  also write each resource's fence key of the layout before fence\n"
               "                      buckets, while clients of that layout share the resources\n"
               "                      (docs/fencing.md, \"Upgrading\"; or $FENCELOCK_FENCE_TRANSITION=1)\n"
               "  --redis-functions   run lockcore's scripts as functions of a library loaded on the\n"
               "                      nodes (Redis 7: less node CPU per call); only where every user\n"
               "                      of the nodes allowed FUNCTION LOAD is trusted with the locks\n"
               "                      (docs/security.md; or $FENCELOCK_REDIS_FUNCTIONS=1)\n"
               "  --password-file F   the nodes' AUTH password, from the first line of F (else\n"
               "                      $FENCELOCK_PASSWORD)\n"
               "  --cacert F          rediss:// nodes: the CAs to verify them with\n"
               "  --cert F, --key F   rediss:// nodes: a client certificate and its key\n"
               "  --tls-server-name N the name the nodes' certificates must carry\n"
               "  --auth-file FILE    clients and their bearer tokens, one per line: TOKEN [NAME];\n"
               "                      without a known token every route but /healthz answers 401\n"
               "  --tls-cert FILE     serve HTTPS with this PEM certificate (chain); needs --tls-key\n"
               "  --tls-key FILE      the PEM private key of --tls-cert\n"
               "  --max-connections N most HTTP connections at once (default 20000)\n"
               "  --max-clients N     no longer used (one lockcore client serves every TTL and wait)\n"
               "  --log-level LEVEL   error, warn, info (default: every lock operation) or debug\n"
               "  --config FILE       read options from FILE first, one `key = value` per line (keys\n"
               "                      as the options without --; the command line overrides them)\n"
               "  --check-config      check the options, the files they name and the TLS pair, say\n"
               "                      OK (exit 0) or the first error and its line, and exit\n"
               "  --help              show this help\n"
               "  --version           show the version\n"
               "\n"
               "SIGINT or SIGTERM stops accepting connections, answers waiting requests 503, lets\n"
               "the other requests in progress end and exits. The server never extends a lock\n"
               "on a client's behalf. SIGHUP reads the configuration again (--config and the\n"
               "command line) and applies --auth-file, --tls-cert/--tls-key and --log-level\n"
               "without dropping connections or waiters; what does not load is refused with a\n"
               "log line and the one in use kept; other options take effect on restart.\n");
}

/* An environment variable that is 0, 1 or unset: 1 sets *on (an option
 * may have set it already); -1 for anything else. */
static int env_flag(const char *name, int *on)
{
    const char *v = getenv(name);
    if (v != NULL && v[0] != '\0' && strcmp(v, "0") != 0 && strcmp(v, "1") != 0)
        return -1;
    if (v != NULL && strcmp(v, "1") == 0)
        *on = 1;
    return 0;
}

/* The configuration file's line being parsed ("path:N"), for messages. */
static const char *where;

static int bad(const char *what)
{
    fprintf(stderr, "fencelockd: %s%s%s\n", where ? where : "", where ? ": " : "", what);
    return 2;
}

static const struct option opts[] = {
    {"nodes", required_argument, NULL, 'n'},
    {"listen", required_argument, NULL, 'l'},
    {"port-file", required_argument, NULL, 'p'},
    {"threads", required_argument, NULL, 't'},
    {"loops", required_argument, NULL, 'O'},
    {"ttl", required_argument, NULL, 'T'},
    {"max-ttl", required_argument, NULL, 'M'},
    {"max-wait", required_argument, NULL, 'W'},
    {"timeout", required_argument, NULL, 'o'},
    {"key-prefix", required_argument, NULL, 'P'},
    {"fence-transition", no_argument, NULL, 'F'},
    {"redis-functions", no_argument, NULL, 'R'},
    {"password-file", required_argument, NULL, 'w'},
    {"cacert", required_argument, NULL, 'A'},
    {"cert", required_argument, NULL, 'C'},
    {"key", required_argument, NULL, 'K'},
    {"tls-server-name", required_argument, NULL, 'S'},
    {"auth-file", required_argument, NULL, 'a'},
    {"tls-cert", required_argument, NULL, 'c'},
    {"tls-key", required_argument, NULL, 'k'},
    {"max-connections", required_argument, NULL, 'x'},
    {"max-clients", required_argument, NULL, 'X'},
    {"log-level", required_argument, NULL, 'L'},
    {"config", required_argument, NULL, 'f'},
    {"check-config", no_argument, NULL, 'Q'},
    {"help", no_argument, NULL, 'h'},
    {"version", no_argument, NULL, 'V'},
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
        case 'n':
            c->nodes = optarg;
            break;
        case 'l':
            c->listen = optarg;
            break;
        case 'p':
            c->port_file = optarg;
            break;
        case 't':
            if (fencehttp_parse_num(optarg, 1, 64, &n) != 0)
                return bad("--threads must be 1..64");
            c->threads = (int)n;
            break;
        case 'O':
            if (fencehttp_parse_num(optarg, 1, FLD_LOOPS_MAX, &n) != 0)
                return bad("--loops must be 1..64");
            c->loops = (int)n;
            break;
        case 'T':
        case 'M':
        case 'W':
        case 'o':
            if (fencehttp_parse_duration_ms(optarg, &n) != 0 || (ch != 'W' && n == 0) || n > 86400000LL)
                return bad("--ttl, --max-ttl, --max-wait and --timeout want a duration such as 500ms, 10s, "
                           "5m (at most 24h; only --max-wait may be 0)");
            *(ch == 'T'   ? &c->ttl_ms
              : ch == 'M' ? &c->max_ttl_ms
              : ch == 'W' ? &c->max_wait_ms
                          : &c->request_timeout_ms) = n;
            break;
        case 'P':
            c->key_prefix = optarg;
            break;
        case 'F':
            c->fence_transition = 1;
            break;
        case 'R':
            c->redis_functions = 1;
            break;
        case 'w':
            c->password_file = optarg;
            break;
        case 'A':
            c->cacert = optarg;
            break;
        case 'C':
            c->cert = optarg;
            break;
        case 'K':
            c->key = optarg;
            break;
        case 'S':
            c->tls_server_name = optarg;
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
        case 'x':
            if (fencehttp_parse_num(optarg, 16, 1000000, &n) != 0)
                return bad("--max-connections must be 16..1000000");
            c->max_connections = n;
            break;
        case 'X':
            if (fencehttp_parse_num(optarg, 1, 1024, &n) != 0)
                return bad("--max-clients must be 1..1024");
            c->max_clients = n;
            fencehttp_log(FENCEHTTP_LOG_WARN,
                          "--max-clients is no longer used: one lockcore client serves every TTL and wait");
            break;
        case 'L':
            if (fencehttp_log_parse_level(optarg, &c->level) != 0)
                return bad("--log-level must be error, warn, info or debug");
            break;
        case 'f': /* read before, by fencehttp_conf_path */
            break;
        case 'Q':
            c->check = 1;
            break;
        case 'h':
            usage(stdout);
            return 0;
        case 'V':
            printf("fencelockd %s (fencelock)\n", FLD_VERSION);
            return 0;
        default:
            usage(stderr);
            return 2;
        }
    }
    if (optind < argc) {
        fprintf(stderr, "fencelockd: unexpected argument '%s'\n", argv[optind]);
        return 2;
    }
    return -1;
}

static int parse_into(int argc, char **argv, void *c)
{
    return parse_opts(argc, argv, c);
}

/* The configuration file's options (conf, may be NULL), then the command
 * line's, into c; then what they must say together. */
static int parse_args(int argc, char **argv, const struct fencehttp_conf *conf, struct config *c)
{
    int rc = fencehttp_conf_parse(conf, argc, argv, parse_into, c, &where);
    if (rc >= 0)
        return rc;
    if ((c->tls_cert == NULL) != (c->tls_key == NULL))
        return bad("--tls-cert and --tls-key go together");
    if (c->nodes == NULL)
        c->nodes = getenv("FENCELOCK_NODES");
    if (c->nodes == NULL || c->nodes[0] == '\0') {
        usage(stderr);
        return bad("no nodes: give --nodes or set FENCELOCK_NODES");
    }
    if (c->ttl_ms > c->max_ttl_ms)
        return bad("--ttl is above --max-ttl");
    /* As the fencelock command reads them; an option given turns it on. */
    if (env_flag("FENCELOCK_FENCE_TRANSITION", &c->fence_transition) < 0)
        return bad("FENCELOCK_FENCE_TRANSITION must be 0 or 1");
    if (env_flag("FENCELOCK_REDIS_FUNCTIONS", &c->redis_functions) < 0)
        return bad("FENCELOCK_REDIS_FUNCTIONS must be 0 or 1");
    return -1; /* go on */
}

static const struct config defaults = {
    .listen = "127.0.0.1:7600",
    .threads = 2,
    .loops = 0, /* the number of cores */
    .level = FENCEHTTP_LOG_INFO,
    .ttl_ms = 10000,
    .max_ttl_ms = 3600 * 1000,
    .max_wait_ms = 60000,
    .request_timeout_ms = 50,
    .max_connections = 20000,
    .max_clients = 64,
};

/* Read --config (if argv names one) and parse it and argv into *c, from
 * the defaults; *conf holds the strings c points to. As parse_args. */
static int load_config(int argc, char **argv, struct config *c, struct fencehttp_conf **conf)
{
    char err[768];
    *c = defaults;
    if (fencehttp_conf_load(argc, argv, opts, conf, err, sizeof(err)) != 0)
        return bad(err);
    return parse_args(argc, argv, *conf, c);
}

/* The first line of a password file, without its newline. */
static int read_password(const char *path, char *buf, size_t cap)
{
    FILE *fp = fencehttp_fopen_regular(path);
    if (fp == NULL) {
        fencehttp_log(FENCEHTTP_LOG_ERROR, "--password-file %s: %s", path, fencehttp_file_error(errno));
        return -1;
    }
    int ok = fgets(buf, (int)cap, fp) != NULL;
    fclose(fp);
    buf[ok ? strcspn(buf, "\r\n") : 0] = '\0';
    if (buf[0] == '\0') {
        fencehttp_log(FENCEHTTP_LOG_ERROR, "--password-file %s: no password on its first line", path);
        return -1;
    }
    return 0;
}

struct server {
    fld_engine *engine;
    struct fld_limits limits;
};

static void on_answer(void *arg, int status, double seconds)
{
    (void)arg;
    fld_metrics_http(status, seconds);
}

static int handle(void *arg, const struct fencehttp_request *r, struct fencehttp_response *resp)
{
    struct server *s = arg;
    struct fld_request req = {
        .method = r->method,
        .path = r->path,
        .args = r->args,
        .n_args = r->n_args,
        .body = r->body,
        .body_len = r->body_len,
        .body_too_large = r->body_too_large,
    };
    struct fld_op op;
    if (fld_api_parse(&req, &s->limits, &op, resp) != 0)
        return 0;
    if (fld_api_authorize(&op, r->client, resp) != 0) {
        fld_metrics_forbidden(op.route);
        if (fencehttp_log_enabled(FENCEHTTP_LOG_INFO))
            fencehttp_log(FENCEHTTP_LOG_INFO, "client %s: refused %s %.200s: forbidden", r->client->name,
                          r->method, op.resource);
        return 0;
    }
    fld_engine_submit(s->engine, &op, r->conn, r->client ? r->client->name : NULL);
    return FENCEHTTP_LATER;
}

/* Each waiting request keeps its connection open: let the process have as
 * many descriptors as it may. */
static void raise_fd_limit(long long want)
{
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) != 0)
        return;
    rlim_t target = (rlim_t)want + 1024;
    if (rl.rlim_cur >= target)
        return;
    rl.rlim_cur = rl.rlim_max < target ? rl.rlim_max : target;
    setrlimit(RLIMIT_NOFILE, &rl);
    if (rl.rlim_cur < (rlim_t)want)
        fencehttp_log(FENCEHTTP_LOG_WARN,
                      "only %llu file descriptors (ulimit -n): fewer connections than "
                      "--max-connections %lld can be open",
                      (unsigned long long)rl.rlim_cur, want);
}

/* SIGHUP: the auth file again; a file that does not load (or names two
 * clients of one owner tag) is refused with a log line, and the clients in
 * use stay. Returns the new owners table (the caller keeps it until the
 * engine is freed), or NULL. */
static struct fld_owners *reload_auth(const char *auth_file, fencehttp *http, fld_engine *engine)
{
    struct fld_owners *o = NULL;
    fencehttp_auth *a = NULL;
    char err[512];
    if (fencehttp_load_secrets(auth_file, &a, NULL, NULL, NULL, NULL) != 0) {
        fencehttp_log(FENCEHTTP_LOG_ERROR, "SIGHUP: auth file %s refused; the clients in use stay",
                      auth_file);
    } else if (fld_owners_new(a, &o, err, sizeof(err)) != 0) {
        fencehttp_log(FENCEHTTP_LOG_ERROR, "SIGHUP: auth file %s: %s; the clients in use stay", auth_file,
                      err);
        fencehttp_auth_free(a);
    } else {
        fld_engine_set_owners(engine, o);
        if (fencehttp_set_auth(http, a) != 0) {
            fencehttp_log(FENCEHTTP_LOG_ERROR, "SIGHUP: out of memory; the clients in use stay");
            fencehttp_auth_free(a);
        } else {
            fencehttp_log(FENCEHTTP_LOG_INFO, "SIGHUP: auth file %s reloaded, %zu clients", auth_file,
                          fencehttp_auth_count(a));
        }
    }
    return o;
}

/* Say which options a reload changed but cannot apply while serving. */
static void restart_note(const struct config *run, const struct config *c)
{
    struct fencehttp_restart r = {.len = 0};
#define CHANGED(cond, name) fencehttp_restart_if(&r, cond, name)
    CHANGED(fencehttp_differ(run->nodes, c->nodes), "nodes");
    CHANGED(fencehttp_differ(run->listen, c->listen), "listen");
    CHANGED(fencehttp_differ(run->port_file, c->port_file), "port-file");
    CHANGED(run->threads != c->threads, "threads");
    CHANGED(c->loops != 0 && run->loops != c->loops, "loops");
    CHANGED(run->ttl_ms != c->ttl_ms, "ttl");
    CHANGED(run->max_ttl_ms != c->max_ttl_ms, "max-ttl");
    CHANGED(run->max_wait_ms != c->max_wait_ms, "max-wait");
    CHANGED(run->request_timeout_ms != c->request_timeout_ms, "timeout");
    CHANGED(fencehttp_differ(run->key_prefix, c->key_prefix), "key-prefix");
    CHANGED(run->fence_transition != c->fence_transition, "fence-transition");
    CHANGED(run->redis_functions != c->redis_functions, "redis-functions");
    CHANGED(fencehttp_differ(run->password_file, c->password_file), "password-file");
    CHANGED(fencehttp_differ(run->cacert, c->cacert), "cacert");
    CHANGED(fencehttp_differ(run->cert, c->cert), "cert");
    CHANGED(fencehttp_differ(run->key, c->key), "key");
    CHANGED(fencehttp_differ(run->tls_server_name, c->tls_server_name), "tls-server-name");
    CHANGED(run->max_connections != c->max_connections, "max-connections");
    CHANGED((run->auth_file == NULL) != (c->auth_file == NULL), "auth-file (given or taken away)");
    CHANGED((run->tls_cert == NULL) != (c->tls_cert == NULL), "tls-cert (given or taken away)");
#undef CHANGED
    fencehttp_restart_log(&r);
}

/* SIGHUP: read the configuration again (--config and the command line, as
 * at start) and apply, without dropping connections or waiters, the log
 * level, the auth file and the TLS certificate and key: each that does not
 * load is refused with a log line and the one in use stays; a
 * configuration that does not parse changes nothing. The rest waits for a
 * restart (restart_note). Returns the new owners table (the caller keeps
 * it until the engine is freed), or NULL. */
static struct fld_owners *reload(int argc, char **argv, const struct config *run, fencehttp *http,
                                 fld_engine *engine)
{
    fencehttp_notify("RELOADING=1");
    fencehttp_log(FENCEHTTP_LOG_INFO, "SIGHUP: reading the configuration again");
    struct config c;
    struct fencehttp_conf *conf = NULL;
    struct fld_owners *o = NULL;
    if (load_config(argc, argv, &c, &conf) >= 0 || c.check) {
        fencehttp_log(FENCEHTTP_LOG_ERROR,
                      "SIGHUP: the configuration is refused (see above); nothing changes");
        goto done;
    }
    fencehttp_log_set_level(c.level); /* lines logged from now on, in every thread */
    if (run->auth_file != NULL && c.auth_file != NULL)
        o = reload_auth(c.auth_file, http, engine);
    if (run->tls_cert != NULL && c.tls_cert != NULL)
        fencehttp_reload_tls(http, c.tls_cert, c.tls_key);
    restart_note(run, &c);
done:
    fencehttp_conf_free(conf);
    fencehttp_notify("READY=1");
    return o;
}

/* Ready for systemd (fencehttp_notify) once a majority of the nodes
 * answers: before, every lock request would be refused. Asks once a
 * second, saying so in the log and the unit's status, until a majority
 * answers (0) or a signal of stop arrives (1, in *sig). */
static int ready_at_majority(const struct lockcore_options *lo, unsigned majority, const sigset_t *stop,
                             int *sig)
{
    lockcore_client *c = NULL;
    char err[256];
    if (lockcore_client_new(lo, &c, err, sizeof(err)) != 0) {
        fencehttp_log(FENCEHTTP_LOG_WARN, "readiness probe: %s; ready without it", err);
        return 0;
    }
    struct lockcore_node_status *st = calloc(majority * 2, sizeof(*st));
    int told = 0, rc = 0;
    while (st != NULL) {
        int n = lockcore_status(c, "fencelockd:ready", st, majority * 2);
        unsigned up = 0;
        for (int i = 0; i < n; i++)
            up += st[i].reachable ? 1u : 0u;
        if (up >= majority)
            break;
        if (!told) {
            fencehttp_log(FENCEHTTP_LOG_WARN, "%u of the nodes answer, %u needed: not ready yet", up,
                          majority);
            char msg[128];
            snprintf(msg, sizeof(msg), "STATUS=waiting for a majority of nodes (%u answer, %u needed)", up,
                     majority);
            fencehttp_notify(msg);
            told = 1;
        }
        struct timespec second = {.tv_sec = 1};
        int s = sigtimedwait(stop, NULL, &second);
        if (s > 0) {
            *sig = s;
            rc = 1;
            break;
        }
    }
    if (told && rc == 0)
        fencehttp_log(FENCEHTTP_LOG_INFO, "a majority of the nodes answers: ready");
    free(st);
    lockcore_client_free(c);
    return rc;
}

/* --check-config: what the start would refuse, without starting. A
 * lockcore client is made (the node addresses, TLS files, timeouts and
 * prefix checked) but the nodes are not asked: they may be down while a
 * configuration is checked. Logs the first error; returns 0 or -1. */
static int check_config(const struct config *c, const struct lockcore_options *lo, const char *tls_cert,
                        const char *tls_key)
{
    char err[512];
    lockcore_client *lc = NULL;
    if (lockcore_client_new(lo, &lc, err, sizeof(err)) != 0) {
        fencehttp_log(FENCEHTTP_LOG_ERROR, "%s", err);
        return -1;
    }
    lockcore_client_free(lc);
    if (tls_cert != NULL && fencehttp_tls_check(tls_cert, tls_key, err, sizeof(err)) != 0) {
        fencehttp_log(FENCEHTTP_LOG_ERROR, "--tls-cert %s, --tls-key %s: %s", c->tls_cert, c->tls_key, err);
        return -1;
    }
    if (c->port_file != NULL && fencehttp_check_writable_dir(c->port_file) != 0) {
        fencehttp_log(FENCEHTTP_LOG_ERROR, "--port-file %s: its directory cannot be written (%s)",
                      c->port_file, strerror(errno));
        return -1;
    }
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
    fencehttp_log_set_program("fencelockd");
    fencehttp_log_set_level(c.level);

    struct sockaddr_storage ss;
    socklen_t ss_len = 0;
    if (fencehttp_resolve(c.listen, &ss, &ss_len) != 0) {
        fprintf(stderr, "fencelockd: bad --listen '%s' (want HOST:PORT)\n", c.listen);
        fencehttp_conf_free(conf);
        return 2;
    }
    /* SIGINT/SIGTERM are handled in this thread only: blocked before any
     * other thread exists, so every thread inherits the mask. */
    sigset_t stop_set;
    sigemptyset(&stop_set);
    sigaddset(&stop_set, SIGINT);
    sigaddset(&stop_set, SIGTERM);
    /* SIGHUP (a reload) is blocked too, and waited for with the others
     * once the service is ready. */
    sigset_t wait_set = stop_set;
    sigaddset(&wait_set, SIGHUP);
    pthread_sigmask(SIG_BLOCK, &wait_set, NULL);
    signal(SIGPIPE, SIG_IGN);
    umask(077);
    if (c.port_file && !c.check)
        unlink(c.port_file); /* never leave a previous run's port for a reader */
    raise_fd_limit(c.max_connections);

    int status = 1;
    char *tls_cert = NULL, *tls_key = NULL, *nodes_buf = NULL;
    const char **nodes = NULL;
    fencehttp_auth *auth = NULL;
    struct fld_owners *owners = NULL, **kept = NULL; /* kept: the tables of reloads */
    size_t n_kept = 0;
    fencehttp *http = NULL;
    struct server srv = {.limits = {(uint64_t)c.ttl_ms, (uint64_t)c.max_ttl_ms, (uint64_t)c.max_wait_ms}};
    char err[512] = "", pw[257] = "";
    if (fencehttp_load_secrets(c.auth_file, &auth, c.tls_cert, &tls_cert, c.tls_key, &tls_key) != 0)
        goto out;
    if (fld_owners_new(auth, &owners, err, sizeof(err)) != 0) {
        fencehttp_log(FENCEHTTP_LOG_ERROR, "auth file: %s", err);
        goto out;
    }
    if (c.password_file != NULL && read_password(c.password_file, pw, sizeof(pw)) != 0)
        goto out;
    const char *password = pw[0] ? pw : getenv("FENCELOCK_PASSWORD");
    /* The nodes, split at commas. */
    size_t n_nodes = 0, cap = 1;
    nodes_buf = strdup(c.nodes);
    for (const char *p = c.nodes; *p; p++)
        cap += *p == ',';
    nodes = calloc(cap, sizeof(*nodes));
    if (nodes_buf == NULL || nodes == NULL) {
        fencehttp_log(FENCEHTTP_LOG_ERROR, "out of memory");
        goto out;
    }
    for (char *save = NULL, *tok = strtok_r(nodes_buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save))
        nodes[n_nodes++] = tok;
    struct lockcore_options lo;
    lockcore_options_init(&lo);
    lo.nodes = nodes;
    lo.n_nodes = n_nodes;
    lo.request_timeout_ms = (uint64_t)c.request_timeout_ms;
    lo.key_prefix = c.key_prefix;
    lo.fence_transition = c.fence_transition;
    lo.redis_functions = c.redis_functions;
    lo.password = password != NULL && password[0] ? password : NULL;
    lo.tls_ca_file = c.cacert ? c.cacert : getenv("FENCELOCK_CACERT");
    lo.tls_cert_file = c.cert ? c.cert : getenv("FENCELOCK_CERT");
    lo.tls_key_file = c.key ? c.key : getenv("FENCELOCK_KEY");
    lo.tls_server_name = c.tls_server_name ? c.tls_server_name : getenv("FENCELOCK_TLS_SERVER_NAME");
    lo.holder_info = "fencelockd";
    if (c.loops == 0) {
        long cores = sysconf(_SC_NPROCESSORS_ONLN);
        c.loops = cores < 1 ? 1 : cores > FLD_LOOPS_MAX ? FLD_LOOPS_MAX : (int)cores;
    }
    if (c.check) {
        if (check_config(&c, &lo, tls_cert, tls_key) == 0) {
            printf("fencelockd: the configuration is OK\n");
            status = 0;
        }
        goto out;
    }
    struct fld_engine_options eo = {.base = &lo, .limits = srv.limits, .loops = c.loops};
    if ((rc = fld_engine_start(&eo, &srv.engine, err, sizeof(err))) != 0) {
        fencehttp_log(FENCEHTTP_LOG_ERROR, "%s", err);
        goto out;
    }
    fld_engine_set_owners(srv.engine, owners);
    static const char *const open_paths[] = {"/healthz", NULL};
    struct fencehttp_options ho = {
        .name = "fencelockd",
        .addr = (const struct sockaddr *)&ss,
        .addr_len = ss_len,
        .threads = c.threads,
        .max_body = 64 * 1024,
        .auth = auth,
        .open_paths = open_paths,
        .max_connections = (unsigned)c.max_connections,
        .use_epoll = 1, /* thousands of long polls and idle keep-alives */
        .tls_cert_pem = tls_cert,
        .tls_key_pem = tls_key,
        .handler = handle,
        .handler_arg = &srv,
        .on_answer = on_answer,
    };
    if ((rc = fencehttp_start(&ho, &http, err, sizeof(err))) != 0) {
        fencehttp_log(FENCEHTTP_LOG_ERROR, "%s: %s", c.listen, err);
        goto out;
    }
    unsigned port = fencehttp_port(http);
    if (c.port_file && (rc = fencehttp_write_port_file(c.port_file, port, 077)) != 0) {
        fencehttp_log(FENCEHTTP_LOG_ERROR, "port file %s: %s", c.port_file, strerror(-rc));
        goto out;
    }
    fencehttp_log(FENCEHTTP_LOG_INFO, "listening on port %u (%s), %u nodes (majority %u), %d lock loops, %s",
                  port, tls_cert ? "HTTPS" : "HTTP", fld_engine_nodes(srv.engine),
                  fld_engine_nodes(srv.engine) / 2 + 1, c.loops,
                  auth ? "bearer tokens required" : "no authentication");

    int sig = 0;
    if (ready_at_majority(&lo, fld_engine_nodes(srv.engine) / 2 + 1, &stop_set, &sig) == 0) {
        char st[128];
        snprintf(st, sizeof(st), "READY=1\nSTATUS=listening on port %u, a majority of nodes answers", port);
        fencehttp_notify(st);
        while (fencehttp_wait_signal(&wait_set, &sig) == 0 && sig == SIGHUP) {
            struct fld_owners *o = reload(argc, argv, &c, http, srv.engine);
            if (o != NULL) {
                struct fld_owners **v = realloc(kept, (n_kept + 1) * sizeof(*v));
                if (v == NULL) /* cannot happen in practice; o stays in use */
                    continue;
                kept = v;
                kept[n_kept++] = o;
            }
        }
    }
    fencehttp_notify("STOPPING=1");
    fencehttp_log(FENCEHTTP_LOG_INFO, "%s: stopping", sig == SIGINT ? "SIGINT" : "SIGTERM");
    /* No new connections; waiters are told at once, the rest may end. */
    fencehttp_quiesce(http);
    fld_engine_shutdown(srv.engine, DRAIN_TIMEOUT_MS);
    if (fencehttp_drain(http, DRAIN_TIMEOUT_MS) != 0)
        fencehttp_log(FENCEHTTP_LOG_WARN, "requests still in progress after %d ms; closing them",
                      DRAIN_TIMEOUT_MS);
    status = 0;
out:
    fencehttp_stop(http);
    fld_engine_free(srv.engine);
    fld_owners_free(owners);
    for (size_t i = 0; i < n_kept; i++)
        fld_owners_free(kept[i]);
    free(kept);
    fencehttp_free_secrets(auth, tls_cert, tls_key);
    memset(pw, 0, sizeof(pw));
    free(nodes);
    free(nodes_buf);
    if (status == 0 && c.port_file && !c.check)
        unlink(c.port_file);
    if (status == 0 && !c.check)
        fencehttp_log(FENCEHTTP_LOG_INFO, "stopped");
    fencehttp_conf_free(conf);
    return status;
}
