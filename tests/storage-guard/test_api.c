/* The request-to-response mapping of storage-guard without sockets: routing,
 * validation of keys, tokens and bodies, the JSON answers, and the fencing
 * decisions against an in-memory store, or with SG_TEST_DB=postgresql
 * (storage-guard/api-pg) against PostgreSQL from the test kit. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <jansson.h>
#include <libpq-fe.h>

#include <fencelock-testkit/testkit.h>

#include "api.h"
#include "metrics.h"
#include "sg_daemon.h"
#include "store.h"

#define NOW_MS 1700000000123LL

struct call {
    const char *method;
    const char *path;
    const char *query; /* "a=1&b=2", raw, or NULL */
    const char *header_token;
    const char *body;
    int too_large;
    int unfenced;
};

struct answer {
    int status;
    json_t *json;
    char *body;
    const char *allow;
    const char *content_type;
};

static int setup(void **state)
{
    sg_store *s = NULL;
    char err[256];
    sgd_backend_reset();
    const char *db = sgd_backend_url() ? sgd_backend_url() : ":memory:";
    int rc = sg_store_open(db, &s, err, sizeof(err));
    if (rc != 0)
        fail_msg("open: %s", err);
    *state = s;
    return 0;
}

static int teardown(void **state)
{
    sg_store_close(*state);
    return 0;
}

static void answer_clear(struct answer *a)
{
    json_decref(a->json);
    free(a->body);
    memset(a, 0, sizeof(*a));
}

/* Run one request through sg_api_handle and parse the answer. */
static struct answer run(sg_store *s, struct call c)
{
    struct sg_arg args[16];
    size_t n = 0;
    char *q = c.query ? strdup(c.query) : NULL;
    for (char *save = NULL, *tok = q ? strtok_r(q, "&", &save) : NULL; tok && n < 16;
         tok = strtok_r(NULL, "&", &save)) {
        char *eq = strchr(tok, '=');
        if (eq)
            *eq = '\0';
        args[n].name = tok;
        args[n].value = eq ? eq + 1 : NULL;
        n++;
    }
    struct sg_request req = {
        .method = c.method,
        .path = c.path,
        .args = args,
        .n_args = n,
        .token_header = c.header_token,
        .body = c.body,
        .body_len = c.body ? strlen(c.body) : 0,
        .body_too_large = c.too_large,
        .unfenced = c.unfenced,
    };
    struct sg_response resp;
    sg_api_handle(s, &req, NOW_MS, &resp);
    free(q);
    struct answer a = {.status = resp.status, .allow = resp.allow, .content_type = resp.content_type};
    assert_non_null(resp.body);
    a.body = strndup(resp.body, resp.body_len);
    a.json = json_loadb(resp.body, resp.body_len, JSON_ALLOW_NUL, NULL);
    sg_response_clear(&resp);
    return a;
}

static struct answer put(sg_store *s, const char *path, const char *body)
{
    return run(s, (struct call){.method = "PUT", .path = path, .body = body});
}

static const char *jstr(const struct answer *a, const char *name)
{
    json_t *v = json_object_get(a->json, name);
    assert_true(json_is_string(v));
    return json_string_value(v);
}

static long long jint(const struct answer *a, const char *name)
{
    json_t *v = json_object_get(a->json, name);
    if (!json_is_integer(v))
        fail_msg("no integer \"%s\" in %s", name, a->body);
    return json_integer_value(v);
}

/* Assert an error answer: status, JSON, the code. */
static void expect_error(struct answer a, int status, const char *code)
{
    if (a.status != status || a.json == NULL || strcmp(jstr(&a, "error"), code) != 0)
        fail_msg("want %d %s, got %d %s", status, code, a.status, a.body);
    assert_string_equal(a.content_type, "application/json");
    assert_true(json_is_string(json_object_get(a.json, "message")));
    answer_clear(&a);
}

static void expect_status(struct answer a, int status)
{
    if (a.status != status)
        fail_msg("want %d, got %d %s", status, a.status, a.body);
    answer_clear(&a);
}

/* ---- decoding and token text ---- */

static void test_api_decode_percent_escapes(void **state)
{
    (void)state;
    char *out = NULL;
    size_t n = 0;
    assert_int_equal(sg_api_decode("a%2Fb%20c+", 10, &out, &n), 0);
    assert_int_equal(n, 6);
    assert_memory_equal(out, "a/b c+", 6);
    free(out);
    assert_int_equal(sg_api_decode("%ff%FE", 6, &out, &n), 0);
    assert_int_equal(n, 2);
    assert_int_equal((unsigned char)out[0], 0xff);
    free(out);
}

