/*
 * fencelockd over HTTP against real redis-server nodes: the lock
 * operations of every kind, long polls, a waiter that hangs up, exclusion
 * with the library, two instances, a lock lost and its late write refused
 * by storage-guard, nodes down and back, and SIGTERM.
 */
#include <errno.h>
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <netinet/in.h>

#include <cmocka.h>
#include <lockcore/lockcore.h>

#include "fld_daemon.h"

static lockcore_client *lib_client(struct fld_fx *f, uint64_t ttl_ms)
{
    const char *nodes[3];
    char buf[3][64];
    for (int i = 0; i < 3; i++) {
        snprintf(buf[i], sizeof(buf[i]), "127.0.0.1:%d", rh_port(f->rc, i));
        nodes[i] = buf[i];
    }
    struct lockcore_options o;
    lockcore_options_init(&o);
    o.nodes = nodes;
    o.n_nodes = 3;
    o.ttl_ms = ttl_ms;
    o.retry_count = 0;
    lockcore_client *c = NULL;
    char err[256];
    assert_int_equal(lockcore_client_new(&o, &c, err, sizeof(err)), 0);
    return c;
}

static const char *str(const struct hc_response *r, const char *field)
{
    const char *s = r->json ? json_string_value(json_object_get(r->json, field)) : NULL;
    return s ? s : "";
}

static void http_acquire_extend_release_status(void **state)
{
    struct fld_fx *f = *state;
    struct fld *d = &f->d;
    struct hc_response r = {0};
    fld_call(d, "POST", "/v1/locks/invoice%3A42", "{\"ttl_ms\":5000}", NULL, &r);
    assert_int_equal(r.status, 200);
    char id[64], path[256], ref[32];
    snprintf(id, sizeof(id), "%s", str(&r, "lock_id"));
    snprintf(ref, sizeof(ref), "%s", str(&r, "ref"));
    assert_int_equal(strlen(id), LOCKCORE_ID_LEN);
    assert_int_equal(strlen(ref), 16);
    assert_string_equal(str(&r, "resource"), "invoice:42");
    long long token = fld_int(&r, "token");
    assert_true(token > 0);
    assert_true(fld_int(&r, "validity_ms") > 4000 && fld_int(&r, "validity_ms") <= 5000);
    hc_response_clear(&r);

    /* Held: a second acquisition is refused and told who holds it. */
    fld_call(d, "POST", "/v1/locks/invoice%3A42", NULL, NULL, &r);
    assert_int_equal(r.status, 409);
    assert_string_equal(str(&r, "error"), "locked");
    assert_string_equal(str(&r, "holder_ref"), ref);
    assert_null(strstr(r.body, id)); /* the id releases it: never shown */
    hc_response_clear(&r);

    fld_call(d, "GET", "/v1/locks/invoice%3A42", NULL, NULL, &r);
    assert_int_equal(r.status, 200);
    assert_true(json_is_true(json_object_get(r.json, "held")));
    assert_string_equal(str(&r, "holder_ref"), ref);
    assert_true(json_is_null(json_object_get(r.json, "holder_client"))); /* no auth file */
    assert_null(strstr(r.body, id));
    assert_int_equal(fld_int(&r, "fence"), token);
    assert_true(fld_int(&r, "ttl_ms_left") > 0);
    hc_response_clear(&r);

    snprintf(path, sizeof(path), "/v1/locks/invoice%%3A42/%s/extend", id);
    fld_call(d, "POST", path, "{\"ttl_ms\":20000}", NULL, &r);
    assert_int_equal(r.status, 200);
    assert_null(json_object_get(r.json, "token")); /* the acquisition's token stays */
    assert_true(fld_int(&r, "validity_ms") > 15000);
    hc_response_clear(&r);

    snprintf(path, sizeof(path), "/v1/locks/invoice%%3A42/%s", id);
    fld_call(d, "DELETE", path, NULL, NULL, &r);
    assert_int_equal(r.status, 200);
    assert_int_equal(fld_int(&r, "nodes_released"), 3);
    hc_response_clear(&r);

    fld_call(d, "GET", "/v1/locks/invoice%3A42", NULL, NULL, &r);
    assert_true(json_is_false(json_object_get(r.json, "held")));
    hc_response_clear(&r);

    /* Extending a released lock: it is lost. */
    snprintf(path, sizeof(path), "/v1/locks/invoice%%3A42/%s/extend", id);
    fld_call(d, "POST", path, NULL, NULL, &r);
    assert_int_equal(r.status, 409);
    assert_string_equal(str(&r, "error"), "lost");
    hc_response_clear(&r);
}

