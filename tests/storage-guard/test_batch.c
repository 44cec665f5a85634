/* storage-guard as a real process: fenced deletes, conditional writes
 * (ETag, If-Match, If-None-Match, if_version) and POST /v1/batch, all or
 * nothing under concurrency and across a kill -9. */
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

/* One request; fails the test unless the answer is JSON with this status
 * (and this error code unless NULL). The caller clears *r. */
static void req(uint16_t port, const char *method, const char *path, const char *headers, const char *body,
                int status, const char *code, struct hc_response *r)
{
    assert_int_equal(hc_request(port, method, path, headers, body, body ? strlen(body) : 0, r), 0);
    if (r->status != status)
        fail_msg("%s %s: want %d, got %d: %s", method, path, status, r->status, r->body ? r->body : "");
    if (r->json == NULL)
        fail_msg("%s %s: not JSON: %s", method, path, r->body ? r->body : "");
    if (code != NULL) {
        const char *got = json_string_value(json_object_get(r->json, "error"));
        if (got == NULL || strcmp(got, code) != 0)
            fail_msg("%s %s: want error %s, got %s", method, path, code, r->body);
        assert_true(json_is_string(json_object_get(r->json, "message")));
    }
}

static void expect(uint16_t port, const char *method, const char *path, const char *headers, const char *body,
                   int status, const char *code)
{
    struct hc_response r;
    req(port, method, path, headers, body, status, code, &r);
    hc_response_clear(&r);
}

static long long jint(const json_t *o, const char *name)
{
    json_t *v = json_object_get(o, name);
    if (!json_is_integer(v))
        fail_msg("no integer \"%s\"", name);
    return json_integer_value(v);
}

static long long fence_of(uint16_t port, const char *resource)
{
    char path[256];
    snprintf(path, sizeof(path), "/v1/fences/%s", resource);
    struct hc_response r;
    req(port, "GET", path, NULL, NULL, 200, NULL, &r);
    long long t = jint(r.json, "last_token");
    hc_response_clear(&r);
    return t;
}

/* The record's version and integer value; 0 and -1 when there is none. */
static long long version_of(uint16_t port, const char *key, long long *value)
{
    char path[256];
    snprintf(path, sizeof(path), "/v1/records/%s", key);
    struct hc_response r;
    assert_int_equal(hc_get(port, path, &r), 0);
    long long v = 0;
    if (value)
        *value = -1;
    if (r.status == 200) {
        v = jint(r.json, "version");
        if (value)
            *value = json_integer_value(json_object_get(r.json, "value"));
        char etag[32], want[32];
        assert_non_null(hc_header(&r, "ETag", etag, sizeof(etag)));
        snprintf(want, sizeof(want), "\"%lld\"", v);
        assert_string_equal(etag, want);
    } else if (r.status != 404) {
        fail_msg("GET %s: %d %s", path, r.status, r.body);
    }
    hc_response_clear(&r);
    return v;
}

/* Every log row (up to max), in seq order, as a JSON array (caller decrefs). */
static json_t *whole_log(uint16_t port, const char *filter)
{
    json_t *all = json_array();
    long long after = 0;
    for (int page = 0; page < 1000; page++) {
        char path[256];
        snprintf(path, sizeof(path), "/v1/log?after=%lld&limit=1000%s", after, filter ? filter : "");
        struct hc_response r;
        req(port, "GET", path, NULL, NULL, 200, NULL, &r);
        json_t *entries = json_object_get(r.json, "entries");
        size_t n = json_array_size(entries);
        for (size_t i = 0; i < n; i++)
            json_array_append(all, json_array_get(entries, i));
        after = jint(r.json, "next_after");
        hc_response_clear(&r);
        if (n == 0)
            return all;
    }
    fail_msg("the log did not end");
    return NULL;
}

/* The last row of the log. */
static json_t *last_row(uint16_t port)
{
    json_t *all = whole_log(port, NULL);
    assert_true(json_array_size(all) > 0);
    json_t *row = json_incref(json_array_get(all, json_array_size(all) - 1));
    json_decref(all);
    return row;
}

static void check_row(const json_t *row, const char *op, const char *key, long long token,
                      const char *outcome)
{
    const char *got_op = json_string_value(json_object_get(row, "op"));
    const char *got_key = json_string_value(json_object_get(row, "key"));
    const char *got_outcome = json_string_value(json_object_get(row, "outcome"));
    if (got_op == NULL || strcmp(got_op, op) != 0 || got_key == NULL || strcmp(got_key, key) != 0 ||
        got_outcome == NULL || strcmp(got_outcome, outcome) != 0 || jint(row, "token") != token) {
        char *text = json_dumps(row, JSON_COMPACT);
        fail_msg("want a %s row of %s with token %lld, %s; got %s", op, key, token, outcome, text);
    }
}