static void test_api_decode_refuses_nul_and_bad_escapes(void **state)
{
    (void)state;
    char *out = NULL;
    size_t n = 0;
    assert_int_equal(sg_api_decode("a%00b", 5, &out, &n), -EINVAL);
    assert_int_equal(sg_api_decode("a%4", 3, &out, &n), -EINVAL);
    assert_int_equal(sg_api_decode("a%", 2, &out, &n), -EINVAL);
    assert_int_equal(sg_api_decode("%zz", 3, &out, &n), -EINVAL);
    assert_null(out);
}

static void test_api_parse_token_limits(void **state)
{
    (void)state;
    uint64_t t = 7;
    assert_int_equal(sg_api_parse_token("0", &t), 0);
    assert_int_equal(t, 0);
    assert_int_equal(sg_api_parse_token("9007199254740991", &t), 0);
    assert_int_equal(t, 9007199254740991ULL);
    assert_int_equal(sg_api_parse_token("9007199254740992", &t), -ERANGE);
    assert_int_equal(sg_api_parse_token("18446744073709551615", &t), -ERANGE);
    assert_int_equal(sg_api_parse_token("18446744073709551616", &t), -EINVAL);
    assert_int_equal(sg_api_parse_token("", &t), -EINVAL);
    assert_int_equal(sg_api_parse_token("-1", &t), -EINVAL);
    assert_int_equal(sg_api_parse_token("+1", &t), -EINVAL);
    assert_int_equal(sg_api_parse_token(" 1", &t), -EINVAL);
    assert_int_equal(sg_api_parse_token("1.0", &t), -EINVAL);
    assert_int_equal(sg_api_parse_token("0x10", &t), -EINVAL);
}

/* ---- writes ---- */

static void test_api_put_accepts_and_answers_version(void **state)
{
    sg_store *s = *state;
    struct answer a = put(s, "/v1/records/k", "{\"value\":{\"n\":1},\"token\":10}");
    assert_int_equal(a.status, 200);
    assert_string_equal(a.content_type, "application/json");
    assert_string_equal(jstr(&a, "key"), "k");
    assert_int_equal(jint(&a, "version"), 1);
    assert_int_equal(jint(&a, "token"), 10);
    answer_clear(&a);
    a = put(s, "/v1/records/k", "{\"value\":[1,2],\"token\":11}");
    assert_int_equal(a.status, 200);
    assert_int_equal(jint(&a, "version"), 2);
    answer_clear(&a);

    a = run(s, (struct call){.method = "GET", .path = "/v1/records/k"});
    assert_int_equal(a.status, 200);
    assert_int_equal(jint(&a, "token"), 11);
    assert_int_equal(jint(&a, "version"), 2);
    json_t *want = json_pack("[i,i]", 1, 2);
    assert_true(json_equal(json_object_get(a.json, "value"), want));
    json_decref(want);
    assert_string_equal(jstr(&a, "updated_at"), "2023-11-14T22:13:20.123Z");
    answer_clear(&a);
}

static void test_api_put_refuses_stale_token(void **state)
{
    sg_store *s = *state;
    expect_status(put(s, "/v1/records/k", "{\"value\":1,\"token\":100}"), 200);
    struct answer a = put(s, "/v1/records/k", "{\"value\":2,\"token\":99}");
    assert_int_equal(a.status, 409);
    assert_string_equal(jstr(&a, "error"), "stale_token");
    assert_int_equal(jint(&a, "token"), 99);
    assert_int_equal(jint(&a, "last_token"), 100);
    answer_clear(&a);
    /* The refused write changed nothing. */
    a = run(s, (struct call){.method = "GET", .path = "/v1/records/k"});
    assert_int_equal(jint(&a, "version"), 1);
    assert_int_equal(json_integer_value(json_object_get(a.json, "value")), 1);
    answer_clear(&a);
}

static void test_api_put_accepts_equal_token(void **state)
{
    sg_store *s = *state;
    expect_status(put(s, "/v1/records/k", "{\"value\":1,\"token\":5}"), 200);
    struct answer a = put(s, "/v1/records/k", "{\"value\":2,\"token\":5}");
    assert_int_equal(a.status, 200);
    assert_int_equal(jint(&a, "version"), 2);
    answer_clear(&a);
}

