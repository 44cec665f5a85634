/* storage-guard as a real process over loopback HTTP: fencing, every error
 * code, concurrent writers, hostile keys and requests, metrics, shutdown. */
#include <errno.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#include <cmocka.h>
#include <jansson.h>

#include "http.h"
#include "proc.h"
#include "sg_daemon.h"

#define MAX_BODY 65536

static int setup(void **state)
{
    struct sgd *d = calloc(1, sizeof(*d));
    assert_non_null(d);
    sgd_init(d);
    static const char *const args[] = {"--max-body", "65536", "--threads", "4", NULL};
    sgd_start(d, args);
    *state = d;
    return 0;
}

static int teardown(void **state)
{
    struct sgd *d = *state;
    sgd_destroy(d);
    free(d);
    return 0;
}

static long long jint(const struct hc_response *r, const char *name)
{
    json_t *v = json_object_get(r->json, name);
    if (!json_is_integer(v))
        fail_msg("no integer \"%s\" in %s", name, r->body ? r->body : "(no body)");
    return json_integer_value(v);
}

/* Assert a JSON answer with this status (and error code unless NULL). */
static void check(const struct hc_response *r, int status, const char *code)
{
    char ct[128];
    if (r->status != status)
        fail_msg("want %d, got %d: %s", status, r->status, r->body ? r->body : "");
    if (hc_header(r, "Content-Type", ct, sizeof(ct)) == NULL || strcmp(ct, "application/json") != 0)
        fail_msg("not JSON (%d): %s", r->status, r->body);
    assert_non_null(r->json);
    if (code != NULL) {
        const char *got = json_string_value(json_object_get(r->json, "error"));
        if (got == NULL || strcmp(got, code) != 0)
            fail_msg("want error %s, got %s", code, r->body);
        assert_true(json_is_string(json_object_get(r->json, "message")));
    }
}

static void put_expect(uint16_t port, const char *path, const char *body, const char *headers, int status,
                       const char *code)
{
    struct hc_response r;
    assert_int_equal(hc_put(port, path, body, headers, &r), 0);
    check(&r, status, code);
    hc_response_clear(&r);
}

static void get_expect(uint16_t port, const char *path, int status, const char *code)
{
    struct hc_response r;
    assert_int_equal(hc_get(port, path, &r), 0);
    check(&r, status, code);
    hc_response_clear(&r);
}

static long long fence_of(uint16_t port, const char *resource)
{
    char path[256];
    snprintf(path, sizeof(path), "/v1/fences/%s", resource);
    struct hc_response r;
    assert_int_equal(hc_get(port, path, &r), 0);
    check(&r, 200, NULL);
    long long t = jint(&r, "last_token");
    hc_response_clear(&r);
    return t;
}

static void test_http_write_accepted_refused_equal(void **state)
{
    struct sgd *d = *state;
    struct hc_response r;
    assert_int_equal(
        hc_put(d->port, "/v1/records/acct", "{\"value\":{\"balance\":10},\"token\":1000}", NULL, &r), 0);
    check(&r, 200, NULL);
    assert_string_equal(json_string_value(json_object_get(r.json, "key")), "acct");
    assert_int_equal(jint(&r, "version"), 1);
    assert_int_equal(jint(&r, "token"), 1000);
    hc_response_clear(&r);

    assert_int_equal(
        hc_put(d->port, "/v1/records/acct", "{\"value\":{\"balance\":0},\"token\":999}", NULL, &r), 0);
    check(&r, 409, "stale_token");
    assert_int_equal(jint(&r, "token"), 999);
    assert_int_equal(jint(&r, "last_token"), 1000);
    hc_response_clear(&r);

    put_expect(d->port, "/v1/records/acct", "{\"value\":{\"balance\":11},\"token\":1000}", NULL, 200, NULL);

    assert_int_equal(hc_get(d->port, "/v1/records/acct", &r), 0);
    check(&r, 200, NULL);
    assert_int_equal(json_integer_value(json_object_get(json_object_get(r.json, "value"), "balance")), 11);
    assert_int_equal(jint(&r, "version"), 2);
    assert_int_equal(jint(&r, "token"), 1000);
    assert_true(json_is_string(json_object_get(r.json, "updated_at")));
    hc_response_clear(&r);
    assert_int_equal(fence_of(d->port, "acct"), 1000);
}