/* ---- DELETE ---- */

static void test_batch_delete_is_fenced_and_audited(void **state)
{
    struct sgd *d = *state;
    uint16_t p = d->port;
    expect(p, "PUT", "/v1/records/doc", NULL, "{\"value\":1,\"token\":10}", 200, NULL);

    expect(p, "DELETE", "/v1/records/doc", NULL, NULL, 428, "missing_token");
    expect(p, "DELETE", "/v1/records/doc?token=0", NULL, NULL, 428, "missing_token");
    expect(p, "DELETE", "/v1/records/doc?token=x", NULL, NULL, 400, "bad_token");
    expect(p, "DELETE", "/v1/records/doc?token=11", "Fencing-Token: 12\r\n", NULL, 400, "token_mismatch");
    expect(p, "DELETE", "/v1/records/doc?tokn=11", NULL, NULL, 400, "unknown_parameter");

    struct hc_response r;
    req(p, "DELETE", "/v1/records/doc?token=9", NULL, NULL, 409, "stale_token", &r);
    assert_int_equal(jint(r.json, "last_token"), 10);
    hc_response_clear(&r);
    assert_int_equal(version_of(p, "doc", NULL), 1);
    json_t *row = last_row(p);
    check_row(row, "delete", "doc", 9, "stale");
    json_decref(row);

    req(p, "DELETE", "/v1/records/doc", "Fencing-Token: 11\r\n", NULL, 200, NULL, &r);
    assert_true(json_is_true(json_object_get(r.json, "deleted")));
    assert_int_equal(jint(r.json, "version"), 1);
    assert_int_equal(jint(r.json, "previous_token"), 10);
    hc_response_clear(&r);
    assert_int_equal(version_of(p, "doc", NULL), 0);
    assert_int_equal(fence_of(p, "doc"), 11);
    row = last_row(p);
    check_row(row, "delete", "doc", 11, "accepted");
    assert_int_equal(jint(row, "version"), 1);
    json_decref(row);

    /* A second delete still admits its token, and says there is nothing. */
    expect(p, "DELETE", "/v1/records/doc?token=12", NULL, NULL, 404, "not_found");
    assert_int_equal(fence_of(p, "doc"), 12);
    row = last_row(p);
    check_row(row, "delete", "doc", 12, "not_found");
    json_decref(row);

    /* The old holder cannot bring the record back. */
    expect(p, "PUT", "/v1/records/doc", NULL, "{\"value\":2,\"token\":10}", 409, "stale_token");
    assert_int_equal(version_of(p, "doc", NULL), 0);
    /* A new record goes on from the deleted version. */
    req(p, "PUT", "/v1/records/doc", NULL, "{\"value\":3,\"token\":12}", 200, NULL, &r);
    assert_int_equal(jint(r.json, "version"), 2);
    hc_response_clear(&r);

    /* A shared resource, from the query or the body. */
    expect(p, "PUT", "/v1/records/a1", NULL, "{\"value\":1,\"token\":50,\"resource\":\"shop\"}", 200, NULL);
    expect(p, "DELETE", "/v1/records/a1?token=49&resource=shop", NULL, NULL, 409, "stale_token");
    expect(p, "DELETE", "/v1/records/a1", NULL, "{\"token\":49,\"resource\":\"shop\"}", 409, "stale_token");
    expect(p, "DELETE", "/v1/records/a1?resource=shop", NULL, "{\"token\":51,\"resource\":\"shop\"}", 400,
           "bad_resource");
    expect(p, "DELETE", "/v1/records/a1", NULL, "{\"token\":51,\"value\":1}", 400, "unknown_field");
    expect(p, "DELETE", "/v1/records/a1", NULL, "[1]", 400, "bad_body");
    expect(p, "DELETE", "/v1/records/a1", NULL, "{\"token\":51,\"resource\":\"shop\"}", 200, NULL);
    assert_int_equal(fence_of(p, "shop"), 51);
}

/* ---- conditional writes ---- */