/* Release through the lock's own link: the kind travels in it. */
static void release_link(struct fld *d, struct hc_response *granted)
{
    json_t *links = json_object_get(granted->json, "links");
    const char *rel = json_string_value(json_object_get(links, "release"));
    assert_non_null(rel);
    struct hc_response r = {0};
    fld_call(d, "DELETE", rel, NULL, NULL, &r);
    assert_int_equal(r.status, 200);
    assert_true(fld_int(&r, "nodes_released") >= 2);
    hc_response_clear(&r);
}

static void http_every_kind(void **state)
{
    struct fld_fx *f = *state;
    struct fld *d = &f->d;
    struct hc_response a = {0}, b = {0}, c = {0};

    /* A semaphore of 2 permits. */
    const char *sem = "{\"kind\":\"semaphore\",\"permits\":2}";
    fld_call(d, "POST", "/v1/locks/pool", sem, NULL, &a);
    fld_call(d, "POST", "/v1/locks/pool", sem, NULL, &b);
    fld_call(d, "POST", "/v1/locks/pool", sem, NULL, &c);
    assert_int_equal(a.status, 200);
    assert_int_equal(b.status, 200);
    assert_int_equal(c.status, 409);
    assert_string_equal(str(&a, "kind"), "permit");
    assert_string_not_equal(str(&a, "resource"), str(&b, "resource"));
    hc_response_clear(&c);
    fld_call(d, "GET", "/v1/locks/pool?kind=semaphore&permits=2", NULL, NULL, &c);
    assert_int_equal(c.status, 200);
    assert_int_equal(fld_int(&c, "held"), 2);
    hc_response_clear(&c);
    release_link(d, &a);
    release_link(d, &b);
    hc_response_clear(&a);
    hc_response_clear(&b);

    /* Several resources at once exclude a plain lock of any of them. */
    fld_call(d, "POST", "/v1/locks", "{\"resources\":[\"acct:alice\",\"acct:bob\"]}", NULL, &a);
    assert_int_equal(a.status, 200);
    assert_string_equal(str(&a, "kind"), "multi");
    fld_call(d, "POST", "/v1/locks/acct%3Abob", NULL, NULL, &b);
    assert_int_equal(b.status, 409);
    hc_response_clear(&b);
    release_link(d, &a);
    hc_response_clear(&a);
    fld_call(d, "POST", "/v1/locks/acct%3Abob", NULL, NULL, &b);
    assert_int_equal(b.status, 200);
    release_link(d, &b);
    hc_response_clear(&b);

    /* Read-write: two readers, no writer while they read. */
    fld_call(d, "POST", "/v1/locks/catalog", "{\"kind\":\"read\"}", NULL, &a);
    fld_call(d, "POST", "/v1/locks/catalog", "{\"kind\":\"read\"}", NULL, &b);
    fld_call(d, "POST", "/v1/locks/catalog", "{\"kind\":\"write\"}", NULL, &c);
    assert_int_equal(a.status, 200);
    assert_int_equal(b.status, 200);
    assert_int_equal(c.status, 409);
    hc_response_clear(&c);
    fld_call(d, "GET", "/v1/locks/catalog?kind=rw", NULL, NULL, &c);
    assert_int_equal(fld_int(&c, "readers"), 2);
    hc_response_clear(&c);
    release_link(d, &a);
    release_link(d, &b);
    hc_response_clear(&a);
    hc_response_clear(&b);
    /* The writer's intent lasts its TTL; a writer with a wait gets in. */
    fld_call(d, "POST", "/v1/locks/catalog", "{\"kind\":\"write\",\"wait_ms\":15000}", NULL, &c);
    assert_int_equal(c.status, 200);
    assert_string_equal(str(&c, "kind"), "write");
    release_link(d, &c);
    hc_response_clear(&c);

    /* Reentrant: a re-entry names a hold, keeps the token, gets an id of
     * its own; the last release frees the resource. */
    fld_call(d, "POST", "/v1/locks/doc%3A7", "{\"kind\":\"reentrant\"}", NULL, &a);
    assert_int_equal(a.status, 200);
    char body[128];
    snprintf(body, sizeof(body), "{\"kind\":\"reentrant\",\"lock_id\":\"%s\"}", str(&a, "lock_id"));
    fld_call(d, "POST", "/v1/locks/doc%3A7", body, NULL, &b);
    assert_int_equal(b.status, 200);
    assert_int_equal(fld_int(&b, "token"), fld_int(&a, "token"));
    assert_string_not_equal(str(&b, "lock_id"), str(&a, "lock_id"));
    fld_call(d, "GET", "/v1/locks/doc%3A7?kind=reentrant", NULL, NULL, &c);
    assert_int_equal(fld_int(&c, "holds"), 2);
    hc_response_clear(&c);
    release_link(d, &b);
    fld_call(d, "POST", "/v1/locks/doc%3A7", NULL, NULL, &c);
    assert_int_equal(c.status, 409); /* one hold left */
    hc_response_clear(&c);
    release_link(d, &a);
    fld_call(d, "POST", "/v1/locks/doc%3A7", NULL, NULL, &c);
    assert_int_equal(c.status, 200);
    release_link(d, &c);
    hc_response_clear(&a);
    hc_response_clear(&b);
    hc_response_clear(&c);
}