static void test_http_fence_per_resource(void **state)
{
    struct sgd *d = *state;
    put_expect(d->port, "/v1/records/orders", "{\"value\":1,\"token\":50,\"resource\":\"shop\"}", NULL, 200,
               NULL);
    put_expect(d->port, "/v1/records/stock", "{\"value\":1,\"token\":49,\"resource\":\"shop\"}", NULL, 409,
               "stale_token");
    put_expect(d->port, "/v1/records/stock", "{\"value\":1,\"token\":51,\"resource\":\"shop\"}", NULL, 200,
               NULL);
    put_expect(d->port, "/v1/records/orders", "{\"value\":2,\"token\":50,\"resource\":\"shop\"}", NULL, 409,
               "stale_token");
    /* The key's own resource is a different one. */
    put_expect(d->port, "/v1/records/orders", "{\"value\":2,\"token\":1}", NULL, 200, NULL);
    assert_int_equal(fence_of(d->port, "shop"), 51);
    assert_int_equal(fence_of(d->port, "orders"), 1);
    assert_int_equal(fence_of(d->port, "stock"), 0);
}

static void test_http_token_in_header(void **state)
{
    struct sgd *d = *state;
    put_expect(d->port, "/v1/records/h", "{\"value\":\"x\"}", "Fencing-Token: 77\r\n", 200, NULL);
    put_expect(d->port, "/v1/records/h", "{\"value\":\"y\"}", "fencing-token: 76\r\n", 409, "stale_token");
    put_expect(d->port, "/v1/records/h", "{\"value\":\"y\",\"token\":78}", "Fencing-Token: 78\r\n", 200,
               NULL);
    put_expect(d->port, "/v1/records/h", "{\"value\":\"y\",\"token\":79}", "Fencing-Token: 80\r\n", 400,
               "token_mismatch");
    put_expect(d->port, "/v1/records/h", "{\"value\":\"y\"}", "Fencing-Token: 81\r\nFencing-Token: 82\r\n",
               400, "token_mismatch");
    assert_int_equal(fence_of(d->port, "h"), 78);
}