static void test_batch_conditional_writes(void **state)
{
    struct sgd *d = *state;
    uint16_t p = d->port;
    struct hc_response r;

    /* Create-only. */
    req(p, "PUT", "/v1/records/c", "If-None-Match: *\r\n", "{\"value\":1,\"token\":5}", 200, NULL, &r);
    char etag[32];
    assert_non_null(hc_header(&r, "ETag", etag, sizeof(etag)));
    assert_string_equal(etag, "\"1\"");
    hc_response_clear(&r);
    req(p, "PUT", "/v1/records/c", "If-None-Match: *\r\n", "{\"value\":2,\"token\":6}", 412,
        "version_mismatch", &r);
    assert_int_equal(jint(r.json, "expected"), 0);
    assert_int_equal(jint(r.json, "version"), 1);
    hc_response_clear(&r);

    /* If-Match with the version read. */
    assert_int_equal(version_of(p, "c", NULL), 1);
    expect(p, "PUT", "/v1/records/c", "If-Match: \"1\"\r\n", "{\"value\":2,\"token\":5}", 200, NULL);
    /* A writer that read version 1 too is refused, and its higher token
     * raised nothing: a failed precondition writes nothing at all. */
    req(p, "PUT", "/v1/records/c", "If-Match: \"1\"\r\n", "{\"value\":3,\"token\":7}", 412,
        "version_mismatch", &r);
    assert_int_equal(jint(r.json, "expected"), 1);
    assert_int_equal(jint(r.json, "version"), 2);
    hc_response_clear(&r);
    assert_int_equal(fence_of(p, "c"), 5);
    long long value = 0;
    assert_int_equal(version_of(p, "c", &value), 2);
    assert_int_equal(value, 2);
    json_t *row = last_row(p);
    check_row(row, "write", "c", 7, "mismatch");
    json_decref(row);

    /* The same in the body; any existing version with If-Match: *. */
    expect(p, "PUT", "/v1/records/c", NULL, "{\"value\":4,\"token\":5,\"if_version\":1}", 412,
           "version_mismatch");
    expect(p, "PUT", "/v1/records/c", NULL, "{\"value\":4,\"token\":5,\"if_version\":2}", 200, NULL);
    expect(p, "PUT", "/v1/records/c", "If-Match: *\r\n", "{\"value\":5,\"token\":5}", 200, NULL);
    expect(p, "PUT", "/v1/records/none", "If-Match: *\r\n", "{\"value\":5,\"token\":5}", 412,
           "version_mismatch");
    expect(p, "PUT", "/v1/records/none", NULL, "{\"value\":5,\"token\":5,\"if_version\":0}", 200, NULL);
    /* A token check comes first: a stale token is 409 whatever the version. */
    expect(p, "PUT", "/v1/records/c", "If-Match: \"4\"\r\n", "{\"value\":6,\"token\":4}", 409, "stale_token");

    /* Preconditions that cannot be understood are refused. */
    expect(p, "PUT", "/v1/records/c", "If-Match: W/\"4\"\r\n", "{\"value\":6,\"token\":5}", 400,
           "bad_precondition");
    expect(p, "PUT", "/v1/records/c", "If-Match: \"4\", \"5\"\r\n", "{\"value\":6,\"token\":5}", 400,
           "bad_precondition");
    expect(p, "PUT", "/v1/records/c", "If-Match: 4\r\n", "{\"value\":6,\"token\":5}", 400,
           "bad_precondition");
    expect(p, "PUT", "/v1/records/c", "If-Match: \"0\"\r\n", "{\"value\":6,\"token\":5}", 400,
           "bad_precondition");
    expect(p, "PUT", "/v1/records/c", "If-None-Match: \"4\"\r\n", "{\"value\":6,\"token\":5}", 400,
           "bad_precondition");
    expect(p, "PUT", "/v1/records/c", "If-Match: \"4\"\r\nIf-None-Match: *\r\n", "{\"value\":6,\"token\":5}",
           400, "bad_precondition");
    expect(p, "PUT", "/v1/records/c", "If-Match: \"4\"\r\nIf-Match: \"4\"\r\n", "{\"value\":6,\"token\":5}",
           400, "bad_precondition");
    expect(p, "PUT", "/v1/records/c", "If-Match: \"4\"\r\n", "{\"value\":6,\"token\":5,\"if_version\":3}",
           400, "bad_precondition");
    expect(p, "PUT", "/v1/records/c", NULL, "{\"value\":6,\"token\":5,\"if_version\":-1}", 400,
           "bad_precondition");
    expect(p, "PUT", "/v1/records/c", NULL, "{\"value\":6,\"token\":5,\"if_version\":\"4\"}", 400,
           "bad_precondition");
    assert_int_equal(version_of(p, "c", NULL), 4);

    /* DELETE takes the same preconditions. */
    expect(p, "DELETE", "/v1/records/c?token=5", "If-Match: \"3\"\r\n", NULL, 412, "version_mismatch");
    expect(p, "DELETE", "/v1/records/c", NULL, "{\"token\":5,\"if_version\":3}", 412, "version_mismatch");
    assert_int_equal(version_of(p, "c", NULL), 4);
    expect(p, "DELETE", "/v1/records/c?token=5", "If-Match: \"4\"\r\n", NULL, 200, NULL);
    assert_int_equal(version_of(p, "c", NULL), 0);
    /* An If-Match taken before the delete never matches the key's next
     * record: its versions go on from the deleted one. */
    expect(p, "PUT", "/v1/records/c", NULL, "{\"value\":7,\"token\":5}", 200, NULL);
    expect(p, "PUT", "/v1/records/c", "If-Match: \"1\"\r\n", "{\"value\":8,\"token\":5}", 412,
           "version_mismatch");
    assert_int_equal(version_of(p, "c", NULL), 5);
}

