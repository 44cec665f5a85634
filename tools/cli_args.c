/*
 * The command line of fencelock: the usage texts of the options, the
 * options of the lock commands and their checks, the client they make
 * (cli.h), and the arguments of the file commands.
 */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <jansson.h>

#include <lockcore/lockcore.h>

#include "cli.h"

#ifndef FENCELOCK_VERSION
#define FENCELOCK_VERSION "unknown"
#endif

static const char *prog = "fencelock";

static const char usage_options[] =
    "options (anywhere before the command to run):\n"
    "  --nodes URL,URL,...  the Redis nodes (default: $FENCELOCK_NODES);\n"
    "                       each redis://[user:pass@]host:port[/db] or host:port\n"
    "  --ttl D              lock time to live (default 10s)\n"
    "  --retry-count N      retries after the first attempt (default 3; -1 = no limit)\n"
    "  --retry-delay D      least wait between attempts (default 200ms, plus up to 100ms jitter)\n"
    "  --wait D             keep trying to acquire for up to D (retries without limit\n"
    "                       unless --retry-count is given; --wait 0 tries once)\n"
    "  --key-prefix P       prefix of every lock key (default none)\n"
    "  --no-fencing         plain Redlock: no fence keys, token 0\n"
    "                       ($FENCELOCK_FENCE_TRANSITION=1: also write each resource's\n"
    "                       fence key of the layout before buckets, during an upgrade)\n"
    "  --notify             while waiting, be told of releases instead of polling (the\n"
    "                       default, for every kind of lock)\n"
    "  --no-notify          poll: retry after --retry-delay, as plain Redlock does\n"
    "  --fair               wait in line: waiters of every client served in arrival order\n"
    "                       (implies --notify)\n"
    "  --backoff fixed|exponential  the delay between polling attempts (default fixed;\n"
    "                       exponential: full jitter, at most --retry-delay-max)\n"
    "  --retry-delay-max D  cap of the exponential backoff (default 2s)\n"
    "  --password-file F    the nodes' AUTH password, from the first line of F (else\n"
    "                       $FENCELOCK_PASSWORD); for nodes whose URL has none\n"
    "  --cacert F           rediss:// nodes: the CAs to verify them with (else\n"
    "                       $FENCELOCK_CACERT, else the system's)\n"
    "  --cert F, --key F    rediss:// nodes: a client certificate and its key\n"
    "                       ($FENCELOCK_CERT, $FENCELOCK_KEY)\n"
    "  --tls-server-name N  the name the nodes' certificates must carry (default each\n"
    "                       node's host; $FENCELOCK_TLS_SERVER_NAME)\n"
    "  --timeout D          per-node request timeout (default 50ms)\n"
    "  --extend-at D        run: extend when D of validity is left (default a third of --ttl)\n"
    "  --kill-after D       run: after SIGTERM for a lost lock, SIGKILL after D (default 5s)\n"
    "  --max-hold D         run: once the command has held the lock for D, stop it as on a\n"
    "                       lost lock (SIGTERM, SIGKILL after --kill-after; exit 79)\n"
    "  --to TOKEN           repair: lower the fence to TOKEN (default each node's clock)\n"
    "  --force              repair: lower it indeed (without: say what it would do)\n"
    "  --undo CMD           run: if the command fails, the lock is lost or --max-hold\n"
    "                       runs out, run sh -c CMD (FENCELOCK_UNDO_REASON=failed|lost|\n"
    "                       max-hold, FENCELOCK_JOB_STATUS)\n"
    "  --value V            elect: what the leader proclaims (at most 256 bytes; default \"\")\n"
    "  --again              elect: after leadership is lost, campaign again and rerun the\n"
    "                       command\n"
    "  --watch              leader: print the leader, then one line per change\n"
    "  --verbose            say on stderr what a wait waits for (the default when stderr\n"
    "                       is a terminal)\n"
    "  --quiet              never say it\n"
    "  --permits N          acquire, run, status: a semaphore of N permits on RESOURCE\n"
    "                       (the lock is one permit, \"RESOURCE:permit:<i>\")\n"
    "  --read, --write      acquire, run, extend, release, status: a read-write lock on\n"
    "                       RESOURCE: a reader (many at once) or the writer (alone)\n"
    "  --reentrant          acquire, extend, release, status: a reentrant lock (run takes\n"
    "                       one for a single resource anyway); acquire --reentrant\n"
    "                       RESOURCE LOCK_ID re-enters the hold LOCK_ID\n"
    "  -h, --help           help (for one command: fencelock COMMAND --help)\n"
    "  --version            print the version\n"
    "durations: an integer with ms, s, m or h (a bare number is ms); --ttl at most 24h\n";