static void test_http_every_error_code(void **state)
{
    struct sgd *d = *state;
    uint16_t p = d->port;
    put_expect(p, "/v1/records/e", "{\"value\":", NULL, 400, "malformed_json");
    put_expect(p, "/v1/records/e", "\"just a string\"", NULL, 400, "bad_body");
    put_expect(p, "/v1/records/e", "{\"value\":1,\"token\":-5}", NULL, 400, "bad_token");
    put_expect(p, "/v1/records/e", "{\"value\":1,\"token\":2.5}", NULL, 400, "bad_token");
    put_expect(p, "/v1/records/e", "{\"value\":1,\"token\":9007199254740992}", NULL, 400,
               "token_out_of_range");
    put_expect(p, "/v1/records/e", "{\"value\":1}", "Fencing-Token: 18446744073709551616\r\n", 400,
               "bad_token");
    put_expect(p, "/v1/records/e", "{\"value\":1}", "Fencing-Token: -1\r\n", 400, "bad_token");
    put_expect(p, "/v1/records/e", "{\"value\":1,\"token\":1}", "Fencing-Token: 2\r\n", 400,
               "token_mismatch");
    put_expect(p, "/v1/records/e", "{\"value\":1}", NULL, 428, "missing_token");
    put_expect(p, "/v1/records/e", "{\"value\":1,\"token\":0}", NULL, 428, "missing_token");
    put_expect(p, "/v1/records/e%00x", "{\"value\":1,\"token\":1}", NULL, 400, "bad_key");
    put_expect(p, "/v1/records/", "{\"value\":1,\"token\":1}", NULL, 400, "bad_key");
    get_expect(p, "/v1/records/e", 404, "not_found");
    get_expect(p, "/nowhere", 404, "not_found");
    get_expect(p, "/v1/records", 404, "not_found");

    struct hc_response r;
    assert_int_equal(hc_request(p, "PATCH", "/v1/records/e", NULL, NULL, 0, &r), 0);
    check(&r, 405, "method_not_allowed");
    char allow[64];
    assert_non_null(hc_header(&r, "Allow", allow, sizeof(allow)));
    assert_string_equal(allow, "GET, HEAD, PUT, DELETE");
    hc_response_clear(&r);
    assert_int_equal(hc_request(p, "POST", "/v1/log", NULL, "{}", 2, &r), 0);
    check(&r, 405, "method_not_allowed");
    hc_response_clear(&r);

    /* Over the size limit: a whole body, a declared length, a chunked body. */
    size_t big = MAX_BODY + 1;
    char *body = malloc(big + 1);
    assert_non_null(body);
    memset(body, ' ', big);
    body[big] = '\0';
    memcpy(body, "{\"value\":\"", 10);
    assert_int_equal(hc_request(p, "PUT", "/v1/records/e", "Fencing-Token: 1\r\n", body, big, &r), 0);
    check(&r, 413, "body_too_large");
    hc_response_clear(&r);
    free(body);
    const char declared[] = "PUT /v1/records/e HTTP/1.1\r\nHost: x\r\nConnection: close\r\n"
                            "Content-Length: 100000000\r\nExpect: 100-continue\r\n\r\n";
    assert_int_equal(hc_raw(p, declared, sizeof(declared) - 1, 0, &r), 0);
    check(&r, 413, "body_too_large");
    hc_response_clear(&r);
    char chunk_hdr[] = "PUT /v1/records/e HTTP/1.1\r\nHost: x\r\nConnection: close\r\n"
                       "Transfer-Encoding: chunked\r\nFencing-Token: 1\r\n\r\n";
    size_t cap = sizeof(chunk_hdr) + 3 * (0x8000 + 16) + 16, n = 0;
    char *chunked = malloc(cap);
    assert_non_null(chunked);
    n += (size_t)snprintf(chunked, cap, "%s", chunk_hdr);
    for (int i = 0; i < 3; i++) {
        n += (size_t)snprintf(chunked + n, cap - n, "8000\r\n");
        memset(chunked + n, 'a', 0x8000);
        n += 0x8000;
        n += (size_t)snprintf(chunked + n, cap - n, "\r\n");
    }
    n += (size_t)snprintf(chunked + n, cap - n, "0\r\n\r\n");
    assert_int_equal(hc_raw(p, chunked, n, 0, &r), 0);
    check(&r, 413, "body_too_large");
    hc_response_clear(&r);
    free(chunked);

    /* None of this wrote anything or moved the fence. */
    get_expect(p, "/v1/records/e", 404, "not_found");
    assert_int_equal(fence_of(p, "e"), 0);
}

/* ---- 64 concurrent writers ---- */

#define WRITERS 64
#define WRITES_EACH 4

struct writer {
    uint16_t port;
    unsigned seed;
    int accepted, refused, failed;
    long long max_accepted;
};