/* ---- batches ---- */

static const char *result_outcome(const json_t *answer, size_t i)
{
    return json_string_value(
        json_object_get(json_array_get(json_object_get(answer, "results"), i), "outcome"));
}

static void test_batch_applies_all_or_nothing(void **state)
{
    struct sgd *d = *state;
    uint16_t p = d->port;
    struct hc_response r;
    expect(p, "PUT", "/v1/records/k1", NULL, "{\"value\":1,\"token\":100}", 200, NULL);
    expect(p, "PUT", "/v1/records/k3", NULL, "{\"value\":3,\"token\":100}", 200, NULL);

    /* The example of the docs: a put, a conditional delete and a check. */
    req(p, "POST", "/v1/batch", NULL,
        "{\"token\":200,\"ops\":[{\"op\":\"put\",\"key\":\"k2\",\"value\":2},"
        "{\"op\":\"delete\",\"key\":\"k1\",\"if_version\":1},{\"op\":\"check\",\"key\":\"k3\",\"version\":1}]"
        "}",
        200, NULL, &r);
    json_t *res = json_object_get(r.json, "results");
    assert_int_equal(json_array_size(res), 3);
    for (size_t i = 0; i < 3; i++)
        assert_string_equal(result_outcome(r.json, i), "accepted");
    assert_int_equal(jint(json_array_get(res, 0), "version"), 1);
    assert_int_equal(jint(json_array_get(res, 1), "version"), 1);
    assert_int_equal(jint(json_array_get(res, 2), "version"), 1);
    long long batch = jint(r.json, "batch");
    hc_response_clear(&r);
    assert_int_equal(version_of(p, "k1", NULL), 0);
    assert_int_equal(version_of(p, "k2", NULL), 1);
    assert_int_equal(fence_of(p, "k1"), 200);
    assert_int_equal(fence_of(p, "k2"), 200);
    assert_int_equal(fence_of(p, "k3"), 200);
    json_t *log = whole_log(p, NULL);
    size_t n = json_array_size(log);
    const char *ops[] = {"write", "delete", "check"}, *keys[] = {"k2", "k1", "k3"};
    for (size_t i = 0; i < 3; i++) {
        json_t *row = json_array_get(log, n - 3 + i);
        check_row(row, ops[i], keys[i], 200, "accepted");
        assert_int_equal(jint(row, "batch"), batch);
    }
    assert_int_equal(jint(json_array_get(log, n - 3), "seq"), batch);
    json_decref(log);

    /* A failed check: nothing written, no fence raised, every row logged. */
    req(p, "POST", "/v1/batch", NULL,
        "{\"token\":300,\"ops\":[{\"op\":\"put\",\"key\":\"k2\",\"value\":22},"
        "{\"op\":\"put\",\"key\":\"k4\",\"value\":4,\"resource\":\"other\"},"
        "{\"op\":\"check\",\"key\":\"k3\",\"version\":7}]}",
        412, "version_mismatch", &r);
    assert_int_equal(jint(r.json, "index"), 2);
    assert_int_equal(jint(r.json, "expected"), 7);
    assert_int_equal(jint(r.json, "version"), 1);
    assert_string_equal(result_outcome(r.json, 0), "aborted");
    assert_string_equal(result_outcome(r.json, 1), "aborted");
    assert_string_equal(result_outcome(r.json, 2), "mismatch");
    hc_response_clear(&r);
    long long value = 0;
    assert_int_equal(version_of(p, "k2", &value), 1);
    assert_int_equal(value, 2);
    assert_int_equal(version_of(p, "k4", NULL), 0);
    assert_int_equal(fence_of(p, "k2"), 200);
    assert_int_equal(fence_of(p, "other"), 0);
    json_t *row = last_row(p);
    check_row(row, "check", "k3", 300, "mismatch");
    json_decref(row);

    /* Ops see the ones before them: a check after a put sees its version. */
    req(p, "POST", "/v1/batch", "Fencing-Token: 300\r\n",
        "{\"ops\":[{\"op\":\"put\",\"key\":\"k2\",\"value\":23,\"if_version\":1},"
        "{\"op\":\"check\",\"key\":\"k2\",\"version\":2},{\"op\":\"check\",\"key\":\"gone\",\"version\":0}]}",
        200, NULL, &r);
    hc_response_clear(&r);

    /* Stale for one of its resources: nothing, not even the fresh resource's
     * fence, moves. */
    expect(p, "PUT", "/v1/records/hot", NULL, "{\"value\":1,\"token\":1000}", 200, NULL);
    req(p, "POST", "/v1/batch", NULL,
        "{\"token\":400,\"ops\":[{\"op\":\"put\",\"key\":\"cold\",\"value\":1},"
        "{\"op\":\"delete\",\"key\":\"hot\"}]}",
        409, "stale_token", &r);
    assert_int_equal(jint(r.json, "index"), 1);
    assert_int_equal(jint(r.json, "last_token"), 1000);
    assert_string_equal(json_string_value(json_object_get(r.json, "resource")), "hot");
    assert_string_equal(result_outcome(r.json, 0), "stale");
    assert_string_equal(result_outcome(r.json, 1), "stale");
    hc_response_clear(&r);
    assert_int_equal(version_of(p, "cold", NULL), 0);
    assert_int_equal(version_of(p, "hot", NULL), 1);
    assert_int_equal(fence_of(p, "cold"), 0);
    log = whole_log(p, NULL);
    n = json_array_size(log);
    check_row(json_array_get(log, n - 2), "write", "cold", 400, "stale");
    check_row(json_array_get(log, n - 1), "delete", "hot", 400, "stale");
    json_decref(log);

    /* Deleting a key with no record does not fail a batch. */
    req(p, "POST", "/v1/batch", NULL,
        "{\"token\":1000,\"ops\":[{\"op\":\"delete\",\"key\":\"hot\"},"
        "{\"op\":\"delete\",\"key\":\"hot\"}]}",
        200, NULL, &r);
    assert_string_equal(result_outcome(r.json, 0), "accepted");
    assert_string_equal(result_outcome(r.json, 1), "not_found");
    hc_response_clear(&r);
}

