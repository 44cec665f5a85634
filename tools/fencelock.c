/*
 * fencelock: acquire, extend, release and inspect locks on N Redis nodes
 * from the shell, and run a command under a lock that is kept alive, with
 * its fencing token in the environment. Data goes to stdout as one JSON
 * line; diagnostics go to stderr; exit codes are stable (see usage() and
 * docs/cli.md).
 *
 * Reading order: usage texts, helpers (durations, exit codes, JSON, holder
 * info, the client), waiting, the commands acquire/extend/release/status,
 * argument parsing, dispatch, main. `run`'s process supervision is in
 * cmd_run.c; write/append/fence in cmd_file.c.
 */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <jansson.h>

#include <lockcore/lockcore.h>

#include "cmd_file.h"
#include "fencelock.h"

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
    "  --notify             while waiting, be told of releases instead of polling (the\n"
    "                       default for a plain or reentrant lock; the others poll)\n"
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
    "  --undo CMD           run: if the command fails or the lock is lost, run sh -c CMD\n"
    "                       (FENCELOCK_UNDO_REASON=failed|lost, FENCELOCK_JOB_STATUS)\n"
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
    "  79 lock lost or not held.\n";

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
            "\n"
            "%s\n%s",
            usage_options, usage_exit);
}

/* Help for one command: what it does, what it prints, how it exits. */
static void command_usage(FILE *to, const char *name)
{
    if (strcmp(name, "acquire") == 0)
        fputs(
            "usage: fencelock [options] acquire RESOURCE...\n"
            "       fencelock [options] acquire --reentrant RESOURCE [LOCK_ID]\n"
            "\n"
            "Acquire RESOURCE on a majority of the nodes and print one JSON line:\n"
            "  {\"resource\",\"lock_id\",\"token\",\"validity_ms\",\"ttl_ms\",\"nodes_granted\",\"nodes\"}\n"
            "Several resources are one multi-resource lock, all or nothing, with one token\n"
            "(\"resources\":[...] instead of \"resource\"); --read, --write: a side of a\n"
            "read-write lock; --reentrant: a reentrant hold (with LOCK_ID: one more hold\n"
            "of it); --permits N: a permit of a semaphore. Kinds other than the plain lock\n"
            "add \"kind\". The lock stays held until its TTL runs out, `fencelock extend`\n"
            "or `fencelock release` with the same resources, kind and the lock_id.\n"
            "Relevant options: --nodes --ttl --retry-count --retry-delay --wait --key-prefix\n"
            "  --no-fencing --timeout --read --write --reentrant --permits\n"
            "Exit: 0 acquired; 75 held by another; 69 no majority in time (unreachable, or\n"
            "  granted too slowly); 64 usage; 70 error.\n",
            to);
    else if (strcmp(name, "extend") == 0)
        fputs("usage: fencelock [options] extend RESOURCE... LOCK_ID [--ttl D]\n"
              "\n"
              "Extend the lock held under LOCK_ID to --ttl (default 10s) from now, on every\n"
              "node where the key still holds LOCK_ID; the token is kept. Name the lock as\n"
              "acquire did: every resource of a set, and --read, --write or --reentrant.\n"
              "Prints:\n"
              "  "
              "{\"resource\",\"lock_id\",\"extended\",\"validity_ms\",\"ttl_ms\",\"nodes_extended\","
              "\"nodes\"}\n"
              "Exit: 0 extended on a majority; 79 not held under LOCK_ID on a majority;\n"
              "  69 no majority in time; 64 usage; 70 error.\n",
              to);
    else if (strcmp(name, "release") == 0)
        fputs("usage: fencelock [options] release RESOURCE... LOCK_ID\n"
              "\n"
              "Delete the lock on every node where the key still holds LOCK_ID (a reentrant\n"
              "hold: one hold less). Name the lock as acquire did: every resource of a set,\n"
              "and --read, --write or --reentrant. Prints:\n"
              "  {\"resource\",\"lock_id\",\"released\",\"nodes_released\",\"nodes\"}\n"
              "released is false when no node held LOCK_ID any more (expired or released).\n"
              "Exit: 0 a majority answered (released or not); 69 no majority answered;\n"
              "  64 usage; 70 error.\n",
              to);
    else if (strcmp(name, "status") == 0)
        fputs("usage: fencelock [options] status RESOURCE...\n"
              "\n"
              "Print each node's view of RESOURCE, who holds it, and whether a majority holds\n"
              "one id:\n"
              "  {\"resource\",\"quorum\",\"nodes\":[{\"node\",\"reachable\",\"holder\",\"remaining_ms\",\n"
              "   \"holder_info\",\"fence\" | \"error\"}],\"reachable\",\"state\",\"held_by_majority\",\n"
              "   \"majority_holder\",\"majority_holder_info\",\"majority_remaining_ms\"}\n"
              "state: held (by a majority), expired (a minority still holds a key), free.\n"
              "holder_info: {\"host\",\"pid\",\"cmd\",\"acquired_at\"} left by acquire and run.\n"
              "Several resources: {\"resources\":[one object each],\"set_holder\"}.\n"
              "--reentrant adds the hold count (\"holds\"); --read or --write the readers\n"
              "(\"readers\", \"reader_ids\", \"writer\", \"writer_waits\", \"mode\": read, write\n"
              "or free); --permits N each permit.\n"
              "Exit: 0 a majority answered; 69 no majority answered; 64 usage; 70 error.\n",
              to);
    else
        fputs("usage: fencelock [options] run RESOURCE [--] COMMAND [ARG...]\n"
              "       fencelock [options] run RESOURCE... -- COMMAND [ARG...]\n"
              "\n"
              "The resources end at the first '--'; without one, the first operand is the\n"
              "resource and the rest is COMMAND.\n"
              "Acquire RESOURCE (waiting up to --wait), run COMMAND in a process group of its\n"
              "own with FENCELOCK_TOKEN, FENCELOCK_RESOURCE, FENCELOCK_LOCK_ID,\n"
              "FENCELOCK_VALIDITY_MS, FENCELOCK_GRANTED_MONO_MS, FENCELOCK_GRANTED_WALL_MS and\n"
              "FENCELOCK_VALID_UNTIL_MONO_MS in its environment, extend the lock whenever\n"
              "--extend-at of validity is left, and release it when COMMAND ends. If the lock\n"
              "is lost (an extension cannot keep a majority), COMMAND's group gets SIGTERM,\n"
              "then SIGKILL after --kill-after, and fencelock exits with 79. SIGINT, SIGTERM\n"
              "and SIGHUP are passed on to the group. If fencelock dies, a guardian process\n"
              "stops the group the same way (a process that leaves the group escapes).\n"
              "A run nested in a run of RESOURCE joins its lock (the same token); with\n"
              "--permits N it holds one of N permits, RESOURCE:permit:<i>; several\n"
              "resources are held all or nothing under one token; --read, --write take a\n"
              "side of a read-write lock. FENCELOCK_LOCK_KIND names the kind.\n"
              "Exit: COMMAND's own status (128+N if killed by signal N); 75 not acquired;\n"
              "  79 lock lost; 69 no majority in time; 64 usage; 70 error;\n"
              "  126/127 COMMAND could not be run / not found.\n",
              to);
}

