/*
 * fencelock: acquire, extend, release and inspect locks on N Redis nodes
 * from the shell, and run a command under a lock that is kept alive, with
 * its fencing token in the environment. Data goes to stdout as one JSON
 * line; diagnostics go to stderr; exit codes are stable (see usage() and
 * docs/cli.md).
 */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <inttypes.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <jansson.h>

#include <lockcore/lockcore.h>

#include "cmd_file.h"

#ifndef FENCELOCK_VERSION
#define FENCELOCK_VERSION "unknown"
#endif

/* Exit codes: the command's own status when `run` ran it, else these.
 * They are part of the interface: never renumber them. */
enum {
    EXIT_OK = 0,
    EXIT_USAGE = 64,       /* bad arguments */
    EXIT_UNREACHABLE = 69, /* a majority of nodes unreachable */
    EXIT_ERROR = 70,       /* protocol/server error, or anything else */
    EXIT_NOT_HELD = 75,    /* not acquired (held by another) within --wait */
    EXIT_LOST = 79,        /* the lock was lost (run: while the command ran) */
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
    int help;
};

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
    "  --timeout D          per-node request timeout (default 50ms)\n"
    "  --extend-at D        run: extend when D of validity is left (default a third of --ttl)\n"
    "  --kill-after D       run: after SIGTERM for a lost lock, SIGKILL after D (default 5s)\n"
    "  -h, --help           help (for one command: fencelock COMMAND --help)\n"
    "  --version            print the version\n"
    "durations: an integer with ms, s or m (a bare number is ms)\n";

static const char usage_exit[] =
    "exit codes: 0 success (run: the command's own status, 128+N if killed by signal N);\n"
    "  64 usage error; 69 nodes unreachable (no majority answered); 70 server or other error;\n"
    "  75 not acquired: held by another (within --wait); 79 lock lost or not held.\n";

static void usage(FILE *to)
{
    fprintf(to,
            "usage: fencelock [options] COMMAND ...\n"
            "\n"
            "commands:\n"
            "  acquire RESOURCE               acquire; print the lock as JSON\n"
            "  extend RESOURCE LOCK_ID        extend a held lock to --ttl from now\n"
            "  release RESOURCE LOCK_ID       release a held lock\n"
            "  status RESOURCE                each node's holder, remaining ms and fence value\n"
            "  run RESOURCE [--] CMD [ARG...] run CMD under the lock, extending it automatically\n"
            "\n"
            "%s\n%s",
            usage_options, usage_exit);
}

