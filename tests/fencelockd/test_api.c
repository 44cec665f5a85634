/*
 * fencelockd's request mapping without sockets or nodes: routes, kinds,
 * bodies, lock ids, and the answers built from lockcore's results.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>
#include <jansson.h>

#include "api.h"

static const struct fld_limits lim = {10000, 3600000, 60000};

static const char id40[] = "0123456789abcdef0123456789abcdef01234567";

/* Parse; returns the status (0 when accepted) and the error code in code. */
static int parse(const char *method, const char *path, const char *body, const struct fencehttp_arg *args,
                 size_t n_args, struct fld_op *op, char *code, size_t cap)
{
    struct fld_request req = {.method = method,
                              .path = path,
                              .args = args,
                              .n_args = n_args,
                              .body = body,
                              .body_len = body ? strlen(body) : 0};
    struct fencehttp_response resp = {0};
    int rc = fld_api_parse(&req, &lim, op, &resp);
    code[0] = '\0';
    if (rc != 0) {
        json_t *j = json_loadb(resp.body, resp.body_len, 0, NULL);
        assert_non_null(j); /* every refusal is JSON */
        snprintf(code, cap, "%s", json_string_value(json_object_get(j, "error")));
        assert_int_equal(resp.status, rc);
        json_decref(j);
    }
    fencehttp_response_clear(&resp);
    return rc;
}

static void api_routes(void **state)
{
    (void)state;
    struct fld_op op;
    char code[64];
    assert_int_equal(parse("POST", "/v1/locks/a%2Fb", NULL, NULL, 0, &op, code, sizeof(code)), 0);
    assert_int_equal(op.route, FLD_ROUTE_ACQUIRE);
    assert_string_equal(op.resource, "a/b");
    assert_int_equal(op.ttl_ms, 10000);
    assert_int_equal(op.wait_ms, 0);
    assert_int_equal(op.kind, FLD_KIND_PLAIN);

    char path[256];
    snprintf(path, sizeof(path), "/v1/locks/r/%s/extend", id40);
    assert_int_equal(parse("POST", path, "{\"ttl_ms\":500}", NULL, 0, &op, code, sizeof(code)), 0);
    assert_int_equal(op.route, FLD_ROUTE_EXTEND);
    assert_int_equal(op.ttl_ms, 500);
    assert_string_equal(op.lock_id, id40);

    snprintf(path, sizeof(path), "/v1/locks/a%%0Ab/%s", id40);
    struct fencehttp_arg kind = {"kind", "multi"};
    assert_int_equal(parse("DELETE", path, NULL, &kind, 1, &op, code, sizeof(code)), 0);
    assert_int_equal(op.route, FLD_ROUTE_RELEASE);
    assert_int_equal(op.kind, FLD_KIND_MULTI);
    assert_int_equal(op.n_names, 2);
    assert_string_equal(op.names[1], "b");

    struct fencehttp_arg sem[] = {{"kind", "semaphore"}, {"permits", "3"}};
    assert_int_equal(parse("GET", "/v1/locks/pool", NULL, sem, 2, &op, code, sizeof(code)), 0);
    assert_int_equal(op.route, FLD_ROUTE_STATUS);
    assert_int_equal(op.status_kind, 's');
    assert_int_equal(op.permits, 3);

    assert_int_equal(parse("GET", "/healthz", NULL, NULL, 0, &op, code, sizeof(code)), 0);
    assert_int_equal(op.route, FLD_ROUTE_HEALTH);
    assert_int_equal(parse("GET", "/metrics", NULL, NULL, 0, &op, code, sizeof(code)), 0);
    assert_int_equal(op.route, FLD_ROUTE_METRICS);
}