static const char usage_exit[] =
    "exit codes: 0 success (run: the command's own status, 128+N if killed by signal N);\n"
    "  64 usage error;\n"
    "  69 no majority in time: nodes unreachable or not answering, or granted too slowly\n"
    "     (no validity left: slow nodes or a paused client);\n"
    "  70 server or protocol error (AUTH/ACL refused, bad reply), no fencing token, other error;\n"
    "  75 not acquired: held by another (also when --wait ran out while another held it);\n"
    "  79 lock lost or not held (run: also stopped at --max-hold; elect: leadership lost;\n"
    "     leader: no leader).\n";

static void usage(FILE *to)
{
    fprintf(to,
            "usage: fencelock [options] COMMAND ...\n"
            "\n"
            "commands:\n"
            "  acquire RESOURCE...                acquire (several: all or nothing); print the lock\n"
            "  extend RESOURCE... LOCK_ID         extend a held lock to --ttl from now\n"
            "  release RESOURCE... LOCK_ID        release a held lock\n"
            "  status RESOURCE...                 each node's holder, remaining ms and fence value\n"
            "  run RESOURCE [--] CMD [ARG...]     run CMD under the lock, extending it automatically\n"
            "  run RESOURCE... -- CMD [ARG...]    the same under several resources at once\n"
            "  elect NAME [--] CMD [ARG...]       campaign to lead NAME; run CMD while leading\n"
            "  leader NAME                        who leads NAME: epoch, value (--watch: changes)\n"
            "\n"
            "%s\n%s",
            usage_options, usage_exit);
}

/* Split --nodes into an array (the caller frees both). */
static int split_nodes(const char *spec, char **buf, const char ***out, size_t *n)
{
    *buf = strdup(spec);
    if (*buf == NULL)
        return -1;
    size_t cap = 1;
    for (const char *p = spec; *p; p++)
        cap += *p == ',';
    *out = calloc(cap, sizeof(**out));
    if (*out == NULL)
        return -1;
    *n = 0;
    for (char *save = NULL, *tok = strtok_r(*buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save))
        (*out)[(*n)++] = tok;
    return 0;
}

/* The first line of a password file, without its newline. Says why on
 * stderr and returns -1 if it cannot. */
static int read_password(const char *path, char *buf, size_t cap)
{
    FILE *fp = fopen(path, "r");
    if (fp == NULL) {
        fprintf(stderr, "%s: --password-file '%s': %s\n", prog, path, strerror(errno));
        return -1;
    }
    int ok = fgets(buf, (int)cap, fp) != NULL;
    fclose(fp);
    buf[ok ? strcspn(buf, "\r\n") : 0] = '\0';
    if (buf[0] == '\0') {
        fprintf(stderr, "%s: --password-file '%s': no password on its first line\n", prog, path);
        return -1;
    }
    return 0;
}

/* An environment variable that is 0, 1 or unset (0); anything else is
 * refused with a message. */
static int env_flag(const char *prog, const char *name, int *out)
{
    const char *v = getenv(name);
    if (v != NULL && v[0] != '\0' && strcmp(v, "0") != 0 && strcmp(v, "1") != 0) {
        fprintf(stderr, "%s: %s must be 0 or 1, not '%s'\n", prog, name, v);
        return -1;
    }
    *out = v != NULL && strcmp(v, "1") == 0;
    return 0;
}