/* A duration: digits and an optional unit (ms, s, m, h); a bare number is ms. */
int fencelock_parse_duration(const char *s, uint64_t *out)
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
    else if (strcmp(end, "h") == 0)
        mult = 3600000;
    else
        return -1;
    if (v > UINT64_MAX / mult / 1000)
        return -1;
    *out = (uint64_t)v * mult;
    return 0;
}

/* lockcore's error codes onto exit codes: the one table of docs/cli.md and
 * docs/lockcore.md. */
static int code_for(int rc)
{
    switch (rc) {
    case 0:
        return EXIT_OK;
    case -EINVAL:
        return EXIT_USAGE;
    case LOCKCORE_ELOCKED:
        return EXIT_NOT_HELD;
    case LOCKCORE_ENOQUORUM:
    case -ETIMEDOUT: /* a majority granted, too slowly: no validity left */
        return EXIT_UNREACHABLE;
    case LOCKCORE_ELOST:
        return EXIT_LOST;
    default: /* LOCKCORE_EPROTO, LOCKCORE_EFENCE, -ENOMEM, LOCKCORE_ECANCELED, ... */
        return EXIT_ERROR;
    }
}

void fencelock_print_json(json_t *j)
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

uint64_t fencelock_wall_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

/* Printable ASCII of in[0..len), anything else as '?' (a command line may
 * hold any bytes; JSON strings must be UTF-8). out has room for len + 1. */
static void printable(const char *in, size_t len, char *out)
{
    for (size_t i = 0; i < len; i++)
        out[i] = in[i] >= 0x20 && in[i] < 0x7f ? in[i] : '?';
    out[len] = '\0';
}

/*
 * Who holds the lock, for `status`: {"host","pid","cmd","acquired_at"}
 * (acquired_at: wall-clock ms when the acquisition began), at most
 * LOCKCORE_INFO_MAX bytes (cmd is cut to fit). lockcore stores it beside
 * the lock with the lock's TTL; the lock key's value stays the lock id.
 */
static void make_holder_info(char *buf, size_t cap, pid_t pid, const char *cmd)
{
    char host[256] = "";
    gethostname(host, sizeof(host) - 1);
    host[sizeof(host) - 1] = '\0';
    char safe_host[256], safe_cmd[LOCKCORE_INFO_MAX + 1];
    printable(host, strlen(host), safe_host);
    size_t cmd_len = strlen(cmd);
    if (cmd_len > LOCKCORE_INFO_MAX)
        cmd_len = LOCKCORE_INFO_MAX;
    printable(cmd, cmd_len, safe_cmd);
    uint64_t at = fencelock_wall_ms();
    buf[0] = '\0';
    for (;;) {
        json_t *j = json_pack("{s:s, s:i, s:s, s:I}", "host", safe_host, "pid", (int)pid, "cmd", safe_cmd,
                              "acquired_at", (json_int_t)at);
        char *text = j ? json_dumps(j, JSON_COMPACT | JSON_PRESERVE_ORDER) : NULL;
        json_decref(j);
        if (text == NULL)
            return; /* out of memory: no info, the lock works without */
        size_t len = strlen(text);
        if (len <= LOCKCORE_INFO_MAX && len < cap) {
            memcpy(buf, text, len + 1);
            free(text);
            return;
        }
        free(text);
        size_t over = len - (LOCKCORE_INFO_MAX < cap - 1 ? LOCKCORE_INFO_MAX : cap - 1);
        size_t cut = strlen(safe_cmd);
        if (cut == 0)
            return;
        safe_cmd[cut > over ? cut - over : 0] = '\0';
    }
}

/* The command line of process pid, arguments joined by spaces ("" if it
 * cannot be read). */