struct waiter {
    const struct fld *d;
    const char *path, *body;
    struct hc_response r;
    long long answered_ms;
};

static void *wait_thread(void *arg)
{
    struct waiter *w = arg;
    if (hc_request(w->d->port, "POST", w->path, "Content-Type: application/json\r\n", w->body,
                   strlen(w->body), &w->r) != 0)
        w->r.status = -1;
    w->answered_ms = hp_now_ms();
    return NULL;
}

/* A metric's value from /metrics (its sample line, not its HELP), or -1. */
static long long metric(const struct fld *d, const char *name)
{
    struct hc_response r = {0};
    fld_call(d, "GET", "/metrics", NULL, NULL, &r);
    char line[256];
    snprintf(line, sizeof(line), "\n%s ", name);
    const char *p = r.body ? strstr(r.body, line) : NULL;
    long long v = p != NULL ? atoll(p + strlen(line)) : -1;
    hc_response_clear(&r);
    return v;
}

static void http_long_poll_granted_on_release(void **state)
{
    struct fld_fx *f = *state;
    struct fld *d = &f->d;
    char id[64], path[256];
    assert_int_equal(fld_acquire(d, "queue", "{\"ttl_ms\":30000}", id, sizeof(id), NULL), 200);
    struct waiter w = {
        .d = d, .path = "/v1/locks/queue", .body = "{\"ttl_ms\":5000,\"wait_ms\":20000,\"wait\":\"fair\"}"};
    pthread_t t;
    assert_int_equal(pthread_create(&t, NULL, wait_thread, &w), 0);
    /* It waits: counted, unanswered. */
    long long deadline = hp_now_ms() + 3000;
    while (metric(d, "fencelockd_waiters") != 1 && hp_now_ms() < deadline)
        hp_sleep_ms(20);
    assert_int_equal(metric(d, "fencelockd_waiters"), 1);
    hp_sleep_ms(300);
    assert_int_equal(w.answered_ms, 0);
    snprintf(path, sizeof(path), "/v1/locks/queue/%s", id);
    long long released = hp_now_ms();
    fld_expect(d, "DELETE", path, NULL, 200, NULL, NULL, 0);
    pthread_join(t, NULL);
    assert_int_equal(w.r.status, 200);
    /* Told by the release, not by its TTL (30 s) nor a poll. */
    assert_true(w.answered_ms - released < 1000);
    assert_string_not_equal(str(&w.r, "lock_id"), id);
    hc_response_clear(&w.r);
    assert_int_equal(metric(d, "fencelockd_waiters"), 0);

    /* A wait that runs out is answered 409 with the holder. */
    assert_int_equal(fld_acquire(d, "queue2", "{\"ttl_ms\":30000}", id, sizeof(id), NULL), 200);
    struct hc_response r = {0};
    long long t0 = hp_now_ms();
    fld_call(d, "POST", "/v1/locks/queue2", "{\"wait_ms\":400}", NULL, &r);
    assert_int_equal(r.status, 409);
    assert_int_equal(strlen(str(&r, "holder_ref")), 16);
    assert_null(strstr(r.body, id));
    assert_true(hp_now_ms() - t0 >= 350);
    hc_response_clear(&r);
}

/* Connect to the server and send an acquisition that waits; the socket is
 * returned, its answer unread. */
static int raw_waiter(const struct fld *d, const char *resource)
{
    int s = socket(AF_INET, SOCK_STREAM, 0);
    assert_true(s >= 0);
    struct sockaddr_in a = {
        .sin_family = AF_INET, .sin_port = htons(d->port), .sin_addr.s_addr = htonl(0x7f000001)};
    assert_int_equal(connect(s, (struct sockaddr *)&a, sizeof(a)), 0);
    char req[512];
    const char *body = "{\"wait_ms\":30000}";
    int n = snprintf(req, sizeof(req),
                     "POST /v1/locks/%s HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                     "Content-Length: %zu\r\n\r\n%s",
                     resource, strlen(body), body);
    assert_int_equal(write(s, req, (size_t)n), n);
    return s;
}

