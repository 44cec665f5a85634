/*
 * fencelock-campaign: K clients increment one counter in storage-guard
 * under a fencelock lock (read, add one, write), while faults are injected
 * on a seeded schedule; then the history is checked. Each fault runs once
 * with fencing (fenced reads and writes, storage-guard refusing stale
 * tokens) and once on the same schedule without (--no-fencing clients,
 * storage-guard --unfenced), which must lose updates for the faults that
 * bite, or the campaign proves nothing. See docs/reliability.md.
 */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <fencelock-testkit/testkit.h>

#include "campaign.h"

#define NODES 3
#define CLIENTS_MAX 16

enum fault {
    F_CLIENT_PAUSE,
    F_WRITE_DELAY,
    F_NODE_RESTART,
    F_CLOCK_JUMP,
    F_SG_KILL,
    F_CLIENT_KILL,
    F_NODE_PAUSE,
    F_SLOW_NODE,
    F_MIXED,
    F_COUNT,
};

static const struct {
    const char *name;
    uint64_t ttl_ms; /* long enough for the fault to land inside one lease */
    int bites;       /* without fencing, this fault must lose updates */
    const char *what;
} faults[F_COUNT] = {
    [F_CLIENT_PAUSE] = {"client-pause", 500, 1, "holder stopped after its read for 2 TTL + 300 ms"},
    [F_WRITE_DELAY] = {"write-delay", 500, 1, "holder's write held in the proxy for 2 TTL + 300 ms"},
    [F_NODE_RESTART] = {"node-restart", 2000, 1,
                        "node 2 down while a holder gets nodes 0+1, then node 1 restarted without data"},
    [F_CLOCK_JUMP] = {"clock-jump", 5000, 1,
                      "node 2 down while a holder gets nodes 0+1, then node 1's clock jumps +1 h"},
    [F_SG_KILL] = {"sg-kill9", 500, 0, "storage-guard kill -9 and restart on its port"},
    [F_CLIENT_KILL] = {"client-kill9", 500, 0, "holder killed -9 after its read, then restarted"},
    [F_NODE_PAUSE] = {"node-pause", 500, 0, "one node stopped for 2 TTL"},
    [F_SLOW_NODE] = {"slow-node", 500, 0, "one node's traffic delayed 20 ms each way for 3 TTL"},
    [F_MIXED] = {"mixed", 1500, 1, "a seeded mix of all of the above but clock-jump"},
};

struct opts {
    unsigned long long seed;
    int clients;
    int duration_s;
    int runs;
    uint64_t ttl_ms; /* 0: the fault's own */
    int fault_on[F_COUNT];
    int modes; /* 1 fenced, 2 unfenced, 3 both */
    int require_loss;
    int keep;
    const char *sg_exe;
    const char *cli; /* clients through the fencelock command */
    int verbose;
};

/* ---- seeded schedule --------------------------------------------------- */

static uint64_t rng_state;