static lockcore_client *make_client(const struct args *a, const char *holder_info, int *exit_code)
{
    /* A password from a file or the environment stays out of argv (ps)
     * and out of the node addresses that messages show. */
    char pw[257] = "";
    if (a->password_file != NULL && read_password(a->password_file, pw, sizeof(pw)) < 0) {
        *exit_code = EXIT_USAGE;
        return NULL;
    }
    const char *password = pw[0] ? pw : getenv("FENCELOCK_PASSWORD");
    const char *spec = a->nodes ? a->nodes : getenv("FENCELOCK_NODES");
    if (spec == NULL || *spec == '\0') {
        fprintf(stderr, "%s: no nodes: give --nodes or set FENCELOCK_NODES\n", prog);
        *exit_code = EXIT_USAGE;
        return NULL;
    }
    char *buf = NULL;
    const char **nodes = NULL;
    size_t n = 0;
    lockcore_client *c = NULL;
    if (split_nodes(spec, &buf, &nodes, &n) < 0) {
        fprintf(stderr, "%s: out of memory\n", prog);
        *exit_code = EXIT_ERROR;
        goto out;
    }
    if (n == 0) {
        fprintf(stderr, "%s: no nodes in '%s'\n", prog, spec);
        *exit_code = EXIT_USAGE;
        goto out;
    }
    struct lockcore_options o;
    lockcore_options_init(&o);
    o.nodes = nodes;
    o.n_nodes = n;
    if (a->ttl_ms)
        o.ttl_ms = a->ttl_ms;
    if (a->request_timeout_ms)
        o.request_timeout_ms = a->request_timeout_ms;
    if (a->retry_set)
        o.retry_count = a->retry_count;
    else if (a->wait_set)
        o.retry_count = a->wait_ms > 0 ? -1 : 0; /* --wait 0: one attempt */
    if (a->retry_delay_set)
        o.retry_delay_ms = a->retry_delay_ms;
    o.wait_ms = a->wait_ms;
    o.key_prefix = a->key_prefix;
    o.fencing = a->fencing;
    o.holder_info = holder_info;
    o.password = password != NULL && password[0] ? password : NULL;
    /* TLS for rediss:// nodes: options, else the environment. */
    o.tls_ca_file = a->cacert ? a->cacert : getenv("FENCELOCK_CACERT");
    o.tls_cert_file = a->cert ? a->cert : getenv("FENCELOCK_CERT");
    o.tls_key_file = a->key ? a->key : getenv("FENCELOCK_KEY");
    o.tls_server_name = a->tls_server_name ? a->tls_server_name : getenv("FENCELOCK_TLS_SERVER_NAME");
    o.wait_mode = a->wait_mode;
    o.backoff = a->backoff;
    /* While clients of the layout before fence buckets share resources
     * (docs/fencing.md, "Upgrading"); scripts as functions of a library on
     * the nodes (docs/security.md). */
    if (env_flag(prog, "FENCELOCK_FENCE_TRANSITION", &o.fence_transition) < 0 ||
        env_flag(prog, "FENCELOCK_REDIS_FUNCTIONS", &o.redis_functions) < 0) {
        *exit_code = EXIT_USAGE;
        goto out;
    }
    if (a->retry_delay_max_ms)
        o.retry_delay_max_ms = a->retry_delay_max_ms;
    if (o.retry_delay_max_ms < o.retry_delay_ms)
        o.retry_delay_max_ms = o.retry_delay_ms;
    char err[512];
    int rc = lockcore_client_new(&o, &c, err, sizeof(err));
    if (rc < 0) {
        fprintf(stderr, "%s: %s\n", prog, err);
        *exit_code = fencelock_exit_code(rc);
        c = NULL;
    }
out:
    explicit_bzero(pw, sizeof(pw)); /* the client keeps its own copy */
    free(nodes);
    free(buf);
    return c;
}

enum {
    O_NODES = 256,
    O_TTL,
    O_RETRY_COUNT,
    O_RETRY_DELAY,
    O_WAIT,
    O_PREFIX,
    O_NOFENCE,
    O_EXTEND_AT,
    O_KILL_AFTER,
    O_TIMEOUT,
    O_VERSION,
    O_VERBOSE,
    O_QUIET,
    O_UNDO,
    O_NOTIFY,
    O_NO_NOTIFY,
    O_FAIR,
    O_BACKOFF,
    O_RETRY_DELAY_MAX,
    O_PASSWORD_FILE,
    O_CACERT,
    O_CERT,
    O_KEY,
    O_TLS_SERVER_NAME,
    O_PERMITS,
    O_READ,
    O_WRITE,
    O_REENTRANT,
    O_MAX_HOLD,
    O_TO,
    O_FORCE,
    O_VALUE,
    O_AGAIN,
    O_WATCH,
};

/* name: the option as "--ttl" (never the value: argv may hold "--ttl=5x"). */
static int set_duration(struct args *a, int opt, const char *name, const char *val)
{
    uint64_t d = 0;
    if (fencelock_parse_duration(val, &d) < 0) {
        fprintf(stderr, "%s: %s: '%s' is not a duration (like 500ms, 10s, 2m, 1h)\n", prog, name, val);
        return -1;
    }
    switch (opt) {
    case O_TTL:
        if (d == 0) {
            fprintf(stderr, "%s: --ttl must be above 0\n", prog);
            return -1;
        }
        a->ttl_ms = d;
        break;
    case O_RETRY_DELAY:
        a->retry_delay_ms = d;
        a->retry_delay_set = 1;
        break;
    case O_WAIT:
        a->wait_ms = d;
        a->wait_set = 1;
        break;
    case O_EXTEND_AT:
        if (d == 0) {
            fprintf(stderr, "%s: --extend-at must be above 0\n", prog);
            return -1;
        }
        a->extend_at_ms = d;
        break;
    case O_KILL_AFTER:
        a->kill_after_ms = d;
        break;
    case O_MAX_HOLD:
        if (d == 0) {
            fprintf(stderr, "%s: --max-hold must be above 0\n", prog);
            return -1;
        }
        a->max_hold_ms = d;
        break;
    case O_RETRY_DELAY_MAX:
        a->retry_delay_max_ms = d;
        break;
    default:
        if (d == 0) {
            fprintf(stderr, "%s: --timeout must be above 0\n", prog);
            return -1;
        }
        a->request_timeout_ms = d;
        break;
    }
    return 0;
}