static void *writer_main(void *arg)
{
    struct writer *w = arg;
    for (int i = 0; i < WRITES_EACH; i++) {
        long long token = 1 + (long long)(rand_r(&w->seed) % 100000);
        char body[128];
        snprintf(body, sizeof(body),
                 "{\"value\":{\"writer\":%u,\"i\":%d},\"token\":%lld,\"resource\":\"race\"}", w->seed, i,
                 token);
        /* Keys spread over a few records; the resource is one. */
        char path[64];
        snprintf(path, sizeof(path), "/v1/records/race-%d", i % 3);
        struct hc_response r;
        if (hc_put(w->port, path, body, NULL, &r) != 0) {
            w->failed++;
            continue;
        }
        if (r.status == 200) {
            w->accepted++;
            if (token > w->max_accepted)
                w->max_accepted = token;
        } else if (r.status == 409) {
            w->refused++;
        } else {
            w->failed++;
        }
        hc_response_clear(&r);
    }
    return NULL;
}

static void test_http_concurrent_writers_never_go_back(void **state)
{
    struct sgd *d = *state;
    static struct writer w[WRITERS];
    pthread_t th[WRITERS];
    for (int i = 0; i < WRITERS; i++) {
        w[i] = (struct writer){.port = d->port, .seed = 7919u * (unsigned)(i + 1)};
        assert_int_equal(pthread_create(&th[i], NULL, writer_main, &w[i]), 0);
    }
    int accepted = 0, refused = 0;
    long long max_accepted = 0;
    for (int i = 0; i < WRITERS; i++) {
        pthread_join(th[i], NULL);
        assert_int_equal(w[i].failed, 0);
        accepted += w[i].accepted;
        refused += w[i].refused;
        if (w[i].max_accepted > max_accepted)
            max_accepted = w[i].max_accepted;
    }
    assert_int_equal(accepted + refused, WRITERS * WRITES_EACH);
    assert_true(accepted > 0);
    assert_int_equal(fence_of(d->port, "race"), max_accepted);

    /* Replay the audit log in order: each accepted token is >= every token
     * accepted before it, each refused one is below the running maximum, and
     * last_token is exactly that maximum. */
    long long after = 0, running = 0;
    int log_accepted = 0, log_refused = 0;
    for (int page = 0; page < 10; page++) {
        char path[128];
        snprintf(path, sizeof(path), "/v1/log?resource=race&after=%lld&limit=1000", after);
        struct hc_response r;
        assert_int_equal(hc_get(d->port, path, &r), 0);
        check(&r, 200, NULL);
        json_t *entries = json_object_get(r.json, "entries");
        size_t n = json_array_size(entries);
        for (size_t i = 0; i < n; i++) {
            json_t *e = json_array_get(entries, i);
            long long seq = json_integer_value(json_object_get(e, "seq"));
            long long token = json_integer_value(json_object_get(e, "token"));
            long long last = json_integer_value(json_object_get(e, "last_token"));
            const char *outcome = json_string_value(json_object_get(e, "outcome"));
            assert_true(seq > after);
            after = seq;
            assert_int_equal(last, running);
            if (strcmp(outcome, "accepted") == 0) {
                assert_true(token >= running);
                running = token;
                log_accepted++;
            } else {
                assert_string_equal(outcome, "stale");
                assert_true(token < running);
                log_refused++;
            }
        }
        hc_response_clear(&r);
        if (n == 0)
            break;
    }
    assert_int_equal(log_accepted, accepted);
    assert_int_equal(log_refused, refused);
    assert_int_equal(running, max_accepted);
}

static void test_http_log_records_refused_writes(void **state)
{
    struct sgd *d = *state;
    put_expect(d->port, "/v1/records/l", "{\"value\":1,\"token\":10}", NULL, 200, NULL);
    put_expect(d->port, "/v1/records/l", "{\"value\":2,\"token\":9}", NULL, 409, "stale_token");
    put_expect(d->port, "/v1/records/l", "{\"value\":3,\"token\":8}", NULL, 409, "stale_token");
    struct hc_response r;
    assert_int_equal(hc_get(d->port, "/v1/log?key=l", &r), 0);
    check(&r, 200, NULL);
    json_t *e = json_object_get(r.json, "entries");
    assert_int_equal(json_array_size(e), 3);
    long long want[] = {10, 9, 8};
    const char *outcome[] = {"accepted", "stale", "stale"};
    for (size_t i = 0; i < 3; i++) {
        json_t *row = json_array_get(e, i);
        assert_int_equal(json_integer_value(json_object_get(row, "token")), want[i]);
        assert_string_equal(json_string_value(json_object_get(row, "outcome")), outcome[i]);
        assert_string_equal(json_string_value(json_object_get(row, "key")), "l");
        assert_true(json_is_string(json_object_get(row, "time")));
    }
    hc_response_clear(&r);
}

