/*
 * What the commands of fencelock share (see cli.h): durations, exit codes
 * and error messages, the JSON printer, the holder info left beside a
 * lock, the majority of a status, and the acquisition with its notice of
 * whom it waits for.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <jansson.h>

#include <lockcore/lockcore.h>

#include "cli.h"

static const char *prog = "fencelock";

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
int fencelock_exit_code(int rc)
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
void fencelock_holder_info(char *buf, size_t cap, pid_t pid, const char *cmd)
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
void fencelock_process_cmdline(pid_t pid, char *buf, size_t cap)
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
    return fencelock_exit_code(rc);
}

/* A writer refused by readers: lockcore names the holder it saw, which is
 * one reader's id. Say how many readers hold the lock instead (the number a
 * majority of the nodes reports), and keep the rest of the message. */
static int writer_refused(lockcore_client *c, const char *resource, const char *msg)
{
    static struct lockcore_node_status st[LOCKCORE_NODES_MAX];
    int n = lockcore_rw_status(c, resource, st, LOCKCORE_NODES_MAX);
    int64_t counts[LOCKCORE_NODES_MAX];
    int m = 0;
    for (int i = 0; i < n; i++)
        if (st[i].reachable && st[i].holder[0] == '\0')
            counts[m++] = st[i].holds;
    int64_t readers = fencelock_quorum_th(counts, m, (int)lockcore_quorum(c));
    const char *held = strstr(msg, "; held by ");
    if (readers <= 0 || held == NULL)
        return 0;
    fprintf(stderr, "%s: acquire: %.*s; held by %" PRId64 " reader%s\n", prog, (int)(held - msg), msg,
            readers, readers == 1 ? "" : "s");
    return 1;
}

int fencelock_acquire_failed(lockcore_client *c, const struct args *a, const struct target *t, int rc)
{
    char msg[1024];
    snprintf(msg, sizeof(msg), "%s", fencelock_errtext(c, rc));
    if (rc == LOCKCORE_ELOCKED && a->rw == RW_WRITE && t->n == 1 && writer_refused(c, t->names[0], msg))
        return fencelock_exit_code(rc);
    return fencelock_fail(c, "acquire", rc);
}

/* The TTL a client made from these arguments uses: --ttl, else lockcore's
 * default. */
uint64_t fencelock_ttl_ms(const struct args *a)
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

int64_t fencelock_quorum_th(int64_t *v, int m, int quorum)
{
    if (m < quorum || quorum < 1)
        return 0;
    qsort(v, (size_t)m, sizeof(v[0]), by_pttl_desc);
    return v[quorum - 1];
}

/* The index of a node holding the id a majority holds (one with holder
 * info if any has it), or -1; *remaining gets how long that majority
 * lasts: the quorum-th longest remaining TTL among its nodes. */
int fencelock_majority_of(const struct lockcore_node_status *st, int n, int quorum, int64_t *remaining)
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
        *remaining = fencelock_quorum_th(pttl, m, quorum);
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
    int m = fencelock_majority_of(st, n, (int)lockcore_quorum(c), &left);
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
    if (l->flags & LOCKCORE_LOCK_LEADER)
        return "leader";
    return "plain";
}

/* The id of a reentrant hold of resource that this process may join: the
 * one a `run` of the same resource put in our environment (the kind
 * reentrant, or none: an older fencelock's run, or a script that set the
 * two variables), else NULL. A lock of another kind is not joined: a
 * reentrant acquisition under the id of a plain lock would agree on a new
 * token, and the outer holder's would be stale. */
const char *fencelock_joinable_id(const char *resource)
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
        id = a->lock_id != NULL ? a->lock_id : fencelock_joinable_id(resource);
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

void fencelock_lock_times(const struct lockcore_lock *l, struct lock_times *t)
{
    /* The grant was decided validity_ms before valid_until_ms. */
    uint64_t now_mono = lockcore_now_ms(), now_wall = fencelock_wall_ms();
    t->valid_until_mono_ms = l->valid_until_ms;
    t->granted_mono_ms = l->valid_until_ms - l->validity_ms;
    t->granted_wall_ms = now_wall - (now_mono > t->granted_mono_ms ? now_mono - t->granted_mono_ms : 0);
    t->valid_until_wall_ms = t->granted_wall_ms + l->validity_ms;
}