static void process_cmdline(pid_t pid, char *buf, size_t cap)
{
    char path[64];
    snprintf(path, sizeof(path), "/proc/%d/cmdline", (int)pid);
    buf[0] = '\0';
    FILE *fp = fopen(path, "r");
    if (fp == NULL)
        return;
    size_t n = fread(buf, 1, cap - 1, fp);
    fclose(fp);
    while (n > 0 && buf[n - 1] == '\0')
        n--;
    for (size_t i = 0; i < n; i++)
        if (buf[i] == '\0')
            buf[i] = ' ';
    buf[n] = '\0';
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
    if (a->retry_delay_max_ms)
        o.retry_delay_max_ms = a->retry_delay_max_ms;
    if (o.retry_delay_max_ms < o.retry_delay_ms)
        o.retry_delay_max_ms = o.retry_delay_ms;
    char err[512];
    int rc = lockcore_client_new(&o, &c, err, sizeof(err));
    if (rc < 0) {
        fprintf(stderr, "%s: %s\n", prog, err);
        *exit_code = code_for(rc);
        c = NULL;
    }
out:
    explicit_bzero(pw, sizeof(pw)); /* the client keeps its own copy */
    free(nodes);
    free(buf);
    return c;
}

/* The client's message for a failure rc, or the code's name where the
 * message has nothing to say about it (never a "success" left over). */
const char *fencelock_errtext(const lockcore_client *c, int rc)
{
    const char *m = lockcore_errmsg(c);
    if (*m == '\0' || strcmp(m, lockcore_strerror(0)) == 0)
        return lockcore_strerror(rc);
    return m;
}

int fencelock_fail(lockcore_client *c, const char *what, int rc)
{
    /* One line: lockcore names a set by its names joined with newlines. */
    char msg[1024];
    snprintf(msg, sizeof(msg), "%s", fencelock_errtext(c, rc));
    for (char *p = strchr(msg, '\n'); p != NULL; p = strchr(p, '\n'))
        *p = ',';
    fprintf(stderr, "%s: %s: %s\n", prog, what, msg);
    return code_for(rc);
}

/* The TTL a client made from these arguments uses: --ttl, else lockcore's
 * default. */
static uint64_t effective_ttl_ms(const struct args *a)
{
    struct lockcore_options o;
    lockcore_options_init(&o);
    return a->ttl_ms ? a->ttl_ms : o.ttl_ms;
}

static int by_pttl_desc(const void *x, const void *y)
{
    int64_t a = *(const int64_t *)x, b = *(const int64_t *)y;
    return a < b ? 1 : a > b ? -1 : 0;
}

/* The index of a node holding the id a majority holds (one with holder
 * info if any has it), or -1; *remaining gets how long that majority
 * lasts: the quorum-th longest remaining TTL among its nodes. */
static int majority_of(const struct lockcore_node_status *st, int n, int quorum, int64_t *remaining)
{
    int majority = -1;
    for (int i = 0; i < n; i++) {
        if (!st[i].reachable || st[i].holder[0] == '\0')
            continue;
        int same = 0;
        for (int k = 0; k < n; k++)
            same += st[k].reachable && strcmp(st[k].holder, st[i].holder) == 0;
        if (same >= quorum && (majority < 0 || (st[majority].info[0] == '\0' && st[i].info[0] != '\0')))
            majority = i;
    }
    *remaining = 0;
    if (majority >= 0) {
        int64_t pttl[LOCKCORE_NODES_MAX];
        int m = 0;
        for (int k = 0; k < n; k++)
            if (st[k].reachable && strcmp(st[k].holder, st[majority].holder) == 0)
                pttl[m++] = st[k].pttl_ms;
        qsort(pttl, (size_t)m, sizeof(pttl[0]), by_pttl_desc);
        *remaining = pttl[quorum - 1];
    }
    return majority;
}

/* ---- waiting ---- */

/* "pid 4242 on build-3 (./nightly.sh), 8.2 s left" for the holder of
 * RESOURCE, from one status round; "another client" when it left no info. */
static void describe_holder(lockcore_client *c, const char *resource, char *buf, size_t cap)
{
    static struct lockcore_node_status st[LOCKCORE_NODES_MAX];
    snprintf(buf, cap, "another client");
    int n = lockcore_status(c, resource, st, LOCKCORE_NODES_MAX);
    if (n <= 0)
        return;
    int64_t left = 0;
    int m = majority_of(st, n, (int)lockcore_quorum(c), &left);
    if (m < 0) {
        snprintf(buf, cap, "no majority: a grant or release in progress, or nodes out of reach");
        return;
    }
    json_t *info = json_loads(st[m].info, 0, NULL);
    json_t *pid = json_object_get(info, "pid"), *host = json_object_get(info, "host"),
           *cmd = json_object_get(info, "cmd");
    if (json_is_integer(pid) && json_is_string(host) && json_is_string(cmd))
        snprintf(buf, cap, "pid %" JSON_INTEGER_FORMAT " on %s (%.200s), %.1f s left",
                 json_integer_value(pid), json_string_value(host), json_string_value(cmd),
                 (double)left / 1000);
    else
        snprintf(buf, cap, "%s, %.1f s left", st[m].holder, (double)left / 1000);
    json_decref(info);
}

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

const char *fencelock_kind(const struct lockcore_lock *l)
{
    if (l->flags & LOCKCORE_LOCK_MULTI)
        return "multi";
    if (l->flags & LOCKCORE_LOCK_REENTRANT)
        return "reentrant";
    if (l->flags & LOCKCORE_LOCK_READ)
        return "read";
    if (l->flags & LOCKCORE_LOCK_WRITE)
        return "write";
    if (l->flags & LOCKCORE_LOCK_PERMIT)
        return "permit";
    return "plain";
}

/* The id of a reentrant hold of resource that this process may join: the
 * one a `run` of the same resource put in our environment (the kind
 * reentrant, or none: an older fencelock's run, or a script that set the
 * two variables), else NULL. A lock of another kind is not joined: a
 * reentrant acquisition under the id of a plain lock would agree on a new
 * token, and the outer holder's would be stale. */
