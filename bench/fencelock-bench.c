/*
 * fencelock-bench: lockcore's latency, throughput and contention against
 * real redis-server masters, one JSON line per workload on stdout.
 *
 *   fencelock-bench [--nodes host:port,...] [--workloads w1,...,w7]
 *                   [--fencing off|on|both] [--modes shared,threads]
 *                   [--quick] [--round N]
 *                   [--storage-guard PATH] [--postgresql]
 *
 * Without --nodes it starts 5 redis-server processes of its own (the test
 * harness: free loopback ports, no persistence, stopped by PID at exit).
 * With --nodes it uses the given masters, so that bench/compare.sh can run
 * fencelock and node-redlock against the same servers. Every workload
 * starts with FLUSHALL on every node.
 *
 * Workloads (see docs/benchmarks.md):
 *   w1  one client, sequential acquire + release of a fresh resource
 *   w2  64 cycles always in flight, each on its own resource (slot i always
 *       locks "w2:i", so no two cycles in flight share one): one shared client
 *       (non-blocking API, one connection per node) and one blocking client
 *       per worker thread
 *   w3  16 workers on one resource with retries: one shared client, and
 *       one client per worker thread
 *   w4  64 concurrent fenced writes to storage-guard over HTTP; with
 *       --postgresql also to 1, 2 and 4 storage-guard processes on one
 *       PostgreSQL database, and the same writes as plain SQL (INSERT ...
 *       ON CONFLICT into sg_records, without and with fencelock_admit)
 *   w5  16 processes (a client each) on one resource, each holding the lock
 *       1 ms per grant, default options: polling, notified and fair waiting
 *   w6  the lock kinds against the plain lock, one client, sequential, all
 *       kinds in every cycle: plain acquire, reentrant re-acquire (of a
 *       hold acquired just before), multi-resource of 4, semaphore of 3
 *       free permits, read and write side of a read-write lock; each on
 *       fresh resources
 *   w7  fences at scale: one plain and one fenced client (default options),
 *       sequential cycles of distinct resources, in alternating chunks of
 *       10,000, up to --w7-max (default 1,000,000): the nodes' used_memory
 *       per idle resource and their CPU per cycle (INFO cpu), fenced and
 *       plain, at 10^4, 2 x 10^4, 10^5 and 10^6 resources; then the same
 *       with fence_transition (the old layout's key per resource too) up
 *       to a tenth of that; then the second rounds of clients whose clock
 *       lags a busy client's by 1 ms, 10 ms, 100 ms and 1 s
 *
 * Times come from CLOCK_MONOTONIC; percentiles are nearest-rank.
 */
#include <dirent.h>
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <signal.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <hiredis/hiredis.h>
#include <libpq-fe.h>

#include "http.h"
#include "proc.h"
#include "redis_harness.h"
#include <fencelock-testkit/testkit.h>
#include <lockcore/lockcore.h>

#define MAX_NODES 16

/* ---- settings ---- */

struct settings {
    const char *nodes[MAX_NODES];
    size_t n_nodes;
    int w[8];            /* w[1..7]: run workload */
    int fencing[2];      /* fencing[0]: off, fencing[1]: on */
    int shared, threads; /* modes of w2 and w3 */
    int quick;
    int round;
    int wait_mode; /* -1: lockcore's default */
    const char *storage_guard;
    int postgresql; /* w4 on PostgreSQL too */
    /* durations, shortened by --quick */
    int w1_warmup, w1_cycles;
    double warmup_s, measure_s;
    long w7_max; /* resources of w7 */
};

static struct settings S;

/* ---- time and statistics ---- */

static uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

struct samples {
    uint64_t *v; /* nanoseconds */
    size_t n, cap;
};

static void samples_add(struct samples *s, uint64_t v)
{
    if (s->n == s->cap) {
        size_t cap = s->cap ? s->cap * 2 : 4096;
        uint64_t *nv = realloc(s->v, cap * sizeof(*nv));
        if (nv == NULL) {
            fprintf(stderr, "fencelock-bench: out of memory\n");
            exit(2);
        }
        s->v = nv;
        s->cap = cap;
    }
    s->v[s->n++] = v;
}

static void samples_merge(struct samples *into, const struct samples *from)
{
    for (size_t i = 0; i < from->n; i++)
        samples_add(into, from->v[i]);
}

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

static void samples_sort(struct samples *s)
{
    qsort(s->v, s->n, sizeof(*s->v), cmp_u64);
}

/* Nearest-rank percentile of sorted samples, in microseconds. */
static double pct_us(const struct samples *s, double p)
{
    if (s->n == 0)
        return 0;
    size_t rank = (size_t)ceil(p / 100.0 * (double)s->n);
    if (rank < 1)
        rank = 1;
    if (rank > s->n)
        rank = s->n;
    return (double)s->v[rank - 1] / 1000.0;
}

static void samples_free(struct samples *s)
{
    free(s->v);
    memset(s, 0, sizeof(*s));
}

/* ---- output: one JSON object per line, built piece by piece ---- */

static char J[4096];
static size_t Jn;