static void test_api_put_fences_per_resource(void **state)
{
    sg_store *s = *state;
    /* Two keys under one lock: a newer token on one fences the other. */
    expect_status(put(s, "/v1/records/a", "{\"value\":1,\"token\":20,\"resource\":\"shared\"}"), 200);
    expect_error(put(s, "/v1/records/b", "{\"value\":1,\"token\":19,\"resource\":\"shared\"}"), 409,
                 "stale_token");
    expect_status(put(s, "/v1/records/b", "{\"value\":1,\"token\":21,\"resource\":\"shared\"}"), 200);
    expect_error(put(s, "/v1/records/a", "{\"value\":1,\"token\":20,\"resource\":\"shared\"}"), 409,
                 "stale_token");
    /* Another resource is independent, and a key's default resource is itself. */
    expect_status(put(s, "/v1/records/a", "{\"value\":1,\"token\":3}"), 200);
    struct answer a = run(s, (struct call){.method = "GET", .path = "/v1/fences/shared"});
    assert_int_equal(a.status, 200);
    assert_string_equal(jstr(&a, "resource"), "shared");
    assert_int_equal(jint(&a, "last_token"), 21);
    answer_clear(&a);
    a = run(s, (struct call){.method = "GET", .path = "/v1/fences/a"});
    assert_int_equal(jint(&a, "last_token"), 3);
    answer_clear(&a);
    a = run(s, (struct call){.method = "GET", .path = "/v1/fences/never"});
    assert_int_equal(jint(&a, "last_token"), 0);
    answer_clear(&a);
}

static void test_api_put_token_in_header(void **state)
{
    sg_store *s = *state;
    struct answer a = run(s, (struct call){"PUT", "/v1/records/k", NULL, "42", "{\"value\":true}", 0, 0});
    assert_int_equal(a.status, 200);
    assert_int_equal(jint(&a, "token"), 42);
    answer_clear(&a);
    /* Both given and equal is fine; different is ambiguous. */
    expect_status(
        run(s, (struct call){"PUT", "/v1/records/k", NULL, "43", "{\"value\":1,\"token\":43}", 0, 0}), 200);
    expect_error(
        run(s, (struct call){"PUT", "/v1/records/k", NULL, "44", "{\"value\":1,\"token\":45}", 0, 0}), 400,
        "token_mismatch");
    expect_error(run(s, (struct call){"PUT", "/v1/records/k", NULL, "41", "{\"value\":1}", 0, 0}), 409,
                 "stale_token");
    expect_error(run(s, (struct call){"PUT", "/v1/records/k", NULL, "x1", "{\"value\":1}", 0, 0}), 400,
                 "bad_token");
    expect_error(
        run(s, (struct call){"PUT", "/v1/records/k", NULL, "9007199254740992", "{\"value\":1}", 0, 0}), 400,
        "token_out_of_range");
    expect_error(run(s, (struct call){"PUT", "/v1/records/k", NULL, "", "{\"value\":1}", 0, 0}), 400,
                 "bad_token");
}

static void test_api_put_without_token_is_428(void **state)
{
    sg_store *s = *state;
    expect_error(put(s, "/v1/records/k", "{\"value\":1}"), 428, "missing_token");
    expect_error(put(s, "/v1/records/k", "{\"value\":1,\"token\":null}"), 428, "missing_token");
    expect_error(put(s, "/v1/records/k", "{\"value\":1,\"token\":0}"), 428, "missing_token");
    expect_error(run(s, (struct call){"PUT", "/v1/records/k", NULL, "0", "{\"value\":1}", 0, 0}), 428,
                 "missing_token");
}

/* The comparison store of the replays: nothing is refused, the fence never
 * moves, tokens given are recorded. */
static void test_api_unfenced_accepts_stale_and_missing_tokens(void **state)
{
    sg_store *s = *state;
    sg_store_set_unfenced(s, 1);
    struct call c = {
        .method = "PUT", .path = "/v1/records/k", .body = "{\"value\":1,\"token\":100}", .unfenced = 1};
    expect_status(run(s, c), 200);
    c.body = "{\"value\":2,\"token\":99}";
    expect_status(run(s, c), 200);
    c.body = "{\"value\":3}";
    struct answer a = run(s, c);
    assert_int_equal(a.status, 200);
    assert_int_equal(jint(&a, "version"), 3);
    answer_clear(&a);
    a = run(s, (struct call){.method = "GET", .path = "/v1/records/k"});
    assert_int_equal(json_integer_value(json_object_get(a.json, "value")), 3);
    answer_clear(&a);
    a = run(s, (struct call){.method = "GET", .path = "/v1/fences/k"});
    assert_int_equal(jint(&a, "last_token"), 0);
    answer_clear(&a);
    /* The same request to a fenced server still needs its token. */
    sg_store_set_unfenced(s, 0);
    c.unfenced = 0;
    expect_error(run(s, c), 428, "missing_token");
}