static const char *joinable_id(const char *resource)
{
    const char *r = getenv("FENCELOCK_RESOURCE"), *id = getenv("FENCELOCK_LOCK_ID");
    const char *kind = getenv("FENCELOCK_LOCK_KIND");
    if (r == NULL || id == NULL || strcmp(r, resource) != 0)
        return NULL;
    if (kind != NULL && strcmp(kind, "reentrant") != 0)
        return NULL;
    return id;
}

/*
 * The acquisition the arguments ask for, and while a plain or reentrant
 * one waits for another holder, say so on stderr (a person at a terminal
 * would otherwise see nothing): once when it has not succeeded after
 * WAIT_NOTICE_MS, what it waits for and for how long, then every
 * WAIT_REPEAT_MS. Non-blocking underneath, so fencelock stays responsive.
 * Bounded by the acquisition's own retries and --wait. The other kinds say
 * nothing while they wait: the notice names one holder of one resource, a
 * semaphore or a set has several, and readers leave no holder info.
 */
#define WAIT_NOTICE_MS 300
#define WAIT_REPEAT_MS 5000
int fencelock_acquire(lockcore_client *c, const struct args *a, const struct target *t,
                      struct lockcore_lock *out)
{
    const char *resource = t->names[0];
    if (a->permits > 0)
        return lockcore_sem_acquire(c, resource, a->permits, out);
    if (t->n > 1)
        return lockcore_multi_acquire(c, t->names, t->n, out);
    if (a->rw != RW_NONE)
        return lockcore_rw_acquire(c, resource, a->rw == RW_WRITE, out);
    /* A reentrant lock: the hold named by acquire's LOCK_ID, else the one
     * of a run of the same resource this process runs under, else new. */
    const char *id = NULL;
    if (a->reentrant)
        id = a->lock_id != NULL ? a->lock_id : joinable_id(resource);
    int show = !a->quiet && (a->verbose || isatty(STDERR_FILENO));
    if (!show)
        return a->reentrant ? lockcore_reentrant_acquire(c, resource, id, out)
                            : lockcore_acquire(c, resource, out);
    /* Static: if lockcore_run fails, the operation is still in flight and
     * its callback runs when the client is freed, after this returns. */
    static struct outcome o;
    memset(&o, 0, sizeof(o));
    int rc = a->reentrant ? lockcore_reentrant_acquire_async(c, resource, id, on_outcome, &o)
                          : lockcore_acquire_async(c, resource, on_outcome, &o);
    if (rc < 0)
        return rc;
    uint64_t start = lockcore_now_ms(), next = start + WAIT_NOTICE_MS;
    while (!o.done) {
        rc = lockcore_run(c, 100);
        if (rc < 0 && rc != -EINTR && !o.done)
            return rc;
        uint64_t now = lockcore_now_ms();
        if (o.done || now < next)
            continue;
        char holder[512];
        describe_holder(c, resource, holder, sizeof(holder));
        if (o.done)
            break;
        char limit[64];
        if (a->wait_set)
            snprintf(limit, sizeof(limit), "up to %.1f s", (double)a->wait_ms / 1000);
        else if (a->retry_set && a->retry_count < 0)
            snprintf(limit, sizeof(limit), "without limit");
        else
            snprintf(limit, sizeof(limit), "up to %d retries", a->retry_set ? a->retry_count : 3);
        if (next == start + WAIT_NOTICE_MS)
            fprintf(stderr, "%s: waiting for '%s' (held by %s; %s)\n", prog, resource, holder, limit);
        else
            fprintf(stderr, "%s: still waiting for '%s' after %.0f s (held by %s)\n", prog, resource,
                    (double)(now - start) / 1000, holder);
        next = now + WAIT_REPEAT_MS;
    }
    *out = o.lock;
    return o.rc;
}

static json_t *json_string_or_null(const char *s)
{
    return s != NULL ? json_string(s) : json_null();
}

/* The names of a set as a JSON array. */
static json_t *names_json(const struct target *t)
{
    json_t *arr = json_array();
    for (size_t i = 0; i < t->n; i++)
        json_array_append_new(arr, json_string(t->names[i]));
    return arr;
}

/* What acquire, extend and release print first: "resource" (one name), or
 * "resources" (a set), and the kind unless it is a plain lock (the output
 * of a plain lock is as it always was). */
static json_t *lock_head(const struct target *t, const char *resource, const struct lockcore_lock *l)
{
    json_t *j = json_object();
    if (t->n > 1)
        json_object_set_new(j, "resources", names_json(t));
    else
        json_object_set_new(j, "resource", json_string(resource));
    const char *kind = fencelock_kind(l);
    if (strcmp(kind, "plain") != 0 && strcmp(kind, "permit") != 0)
        json_object_set_new(j, "kind", json_string(kind));
    return j;
}

/* Add the members of b to a (a JSON object), release b; returns a. */
static json_t *merged(json_t *a, json_t *b)
{
    json_object_update(a, b);
    json_decref(b);
    return a;
}

static int cmd_acquire(lockcore_client *c, const struct args *a, const struct target *t)
{
    struct lockcore_lock l;
    int rc = fencelock_acquire(c, a, t, &l);
    if (rc < 0)
        return fencelock_fail(c, "acquire", rc);
    fencelock_print_json(
        merged(lock_head(t, l.resource, &l),
               json_pack("{s:s, s:I, s:I, s:I, s:i, s:i}", "lock_id", l.id, "token", (json_int_t)l.token,
                         "validity_ms", (json_int_t)l.validity_ms, "ttl_ms", (json_int_t)l.ttl_ms,
                         "nodes_granted", (int)l.nodes_ok, "nodes", (int)l.nodes)));
    return EXIT_OK;
}