static void http_waiter_that_hangs_up_leaves(void **state)
{
    struct fld_fx *f = *state;
    struct fld *d = &f->d;
    char id[64], path[256];
    assert_int_equal(fld_acquire(d, "gone", "{\"ttl_ms\":30000}", id, sizeof(id), NULL), 200);
    int s = raw_waiter(d, "gone");
    long long deadline = hp_now_ms() + 3000;
    while (metric(d, "fencelockd_waiters") != 1 && hp_now_ms() < deadline)
        hp_sleep_ms(20);
    assert_int_equal(metric(d, "fencelockd_waiters"), 1);
    close(s); /* the client goes away */
    deadline = hp_now_ms() + 3000;
    while (metric(d, "fencelockd_waiters") != 0 && hp_now_ms() < deadline)
        hp_sleep_ms(20);
    assert_int_equal(metric(d, "fencelockd_waiters"), 0);
    /* Its acquisition is canceled, not left to wait: it is counted as
     * abandoned now, and its place in the nodes' queues is gone. */
    deadline = hp_now_ms() + 3000;
    while (metric(d, "fencelockd_acquisitions_total{kind=\"plain\",outcome=\"abandoned\"}") != 1 &&
           hp_now_ms() < deadline)
        hp_sleep_ms(20);
    assert_int_equal(metric(d, "fencelockd_acquisitions_total{kind=\"plain\",outcome=\"abandoned\"}"), 1);
    int queued = -1;
    deadline = hp_now_ms() + 3000;
    while (queued != 0 && hp_now_ms() < deadline) {
        queued = 0;
        for (int i = 0; i < rh_size(f->rc); i++) {
            redisReply *r = rh_command(f->rc, i, "ZCARD {gone}:waiters");
            queued += r != NULL && r->type == REDIS_REPLY_INTEGER ? (int)r->integer : 1;
            if (r)
                freeReplyObject(r);
        }
        if (queued != 0)
            hp_sleep_ms(20);
    }
    assert_int_equal(queued, 0);
    /* The holder releases: nobody is left to hold it, and nothing is kept
     * for the one that went away, so a newcomer gets it at once. */
    snprintf(path, sizeof(path), "/v1/locks/gone/%s", id);
    fld_expect(d, "DELETE", path, NULL, 200, NULL, NULL, 0);
    assert_int_equal(fld_acquire(d, "gone", "{\"ttl_ms\":5000}", id, sizeof(id), NULL), 200);
}

static void *status_thread(void *arg)
{
    const struct fld *d = arg;
    struct hc_response r = {0};
    hc_get(d->port, "/v1/locks/some-other-resource-with-a-long-name-to-fill-the-stack", &r);
    hc_response_clear(&r);
    return NULL;
}

struct multi_call {
    const struct fld *d;
    struct rh_cluster *rc;
    int i, wrong;
};

/* A multi-resource acquisition with names of its own: the answer names
 * them, and each holds the lock id on a majority. */
static void *multi_thread(void *arg)
{
    struct multi_call *m = arg;
    char names[4][32], body[256];
    int n = 1 + m->i % 4;
    int len = snprintf(body, sizeof(body), "{\"ttl_ms\":20000,\"resources\":[");
    for (int k = 0; k < n; k++) {
        snprintf(names[k], sizeof(names[k]), "mt%d-%d", m->i, k);
        len += snprintf(body + len, sizeof(body) - (size_t)len, "%s\"%s\"", k ? "," : "", names[k]);
    }
    snprintf(body + len, sizeof(body) - (size_t)len, "]}");
    struct hc_response r = {0};
    if (hc_request(m->d->port, "POST", "/v1/locks", "", body, strlen(body), &r) != 0 || r.status != 200) {
        m->wrong = 1;
        hc_response_clear(&r);
        return NULL;
    }
    json_t *got = json_object_get(r.json, "resources");
    const char *id = json_string_value(json_object_get(r.json, "lock_id"));
    if (json_array_size(got) != (size_t)n)
        m->wrong = 1;
    for (int k = 0; k < n && !m->wrong; k++)
        if (strcmp(json_string_value(json_array_get(got, (size_t)k)), names[k]) != 0)
            m->wrong = 1;
    char rel[512];
    snprintf(rel, sizeof(rel), "%s",
             json_string_value(json_object_get(json_object_get(r.json, "links"), "release")));
    char idc[64];
    snprintf(idc, sizeof(idc), "%s", id ? id : "");
    hc_response_clear(&r);
    m->wrong |= idc[0] == '\0';
    /* The keys: read with a connection of this thread's own. */
    for (int k = 0; k < n && !m->wrong; k++) {
        unsigned held = 0;
        for (int node = 0; node < rh_size(m->rc); node++) {
            redisContext *ctx = redisConnect("127.0.0.1", rh_port(m->rc, node));
            redisReply *g = ctx && !ctx->err ? redisCommand(ctx, "GET %s", names[k]) : NULL;
            held += g != NULL && g->type == REDIS_REPLY_STRING && strcmp(g->str, idc) == 0;
            if (g)
                freeReplyObject(g);
            if (ctx)
                redisFree(ctx);
        }
        m->wrong |= held < 2;
    }
    if (hc_request(m->d->port, "DELETE", rel, "", NULL, 0, &r) != 0 || r.status != 200)
        m->wrong = 1;
    hc_response_clear(&r);
    return NULL;
}

