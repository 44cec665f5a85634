/*
 * fencelockd's benchmark client (bench/fencelockd.sh runs it): lock +
 * unlock cycles over keep-alive HTTP/1.1 against fencelockd or against
 * etcd's own lock (its JSON gateway, /v3/lock/lock and /v3/lock/unlock with
 * a lease), the same cycles through the library (W1, and W2 with a client
 * per worker), and the cost of many long-polling waiters. One JSON line
 * per measurement on stdout. It measures; it checks nothing.
 *
 *   fencelockd-bench http fencelockd|etcd PORT CLIENTS SECONDS
 *   fencelockd-bench lib-w1 NODES CYCLES
 *   fencelockd-bench lib-w2 NODES WORKERS SECONDS
 *   fencelockd-bench waiters PORT PID NODES WAITERS RESOURCES SECONDS
 */
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <netinet/in.h>
#include <netinet/tcp.h>

#include <hiredis/hiredis.h>
#include <lockcore/lockcore.h>

static uint64_t now_ns(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (uint64_t)t.tv_sec * 1000000000u + (uint64_t)t.tv_nsec;
}

static void die(const char *what)
{
    fprintf(stderr, "fencelockd-bench: %s\n", what);
    exit(1);
}

/* ---- samples ---- */

struct samples {
    uint64_t *v;
    size_t n, cap;
};

static void add(struct samples *s, uint64_t x)
{
    if (s->n == s->cap) {
        s->cap = s->cap ? s->cap * 2 : 4096;
        s->v = realloc(s->v, s->cap * sizeof(*s->v));
        if (s->v == NULL)
            die("out of memory");
    }
    s->v[s->n++] = x;
}

static int cmp64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

/* Nearest-rank percentile in ms. */
static double pct(struct samples *s, double p)
{
    if (s->n == 0)
        return 0;
    qsort(s->v, s->n, sizeof(*s->v), cmp64);
    size_t k = (size_t)(p / 100.0 * (double)s->n + 0.999999);
    if (k < 1)
        k = 1;
    return (double)s->v[k - 1] / 1e6;
}

/* ---- a keep-alive HTTP/1.1 client ---- */

struct conn {
    int fd;
    uint16_t port;
    char buf[65536];
    size_t len; /* bytes in buf not yet consumed */
};