static void test_api_put_refuses_bad_tokens(void **state)
{
    sg_store *s = *state;
    expect_error(put(s, "/v1/records/k", "{\"value\":1,\"token\":-1}"), 400, "bad_token");
    expect_error(put(s, "/v1/records/k", "{\"value\":1,\"token\":1.5}"), 400, "bad_token");
    expect_error(put(s, "/v1/records/k", "{\"value\":1,\"token\":1e3}"), 400, "bad_token");
    expect_error(put(s, "/v1/records/k", "{\"value\":1,\"token\":\"7\"}"), 400, "bad_token");
    expect_error(put(s, "/v1/records/k", "{\"value\":1,\"token\":true}"), 400, "bad_token");
    expect_error(put(s, "/v1/records/k", "{\"value\":1,\"token\":9007199254740992}"), 400,
                 "token_out_of_range");
    expect_error(put(s, "/v1/records/k", "{\"value\":1,\"token\":9223372036854775807}"), 400,
                 "token_out_of_range");
    /* Beyond 64 bits the JSON itself is refused. */
    expect_error(put(s, "/v1/records/k", "{\"value\":1,\"token\":18446744073709551616}"), 400,
                 "malformed_json");
    expect_status(put(s, "/v1/records/k", "{\"value\":1,\"token\":9007199254740991}"), 200);
}

static void test_api_put_refuses_bad_bodies(void **state)
{
    sg_store *s = *state;
    expect_error(put(s, "/v1/records/k", ""), 400, "malformed_json");
    expect_error(put(s, "/v1/records/k", "{\"value\":1,"), 400, "malformed_json");
    expect_error(put(s, "/v1/records/k", "{\"value\":1,\"token\":1,\"token\":9}"), 400, "malformed_json");
    expect_error(put(s, "/v1/records/k", "[1,2]"), 400, "bad_body");
    expect_error(put(s, "/v1/records/k", "{\"token\":1}"), 400, "missing_value");
    expect_error(put(s, "/v1/records/k", "{\"value\":1,\"token\":1,\"tokn\":2}"), 400, "unknown_field");
    expect_error(put(s, "/v1/records/k", "{\"value\":1,\"token\":1,\"resource\":\"\"}"), 400, "bad_resource");
    expect_error(put(s, "/v1/records/k", "{\"value\":1,\"token\":1,\"resource\":7}"), 400, "bad_resource");
    expect_error(put(s, "/v1/records/k", "{\"value\":1,\"token\":1,\"resource\":\"a\\u0000b\"}"), 400,
                 "bad_resource");
    expect_error(run(s, (struct call){"PUT", "/v1/records/k", NULL, NULL, "{}", 1, 0}), 413,
                 "body_too_large");
    /* None of these wrote anything. */
    expect_error(run(s, (struct call){.method = "GET", .path = "/v1/records/k"}), 404, "not_found");
}

static void test_api_value_kinds_round_trip(void **state)
{
    sg_store *s = *state;
    const char *values[] = {"null", "\"text with \\u0000 and \\\" quotes\"", "-3.25", "{\"a\":[{},[],\"\"]}",
                            "\"\\u00e9\\ud83d\\ude00\""};
    for (size_t i = 0; i < sizeof(values) / sizeof(values[0]); i++) {
        char body[256];
        snprintf(body, sizeof(body), "{\"value\":%s,\"token\":%zu}", values[i], i + 1);
        expect_status(put(s, "/v1/records/v", body), 200);
        struct answer a = run(s, (struct call){.method = "GET", .path = "/v1/records/v"});
        assert_int_equal(a.status, 200);
        json_t *want = json_loads(values[i], JSON_DECODE_ANY | JSON_ALLOW_NUL, NULL);
        assert_non_null(want);
        assert_true(json_equal(want, json_object_get(a.json, "value")));
        json_decref(want);
        answer_clear(&a);
    }
}

/* ---- keys ---- */

static void test_api_keys_are_decoded_and_bounded(void **state)
{
    sg_store *s = *state;
    expect_error(put(s, "/v1/records/", "{\"value\":1,\"token\":1}"), 400, "bad_key");
    expect_error(put(s, "/v1/records/a%00b", "{\"value\":1,\"token\":1}"), 400, "bad_key");
    expect_error(put(s, "/v1/records/a%zz", "{\"value\":1,\"token\":1}"), 400, "bad_key");
    char path[4096];
    int n = snprintf(path, sizeof(path), "/v1/records/");
    memset(path + n, 'x', 1025);
    path[n + 1025] = '\0';
    expect_error(put(s, path, "{\"value\":1,\"token\":1}"), 400, "bad_key");
    path[n + 1024] = '\0';
    expect_status(put(s, path, "{\"value\":1,\"token\":1}"), 200);
    /* 1024 bytes after decoding, 3072 before. */
    n = snprintf(path, sizeof(path), "/v1/records/");
    for (int i = 0; i < 1024; i++)
        n += snprintf(path + n, sizeof(path) - (size_t)n, "%%2F");
    struct answer a = put(s, path, "{\"value\":1,\"token\":1}");
    assert_int_equal(a.status, 200);
    assert_int_equal(strlen(jstr(&a, "key")), 1024);
    answer_clear(&a);
}