static void test_http_fenced_read_refuses_later_stale_write(void **state)
{
    struct sgd *d = *state;
    put_expect(d->port, "/v1/records/doc", "{\"value\":\"v1\",\"token\":100}", NULL, 200, NULL);
    /* The new holder (200) reads; the old holder (100, paused) wakes up and
     * writes before the new holder writes: refused. */
    struct hc_response r;
    assert_int_equal(hc_get(d->port, "/v1/records/doc?token=200", &r), 0);
    check(&r, 200, NULL);
    assert_string_equal(json_string_value(json_object_get(r.json, "value")), "v1");
    hc_response_clear(&r);
    put_expect(d->port, "/v1/records/doc", "{\"value\":\"late\",\"token\":100}", NULL, 409, "stale_token");
    assert_int_equal(hc_request(d->port, "GET", "/v1/records/doc", "Fencing-Token: 150\r\n", NULL, 0, &r), 0);
    check(&r, 409, "stale_token");
    hc_response_clear(&r);
    put_expect(d->port, "/v1/records/doc", "{\"value\":\"v2\",\"token\":200}", NULL, 200, NULL);
    assert_int_equal(hc_get(d->port, "/v1/records/doc", &r), 0);
    check(&r, 200, NULL);
    assert_string_equal(json_string_value(json_object_get(r.json, "value")), "v2");
    hc_response_clear(&r);
}

static void test_http_hostile_keys_handled_safely(void **state)
{
    struct sgd *d = *state;
    const char *keys[] = {"../../../../etc/passwd",
                          "'); DROP TABLE sg_records; --",
                          "k\" OR \"1\"=\"1",
                          "a/b/./c/../d",
                          "\xe2\x98\x83 snow",
                          "%00 literal",
                          "\t\r\n"};
    for (size_t i = 0; i < sizeof(keys) / sizeof(keys[0]); i++) {
        char *esc = hc_escape(keys[i], strlen(keys[i]));
        char path[512], body[64];
        snprintf(path, sizeof(path), "/v1/records/%s", esc);
        snprintf(body, sizeof(body), "{\"value\":%zu,\"token\":5}", i);
        struct hc_response r;
        assert_int_equal(hc_put(d->port, path, body, NULL, &r), 0);
        check(&r, 200, NULL);
        hc_response_clear(&r);
        assert_int_equal(hc_get(d->port, path, &r), 0);
        check(&r, 200, NULL);
        assert_string_equal(json_string_value(json_object_get(r.json, "key")), keys[i]);
        assert_int_equal(json_integer_value(json_object_get(r.json, "value")), i);
        hc_response_clear(&r);
        free(esc);
    }
    /* A raw "../" path is a key like any other, not a file. */
    put_expect(d->port, "/v1/records/../x", "{\"value\":1,\"token\":1}", NULL, 200, NULL);
    /* NUL, too long (decoded), far too long (the URL itself). */
    put_expect(d->port, "/v1/records/x%00y", "{\"value\":1,\"token\":1}", NULL, 400, "bad_key");
    char *path = malloc(20000);
    assert_non_null(path);
    int n = snprintf(path, 20000, "/v1/records/");
    memset(path + n, 'k', 1025);
    path[n + 1025] = '\0';
    put_expect(d->port, path, "{\"value\":1,\"token\":1}", NULL, 400, "bad_key");
    memset(path + n, 'k', 15000);
    path[n + 15000] = '\0';
    put_expect(d->port, path, "{\"value\":1,\"token\":1}", NULL, 400, "bad_key");
    free(path);
    /* The tables are intact and still answer. */
    get_expect(d->port, "/v1/log?limit=1000", 200, NULL);
    put_expect(d->port, "/v1/records/after-hostile", "{\"value\":1,\"token\":1}", NULL, 200, NULL);
    assert_int_equal(fence_of(d->port, "'%29%3B%20DROP%20TABLE%20sg_records%3B%20--"), 5);
}