static const struct option longopts[] = {
    {"nodes", required_argument, NULL, O_NODES},
    {"ttl", required_argument, NULL, O_TTL},
    {"retry-count", required_argument, NULL, O_RETRY_COUNT},
    {"retry-delay", required_argument, NULL, O_RETRY_DELAY},
    {"wait", required_argument, NULL, O_WAIT},
    {"key-prefix", required_argument, NULL, O_PREFIX},
    {"no-fencing", no_argument, NULL, O_NOFENCE},
    {"extend-at", required_argument, NULL, O_EXTEND_AT},
    {"kill-after", required_argument, NULL, O_KILL_AFTER},
    {"timeout", required_argument, NULL, O_TIMEOUT},
    {"help", no_argument, NULL, 'h'},
    {"version", no_argument, NULL, O_VERSION},
    {"verbose", no_argument, NULL, O_VERBOSE},
    {"quiet", no_argument, NULL, O_QUIET},
    {"notify", no_argument, NULL, O_NOTIFY},
    {"no-notify", no_argument, NULL, O_NO_NOTIFY},
    {"fair", no_argument, NULL, O_FAIR},
    {"backoff", required_argument, NULL, O_BACKOFF},
    {"retry-delay-max", required_argument, NULL, O_RETRY_DELAY_MAX},
    {"password-file", required_argument, NULL, O_PASSWORD_FILE},
    {"cacert", required_argument, NULL, O_CACERT},
    {"cert", required_argument, NULL, O_CERT},
    {"key", required_argument, NULL, O_KEY},
    {"tls-server-name", required_argument, NULL, O_TLS_SERVER_NAME},
    {"undo", required_argument, NULL, O_UNDO},
    {"permits", required_argument, NULL, O_PERMITS},
    {"read", no_argument, NULL, O_READ},
    {"write", no_argument, NULL, O_WRITE},
    {"reentrant", no_argument, NULL, O_REENTRANT},
    {"max-hold", required_argument, NULL, O_MAX_HOLD},
    {"to", required_argument, NULL, O_TO},
    {"force", no_argument, NULL, O_FORCE},
    {"value", required_argument, NULL, O_VALUE},
    {"again", no_argument, NULL, O_AGAIN},
    {"watch", no_argument, NULL, O_WATCH},
    {NULL, 0, NULL, 0},
};

/* One option from getopt_long into *a. Returns -1 to go on, or the exit
 * code (after saying why). */