static void test_api_hostile_keys_are_plain_bytes(void **state)
{
    sg_store *s = *state;
    const char *keys[] = {"../../etc/passwd", "'; DROP TABLE sg_records; --", "a/b/../c", "%2e%2e%2f",
                          "\" OR 1=1"};
    const char *paths[] = {"/v1/records/../../etc/passwd",
                           "/v1/records/'%3B%20DROP%20TABLE%20sg_records%3B%20--", "/v1/records/a/b/../c",
                           "/v1/records/%252e%252e%252f", "/v1/records/%22%20OR%201=1"};
    for (int i = 0; i < 5; i++) {
        char body[64];
        snprintf(body, sizeof(body), "{\"value\":%d,\"token\":1}", i);
        struct answer a = put(s, paths[i], body);
        assert_int_equal(a.status, 200);
        assert_string_equal(jstr(&a, "key"), keys[i]);
        answer_clear(&a);
    }
    for (int i = 0; i < 5; i++) {
        struct answer a = run(s, (struct call){.method = "GET", .path = paths[i]});
        assert_int_equal(a.status, 200);
        assert_string_equal(jstr(&a, "key"), keys[i]);
        assert_int_equal(json_integer_value(json_object_get(a.json, "value")), i);
        answer_clear(&a);
    }
    /* Keys that are not UTF-8 come back exactly, in hex. */
    struct answer a = put(s, "/v1/records/%FF%FEz", "{\"value\":1,\"token\":1}");
    assert_int_equal(a.status, 200);
    assert_string_equal(jstr(&a, "key_hex"), "fffe7a");
    answer_clear(&a);
}

/* ---- reads, fences, the log ---- */

static void test_api_fenced_read_raises_the_fence(void **state)
{
    sg_store *s = *state;
    expect_status(put(s, "/v1/records/k", "{\"value\":\"old\",\"token\":10}"), 200);
    /* The new holder (token 20) reads first... */
    struct answer a = run(s, (struct call){.method = "GET", .path = "/v1/records/k", .query = "token=20"});
    assert_int_equal(a.status, 200);
    assert_string_equal(json_string_value(json_object_get(a.json, "value")), "old");
    answer_clear(&a);
    /* ...so the old holder's late write is refused before the new one writes. */
    expect_error(put(s, "/v1/records/k", "{\"value\":\"late\",\"token\":15}"), 409, "stale_token");
    expect_error(run(s, (struct call){.method = "GET", .path = "/v1/records/k", .query = "token=15"}), 409,
                 "stale_token");
    expect_error(run(s, (struct call){"GET", "/v1/records/k", NULL, "19", NULL, 0, 0}), 409, "stale_token");
    expect_error(run(s, (struct call){"GET", "/v1/records/k", "token=20", "21", NULL, 0, 0}), 400,
                 "token_mismatch");
    expect_error(run(s, (struct call){.method = "GET", .path = "/v1/records/k", .query = "token=abc"}), 400,
                 "bad_token");
    expect_error(run(s, (struct call){.method = "GET", .path = "/v1/records/k", .query = "token=0"}), 428,
                 "missing_token");
    expect_error(run(s, (struct call){.method = "GET", .path = "/v1/records/k", .query = "tokn=20"}), 400,
                 "unknown_parameter");
    expect_error(
        run(s, (struct call){.method = "GET", .path = "/v1/records/k", .query = "token=20&token=21"}), 400,
        "bad_parameter");
    /* A fenced read of a missing record is a 404 that still raised the fence. */
    expect_error(run(s, (struct call){.method = "GET", .path = "/v1/records/none", .query = "token=7"}), 404,
                 "not_found");
    expect_error(put(s, "/v1/records/none", "{\"value\":1,\"token\":6}"), 409, "stale_token");
    /* An explicit resource. */
    expect_status(
        run(s, (struct call){.method = "GET", .path = "/v1/records/k", .query = "token=30&resource=r%2F1"}),
        200);
    a = run(s, (struct call){.method = "GET", .path = "/v1/fences/r%2F1"});
    assert_int_equal(jint(&a, "last_token"), 30);
    answer_clear(&a);
}

/* A reader's read (?raise=0): answered only while no newer token was
 * admitted for the resource, and it never moves the fence, so a writer
 * with a token between the fence and the reader's is still admitted. */