static void test_http_hostile_requests_keep_serving(void **state)
{
    struct sgd *d = *state;
    uint16_t p = d->port;
    struct hc_response r;
    /* Requests libmicrohttpd itself refuses: we want an error status or a
     * closed connection, never a crash. */
    const char *junk[] = {
        "GARBAGE\r\n\r\n",
        "PUT /v1/records/k HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n\r\n",
        "PUT /v1/records/k HTTP/1.1\r\nHost: x\r\nContent-Length: 50\r\n\r\n{\"va",
        "\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03",
        "GET /healthz HTTP/9.9\r\n\r\n",
        "GET /healthz FOO/1.1\r\nHost: x\r\n\r\n",
        "GET /healthz HTTP/1.1 extra\r\nHost: x\r\n\r\n",
    };
    for (size_t i = 0; i < sizeof(junk) / sizeof(junk[0]); i++) {
        int rc = hc_raw(p, junk[i], strlen(junk[i]), 1, &r);
        if (rc == 0) {
            if (r.status < 400 || r.status > 505)
                fail_msg("junk %zu answered %d", i, r.status);
            hc_response_clear(&r);
        }
    }
    /* Oversized heads under libmicrohttpd's own pool get JSON answers. */
    char *huge = malloc(40000);
    assert_non_null(huge);
    memset(huge, 'a', 39999);
    huge[39999] = '\0';
    char *hdr = malloc(40100);
    assert_non_null(hdr);
    snprintf(hdr, 40100, "X-Big: %.39000s\r\n", huge);
    assert_int_equal(hc_request(p, "GET", "/healthz", hdr, NULL, 0, &r), 0);
    check(&r, 431, "headers_too_large");
    hc_response_clear(&r);
    snprintf(hdr, 40100, "/v1/records/%.20000s", huge);
    get_expect(p, hdr, 414, "uri_too_long");
    free(hdr);
    free(huge);
    /* A header block over the memory limit. */
    size_t big = 300000;
    char *req = malloc(big + 128);
    assert_non_null(req);
    int n = snprintf(req, 128, "GET /healthz HTTP/1.1\r\nHost: x\r\nX-Big: ");
    memset(req + n, 'a', big);
    memcpy(req + n + big, "\r\n\r\n", 4);
    if (hc_raw(p, req, (size_t)n + big + 4, 1, &r) == 0) {
        assert_true(r.status == 431 || r.status == 400 || r.status == 413);
        hc_response_clear(&r);
    }
    free(req);
    /* Connections opened and dropped mid-request. */
    for (int i = 0; i < 20; i++) {
        const char half[] =
            "PUT /v1/records/half HTTP/1.1\r\nHost: x\r\nContent-Length: 30\r\n\r\n{\"value\":1,";
        hc_raw(p, half, sizeof(half) - 1, 1, &r);
        hc_response_clear(&r);
    }
    /* Malformed JSON of many kinds: always a 400 JSON answer. */
    const char *bodies[] = {"{\"value\":1,\"token\":1", "{\"value\":1 \"token\":1}", "\xff\xfe{}",
                            "{\"value\":\"\xc3\"}",
                            "[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[["};
    for (size_t i = 0; i < sizeof(bodies) / sizeof(bodies[0]); i++)
        put_expect(p, "/v1/records/k", bodies[i], "Fencing-Token: 1\r\n", 400, "malformed_json");
    /* Still serving, and still fencing. */
    get_expect(p, "/healthz", 200, NULL);
    put_expect(p, "/v1/records/k", "{\"value\":1,\"token\":3}", NULL, 200, NULL);
    put_expect(p, "/v1/records/k", "{\"value\":1,\"token\":2}", NULL, 409, "stale_token");
    get_expect(p, "/v1/records/half", 404, "not_found");
}