static int parse_option(struct args *a, int opt, int longindex, const char *arg, const char *given)
{
    switch (opt) {
    case 'h':
        a->help = 1;
        return -1;
    case O_VERSION:
        printf("fencelock %s\n", FENCELOCK_VERSION);
        return EXIT_OK;
    case O_NODES:
        a->nodes = arg;
        return -1;
    case O_PREFIX:
        a->key_prefix = arg;
        return -1;
    case O_NOFENCE:
        a->fencing = 0;
        return -1;
    case O_VERBOSE:
        a->verbose = 1;
        return -1;
    case O_QUIET:
        a->quiet = 1;
        return -1;
    case O_UNDO:
        a->undo = arg;
        return -1;
    case O_PASSWORD_FILE:
        a->password_file = arg;
        return -1;
    case O_CACERT:
        a->cacert = arg;
        return -1;
    case O_CERT:
        a->cert = arg;
        return -1;
    case O_KEY:
        a->key = arg;
        return -1;
    case O_TLS_SERVER_NAME:
        a->tls_server_name = arg;
        return -1;
    case O_READ:
    case O_WRITE: {
        int rw = opt == O_READ ? RW_READ : RW_WRITE;
        if (a->rw != RW_NONE && a->rw != rw) {
            fprintf(stderr, "%s: --read and --write exclude each other: a lock is one side\n", prog);
            return EXIT_USAGE;
        }
        a->rw = rw;
        return -1;
    }
    case O_REENTRANT:
        a->reentrant = 1;
        return -1;
    case O_NOTIFY:
        a->wait_mode = LOCKCORE_WAIT_NOTIFY;
        a->wait_mode_set = 1;
        return -1;
    case O_NO_NOTIFY:
        a->wait_mode = LOCKCORE_WAIT_POLL;
        a->wait_mode_set = 1;
        return -1;
    case O_FAIR:
        a->wait_mode = LOCKCORE_WAIT_FAIR;
        a->wait_mode_set = 1;
        return -1;
    case O_BACKOFF:
        if (strcmp(arg, "fixed") == 0)
            a->backoff = LOCKCORE_BACKOFF_FIXED;
        else if (strcmp(arg, "exponential") == 0)
            a->backoff = LOCKCORE_BACKOFF_EXPONENTIAL;
        else {
            fprintf(stderr, "%s: --backoff takes fixed or exponential, not '%s'\n", prog, arg);
            return EXIT_USAGE;
        }
        return -1;
    case O_TO: {
        uint64_t v;
        if (fencing_token_parse(arg, strlen(arg), &v) < 0 || v == 0) {
            fprintf(stderr, "%s: --to takes a token, 1 to 2^53 - 1\n", prog);
            return EXIT_USAGE;
        }
        a->repair_to = v;
        return -1;
    }
    case O_FORCE:
        a->force = 1;
        return -1;
    case O_VALUE:
        a->value = arg;
        return -1;
    case O_AGAIN:
        a->again = 1;
        return -1;
    case O_WATCH:
        a->watch = 1;
        return -1;
    case O_PERMITS: {
        char *end;
        errno = 0;
        long v = strtol(arg, &end, 10);
        if (*arg == '\0' || *end != '\0' || errno != 0 || v < 1 || v > LOCKCORE_PERMITS_MAX) {
            fprintf(stderr, "%s: --permits takes an integer from 1 to %d\n", prog, LOCKCORE_PERMITS_MAX);
            return EXIT_USAGE;
        }
        a->permits = (unsigned)v;
        return -1;
    }
    case O_RETRY_COUNT: {
        char *end;
        errno = 0;
        long v = strtol(arg, &end, 10);
        if (*arg == '\0' || *end != '\0' || errno != 0 || v < -1 || v > 1000000) {
            fprintf(stderr, "%s: --retry-count takes an integer from -1 to 1000000\n", prog);
            return EXIT_USAGE;
        }
        a->retry_count = (int)v;
        a->retry_set = 1;
        return -1;
    }
    case O_TTL:
    case O_RETRY_DELAY:
    case O_WAIT:
    case O_EXTEND_AT:
    case O_KILL_AFTER:
    case O_MAX_HOLD:
    case O_RETRY_DELAY_MAX:
    case O_TIMEOUT: {
        char name[32];
        snprintf(name, sizeof(name), "--%s", longopts[longindex].name);
        return set_duration(a, opt, name, arg) < 0 ? EXIT_USAGE : -1;
    }
    case ':':
        fprintf(stderr, "%s: option '%s' needs a value (see --help)\n", prog, given);
        return EXIT_USAGE;
    default:
        fprintf(stderr, "%s: unknown option '%s' (see --help)\n", prog, given);
        return EXIT_USAGE;
    }
}

/* A "--" among argv[from..argc). */
static int dashes_ahead(int argc, char **argv, int from)
{
    for (int i = from; i < argc; i++)
        if (strcmp(argv[i], "--") == 0)
            return 1;
    return 0;
}

/* Does the command name take a command to run (run, elect)? */
static int runs_command(const char *name, const struct command *table, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (strcmp(name, table[i].name) == 0)
            return (table[i].flags & (CMD_RUN | CMD_ELECT)) != 0;
    return 0;
}

/*
 * Options may come before, between and after the operands. `run` takes
 * its resources up to the first "--" and everything after it as the
 * command; without any "--", one resource and then the command (the form
 * fencelock always had: `run job ls --help` runs `ls --help`). `elect`
 * takes its name and its command the same way.
 * Returns -1 to go on, or the exit code (after saying why).
 */
static int parse_args(int argc, char **argv, const struct command *table, size_t n, struct cmdline *cl)
{
    memset(cl, 0, sizeof(*cl));
    cl->a.retry_count = 3;
    cl->a.fencing = 1;
    cl->a.wait_mode = LOCKCORE_WAIT_NOTIFY;
    cl->a.kill_after_ms = 5000;
    opterr = 0;
    optind = 1;
    while (optind < argc && cl->cmd == NULL) {
        int prev = optind;
        int longindex = -1;
        int opt = getopt_long(argc, argv, "+:h", longopts, &longindex);
        if (opt != -1) {
            int code = parse_option(&cl->a, opt, longindex, optarg, argv[optind - 1]);
            if (code >= 0)
                return code;
            continue;
        }
        int after_dashes = optind > prev && strcmp(argv[optind - 1], "--") == 0;
        int is_run = cl->nops > 0 && runs_command(cl->operands[0], table, n);
        if (is_run && cl->nops >= 2 && (after_dashes || !dashes_ahead(argc, argv, optind))) {
            cl->cmd = &argv[optind]; /* run's command starts here (NULL at the end) */
            break;
        }
        if (optind >= argc)
            break;
        if (after_dashes && !is_run) {
            fprintf(stderr, "%s: unexpected '--' (see --help)\n", prog);
            return EXIT_USAGE;
        }
        if (cl->nops == OPERANDS_MAX) {
            cl->too_many = 1;
            optind++;
            continue;
        }
        cl->operands[cl->nops++] = argv[optind++];
    }
    return -1;
}