static void test_batch_refuses_hostile_input(void **state)
{
    struct sgd *d = *state;
    uint16_t p = d->port;
    const char *B = "/v1/batch";
    expect(p, "GET", B, NULL, NULL, 405, "method_not_allowed");
    expect(p, "PUT", B, NULL, "{}", 405, "method_not_allowed");
    expect(p, "POST", B, NULL, "", 400, "malformed_json");
    expect(p, "POST", B, NULL, "{\"token\":1,\"ops\":[", 400, "malformed_json");
    expect(p, "POST", B, NULL, "[]", 400, "bad_body");
    expect(p, "POST", B, NULL, "{\"token\":1}", 400, "bad_batch");
    expect(p, "POST", B, NULL, "{\"token\":1,\"ops\":[]}", 400, "bad_batch");
    expect(p, "POST", B, NULL, "{\"token\":1,\"ops\":{}}", 400, "bad_batch");
    expect(p, "POST", B, NULL, "{\"token\":1,\"ops\":[1]}", 400, "bad_batch");
    expect(p, "POST", B, NULL, "{\"ops\":[{\"op\":\"check\",\"key\":\"k\",\"version\":0}]}", 428,
           "missing_token");
    expect(p, "POST", B, NULL, "{\"token\":\"1\",\"ops\":[{\"op\":\"check\",\"key\":\"k\",\"version\":0}]}",
           400, "bad_token");
    expect(p, "POST", B, NULL,
           "{\"token\":9007199254740992,\"ops\":[{\"op\":\"check\",\"key\":\"k\",\"version\":0}]}", 400,
           "token_out_of_range");
    expect(p, "POST", B, "Fencing-Token: 2\r\n",
           "{\"token\":1,\"ops\":[{\"op\":\"check\",\"key\":\"k\",\"version\":0}]}", 400, "token_mismatch");
    expect(p, "POST", B, NULL, "{\"token\":1,\"token\":2,\"ops\":[]}", 400, "malformed_json");
    expect(p, "POST", B, NULL, "{\"token\":1,\"ops\":[],\"extra\":1}", 400, "unknown_field");
    expect(p, "POST", B, NULL, "{\"token\":1,\"ops\":[{\"op\":\"merge\",\"key\":\"k\"}]}", 400, "bad_batch");
    expect(p, "POST", B, NULL, "{\"token\":1,\"ops\":[{\"op\":\"put\",\"key\":\"k\"}]}", 400,
           "missing_value");
    expect(p, "POST", B, NULL, "{\"token\":1,\"ops\":[{\"op\":\"put\",\"value\":1}]}", 400, "bad_key");
    expect(p, "POST", B, NULL, "{\"token\":1,\"ops\":[{\"op\":\"put\",\"key\":\"\",\"value\":1}]}", 400,
           "bad_key");
    expect(p, "POST", B, NULL, "{\"token\":1,\"ops\":[{\"op\":\"put\",\"key\":\"a\\u0000b\",\"value\":1}]}",
           400, "bad_key");
    expect(p, "POST", B, NULL, "{\"token\":1,\"ops\":[{\"op\":\"put\",\"key\":7,\"value\":1}]}", 400,
           "bad_key");
    expect(p, "POST", B, NULL,
           "{\"token\":1,\"ops\":[{\"op\":\"put\",\"key\":\"k\",\"value\":1,\"resource\":\"\"}]}", 400,
           "bad_resource");
    expect(p, "POST", B, NULL, "{\"token\":1,\"ops\":[{\"op\":\"check\",\"key\":\"k\"}]}", 400, "bad_batch");
    expect(p, "POST", B, NULL, "{\"token\":1,\"ops\":[{\"op\":\"check\",\"key\":\"k\",\"version\":-1}]}", 400,
           "bad_precondition");
    expect(p, "POST", B, NULL, "{\"token\":1,\"ops\":[{\"op\":\"check\",\"key\":\"k\",\"if_version\":1}]}",
           400, "bad_batch");
    expect(p, "POST", B, NULL, "{\"token\":1,\"ops\":[{\"op\":\"delete\",\"key\":\"k\",\"version\":1}]}", 400,
           "bad_batch");
    expect(p, "POST", B, NULL, "{\"token\":1,\"ops\":[{\"op\":\"delete\",\"key\":\"k\",\"value\":1}]}", 400,
           "bad_batch");
    expect(p, "POST", B, NULL,
           "{\"token\":1,\"ops\":[{\"op\":\"put\",\"key\":\"k\",\"value\":1,\"tokn\":1}]}", 400,
           "unknown_field");
    expect(p, "POST", "/v1/batch?token=1", NULL, "{\"token\":1,\"ops\":[]}", 400, "unknown_parameter");

    /* One op over the bound. */
    size_t cap = 64 * 1024;
    char *body = malloc(cap);
    assert_non_null(body);
    size_t len = (size_t)snprintf(body, cap, "{\"token\":1,\"ops\":[");
    for (int i = 0; i < 101; i++)
        len += (size_t)snprintf(body + len, cap - len, "%s{\"op\":\"check\",\"key\":\"k%d\",\"version\":0}",
                                i ? "," : "", i);
    snprintf(body + len, cap - len, "]}");
    expect(p, "POST", B, NULL, body, 400, "too_many_ops");
    /* A body over --max-body, declared or not. */
    char *big = malloc(MAX_BODY + 100);
    assert_non_null(big);
    memset(big, ' ', MAX_BODY + 99);
    big[MAX_BODY + 99] = '\0';
    big[0] = '{';
    big[MAX_BODY + 98] = '}';
    expect(p, "POST", B, NULL, big, 413, "body_too_large");
    /* Deep nesting. */
    memset(big, '[', 5000);
    big[5000] = '\0';
    expect(p, "POST", B, NULL, big, 400, "malformed_json");
    free(big);
    free(body);
    /* Nothing of it reached the log, and the server still serves. */
    json_t *log = whole_log(p, NULL);
    assert_int_equal(json_array_size(log), 0);
    json_decref(log);
    expect(p, "POST", B, NULL, "{\"token\":1,\"ops\":[{\"op\":\"put\",\"key\":\"k\",\"value\":1}]}", 200,
           NULL);
}