static void test_api_reader_read_checks_without_raising(void **state)
{
    sg_store *s = *state;
    expect_status(put(s, "/v1/records/k", "{\"value\":\"first\",\"token\":10}"), 200);
    struct answer a =
        run(s, (struct call){.method = "GET", .path = "/v1/records/k", .query = "token=12&raise=0"});
    assert_int_equal(a.status, 200);
    assert_string_equal(json_string_value(json_object_get(a.json, "value")), "first");
    answer_clear(&a);
    a = run(s, (struct call){.method = "GET", .path = "/v1/fences/k"});
    assert_int_equal(jint(&a, "last_token"), 10); /* not raised to 12 */
    answer_clear(&a);
    expect_status(put(s, "/v1/records/k", "{\"value\":\"second\",\"token\":11}"), 200);
    /* Token 11 still reads; a reader with token 10 is behind the fence (11): refused. */
    expect_status(
        run(s, (struct call){.method = "GET", .path = "/v1/records/k", .query = "token=11&raise=0"}), 200);
    expect_error(run(s, (struct call){.method = "GET", .path = "/v1/records/k", .query = "token=10&raise=0"}),
                 409, "stale_token");
    expect_error(run(s, (struct call){.method = "GET", .path = "/v1/records/k", .query = "raise=0"}), 400,
                 "bad_parameter");
    expect_error(run(s, (struct call){.method = "GET", .path = "/v1/records/k", .query = "token=11&raise=2"}),
                 400, "bad_parameter");
    expect_error(
        run(s, (struct call){.method = "GET", .path = "/v1/records/none", .query = "token=11&raise=0"}), 404,
        "not_found");
    /* raise=1 is the fenced read, which does raise it. */
    expect_status(
        run(s, (struct call){.method = "GET", .path = "/v1/records/k", .query = "token=13&raise=1"}), 200);
    expect_error(put(s, "/v1/records/k", "{\"value\":\"late\",\"token\":12}"), 409, "stale_token");
}

static void test_api_log_records_refused_writes(void **state)
{
    sg_store *s = *state;
    expect_status(put(s, "/v1/records/a", "{\"value\":1,\"token\":5,\"resource\":\"r\"}"), 200);
    expect_status(put(s, "/v1/records/b", "{\"value\":1,\"token\":4,\"resource\":\"r\"}"), 409);
    expect_status(put(s, "/v1/records/c", "{\"value\":1,\"token\":1}"), 200);
    expect_status(
        run(s, (struct call){.method = "GET", .path = "/v1/records/a", .query = "token=6&resource=r"}), 200);

    struct answer a = run(s, (struct call){.method = "GET", .path = "/v1/log", .query = "resource=r"});
    assert_int_equal(a.status, 200);
    json_t *e = json_object_get(a.json, "entries");
    assert_int_equal(json_array_size(e), 3);
    const char *want_outcome[] = {"accepted", "stale", "accepted"};
    const char *want_op[] = {"write", "write", "read"};
    const char *want_key[] = {"a", "b", "a"};
    long long want_token[] = {5, 4, 6}, want_last[] = {0, 5, 5};
    long long prev_seq = 0;
    for (size_t i = 0; i < 3; i++) {
        json_t *row = json_array_get(e, i);
        assert_string_equal(json_string_value(json_object_get(row, "outcome")), want_outcome[i]);
        assert_string_equal(json_string_value(json_object_get(row, "op")), want_op[i]);
        assert_string_equal(json_string_value(json_object_get(row, "key")), want_key[i]);
        assert_int_equal(json_integer_value(json_object_get(row, "token")), want_token[i]);
        assert_int_equal(json_integer_value(json_object_get(row, "last_token")), want_last[i]);
        assert_int_equal(json_integer_value(json_object_get(row, "time_ms")), NOW_MS);
        long long seq = json_integer_value(json_object_get(row, "seq"));
        assert_true(seq > prev_seq);
        prev_seq = seq;
    }
    assert_int_equal(jint(&a, "next_after"), prev_seq);
    long long first_seq = json_integer_value(json_object_get(json_array_get(e, 0), "seq"));
    answer_clear(&a);

    /* Filters: by key, after a seq, a limit. */
    a = run(s, (struct call){.method = "GET", .path = "/v1/log", .query = "key=c"});
    assert_int_equal(json_array_size(json_object_get(a.json, "entries")), 1);
    answer_clear(&a);
    char q[64];
    snprintf(q, sizeof(q), "after=%lld&limit=1", first_seq);
    a = run(s, (struct call){.method = "GET", .path = "/v1/log", .query = q});
    e = json_object_get(a.json, "entries");
    assert_int_equal(json_array_size(e), 1);
    assert_string_equal(json_string_value(json_object_get(json_array_get(e, 0), "key")), "b");
    answer_clear(&a);
    expect_error(run(s, (struct call){.method = "GET", .path = "/v1/log", .query = "limit=0"}), 400,
                 "bad_parameter");
    expect_error(run(s, (struct call){.method = "GET", .path = "/v1/log", .query = "limit=1001"}), 400,
                 "bad_parameter");
    expect_error(run(s, (struct call){.method = "GET", .path = "/v1/log", .query = "after=-1"}), 400,
                 "bad_parameter");
    expect_error(run(s, (struct call){.method = "GET", .path = "/v1/log", .query = "bogus=1"}), 400,
                 "unknown_parameter");
}

