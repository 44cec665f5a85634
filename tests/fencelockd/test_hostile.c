/*
 * fencelockd against hostile HTTP: malformed and oversized requests, odd
 * bytes in the head, conflicting framing, wrong methods, slow clients;
 * every refusal a 4xx JSON answer, and the server serving on. Bearer
 * tokens and HTTPS, as storage-guard has them (the same layer, fencehttp).
 */
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <netinet/in.h>

#include <cmocka.h>

#include "fld_daemon.h"

static int same_code(const struct hc_response *r, const char *code)
{
    const char *c = json_string_value(json_object_get(r->json, "error"));
    return c != NULL && strcmp(c, code) == 0;
}

/* Send raw bytes (each request says "Connection: close": fencelockd's
 * epoll may answer a half-closed connection only at its idle timeout, see
 * docs/fencelockd.md); the answer must be status with a JSON error code. */
static void expect_raw(const struct fld *d, const char *bytes, size_t len, int status, const char *code)
{
    struct hc_response r = {0};
    int rc = hc_raw(d->port, bytes, len, 0, &r);
    if (rc != 0)
        fail_msg("no answer to %.60s...: %s", bytes, strerror(-rc));
    if (r.status != status || r.json == NULL || (code && !same_code(&r, code)))
        fail_msg("%.80s...: got %d %s, want %d %s", bytes, r.status, r.body ? r.body : "", status,
                 code ? code : "");
    hc_response_clear(&r);
}

static void expect_str(const struct fld *d, const char *bytes, int status, const char *code)
{
    expect_raw(d, bytes, strlen(bytes), status, code);
}

static void healthy(const struct fld *d)
{
    char buf[32];
    fld_expect(d, "GET", "/healthz", NULL, 200, "status", buf, sizeof(buf));
    assert_string_equal(buf, "ok");
}

static int open_conn(const struct fld *d)
{
    int s = socket(AF_INET, SOCK_STREAM, 0);
    assert_true(s >= 0);
    struct sockaddr_in a = {
        .sin_family = AF_INET, .sin_port = htons(d->port), .sin_addr.s_addr = htonl(0x7f000001)};
    assert_int_equal(connect(s, (struct sockaddr *)&a, sizeof(a)), 0);
    return s;
}