/* ---- concurrency: transfers between overlapping accounts ---- */

#define ACCOUNTS 4
#define MOVERS 8
#define MOVES_EACH 40
#define START_BALANCE 1000

struct mover {
    uint16_t port;
    unsigned seed;
    int stale; /* uses a token below the fence: every batch must be refused */
    int applied, mismatched, refused, failed;
};

static void *mover_main(void *arg)
{
    struct mover *m = arg;
    long long deadline = hp_now_ms() + 60000;
    for (int i = 0; i < MOVES_EACH && hp_now_ms() < deadline; i++) {
        int a = (int)(rand_r(&m->seed) % ACCOUNTS), b = (int)(rand_r(&m->seed) % (ACCOUNTS - 1));
        if (b >= a)
            b++;
        char ka[16], kb[16];
        snprintf(ka, sizeof(ka), "acct%d", a);
        snprintf(kb, sizeof(kb), "acct%d", b);
        long long va = 0, vb = 0, ver_a = 0, ver_b = 0;
        ver_a = version_of(m->port, ka, &va);
        ver_b = version_of(m->port, kb, &vb);
        char body[512];
        /* All accounts share one lock, "bank"; a third op checks an
         * account that is not touched, so batches also fail on it. */
        int c = (a + b + 1) % ACCOUNTS == a || (a + b + 1) % ACCOUNTS == b ? -1 : (a + b + 1) % ACCOUNTS;
        char check[128] = "";
        if (c >= 0)
            snprintf(check, sizeof(check),
                     ",{\"op\":\"check\",\"key\":\"acct%d\",\"version\":%lld,\"resource\":\"bank\"}", c,
                     (long long)(rand_r(&m->seed) % 2 ? 0 : 1));
        snprintf(body, sizeof(body),
                 "{\"token\":%d,\"ops\":[{\"op\":\"put\",\"key\":\"%s\",\"value\":%lld,\"if_version\":%lld,"
                 "\"resource\":\"bank\"},{\"op\":\"put\",\"key\":\"%s\",\"value\":%lld,\"if_version\":%lld,"
                 "\"resource\":\"bank\"}%s]}",
                 m->stale ? 1 : 5, ka, va - 1, ver_a, kb, vb + 1, ver_b,
                 c >= 0 && rand_r(&m->seed) % 4 == 0 ? check : "");
        struct hc_response r;
        int rc = hc_request(m->port, "POST", "/v1/batch", NULL, body, strlen(body), &r);
        if (rc != 0)
            m->failed++;
        else if (r.status == 200)
            m->applied++;
        else if (r.status == 412)
            m->mismatched++;
        else if (r.status == 409)
            m->refused++;
        else
            m->failed++;
        hc_response_clear(&r);
    }
    return NULL;
}