/*
 * extend and release work on a lock acquired by another process, known by
 * its id: lockcore_lock_from_id makes the record (and checks the id), the
 * kind's flag says which scripts lockcore sends (a set's, a reentrant
 * hold's, a reader's or a writer's), and the nodes decide whether it is
 * still held. A set is named by its names joined with newlines, as
 * lockcore names it. Returns 0, a lockcore error, or 1 after saying why
 * the names cannot be a set.
 */
static int lock_for(lockcore_client *c, const struct args *a, const struct target *t, const char *id,
                    struct lockcore_lock *l)
{
    char joined[LOCKCORE_RESOURCE_MAX + 1];
    size_t len = 0;
    for (size_t i = 0; i < t->n; i++) {
        size_t k = strlen(t->names[i]);
        if (t->n > 1 && (strchr(t->names[i], '\n') != NULL || len + k + (i > 0) > LOCKCORE_RESOURCE_MAX)) {
            fprintf(stderr, "%s: the names of a set must have no newline and be at most %d bytes in all\n",
                    prog, LOCKCORE_RESOURCE_MAX);
            return 1;
        }
        if (i > 0)
            joined[len++] = '\n';
        memcpy(joined + len, t->names[i], k);
        len += k;
    }
    joined[len] = '\0';
    int rc = lockcore_lock_from_id(c, joined, id, l);
    if (rc < 0)
        return rc;
    if (t->n > 1)
        l->flags |= LOCKCORE_LOCK_MULTI;
    else if (a->reentrant)
        l->flags |= LOCKCORE_LOCK_REENTRANT;
    else if (a->rw == RW_READ)
        l->flags |= LOCKCORE_LOCK_READ;
    else if (a->rw == RW_WRITE)
        l->flags |= LOCKCORE_LOCK_WRITE;
    return 0;
}

static int cmd_extend(lockcore_client *c, const struct args *a, const struct target *t, const char *id)
{
    struct lockcore_lock l;
    int rc = lock_for(c, a, t, id, &l);
    if (rc != 0)
        return rc > 0 ? EXIT_USAGE : fencelock_fail(c, "extend", rc);
    rc = lockcore_extend(c, &l, a->ttl_ms); /* 0: the client's TTL */
    fencelock_print_json(
        merged(lock_head(t, t->names[0], &l),
               json_pack("{s:s, s:b, s:I, s:I, s:i, s:i}", "lock_id", id, "extended", rc == 0, "validity_ms",
                         (json_int_t)(rc == 0 ? l.validity_ms : 0), "ttl_ms", (json_int_t)effective_ttl_ms(a),
                         "nodes_extended", (int)l.nodes_ok, "nodes", (int)l.nodes)));
    return rc == 0 ? EXIT_OK : fencelock_fail(c, "extend", rc);
}

static int cmd_release(lockcore_client *c, const struct args *a, const struct target *t, const char *id)
{
    struct lockcore_lock l;
    int rc = lock_for(c, a, t, id, &l);
    if (rc != 0)
        return rc > 0 ? EXIT_USAGE : fencelock_fail(c, "release", rc);
    rc = lockcore_release(c, &l);
    fencelock_print_json(merged(lock_head(t, t->names[0], &l),
                                json_pack("{s:s, s:b, s:i, s:i}", "lock_id", id, "released", l.nodes_ok > 0,
                                          "nodes_released", (int)l.nodes_ok, "nodes", (int)l.nodes)));
    return rc == 0 ? EXIT_OK : fencelock_fail(c, "release", rc);
}

/* A holder's info as JSON: the object it was written as, the text as it is
 * if it is not JSON (another program's), null if none. */
static json_t *info_json(const char *info)
{
    if (info[0] == '\0')
        return json_null();
    json_t *j = json_loads(info, JSON_DECODE_ANY, NULL);
    return j != NULL ? j : json_string(info);
}

/* A node's queue of waiters (notified and fair waiting), first in line
 * first: each waiter's lock id, ticket (wall µs when it asked) and how long
 * it has waited by this machine's clock. */
static json_t *queue_json(const struct lockcore_node_status *st)
{
    json_t *q = json_array();
    uint64_t now_ms = fencelock_wall_ms();
    for (unsigned k = 0; k < st->waiters && k < LOCKCORE_STATUS_WAITERS && st->queue[k].id[0]; k++) {
        uint64_t t = st->queue[k].ticket / 1000;
        json_array_append_new(q, json_pack("{s:s, s:I, s:I}", "id", st->queue[k].id, "ticket",
                                           (json_int_t)st->queue[k].ticket, "waited_ms",
                                           (json_int_t)(now_ms > t ? now_ms - t : 0)));
    }
    return q;
}

/*
 * Each node's view, and the lock's as a whole: "held" when a majority holds
 * one id (its info, and how long that majority lasts: the quorum-th longest
 * remaining TTL among its nodes), "expired" when some node still holds a key
 * but no majority does (what is left of a lock that ran out, was lost or is
 * being released; also, for a moment, an acquisition half done), "free"
 * when no reachable node holds it.
 */
/* status --permits N: each permit of the semaphore. */
static int cmd_status_permits(lockcore_client *c, const char *resource, unsigned permits)
{
    struct lockcore_permit_status *ps = calloc(permits, sizeof(*ps));
    if (ps == NULL)
        return fencelock_fail(c, "status", -ENOMEM);
    int held = lockcore_sem_status(c, resource, permits, ps, permits);
    if (held < 0) {
        free(ps);
        return fencelock_fail(c, "status", held);
    }
    json_t *arr = json_array();
    for (unsigned p = 0; p < permits; p++)
        json_array_append_new(
            arr, json_pack("{s:i, s:b, s:s?, s:i, s:I, s:I}", "permit", (int)ps[p].permit, "held", ps[p].held,
                           "holder", ps[p].holder[0] ? ps[p].holder : NULL, "nodes", (int)ps[p].nodes,
                           "remaining_ms", (json_int_t)ps[p].pttl_ms, "fence", (json_int_t)ps[p].fence));
    fencelock_print_json(json_pack("{s:s, s:i, s:i, s:o}", "resource", resource, "permits", (int)permits,
                                   "held", held, "permit_status", arr));
    free(ps);
    return EXIT_OK;
}