/* ---- routing ---- */

/* A client's name (from --auth-file) is bytes, as keys are: one that is
 * not UTF-8 is written with the client's rows and shown with a hex copy,
 * on either database. */
static void test_api_client_names_are_bytes(void **state)
{
    sg_store *s = *state;
    sg_store_set_client(s, "\xff\xfeops");
    expect_status(put(s, "/v1/records/cn", "{\"value\":1,\"token\":5}"), 200);
    expect_status(
        run(s, (struct call){.method = "POST",
                             .path = "/v1/batch",
                             .body = "{\"token\":6,\"ops\":[{\"op\":\"put\",\"key\":\"cn\",\"value\":2}]}"}),
        200);
    expect_status(run(s, (struct call){.method = "GET", .path = "/v1/records/cn", .query = "token=7"}), 200);
    sg_store_set_client(s, NULL);
    struct answer a = run(s, (struct call){.method = "GET", .path = "/v1/log", .query = "key=cn"});
    json_t *e = json_object_get(a.json, "entries");
    assert_int_equal(json_array_size(e), 3);
    for (size_t i = 0; i < 3; i++) {
        json_t *row = json_array_get(e, i);
        assert_string_equal(json_string_value(json_object_get(row, "client")), "??ops");
        assert_string_equal(json_string_value(json_object_get(row, "client_hex")), "fffe6f7073");
    }
    answer_clear(&a);
}

/* PostgreSQL only: a session that lost the store's prepared statements (a
 * pooler, DISCARD ALL) gets them again, and the request is answered. */
static void test_api_pg_prepares_again(void **state)
{
    sg_store *s = *state;
    expect_status(put(s, "/v1/records/pp", "{\"value\":1,\"token\":5}"), 200);
    PQclear(PQexec(sg_store_handle(s), "DEALLOCATE ALL"));
    expect_status(put(s, "/v1/records/pp", "{\"value\":2,\"token\":5}"), 200);
    expect_status(run(s, (struct call){.method = "GET", .path = "/v1/records/pp"}), 200);
}

/* PostgreSQL only: a server that would lose or refuse answered writes is
 * refused at open, with the reason: one running with fsync off, and a
 * database that is read-only (as a standby is). */
static void test_api_pg_refuses_unsafe_servers(void **state)
{
    (void)state;
    sg_store *s = NULL;
    char err[512] = "";
    struct tk_pg *nosync = NULL;
    struct tk_pg_options o;
    tk_pg_options_init(&o);
    const char *settings[] = {"fsync=off", NULL};
    o.settings = settings;
    assert_int_equal(tk_pg_start(&o, &nosync), 0);
    assert_int_equal(sg_store_open(tk_pg_url(nosync), &s, err, sizeof(err)), SG_STORE_EFAIL);
    assert_null(s);
    assert_non_null(strstr(err, "fsync=off"));
    /* A database with storage-guard's tables in it, then made read-only,
     * on the backend's server. */
    PGconn *c = PQconnectdb(sgd_backend_url());
    PQclear(PQexec(c, "DROP DATABASE IF EXISTS ro"));
    PQclear(PQexec(c, "CREATE DATABASE ro"));
    char url[200];
    const char *base = sgd_backend_url();
    snprintf(url, sizeof(url), "%.*s/ro", (int)(strrchr(base, '/') - base), base);
    assert_int_equal(sg_store_open(url, &s, err, sizeof(err)), 0);
    sg_store_close(s);
    s = NULL;
    PQclear(PQexec(c, "ALTER DATABASE ro SET default_transaction_read_only = on"));
    PQfinish(c);
    err[0] = '\0';
    assert_int_equal(sg_store_open(url, &s, err, sizeof(err)), SG_STORE_EFAIL);
    assert_null(s);
    assert_non_null(strstr(err, "read-only for this session"));
    /* Nothing listening: not reachable, which a retry may cure. */
    int port = tk_pg_port(nosync);
    tk_pg_free(nosync);
    snprintf(url, sizeof(url), "postgresql://fencelock@127.0.0.1:%d/postgres", port);
    err[0] = '\0';
    assert_int_equal(sg_store_open(url, &s, err, sizeof(err)), SG_STORE_EBUSY);
    assert_non_null(strstr(err, "127.0.0.1"));
}