static void test_batch_concurrent_transfers_are_all_or_nothing(void **state)
{
    struct sgd *d = *state;
    uint16_t p = d->port;
    for (int i = 0; i < ACCOUNTS; i++) {
        char path[64], body[64];
        snprintf(path, sizeof(path), "/v1/records/acct%d", i);
        snprintf(body, sizeof(body), "{\"value\":%d,\"token\":5,\"resource\":\"bank\"}", START_BALANCE);
        expect(p, "PUT", path, NULL, body, 200, NULL);
    }
    long long log_start = 0;
    json_t *before = whole_log(p, NULL);
    log_start = (long long)json_array_size(before);
    json_decref(before);

    static struct mover m[MOVERS];
    pthread_t th[MOVERS];
    for (int i = 0; i < MOVERS; i++) {
        m[i] = (struct mover){.port = p, .seed = 104729u * (unsigned)(i + 1), .stale = i == 0};
        assert_int_equal(pthread_create(&th[i], NULL, mover_main, &m[i]), 0);
    }
    int applied = 0, mismatched = 0, refused = 0;
    for (int i = 0; i < MOVERS; i++) {
        pthread_join(th[i], NULL);
        assert_int_equal(m[i].failed, 0);
        applied += m[i].applied;
        mismatched += m[i].mismatched;
        refused += m[i].refused;
    }
    assert_int_equal(m[0].refused, MOVES_EACH);
    assert_int_equal(applied + mismatched + refused, MOVERS * MOVES_EACH);
    assert_true(applied > 0);
    print_message("%d batches applied, %d refused on a version, %d on a stale token\n", applied, mismatched,
                  refused);

    /* Money is neither made nor lost, and the versions count the moves. */
    long long sum = 0, versions = 0;
    for (int i = 0; i < ACCOUNTS; i++) {
        char key[16];
        long long v = 0;
        snprintf(key, sizeof(key), "acct%d", i);
        versions += version_of(p, key, &v);
        sum += v;
    }
    assert_int_equal(sum, ACCOUNTS * START_BALANCE);
    assert_int_equal(versions, ACCOUNTS + 2 * applied);

    /* The log: every batch's rows are together, all accepted or none. */
    json_t *log = whole_log(p, NULL);
    size_t n = json_array_size(log);
    int batches_ok = 0, batches_bad = 0;
    for (size_t i = (size_t)log_start; i < n;) {
        long long batch = jint(json_array_get(log, i), "batch");
        assert_int_equal(batch, jint(json_array_get(log, i), "seq"));
        int accepted = 0, rows = 0, stale = 0;
        for (; i < n && jint(json_array_get(log, i), "batch") == batch; i++, rows++) {
            const char *o = json_string_value(json_object_get(json_array_get(log, i), "outcome"));
            accepted += strcmp(o, "accepted") == 0;
            stale += strcmp(o, "stale") == 0;
        }
        assert_true(rows == 2 || rows == 3);
        assert_true(accepted == 0 || accepted == rows);
        assert_true(stale == 0 || stale == rows);
        if (accepted)
            batches_ok++;
        else
            batches_bad++;
    }
    json_decref(log);
    assert_int_equal(batches_ok, applied);
    assert_int_equal(batches_bad, mismatched + refused);
    assert_int_equal(fence_of(p, "bank"), 5);
}

/* ---- kill -9 during a stream of batches ---- */

#define STREAMS 4
#define STREAM_MAX 300

struct streamer {
    uint16_t port;
    int id;
    int acked; /* batches 0..acked-1 were answered 200 */
    int errors;
};

/* Batch i of stream t puts "s<t>-<i>-a" and "s<t>-<i>-b" and moves the
 * shared "s<t>-head" (value i) with if_version i (version i + 1 after it). */