static void jadd(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void jadd(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int w = vsnprintf(J + Jn, sizeof(J) - Jn, fmt, ap);
    va_end(ap);
    if (w > 0)
        Jn += (size_t)w < sizeof(J) - Jn ? (size_t)w : sizeof(J) - Jn - 1;
}

static double self_cpu_s(void);
static double servers_cpu_s(void);
static atomic_ullong ops_total;
static double mark_client_s, mark_servers_s;

/* Starts the line with the CPU per operation since the workload began:
 * this process's, and the redis-server nodes' together. */
static void jbegin(const char *workload, const char *mode, int fencing)
{
    double ops = (double)atomic_load(&ops_total);
    double client = self_cpu_s() - mark_client_s, servers = servers_cpu_s() - mark_servers_s;
    Jn = 0;
    jadd("{\"bench\":\"fencelock\",\"round\":%d,\"workload\":\"%s\",\"mode\":\"%s\",\"fencing\":%d", S.round,
         workload, mode, fencing);
    jadd(",\"client_cpu_us_per_op\":%.1f,\"servers_cpu_us_per_op\":%.1f", ops > 0 ? client / ops * 1e6 : 0,
         ops > 0 ? servers / ops * 1e6 : 0);
}

static void jpct(const char *name, struct samples *s)
{
    samples_sort(s);
    jadd(",\"%s_p50_us\":%.1f,\"%s_p90_us\":%.1f,\"%s_p99_us\":%.1f", name, pct_us(s, 50), name,
         pct_us(s, 90), name, pct_us(s, 99));
}

static void jend(void)
{
    jadd("}");
    printf("%s\n", J);
    fflush(stdout);
}

/* ---- nodes and clients ---- */

static redisContext *node_connect(size_t i)
{
    char host[256];
    const char *a = S.nodes[i];
    const char *colon = strrchr(a, ':');
    if (colon == NULL || (size_t)(colon - a) >= sizeof(host)) {
        fprintf(stderr, "fencelock-bench: bad node %s\n", a);
        exit(2);
    }
    memcpy(host, a, (size_t)(colon - a));
    host[colon - a] = '\0';
    redisContext *ctx = redisConnect(host, atoi(colon + 1));
    if (ctx == NULL || ctx->err) {
        fprintf(stderr, "fencelock-bench: cannot reach %s\n", a);
        exit(2);
    }
    return ctx;
}

/* CPU seconds used so far by all redis-server nodes (INFO cpu), and by
 * this process (all threads). */
static double servers_cpu_s(void)
{
    double total = 0;
    for (size_t i = 0; i < S.n_nodes; i++) {
        redisContext *ctx = node_connect(i);
        redisReply *r = redisCommand(ctx, "INFO cpu");
        if (r != NULL && r->type == REDIS_REPLY_STRING) {
            const char *k;
            if ((k = strstr(r->str, "used_cpu_sys:")) != NULL)
                total += atof(k + 13);
            if ((k = strstr(r->str, "used_cpu_user:")) != NULL)
                total += atof(k + 14);
        }
        freeReplyObject(r);
        redisFree(ctx);
    }
    return total;
}

static double self_cpu_s(void)
{
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return (double)ru.ru_utime.tv_sec + (double)ru.ru_utime.tv_usec / 1e6 + (double)ru.ru_stime.tv_sec +
           (double)ru.ru_stime.tv_usec / 1e6;
}

/* ops_total: every operation a workload completed, warm-up included;
 * mark_*: the CPU used when it started (see jbegin). */

static void flushall(void)
{
    for (size_t i = 0; i < S.n_nodes; i++) {
        redisContext *ctx = node_connect(i);
        redisReply *r = redisCommand(ctx, "FLUSHALL");
        if (r == NULL || r->type == REDIS_REPLY_ERROR) {
            fprintf(stderr, "fencelock-bench: FLUSHALL on %s failed\n", S.nodes[i]);
            exit(2);
        }
        freeReplyObject(r);
        redisFree(ctx);
    }
    atomic_store(&ops_total, 0);
    mark_client_s = self_cpu_s();
    mark_servers_s = servers_cpu_s();
}

/* A client of options o, or the end of the program (from a child
 * process: _exit). */
static lockcore_client *client_open(const struct lockcore_options *o, int child)
{
    lockcore_client *c;
    char err[256];
    if (lockcore_client_new(o, &c, err, sizeof(err)) < 0) {
        fprintf(stderr, "fencelock-bench: client: %s\n", err);
        if (child)
            _exit(2);
        exit(2);
    }
    return c;
}

/* lockcore's defaults, and FENCELOCK_REDIS_FUNCTIONS=1 as the fencelock
 * command reads it (scripts as functions of a library on the nodes). */
static void bench_options_init(struct lockcore_options *o)
{
    lockcore_options_init(o);
    const char *rf = getenv("FENCELOCK_REDIS_FUNCTIONS");
    o->redis_functions = rf != NULL && strcmp(rf, "1") == 0;
}

/* retry_count 0 for the cycle workloads; w3 retries without limit. */
static lockcore_client *client_new_opts(int fencing, int contention, int transition)
{
    struct lockcore_options o;
    bench_options_init(&o);
    o.nodes = S.nodes;
    o.n_nodes = S.n_nodes;
    o.ttl_ms = 10000;
    o.drift_factor = 0.01;
    o.fencing = fencing;
    o.fence_transition = transition;
    if (S.wait_mode >= 0)
        o.wait_mode = S.wait_mode;
    if (contention) {
        o.retry_count = -1;
        o.retry_delay_ms = 5;
        o.retry_jitter_ms = 5;
    } else {
        o.retry_count = 0;
    }
    return client_open(&o, 0);
}

static lockcore_client *client_new(int fencing, int contention)
{
    return client_new_opts(fencing, contention, 0);
}

/* Failures are counted, and the first few named on stderr. */
static void note_error(const char *what, lockcore_client *c, int rc)
{
    static atomic_int shown;
    if (atomic_fetch_add(&shown, 1) < 5)
        fprintf(stderr, "fencelock-bench: %s: %s: %s\n", what, lockcore_strerror(rc), lockcore_errmsg(c));
}

static void die_rc(const char *what, lockcore_client *c, int rc)
{
    fprintf(stderr, "fencelock-bench: %s: %s: %s\n", what, lockcore_strerror(rc), lockcore_errmsg(c));
    exit(1);
}

/* ---- W1: latency of one client, sequential ---- */

static void w1(int fencing)
{
    flushall();
    lockcore_client *c = client_new(fencing, 0);
    struct samples acq = {0}, rel = {0};
    char res[64];
    uint64_t t0 = 0;
    for (int i = 0; i < S.w1_warmup + S.w1_cycles; i++) {
        if (i == S.w1_warmup)
            t0 = now_ns();
        snprintf(res, sizeof(res), "w1:%d:%d", fencing, i);
        struct lockcore_lock lock;
        uint64_t a = now_ns();
        int rc = lockcore_acquire(c, res, &lock);
        uint64_t b = now_ns();
        if (rc < 0)
            die_rc("w1 acquire", c, rc);
        rc = lockcore_release(c, &lock);
        uint64_t e = now_ns();
        if (rc < 0)
            die_rc("w1 release", c, rc);
        atomic_fetch_add(&ops_total, 1);
        if (i >= S.w1_warmup) {
            samples_add(&acq, b - a);
            samples_add(&rel, e - b);
        }
    }
    double secs = (double)(now_ns() - t0) / 1e9;
    jbegin("w1", "single", fencing);
    jadd(",\"cycles\":%d,\"cycles_per_s\":%.1f", S.w1_cycles, S.w1_cycles / secs);
    jpct("acquire", &acq);
    jpct("release", &rel);
    jend();
    samples_free(&acq);
    samples_free(&rel);
    lockcore_client_free(c);
}

/* ---- W2: 64 cycles in flight ---- */

#define W2_INFLIGHT 64

/* Shared client: every slot is a chain of acquire_async -> release_async ->
 * next acquire, all on one client in this thread. */
struct w2_slot {
    struct w2_run *run;
    int id;
    uint64_t started;
};

struct w2_run {
    uint64_t warm_end, end;
    int fencing;
    struct samples lat;
    uint64_t cycles, errors;
    struct w2_slot slots[W2_INFLIGHT];
};

static void w2_start(lockcore_client *c, struct w2_slot *s);

static void w2_released(lockcore_client *c, int rc, const struct lockcore_lock *lock, void *arg)
{
    (void)lock;
    struct w2_slot *s = arg;
    uint64_t t = now_ns();
    if (rc == 0)
        atomic_fetch_add(&ops_total, 1);
    if (rc < 0) {
        s->run->errors++;
        note_error("w2 release", c, rc);
    } else if (t >= s->run->warm_end && t < s->run->end) {
        s->run->cycles++;
        samples_add(&s->run->lat, t - s->started);
    }
    if (t < s->run->end)
        w2_start(c, s);
}

static void w2_acquired(lockcore_client *c, int rc, const struct lockcore_lock *lock, void *arg)
{
    struct w2_slot *s = arg;
    if (rc < 0) {
        s->run->errors++;
        note_error("w2 acquire", c, rc);
        if (now_ns() < s->run->end)
            w2_start(c, s);
        return;
    }
    rc = lockcore_release_async(c, lock, w2_released, s);
    if (rc < 0)
        die_rc("w2 release_async", c, rc);
}

static void w2_start(lockcore_client *c, struct w2_slot *s)
{
    char res[64];
    snprintf(res, sizeof(res), "w2:%d:%d", s->run->fencing, s->id);
    s->started = now_ns();
    int rc = lockcore_acquire_async(c, res, w2_acquired, s);
    if (rc < 0)
        die_rc("w2 acquire_async", c, rc);
}

static void w2_shared(int fencing)
{
    flushall();
    lockcore_client *c = client_new(fencing, 0);
    struct w2_run *run = calloc(1, sizeof(*run));
    run->fencing = fencing;
    uint64_t t0 = now_ns();
    run->warm_end = t0 + (uint64_t)(S.warmup_s * 1e9);
    run->end = run->warm_end + (uint64_t)(S.measure_s * 1e9);
    for (int i = 0; i < W2_INFLIGHT; i++) {
        run->slots[i].run = run;
        run->slots[i].id = i;
        w2_start(c, &run->slots[i]);
    }
    while (lockcore_inflight(c) > 0) {
        int rc = lockcore_run(c, 100);
        if (rc < 0)
            die_rc("w2 run", c, rc);
    }
    jbegin("w2", "shared", fencing);
    jadd(",\"inflight\":%d,\"cycles\":%" PRIu64 ",\"cycles_per_s\":%.1f,\"errors\":%" PRIu64, W2_INFLIGHT,
         run->cycles, (double)run->cycles / S.measure_s, run->errors);
    jpct("cycle", &run->lat);
    jend();
    samples_free(&run->lat);
    free(run);
    lockcore_client_free(c);
}

/* One blocking client per worker thread. */
struct w2_worker {
    pthread_t th;
    int id, fencing;
    uint64_t warm_end, end;
    struct samples lat;
    uint64_t cycles, errors;
};

static void *w2_worker_main(void *arg)
{
    struct w2_worker *w = arg;
    lockcore_client *c = client_new(w->fencing, 0);
    char res[64];
    for (uint64_t i = 0;; i++) {
        uint64_t a = now_ns();
        if (a >= w->end)
            break;
        snprintf(res, sizeof(res), "w2t:%d:%d", w->fencing, w->id);
        struct lockcore_lock lock;
        int rc = lockcore_acquire(c, res, &lock);
        if (rc == 0)
            rc = lockcore_release(c, &lock);
        uint64_t e = now_ns();
        if (rc == 0)
            atomic_fetch_add(&ops_total, 1);
        if (rc < 0) {
            w->errors++;
            note_error("w2 cycle", c, rc);
        } else if (e >= w->warm_end && e < w->end) {
            w->cycles++;
            samples_add(&w->lat, e - a);
        }
    }
    lockcore_client_free(c);
    return NULL;
}

static void w2_threads(int fencing)
{
    flushall();
    struct w2_worker *ws = calloc(W2_INFLIGHT, sizeof(*ws));
    uint64_t t0 = now_ns();
    for (int i = 0; i < W2_INFLIGHT; i++) {
        ws[i].id = i;
        ws[i].fencing = fencing;
        ws[i].warm_end = t0 + (uint64_t)(S.warmup_s * 1e9);
        ws[i].end = ws[i].warm_end + (uint64_t)(S.measure_s * 1e9);
        pthread_create(&ws[i].th, NULL, w2_worker_main, &ws[i]);
    }
    struct samples lat = {0};
    uint64_t cycles = 0, errors = 0;
    for (int i = 0; i < W2_INFLIGHT; i++) {
        pthread_join(ws[i].th, NULL);
        samples_merge(&lat, &ws[i].lat);
        cycles += ws[i].cycles;
        errors += ws[i].errors;
        samples_free(&ws[i].lat);
    }
    jbegin("w2", "threads", fencing);
    jadd(",\"inflight\":%d,\"cycles\":%" PRIu64 ",\"cycles_per_s\":%.1f,\"errors\":%" PRIu64, W2_INFLIGHT,
         cycles, (double)cycles / S.measure_s, errors);
    jpct("cycle", &lat);
    jend();
    samples_free(&lat);
    free(ws);
}

/* ---- W3: 16 workers on one resource ---- */

#define W3_WORKERS 16

/* Grants in the measured window, shared by all workers of a run (the
 * per-thread variant takes the mutex; the shared one runs in one thread). */
struct w3_run {
    pthread_mutex_t mu;
    uint64_t warm_end, end;
    int fencing;
    struct samples wait;
    uint64_t grants[W3_WORKERS];
    uint64_t attempts, errors;
    uint64_t last_grant, max_gap; /* ns; the longest time without a grant */
};

static void w3_note(struct w3_run *r, int worker, uint64_t started, uint64_t t, unsigned attempts)
{
    atomic_fetch_add(&ops_total, 1);
    if (t < r->warm_end || t >= r->end)
        return;
    samples_add(&r->wait, t - started);
    r->grants[worker]++;
    r->attempts += attempts;
    uint64_t since = t - (r->last_grant > r->warm_end ? r->last_grant : r->warm_end);
    if (since > r->max_gap)
        r->max_gap = since;
    r->last_grant = t;
}

static void w3_report(struct w3_run *r, const char *mode)
{
    uint64_t total = 0, mn = UINT64_MAX, mx = 0;
    for (int i = 0; i < W3_WORKERS; i++) {
        total += r->grants[i];
        if (r->grants[i] < mn)
            mn = r->grants[i];
        if (r->grants[i] > mx)
            mx = r->grants[i];
    }
    /* The tail after the last grant counts as a gap too. */
    uint64_t tail = r->end - (r->last_grant > r->warm_end ? r->last_grant : r->warm_end);
    if (tail > r->max_gap)
        r->max_gap = tail;
    jbegin("w3", mode, r->fencing);
    jadd(",\"workers\":%d,\"handoffs\":%" PRIu64 ",\"handoffs_per_s\":%.1f,\"worker_min\":%" PRIu64
         ",\"worker_max\":%" PRIu64 ",\"min_max_ratio\":%.3f,\"attempts_per_grant\":%.2f,\"max_gap_ms\":%.1f"
         ",\"errors\":%" PRIu64,
         W3_WORKERS, total, (double)total / S.measure_s, mn, mx, mx ? (double)mn / (double)mx : 0,
         total ? (double)r->attempts / (double)total : 0, (double)r->max_gap / 1e6, r->errors);
    jpct("wait", &r->wait);
    jend();
}

struct w3_shared_worker {
    struct w3_run *run;
    int id;
    uint64_t started;
};

static void w3_acquire(lockcore_client *c, struct w3_shared_worker *w);

static void w3_released(lockcore_client *c, int rc, const struct lockcore_lock *lock, void *arg)
{
    (void)lock;
    struct w3_shared_worker *w = arg;
    if (rc < 0 && rc != LOCKCORE_ECANCELED) {
        w->run->errors++;
        note_error("w3 release", c, rc);
    }
    if (now_ns() < w->run->end)
        w3_acquire(c, w);
}

static void w3_acquired(lockcore_client *c, int rc, const struct lockcore_lock *lock, void *arg)
{
    struct w3_shared_worker *w = arg;
    if (rc < 0) {
        if (rc != LOCKCORE_ECANCELED) {
            w->run->errors++;
            note_error("w3 acquire", c, rc);
        }
        if (now_ns() < w->run->end)
            w3_acquire(c, w);
        return;
    }
    w3_note(w->run, w->id, w->started, now_ns(), lock->attempts);
    rc = lockcore_release_async(c, lock, w3_released, w);
    if (rc < 0)
        die_rc("w3 release_async", c, rc);
}

static void w3_acquire(lockcore_client *c, struct w3_shared_worker *w)
{
    w->started = now_ns();
    int rc = lockcore_acquire_async(c, "w3", w3_acquired, w);
    if (rc < 0)
        die_rc("w3 acquire_async", c, rc);
}

static void w3_run_init(struct w3_run *r, int fencing)
{
    memset(r, 0, sizeof(*r));
    pthread_mutex_init(&r->mu, NULL);
    r->fencing = fencing;
    r->warm_end = now_ns() + (uint64_t)(S.warmup_s * 1e9);
    r->end = r->warm_end + (uint64_t)(S.measure_s * 1e9);
}

static void w3_shared(int fencing)
{
    flushall();
    lockcore_client *c = client_new(fencing, 1);
    struct w3_run r;
    struct w3_shared_worker ws[W3_WORKERS];
    w3_run_init(&r, fencing);
    for (int i = 0; i < W3_WORKERS; i++) {
        ws[i].run = &r;
        ws[i].id = i;
        w3_acquire(c, &ws[i]);
    }
    /* Waiters still retrying at the end are canceled by freeing the client. */
    while (lockcore_inflight(c) > 0 && now_ns() < r.end) {
        int rc = lockcore_run(c, 100);
        if (rc < 0)
            die_rc("w3 run", c, rc);
    }
    r.end = now_ns() < r.end ? now_ns() : r.end;
    uint64_t end = r.end;
    r.end = 0; /* callbacks of canceled operations start nothing new */
    lockcore_client_free(c);
    r.end = end;
    w3_report(&r, "shared");
    samples_free(&r.wait);
    pthread_mutex_destroy(&r.mu);
}

struct w3_thread {
    pthread_t th;
    struct w3_run *run;
    int id;
};

static void *w3_thread_main(void *arg)
{
    struct w3_thread *w = arg;
    struct w3_run *r = w->run;
    lockcore_client *c = client_new(r->fencing, 1);
    /* A waiter still retrying at the end gets the lock once the others
     * have stopped, so every thread ends. */
    while (now_ns() < r->end) {
        uint64_t a = now_ns();
        struct lockcore_lock lock;
        int rc = lockcore_acquire(c, "w3t", &lock);
        uint64_t t = now_ns();
        if (rc < 0) {
            note_error("w3 acquire", c, rc);
            pthread_mutex_lock(&r->mu);
            r->errors++;
            pthread_mutex_unlock(&r->mu);
            continue;
        }
        pthread_mutex_lock(&r->mu);
        w3_note(r, w->id, a, t, lock.attempts);
        pthread_mutex_unlock(&r->mu);
        rc = lockcore_release(c, &lock);
        if (rc < 0) {
            note_error("w3 release", c, rc);
            pthread_mutex_lock(&r->mu);
            r->errors++;
            pthread_mutex_unlock(&r->mu);
        }
    }
    lockcore_client_free(c);
    return NULL;
}

static void w3_threads(int fencing)
{
    flushall();
    struct w3_run r;
    struct w3_thread ws[W3_WORKERS];
    w3_run_init(&r, fencing);
    for (int i = 0; i < W3_WORKERS; i++) {
        ws[i].run = &r;
        ws[i].id = i;
        pthread_create(&ws[i].th, NULL, w3_thread_main, &ws[i]);
    }
    for (int i = 0; i < W3_WORKERS; i++)
        pthread_join(ws[i].th, NULL);
    w3_report(&r, "threads");
    samples_free(&r.wait);
    pthread_mutex_destroy(&r.mu);
}

/* ---- W4: fenced writes to storage-guard over HTTP ---- */

#define W4_WRITERS 64

#define W4_INSTANCES_MAX 4

struct w4_run {
    int ports[W4_INSTANCES_MAX]; /* writer i writes to ports[i % n_ports] */
    int n_ports;
    uint64_t warm_end, end;
    int shared; /* 1: every writer writes under one resource and its token */
    uint64_t shared_token;
    pthread_mutex_t mu;
    struct samples lat;
    uint64_t writes, refused, errors;
};

struct w4_writer {
    pthread_t th;
    struct w4_run *run;
    int id;
};

static void *w4_writer_main(void *arg)
{
    struct w4_writer *w = arg;
    struct w4_run *r = w->run;
    lockcore_client *c = NULL;
    struct lockcore_lock lock;
    char key[64], resource[64], path[128];
    uint64_t token = r->shared_token;
    snprintf(key, sizeof(key), "w4-%s-%d", r->shared ? "s" : "d", w->id);
    snprintf(resource, sizeof(resource), "%s", r->shared ? "w4-shared" : key);
    if (!r->shared) {
        /* Each writer holds the lock of its own record; the token of that
         * grant goes with every write. */
        c = client_new(1, 0);
        int rc = lockcore_acquire(c, resource, &lock);
        if (rc < 0)
            die_rc("w4 acquire", c, rc);
        token = lock.token;
    }
    snprintf(path, sizeof(path), "/v1/records/%s", key);
    int port = r->ports[w->id % r->n_ports];
    struct samples lat = {0};
    uint64_t writes = 0, refused = 0, errors = 0;
    for (uint64_t i = 0;; i++) {
        uint64_t a = now_ns();
        if (a >= r->end)
            break;
        char body[256];
        int n = snprintf(body, sizeof(body),
                         "{\"value\":{\"writer\":%d,\"n\":%" PRIu64 "},\"token\":%" PRIu64
                         ",\"resource\":\"%s\"}",
                         w->id, i, token, resource);
        struct hc_response resp;
        int rc = hc_request((uint16_t)port, "PUT", path, "Content-Type: application/json\r\n", body,
                            (size_t)n, &resp);
        uint64_t e = now_ns();
        int ok = rc == 0 && resp.status == 200;
        if (ok)
            atomic_fetch_add(&ops_total, 1);
        if (rc == 0 && resp.status == 409)
            refused++;
        else if (!ok)
            errors++;
        if (rc == 0)
            hc_response_clear(&resp);
        if (ok && e >= r->warm_end && e < r->end) {
            writes++;
            samples_add(&lat, e - a);
        }
    }
    if (c != NULL) {
        lockcore_release(c, &lock);
        lockcore_client_free(c);
    }
    pthread_mutex_lock(&r->mu);
    samples_merge(&r->lat, &lat);
    r->writes += writes;
    r->refused += refused;
    r->errors += errors;
    pthread_mutex_unlock(&r->mu);
    samples_free(&lat);
    return NULL;
}

/* The PostgreSQL cluster of the w4 runs on it, started at the first. */
static struct tk_pg *w4_pg;

static const char *w4_pg_url(void)
{
    if (w4_pg == NULL && tk_pg_start(NULL, &w4_pg) != 0) {
        fprintf(stderr, "fencelock-bench: PostgreSQL did not start\n");
        exit(2);
    }
    return tk_pg_url(w4_pg);
}

/* CPU seconds the PostgreSQL server has used: the postmaster with the
 * backends it has reaped (cutime, cstime) and those still running. A
 * machine shared with other work changes this far less than throughput. */
static double pg_cpu_s(void)
{
    pid_t pm = tk_pg_pid(w4_pg);
    double ticks = 0, hz = (double)sysconf(_SC_CLK_TCK);
    DIR *d = opendir("/proc");
    struct dirent *e;
    while (d != NULL && (e = readdir(d)) != NULL) {
        char path[300], buf[1024];
        if (e->d_name[0] < '0' || e->d_name[0] > '9')
            continue;
        snprintf(path, sizeof(path), "/proc/%s/stat", e->d_name);
        FILE *f = fopen(path, "r");
        size_t n = f ? fread(buf, 1, sizeof(buf) - 1, f) : 0;
        if (f)
            fclose(f);
        buf[n] = '\0';
        char *rp = strrchr(buf, ')'); /* the name may hold spaces */
        int ppid = 0;
        unsigned long long ut = 0, st = 0, cut = 0, cst = 0;
        if (rp == NULL || sscanf(rp + 2, "%*c %d %*d %*d %*d %*d %*u %*u %*u %*u %*u %llu %llu %llu %llu",
                                 &ppid, &ut, &st, &cut, &cst) != 5)
            continue;
        if (atoi(e->d_name) == pm)
            ticks += (double)(ut + st + cut + cst);
        else if (ppid == pm)
            ticks += (double)(ut + st);
    }
    if (d != NULL)
        closedir(d);
    return ticks / hz;
}

static double w4_pg_mark;

/* ",\"db_cpu_us_per_op\":..." since w4_pg_reset, once the backends that
 * served the run have ended. */
static void w4_pg_cpu(void)
{
    hp_sleep_ms(200);
    double ops = (double)atomic_load(&ops_total);
    jadd(",\"db_cpu_us_per_op\":%.1f", ops > 0 ? (pg_cpu_s() - w4_pg_mark) / ops * 1e6 : 0);
}

/* Every run on PostgreSQL starts from empty tables. */
static void w4_pg_reset(void)
{
    if (tk_pg_exec(w4_pg, "DO $$ BEGIN IF to_regclass('storage_guard.sg_log') IS NOT NULL THEN"
                          " TRUNCATE storage_guard.sg_records, storage_guard.sg_log, "
                          "storage_guard.sg_deleted, fencelock.last_token RESTART IDENTITY;"
                          " END IF; END $$; CHECKPOINT") != 0)
        exit(2);
    w4_pg_mark = pg_cpu_s();
}

/* W4 against `instances` storage-guard processes on db (NULL: SQLite in
 * each one's directory; a URL: one PostgreSQL database for all). */
static void w4(int shared, int instances, const char *db, int unfenced)
{
    flushall();
    struct w4_run r;
    memset(&r, 0, sizeof(r));
    pthread_mutex_init(&r.mu, NULL);
    r.shared = shared;
    if (db != NULL)
        w4_pg_reset();
    /* storage-guard from the test kit: its own directory and free port. */
    struct tk_sg *sg[W4_INSTANCES_MAX] = {NULL};
    for (int i = 0; i < instances; i++) {
        struct tk_sg_options so;
        tk_sg_options_init(&so);
        so.exe = S.storage_guard;
        so.log_level = "warn";
        so.db = db;
        so.unfenced = unfenced;
        int src = tk_sg_start(&so, &sg[i]);
        if (src < 0) {
            fprintf(stderr, "fencelock-bench: storage-guard: %s\n", strerror(-src));
            exit(2);
        }
        r.ports[i] = tk_sg_port(sg[i]);
    }
    r.n_ports = instances;
    lockcore_client *c = NULL;
    struct lockcore_lock lock;
    if (shared) {
        /* One holder of the shared resource; its 64 writers write under its
         * token (an equal token is the same holder writing again). */
        c = client_new(1, 0);
        int rc = lockcore_acquire(c, "w4-shared", &lock);
        if (rc < 0)
            die_rc("w4 acquire", c, rc);
        r.shared_token = lock.token;
    }
    r.warm_end = now_ns() + (uint64_t)(S.warmup_s * 1e9);
    r.end = r.warm_end + (uint64_t)(S.measure_s * 1e9);
    struct w4_writer ws[W4_WRITERS];
    for (int i = 0; i < W4_WRITERS; i++) {
        ws[i].run = &r;
        ws[i].id = i;
        pthread_create(&ws[i].th, NULL, w4_writer_main, &ws[i]);
    }
    for (int i = 0; i < W4_WRITERS; i++)
        pthread_join(ws[i].th, NULL);
    if (c != NULL) {
        lockcore_release(c, &lock);
        lockcore_client_free(c);
    }
    for (int i = 0; i < instances; i++) {
        tk_sg_stop(sg[i]);
        tk_sg_free(sg[i]);
    }
    char mode[64];
    snprintf(mode, sizeof(mode), "%s%s%s",
             db ? (instances == 1   ? "pg-1-"
                   : instances == 2 ? "pg-2-"
                                    : "pg-4-")
                : "",
             unfenced ? "unfenced-" : "", shared ? "shared-resource" : "distinct-keys");
    jbegin("w4", mode, !unfenced);
    jadd(",\"db\":\"%s\",\"instances\":%d,\"writers\":%d,\"writes\":%" PRIu64 ",\"writes_per_s\":%.1f,"
         "\"refused\":%" PRIu64 ",\"errors\":%" PRIu64,
         db ? "postgresql" : "sqlite", instances, W4_WRITERS, r.writes, (double)r.writes / S.measure_s,
         r.refused, r.errors);
    jpct("write", &r.lat);
    if (db != NULL)
        w4_pg_cpu();
    jend();
    samples_free(&r.lat);
    pthread_mutex_destroy(&r.mu);
}

/* ---- W4 as plain SQL: the same writes without storage-guard ---- */

/* storage-guard's own upsert of a record, as a client would write it. */
#define W4_UPSERT                                                                                            \
    "INSERT INTO storage_guard.sg_records (key, resource, value, token, version, updated_at_ms)"             \
    " %s ON CONFLICT (key) DO UPDATE SET"                                                                    \
    " resource = excluded.resource, value = excluded.value, token = excluded.token,"                         \
    " version = storage_guard.sg_records.version + 1, updated_at_ms = excluded.updated_at_ms"

/* How the SQL writers write: the upsert alone; in a transaction (BEGIN;
 * the upsert; COMMIT, sent in one go in libpq's pipeline mode); guarded in
 * a transaction (BEGIN; SELECT fencelock.admit(); the upsert; COMMIT, in
 * one go); or guarded in one statement (the upsert reads from the
 * admission). Each one round trip, as prepared statements. */
enum { W4_SQL_PLAIN, W4_SQL_PLAIN_TXN, W4_SQL_TXN, W4_SQL_ONE, W4_SQL_COUNT };
static const char *const w4_sql_mode[] = {"sql-plain", "sql-plain-transaction", "sql-fenced",
                                          "sql-fenced-one-statement"};

struct w4_sql_writer {
    pthread_t th;
    struct w4_run *run;
    int id;
    int how;
};

/* Read one result of a pipeline, and the NULL that ends it; 1 if it is
 * a success (and, for COMMIT, committed). */
static int pipeline_ok(PGconn *c, int commit)
{
    PGresult *res = PQgetResult(c);
    ExecStatusType st = PQresultStatus(res);
    int ok = st == PGRES_COMMAND_OK || st == PGRES_TUPLES_OK;
    if (ok && commit)
        ok = strcmp(PQcmdStatus(res), "COMMIT") == 0;
    PQclear(res);
    PQclear(PQgetResult(c));
    return ok;
}

/* One transaction, with the admission if admit, in one go. */
static int w4_sql_txn(PGconn *c, const char *const vals[5], int admit)
{
    const char *admit_vals[2] = {vals[1], vals[3]};
    if (!PQsendQueryPrepared(c, "begin", 0, NULL, NULL, NULL, 0) ||
        (admit && !PQsendQueryPrepared(c, "admit", 2, admit_vals, NULL, NULL, 0)) ||
        !PQsendQueryPrepared(c, "upsert", 5, vals, NULL, NULL, 0) ||
        !PQsendQueryPrepared(c, "commit", 0, NULL, NULL, NULL, 0) || !PQpipelineSync(c))
        return -1;
    int ok = pipeline_ok(c, 0) & (!admit || pipeline_ok(c, 0)) & pipeline_ok(c, 0) & pipeline_ok(c, 1);
    PGresult *sync = PQgetResult(c);
    ok &= PQresultStatus(sync) == PGRES_PIPELINE_SYNC;
    PQclear(sync);
    if (PQtransactionStatus(c) == PQTRANS_INERROR) {
        PQsendQueryParams(c, "ROLLBACK", 0, NULL, NULL, NULL, NULL, 0);
        PQpipelineSync(c);
        pipeline_ok(c, 0);
        PQclear(PQgetResult(c));
    }
    return ok ? 0 : -1;
}

/* Prepare the statements a writer of mode how sends; 0 or -1. */
static int w4_sql_prepare(PGconn *c, int how)
{
    static const char *const values = "VALUES ($1::bytea, $2::bytea, $3, $4::bigint, 1, $5::bigint)";
    static const char *const admitted = "SELECT $1::bytea, $2::bytea, $3, $4::bigint, 1, $5::bigint FROM"
                                        " (SELECT fencelock.admit($2::bytea, $4::bigint)) AS admitted";
    char upsert[1024], one[1024];
    snprintf(upsert, sizeof(upsert), W4_UPSERT, values);
    snprintf(one, sizeof(one), W4_UPSERT, admitted);
    const struct {
        const char *name, *sql;
        int used_by; /* a bit per mode */
    } st[] = {
        {"upsert", upsert, 1 << W4_SQL_PLAIN | 1 << W4_SQL_PLAIN_TXN | 1 << W4_SQL_TXN},
        {"admit", "SELECT fencelock.admit($1::bytea, $2::bigint)", 1 << W4_SQL_TXN},
        {"begin", "BEGIN", 1 << W4_SQL_PLAIN_TXN | 1 << W4_SQL_TXN},
        {"commit", "COMMIT", 1 << W4_SQL_PLAIN_TXN | 1 << W4_SQL_TXN},
        {"one", one, 1 << W4_SQL_ONE},
    };
    for (size_t i = 0; i < sizeof(st) / sizeof(st[0]); i++) {
        if (!(st[i].used_by & 1 << how))
            continue;
        PGresult *res = PQprepare(c, st[i].name, st[i].sql, 0, NULL);
        int ok = PQresultStatus(res) == PGRES_COMMAND_OK;
        PQclear(res);
        if (!ok)
            return -1;
    }
    return 0;
}

static void *w4_sql_writer_main(void *arg)
{
    struct w4_sql_writer *w = arg;
    struct w4_run *r = w->run;
    PGconn *c = PQconnectdb(tk_pg_url(w4_pg));
    int txn = w->how == W4_SQL_TXN || w->how == W4_SQL_PLAIN_TXN;
    if (PQstatus(c) != CONNECTION_OK || w4_sql_prepare(c, w->how) != 0 || (txn && !PQenterPipelineMode(c))) {
        fprintf(stderr, "fencelock-bench: %s", PQerrorMessage(c));
        exit(2);
    }
    char key[32], token[24], value[64], now[24];
    /* Each writer holds its own record's resource, with a token of its own,
     * as in W4's distinct-keys run. */
    snprintf(key, sizeof(key), "w4-d-%d", w->id);
    snprintf(token, sizeof(token), "%d", 1000 + w->id);
    struct samples lat = {0};
    uint64_t writes = 0, errors = 0;
    for (uint64_t i = 0;; i++) {
        uint64_t a = now_ns();
        if (a >= r->end)
            break;
        snprintf(value, sizeof(value), "{\"writer\":%d,\"n\":%" PRIu64 "}", w->id, i);
        snprintf(now, sizeof(now), "%" PRIu64, a / 1000000);
        const char *vals[5] = {key, key, value, token, now};
        int ok;
        if (txn) {
            ok = w4_sql_txn(c, vals, w->how == W4_SQL_TXN) == 0;
        } else {
            PGresult *res =
                PQexecPrepared(c, w->how == W4_SQL_ONE ? "one" : "upsert", 5, vals, NULL, NULL, 0);
            ok = PQresultStatus(res) == PGRES_COMMAND_OK;
            PQclear(res);
        }
        uint64_t e = now_ns();
        if (ok)
            atomic_fetch_add(&ops_total, 1);
        else
            errors++;
        if (ok && e >= r->warm_end && e < r->end) {
            writes++;
            samples_add(&lat, e - a);
        }
    }
    PQfinish(c);
    pthread_mutex_lock(&r->mu);
    samples_merge(&r->lat, &lat);
    r->writes += writes;
    r->errors += errors;
    pthread_mutex_unlock(&r->mu);
    samples_free(&lat);
    return NULL;
}

/* The writes of W4's distinct-keys run, straight into sg_records from 64
 * connections, plain or guarded (see w4_sql_mode). */
static void w4_sql(int how)
{
    flushall();
    w4_pg_reset();
    struct w4_run r;
    memset(&r, 0, sizeof(r));
    pthread_mutex_init(&r.mu, NULL);
    r.warm_end = now_ns() + (uint64_t)(S.warmup_s * 1e9);
    r.end = r.warm_end + (uint64_t)(S.measure_s * 1e9);
    struct w4_sql_writer ws[W4_WRITERS];
    for (int i = 0; i < W4_WRITERS; i++) {
        ws[i] = (struct w4_sql_writer){.run = &r, .id = i, .how = how};
        pthread_create(&ws[i].th, NULL, w4_sql_writer_main, &ws[i]);
    }
    for (int i = 0; i < W4_WRITERS; i++)
        pthread_join(ws[i].th, NULL);
    jbegin("w4", w4_sql_mode[how], how == W4_SQL_TXN || how == W4_SQL_ONE);
    jadd(",\"db\":\"postgresql\",\"instances\":0,\"writers\":%d,\"writes\":%" PRIu64
         ",\"writes_per_s\":%.1f,\"refused\":0,\"errors\":%" PRIu64,
         W4_WRITERS, r.writes, (double)r.writes / S.measure_s, r.errors);
    jpct("write", &r.lat);
    w4_pg_cpu();
    jend();
    samples_free(&r.lat);
    pthread_mutex_destroy(&r.mu);
}

/* ---- W6: the lock kinds against the plain lock ---- */

enum { K_PLAIN, K_RE_FIRST, K_REENTER, K_MULTI4, K_SEM3, K_READ, K_WRITE, K_COUNT };
static const char *const k_names[K_COUNT] = {
    "plain", "reentrant_first", "reentrant_reacquire", "multi4", "sem3_free", "rw_read", "rw_write"};

/* Every cycle runs every kind once, in one client, so that the machine's
 * load falls on all of them alike; the ratios to the plain lock are what
 * docs/benchmarks.md reports. */
static void w6(int fencing)
{
    flushall();
    lockcore_client *c = client_new(fencing, 0);
    struct samples acq[K_COUNT] = {{0}};
    uint64_t busy[K_COUNT] = {0}; /* acquire + release, ns */
    int cycles = S.w1_cycles / 2, warmup = S.w1_warmup / 2;
    unsigned errors = 0;
    for (int i = 0; i < warmup + cycles; i++) {
        char r[4][64];
        struct lockcore_lock l, outer, m;
        uint64_t t[3];
        int rc;
#define TIMED(kind, call_acq, call_rel)                                                                      \
    do {                                                                                                     \
        t[0] = now_ns();                                                                                     \
        if ((rc = (call_acq)) < 0) {                                                                         \
            note_error(k_names[kind], c, rc);                                                                \
            errors++;                                                                                        \
            goto next;                                                                                       \
        }                                                                                                    \
        t[1] = now_ns();                                                                                     \
        call_rel;                                                                                            \
        t[2] = now_ns();                                                                                     \
        if (i >= warmup) {                                                                                   \
            samples_add(&acq[kind], t[1] - t[0]);                                                            \
            busy[kind] += t[2] - t[0];                                                                       \
        }                                                                                                    \
    } while (0)
        snprintf(r[0], sizeof(r[0]), "w6:%d:plain:%d", fencing, i);
        TIMED(K_PLAIN, lockcore_acquire(c, r[0], &l), lockcore_release(c, &l));
        snprintf(r[0], sizeof(r[0]), "w6:%d:re:%d", fencing, i);
        TIMED(K_RE_FIRST, lockcore_reentrant_acquire(c, r[0], NULL, &outer), (void)0);
        rc = lockcore_reentrant_acquire(c, r[0], outer.id, &l); /* warms nothing: timed below */
        if (rc == 0)
            lockcore_release(c, &l);
        TIMED(K_REENTER, lockcore_reentrant_acquire(c, r[0], outer.id, &l), lockcore_release(c, &l));
        lockcore_release(c, &outer);
        const char *set[4];
        for (int k = 0; k < 4; k++) {
            snprintf(r[k], sizeof(r[k]), "w6:%d:multi:%d:%d", fencing, i, k);
            set[k] = r[k];
        }
        TIMED(K_MULTI4, lockcore_multi_acquire(c, set, 4, &m), lockcore_release(c, &m));
        snprintf(r[0], sizeof(r[0]), "w6:%d:sem:%d", fencing, i);
        TIMED(K_SEM3, lockcore_sem_acquire(c, r[0], 3, &l), lockcore_release(c, &l));
        snprintf(r[0], sizeof(r[0]), "w6:%d:rw:%d", fencing, i);
        TIMED(K_READ, lockcore_rw_acquire(c, r[0], 0, &l), lockcore_release(c, &l));
        TIMED(K_WRITE, lockcore_rw_acquire(c, r[0], 1, &l), lockcore_release(c, &l));
        atomic_fetch_add(&ops_total, K_COUNT);
    next:;
#undef TIMED
    }
    samples_sort(&acq[K_PLAIN]);
    double plain_p50 = pct_us(&acq[K_PLAIN], 50);
    for (int k = 0; k < K_COUNT; k++) {
        jbegin("w6", k_names[k], fencing);
        jadd(",\"cycles\":%d,\"cycles_per_s\":%.1f", cycles, busy[k] ? cycles / ((double)busy[k] / 1e9) : 0);
        jpct("acquire", &acq[k]);
        jadd(",\"acquire_p50_vs_plain\":%.2f,\"errors\":%u",
             plain_p50 > 0 ? pct_us(&acq[k], 50) / plain_p50 : 0, errors);
        jend();
        samples_free(&acq[k]);
    }
    lockcore_client_free(c);
}

/* ---- W7: fences at scale ---- */

#define W7_CHUNK 10000

/* The number after key in INFO section of node i (0 if absent). */
static double node_info(size_t i, const char *section, const char *key)
{
    redisContext *ctx = node_connect(i);
    redisReply *r = redisCommand(ctx, "INFO %s", section);
    double v = 0;
    const char *k;
    if (r != NULL && r->type == REDIS_REPLY_STRING && (k = strstr(r->str, key)) != NULL)
        v = atof(k + strlen(key));
    freeReplyObject(r);
    redisFree(ctx);
    return v;
}

static double script_calls(void)
{
    double n = 0;
    for (size_t i = 0; i < S.n_nodes; i++)
        n += node_info(i, "commandstats", "cmdstat_evalsha:calls=") +
             node_info(i, "commandstats", "cmdstat_fcall:calls=");
    return n;
}

static long w7_errors;

/* An acquisition that fails (a node too slow on a loaded machine) is
 * counted and tried again, so that every resource is locked once. */
static void w7_cycles(lockcore_client *c, const char *tag, long from, long n)
{
    char res[64];
    for (long i = from; i < from + n; i++) {
        snprintf(res, sizeof(res), "w7:%s:%ld", tag, i);
        struct lockcore_lock l;
        int rc, tries = 0;
        while ((rc = lockcore_acquire(c, res, &l)) < 0) {
            note_error("w7 acquire", c, rc);
            w7_errors++;
            if (++tries == 100)
                die_rc("w7 acquire", c, rc);
        }
        if ((rc = lockcore_release(c, &l)) < 0) { /* its keys expire with the TTL */
            note_error("w7 release", c, rc);
            w7_errors++;
        }
    }
}

/* Plain and fenced cycles in alternating chunks, so that the machine's
 * load falls on both alike; the plain cycles leave nothing on the nodes,
 * so the memory the nodes gained is the fenced resources'. A fenced cycle
 * sends one script to each node to acquire and one to release, plus one
 * per second round: the script calls (FCALL or EVALSHA) beyond two a
 * cycle are its second rounds. */
static void w7(int transition, long max)
{
    flushall();
    lockcore_client *plain = client_new(0, 0), *fenced = client_new_opts(1, 0, transition);
    w7_cycles(plain, "warm", 0, 1000); /* connections, scripts loaded */
    w7_cycles(fenced, "warm", 0, 1000);
    flushall(); /* the warm-up's fences go; the nodes keep their scripts */
    double mem0[MAX_NODES];
    for (size_t i = 0; i < S.n_nodes; i++)
        mem0[i] = node_info(i, "memory", "used_memory:");
    static const long marks[] = {10000, 20000, 100000, 1000000};
    double cpu_plain = 0, cpu_fenced = 0, evalsha = 0;
    long done = 0;
    for (size_t m = 0; m < sizeof(marks) / sizeof(marks[0]) && marks[m] <= max; m++) {
        while (done < marks[m]) {
            long n = marks[m] - done < W7_CHUNK ? marks[m] - done : W7_CHUNK;
            for (int k = 0; k < 2; k++) {
                int f = (done / W7_CHUNK + k) % 2; /* which goes first turns every chunk */
                double c0 = servers_cpu_s(), e0 = f ? script_calls() : 0;
                w7_cycles(f ? fenced : plain, f ? "f" : "p", done, n);
                if (f)
                    evalsha += script_calls() - e0;
                (f ? &cpu_fenced : &cpu_plain)[0] += servers_cpu_s() - c0;
            }
            done += n;
        }
        double sum = 0, most = 0;
        for (size_t i = 0; i < S.n_nodes; i++) {
            double per = (node_info(i, "memory", "used_memory:") - mem0[i]) / (double)done;
            sum += per;
            most = per > most ? per : most;
        }
        double nodes = (double)S.n_nodes, pc = cpu_plain / nodes / (double)done * 1e6,
               fc = cpu_fenced / nodes / (double)done * 1e6;
        jbegin("w7", transition ? "transition" : "buckets", 1);
        jadd(",\"resources\":%ld,\"mem_bytes_per_resource\":%.1f,\"mem_bytes_per_resource_max_node\":%.1f",
             done, sum / nodes, most);
        jadd(",\"node_cpu_us_per_cycle_plain\":%.2f,\"node_cpu_us_per_cycle_fenced\":%.2f,\"cpu_ratio\":%.3f",
             pc, fc, pc > 0 ? fc / pc : 0);
        jadd(",\"round_two_rate\":%.5f,\"errors\":%ld", evalsha / nodes / (double)done - 2, w7_errors);
        jend();
    }
    lockcore_client_free(fenced);
    lockcore_client_free(plain);
}

/* Second rounds against clock skew: a client whose clock runs skew_us
 * ahead locks fresh resources as fast as it can in a thread of its own;
 * beside it, clients with the right clock lock fresh resources of their
 * own, and count the grants that took a second round (lockcore_lock.rounds).
 * Resources share 16,384 buckets, so a grant of the fast client in our
 * bucket within the skew makes our first proposal lose: about
 * 1 - exp(-R skew / 16384) of our grants, R its rate: measured with one
 * client, and with a new client for every grant (what a client remembers
 * of the fences it saw must not change it). */
struct w7_fast {
    int64_t skew_us;
    atomic_int stop;
    long grants;
    double secs;
};

static uint64_t w7_skewed_clock(void *arg)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (uint64_t)((int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000 + ((struct w7_fast *)arg)->skew_us);
}

static lockcore_client *w7_client(struct w7_fast *skewed)
{
    struct lockcore_options o;
    bench_options_init(&o);
    o.nodes = S.nodes;
    o.n_nodes = S.n_nodes;
    o.retry_count = 0;
    if (skewed != NULL) {
        o.clock_us = w7_skewed_clock;
        o.clock_arg = skewed;
    }
    return client_open(&o, 0);
}

static void *w7_fast_main(void *arg)
{
    struct w7_fast *w = arg;
    lockcore_client *c = w7_client(w);
    char res[64];
    uint64_t t0 = now_ns();
    for (long i = 0; !atomic_load(&w->stop); i++) {
        snprintf(res, sizeof(res), "w7s:fast:%lld:%ld", (long long)w->skew_us, i);
        struct lockcore_lock l;
        if (lockcore_acquire(c, res, &l) == 0) {
            lockcore_release(c, &l);
            w->grants++;
        }
    }
    w->secs = (double)(now_ns() - t0) / 1e9;
    lockcore_client_free(c);
    return NULL;
}

static void w7_skew(int64_t skew_us)
{
    flushall();
    struct w7_fast fast = {.skew_us = skew_us};
    pthread_t th;
    pthread_create(&th, NULL, w7_fast_main, &fast);
    lockcore_client *one = w7_client(NULL);
    long grants[2] = {0, 0}, second[2] = {0, 0};
    char res[64];
    uint64_t end = now_ns() + (uint64_t)(S.measure_s * 1e9);
    for (long i = 0; now_ns() < end; i++) {
        for (int fresh = 0; fresh < 2; fresh++) {
            lockcore_client *c = fresh ? w7_client(NULL) : one;
            snprintf(res, sizeof(res), "w7s:%d:%lld:%ld", fresh, (long long)skew_us, i);
            struct lockcore_lock l;
            if (lockcore_acquire(c, res, &l) == 0) {
                lockcore_release(c, &l);
                grants[fresh]++;
                second[fresh] += l.rounds > 1;
            }
            if (fresh)
                lockcore_client_free(c);
        }
    }
    atomic_store(&fast.stop, 1);
    pthread_join(th, NULL);
    lockcore_client_free(one);
    double rate = fast.secs > 0 ? (double)fast.grants / fast.secs : 0;
    jbegin("w7", "skew", 1);
    jadd(",\"skew_us\":%lld,\"fast_grants_per_s\":%.0f,\"predicted_without_lead\":%.5f", (long long)skew_us,
         rate, 1 - exp(-rate * (double)skew_us / 1e6 / 16384));
    jadd(",\"grants_new_clients\":%ld,\"round_two_new_clients\":%.5f", grants[1],
         grants[1] ? (double)second[1] / (double)grants[1] : 0);
    jadd(",\"grants_one_client\":%ld,\"round_two_one_client\":%.5f", grants[0],
         grants[0] ? (double)second[0] / (double)grants[0] : 0);
    jend();
}

/* ---- W5: 16 processes on one resource, waiting modes ---- */

#define W5_PROCS 16
#define W5_MAX 20000

struct w5_rec {
    uint64_t ask, grant, release; /* CLOCK_MONOTONIC ns, system-wide */
};

struct w5_shared {
    atomic_int ready;
    atomic_ullong start; /* ns: everyone begins here */
    uint64_t warm_end, end;
    unsigned n[W5_PROCS];
    struct w5_rec rec[W5_PROCS][W5_MAX];
};

/* Calls of every command on every node (INFO commandstats). */
static long long commands_total(void)
{
    long long total = 0;
    for (size_t i = 0; i < S.n_nodes; i++) {
        redisContext *ctx = node_connect(i);
        redisReply *r = redisCommand(ctx, "INFO commandstats");
        if (r != NULL && r->type == REDIS_REPLY_STRING)
            for (const char *p = strstr(r->str, ":calls="); p != NULL; p = strstr(p + 1, ":calls="))
                total += atoll(p + 7);
        freeReplyObject(r);
        redisFree(ctx);
    }
    /* The INFO commands themselves. */
    return total - (long long)S.n_nodes;
}

static lockcore_client *w5_client(int mode)
{
    struct lockcore_options o;
    bench_options_init(&o); /* default retry delays: what a user gets */
    o.nodes = S.nodes;
    o.n_nodes = S.n_nodes;
    o.retry_count = -1;
    o.wait_mode = mode;
    return client_open(&o, 1);
}

static void w5_child(struct w5_shared *sh, int p, int mode)
{
    lockcore_client *c = w5_client(mode);
    struct lockcore_node_status st[MAX_NODES];
    lockcore_status(c, "w5", st, MAX_NODES); /* connect before the start */
    atomic_fetch_add(&sh->ready, 1);
    while (atomic_load(&sh->start) == 0 || now_ns() < atomic_load(&sh->start))
        usleep(1000);
    while (now_ns() < sh->end) {
        struct w5_rec r;
        struct lockcore_lock l;
        r.ask = now_ns();
        if (lockcore_acquire(c, "w5", &l) < 0)
            continue;
        r.grant = now_ns();
        uint64_t hold_until = r.grant + 1000000;
        while (now_ns() < hold_until)
            usleep(100);
        r.release = now_ns();
        lockcore_release(c, &l);
        if (sh->n[p] < W5_MAX)
            sh->rec[p][sh->n[p]++] = r;
    }
    lockcore_client_free(c);
    _exit(0);
}

struct w5_grant {
    uint64_t grant, release, wait;
    int p;
};

static int w5_cmp(const void *a, const void *b)
{
    const struct w5_grant *x = a, *y = b;
    return x->grant < y->grant ? -1 : x->grant > y->grant;
}

static void w5(int mode)
{
    static const char *const names[] = {"poll", "notify", "fair"};
    flushall();
    /* Commands of one uncontended acquire + release, for the ratio. */
    lockcore_client *solo = w5_client(mode);
    struct lockcore_lock l;
    lockcore_acquire(solo, "w5-solo-warm", &l);
    lockcore_release(solo, &l);
    long long before = commands_total();
    for (int i = 0; i < 20; i++) {
        if (lockcore_acquire(solo, "w5-solo", &l) == 0)
            lockcore_release(solo, &l);
    }
    double solo_cmds = (double)(commands_total() - before) / 20.0;
    lockcore_client_free(solo);

    struct w5_shared *sh = mmap(NULL, sizeof(*sh), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (sh == MAP_FAILED) {
        perror("fencelock-bench: mmap");
        exit(2);
    }
    memset(sh, 0, sizeof(*sh));
    uint64_t start = now_ns() + 3000000000ULL; /* room for 16 processes to connect */
    sh->warm_end = start + (uint64_t)(S.warmup_s * 1e9);
    sh->end = sh->warm_end + (uint64_t)(S.measure_s * 1e9);
    pid_t pids[W5_PROCS];
    fflush(NULL);
    for (int p = 0; p < W5_PROCS; p++) {
        pids[p] = fork();
        if (pids[p] == 0)
            w5_child(sh, p, mode);
    }
    while (atomic_load(&sh->ready) < W5_PROCS && now_ns() < start)
        usleep(1000);
    atomic_store(&sh->start, start);
    while (now_ns() < sh->warm_end)
        usleep(1000);
    long long cmds0 = commands_total();
    while (now_ns() < sh->end)
        usleep(1000);
    long long cmds = commands_total() - cmds0;
    for (int p = 0; p < W5_PROCS; p++) {
        int status;
        waitpid(pids[p], &status, 0);
    }
    /* Grants in the measured window, in grant order. */
    size_t n = 0;
    struct w5_grant *g = malloc(sizeof(*g) * W5_PROCS * W5_MAX);
    unsigned per[W5_PROCS] = {0};
    for (int p = 0; p < W5_PROCS; p++)
        for (unsigned k = 0; k < sh->n[p]; k++) {
            struct w5_rec *r = &sh->rec[p][k];
            if (r->grant < sh->warm_end || r->grant >= sh->end)
                continue;
            g[n++] = (struct w5_grant){r->grant, r->release, r->grant - r->ask, p};
            per[p]++;
        }
    qsort(g, n, sizeof(*g), w5_cmp);
    /* A handoff: the lock passes to another process. The gap is measured
     * at handoffs only: a process that takes the lock back from itself
     * pays no wake-up. */
    struct samples gap = {0}, wait = {0};
    uint64_t longest = 0;
    size_t handoffs = 0;
    for (size_t i = 0; i < n; i++) {
        if (i > 0 && g[i].p != g[i - 1].p) {
            handoffs++;
            if (g[i].grant > g[i - 1].release)
                samples_add(&gap, g[i].grant - g[i - 1].release);
        }
        samples_add(&wait, g[i].wait);
        if (g[i].wait > longest)
            longest = g[i].wait;
    }
    unsigned mn = UINT32_MAX, mx = 0;
    for (int p = 0; p < W5_PROCS; p++) {
        mn = per[p] < mn ? per[p] : mn;
        mx = per[p] > mx ? per[p] : mx;
    }
    atomic_store(&ops_total, n);
    jbegin("w5", names[mode], 1);
    jadd(",\"procs\":%d,\"grants\":%zu,\"grants_per_s\":%.1f,\"handoffs_per_s\":%.1f,\"proc_min\":%u,\"proc_"
         "max\":%u"
         ",\"min_max_ratio\":%.3f,\"longest_wait_ms\":%.1f,\"commands_per_grant\":%.1f"
         ",\"solo_commands_per_cycle\":%.1f",
         W5_PROCS, n, (double)n / S.measure_s, (double)handoffs / S.measure_s, mn, mx,
         mx ? (double)mn / mx : 0, (double)longest / 1e6, n ? (double)cmds / (double)n : 0, solo_cmds);
    jpct("gap", &gap);
    jpct("wait", &wait);
    jend();
    samples_free(&gap);
    samples_free(&wait);
    free(g);
    munmap(sh, sizeof(*sh));
}

/* ---- main ---- */

static void usage(void)
{
    fprintf(stderr,
            "usage: fencelock-bench [--nodes host:port,...] [--workloads w1,...,w7] [--w7-max N]\n"
            "                       [--fencing off|on|both] [--modes shared,threads]\n"
            "                       [--quick] [--round N]\n"
            "                       [--storage-guard PATH] [--postgresql] [--wait poll|notify|fair]\n");
    exit(2);
}

int main(int argc, char **argv)
{
    char *nodes_arg = NULL;
    const char *workloads = "w1,w2,w3";
    const char *fencing = "both";
    const char *modes = "shared,threads";
    S.round = 1;
    S.wait_mode = -1;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--nodes") == 0 && i + 1 < argc)
            nodes_arg = strdup(argv[++i]);
        else if (strcmp(argv[i], "--workloads") == 0 && i + 1 < argc)
            workloads = argv[++i];
        else if (strcmp(argv[i], "--fencing") == 0 && i + 1 < argc)
            fencing = argv[++i];
        else if (strcmp(argv[i], "--modes") == 0 && i + 1 < argc)
            modes = argv[++i];
        else if (strcmp(argv[i], "--quick") == 0)
            S.quick = 1;
        else if (strcmp(argv[i], "--round") == 0 && i + 1 < argc)
            S.round = atoi(argv[++i]);
        else if (strcmp(argv[i], "--storage-guard") == 0 && i + 1 < argc)
            S.storage_guard = argv[++i];
        else if (strcmp(argv[i], "--postgresql") == 0)
            S.postgresql = 1;
        else if (strcmp(argv[i], "--w7-max") == 0 && i + 1 < argc)
            S.w7_max = atol(argv[++i]);
        else if (strcmp(argv[i], "--wait") == 0 && i + 1 < argc) {
            const char *m = argv[++i];
            S.wait_mode = strcmp(m, "poll") == 0     ? LOCKCORE_WAIT_POLL
                          : strcmp(m, "notify") == 0 ? LOCKCORE_WAIT_NOTIFY
                          : strcmp(m, "fair") == 0   ? LOCKCORE_WAIT_FAIR
                                                     : -2;
            if (S.wait_mode == -2)
                usage();
        } else
            usage();
    }
    for (int k = 1; k <= 7; k++) {
        char name[4];
        snprintf(name, sizeof(name), "w%d", k);
        S.w[k] = strstr(workloads, name) != NULL;
    }
    S.shared = strstr(modes, "shared") != NULL;
    S.threads = strstr(modes, "threads") != NULL;
    S.fencing[0] = strcmp(fencing, "on") != 0;
    S.fencing[1] = strcmp(fencing, "off") != 0;
    S.w1_warmup = S.quick ? 50 : 200;
    S.w1_cycles = S.quick ? 300 : 2000;
    S.warmup_s = S.quick ? 0.3 : 1.0;
    S.measure_s = S.quick ? 1.0 : 5.0;
    if (S.w7_max <= 0)
        S.w7_max = S.quick ? 20000 : 1000000;

    struct rh_cluster *cluster = NULL;
    if (nodes_arg != NULL) {
        for (char *save = NULL, *t = strtok_r(nodes_arg, ",", &save); t != NULL;
             t = strtok_r(NULL, ",", &save)) {
            if (S.n_nodes == MAX_NODES)
                usage();
            S.nodes[S.n_nodes++] = t;
        }
    } else {
        if (rh_cluster_start(5, NULL, &cluster) < 0) {
            fprintf(stderr, "fencelock-bench: cannot start redis-server\n");
            return 2;
        }
        for (int i = 0; i < 5; i++) {
            char a[64];
            snprintf(a, sizeof(a), "127.0.0.1:%d", rh_port(cluster, i));
            S.nodes[S.n_nodes++] = strdup(a);
        }
    }
    if (S.n_nodes == 0)
        usage();

    /* Fencing off and on run back to back for each workload, in an order
     * that alternates with the round, so that a change in the machine's
     * load falls on both alike. */
    int order[2] = {S.round % 2 ? 0 : 1, S.round % 2 ? 1 : 0};
#define BOTH(call)                                                                                           \
    for (int k = 0; k < 2; k++)                                                                              \
        if (S.fencing[order[k]])                                                                             \
            call(order[k]);
    if (S.w[1])
        BOTH(w1);
    if (S.w[2] && S.shared)
        BOTH(w2_shared);
    if (S.w[2] && S.threads)
        BOTH(w2_threads);
    if (S.w[3] && S.shared)
        BOTH(w3_shared);
    if (S.w[3] && S.threads)
        BOTH(w3_threads);
    if (S.w[4]) {
        if (S.storage_guard == NULL) {
            fprintf(stderr, "fencelock-bench: w4 needs --storage-guard PATH\n");
            return 2;
        }
        w4(0, 1, NULL, 0);
        w4(1, 1, NULL, 0);
        if (S.postgresql) {
            const char *url = w4_pg_url();
            /* Alternate the order with the round, so that the machine's
             * load falls on the plain and the fenced writes alike. */
            w4(0, 1, url, 1); /* also makes the tables */
            /* Each guarded form next to its plain one, the order turned
             * with the round. */
            int how[W4_SQL_COUNT] = {W4_SQL_TXN, W4_SQL_PLAIN_TXN, W4_SQL_PLAIN, W4_SQL_ONE};
            for (int k = 0; k < W4_SQL_COUNT; k++)
                w4_sql(how[S.round % 2 ? k : W4_SQL_COUNT - 1 - k]);
            for (int n = 1; n <= W4_INSTANCES_MAX; n *= 2) {
                w4(0, n, url, 0);
                w4(1, n, url, 0);
            }
            tk_pg_free(w4_pg);
            w4_pg = NULL;
        }
    }
    if (S.w[6])
        BOTH(w6);
#undef BOTH
    if (S.w[7]) {
        w7(0, S.w7_max);
        w7(1, S.w7_max / 10 < 10000 ? 10000 : S.w7_max / 10);
        static const int64_t skews[] = {1000, 10000, 100000, 1000000};
        for (size_t k = 0; k < sizeof(skews) / sizeof(skews[0]); k++)
            w7_skew(skews[k]);
    }
    if (S.w[5]) {
        w5(LOCKCORE_WAIT_POLL);
        w5(LOCKCORE_WAIT_NOTIFY);
        w5(LOCKCORE_WAIT_FAIR);
    }
    rh_cluster_free(cluster);
    return 0;
}