/* Is s a lock id (40 lowercase hex digits)? */
static int looks_like_id(const char *s)
{
    return strlen(s) == LOCKCORE_ID_LEN && strspn(s, "0123456789abcdef") == LOCKCORE_ID_LEN;
}

/* The operands into cl->t and cl->id, and the combinations of options and
 * operands that make no lock. Returns -1 to go on, or EXIT_USAGE after
 * saying why. */
static int check_target(struct cmdline *cl, const struct command *k)
{
    const char *name = k->name;
    struct args *a = &cl->a;
    int takes_id = (k->flags & CMD_TAKES_ID) != 0;
    int nres = cl->nops - 1 - takes_id;
    /* acquire --reentrant RESOURCE LOCK_ID: the hold to re-enter. */
    if ((k->flags & CMD_ACQUIRE) && a->reentrant && cl->nops == 3) {
        a->lock_id = cl->operands[2];
        nres = 1;
        if (!looks_like_id(a->lock_id)) {
            fprintf(stderr, "%s: acquire --reentrant: '%s' is not a lock id (40 lowercase hex digits)\n",
                    prog, a->lock_id);
            return EXIT_USAGE;
        }
    }
    if (nres < 1 || ((k->flags & (CMD_RUN | CMD_ELECT)) && (cl->cmd == NULL || cl->cmd[0] == NULL))) {
        fprintf(stderr, "%s: %s: wrong number of arguments\n", prog, name);
        fputs(k->usage, stderr);
        return EXIT_USAGE;
    }
    if (cl->too_many || nres > LOCKCORE_MULTI_MAX) {
        fprintf(stderr, "%s: %s: at most %d resources in a set\n", prog, name, LOCKCORE_MULTI_MAX);
        return EXIT_USAGE;
    }
    cl->t.n = (size_t)nres;
    for (int i = 0; i < nres; i++)
        cl->t.names[i] = cl->operands[1 + i];
    if (takes_id)
        cl->id = cl->operands[cl->nops - 1];
    if (nres > 1) {
        const char *other = a->permits > 0      ? "--permits"
                            : a->rw == RW_READ  ? "--read"
                            : a->rw == RW_WRITE ? "--write"
                            : a->reentrant      ? "--reentrant"
                                                : NULL;
        if (other != NULL) {
            fprintf(stderr,
                    "%s: %s: %s takes one resource; several resources are one multi-resource lock, of no "
                    "other kind\n",
                    prog, name, other);
            return EXIT_USAGE;
        }
        for (int i = 0; i < nres; i++) {
            for (int j = 0; j < i; j++) {
                if (strcmp(cl->t.names[i], cl->t.names[j]) == 0) {
                    fprintf(stderr, "%s: %s: resource '%s' given twice\n", prog, name, cl->t.names[i]);
                    return EXIT_USAGE;
                }
            }
            /* `acquire RESOURCE LOCK_ID` without --reentrant would lock a
             * resource named after the id: surely not what was meant. */
            if ((k->flags & CMD_ACQUIRE) && looks_like_id(cl->t.names[i])) {
                fprintf(stderr,
                        "%s: acquire: '%s' looks like a lock id, not a resource: to re-enter a reentrant "
                        "hold, give --reentrant\n",
                        prog, cl->t.names[i]);
                return EXIT_USAGE;
            }
        }
    }
    const char *kinds[3];
    int nk = 0;
    if (a->permits > 0)
        kinds[nk++] = "--permits";
    if (a->rw != RW_NONE)
        kinds[nk++] = a->rw == RW_READ ? "--read" : "--write";
    if (a->reentrant)
        kinds[nk++] = "--reentrant";
    if (nk > 1) {
        fprintf(stderr, "%s: %s and %s exclude each other: a lock is of one kind\n", prog, kinds[0],
                kinds[1]);
        return EXIT_USAGE;
    }
    /* Every kind waits in line where asked (lockcore: notified and fair
     * waiting for the plain lock, sets, the read-write lock, permits and a
     * first reentrant hold); a re-entry of a given hold polls, and only
     * with --reentrant and a LOCK_ID is that what the line asks for. */
    return -1;
}

/* elect and leader: one name, the options that are theirs, and none of
 * another kind of lock. Returns -1 to go on, or EXIT_USAGE after saying
 * why. */