static void *stream_main(void *arg)
{
    struct streamer *s = arg;
    long long deadline = hp_now_ms() + 8000;
    for (int i = 0; i < STREAM_MAX && hp_now_ms() < deadline; i++) {
        char body[512];
        snprintf(
            body, sizeof(body),
            "{\"token\":%d,\"ops\":[{\"op\":\"put\",\"key\":\"s%d-%d-a\",\"value\":%d,\"resource\":\"s%d\"},"
            "{\"op\":\"put\",\"key\":\"s%d-head\",\"value\":%d,\"if_version\":%d,\"resource\":\"s%d\"},"
            "{\"op\":\"put\",\"key\":\"s%d-%d-b\",\"value\":%d,\"resource\":\"s%d\"}]}",
            i + 1, s->id, i, i, s->id, s->id, i, i, s->id, s->id, i, i, s->id);
        struct hc_response r;
        int rc = hc_request(s->port, "POST", "/v1/batch", NULL, body, strlen(body), &r);
        int status = rc == 0 ? r.status : 0;
        hc_response_clear(&r);
        if (status != 200) {
            s->errors++;
            break;
        }
        s->acked = i + 1;
    }
    return NULL;
}

static void test_batch_kill9_keeps_batches_whole(void **state)
{
    struct sgd *d = *state;
    struct streamer s[STREAMS];
    pthread_t th[STREAMS];
    for (int i = 0; i < STREAMS; i++) {
        s[i] = (struct streamer){.port = d->port, .id = i};
        assert_int_equal(pthread_create(&th[i], NULL, stream_main, &s[i]), 0);
    }
    long long deadline = hp_now_ms() + 5000;
    for (;;) {
        int total = 0;
        for (int i = 0; i < STREAMS; i++)
            total += s[i].acked;
        if (total >= 60 || hp_now_ms() > deadline)
            break;
        hp_sleep_ms(2);
    }
    sgd_kill9(d);
    for (int i = 0; i < STREAMS; i++)
        pthread_join(th[i], NULL);
    sgd_start(d, NULL);

    int total = 0, interrupted = 0, unanswered_committed = 0;
    for (int t = 0; t < STREAMS; t++) {
        total += s[t].acked;
        interrupted += s[t].errors;
        char key[64];
        snprintf(key, sizeof(key), "s%d-head", t);
        long long head = -1;
        long long hv = version_of(d->port, key, &head);
        /* Every answered batch is there; at most the one in flight besides. */
        assert_true(hv == head + 1);
        assert_true(head >= s[t].acked - 1 && head <= s[t].acked);
        unanswered_committed += head == s[t].acked;
        for (int i = 0; i <= s[t].acked; i++) {
            long long va = -1, vb = -1;
            snprintf(key, sizeof(key), "s%d-%d-a", t, i);
            long long ver_a = version_of(d->port, key, &va);
            snprintf(key, sizeof(key), "s%d-%d-b", t, i);
            long long ver_b = version_of(d->port, key, &vb);
            /* Whole or absent, never half. */
            assert_int_equal(ver_a, ver_b);
            if (i <= head) {
                assert_int_equal(ver_a, 1);
                assert_int_equal(va, i);
                assert_int_equal(vb, i);
            } else {
                assert_int_equal(ver_a, 0);
            }
        }
    }
    /* The audit log holds whole batches only: three accepted rows each, the
     * first one's seq naming the batch. (On PostgreSQL the rows of batches
     * on different resources may interleave.) */
    json_t *log = whole_log(d->port, NULL);
    size_t n = json_array_size(log);
    assert_int_equal(n % 3, 0);
    for (size_t i = 0; i < n; i++) {
        json_t *row = json_array_get(log, i);
        long long batch = jint(row, "batch");
        assert_string_equal(json_string_value(json_object_get(row, "outcome")), "accepted");
        int rows = 0;
        long long first = -1;
        for (size_t j = 0; j < n; j++) {
            if (jint(json_array_get(log, j), "batch") != batch)
                continue;
            if (rows++ == 0)
                first = jint(json_array_get(log, j), "seq");
        }
        assert_int_equal(rows, 3);
        assert_int_equal(first, batch);
    }
    assert_int_equal((int)n / 3, total + unanswered_committed);
    json_decref(log);
    assert_true(total >= 8);
    assert_true(interrupted > 0);
    print_message("%d answered batches, all whole after the restart (%d committed but unanswered)\n", total,
                  unanswered_committed);
}

#define T(f) cmocka_unit_test_setup_teardown(f, setup, teardown)

int main(void)
{
    const struct CMUnitTest tests[] = {
        T(test_batch_delete_is_fenced_and_audited),
        T(test_batch_conditional_writes),
        T(test_batch_applies_all_or_nothing),
        T(test_batch_refuses_hostile_input),
        T(test_batch_concurrent_transfers_are_all_or_nothing),
        T(test_batch_kill9_keeps_batches_whole),
    };
    return cmocka_run_group_tests(tests, sgd_backend_start, sgd_backend_stop);
}