/* Many multi-resource acquisitions at once, with other requests on the
 * serving threads: each locks exactly its own names (its request's names
 * once lived on a serving thread's stack only). */
static void http_multi_names_are_the_request_s(void **state)
{
    struct fld_fx *f = *state;
    enum { N = 40 };
    struct multi_call m[N];
    pthread_t t[N], g[N];
    for (int i = 0; i < N; i++) {
        m[i] = (struct multi_call){.d = &f->d, .rc = f->rc, .i = i};
        assert_int_equal(pthread_create(&t[i], NULL, multi_thread, &m[i]), 0);
        assert_int_equal(pthread_create(&g[i], NULL, status_thread, &f->d), 0);
    }
    int wrong = 0;
    for (int i = 0; i < N; i++) {
        pthread_join(t[i], NULL);
        pthread_join(g[i], NULL);
        wrong += m[i].wrong;
    }
    assert_int_equal(wrong, 0);
}

/* With several lock loops, fair waiters of one resource (all on its
 * loop, whatever thread served them) are granted in the order they came,
 * each released at once, and resources of other loops are served
 * meanwhile. */
static void http_loops_keep_one_resource_s_waiters_in_order(void **state)
{
    struct fld_fx *f = *state;
    struct fld *d = &f->d;
    const char *args[] = {"--loops", "4", "--threads", "4", NULL};
    fld_start(d, f->nodes, args);
    char id[64], path[256];
    assert_int_equal(fld_acquire(d, "loops", "{\"ttl_ms\":30000}", id, sizeof(id), NULL), 200);
    enum { N = 6 };
    struct waiter w[N];
    pthread_t t[N];
    int started = 0, in_line = 1;
    for (int i = 0; i < N && in_line; i++) {
        w[i] = (struct waiter){.d = d,
                               .path = "/v1/locks/loops",
                               .body = "{\"ttl_ms\":5000,\"wait_ms\":20000,\"wait\":\"fair\"}"};
        if (pthread_create(&t[i], NULL, wait_thread, &w[i]) != 0)
            break;
        started++;
        long long deadline = hp_now_ms() + 3000;
        while (metric(d, "fencelockd_waiters") != i + 1 && hp_now_ms() < deadline)
            hp_sleep_ms(5);
        in_line = metric(d, "fencelockd_waiters") == i + 1;
        hp_sleep_ms(20); /* in line on the nodes too */
    }
    /* Other resources, on other loops, are served while they wait. */
    int others = 0;
    for (int i = 0; i < 8; i++) {
        char res[32], other[64];
        snprintf(res, sizeof(res), "other%d", i);
        others += fld_acquire(d, res, NULL, other, sizeof(other), NULL) == 200;
    }
    snprintf(path, sizeof(path), "/v1/locks/loops/%s", id);
    struct hc_response r = {0};
    fld_call(d, "DELETE", path, NULL, NULL, &r);
    int released = r.status == 200;
    hc_response_clear(&r);
    /* Each grant is released at once, in the order granted: every thread
     * is joined before anything is asserted (they write into w). */
    long long last_token = 0;
    int in_order = 1, granted = 0;
    for (int k = 0; k < started; k++) {
        pthread_join(t[k], NULL);
        for (int j = k + 1; j < started; j++)
            in_order &= w[j].answered_ms == 0; /* nobody jumped the line */
        if (w[k].r.status == 200) {
            granted++;
            long long token = fld_int(&w[k].r, "token");
            in_order &= token > last_token;
            last_token = token;
            const char *rel =
                json_string_value(json_object_get(json_object_get(w[k].r.json, "links"), "release"));
            fld_call(d, "DELETE", rel, NULL, NULL, &r);
            if (r.status != 200)
                fprintf(stderr, "release %d: %d %s\n", k, r.status, r.body ? r.body : "");
            released &= r.status == 200;
            hc_response_clear(&r);
        }
        hc_response_clear(&w[k].r);
    }
    assert_int_equal(started, N);
    assert_true(in_line);
    assert_int_equal(others, 8);
    assert_true(released);
    assert_int_equal(granted, N);
    assert_true(in_order);
}