/* Help for one command: what it does, what it prints, how it exits. */
static void command_usage(FILE *to, const char *name)
{
    if (strcmp(name, "acquire") == 0)
        fputs(
            "usage: fencelock [options] acquire RESOURCE\n"
            "\n"
            "Acquire RESOURCE on a majority of the nodes and print one JSON line:\n"
            "  {\"resource\",\"lock_id\",\"token\",\"validity_ms\",\"ttl_ms\",\"nodes_granted\",\"nodes\"}\n"
            "The lock stays held until its TTL runs out, `fencelock extend` or\n"
            "`fencelock release` with the lock_id.\n"
            "Relevant options: --nodes --ttl --retry-count --retry-delay --wait --key-prefix\n"
            "  --no-fencing --timeout\n"
            "Exit: 0 acquired; 75 held by another; 69 nodes unreachable; 64 usage; 70 error.\n",
            to);
    else if (strcmp(name, "extend") == 0)
        fputs("usage: fencelock [options] extend RESOURCE LOCK_ID [--ttl D]\n"
              "\n"
              "Extend the lock held under LOCK_ID to --ttl (default 10s) from now, on every\n"
              "node where the key still holds LOCK_ID; the token is kept. Prints:\n"
              "  "
              "{\"resource\",\"lock_id\",\"extended\",\"validity_ms\",\"ttl_ms\",\"nodes_extended\","
              "\"nodes\"}\n"
              "Exit: 0 extended on a majority; 79 not held under LOCK_ID on a majority;\n"
              "  69 nodes unreachable; 64 usage; 70 error.\n",
              to);
    else if (strcmp(name, "release") == 0)
        fputs("usage: fencelock [options] release RESOURCE LOCK_ID\n"
              "\n"
              "Delete the lock on every node where the key still holds LOCK_ID. Prints:\n"
              "  {\"resource\",\"lock_id\",\"released\",\"nodes_released\",\"nodes\"}\n"
              "released is false when no node held LOCK_ID any more (expired or released).\n"
              "Exit: 0 a majority answered (released or not); 69 nodes unreachable;\n"
              "  64 usage; 70 error.\n",
              to);
    else if (strcmp(name, "status") == 0)
        fputs("usage: fencelock [options] status RESOURCE\n"
              "\n"
              "Print each node's view of RESOURCE, and whether a majority holds one id:\n"
              "  "
              "{\"resource\",\"quorum\",\"nodes\":[{\"node\",\"reachable\",\"holder\",\"remaining_ms\","
              "\"fence\"\n"
              "   | \"error\"}],\"reachable\",\"held_by_majority\",\"majority_holder\"}\n"
              "Exit: 0 a majority answered; 69 nodes unreachable; 64 usage; 70 error.\n",
              to);
    else
        fputs("usage: fencelock [options] run RESOURCE [--] COMMAND [ARG...]\n"
              "\n"
              "Acquire RESOURCE (waiting up to --wait), run COMMAND with FENCELOCK_TOKEN,\n"
              "FENCELOCK_RESOURCE, FENCELOCK_LOCK_ID and FENCELOCK_VALIDITY_MS in its\n"
              "environment, extend the lock whenever --extend-at of validity is left, and\n"
              "release it when COMMAND ends. If the lock is lost (an extension cannot keep a\n"
              "majority), COMMAND gets SIGTERM, then SIGKILL after --kill-after, and fencelock\n"
              "exits with 79. SIGINT, SIGTERM and SIGHUP are passed on to COMMAND.\n"
              "Exit: COMMAND's own status (128+N if killed by signal N); 75 not acquired;\n"
              "  79 lock lost; 69 nodes unreachable; 64 usage; 70 error;\n"
              "  126/127 COMMAND could not be run / not found.\n",
              to);
}

/* A duration: digits and an optional unit (ms, s, m); a bare number is ms. */
static int parse_duration(const char *s, uint64_t *out)
{
    char *end;
    errno = 0;
    if (s == NULL || *s < '0' || *s > '9')
        return -1;
    unsigned long long v = strtoull(s, &end, 10);
    if (errno != 0)
        return -1;
    uint64_t mult;
    if (*end == '\0' || strcmp(end, "ms") == 0)
        mult = 1;
    else if (strcmp(end, "s") == 0)
        mult = 1000;
    else if (strcmp(end, "m") == 0)
        mult = 60000;
    else
        return -1;
    if (v > UINT64_MAX / mult / 1000)
        return -1;
    *out = (uint64_t)v * mult;
    return 0;
}

static int code_for(int rc)
{
    switch (rc) {
    case 0:
        return EXIT_OK;
    case -EINVAL:
        return EXIT_USAGE;
    case LOCKCORE_ELOCKED:
    case -ETIMEDOUT:
        return EXIT_NOT_HELD;
    case LOCKCORE_ENOQUORUM:
        return EXIT_UNREACHABLE;
    case LOCKCORE_ELOST:
        return EXIT_LOST;
    default:
        return EXIT_ERROR;
    }
}