/* A node's first readers, for status --read: [{"id","remaining_ms"}]. */
static json_t *readers_json(const struct lockcore_node_status *st)
{
    json_t *q = json_array();
    for (unsigned k = 0; k < LOCKCORE_STATUS_READERS && st->readers[k].id[0]; k++)
        json_array_append_new(q, json_pack("{s:s, s:I}", "id", st->readers[k].id, "remaining_ms",
                                           (json_int_t)st->readers[k].pttl_ms));
    return q;
}

/* How many reachable nodes list reader id among their first readers. */
static int nodes_listing(const struct lockcore_node_status *st, int n, const char *id)
{
    int m = 0;
    for (int i = 0; i < n; i++)
        for (unsigned k = 0; st[i].reachable && k < LOCKCORE_STATUS_READERS && st[i].readers[k].id[0]; k++)
            if (strcmp(st[i].readers[k].id, id) == 0) {
                m++;
                break;
            }
    return m;
}

/*
 * The readers and the waiting writer of a read-write lock as a whole:
 * "reader_ids", the ids a majority of the nodes lists (a reader is granted
 * on a majority; each node lists its first LOCKCORE_STATUS_READERS), and
 * "writer_waits", the writer's id that most nodes carry as their intent
 * (one node's intent already keeps readers out there), with how many do.
 */
static void rw_summary(json_t *j, const struct lockcore_node_status *st, int n, int quorum)
{
    json_t *ids = json_array();
    for (int i = 0; i < n; i++)
        for (unsigned k = 0; st[i].reachable && k < LOCKCORE_STATUS_READERS && st[i].readers[k].id[0]; k++) {
            const char *id = st[i].readers[k].id;
            int seen = 0;
            for (size_t a = 0; a < json_array_size(ids); a++)
                seen |= strcmp(json_string_value(json_array_get(ids, a)), id) == 0;
            if (!seen && nodes_listing(st, n, id) >= quorum)
                json_array_append_new(ids, json_string(id));
        }
    json_object_set_new(j, "reader_ids", ids);
    int best = -1, best_n = 0;
    for (int i = 0; i < n; i++) {
        if (!st[i].reachable || st[i].writer_waits[0] == '\0')
            continue;
        int m = 0;
        for (int k = 0; k < n; k++)
            m += st[k].reachable && strcmp(st[k].writer_waits, st[i].writer_waits) == 0;
        if (m > best_n)
            best = i, best_n = m;
    }
    json_object_set_new(j, "writer_waits", json_string_or_null(best >= 0 ? st[best].writer_waits : NULL));
    json_object_set_new(j, "writer_waits_nodes", json_integer(best_n));
}

/* The quorum-th largest of v[0..m): what at least a majority of the
 * nodes report (0 if fewer than quorum values). */
static int64_t quorum_th(int64_t *v, int m, int quorum)
{
    if (m < quorum || quorum < 1)
        return 0;
    qsort(v, (size_t)m, sizeof(v[0]), by_pttl_desc);
    return v[quorum - 1];
}

/* What `status` reads: a lock (and its queue of waiters), a reentrant
 * hold's count, a read-write lock's readers. */
enum status_kind { ST_PLAIN, ST_REENTRANT, ST_RW };

/*
 * One resource's status as a JSON object (new reference), or NULL after
 * saying why; *reachable gets the nodes that answered, *n the nodes.
 */