static int check_election(const struct cmdline *cl, const struct command *k)
{
    const struct args *a = &cl->a;
    int elect = (k->flags & CMD_ELECT) != 0, leader = (k->flags & CMD_LEADER) != 0;
    if ((a->value != NULL || a->again) && !elect) {
        fprintf(stderr, "%s: %s only applies to elect\n", prog, a->value != NULL ? "--value" : "--again");
        return EXIT_USAGE;
    }
    if (a->watch && !leader) {
        fprintf(stderr, "%s: --watch only applies to leader\n", prog);
        return EXIT_USAGE;
    }
    if (!elect && !leader)
        return -1;
    if (cl->t.n != 1) {
        fprintf(stderr, "%s: %s takes one NAME\n", prog, k->name);
        fputs(k->usage, stderr);
        return EXIT_USAGE;
    }
    /* An election is the fair lock of its name: candidates always wait in
     * line, and no other kind of lock of the name is one. */
    const char *other = a->rw == RW_READ                                                  ? "--read"
                        : a->rw == RW_WRITE                                               ? "--write"
                        : a->reentrant                                                    ? "--reentrant"
                        : elect && a->wait_mode_set && a->wait_mode == LOCKCORE_WAIT_POLL ? "--no-notify"
                                                                                          : NULL;
    if (other != NULL) {
        fprintf(stderr, "%s: %s: %s does not apply: an election is the fair lock of its name\n", prog,
                k->name, other);
        return EXIT_USAGE;
    }
    if (a->value != NULL && strlen(a->value) > LOCKCORE_VALUE_MAX) {
        fprintf(stderr, "%s: --value: at most %d bytes\n", prog, LOCKCORE_VALUE_MAX);
        return EXIT_USAGE;
    }
    return -1;
}

/* Help, and the checks that need the whole command line. Sets *out to the
 * command to run and returns -1, or returns the exit code. */
static int check_args(struct cmdline *cl, const struct command *table, size_t n, const struct command **out)
{
    const char *name = cl->nops > 0 ? cl->operands[0] : NULL;
    const struct command *k = NULL;
    for (size_t i = 0; name != NULL && i < n; i++)
        if (strcmp(name, table[i].name) == 0 && table[i].run != NULL)
            k = &table[i];
    if (cl->a.help) {
        if (k != NULL)
            fputs(k->usage, stdout);
        else
            usage(stdout);
        return EXIT_OK;
    }
    if (name == NULL) {
        usage(stderr);
        return EXIT_USAGE;
    }
    if (k == NULL) {
        fprintf(stderr, "%s: unknown command '%s' (see --help)\n", prog, name);
        return EXIT_USAGE;
    }
    int code = check_target(cl, k);
    if (code >= 0 || (code = check_election(cl, k)) >= 0)
        return code;
    if (cl->a.permits > 0 && !(k->flags & CMD_PERMITS)) {
        fprintf(stderr,
                "%s: --permits applies to acquire, run and status (extend and release a permit by\n"
                "  its own name, RESOURCE:permit:<i>)\n",
                prog);
        return EXIT_USAGE;
    }
    if (cl->a.undo != NULL && !(k->flags & CMD_RUN)) {
        fprintf(stderr, "%s: --undo only applies to run\n", prog);
        return EXIT_USAGE;
    }
    if (cl->a.max_hold_ms != 0 && !(k->flags & CMD_RUN)) {
        fprintf(stderr, "%s: --max-hold only applies to run\n", prog);
        return EXIT_USAGE;
    }
    if ((cl->a.repair_to != 0 || cl->a.force) && !(k->flags & CMD_REPAIR)) {
        fprintf(stderr, "%s: --to and --force only apply to repair\n", prog);
        return EXIT_USAGE;
    }
    if ((k->flags & CMD_REPAIR) && cl->t.n != 1) {
        fprintf(stderr, "%s: repair takes one resource\n", prog);
        return EXIT_USAGE;
    }
    if (cl->a.extend_at_ms != 0 && cl->a.extend_at_ms >= fencelock_ttl_ms(&cl->a)) {
        fprintf(stderr, "%s: --extend-at must be below --ttl\n", prog);
        return EXIT_USAGE;
    }
    *out = k;
    return -1;
}

/* acquire and run leave who they are beside the lock: for acquire the
 * process that called it (which keeps the lock id), for run fencelock and
 * its command. Other commands take no lock: "". */
static void holder_info_for(const struct command *k, const struct cmdline *cl, char *info, size_t cap)
{
    char cmdline[LOCKCORE_INFO_MAX + 1] = "";
    info[0] = '\0';
    if (k->flags & CMD_ACQUIRE) {
        fencelock_process_cmdline(getppid(), cmdline, sizeof(cmdline));
        fencelock_holder_info(info, cap, getppid(), cmdline);
    } else if (k->flags & CMD_RUN) {
        size_t len = 0;
        for (int i = 0; cl->cmd[i] != NULL && len + 1 < sizeof(cmdline); i++)
            len += (size_t)snprintf(cmdline + len, sizeof(cmdline) - len, "%s%s", i ? " " : "", cl->cmd[i]);
        fencelock_holder_info(info, cap, getpid(), cmdline);
    }
}