/* Print j as one line on stdout and release it. */
static void print_json(json_t *j)
{
    char *s = j ? json_dumps(j, JSON_COMPACT | JSON_PRESERVE_ORDER) : NULL;
    if (s != NULL) {
        puts(s);
        fflush(stdout);
        free(s);
    } else {
        fprintf(stderr, "%s: out of memory\n", prog);
    }
    json_decref(j);
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

static lockcore_client *make_client(const struct args *a, int *exit_code)
{
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
    char err[512];
    int rc = lockcore_client_new(&o, &c, err, sizeof(err));
    if (rc < 0) {
        fprintf(stderr, "%s: %s\n", prog, err);
        *exit_code = code_for(rc);
        c = NULL;
    }
out:
    free(nodes);
    free(buf);
    return c;
}

static int fail(lockcore_client *c, const char *what, int rc)
{
    fprintf(stderr, "%s: %s: %s\n", prog, what, lockcore_errmsg(c));
    return code_for(rc);
}

/* The result of one non-blocking operation, kept on failure too (the
 * blocking calls drop the lock of a failed extend, and with it how many
 * nodes still agreed). */
struct outcome {
    int done;
    int rc;
    struct lockcore_lock lock;
};

static void on_outcome(lockcore_client *c, int rc, const struct lockcore_lock *lock, void *arg)
{
    (void)c;
    struct outcome *o = arg;
    o->done = 1;
    o->rc = rc;
    o->lock = *lock;
}

/* Every lockcore operation ends by its own deadlines: this loop is bounded. */
static int wait_outcome(lockcore_client *c, struct outcome *o, int started)
{
    if (started < 0)
        return started;
    while (!o->done) {
        int r = lockcore_run(c, -1);
        if (r < 0)
            return r;
    }
    return o->rc;
}

static int is_lock_id(const char *id)
{
    if (strlen(id) != LOCKCORE_ID_LEN)
        return 0;
    for (const char *p = id; *p; p++)
        if (!((*p >= '0' && *p <= '9') || (*p >= 'a' && *p <= 'f')))
            return 0;
    return 1;
}

/* A lock record for a lock held by someone who knows its id (this process
 * did not acquire it, so it cannot know the time left: the nodes decide). */
static int lock_from_args(const char *resource, const char *id, uint64_t ttl_ms, struct lockcore_lock *l)
{
    memset(l, 0, sizeof(*l));
    if (*resource == '\0' || strlen(resource) > LOCKCORE_RESOURCE_MAX) {
        fprintf(stderr, "%s: RESOURCE must be 1 to %d bytes\n", prog, LOCKCORE_RESOURCE_MAX);
        return -1;
    }
    if (!is_lock_id(id)) {
        fprintf(stderr, "%s: LOCK_ID must be the %d lowercase hex digits acquire printed\n", prog,
                LOCKCORE_ID_LEN);
        return -1;
    }
    strcpy(l->resource, resource);
    strcpy(l->id, id);
    l->ttl_ms = ttl_ms;
    l->valid_until_ms = lockcore_now_ms() + ttl_ms;
    return 0;
}

static int cmd_acquire(lockcore_client *c, const char *resource)
{
    struct lockcore_lock l;
    int rc = lockcore_acquire(c, resource, &l);
    if (rc < 0)
        return fail(c, "acquire", rc);
    print_json(json_pack("{s:s, s:s, s:I, s:I, s:I, s:i, s:i}", "resource", l.resource, "lock_id", l.id,
                         "token", (json_int_t)l.token, "validity_ms", (json_int_t)l.validity_ms, "ttl_ms",
                         (json_int_t)l.ttl_ms, "nodes_granted", (int)l.nodes_ok, "nodes", (int)l.nodes));
    return EXIT_OK;
}

static int cmd_extend(lockcore_client *c, const struct args *a, const char *resource, const char *id)
{
    struct lockcore_lock l;
    uint64_t ttl = a->ttl_ms ? a->ttl_ms : 10000;
    if (lock_from_args(resource, id, ttl, &l) < 0)
        return EXIT_USAGE;
    struct outcome o = {0};
    int rc = wait_outcome(c, &o, lockcore_extend_async(c, &l, ttl, on_outcome, &o));
    if (!o.done)
        return fail(c, "extend", rc);
    print_json(json_pack("{s:s, s:s, s:b, s:I, s:I, s:i, s:i}", "resource", resource, "lock_id", id,
                         "extended", rc == 0, "validity_ms", (json_int_t)(rc == 0 ? o.lock.validity_ms : 0),
                         "ttl_ms", (json_int_t)ttl, "nodes_extended", (int)o.lock.nodes_ok, "nodes",
                         (int)o.lock.nodes));
    return rc == 0 ? EXIT_OK : fail(c, "extend", rc);
}

static int cmd_release(lockcore_client *c, const char *resource, const char *id)
{
    struct lockcore_lock l;
    if (lock_from_args(resource, id, 1, &l) < 0)
        return EXIT_USAGE;
    struct outcome o = {0};
    int rc = wait_outcome(c, &o, lockcore_release_async(c, &l, on_outcome, &o));
    if (!o.done)
        return fail(c, "release", rc);
    print_json(json_pack("{s:s, s:s, s:b, s:i, s:i}", "resource", resource, "lock_id", id, "released",
                         o.lock.nodes_ok > 0, "nodes_released", (int)o.lock.nodes_ok, "nodes",
                         (int)o.lock.nodes));
    return rc == 0 ? EXIT_OK : fail(c, "release", rc);
}

static int cmd_status(lockcore_client *c, const char *resource)
{
    struct lockcore_node_status st[LOCKCORE_NODES_MAX];
    int n = lockcore_status(c, resource, st, LOCKCORE_NODES_MAX);
    if (n < 0)
        return fail(c, "status", n);
    int quorum = n / 2 + 1;
    json_t *nodes = json_array();
    int reachable = 0;
    const char *majority = NULL;
    for (int i = 0; i < n; i++) {
        reachable += st[i].reachable;
        json_t *e = json_pack("{s:s, s:b}", "node", st[i].node, "reachable", st[i].reachable);
        if (st[i].reachable) {
            int held = st[i].holder[0] != '\0';
            json_object_set_new(e, "holder", held ? json_string(st[i].holder) : json_null());
            /* PTTL: -2 no key, -1 a key without expiry (not one of ours). */
            json_object_set_new(e, "remaining_ms", held ? json_integer(st[i].pttl_ms) : json_null());
            json_object_set_new(e, "fence", json_integer((json_int_t)st[i].fence));
        } else {
            json_object_set_new(e, "error", json_string(st[i].error));
        }
        json_array_append_new(nodes, e);
        if (!st[i].reachable || st[i].holder[0] == '\0')
            continue;
        int same = 0;
        for (int k = 0; k < n; k++)
            same += st[k].reachable && strcmp(st[k].holder, st[i].holder) == 0;
        if (same >= quorum)
            majority = st[i].holder;
    }
    print_json(json_pack("{s:s, s:i, s:o, s:i, s:b, s:s?}", "resource", resource, "quorum", quorum, "nodes",
                         nodes, "reachable", reachable, "held_by_majority", majority != NULL,
                         "majority_holder", majority));
    if (reachable < quorum) {
        fprintf(stderr, "%s: status: only %d of %d nodes answered\n", prog, reachable, n);
        return EXIT_UNREACHABLE;
    }
    return EXIT_OK;
}

/* ---- run ---- */

static volatile sig_atomic_t forwarded_signal;

static void on_signal(int sig)
{
    forwarded_signal = sig;
}

struct run_state {
    int lost_rc;
    char why[1200];
};

static void on_lost(lockcore_client *c, int rc, const struct lockcore_lock *l, void *arg)
{
    struct run_state *s = arg;
    s->lost_rc = rc ? rc : LOCKCORE_ELOST;
    snprintf(s->why, sizeof(s->why), "lock on '%s' lost: %s (%s)", l->resource, lockcore_strerror(s->lost_rc),
             lockcore_errmsg(c));
}

/* The command must not inherit our connections to the nodes: a command
 * that outlives us would keep them open. */
static void connections_cloexec(lockcore_client *c)
{
    struct pollfd fds[LOCKCORE_NODES_MAX];
    int timeout;
    int n = lockcore_pollfds(c, fds, LOCKCORE_NODES_MAX, &timeout);
    for (int i = 0; i < n; i++) {
        int flags = fcntl(fds[i].fd, F_GETFD);
        if (flags >= 0)
            fcntl(fds[i].fd, F_SETFD, flags | FD_CLOEXEC);
    }
}

static int cmd_run(lockcore_client *c, const struct args *a, const char *resource, char **cmd)
{
    struct lockcore_lock l;
    int rc = lockcore_acquire(c, resource, &l);
    if (rc < 0)
        return fail(c, "acquire", rc);

    struct run_state st = {0, ""};
    lockcore_keepalive *k = NULL;
    rc = lockcore_keepalive_start(c, &l, l.ttl_ms, a->extend_at_ms, on_lost, &st, &k);
    if (rc < 0) {
        int code = fail(c, "keepalive", rc);
        lockcore_release(c, &l);
        return code;
    }

    char token[24], validity[24];
    snprintf(token, sizeof(token), "%" PRIu64, l.token);
    snprintf(validity, sizeof(validity), "%" PRIu64, l.validity_ms);

    /* Handlers before fork: a signal that arrives while the command starts
     * is passed on, not lost. exec resets them to the default in the child. */
    struct sigaction sa;
    memset(&sa, 0, sizeof(sa));
    sa.sa_handler = on_signal;
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGHUP, &sa, NULL);

    connections_cloexec(c);
    fflush(stdout);
    fflush(stderr);
    pid_t pid = fork();
    if (pid < 0) {
        fprintf(stderr, "%s: fork: %s\n", prog, strerror(errno));
        lockcore_keepalive_stop(k);
        lockcore_release(c, &l);
        return EXIT_ERROR;
    }
    if (pid == 0) {
        setenv("FENCELOCK_TOKEN", token, 1);
        setenv("FENCELOCK_RESOURCE", l.resource, 1);
        setenv("FENCELOCK_LOCK_ID", l.id, 1);
        setenv("FENCELOCK_VALIDITY_MS", validity, 1);
        execvp(cmd[0], cmd);
        int e = errno;
        fprintf(stderr, "%s: %s: %s\n", prog, cmd[0], strerror(e));
        _exit(e == ENOENT ? 127 : 126);
    }

    int status = 0;
    uint64_t term_at = 0;
    int killed = 0;
    /* Bounded by the command itself, and on a lost lock by --kill-after. */
    for (;;) {
        pid_t r = waitpid(pid, &status, WNOHANG);
        if (r == pid || (r < 0 && errno != EINTR))
            break;
        if (forwarded_signal) {
            kill(pid, forwarded_signal);
            forwarded_signal = 0;
        }
        if (st.lost_rc != 0 && term_at == 0) {
            fprintf(stderr, "%s: %s; sending SIGTERM to %s (pid %d)\n", prog, st.why, cmd[0], (int)pid);
            kill(pid, SIGTERM);
            term_at = lockcore_now_ms();
        }
        if (term_at != 0 && !killed && lockcore_now_ms() - term_at >= a->kill_after_ms) {
            fprintf(stderr, "%s: %s still running %" PRIu64 " ms after SIGTERM; sending SIGKILL\n", prog,
                    cmd[0], a->kill_after_ms);
            kill(pid, SIGKILL);
            killed = 1;
        }
        /* The keep-alive runs from here; 20 ms also bounds how late we see
         * the command exit. */
        lockcore_run(c, 20);
    }

    lockcore_keepalive_get(k, &l);
    lockcore_keepalive_stop(k);
    /* Lost or not, delete our keys where they still hold our id: what a
     * minority still holds would otherwise block others until it expires. */
    rc = lockcore_release(c, &l);
    if (st.lost_rc != 0)
        return EXIT_LOST;
    if (rc < 0)
        fprintf(stderr, "%s: release: %s\n", prog, lockcore_errmsg(c));
    if (WIFEXITED(status))
        return WEXITSTATUS(status);
    if (WIFSIGNALED(status))
        return 128 + WTERMSIG(status);
    return EXIT_ERROR;
}