static json_t *status_json(lockcore_client *c, const char *resource, enum status_kind kind, int *reachable,
                           int *n_nodes, int *code)
{
    static struct lockcore_node_status st[LOCKCORE_NODES_MAX];
    int n = kind == ST_REENTRANT ? lockcore_reentrant_status(c, resource, st, LOCKCORE_NODES_MAX)
            : kind == ST_RW      ? lockcore_rw_status(c, resource, st, LOCKCORE_NODES_MAX)
                                 : lockcore_status(c, resource, st, LOCKCORE_NODES_MAX);
    if (n < 0) {
        *code = fencelock_fail(c, "status", n);
        return NULL;
    }
    int quorum = (int)lockcore_quorum(c);
    json_t *nodes = json_array();
    int holding = 0;
    int64_t left = 0, counts[LOCKCORE_NODES_MAX];
    int m = 0;
    int majority = majority_of(st, n, quorum, &left);
    *reachable = 0;
    for (int i = 0; i < n; i++) {
        *reachable += st[i].reachable;
        json_t *e = json_pack("{s:s, s:b}", "node", st[i].node, "reachable", st[i].reachable);
        if (st[i].reachable) {
            int held = st[i].holder[0] != '\0';
            holding += held;
            json_object_set_new(e, "holder", held ? json_string(st[i].holder) : json_null());
            /* PTTL: -2 no key, -1 a key without expiry (not one of ours). */
            json_object_set_new(e, "remaining_ms", held ? json_integer(st[i].pttl_ms) : json_null());
            json_object_set_new(e, "holder_info", info_json(st[i].info));
            json_object_set_new(e, "fence", json_integer((json_int_t)st[i].fence));
            if (kind == ST_PLAIN) {
                json_object_set_new(e, "waiters", json_integer(st[i].waiters));
                json_object_set_new(e, "queue", queue_json(&st[i]));
            } else if (kind == ST_REENTRANT) {
                json_object_set_new(e, "holds", json_integer(st[i].holds));
                if (majority >= 0 && strcmp(st[i].holder, st[majority].holder) == 0)
                    counts[m++] = st[i].holds;
            } else {
                json_object_set_new(e, "readers", json_integer(st[i].holds));
                json_object_set_new(e, "reader_list", readers_json(&st[i]));
                json_object_set_new(e, "writer_waits",
                                    json_string_or_null(st[i].writer_waits[0] ? st[i].writer_waits : NULL));
                counts[m++] = st[i].holds;
            }
        } else {
            json_object_set_new(e, "error", json_string(st[i].error));
        }
        json_array_append_new(nodes, e);
    }
    json_t *holder_info = majority >= 0 ? info_json(st[majority].info) : json_null();
    json_t *remaining = majority >= 0 ? json_integer(left) : json_null();
    const char *state = majority >= 0 ? "held" : holding > 0 ? "expired" : "free";
    json_t *j = json_pack("{s:s, s:i, s:o, s:i, s:s, s:b, s:s?, s:o, s:o}", "resource", resource, "quorum",
                          quorum, "nodes", nodes, "reachable", *reachable, "state", state, "held_by_majority",
                          majority >= 0, "majority_holder", majority >= 0 ? st[majority].holder : NULL,
                          "majority_holder_info", holder_info, "majority_remaining_ms", remaining);
    /* The count a majority of the nodes reports at least: the hold count
     * of the majority's hold; the readers registered on a majority. */
    if (kind == ST_REENTRANT)
        json_object_set_new(j, "holds", json_integer(quorum_th(counts, m, quorum)));
    if (kind == ST_RW) {
        int64_t readers = quorum_th(counts, m, quorum);
        json_object_set_new(j, "writer", json_string_or_null(majority >= 0 ? st[majority].holder : NULL));
        json_object_set_new(j, "readers", json_integer(readers));
        json_object_set_new(j, "mode", json_string(majority >= 0 ? "write" : readers > 0 ? "read" : "free"));
        rw_summary(j, st, n, quorum);
    }
    *n_nodes = n;
    return j;
}