static int dispatch(const struct command *k, const struct cmdline *cl)
{
    char info[LOCKCORE_INFO_MAX + 1];
    holder_info_for(k, cl, info, sizeof(info));
    int code = EXIT_ERROR;
    lockcore_client *c = make_client(&cl->a, info, &code);
    if (c == NULL)
        return code;
    code = k->run(c, cl);
    lockcore_client_free(c);
    return code;
}

int fencelock_lock_main(int argc, char **argv, const struct command *table, size_t n)
{
    struct cmdline cl;
    int code = parse_args(argc, argv, table, n, &cl);
    if (code >= 0)
        return code;
    const struct command *k = NULL;
    code = check_args(&cl, table, n, &k);
    if (code >= 0)
        return code;
    return dispatch(k, &cl);
}

/* ---- the file commands ---- */

/* The file commands' options that take a value, besides the lock
 * commands' (which do not apply to them, and say so). */
static const char *const file_value_opts[] = {"--token", "--dir", NULL};

/* Does arg take the next word as its value? */
static int takes_value(const char *arg)
{
    if (strncmp(arg, "--", 2) == 0)
        for (const struct option *o = longopts; o->name != NULL; o++)
            if (o->has_arg == required_argument && strcmp(arg + 2, o->name) == 0)
                return 1;
    for (int i = 0; file_value_opts[i] != NULL; i++)
        if (strcmp(arg, file_value_opts[i]) == 0)
            return 1;
    return 0;
}

const char *fencelock_command_name(int argc, char **argv)
{
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--") == 0)
            return NULL;
        if (argv[i][0] == '-' && argv[i][1] != '\0')
            i += takes_value(argv[i]);
        else
            return argv[i];
    }
    return NULL;
}

enum { F_TOKEN = 256, F_DIR, F_WAIT, F_SIDECAR };

int fencelock_file_args(int argc, char **argv, const char *name, void (*usage)(FILE *, const char *),
                        struct file_args *fa)
{
    static const struct option file_longopts[] = {
        {"token", required_argument, NULL, F_TOKEN},
        {"dir", required_argument, NULL, F_DIR},
        {"wait", required_argument, NULL, F_WAIT},
        {"sidecar", no_argument, NULL, F_SIDECAR},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    memset(fa, 0, sizeof(*fa));
    fa->name = name;
    fencefile_options_init(&fa->o);
    int help = 0, nops = 0;
    opterr = 0;
    optind = 1;
    int dashes = 0;
    while (optind < argc) {
        int prev = optind;
        int opt = dashes ? -1 : getopt_long(argc, argv, "+:h", file_longopts, NULL);
        if (opt == -1) {
            /* After "--" every word is an operand: "write -- -odd-name". */
            if (optind > prev && strcmp(argv[optind - 1], "--") == 0)
                dashes = 1;
            if (optind >= argc)
                break;
            if (nops == 2) {
                fprintf(stderr, "%s: %s: too many arguments (see %s --help)\n", prog, name, name);
                return EXIT_USAGE;
            }
            if (nops++ == 1)
                fa->file = argv[optind];
            optind++;
            continue;
        }
        switch (opt) {
        case 'h':
            help = 1;
            break;
        case F_TOKEN:
            fa->token_opt = optarg;
            break;
        case F_DIR:
            fa->o.dir_fence = optarg;
            break;
        case F_SIDECAR:
            fa->o.store = FENCEFILE_STORE_SIDECAR;
            break;
        case F_WAIT:
            if (fencelock_parse_duration(optarg, &fa->o.lock_timeout_ms) < 0) {
                fprintf(stderr, "%s: --wait '%s': not a duration (like 500ms, 10s, 2m)\n", prog, optarg);
                return EXIT_USAGE;
            }
            break;
        case ':':
            fprintf(stderr, "%s: option '%s' needs a value (see %s --help)\n", prog, argv[optind - 1], name);
            return EXIT_USAGE;
        default:
            fprintf(stderr, "%s: %s: option '%s' does not apply (see %s --help)\n", prog, name,
                    argv[optind - 1], name);
            return EXIT_USAGE;
        }
    }
    if (help) {
        usage(stdout, name);
        return EXIT_OK;
    }
    if (fa->file == NULL || nops != 2) {
        fprintf(stderr, "%s: %s: give one %s\n", prog, name,
                strcmp(name, "fence") == 0 ? "FILE or DIR" : "FILE");
        usage(stderr, name);
        return EXIT_USAGE;
    }
    return -1;
}