static void http_excludes_the_library(void **state)
{
    struct fld_fx *f = *state;
    struct fld *d = &f->d;
    lockcore_client *c = lib_client(f, 10000);
    struct lockcore_lock lk;
    /* The library holds: fencelockd is refused and names the library's id. */
    assert_int_equal(lockcore_acquire(c, "shared", &lk), 0);
    struct hc_response r = {0};
    fld_call(d, "POST", "/v1/locks/shared", NULL, NULL, &r);
    assert_int_equal(r.status, 409);
    assert_int_equal(strlen(str(&r, "holder_ref")), 16);
    assert_null(strstr(r.body, lk.id));
    hc_response_clear(&r);
    /* fencelockd releases the library's lock by its id: the same keys. */
    char path[256];
    snprintf(path, sizeof(path), "/v1/locks/shared/%s", lk.id);
    fld_expect(d, "DELETE", path, NULL, 200, NULL, NULL, 0);
    /* fencelockd holds: the library is refused, and its token is above the
     * library's (one fence per resource). */
    char id[64];
    unsigned long long token = 0;
    assert_int_equal(fld_acquire(d, "shared", NULL, id, sizeof(id), &token), 200);
    assert_true(token > lk.token);
    struct lockcore_lock lk2;
    assert_int_equal(lockcore_acquire(c, "shared", &lk2), LOCKCORE_ELOCKED);
    /* The library extends and releases fencelockd's lock by its id. */
    struct lockcore_lock from;
    assert_int_equal(lockcore_lock_from_id(c, "shared", id, &from), 0);
    assert_int_equal(lockcore_extend(c, &from, 5000), 0);
    assert_int_equal(lockcore_release(c, &from), 0);
    assert_int_equal(lockcore_acquire(c, "shared", &lk2), 0);
    assert_true(lk2.token > token);
    lockcore_release(c, &lk2);
    lockcore_client_free(c);
}

static void http_two_instances_share_locks(void **state)
{
    struct fld_fx *f = *state;
    struct fld b;
    fld_start(&b, f->nodes, NULL);
    char id[64], path[256];
    assert_int_equal(fld_acquire(&f->d, "both", "{\"ttl_ms\":3000}", id, sizeof(id), NULL), 200);
    assert_int_equal(fld_acquire(&b, "both", NULL, path, sizeof(path), NULL), 409);
    snprintf(path, sizeof(path), "/v1/locks/both/%s/extend", id);
    struct hc_response r = {0};
    fld_call(&b, "POST", path, "{\"ttl_ms\":20000}", NULL, &r);
    assert_int_equal(r.status, 200);
    assert_true(fld_int(&r, "validity_ms") > 15000);
    hc_response_clear(&r);
    snprintf(path, sizeof(path), "/v1/locks/both/%s", id);
    fld_expect(&b, "DELETE", path, NULL, 200, NULL, NULL, 0);
    assert_int_equal(fld_acquire(&f->d, "both", NULL, id, sizeof(id), NULL), 200);
    fld_destroy(&b);
}

/* Old fence keys ("{resource}:fence", the layout before fence buckets)
 * on the nodes holding value v. */
static int old_fence_keys(struct fld_fx *f, const char *resource, unsigned long long v)
{
    int n = 0;
    for (int i = 0; i < rh_size(f->rc); i++) {
        redisReply *r = rh_command(f->rc, i, "GET {%s}:fence", resource);
        n += r != NULL && r->type == REDIS_REPLY_STRING && strtoull(r->str, NULL, 10) == v;
        if (r)
            freeReplyObject(r);
    }
    return n;
}

/* During a rolling upgrade from the layout before fence buckets, clients
 * of that layout read only a resource's own fence key: fencelockd in
 * transition mode (--fence-transition, or the environment, as the
 * fencelock command reads it) writes it with every token, else deletes it
 * (an old client would then go back). */