static void hostile_requests_get_json_4xx(void **state)
{
    struct fld_fx *f = *state;
    struct fld *d = &f->d;
    fld_start(d, f->nodes, NULL);
    const char *h = "Host: x\r\nConnection: close\r\n";
    char buf[70000];

    /* Bodies. */
    static const struct {
        const char *body, *code;
    } bodies[] = {
        {"{\"ttl_ms\"", "bad_json"}, {"{\"ttl_ms\":\"10s\"}", "bad_body"},
        {"[]", "bad_body"},          {"{\"wait_ms\":1e9}", "bad_body"},
        {"\xff\xfe", "bad_json"},    {"{\"kind\":null}", "bad_body"},
    };
    for (size_t i = 0; i < sizeof(bodies) / sizeof(bodies[0]); i++) {
        snprintf(buf, sizeof(buf), "POST /v1/locks/a HTTP/1.1\r\n%sContent-Length: %zu\r\n\r\n%s", h,
                 strlen(bodies[i].body), bodies[i].body);
        expect_str(d, buf, 400, bodies[i].code);
    }
    snprintf(buf, sizeof(buf), "POST /v1/locks/a HTTP/1.1\r\n%sContent-Length: 100000000\r\n\r\n", h);
    expect_str(d, buf, 413, "body_too_large");
    /* A chunked body over the limit (64 KiB) is read and dropped. */
    int n =
        snprintf(buf, sizeof(buf), "POST /v1/locks/a HTTP/1.1\r\n%sTransfer-Encoding: chunked\r\n\r\n", h);
    for (int i = 0; i < 17; i++) {
        n += snprintf(buf + n, sizeof(buf) - (size_t)n, "1000\r\n");
        memset(buf + n, ' ', 4096);
        n += 4096;
        n += snprintf(buf + n, sizeof(buf) - (size_t)n, "\r\n");
    }
    n += snprintf(buf + n, sizeof(buf) - (size_t)n, "0\r\n\r\n");
    expect_raw(d, buf, (size_t)n, 413, "body_too_large");

    /* Ids, resources, routes and methods. */
    expect_str(d, "DELETE /v1/locks/a/xyz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n", 400,
               "bad_lock_id");
    expect_str(d,
               "DELETE /v1/locks/a/0123456789abcdef0123456789abcdef0123456%00 HTTP/1.1\r\nHost: "
               "x\r\nConnection: close\r\n\r\n",
               400, "bad_lock_id");
    expect_str(d, "POST /v1/locks/a%00b HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n", 400,
               "bad_resource");
    expect_str(d, "PATCH /v1/locks/a HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n", 405,
               "method_not_allowed");
    expect_str(d, "GET /admin HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n", 404, "not_found");
    n = snprintf(buf, sizeof(buf), "GET /v1/locks/a?");
    for (int i = 0; i < 40; i++)
        n += snprintf(buf + n, sizeof(buf) - (size_t)n, "p%d=1&", i);
    snprintf(buf + n, sizeof(buf) - (size_t)n, " HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
    expect_str(d, buf, 400, "bad_parameter");

    /* The request head: what storage-guard refuses, fencelockd refuses. */
    static const char nul_head[] =
        "GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\nX-A: 1\0002\r\n\r\n";
    expect_raw(d, nul_head, sizeof(nul_head) - 1, 400, "bad_request_head");
    expect_str(d, "POST /v1/locks/a HTTP/1.1\r\nHost: x\r\nConnection: close\r\nContent-Length : 2\r\n\r\n{}",
               400, "bad_request_head");
    expect_str(d, "POST /v1/locks/a HTTP/1.1\r\nHost: x\r\nConnection: close\r\nContent_Length: 2\r\n\r\n{}",
               400, "bad_request_head");
    expect_str(d,
               "POST /v1/locks/a HTTP/1.1\r\nHost: x\r\nConnection: close\r\nContent-Length: "
               "2\r\nContent-Length: 3\r\n\r\n{}",
               400, "bad_framing");
    expect_str(d,
               "POST /v1/locks/a HTTP/1.1\r\nHost: x\r\nConnection: close\r\nTransfer-Encoding: gzip\r\n\r\n",
               501, "unsupported_transfer_encoding");
    expect_str(d, "GET /healthz HTTP/1.1\r\nConnection: close\r\n\r\n", 400, "bad_host");
    expect_str(d, "GET /v1/locks/a extra HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n", 400,
               "bad_request_head");
    n = snprintf(buf, sizeof(buf), "GET /v1/locks/");
    memset(buf + n, 'a', 17000);
    snprintf(buf + n + 17000, sizeof(buf) - (size_t)n - 17000,
             " HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
    expect_str(d, buf, 414, "uri_too_long");
    n = snprintf(buf, sizeof(buf), "GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n");
    for (int i = 0; i < 40; i++) {
        n += snprintf(buf + n, sizeof(buf) - (size_t)n, "X-Pad-%d: ", i);
        memset(buf + n, 'p', 1000);
        n += 1000;
        n += snprintf(buf + n, sizeof(buf) - (size_t)n, "\r\n");
    }
    snprintf(buf + n, sizeof(buf) - (size_t)n, "\r\n");
    expect_str(d, buf, 431, "headers_too_large");

    /* Slow clients: half a head each, kept open, do not stop others. */
    int slow[64];
    for (int i = 0; i < 64; i++) {
        slow[i] = open_conn(d);
        assert_int_equal(write(slow[i], "POST /v1/locks/slow HTTP/1.1\r\nHo", 32), 32);
    }
    long long t0 = hp_now_ms();
    char id[64];
    assert_int_equal(fld_acquire(d, "after-the-slow-ones", NULL, id, sizeof(id), NULL), 200);
    assert_true(hp_now_ms() - t0 < 1000);
    for (int i = 0; i < 64; i++)
        close(slow[i]);
    healthy(d);
}

static void hostile_bearer_tokens(void **state)
{
    struct fld_fx *f = *state;
    struct fld *d = &f->d;
    char dir[256], path[320];
    assert_int_equal(rh_mkdtemp("fld-auth", dir, sizeof(dir)), 0);
    snprintf(path, sizeof(path), "%s/tokens", dir);
    FILE *fp = fopen(path, "w");
    assert_non_null(fp);
    fputs("# clients\nalice-token-0123456789 alice\nbob-token-0123456789abc bob\n", fp);
    fclose(fp);
    chmod(path, 0600);
    const char *args[] = {"--auth-file", path, "--log-level", "debug", NULL};
    fld_start(d, f->nodes, args);
    struct hc_response r = {0};
    fld_call(d, "POST", "/v1/locks/a", NULL, NULL, &r);
    assert_int_equal(r.status, 401);
    assert_string_equal(json_string_value(json_object_get(r.json, "error")), "unauthorized");
    char hv[128];
    assert_non_null(hc_header(&r, "WWW-Authenticate", hv, sizeof(hv)));
    assert_non_null(strstr(hv, "fencelockd"));
    hc_response_clear(&r);
    /* Two Authorization headers: who asks must not depend on which one a
     * reader takes (a proxy may take the last). */
    fld_call(
        d, "POST", "/v1/locks/a", NULL,
        "Authorization: Bearer bob-token-0123456789abc\r\nAuthorization: Bearer alice-token-0123456789\r\n",
        &r);
    assert_int_equal(r.status, 400);
    assert_string_equal(json_string_value(json_object_get(r.json, "error")), "bad_request_head");
    hc_response_clear(&r);
    /* A resource that is not UTF-8 cannot be answered in JSON: refused
     * before anything is locked. */
    fld_call(d, "POST", "/v1/locks/%FF%FEx", NULL, "Authorization: Bearer alice-token-0123456789\r\n", &r);
    assert_int_equal(r.status, 400);
    assert_string_equal(json_string_value(json_object_get(r.json, "error")), "bad_resource");
    assert_int_equal(rh_pttl(f->rc, 0, "\xff\xfex"), -2);
    hc_response_clear(&r);
    /* A newline in a resource does not write a log line of its own. */
    fld_call(d, "POST", "/v1/locks/x%0Aclient%20alice%3A%20release%20forged", NULL,
             "Authorization: Bearer alice-token-0123456789\r\n", &r);
    assert_int_equal(r.status, 200);
    hc_response_clear(&r);
    fld_call(d, "GET", "/metrics", NULL, "Authorization: Bearer not-a-known-token-123\r\n", &r);
    assert_int_equal(r.status, 401);
    hc_response_clear(&r);
    healthy(d); /* open to probes */
    fld_call(d, "POST", "/v1/locks/a", NULL, "Authorization: Bearer alice-token-0123456789\r\n", &r);
    assert_int_equal(r.status, 200);
    char id[64], ref[32], rel[256];
    snprintf(id, sizeof(id), "%s", json_string_value(json_object_get(r.json, "lock_id")));
    snprintf(ref, sizeof(ref), "%s", json_string_value(json_object_get(r.json, "ref")));
    hc_response_clear(&r);
    /* A release by id: at debug level the URL is logged, without the id. */
    snprintf(rel, sizeof(rel), "/v1/locks/a/%s", id);
    fld_call(d, "DELETE", rel, NULL, "Authorization: Bearer alice-token-0123456789\r\n", &r);
    assert_int_equal(r.status, 200);
    hc_response_clear(&r);
    /* The log names the client that took the lock, and its ref, not the
     * id that would release it. */
    fld_stop(d, 5000);
    FILE *lf = fopen(d->log, "r");
    assert_non_null(lf);
    char line[1024];
    int named = 0, id_shown = 0, forged = 0, logged_url = 0;
    while (fgets(line, sizeof(line), lf)) {
        named |= strstr(line, "client alice: acquire") != NULL && strstr(line, ref) != NULL;
        id_shown |= strstr(line, id) != NULL;
        forged |= strncmp(line, "client alice: release forged", 28) == 0;
        logged_url |= strstr(line, "DELETE /v1/locks/a/") != NULL;
    }
    fclose(lf);
    assert_true(named);
    assert_true(logged_url);
    assert_false(id_shown);
    assert_false(forged);
    rh_rmtree(dir);
}

static void hostile_https(void **state)
{
    struct fld_fx *f = *state;
    struct fld *d = &f->d;
    char dir[256], cert[320], key[320], log[320], out[320], url[128];
    assert_int_equal(rh_mkdtemp("fld-tls", dir, sizeof(dir)), 0);
    snprintf(log, sizeof(log), "%s/tool.log", dir);
    snprintf(out, sizeof(out), "%s/body", dir);
    assert_int_equal(hp_self_signed(dir, "tls", cert, key, sizeof(cert)), 0);
    const char *args[] = {"--tls-cert", cert, "--tls-key", key, NULL};
    fld_start(d, f->nodes, args);
    snprintf(url, sizeof(url), "https://127.0.0.1:%u/v1/locks/tls", d->port);
    char *post[] = {"curl", "-sS", "--max-time", "10", "--cacert", cert, "-o", out, "-X", "POST", url, NULL};
    assert_int_equal(hp_run(post, log, 20000), 0);
    FILE *fp = fopen(out, "r");
    assert_non_null(fp);
    char body[2048] = "";
    size_t got = fread(body, 1, sizeof(body) - 1, fp);
    body[got] = '\0';
    fclose(fp);
    assert_non_null(strstr(body, "\"lock_id\""));
    /* A client that does not trust the certificate stops (curl: 60). */
    char *untrusted[] = {"curl", "-sS", "--max-time", "10", "-o", out, url, NULL};
    assert_int_equal(hp_run(untrusted, log, 20000), 60);
    rh_rmtree(dir);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(hostile_requests_get_json_4xx, fld_fx_setup, fld_fx_teardown),
        cmocka_unit_test_setup_teardown(hostile_bearer_tokens, fld_fx_setup, fld_fx_teardown),
        cmocka_unit_test_setup_teardown(hostile_https, fld_fx_setup, fld_fx_teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