json_t *fencelock_times_json(const struct lockcore_lock *l)
{
    struct lock_times t;
    if (l == NULL)
        return json_pack("{s:n, s:n, s:n, s:n}", "granted_mono_ms", "granted_wall_ms", "valid_until_mono_ms",
                         "valid_until_wall_ms");
    fencelock_lock_times(l, &t);
    return json_pack("{s:I, s:I, s:I, s:I}", "granted_mono_ms", (json_int_t)t.granted_mono_ms,
                     "granted_wall_ms", (json_int_t)t.granted_wall_ms, "valid_until_mono_ms",
                     (json_int_t)t.valid_until_mono_ms, "valid_until_wall_ms",
                     (json_int_t)t.valid_until_wall_ms);
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
json_t *fencelock_lock_head(const struct target *t, const char *resource, const struct lockcore_lock *l)
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
json_t *fencelock_merged(json_t *a, json_t *b)
{
    json_object_update(a, b);
    json_decref(b);
    return a;
}

/*
 * extend and release work on a lock acquired by another process, known by
 * its id: lockcore_lock_from_id makes the record (and checks the id), the
 * kind's flag says which scripts lockcore sends (a set's, a reentrant
 * hold's, a reader's or a writer's), and the nodes decide whether it is
 * still held. A set is named by its names joined with newlines, as
 * lockcore names it. Returns -1 with *l made, or the exit code after
 * saying why not ("fencelock: WHAT: ...").
 */
int fencelock_lock_for(lockcore_client *c, const struct cmdline *cl, const char *what,
                       struct lockcore_lock *l)
{
    const struct args *a = &cl->a;
    const struct target *t = &cl->t;
    char joined[LOCKCORE_RESOURCE_MAX + 1];
    size_t len = 0;
    for (size_t i = 0; i < t->n; i++) {
        size_t k = strlen(t->names[i]);
        if (t->n > 1 && (strchr(t->names[i], '\n') != NULL || len + k + (i > 0) > LOCKCORE_RESOURCE_MAX)) {
            fprintf(stderr, "%s: the names of a set must have no newline and be at most %d bytes in all\n",
                    prog, LOCKCORE_RESOURCE_MAX);
            return EXIT_USAGE;
        }
        if (i > 0)
            joined[len++] = '\n';
        memcpy(joined + len, t->names[i], k);
        len += k;
    }
    joined[len] = '\0';
    int rc = lockcore_lock_from_id(c, joined, cl->id, l);
    if (rc < 0)
        return fencelock_fail(c, what, rc);
    if (t->n > 1)
        l->flags |= LOCKCORE_LOCK_MULTI;
    else if (a->reentrant)
        l->flags |= LOCKCORE_LOCK_REENTRANT;
    else if (a->rw == RW_READ)
        l->flags |= LOCKCORE_LOCK_READ;
    else if (a->rw == RW_WRITE)
        l->flags |= LOCKCORE_LOCK_WRITE;
    return -1;
}

/* ---- the file commands ---- */

/* fencefile's error code rc as an exit code. */
static int file_exit_code(int rc)
{
    switch (rc) {
    case 0:
        return EXIT_OK;
    case FENCING_ESTALE:
        return EXIT_STALE;
    case -ETIMEDOUT:
        return EXIT_NOT_HELD;
    case -EINVAL:
    case -EISDIR:
    case -ELOOP:
    case -EMLINK:
    case -EEXIST:
    case -ENAMETOOLONG:
    case FENCING_ENOTOKEN:
        return EXIT_USAGE;
    default:
        return EXIT_ERROR;
    }
}

int fencelock_file_open(const struct file_args *fa, fencefile **h)
{
    char err[512];
    int rc = fencefile_new(&fa->o, h, err, sizeof(err));
    if (rc != 0) {
        fprintf(stderr, "%s: %s: %s\n", prog, fa->name, err);
        return rc == -ENOENT || rc == -ENOTDIR ? EXIT_USAGE : file_exit_code(rc);
    }
    return -1;
}

int fencelock_file_done(fencefile *h, int rc)
{
    int code = file_exit_code(rc);
    if (rc != 0)
        fprintf(stderr, "%s: %s\n", prog, fencefile_errmsg(h));
    fencefile_free(h);
    return code;
}