static uint64_t rnd(void)
{
    uint64_t z = (rng_state += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static long rnd_between(long lo, long hi)
{
    return lo + (long)(rnd() % (uint64_t)(hi - lo + 1));
}

/* ---- one run ----------------------------------------------------------- */

struct run {
    enum fault fault;
    int fencing;
    uint64_t ttl_ms;
    long long start_ms, end_ms;
    char dir[256];
    struct rh_cluster *cluster;
    struct fp_proxy *node_proxy[NODES];
    char *urls[NODES];
    struct tk_sg *sg;
    struct fp_proxy *sg_proxy[CLIENTS_MAX];
    pid_t pid[CLIENTS_MAX];
    int clients;
    long clock_offset_s;
    /* counts */
    int injected, missed;
};

struct result {
    int injected, missed;
    long acks, refused, unknown, stale_reads, grants;
    long long final_value, accepted_writes;
    double per_min;
    long long longest_gap_ms;
    long double_grants;
    long long double_ms;
    int client_failures; /* clients that did not end well */
    /* violations */
    long stale_accepted, lost, bad_rmw, acks_lost, dup_tokens, order;
    char first[512];
};

static const struct opts *O;

static void say(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void say(const char *fmt, ...)
{
    if (!O->verbose)
        return;
    va_list ap;
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
}

static int spawn_client(struct run *r, int k)
{
    /* The running binary itself, even if a rebuild replaced the file. */
    char self[] = "/proc/self/exe";
    char id[16], port[16], ttl[32], until[32], fencing[4], hist[400], nodes[256], log[400];
    snprintf(id, sizeof(id), "%d", k);
    snprintf(port, sizeof(port), "%d", fp_port(r->sg_proxy[k]));
    snprintf(ttl, sizeof(ttl), "%" PRIu64, r->ttl_ms);
    snprintf(until, sizeof(until), "%lld", r->end_ms);
    snprintf(fencing, sizeof(fencing), "%d", r->fencing);
    snprintf(hist, sizeof(hist), "%s/history-%d", r->dir, k);
    snprintf(log, sizeof(log), "%s/client-%d.log", r->dir, k);
    snprintf(nodes, sizeof(nodes), "%s,%s,%s", r->urls[0], r->urls[1], r->urls[2]);
    char *argv[21] = {self,        "--client", "--id",    id,          "--sg-port", port,        "--ttl-ms",
                      ttl,         "--until",  until,     "--fencing", fencing,     "--history", hist,
                      "--run-dir", r->dir,     "--nodes", nodes,       NULL};
    if (O->cli != NULL) {
        argv[18] = "--cli";
        argv[19] = (char *)O->cli; /* argv[18..19] replace the NULL */
    }
    pid_t pid = hp_spawn(argv, NULL, log);
    if (pid < 0)
        return (int)pid;
    r->pid[k] = pid;
    return 0;
}

/* Is pid stopped (state T in /proc)? */
static int is_stopped(pid_t pid)
{
    char path[64], buf[256];
    snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
    FILE *f = fopen(path, "r");
    if (f == NULL)
        return 0;
    size_t n = fread(buf, 1, sizeof(buf) - 1, f);
    fclose(f);
    buf[n] = '\0';
    char *p = strrchr(buf, ')');
    return p != NULL && p[1] == ' ' && (p[2] == 'T' || p[2] == 't');
}

/* Ask client k (or any, k < 0) to stop right after its next read, and wait
 * until one did. Returns its index, or -1 if none did in time. */
static int catch_after_read(struct run *r, int k, long long timeout_ms)
{
    char path[400];
    if (k >= 0)
        snprintf(path, sizeof(path), "%s/stop-%d", r->dir, k);
    else
        snprintf(path, sizeof(path), "%s/stop-any", r->dir);
    FILE *f = fopen(path, "w");
    if (f == NULL)
        return -1;
    fclose(f);
    long long deadline = hp_now_ms() + timeout_ms;
    while (hp_now_ms() < deadline) {
        for (int i = 0; i < r->clients; i++)
            if ((k < 0 || i == k) && r->pid[i] > 0 && is_stopped(r->pid[i]))
                return i;
        hp_sleep_ms(2);
    }
    if (unlink(path) != 0) {
        /* Taken just now: wait for that client to stop. */
        for (int t = 0; t < 500; t++) {
            for (int i = 0; i < r->clients; i++)
                if ((k < 0 || i == k) && r->pid[i] > 0 && is_stopped(r->pid[i]))
                    return i;
            hp_sleep_ms(2);
        }
    }
    return -1;
}

static void resume(struct run *r, int k)
{
    if (r->pid[k] > 0)
        kill(r->pid[k], SIGCONT);
}

/* The holder sits on nodes 0 and 1 only (node 2 is down), then loses the
 * lock on node 1 without knowing: node 1 restarts empty, or its clock
 * jumps past the lease. Another client then gets nodes 1 and 2. */
static void bare_majority(struct run *r, int clock)
{
    rh_kill(r->cluster, 2);
    hp_sleep_ms((long)r->ttl_ms + 100); /* leases from before have ended */
    int k = catch_after_read(r, -1, (long long)r->ttl_ms * 2 + 3000);
    if (k < 0) {
        rh_restart(r->cluster, 2, 0);
        r->missed++;
        return;
    }
    rh_restart(r->cluster, 2, 0);
    if (clock) {
        r->clock_offset_s += 3600;
        rh_clock_offset(r->cluster, 1, r->clock_offset_s);
    } else {
        rh_kill(r->cluster, 1);
        rh_restart(r->cluster, 1, 0);
    }
    hp_sleep_ms((long)r->ttl_ms / 3); /* another client gets nodes 1 and 2 */
    resume(r, k);
    r->injected++;
}

static void inject(struct run *r, enum fault f)
{
    int k = (int)rnd_between(0, r->clients - 1);
    int node = (int)rnd_between(0, NODES - 1);
    long pause_ms = 2 * (long)r->ttl_ms + 300;
    say("  %lld ms: %s\n", hp_now_ms() - r->start_ms, faults[f].name);
    switch (f) {
    case F_CLIENT_PAUSE:
        if (catch_after_read(r, k, pause_ms + 3000) < 0) {
            r->missed++;
            return;
        }
        hp_sleep_ms(pause_ms);
        resume(r, k);
        break;
    case F_WRITE_DELAY:
        if (catch_after_read(r, k, pause_ms + 3000) < 0) {
            r->missed++;
            return;
        }
        fp_set_delay(r->sg_proxy[k], FP_UP, (int)pause_ms);
        resume(r, k);
        hp_sleep_ms(pause_ms + 100);
        fp_set_delay(r->sg_proxy[k], FP_UP, 0);
        break;
    case F_CLIENT_KILL:
        if (catch_after_read(r, k, pause_ms + 3000) < 0) {
            r->missed++;
            return;
        }
        hp_signal(r->pid[k], SIGKILL, 0);
        r->pid[k] = 0;
        spawn_client(r, k);
        break;
    case F_SG_KILL:
        tk_sg_kill(r->sg);
        if (tk_sg_restart(r->sg) != 0)
            fprintf(stderr, "campaign: storage-guard did not restart\n");
        break;
    case F_NODE_PAUSE:
        rh_pause(r->cluster, node);
        hp_sleep_ms(2 * (long)r->ttl_ms);
        rh_resume(r->cluster, node);
        break;
    case F_SLOW_NODE:
        fp_set_delay(r->node_proxy[node], FP_BOTH, 20);
        hp_sleep_ms(3 * (long)r->ttl_ms);
        fp_set_delay(r->node_proxy[node], FP_BOTH, 0);
        break;
    case F_NODE_RESTART:
        bare_majority(r, 0);
        return;
    case F_CLOCK_JUMP:
        bare_majority(r, 1);
        return;
    case F_MIXED:
    case F_COUNT:
        return;
    }
    r->injected++;
}

/* ---- the history ------------------------------------------------------- */

struct grant {
    int id;
    uint64_t token;
    long long t0, t1, until, end;
};

struct ack {
    int id;
    uint64_t token, rver, wver;
    long long value, ta;
};

struct history {
    struct grant *g;
    size_t ng, capg;
    struct ack *a;
    size_t na, capa;
    long refused, unknown, stale_reads;
};

static int grow(void **p, size_t *cap, size_t n, size_t size)
{
    if (n < *cap)
        return 0;
    size_t nc = *cap ? *cap * 2 : 256;
    void *q = realloc(*p, nc * size);
    if (q == NULL)
        return -ENOMEM;
    *p = q;
    *cap = nc;
    return 0;
}

static int read_history(const char *path, struct history *h)
{
    FILE *f = fopen(path, "r");
    if (f == NULL)
        return -errno;
    char line[512];
    /* The open grant of this client, to close at its L line. */
    long open = -1;
    while (fgets(line, sizeof(line), f)) {
        int id;
        uint64_t tok, u1, u2;
        long long a, b, c, v;
        unsigned nodes;
        switch (line[0]) {
        case 'G':
            if (sscanf(line, "G %d %" SCNu64 " %lld %lld %lld %u", &id, &tok, &a, &b, &c, &nodes) != 6)
                break;
            if (grow((void **)&h->g, &h->capg, h->ng, sizeof(*h->g)) != 0)
                goto nomem;
            h->g[h->ng] = (struct grant){id, tok, a, b, c, c};
            open = (long)h->ng++;
            break;
        case 'L':
            if (open >= 0 && sscanf(line, "L %d %" SCNu64 " %lld", &id, &tok, &a) == 3 && a < h->g[open].end)
                h->g[open].end = a;
            open = -1;
            break;
        case 'A':
            if (sscanf(line, "A %d %" SCNu64 " %lld %" SCNu64 " %" SCNu64 " %lld %lld", &id, &tok, &v, &u1,
                       &u2, &a, &b) != 7)
                break;
            if (grow((void **)&h->a, &h->capa, h->na, sizeof(*h->a)) != 0)
                goto nomem;
            h->a[h->na++] = (struct ack){id, tok, u1, u2, v, b};
            break;
        case 'R':
            h->refused++;
            break;
        case 'U':
            h->unknown++;
            break;
        case 'S':
            h->stale_reads++;
            break;
        case 'B':
            open = -1; /* a restarted client: the killed one's lease ends by expiry */
            break;
        default:
            break;
        }
    }
    fclose(f);
    return 0;
nomem:
    fclose(f);
    return -ENOMEM;
}

static int cmp_ll(const void *x, const void *y)
{
    long long a = *(const long long *)x, b = *(const long long *)y;
    return (a > b) - (a < b);
}

static int cmp_u64(const void *x, const void *y)
{
    uint64_t a = *(const uint64_t *)x, b = *(const uint64_t *)y;
    return (a > b) - (a < b);
}

static void note(struct result *res, const char *what)
{
    if (res->first[0] == '\0')
        snprintf(res->first, sizeof(res->first), "%s", what);
}

static void check(struct run *r, struct history *h, struct result *res)
{
    char msg[400];
    /* The final value, read unfenced. */
    struct hc_response resp = {0};
    if (hc_get(tk_sg_port(r->sg), "/v1/records/" CC_KEY, &resp) == 0 && resp.status == 200)
        res->final_value = json_integer_value(json_object_get(resp.json, "value"));
    hc_response_clear(&resp);

    struct tk_log log = {0};
    if (tk_log_fetch(tk_sg_port(r->sg), CC_RESOURCE, &log) != 0) {
        note(res, "could not read the audit log");
        res->acks_lost = 1;
        return;
    }
    for (size_t i = 0; i < log.n; i++)
        if (strcmp(log.entries[i].op, "write") == 0 && strcmp(log.entries[i].outcome, "accepted") == 0)
            res->accepted_writes++;

    /* No stale write accepted. */
    int n = tk_check_no_stale_write(&log, msg, sizeof(msg));
    if (n > 0) {
        res->stale_accepted = n;
        note(res, msg);
    }
    /* No lost update: every accepted write added one. */
    if (res->final_value != res->accepted_writes) {
        res->lost = llabs(res->accepted_writes - res->final_value);
        snprintf(msg, sizeof(msg), "lost update: %lld writes accepted, the counter reads %lld",
                 res->accepted_writes, res->final_value);
        note(res, msg);
    }
    /* Every acknowledged write was computed from the value its own read
     * returned: the version it wrote follows the version it read. */
    for (size_t i = 0; i < h->na; i++)
        if (h->a[i].wver != h->a[i].rver + 1) {
            if (res->bad_rmw++ == 0) {
                snprintf(msg, sizeof(msg),
                         "client %d read version %" PRIu64
                         " (value %lld) but its write became version %" PRIu64,
                         h->a[i].id, h->a[i].rver, h->a[i].value, h->a[i].wver);
                note(res, msg);
            }
        }
    /* No acknowledged write lost (across storage-guard kill -9). */
    struct tk_ack *acks = calloc(h->na + 1, sizeof(*acks));
    if (acks != NULL) {
        for (size_t i = 0; i < h->na; i++)
            acks[i] = (struct tk_ack){CC_KEY, h->a[i].wver, h->a[i].token};
        n = tk_check_no_ack_lost(&log, acks, h->na, msg, sizeof(msg));
        if (n > 0) {
            res->acks_lost = n;
            note(res, msg);
        }
        free(acks);
    }
    tk_log_clear(&log);

    if (r->fencing) {
        /* No token handed to two acquisitions. */
        uint64_t *t = calloc(h->ng + 1, sizeof(*t));
        if (t != NULL) {
            for (size_t i = 0; i < h->ng; i++)
                t[i] = h->g[i].token;
            qsort(t, h->ng, sizeof(*t), cmp_u64);
            for (size_t i = 1; i < h->ng; i++)
                if (t[i] == t[i - 1] && res->dup_tokens++ == 0) {
                    snprintf(msg, sizeof(msg), "token %" PRIu64 " granted twice", t[i]);
                    note(res, msg);
                }
            free(t);
        }
        /* Tokens increase in the real-time order of grants: a grant that
         * ended before another began has the smaller token. */
        for (size_t i = 0; i < h->ng; i++)
            for (size_t j = 0; j < h->ng; j++)
                if (h->g[i].t1 < h->g[j].t0 && h->g[i].token >= h->g[j].token && res->order++ == 0) {
                    snprintf(msg, sizeof(msg),
                             "grant of token %" PRIu64 " (client %d) ended before the grant of token %" PRIu64
                             " (client %d) began",
                             h->g[i].token, h->g[i].id, h->g[j].token, h->g[j].id);
                    note(res, msg);
                }
    }
    /* Double grants: two leases that overlap in time, each from its grant
     * to its release or its validity's end, whichever came first. Redlock
     * alone allows them under some faults; fencing makes them harmless. */
    for (size_t i = 0; i < h->ng; i++)
        for (size_t j = i + 1; j < h->ng; j++) {
            long long lo = h->g[i].t1 > h->g[j].t1 ? h->g[i].t1 : h->g[j].t1;
            long long hi = h->g[i].end < h->g[j].end ? h->g[i].end : h->g[j].end;
            if (hi > lo) {
                res->double_grants++;
                res->double_ms += hi - lo;
            }
        }
    /* Liveness: increments per minute, and the longest time without one. */
    long long *ta = calloc(h->na + 2, sizeof(*ta));
    if (ta != NULL) {
        size_t m = 0;
        ta[m++] = r->start_ms;
        for (size_t i = 0; i < h->na; i++)
            ta[m++] = h->a[i].ta;
        ta[m++] = r->end_ms;
        qsort(ta, m, sizeof(*ta), cmp_ll);
        for (size_t i = 1; i < m; i++)
            if (ta[i] - ta[i - 1] > res->longest_gap_ms)
                res->longest_gap_ms = ta[i] - ta[i - 1];
        free(ta);
    }
    res->acks = (long)h->na;
    res->grants = (long)h->ng;
    res->refused = h->refused;
    res->unknown = h->unknown;
    res->stale_reads = h->stale_reads;
    res->per_min = (double)h->na * 60000.0 / (double)(r->end_ms - r->start_ms);
}

static long violations(const struct result *res)
{
    return res->stale_accepted + res->lost + res->bad_rmw + res->acks_lost + res->dup_tokens + res->order;
}

static void run_free(struct run *r)
{
    for (int k = 0; k < CLIENTS_MAX; k++) {
        if (r->pid[k] > 0)
            hp_signal(r->pid[k], SIGKILL, 0);
        fp_free(r->sg_proxy[k]);
    }
    tk_sg_free(r->sg);
    for (int i = 0; i < NODES; i++) {
        fp_free(r->node_proxy[i]);
        free(r->urls[i]);
    }
    rh_cluster_free(r->cluster);
    if (r->dir[0] != '\0' && !O->keep)
        rh_rmtree(r->dir);
    else if (r->dir[0] != '\0')
        fprintf(stderr, "campaign: kept %s\n", r->dir);
}

static int run_one(enum fault fault, int fencing, unsigned long long seed, struct result *res)
{
    struct run r;
    memset(&r, 0, sizeof(r));
    memset(res, 0, sizeof(*res));
    r.fault = fault;
    r.fencing = fencing;
    r.clients = O->clients;
    r.ttl_ms = O->ttl_ms ? O->ttl_ms : faults[fault].ttl_ms;
    rng_state = seed;
    int rc = rh_mkdtemp("campaign", r.dir, sizeof(r.dir));
    if (rc != 0)
        goto out;
    struct rh_options ro;
    rh_options_init(&ro);
    ro.faketime = fault == F_CLOCK_JUMP;
    if ((rc = rh_cluster_start(NODES, &ro, &r.cluster)) != 0)
        goto out;
    for (int i = 0; i < NODES; i++) {
        if ((rc = fp_new(rh_port(r.cluster, i), &r.node_proxy[i])) != 0)
            goto out;
        char url[64];
        snprintf(url, sizeof(url), "redis://127.0.0.1:%d", fp_port(r.node_proxy[i]));
        if ((r.urls[i] = strdup(url)) == NULL) {
            rc = -ENOMEM;
            goto out;
        }
    }
    struct tk_sg_options so;
    tk_sg_options_init(&so);
    so.exe = O->sg_exe;
    so.unfenced = !fencing;
    if ((rc = tk_sg_start(&so, &r.sg)) != 0)
        goto out;
    for (int k = 0; k < r.clients; k++)
        if ((rc = fp_new(tk_sg_port(r.sg), &r.sg_proxy[k])) != 0)
            goto out;
    r.start_ms = hp_now_ms();
    r.end_ms = r.start_ms + (long long)O->duration_s * 1000;
    for (int k = 0; k < r.clients; k++)
        if ((rc = spawn_client(&r, k)) != 0)
            goto out;
    say("%s, %s, seed %llu, TTL %" PRIu64 " ms\n", faults[fault].name, fencing ? "fenced" : "unfenced", seed,
        r.ttl_ms);

    /* The schedule: a fault, a pause of 0.3..1.5 s, the next, until there
     * is no longer time for one to play out before the clients stop. */
    long long last_start = r.end_ms - 2 * (long long)r.ttl_ms - 1000;
    hp_sleep_ms(rnd_between(300, 1500));
    while (hp_now_ms() < last_start) {
        enum fault f = fault;
        if (fault == F_MIXED)
            f = (enum fault)rnd_between(0, F_COUNT - 2);
        if (f == F_CLOCK_JUMP)
            f = F_NODE_RESTART; /* needs libfaketime nodes and a long TTL */
        inject(&r, f);
        hp_sleep_ms(rnd_between(300, 1500));
    }

    /* Let the clients finish, each within a bounded time. */
    for (int k = 0; k < r.clients; k++) {
        if (r.pid[k] <= 0)
            continue;
        resume(&r, k);
        long long left = r.end_ms - hp_now_ms() + 20000;
        int st = 0;
        if (hp_wait(r.pid[k], left > 0 ? (int)left : 0, &st) != 0) {
            fprintf(stderr, "campaign: client %d did not end in time\n", k);
            res->client_failures++;
        } else {
            r.pid[k] = 0;
            if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) {
                /* A client that crashed (or a sanitizer that stopped it)
                 * is a failure of the run, not a fault. */
                fprintf(stderr, "campaign: client %d ended with status %d (see %s/client-%d.log)\n", k, st,
                        r.dir, k);
                res->client_failures++;
            }
        }
    }
    res->injected = r.injected;
    res->missed = r.missed;
    if (tk_sg_pid(r.sg) == 0)
        tk_sg_restart(r.sg);

    struct history h;
    memset(&h, 0, sizeof(h));
    for (int k = 0; k < r.clients; k++) {
        char path[400];
        snprintf(path, sizeof(path), "%s/history-%d", r.dir, k);
        if ((rc = read_history(path, &h)) != 0)
            break;
    }
    if (rc == 0)
        check(&r, &h, res);
    free(h.g);
    free(h.a);
out:
    if (rc != 0)
        fprintf(stderr, "campaign: %s/%s: set-up failed: %s\n", faults[fault].name,
                fencing ? "fenced" : "unfenced", strerror(-rc));
    run_free(&r);
    return rc;
}

/* ---- the table --------------------------------------------------------- */

struct row {
    int runs, setup_failed;
    struct result sum;
    long long gap_max;
    double per_min_sum;
    char first[512];
};

static void add(struct row *w, const struct result *x)
{
    w->runs++;
    w->sum.injected += x->injected;
    w->sum.missed += x->missed;
    w->sum.acks += x->acks;
    w->sum.refused += x->refused;
    w->sum.unknown += x->unknown;
    w->sum.stale_reads += x->stale_reads;
    w->sum.double_grants += x->double_grants;
    w->sum.double_ms += x->double_ms;
    w->sum.stale_accepted += x->stale_accepted;
    w->sum.lost += x->lost;
    w->sum.bad_rmw += x->bad_rmw;
    w->sum.acks_lost += x->acks_lost;
    w->sum.dup_tokens += x->dup_tokens;
    w->sum.order += x->order;
    w->per_min_sum += x->per_min;
    if (x->longest_gap_ms > w->gap_max)
        w->gap_max = x->longest_gap_ms;
    if (w->first[0] == '\0' && x->first[0] != '\0')
        snprintf(w->first, sizeof(w->first), "%s", x->first);
}

static void usage(FILE *f)
{
    fprintf(f, "usage: fencelock-campaign [options]\n"
               "  --faults LIST     comma-separated, or \"all\" (default):");
    for (int i = 0; i < F_COUNT; i++)
        fprintf(f, " %s", faults[i].name);
    fprintf(f,
            "\n"
            "  --modes LIST      fenced,unfenced (default both)\n"
            "  --runs N          runs per fault and mode (default 1)\n"
            "  --duration S      seconds per run (default 30)\n"
            "  --clients K       clients (default 3, at most 16)\n"
            "  --seed N          schedule seed (default: the time)\n"
            "  --ttl-ms MS       lock TTL (default: each fault's own)\n"
            "  --short           CI: client-pause,write-delay,node-restart,sg-kill9, 12 s, --require-loss\n"
            "  --require-loss    fail unless every unfenced run of a fault that bites loses updates\n"
            "  --storage-guard P the storage-guard binary\n"
            "  --keep            keep each run's directory (histories, logs)\n"
            "  --cli[=PATH]      clients take and release the lock with the fencelock command\n"
            "  -v, --verbose     say what is injected when\n");
}

static int parse_faults(struct opts *o, const char *list)
{
    memset(o->fault_on, 0, sizeof(o->fault_on));
    char *copy = strdup(list), *save = NULL;
    if (copy == NULL)
        return -1;
    for (char *t = strtok_r(copy, ",", &save); t != NULL; t = strtok_r(NULL, ",", &save)) {
        int found = 0;
        for (int i = 0; i < F_COUNT; i++)
            if (strcmp(t, "all") == 0 || strcmp(t, faults[i].name) == 0) {
                o->fault_on[i] = 1;
                found = 1;
            }
        if (!found) {
            fprintf(stderr, "fencelock-campaign: unknown fault \"%s\"\n", t);
            free(copy);
            return -1;
        }
    }
    free(copy);
    return 0;
}

static int client_mode(int argc, char **argv)
{
    struct cc_client_args a;
    memset(&a, 0, sizeof(a));
    char *nodes = NULL;
    for (int i = 2; i + 1 < argc; i += 2) {
        const char *k = argv[i];
        char *v = argv[i + 1];
        if (strcmp(k, "--id") == 0)
            a.id = atoi(v);
        else if (strcmp(k, "--sg-port") == 0)
            a.sg_port = (uint16_t)atoi(v);
        else if (strcmp(k, "--ttl-ms") == 0)
            a.ttl_ms = strtoull(v, NULL, 10);
        else if (strcmp(k, "--until") == 0)
            a.until_ms = strtoll(v, NULL, 10);
        else if (strcmp(k, "--fencing") == 0)
            a.fencing = atoi(v);
        else if (strcmp(k, "--history") == 0)
            a.history = v;
        else if (strcmp(k, "--run-dir") == 0)
            a.run_dir = v;
        else if (strcmp(k, "--nodes") == 0)
            nodes = v;
        else if (strcmp(k, "--cli") == 0)
            a.cli = v;
    }
    char *list[NODES] = {0};
    char *save = NULL;
    for (char *t = nodes ? strtok_r(nodes, ",", &save) : NULL; t != NULL && a.n_nodes < NODES;
         t = strtok_r(NULL, ",", &save))
        list[a.n_nodes++] = t;
    a.nodes = list;
    if (a.n_nodes != NODES || a.history == NULL || a.run_dir == NULL || a.sg_port == 0 || a.ttl_ms == 0)
        return 64;
    return cc_client_main(&a);
}

int main(int argc, char **argv)
{
    if (argc > 1 && strcmp(argv[1], "--client") == 0)
        return client_mode(argc, argv);
    struct opts o;
    memset(&o, 0, sizeof(o));
    o.seed = (unsigned long long)time(NULL);
    o.clients = 3;
    o.duration_s = 30;
    o.runs = 1;
    o.modes = 3;
    for (int i = 0; i < F_COUNT; i++)
        o.fault_on[i] = 1;
    o.sg_exe = getenv("SG_EXE");
#ifdef CAMPAIGN_SG_EXE
    if (o.sg_exe == NULL && access(CAMPAIGN_SG_EXE, X_OK) == 0)
        o.sg_exe = CAMPAIGN_SG_EXE;
#endif
    enum {
        O_FAULTS = 256,
        O_MODES,
        O_RUNS,
        O_DURATION,
        O_CLIENTS,
        O_SEED,
        O_TTL,
        O_SHORT,
        O_REQUIRE,
        O_SG,
        O_KEEP,
        O_CLI,
    };
    static const struct option longopts[] = {
        {"faults", required_argument, NULL, O_FAULTS},
        {"modes", required_argument, NULL, O_MODES},
        {"runs", required_argument, NULL, O_RUNS},
        {"duration", required_argument, NULL, O_DURATION},
        {"clients", required_argument, NULL, O_CLIENTS},
        {"seed", required_argument, NULL, O_SEED},
        {"ttl-ms", required_argument, NULL, O_TTL},
        {"short", no_argument, NULL, O_SHORT},
        {"require-loss", no_argument, NULL, O_REQUIRE},
        {"storage-guard", required_argument, NULL, O_SG},
        {"keep", no_argument, NULL, O_KEEP},
        {"cli", optional_argument, NULL, O_CLI},
        {"verbose", no_argument, NULL, 'v'},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    int c;
    while ((c = getopt_long(argc, argv, "vh", longopts, NULL)) != -1) {
        switch (c) {
        case O_FAULTS:
            if (parse_faults(&o, optarg) != 0)
                return 64;
            break;
        case O_MODES:
            o.modes =
                (strstr(optarg, "unfenced") ? 2 : 0) |
                (strstr(optarg, "fenced") && (strncmp(optarg, "fenced", 6) == 0 || strstr(optarg, ",fenced"))
                     ? 1
                     : 0);
            if (o.modes == 0) {
                fprintf(stderr, "fencelock-campaign: --modes takes fenced, unfenced or both\n");
                return 64;
            }
            break;
        case O_RUNS:
            o.runs = atoi(optarg);
            break;
        case O_DURATION:
            o.duration_s = atoi(optarg);
            break;
        case O_CLIENTS:
            o.clients = atoi(optarg);
            break;
        case O_SEED:
            o.seed = strtoull(optarg, NULL, 10);
            break;
        case O_TTL:
            o.ttl_ms = strtoull(optarg, NULL, 10);
            break;
        case O_SHORT:
            parse_faults(&o, "client-pause,write-delay,node-restart,sg-kill9");
            o.duration_s = 12;
            o.require_loss = 1;
            break;
        case O_REQUIRE:
            o.require_loss = 1;
            break;
        case O_SG:
            o.sg_exe = optarg;
            break;
        case O_KEEP:
            o.keep = 1;
            break;
        case O_CLI:
            o.cli = optarg ? optarg : getenv("FENCELOCK");
#ifdef CAMPAIGN_FENCELOCK_EXE
            if (o.cli == NULL)
                o.cli = CAMPAIGN_FENCELOCK_EXE;
#endif
            if (o.cli == NULL)
                o.cli = "fencelock";
            break;
        case 'v':
            o.verbose = 1;
            break;
        case 'h':
            usage(stdout);
            return 0;
        default:
            usage(stderr);
            return 64;
        }
    }
    if (o.runs < 1 || o.duration_s < 5 || o.clients < 2 || o.clients > CLIENTS_MAX || optind != argc) {
        usage(stderr);
        return 64;
    }
    O = &o;
    printf("fencelock-campaign: seed %llu, %d clients%s, %d s per run, %d run(s) per fault and mode\n",
           o.seed, o.clients, o.cli ? " through the fencelock command" : "", o.duration_s, o.runs);
    fflush(stdout);

    static struct row rows[F_COUNT][2];
    int passed = 0, failed = 0;
    for (int f = 0; f < F_COUNT; f++) {
        if (!o.fault_on[f])
            continue;
        for (int run = 0; run < o.runs; run++) {
            /* The same seed for both modes: the same schedule. */
            unsigned long long seed = o.seed + (unsigned long long)f * 1000003ull + (unsigned long long)run;
            for (int m = 0; m < 2; m++) {
                if (!(o.modes & (1 << m)))
                    continue;
                int fencing = m == 0;
                struct result res;
                struct row *w = &rows[f][m];
                if (run_one((enum fault)f, fencing, seed, &res) != 0) {
                    w->setup_failed++;
                    failed++;
                    continue;
                }
                add(w, &res);
                long v = violations(&res);
                printf("%-13s %-9s seed %-12llu faults %2d (missed %d)  acks %5ld  %7.0f/min  gap %6lld ms  "
                       "double grants %3ld  violations %ld%s%s\n",
                       faults[f].name, fencing ? "fenced" : "unfenced", seed, res.injected, res.missed,
                       res.acks, res.per_min, res.longest_gap_ms, res.double_grants, v, v ? ": " : "",
                       v ? res.first : "");
                fflush(stdout);
                if (res.client_failures > 0) {
                    failed++;
                    printf("  %d client(s) did not end well\n", res.client_failures);
                } else if (res.injected == 0) {
                    /* A run without a fault proves nothing either way. */
                    failed++;
                    printf("  no fault landed in this run: make it longer\n");
                } else if (fencing) {
                    /* With fencing, no fault may cost safety. */
                    if (v == 0)
                        passed++;
                    else
                        failed++;
                } else if (o.require_loss && faults[f].bites) {
                    /* Without fencing, the faults that bite must show. */
                    if (res.lost + res.bad_rmw > 0) {
                        passed++;
                    } else {
                        failed++;
                        printf("  the unfenced run of %s lost no update: the campaign is too weak to count\n",
                               faults[f].name);
                    }
                }
            }
        }
    }

    printf("\n| fault | mode | runs | faults injected (missed) | increments | per minute | longest gap ms | "
           "refused "
           "| unknown | double grants (ms) | stale accepted | lost updates | read-write gaps | acks lost | "
           "tokens "
           "twice | order | violations |\n"
           "| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: "
           "| ---: "
           "| ---: | ---: |\n");
    for (int f = 0; f < F_COUNT; f++)
        for (int m = 0; m < 2; m++) {
            struct row *w = &rows[f][m];
            if (w->runs == 0)
                continue;
            const struct result *s = &w->sum;
            printf("| %s | %s | %d | %d (%d) | %ld | %.0f | %lld | %ld | %ld | %ld (%lld) | %ld | %ld | %ld "
                   "| %ld "
                   "| %ld | %ld | %ld |\n",
                   faults[f].name, m == 0 ? "fenced" : "unfenced", w->runs, s->injected, s->missed, s->acks,
                   w->per_min_sum / w->runs, w->gap_max, s->refused, s->unknown, s->double_grants,
                   s->double_ms, s->stale_accepted, s->lost, s->bad_rmw, s->acks_lost, s->dup_tokens,
                   s->order, violations(s));
        }
    printf("\n%d passed, %d failed\n", passed, failed);
    return failed ? 1 : 0;
}