static void test_http_metrics_in_prometheus_format(void **state)
{
    struct sgd *d = *state;
    put_expect(d->port, "/v1/records/m", "{\"value\":1,\"token\":5}", NULL, 200, NULL);
    put_expect(d->port, "/v1/records/m", "{\"value\":1,\"token\":4}", NULL, 409, "stale_token");
    put_expect(d->port, "/v1/records/m", "{\"value\":1}", NULL, 428, "missing_token");
    struct hc_response r;
    assert_int_equal(hc_get(d->port, "/metrics", &r), 0);
    assert_int_equal(r.status, 200);
    char ct[128];
    assert_non_null(hc_header(&r, "Content-Type", ct, sizeof(ct)));
    assert_non_null(strstr(ct, "text/plain"));
    assert_non_null(strstr(r.body, "\nstorage_guard_writes_accepted_total 1\n"));
    assert_non_null(strstr(r.body, "\nstorage_guard_writes_refused_stale_total 1\n"));
    assert_non_null(strstr(r.body, "\nstorage_guard_bad_requests_total 1\n"));
    assert_non_null(strstr(r.body, "# TYPE storage_guard_request_duration_seconds histogram"));
    /* Three requests were answered before this one. */
    assert_non_null(strstr(r.body, "storage_guard_request_duration_seconds_bucket{le=\"+Inf\"} 3\n"));
    assert_non_null(strstr(r.body, "storage_guard_request_duration_seconds_count 3\n"));
    hc_response_clear(&r);
}

static void test_http_healthz_reports_durability(void **state)
{
    struct sgd *d = *state;
    struct hc_response r;
    assert_int_equal(hc_get(d->port, "/healthz", &r), 0);
    check(&r, 200, NULL);
    assert_string_equal(json_string_value(json_object_get(r.json, "status")), "ok");
    assert_string_equal(json_string_value(json_object_get(r.json, "journal_mode")), "wal");
    assert_string_equal(json_string_value(json_object_get(r.json, "synchronous")), "full");
    hc_response_clear(&r);
}

static void test_http_sigterm_exits_cleanly(void **state)
{
    struct sgd *d = *state;
    put_expect(d->port, "/v1/records/bye", "{\"value\":1,\"token\":5}", NULL, 200, NULL);
    int st = sgd_stop(d);
    assert_true(WIFEXITED(st));
    assert_int_equal(WEXITSTATUS(st), 0);
    /* The port file goes with the process. */
    FILE *f = fopen(d->port_file, "r");
    assert_null(f);
}

#define T(f) cmocka_unit_test_setup_teardown(f, setup, teardown)

int main(void)
{
    const struct CMUnitTest tests[] = {
        T(test_http_write_accepted_refused_equal),
        T(test_http_fence_per_resource),
        T(test_http_token_in_header),
        T(test_http_every_error_code),
        T(test_http_concurrent_writers_never_go_back),
        T(test_http_log_records_refused_writes),
        T(test_http_fenced_read_refuses_later_stale_write),
        T(test_http_hostile_keys_handled_safely),
        T(test_http_hostile_requests_keep_serving),
        T(test_http_metrics_in_prometheus_format),
        T(test_http_healthz_reports_durability),
        T(test_http_sigterm_exits_cleanly),
    };
    return cmocka_run_group_tests(tests, sgd_backend_start, sgd_backend_stop);
}