/* ---- command line ---- */

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
};

static int set_duration(struct args *a, int opt, const char *name, const char *val)
{
    uint64_t d = 0;
    if (parse_duration(val, &d) < 0) {
        fprintf(stderr, "%s: %s '%s': not a duration (like 500ms, 10s, 2m)\n", prog, name, val);
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

int main(int argc, char **argv)
{
    struct args a = {.retry_count = 3, .fencing = 1, .kill_after_ms = 5000};
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
        {NULL, 0, NULL, 0},
    };
    const char *operands[3];
    int nops = 0;
    char **cmd = NULL;

    /* write, append and fence (tools/cmd_file.c) parse their own options. */
    int file_code = fencelock_file_main(argc, argv);
    if (file_code >= 0)
        return file_code;

    opterr = 0;
    optind = 1;
    /* Options may come before, between and after the operands; `run` takes
     * everything after its RESOURCE (and an optional "--") as the command. */
    while (optind < argc && cmd == NULL) {
        int prev = optind;
        int opt = getopt_long(argc, argv, "+:h", longopts, NULL);
        if (opt == -1) {
            if (optind >= argc)
                break;
            int after_dashes = optind > prev && strcmp(argv[optind - 1], "--") == 0;
            int is_run = nops > 0 && strcmp(operands[0], "run") == 0;
            if (is_run && nops == 2) {
                cmd = &argv[optind]; /* run's command starts here */
                break;
            }
            if (after_dashes && !is_run) {
                fprintf(stderr, "%s: unexpected '--' (see --help)\n", prog);
                return EXIT_USAGE;
            }
            if (nops == 3) {
                fprintf(stderr, "%s: too many arguments (see --help)\n", prog);
                return EXIT_USAGE;
            }
            operands[nops++] = argv[optind++];
            continue;
        }
        switch (opt) {
        case 'h':
            a.help = 1;
            break;
        case O_VERSION:
            printf("fencelock %s\n", FENCELOCK_VERSION);
            return EXIT_OK;
        case O_NODES:
            a.nodes = optarg;
            break;
        case O_PREFIX:
            a.key_prefix = optarg;
            break;
        case O_NOFENCE:
            a.fencing = 0;
            break;
        case O_RETRY_COUNT: {
            char *end;
            errno = 0;
            long v = strtol(optarg, &end, 10);
            if (*optarg == '\0' || *end != '\0' || errno != 0 || v < -1 || v > 1000000) {
                fprintf(stderr, "%s: --retry-count takes an integer from -1 to 1000000\n", prog);
                return EXIT_USAGE;
            }
            a.retry_count = (int)v;
            a.retry_set = 1;
            break;
        }
        case O_TTL:
        case O_RETRY_DELAY:
        case O_WAIT:
        case O_EXTEND_AT:
        case O_KILL_AFTER:
        case O_TIMEOUT:
            if (set_duration(&a, opt, argv[optind - 1], optarg) < 0)
                return EXIT_USAGE;
            break;
        case ':':
            fprintf(stderr, "%s: option '%s' needs a value (see --help)\n", prog, argv[optind - 1]);
            return EXIT_USAGE;
        default:
            fprintf(stderr, "%s: unknown option '%s' (see --help)\n", prog, argv[optind - 1]);
            return EXIT_USAGE;
        }
    }

    const char *name = nops > 0 ? operands[0] : NULL;
    int need = name == NULL                   ? 0
               : strcmp(name, "acquire") == 0 ? 2
               : strcmp(name, "status") == 0  ? 2
               : strcmp(name, "extend") == 0  ? 3
               : strcmp(name, "release") == 0 ? 3
               : strcmp(name, "run") == 0     ? 2
                                              : -1;
    if (a.help) {
        if (need > 0)
            command_usage(stdout, name);
        else
            usage(stdout);
        return EXIT_OK;
    }
    if (name == NULL) {
        usage(stderr);
        return EXIT_USAGE;
    }
    if (need < 0) {
        fprintf(stderr, "%s: unknown command '%s' (see --help)\n", prog, name);
        return EXIT_USAGE;
    }
    if (nops != need || (strcmp(name, "run") == 0 && (cmd == NULL || cmd[0] == NULL))) {
        fprintf(stderr, "%s: %s: wrong number of arguments\n", prog, name);
        command_usage(stderr, name);
        return EXIT_USAGE;
    }
    if (a.extend_at_ms != 0 && a.extend_at_ms >= (a.ttl_ms ? a.ttl_ms : 10000)) {
        fprintf(stderr, "%s: --extend-at must be below --ttl\n", prog);
        return EXIT_USAGE;
    }

    int code = EXIT_ERROR;
    lockcore_client *c = make_client(&a, &code);
    if (c == NULL)
        return code;
    if (strcmp(name, "acquire") == 0)
        code = cmd_acquire(c, operands[1]);
    else if (strcmp(name, "status") == 0)
        code = cmd_status(c, operands[1]);
    else if (strcmp(name, "extend") == 0)
        code = cmd_extend(c, &a, operands[1], operands[2]);
    else if (strcmp(name, "release") == 0)
        code = cmd_release(c, operands[1], operands[2]);
    else
        code = cmd_run(c, &a, operands[1], cmd);
    lockcore_client_free(c);
    return code;
}