static int cmd_status(lockcore_client *c, const struct args *a, const struct target *t)
{
    enum status_kind kind = a->reentrant ? ST_REENTRANT : a->rw != RW_NONE ? ST_RW : ST_PLAIN;
    int reachable = 0, n = 0, code = EXIT_ERROR, least = LOCKCORE_NODES_MAX;
    if (t->n == 1) {
        json_t *j = status_json(c, t->names[0], kind, &reachable, &n, &code);
        if (j == NULL)
            return code;
        fencelock_print_json(j);
        least = reachable;
    } else {
        /* A set: each resource's status, and the id a majority holds every
         * resource under (the set held as one, or by one holder), if any. */
        json_t *arr = json_array();
        const char *same = NULL;
        int all = 1;
        for (size_t i = 0; i < t->n; i++) {
            json_t *j = status_json(c, t->names[i], kind, &reachable, &n, &code);
            if (j == NULL) {
                json_decref(arr);
                return code;
            }
            least = reachable < least ? reachable : least;
            const char *h = json_string_value(json_object_get(j, "majority_holder"));
            if (h == NULL || (same != NULL && strcmp(same, h) != 0))
                all = 0;
            else if (same == NULL)
                same = h;
            json_array_append_new(arr, j); /* same stays valid: arr holds j */
        }
        fencelock_print_json(json_pack("{s:o, s:s?}", "resources", arr, "set_holder", all ? same : NULL));
    }
    if (least < (int)lockcore_quorum(c)) {
        fprintf(stderr, "%s: status: only %d of %d nodes answered\n", prog, least, n);
        return EXIT_UNREACHABLE;
    }
    return EXIT_OK;
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

/* Most operands: the command's name, a set's names, a lock id. */
#define OPERANDS_MAX (LOCKCORE_MULTI_MAX + 2)

/* The command line, parsed. */
struct cmdline {
    struct args a;
    const char *operands[OPERANDS_MAX]; /* the command's name, then its operands */
    int nops;
    int too_many; /* more operands than OPERANDS_MAX */
    char **cmd;   /* run: the command to run and its arguments */
    struct target t;
    const char *id; /* extend, release: the LOCK_ID (the last operand) */
};

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

/*
 * Options may come before, between and after the operands. `run` takes
 * its resources up to the first "--" and everything after it as the
 * command; without any "--", one resource and then the command (the form
 * fencelock always had: `run job ls --help` runs `ls --help`).
 * Returns -1 to go on, or the exit code (after saying why).
 */
static int parse_args(int argc, char **argv, struct cmdline *cl)
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
        int is_run = cl->nops > 0 && strcmp(cl->operands[0], "run") == 0;
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

/* ---- command dispatch ---- */

static int do_acquire(lockcore_client *c, const struct cmdline *cl)
{
    return cmd_acquire(c, &cl->a, &cl->t);
}

static int do_status(lockcore_client *c, const struct cmdline *cl)
{
    if (cl->a.permits > 0)
        return cmd_status_permits(c, cl->t.names[0], cl->a.permits);
    return cmd_status(c, &cl->a, &cl->t);
}

static int do_extend(lockcore_client *c, const struct cmdline *cl)
{
    return cmd_extend(c, &cl->a, &cl->t, cl->id);
}

static int do_release(lockcore_client *c, const struct cmdline *cl)
{
    return cmd_release(c, &cl->a, &cl->t, cl->id);
}

static int do_run(lockcore_client *c, const struct cmdline *cl)
{
    struct args a = cl->a;
    /* One resource, no other kind: a reentrant lock that a nested run of
     * the resource joins; it waits notified, in the nodes' queue. But its
     * first attempt is not queued (it may re-enter): with --fair, a run
     * that has nothing to join takes a plain lock, which waits its turn
     * from the first attempt on (and a run nested in it waits like anyone
     * else). */
    a.reentrant = a.permits == 0 && a.rw == RW_NONE && cl->t.n == 1;
    if (a.reentrant && a.wait_mode == LOCKCORE_WAIT_FAIR && joinable_id(cl->t.names[0]) == NULL)
        a.reentrant = 0;
    return fencelock_run(c, &a, &cl->t, cl->cmd);
}

/* The lock commands: name, whether the last operand is a LOCK_ID, what
 * runs it. */
static const struct command {
    const char *name;
    int takes_id;
    int (*run)(lockcore_client *c, const struct cmdline *cl);
} commands[] = {
    {"acquire", 0, do_acquire}, {"status", 0, do_status}, {"extend", 1, do_extend},
    {"release", 1, do_release}, {"run", 0, do_run},
};

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
    int nres = cl->nops - 1 - k->takes_id;
    /* acquire --reentrant RESOURCE LOCK_ID: the hold to re-enter. */
    if (k->run == do_acquire && a->reentrant && cl->nops == 3) {
        a->lock_id = cl->operands[2];
        nres = 1;
        if (!looks_like_id(a->lock_id)) {
            fprintf(stderr, "%s: acquire --reentrant: '%s' is not a lock id (40 lowercase hex digits)\n",
                    prog, a->lock_id);
            return EXIT_USAGE;
        }
    }
    if (nres < 1 || (k->run == do_run && (cl->cmd == NULL || cl->cmd[0] == NULL))) {
        fprintf(stderr, "%s: %s: wrong number of arguments\n", prog, name);
        command_usage(stderr, name);
        return EXIT_USAGE;
    }
    if (cl->too_many || nres > LOCKCORE_MULTI_MAX) {
        fprintf(stderr, "%s: %s: at most %d resources in a set\n", prog, name, LOCKCORE_MULTI_MAX);
        return EXIT_USAGE;
    }
    cl->t.n = (size_t)nres;
    for (int i = 0; i < nres; i++)
        cl->t.names[i] = cl->operands[1 + i];
    if (k->takes_id)
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
            if (k->run == do_acquire && looks_like_id(cl->t.names[i])) {
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
    /* lockcore's semaphore, read-write lock and sets wait by polling
     * whatever the wait mode (the default notify means "where it can"); a
     * notified or fair wait asked for would silently be neither, and so
     * would a fair reentrant one (its first attempt is not queued). */
    int polls = (nk > 0 && !a->reentrant) || nres > 1;
    if (a->wait_mode_set && (k->run == do_acquire || k->run == do_run) &&
        ((a->wait_mode != LOCKCORE_WAIT_POLL && polls) ||
         (a->wait_mode == LOCKCORE_WAIT_FAIR && a->reentrant))) {
        fprintf(stderr, "%s: %s: %s applies to a plain lock of one resource%s: %s %s\n", prog, name,
                a->wait_mode == LOCKCORE_WAIT_FAIR ? "--fair" : "--notify",
                a->wait_mode == LOCKCORE_WAIT_FAIR ? "" : " and to --reentrant",
                polls ? (nk > 0 ? kinds[0] : "a set of several resources") : "--reentrant",
                polls ? "waits by polling" : "is not fair");
        return EXIT_USAGE;
    }
    return -1;
}

/* Help, and the checks that need the whole command line. Sets *out to the
 * command to run and returns -1, or returns the exit code. */
static int check_args(struct cmdline *cl, const struct command **out)
{
    const char *name = cl->nops > 0 ? cl->operands[0] : NULL;
    const struct command *k = NULL;
    for (size_t i = 0; name != NULL && i < sizeof(commands) / sizeof(commands[0]); i++)
        if (strcmp(name, commands[i].name) == 0)
            k = &commands[i];
    if (cl->a.help) {
        if (k != NULL)
            command_usage(stdout, name);
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
    if (code >= 0)
        return code;
    if (cl->a.permits > 0 && k->run != do_run && k->run != do_acquire && k->run != do_status) {
        fprintf(stderr,
                "%s: --permits applies to acquire, run and status (extend and release a permit by\n"
                "  its own name, RESOURCE:permit:<i>)\n",
                prog);
        return EXIT_USAGE;
    }
    if (cl->a.undo != NULL && k->run != do_run) {
        fprintf(stderr, "%s: --undo only applies to run\n", prog);
        return EXIT_USAGE;
    }
    if (cl->a.extend_at_ms != 0 && cl->a.extend_at_ms >= effective_ttl_ms(&cl->a)) {
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
    if (k->run == do_acquire) {
        process_cmdline(getppid(), cmdline, sizeof(cmdline));
        make_holder_info(info, cap, getppid(), cmdline);
    } else if (k->run == do_run) {
        size_t len = 0;
        for (int i = 0; cl->cmd[i] != NULL && len + 1 < sizeof(cmdline); i++)
            len += (size_t)snprintf(cmdline + len, sizeof(cmdline) - len, "%s%s", i ? " " : "", cl->cmd[i]);
        make_holder_info(info, cap, getpid(), cmdline);
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

int main(int argc, char **argv)
{
    /* write, append and fence (tools/cmd_file.c) parse their own options. */
    int file_code = fencelock_file_main(argc, argv);
    if (file_code >= 0)
        return file_code;

    struct cmdline cl;
    int code = parse_args(argc, argv, &cl);
    if (code >= 0)
        return code;
    const struct command *k = NULL;
    code = check_args(&cl, &k);
    if (code >= 0)
        return code;
    return dispatch(k, &cl);
}