static void http_fence_transition_writes_old_fence_keys(void **state)
{
    struct fld_fx *f = *state;
    unsigned long long token = 0;
    char id[64];
    assert_int_equal(fld_acquire(&f->d, "upgrading", NULL, id, sizeof(id), &token), 200);
    assert_int_equal(old_fence_keys(f, "upgrading", token), 0);
    struct fld b;
    const char *args[] = {"--fence-transition", NULL};
    fld_start(&b, f->nodes, args);
    char path[256];
    snprintf(path, sizeof(path), "/v1/locks/upgrading/%s", id);
    fld_expect(&b, "DELETE", path, NULL, 200, NULL, NULL, 0);
    assert_int_equal(fld_acquire(&b, "upgrading", NULL, id, sizeof(id), &token), 200);
    assert_true(old_fence_keys(f, "upgrading", token) >= 2);
    snprintf(path, sizeof(path), "/v1/locks/upgrading/%s", id);
    fld_expect(&b, "DELETE", path, NULL, 200, NULL, NULL, 0);
    fld_destroy(&b);
    /* A bad value in the environment is refused at start-up. */
    setenv("FENCELOCK_FENCE_TRANSITION", "yes", 1);
    char nodes_arg[600];
    snprintf(nodes_arg, sizeof(nodes_arg), "%s", f->nodes);
    const char *exe = getenv("FLD_EXE") ? getenv("FLD_EXE") : "fencelockd";
    char *const argv[] = {(char *)exe, "--nodes", nodes_arg, "--listen", "127.0.0.1:0", NULL};
    char log[320];
    snprintf(log, sizeof(log), "%s/bad-env.log", f->d.dir);
    pid_t pid = hp_spawn(argv, NULL, log);
    unsetenv("FENCELOCK_FENCE_TRANSITION");
    int st = 0;
    assert_int_equal(hp_wait(pid, 5000, &st), 0);
    assert_true(WIFEXITED(st) && WEXITSTATUS(st) == 2);
}

/* A PUT to storage-guard with a token; returns the status. */
static int sg_put(uint16_t port, const char *key, const char *value, unsigned long long token)
{
    char path[256], hdr[128], body[256];
    snprintf(path, sizeof(path), "/v1/records/%s", key);
    snprintf(hdr, sizeof(hdr), "Fencing-Token: %llu\r\n", token);
    snprintf(body, sizeof(body), "{\"value\":\"%s\"}", value);
    struct hc_response r = {0};
    assert_int_equal(hc_put(port, path, body, hdr, &r), 0);
    int st = r.status;
    hc_response_clear(&r);
    return st;
}

static void http_lock_not_extended_is_lost_and_its_late_write_refused(void **state)
{
    struct fld_fx *f = *state;
    struct fld *d = &f->d;
    struct tk_sg_options so;
    tk_sg_options_init(&so);
    struct tk_sg *sg = NULL;
    assert_int_equal(tk_sg_start(&so, &sg), 0);
    uint16_t sgp = tk_sg_port(sg);

    char id1[64], id2[64], path[256];
    unsigned long long t1 = 0, t2 = 0;
    assert_int_equal(fld_acquire(d, "ledger", "{\"ttl_ms\":300}", id1, sizeof(id1), &t1), 200);
    assert_int_equal(sg_put(sgp, "ledger", "a1", t1), 200);
    /* Client 1 pauses past its TTL; the server does not extend for it. */
    hp_sleep_ms(450);
    assert_int_equal(fld_acquire(d, "ledger", "{\"ttl_ms\":5000}", id2, sizeof(id2), &t2), 200);
    assert_true(t2 > t1);
    assert_int_equal(sg_put(sgp, "ledger", "b", t2), 200);
    snprintf(path, sizeof(path), "/v1/locks/ledger/%s/extend", id1);
    char code[32];
    fld_expect(d, "POST", path, NULL, 409, "error", code, sizeof(code));
    assert_string_equal(code, "lost");
    /* Its late write is refused by the token. */
    assert_int_equal(sg_put(sgp, "ledger", "a2", t1), 409);
    tk_sg_free(sg);
}