static void test_api_unknown_paths_and_methods(void **state)
{
    sg_store *s = *state;
    expect_error(run(s, (struct call){.method = "GET", .path = "/"}), 404, "not_found");
    expect_error(run(s, (struct call){.method = "GET", .path = "/v1/records"}), 404, "not_found");
    expect_error(run(s, (struct call){.method = "GET", .path = "/v2/records/k"}), 404, "not_found");
    struct answer a = run(s, (struct call){.method = "PATCH", .path = "/v1/records/k"});
    assert_int_equal(a.status, 405);
    assert_string_equal(a.allow, "GET, HEAD, PUT, DELETE");
    answer_clear(&a);
    expect_error(run(s, (struct call){.method = "POST", .path = "/v1/records/k", .body = "{}"}), 405,
                 "method_not_allowed");
    expect_error(run(s, (struct call){.method = "PUT", .path = "/v1/fences/r", .body = "{}"}), 405,
                 "method_not_allowed");
    expect_error(run(s, (struct call){.method = "POST", .path = "/v1/log"}), 405, "method_not_allowed");
    expect_error(run(s, (struct call){.method = "DELETE", .path = "/healthz"}), 405, "method_not_allowed");
    /* Client bytes quoted in a message are not UTF-8: still a JSON answer. */
    expect_error(run(s, (struct call){.method = "GET", .path = "/v1/log", .query = "\xff\xfe=1"}), 400,
                 "unknown_parameter");
    expect_error(run(s, (struct call){.method = "G\xc3T", .path = "/v1/log"}), 405, "method_not_allowed");
    expect_error(put(s, "/v1/records/k", "{\"value\":\"\xc3\x28\"}"), 400, "malformed_json");
    expect_error(put(s, "/v1/records/k", "{\"value\":1,\"\x01\":2}"), 400, "malformed_json");
    a = run(s, (struct call){.method = "GET", .path = "/healthz"});
    assert_int_equal(a.status, 200);
    assert_string_equal(jstr(&a, "status"), "ok");
    answer_clear(&a);
}

static void test_api_metrics_count_outcomes(void **state)
{
    sg_store *s = *state;
    unsigned long long acc = sg_metrics_get(SG_M_WRITES_ACCEPTED), st = sg_metrics_get(SG_M_WRITES_STALE);
    expect_status(put(s, "/v1/records/m", "{\"value\":1,\"token\":9}"), 200);
    expect_status(put(s, "/v1/records/m", "{\"value\":1,\"token\":8}"), 409);
    assert_int_equal(sg_metrics_get(SG_M_WRITES_ACCEPTED), acc + 1);
    assert_int_equal(sg_metrics_get(SG_M_WRITES_STALE), st + 1);
    sg_metrics_observe(200, 0.003);
    struct answer a = run(s, (struct call){.method = "GET", .path = "/metrics"});
    assert_int_equal(a.status, 200);
    assert_non_null(strstr(a.content_type, "text/plain"));
    char want[128];
    snprintf(want, sizeof(want), "storage_guard_writes_accepted_total %llu\n", acc + 1);
    assert_non_null(strstr(a.body, want));
    assert_non_null(strstr(a.body, "storage_guard_request_duration_seconds_bucket{le=\"0.005\"}"));
    assert_non_null(strstr(a.body, "storage_guard_request_duration_seconds_bucket{le=\"+Inf\"}"));
    answer_clear(&a);
}

#define T(f) cmocka_unit_test_setup_teardown(f, setup, teardown)

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_api_decode_percent_escapes),
        cmocka_unit_test(test_api_decode_refuses_nul_and_bad_escapes),
        cmocka_unit_test(test_api_parse_token_limits),
        T(test_api_put_accepts_and_answers_version),
        T(test_api_put_refuses_stale_token),
        T(test_api_put_accepts_equal_token),
        T(test_api_put_fences_per_resource),
        T(test_api_put_token_in_header),
        T(test_api_put_without_token_is_428),
        T(test_api_unfenced_accepts_stale_and_missing_tokens),
        T(test_api_put_refuses_bad_tokens),
        T(test_api_put_refuses_bad_bodies),
        T(test_api_value_kinds_round_trip),
        T(test_api_keys_are_decoded_and_bounded),
        T(test_api_hostile_keys_are_plain_bytes),
        T(test_api_fenced_read_raises_the_fence),
        T(test_api_reader_read_checks_without_raising),
        T(test_api_log_records_refused_writes),
        T(test_api_client_names_are_bytes),
        T(test_api_unknown_paths_and_methods),
        T(test_api_metrics_count_outcomes),
    };
    const struct CMUnitTest pg_tests[] = {T(test_api_pg_prepares_again),
                                          cmocka_unit_test(test_api_pg_refuses_unsafe_servers)};
    int failed = cmocka_run_group_tests(tests, sgd_backend_start, sgd_backend_stop);
    if (getenv("SG_TEST_DB") != NULL && strcmp(getenv("SG_TEST_DB"), "postgresql") == 0)
        failed += cmocka_run_group_tests(pg_tests, sgd_backend_start, sgd_backend_stop);
    return failed;
}