static void api_acquire_bodies(void **state)
{
    (void)state;
    struct fld_op op;
    char code[64];
    assert_int_equal(parse("POST", "/v1/locks/r",
                           "{\"ttl_ms\":2000,\"wait_ms\":1500,\"wait\":\"fair\",\"kind\":\"write\"}", NULL, 0,
                           &op, code, sizeof(code)),
                     0);
    assert_int_equal(op.ttl_ms, 2000);
    assert_int_equal(op.wait_ms, 1500);
    assert_int_equal(op.wait_mode, LOCKCORE_WAIT_FAIR);
    assert_int_equal(op.kind, FLD_KIND_WRITE);

    assert_int_equal(
        parse("POST", "/v1/locks", "{\"resources\":[\"x\",\"y\",\"z\"]}", NULL, 0, &op, code, sizeof(code)),
        0);
    assert_int_equal(op.kind, FLD_KIND_MULTI);
    assert_string_equal(op.resource, "x\ny\nz");
    assert_int_equal(op.n_names, 3);

    char body[128];
    snprintf(body, sizeof(body), "{\"kind\":\"reentrant\",\"lock_id\":\"%s\"}", id40);
    assert_int_equal(parse("POST", "/v1/locks/r", body, NULL, 0, &op, code, sizeof(code)), 0);
    assert_string_equal(op.lock_id, id40);

    assert_int_equal(parse("POST", "/v1/locks/r", "{\"kind\":\"semaphore\",\"permits\":4}", NULL, 0, &op,
                           code, sizeof(code)),
                     0);
    assert_int_equal(op.kind, FLD_KIND_PERMIT);
    assert_int_equal(op.permits, 4);
}

static void api_refusals(void **state)
{
    (void)state;
    struct fld_op op;
    char code[64], path[256];
    static const struct {
        const char *method, *path, *body;
        int status;
        const char *code;
    } cases[] = {
        {"POST", "/v1/locks/r", "{", 400, "bad_json"},
        {"POST", "/v1/locks/r", "[1]", 400, "bad_body"},
        {"POST", "/v1/locks/r", "{\"ttl\":1}", 400, "bad_body"},
        {"POST", "/v1/locks/r", "{\"ttl_ms\":0}", 400, "bad_body"},
        {"POST", "/v1/locks/r", "{\"ttl_ms\":\"5\"}", 400, "bad_body"},
        {"POST", "/v1/locks/r", "{\"ttl_ms\":3600001}", 400, "bad_body"},
        {"POST", "/v1/locks/r", "{\"wait_ms\":60001}", 400, "bad_body"},
        {"POST", "/v1/locks/r", "{\"wait_ms\":-1}", 400, "bad_body"},
        {"POST", "/v1/locks/r", "{\"ttl_ms\":1,\"ttl_ms\":2}", 400, "bad_json"},
        {"POST", "/v1/locks/r", "{\"wait\":\"soon\"}", 400, "bad_body"},
        {"POST", "/v1/locks/r", "{\"kind\":\"exclusive\"}", 400, "bad_kind"},
        {"POST", "/v1/locks/r", "{\"kind\":\"semaphore\"}", 400, "bad_permits"},
        {"POST", "/v1/locks/r", "{\"permits\":2}", 400, "bad_permits"},
        {"POST", "/v1/locks/r", "{\"lock_id\":\"0123\"}", 400, "bad_lock_id"},
        {"POST", "/v1/locks/r", "{\"resources\":[\"a\"]}", 400, "bad_resource"},
        {"POST", "/v1/locks", NULL, 400, "bad_body"},
        {"POST", "/v1/locks", "{\"resources\":[]}", 400, "bad_resource"},
        {"POST", "/v1/locks", "{\"resources\":[\"a\\nb\"]}", 400, "bad_resource"},
        {"POST", "/v1/locks", "{\"resources\":[\"a\\u0000b\"]}", 400, "bad_json"},
        {"POST", "/v1/locks", "{\"resources\":[1]}", 400, "bad_resource"},
        {"POST", "/v1/locks/a%00b", NULL, 400, "bad_resource"},
        {"POST", "/v1/locks/a%zz", NULL, 400, "bad_resource"},
        {"GET", "/v1/locks/r/0123", NULL, 400, "bad_lock_id"},
        {"DELETE", "/v1/locks/r/0123456789ABCDEF0123456789abcdef01234567", NULL, 400, "bad_lock_id"},
        {"DELETE", "/v1/locks/r/0123456789abcdef0123456789abcdef012345678", NULL, 400, "bad_lock_id"},
        {"PUT", "/v1/locks/r", NULL, 405, "method_not_allowed"},
        {"POST", "/healthz", NULL, 405, "method_not_allowed"},
        {"GET", "/v1/locks", NULL, 405, "method_not_allowed"},
        {"GET", "/v2/locks/r", NULL, 404, "not_found"},
        {"GET", "/v1/lockss", NULL, 404, "not_found"},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        int st = parse(cases[i].method, cases[i].path, cases[i].body, NULL, 0, &op, code, sizeof(code));
        if (st != cases[i].status || strcmp(code, cases[i].code) != 0)
            fail_msg("%s %s %s: got %d %s, want %d %s", cases[i].method, cases[i].path,
                     cases[i].body ? cases[i].body : "", st, code, cases[i].status, cases[i].code);
    }
    /* A resource over lockcore's limit. */
    char big[LOCKCORE_RESOURCE_MAX + 32] = "/v1/locks/";
    memset(big + 10, 'x', LOCKCORE_RESOURCE_MAX + 1);
    assert_int_equal(parse("POST", big, NULL, NULL, 0, &op, code, sizeof(code)), 400);
    assert_string_equal(code, "bad_resource");
    /* Extend: unknown field; release: unknown query parameter, bad kind. */
    snprintf(path, sizeof(path), "/v1/locks/r/%s/extend", id40);
    assert_int_equal(parse("POST", path, "{\"wait_ms\":1}", NULL, 0, &op, code, sizeof(code)), 400);
    snprintf(path, sizeof(path), "/v1/locks/r/%s/renew", id40);
    assert_int_equal(parse("POST", path, NULL, NULL, 0, &op, code, sizeof(code)), 404);
    snprintf(path, sizeof(path), "/v1/locks/r/%s", id40);
    struct fencehttp_arg bad[] = {{"force", "1"}};
    assert_int_equal(parse("DELETE", path, NULL, bad, 1, &op, code, sizeof(code)), 400);
    assert_string_equal(code, "bad_parameter");
    struct fencehttp_arg kind[] = {{"kind", "semaphore"}};
    assert_int_equal(parse("DELETE", path, NULL, kind, 1, &op, code, sizeof(code)), 400);
    assert_string_equal(code, "bad_kind");
}