static void http_node_down_and_back(void **state)
{
    struct fld_fx *f = *state;
    struct fld *d = &f->d;
    char id[64], buf[64];
    fld_expect(d, "GET", "/healthz", NULL, 200, "status", buf, sizeof(buf));
    assert_string_equal(buf, "ok");
    assert_int_equal(rh_kill(f->rc, 0), 0);
    fld_expect(d, "GET", "/healthz", NULL, 200, "status", buf, sizeof(buf));
    assert_string_equal(buf, "degraded");
    assert_int_equal(fld_acquire(d, "down", "{\"ttl_ms\":2000}", id, sizeof(id), NULL), 200);
    assert_int_equal(rh_kill(f->rc, 1), 0);
    fld_expect(d, "GET", "/healthz", NULL, 503, "status", buf, sizeof(buf));
    assert_string_equal(buf, "no_quorum");
    struct hc_response r = {0};
    fld_call(d, "POST", "/v1/locks/down2", NULL, NULL, &r);
    assert_int_equal(r.status, 503);
    assert_string_equal(str(&r, "error"), "no_quorum");
    hc_response_clear(&r);
    /* Back, with their data: the first lock is still held by a majority. */
    assert_int_equal(rh_restart(f->rc, 0, 1), 0);
    assert_int_equal(rh_restart(f->rc, 1, 1), 0);
    long long deadline = hp_now_ms() + 5000;
    int st = 0;
    while (hp_now_ms() < deadline) {
        fld_call(d, "GET", "/healthz", NULL, NULL, &r);
        st = r.status;
        hc_response_clear(&r);
        if (st == 200)
            break;
        hp_sleep_ms(100);
    }
    assert_int_equal(st, 200);
    deadline = hp_now_ms() + 5000;
    while ((st = fld_acquire(d, "down2", NULL, id, sizeof(id), NULL)) != 200 && hp_now_ms() < deadline)
        hp_sleep_ms(100);
    assert_int_equal(st, 200);
}

static void http_sigterm_tells_waiters_and_exits(void **state)
{
    struct fld_fx *f = *state;
    struct fld *d = &f->d;
    char id[64];
    assert_int_equal(fld_acquire(d, "term", "{\"ttl_ms\":30000}", id, sizeof(id), NULL), 200);
    struct waiter w = {.d = d, .path = "/v1/locks/term", .body = "{\"wait_ms\":20000}"};
    pthread_t t;
    assert_int_equal(pthread_create(&t, NULL, wait_thread, &w), 0);
    long long deadline = hp_now_ms() + 3000;
    while (metric(d, "fencelockd_waiters") != 1 && hp_now_ms() < deadline)
        hp_sleep_ms(20);
    long long t0 = hp_now_ms();
    int st = fld_stop(d, 5000);
    pthread_join(t, NULL);
    assert_true(WIFEXITED(st));
    assert_int_equal(WEXITSTATUS(st), 0);
    assert_int_equal(w.r.status, 503);
    assert_string_equal(str(&w.r, "error"), "shutting_down");
    assert_true(w.answered_ms - t0 < 2000);
    assert_true(hp_now_ms() - t0 < 3000);
    hc_response_clear(&w.r);
    /* The waiter's queue place does not outlive the server: the holder's
     * lock is the only one left. */
    lockcore_client *c = lib_client(f, 1000);
    struct lockcore_lock lk;
    assert_int_equal(lockcore_lock_from_id(c, "term", id, &lk), 0);
    assert_int_equal(lockcore_release(c, &lk), 0);
    assert_int_equal(lockcore_acquire(c, "term", &lk), 0);
    lockcore_release(c, &lk);
    lockcore_client_free(c);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(http_acquire_extend_release_status, fld_fx_setup_started,
                                        fld_fx_teardown),
        cmocka_unit_test_setup_teardown(http_every_kind, fld_fx_setup_started, fld_fx_teardown),
        cmocka_unit_test_setup_teardown(http_long_poll_granted_on_release, fld_fx_setup_started,
                                        fld_fx_teardown),
        cmocka_unit_test_setup_teardown(http_waiter_that_hangs_up_leaves, fld_fx_setup_started,
                                        fld_fx_teardown),
        cmocka_unit_test_setup_teardown(http_excludes_the_library, fld_fx_setup_started, fld_fx_teardown),
        cmocka_unit_test_setup_teardown(http_multi_names_are_the_request_s, fld_fx_setup_started,
                                        fld_fx_teardown),
        cmocka_unit_test_setup_teardown(http_loops_keep_one_resource_s_waiters_in_order, fld_fx_setup,
                                        fld_fx_teardown),
        cmocka_unit_test_setup_teardown(http_fence_transition_writes_old_fence_keys, fld_fx_setup_started,
                                        fld_fx_teardown),
        cmocka_unit_test_setup_teardown(http_two_instances_share_locks, fld_fx_setup_started,
                                        fld_fx_teardown),
        cmocka_unit_test_setup_teardown(http_lock_not_extended_is_lost_and_its_late_write_refused,
                                        fld_fx_setup_started, fld_fx_teardown),
        cmocka_unit_test_setup_teardown(http_node_down_and_back, fld_fx_setup_started, fld_fx_teardown),
        cmocka_unit_test_setup_teardown(http_sigterm_tells_waiters_and_exits, fld_fx_setup_started,
                                        fld_fx_teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