static int conn_open(struct conn *c, uint16_t port)
{
    c->port = port;
    c->len = 0;
    c->fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (c->fd < 0)
        return -errno;
    int one = 1;
    setsockopt(c->fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    struct sockaddr_in a = {
        .sin_family = AF_INET, .sin_port = htons(port), .sin_addr.s_addr = htonl(0x7f000001)};
    if (connect(c->fd, (struct sockaddr *)&a, sizeof(a)) != 0) {
        int e = errno;
        close(c->fd);
        return -e;
    }
    return 0;
}

/* One request; the answer's body into body (NUL-terminated). Returns the
 * status or a negative errno. */
static int call(struct conn *c, const char *method, const char *path, const char *json, char *body,
                size_t cap)
{
    char req[2048];
    size_t blen = json ? strlen(json) : 0;
    int n = snprintf(req, sizeof(req),
                     "%s %s HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
                     "Content-Length: %zu\r\n\r\n%s",
                     method, path, blen, json ? json : "");
    for (int off = 0; off < n;) {
        ssize_t w = write(c->fd, req + off, (size_t)(n - off));
        if (w <= 0)
            return -EIO;
        off += (int)w;
    }
    /* The head. */
    char *end;
    while ((end = memmem(c->buf, c->len, "\r\n\r\n", 4)) == NULL) {
        ssize_t r = read(c->fd, c->buf + c->len, sizeof(c->buf) - c->len);
        if (r <= 0)
            return -EIO;
        c->len += (size_t)r;
    }
    int status = 0;
    if (sscanf(c->buf, "HTTP/1.%*d %d", &status) != 1)
        return -EPROTO;
    size_t head = (size_t)(end - c->buf) + 4;
    size_t clen = 0;
    int chunked = 0;
    for (char *p = c->buf; p < end; p++) {
        if (strncasecmp(p, "\r\nContent-Length:", 17) == 0)
            clen = strtoull(p + 17, NULL, 10);
        if (strncasecmp(p, "\r\nTransfer-Encoding: chunked", 28) == 0)
            chunked = 1;
    }
    if (chunked) {
        /* Small answers: read until the last chunk, keep the first one. */
        while (memmem(c->buf + head, c->len - head, "\r\n0\r\n\r\n", 7) == NULL) {
            ssize_t r = read(c->fd, c->buf + c->len, sizeof(c->buf) - c->len);
            if (r <= 0)
                return -EIO;
            c->len += (size_t)r;
        }
        char *z = memmem(c->buf + head, c->len - head, "\r\n0\r\n\r\n", 7);
        size_t total = (size_t)(z - c->buf) + 7;
        char *data = strstr(c->buf + head, "\r\n");
        size_t dl = data ? (size_t)(z - data - 2) : 0;
        snprintf(body, cap, "%.*s", (int)dl, data ? data + 2 : "");
        memmove(c->buf, c->buf + total, c->len - total);
        c->len -= total;
        return status;
    }
    while (c->len < head + clen) {
        ssize_t r = read(c->fd, c->buf + c->len, sizeof(c->buf) - c->len);
        if (r <= 0)
            return -EIO;
        c->len += (size_t)r;
    }
    snprintf(body, cap, "%.*s", (int)clen, c->buf + head);
    memmove(c->buf, c->buf + head + clen, c->len - head - clen);
    c->len -= head + clen;
    return status;
}

/* The string value of "key":"..." in a JSON text, into out. */
static int field(const char *json, const char *key, char *out, size_t cap)
{
    char pat[64];
    snprintf(pat, sizeof(pat), "\"%s\":\"", key);
    const char *p = strstr(json, pat);
    if (p == NULL)
        return -1;
    p += strlen(pat);
    const char *q = strchr(p, '"');
    if (q == NULL || (size_t)(q - p) >= cap)
        return -1;
    memcpy(out, p, (size_t)(q - p));
    out[q - p] = '\0';
    return 0;
}

static void b64(const char *in, char *out)
{
    static const char t[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    size_t n = strlen(in), o = 0;
    for (size_t i = 0; i < n; i += 3) {
        unsigned v = (unsigned char)in[i] << 16;
        if (i + 1 < n)
            v |= (unsigned char)in[i + 1] << 8;
        if (i + 2 < n)
            v |= (unsigned char)in[i + 2];
        out[o++] = t[(v >> 18) & 63];
        out[o++] = t[(v >> 12) & 63];
        out[o++] = i + 1 < n ? t[(v >> 6) & 63] : '=';
        out[o++] = i + 2 < n ? t[v & 63] : '=';
    }
    out[o] = '\0';
}

/* ---- lock + unlock cycles over HTTP ---- */

struct worker {
    int id, etcd;
    uint16_t port;
    uint64_t until_ns, warm_ns;
    struct samples cycle;
    uint64_t cycles, errors;
    pthread_t t;
};

static int one_cycle(struct worker *w, struct conn *c, const char *lease, const char *name_b64, char *body)
{
    char path[512], json[512], id[256];
    if (!w->etcd) {
        snprintf(path, sizeof(path), "/v1/locks/bench:%d", w->id);
        if (call(c, "POST", path, "{\"ttl_ms\":10000}", body, 4096) != 200 ||
            field(body, "lock_id", id, sizeof(id)))
            return -1;
        snprintf(path, sizeof(path), "/v1/locks/bench:%d/%s", w->id, id);
        return call(c, "DELETE", path, NULL, body, 4096) == 200 ? 0 : -1;
    }
    snprintf(json, sizeof(json), "{\"name\":\"%s\",\"lease\":\"%s\"}", name_b64, lease);
    if (call(c, "POST", "/v3/lock/lock", json, body, 4096) != 200 || field(body, "key", id, sizeof(id)))
        return -1;
    snprintf(json, sizeof(json), "{\"key\":\"%s\"}", id);
    return call(c, "POST", "/v3/lock/unlock", json, body, 4096) == 200 ? 0 : -1;
}

static void *http_worker(void *arg)
{
    struct worker *w = arg;
    struct conn c;
    char body[4096], lease[64] = "", name[64], name_b64[128];
    if (conn_open(&c, w->port) != 0)
        die("cannot connect");
    snprintf(name, sizeof(name), "bench:%d", w->id);
    b64(name, name_b64);
    if (w->etcd) {
        /* One lease per client, for all its cycles (60 s, longer than a run). */
        if (call(&c, "POST", "/v3/lease/grant", "{\"TTL\":60}", body, sizeof(body)) != 200 ||
            field(body, "ID", lease, sizeof(lease)))
            die("etcd lease grant failed");
    }
    for (;;) {
        uint64_t t0 = now_ns();
        if (t0 >= w->until_ns)
            break;
        int rc = one_cycle(w, &c, lease, name_b64, body);
        uint64_t t1 = now_ns();
        if (t0 < w->warm_ns)
            continue;
        if (rc == 0) {
            w->cycles++;
            add(&w->cycle, t1 - t0);
        } else {
            w->errors++;
            close(c.fd);
            if (conn_open(&c, w->port) != 0)
                die("cannot reconnect");
        }
    }
    close(c.fd);
    return NULL;
}

static void http_bench(const char *target, uint16_t port, int clients, double seconds)
{
    struct worker *w = calloc((size_t)clients, sizeof(*w));
    uint64_t start = now_ns(), warm = start + 1000000000ull, until = warm + (uint64_t)(seconds * 1e9);
    for (int i = 0; i < clients; i++) {
        w[i] = (struct worker){
            .id = i, .etcd = strcmp(target, "etcd") == 0, .port = port, .until_ns = until, .warm_ns = warm};
        if (pthread_create(&w[i].t, NULL, http_worker, &w[i]) != 0)
            die("pthread_create");
    }
    struct samples all = {0};
    uint64_t cycles = 0, errors = 0;
    for (int i = 0; i < clients; i++) {
        pthread_join(w[i].t, NULL);
        cycles += w[i].cycles;
        errors += w[i].errors;
        for (size_t k = 0; k < w[i].cycle.n; k++)
            add(&all, w[i].cycle.v[k]);
        free(w[i].cycle.v);
    }
    printf("{\"bench\":\"http\",\"target\":\"%s\",\"clients\":%d,\"seconds\":%.1f,\"cycles\":%" PRIu64
           ",\"cycles_per_s\":%.1f,\"errors\":%" PRIu64 ",\"p50_ms\":%.3f,\"p99_ms\":%.3f}\n",
           target, clients, seconds, cycles, (double)cycles / seconds, errors, pct(&all, 50), pct(&all, 99));
    free(all.v);
    free(w);
}

/* ---- the library: W1 and W2 (a client per worker) ---- */

static lockcore_client *lib_client(const char *nodes_csv)
{
    const char *nodes[16];
    size_t n = 0;
    char *copy = strdup(nodes_csv);
    if (copy == NULL)
        die("out of memory");
    for (char *save = NULL, *t = strtok_r(copy, ",", &save); t && n < 16; t = strtok_r(NULL, ",", &save))
        nodes[n++] = t;
    struct lockcore_options o;
    lockcore_options_init(&o);
    o.nodes = nodes;
    o.n_nodes = n;
    o.retry_count = 0;
    lockcore_client *c = NULL;
    char err[256];
    if (lockcore_client_new(&o, &c, err, sizeof(err)) != 0)
        die(err);
    free(copy); /* lockcore copied the addresses */
    return c;
}

static void lib_w1(const char *nodes, int cycles)
{
    lockcore_client *c = lib_client(nodes);
    struct samples cyc = {0};
    uint64_t t0 = 0;
    for (int i = 0; i < 200 + cycles; i++) {
        if (i == 200)
            t0 = now_ns();
        char res[64];
        snprintf(res, sizeof(res), "w1:%d", i);
        struct lockcore_lock lk;
        uint64_t a = now_ns();
        if (lockcore_acquire(c, res, &lk) != 0 || lockcore_release(c, &lk) != 0)
            die("library cycle failed");
        if (i >= 200)
            add(&cyc, now_ns() - a);
    }
    double secs = (double)(now_ns() - t0) / 1e9;
    printf("{\"bench\":\"lib-w1\",\"cycles\":%d,\"cycles_per_s\":%.1f,\"p50_ms\":%.3f,\"p99_ms\":%.3f}\n",
           cycles, cycles / secs, pct(&cyc, 50), pct(&cyc, 99));
    free(cyc.v);
    lockcore_client_free(c);
}

struct lib_worker {
    const char *nodes;
    int id;
    uint64_t until_ns, warm_ns, cycles;
    pthread_t t;
};

static void *lib_w2_worker(void *arg)
{
    struct lib_worker *w = arg;
    lockcore_client *c = lib_client(w->nodes);
    char res[64];
    snprintf(res, sizeof(res), "w2:%d", w->id);
    for (uint64_t t; (t = now_ns()) < w->until_ns;) {
        struct lockcore_lock lk;
        if (lockcore_acquire(c, res, &lk) == 0 && lockcore_release(c, &lk) == 0 && t >= w->warm_ns)
            w->cycles++;
    }
    lockcore_client_free(c);
    return NULL;
}

static void lib_w2(const char *nodes, int workers, double seconds)
{
    struct lib_worker *w = calloc((size_t)workers, sizeof(*w));
    uint64_t warm = now_ns() + 1000000000ull, until = warm + (uint64_t)(seconds * 1e9);
    for (int i = 0; i < workers; i++) {
        w[i] = (struct lib_worker){.nodes = nodes, .id = i, .until_ns = until, .warm_ns = warm};
        pthread_create(&w[i].t, NULL, lib_w2_worker, &w[i]);
    }
    uint64_t cycles = 0;
    for (int i = 0; i < workers; i++) {
        pthread_join(w[i].t, NULL);
        cycles += w[i].cycles;
    }
    printf("{\"bench\":\"lib-w2\",\"workers\":%d,\"seconds\":%.1f,\"cycles_per_s\":%.1f}\n", workers, seconds,
           (double)cycles / seconds);
    free(w);
}

/* ---- many waiters ---- */

static long proc_rss_kib(int pid)
{
    char path[64], line[256];
    snprintf(path, sizeof(path), "/proc/%d/status", pid);
    FILE *f = fopen(path, "r");
    long kib = -1;
    while (f && fgets(line, sizeof(line), f))
        if (sscanf(line, "VmRSS: %ld kB", &kib) == 1)
            break;
    if (f)
        fclose(f);
    return kib;
}

static double proc_cpu_s(int pid)
{
    char path[64], buf[1024];
    snprintf(path, sizeof(path), "/proc/%d/stat", pid);
    FILE *f = fopen(path, "r");
    size_t n = f ? fread(buf, 1, sizeof(buf) - 1, f) : 0;
    if (f)
        fclose(f);
    buf[n] = '\0';
    char *p = strrchr(buf, ')');
    unsigned long ut = 0, st = 0;
    if (p == NULL || sscanf(p + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %lu %lu", &ut, &st) != 2)
        return -1;
    return (double)(ut + st) / (double)sysconf(_SC_CLK_TCK);
}

/* Commands every node has processed, summed (INFO stats). */
static long long node_commands(const char *nodes_csv)
{
    char *copy = strdup(nodes_csv);
    long long total = 0;
    for (char *save = NULL, *t = strtok_r(copy, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
        char *colon = strrchr(t, ':');
        *colon = '\0';
        redisContext *r = redisConnect(t, atoi(colon + 1));
        redisReply *rep = r && !r->err ? redisCommand(r, "INFO stats") : NULL;
        const char *p = rep && rep->str ? strstr(rep->str, "total_commands_processed:") : NULL;
        if (p)
            total += atoll(p + 25);
        if (rep)
            freeReplyObject(rep);
        if (r)
            redisFree(r);
    }
    free(copy);
    return total;
}

static void waiters_bench(uint16_t port, int pid, const char *nodes, int waiters, int resources,
                          double seconds)
{
    struct rlimit rl = {(rlim_t)waiters + 1024, (rlim_t)waiters + 1024};
    if (setrlimit(RLIMIT_NOFILE, &rl) != 0)
        die("cannot raise the descriptor limit");
    char body[4096], path[128];
    struct conn holder;
    if (conn_open(&holder, port) != 0)
        die("cannot connect");
    for (int r = 0; r < resources; r++) {
        snprintf(path, sizeof(path), "/v1/locks/held:%d", r);
        if (call(&holder, "POST", path, "{\"ttl_ms\":120000}", body, sizeof(body)) != 200)
            die("cannot take a held resource");
    }
    usleep(200000);
    long rss0 = proc_rss_kib(pid);
    double cpu0 = proc_cpu_s(pid);
    int *fds = calloc((size_t)waiters, sizeof(int));
    uint64_t t0 = now_ns();
    for (int i = 0; i < waiters; i++) {
        struct conn c;
        if (conn_open(&c, port) != 0)
            die("cannot connect a waiter");
        fds[i] = c.fd;
        char req[256];
        /* The wait outlasts the measurement by a little: the acquisitions
         * of closed requests run until it ends (docs/fencelockd.md, "Limits"). */
        char json[64];
        snprintf(json, sizeof(json), "{\"ttl_ms\":10000,\"wait_ms\":%d}", (int)(seconds * 1000) + 5000);
        int n = snprintf(req, sizeof(req),
                         "POST /v1/locks/held:%d HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                         "Content-Length: %zu\r\n\r\n%s",
                         i % resources, strlen(json), json);
        if (write(c.fd, req, (size_t)n) != n)
            die("write");
        if (i % 500 == 499)
            usleep(10000);
    }
    double setup_s = (double)(now_ns() - t0) / 1e9;
    sleep(2); /* every waiter has made its attempts and taken its place */
    long rss1 = proc_rss_kib(pid);
    double cpu1 = proc_cpu_s(pid);
    long long cmd0 = node_commands(nodes);
    usleep((useconds_t)(seconds * 1e6));
    long long cmd1 = node_commands(nodes);
    double cpu2 = proc_cpu_s(pid);
    long rss2 = proc_rss_kib(pid);
    /* INFO stats itself counts once per node per reading. */
    int n_nodes = 1;
    for (const char *p = nodes; *p; p++)
        n_nodes += *p == ',';
    printf("{\"bench\":\"waiters\",\"waiters\":%d,\"resources\":%d,\"setup_s\":%.2f,\"rss_kib_before\":%ld,"
           "\"rss_kib_waiting\":%ld,\"rss_kib_after\":%ld,\"rss_bytes_per_waiter\":%.0f,\"cpu_s_setup\":%.2f,"
           "\"cpu_s_per_waiter_setup_us\":%.1f,\"idle_seconds\":%.1f,\"cpu_s_idle\":%.3f,"
           "\"node_commands_idle\":%lld,\"node_commands_per_s\":%.1f}\n",
           waiters, resources, setup_s, rss0, rss1, rss2, (double)(rss1 - rss0) * 1024.0 / waiters,
           cpu1 - cpu0, (cpu1 - cpu0) * 1e6 / waiters, seconds, cpu2 - cpu1, cmd1 - cmd0 - n_nodes,
           (double)(cmd1 - cmd0 - n_nodes) / seconds);
    for (int i = 0; i < waiters; i++)
        close(fds[i]);
    free(fds);
    close(holder.fd);
    /* Let the abandoned acquisitions end before whatever runs next. */
    sleep(7);
}

int main(int argc, char **argv)
{
    signal(SIGPIPE, SIG_IGN);
    if (argc == 6 && strcmp(argv[1], "http") == 0)
        http_bench(argv[2], (uint16_t)atoi(argv[3]), atoi(argv[4]), atof(argv[5]));
    else if (argc == 4 && strcmp(argv[1], "lib-w1") == 0)
        lib_w1(argv[2], atoi(argv[3]));
    else if (argc == 5 && strcmp(argv[1], "lib-w2") == 0)
        lib_w2(argv[2], atoi(argv[3]), atof(argv[4]));
    else if (argc == 8 && strcmp(argv[1], "waiters") == 0)
        waiters_bench((uint16_t)atoi(argv[2]), atoi(argv[3]), argv[4], atoi(argv[5]), atoi(argv[6]),
                      atof(argv[7]));
    else
        die("usage: see the top of bench/fencelockd-bench.c");
    return 0;
}