static void api_answers(void **state)
{
    (void)state;
    struct fld_op op = {.route = FLD_ROUTE_ACQUIRE, .kind = FLD_KIND_PLAIN};
    snprintf(op.resource, sizeof(op.resource), "a b");
    struct lockcore_lock lk = {.token = 42, .validity_ms = 900, .ttl_ms = 1000, .nodes = 3, .nodes_ok = 2};
    snprintf(lk.resource, sizeof(lk.resource), "a b");
    snprintf(lk.id, sizeof(lk.id), "%s", id40);
    struct fencehttp_response r = {0};
    fld_api_result(&op, 0, &lk, NULL, NULL, 0, &r);
    assert_int_equal(r.status, 200);
    json_t *j = json_loadb(r.body, r.body_len, 0, NULL);
    assert_int_equal(json_integer_value(json_object_get(j, "token")), 42);
    const char *rel = json_string_value(json_object_get(json_object_get(j, "links"), "release"));
    assert_string_equal(rel, "/v1/locks/a%20b/0123456789abcdef0123456789abcdef01234567");
    json_decref(j);
    fencehttp_response_clear(&r);

    /* A refusal names the holder most nodes agree on. */
    struct lockcore_node_status st[3] = {0};
    for (int i = 0; i < 3; i++) {
        st[i].reachable = 1;
        snprintf(st[i].holder, sizeof(st[i].holder), "%s", i < 2 ? id40 : "");
        st[i].pttl_ms = 700;
    }
    fld_api_result(&op, LOCKCORE_ELOCKED, &lk, "held", st, 3, &r);
    assert_int_equal(r.status, 409);
    j = json_loadb(r.body, r.body_len, 0, NULL);
    assert_string_equal(json_string_value(json_object_get(j, "error")), "locked");
    assert_string_equal(json_string_value(json_object_get(j, "holder")), id40);
    json_decref(j);
    fencehttp_response_clear(&r);

    static const struct {
        int rc, status;
        const char *code;
    } map[] = {
        {LOCKCORE_ENOQUORUM, 503, "no_quorum"},
        {LOCKCORE_ELOST, 409, "lost"},
        {-ETIMEDOUT, 503, "too_slow"},
        {LOCKCORE_EPROTO, 502, "node_error"},
        {LOCKCORE_ECANCELED, 503, "shutting_down"},
    };
    for (size_t i = 0; i < sizeof(map) / sizeof(map[0]); i++) {
        const char *code = NULL;
        assert_int_equal(fld_api_http_status(map[i].rc, &code), map[i].status);
        assert_string_equal(code, map[i].code);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(api_routes),
        cmocka_unit_test(api_acquire_bodies),
        cmocka_unit_test(api_refusals),
        cmocka_unit_test(api_answers),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
