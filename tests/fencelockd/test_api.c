/*
 * fencelockd's request mapping without sockets or nodes: routes, kinds,
 * bodies, lock ids, and the answers built from lockcore's results.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

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
    fld_api_result(&op, 0, &lk, NULL, NULL, 0, NULL, &r);
    assert_int_equal(r.status, 200);
    json_t *j = json_loadb(r.body, r.body_len, 0, NULL);
    assert_int_equal(json_integer_value(json_object_get(j, "token")), 42);
    char ref[17];
    fld_api_ref(id40, ref);
    assert_int_equal(strlen(ref), 16);
    assert_string_equal(json_string_value(json_object_get(j, "ref")), ref);
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
    fld_api_result(&op, LOCKCORE_ELOCKED, &lk, "held", st, 3, NULL, &r);
    assert_int_equal(r.status, 409);
    j = json_loadb(r.body, r.body_len, 0, NULL);
    assert_string_equal(json_string_value(json_object_get(j, "error")), "locked");
    /* Its ref and client, never the id that would release it. */
    assert_null(json_object_get(j, "holder"));
    assert_string_equal(json_string_value(json_object_get(j, "holder_ref")), ref);
    assert_true(json_is_null(json_object_get(j, "holder_client")));
    assert_null(strstr(r.body, id40));
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

/* An id of an acquisition for owner: the layout lockcore makes. */
static void owned_id(const char *owner, char id[LOCKCORE_ID_LEN + 1])
{
    char tag[LOCKCORE_OWNER_TAG_LEN + 1];
    assert_int_equal(lockcore_owner_tag(owner, tag), 0);
    snprintf(id, LOCKCORE_ID_LEN + 1, "0123456789abcdef%s0123456789000001", tag);
    assert_int_equal(strlen(id), LOCKCORE_ID_LEN);
}

static int authorize(const struct fld_op *op, const struct fencehttp_client *cl, char *code, size_t cap)
{
    struct fencehttp_response resp = {0};
    int rc = fld_api_authorize(op, cl, &resp);
    code[0] = '\0';
    if (rc != 0) {
        json_t *j = json_loadb(resp.body, resp.body_len, 0, NULL);
        assert_non_null(j);
        snprintf(code, cap, "%s", json_string_value(json_object_get(j, "error")));
        assert_int_equal(resp.status, 403);
        json_decref(j);
    }
    fencehttp_response_clear(&resp);
    return rc;
}

/* A lock id is a credential only for the client that took it; rules of
 * the auth file bound what each client may name and do. */
static void api_authorize(void **state)
{
    (void)state;
    struct fencehttp_client alice = {.name = "alice"}, bob = {.name = "bob"};
    char a_id[LOCKCORE_ID_LEN + 1], b_id[LOCKCORE_ID_LEN + 1], code[64];
    owned_id("alice", a_id);
    owned_id("bob", b_id);
    static const enum fld_route routes[] = {FLD_ROUTE_EXTEND, FLD_ROUTE_RELEASE};
    for (int k = 0; k < FLD_KIND_COUNT; k++) {
        for (int r = 0; r < 2; r++) {
            struct fld_op op = {.route = routes[r], .kind = (enum fld_kind)k};
            snprintf(op.resource, sizeof(op.resource), "res");
            memcpy(op.lock_id, a_id, sizeof(a_id));
            assert_int_equal(authorize(&op, &alice, code, sizeof(code)), 0);
            assert_int_equal(authorize(&op, &bob, code, sizeof(code)), 403);
            assert_string_equal(code, "forbidden");
            /* Without an auth file, the id is the only credential. */
            assert_int_equal(authorize(&op, NULL, code, sizeof(code)), 0);
            /* An id not made for any client (the library's, random digits). */
            memcpy(op.lock_id, id40, sizeof(id40));
            assert_int_equal(authorize(&op, &alice, code, sizeof(code)), 403);
        }
    }
    /* A re-entry of another's hold. */
    struct fld_op re = {.route = FLD_ROUTE_ACQUIRE, .kind = FLD_KIND_REENTRANT};
    snprintf(re.resource, sizeof(re.resource), "doc");
    memcpy(re.lock_id, a_id, sizeof(a_id));
    assert_int_equal(authorize(&re, &bob, code, sizeof(code)), 403);
    assert_int_equal(authorize(&re, &alice, code, sizeof(code)), 0);
    memcpy(re.lock_id, b_id, sizeof(b_id));
    assert_int_equal(authorize(&re, &bob, code, sizeof(code)), 0);

    /* read-only: status, health and metrics only. */
    struct fencehttp_client ro = {.name = "watcher", .read_only = 1};
    static const enum fld_route reads[] = {FLD_ROUTE_STATUS, FLD_ROUTE_HEALTH, FLD_ROUTE_METRICS};
    for (int i = 0; i < 3; i++) {
        struct fld_op op = {.route = reads[i]};
        snprintf(op.resource, sizeof(op.resource), "res");
        assert_int_equal(authorize(&op, &ro, code, sizeof(code)), 0);
    }
    struct fld_op acq = {.route = FLD_ROUTE_ACQUIRE};
    snprintf(acq.resource, sizeof(acq.resource), "res");
    assert_int_equal(authorize(&acq, &ro, code, sizeof(code)), 403);

    /* resource= and prefix= rules, a multi-resource lock's every name, a
     * permit by its semaphore. */
    struct fencehttp_rule rules[] = {{(char *)"invoice:", 8, 1}, {(char *)"pool", 4, 0}};
    struct fencehttp_client lim_cl = {.name = "billing", .rules = rules, .n_rules = 2};
    static const struct {
        enum fld_route route;
        enum fld_kind kind;
        const char *resource;
        int want;
    } cases[] = {
        {FLD_ROUTE_ACQUIRE, FLD_KIND_PLAIN, "invoice:42", 0},
        {FLD_ROUTE_ACQUIRE, FLD_KIND_PLAIN, "invoice:", 0},
        {FLD_ROUTE_ACQUIRE, FLD_KIND_PLAIN, "invoice", 403},
        {FLD_ROUTE_ACQUIRE, FLD_KIND_PLAIN, "order:1", 403},
        {FLD_ROUTE_STATUS, FLD_KIND_PLAIN, "order:1", 403},
        {FLD_ROUTE_ACQUIRE, FLD_KIND_PERMIT, "pool", 0},
        {FLD_ROUTE_ACQUIRE, FLD_KIND_PLAIN, "pool2", 403},
        {FLD_ROUTE_RELEASE, FLD_KIND_PERMIT, "pool:permit:3", 0},
        {FLD_ROUTE_RELEASE, FLD_KIND_PERMIT, "pool:permit:", 403},
        /* A permit's name is its semaphore's, whatever the kind. */
        {FLD_ROUTE_RELEASE, FLD_KIND_PLAIN, "pool:permit:3", 0},
        {FLD_ROUTE_ACQUIRE, FLD_KIND_PLAIN, "invoice:x:permit:0", 0},
        {FLD_ROUTE_ACQUIRE, FLD_KIND_PLAIN, "pool2:permit:0", 403},
        {FLD_ROUTE_RELEASE, FLD_KIND_PERMIT, "other:permit:3", 403},
    };
    char l_id[LOCKCORE_ID_LEN + 1];
    owned_id("billing", l_id);
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        struct fld_op op = {.route = cases[i].route, .kind = cases[i].kind};
        snprintf(op.resource, sizeof(op.resource), "%s", cases[i].resource);
        if (op.route == FLD_ROUTE_RELEASE)
            memcpy(op.lock_id, l_id, sizeof(l_id));
        if (authorize(&op, &lim_cl, code, sizeof(code)) != cases[i].want)
            fail_msg("case %zu (%s): want %d", i, cases[i].resource, cases[i].want);
    }
    struct fencehttp_rule pr[] = {{(char *)"pool:", 5, 1}};
    struct fencehttp_client pool_prefix = {.name = "other", .rules = pr, .n_rules = 1};
    struct fld_op perm = {.route = FLD_ROUTE_ACQUIRE, .kind = FLD_KIND_PLAIN};
    snprintf(perm.resource, sizeof(perm.resource), "pool:permit:0");
    assert_int_equal(authorize(&perm, &pool_prefix, code, sizeof(code)), 403);
    struct fld_op multi;
    char c2[64];
    assert_int_equal(parse("POST", "/v1/locks", "{\"resources\": [\"invoice:1\", \"invoice:2\"]}", NULL, 0,
                           &multi, c2, sizeof(c2)),
                     0);
    assert_int_equal(authorize(&multi, &lim_cl, code, sizeof(code)), 0);
    assert_int_equal(parse("POST", "/v1/locks", "{\"resources\": [\"invoice:1\", \"order:2\"]}", NULL, 0,
                           &multi, c2, sizeof(c2)),
                     0);
    assert_int_equal(authorize(&multi, &lim_cl, code, sizeof(code)), 403);
}

/* The owners table names a holder by its id's tag; two names with one
 * tag are refused. */
static void api_owners(void **state)
{
    (void)state;
    char dir[] = "/tmp/fld-owners-XXXXXX";
    assert_non_null(mkdtemp(dir));
    char path[64];
    snprintf(path, sizeof(path), "%s/tokens", dir);
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fprintf(f, "aaaaaaaaaaaaaaaaaaaa alice\nbbbbbbbbbbbbbbbbbbbb bob read-only\n"
               "cccccccccccccccccccc alice\n");
    fclose(f);
    fencehttp_auth *a = NULL;
    char err[256];
    assert_int_equal(fencehttp_auth_load(path, &a, err, sizeof(err)), 0);
    struct fld_owners *o = NULL;
    assert_int_equal(fld_owners_new(a, &o, err, sizeof(err)), 0);
    char a_id[LOCKCORE_ID_LEN + 1], b_id[LOCKCORE_ID_LEN + 1], c_id[LOCKCORE_ID_LEN + 1];
    owned_id("alice", a_id);
    owned_id("bob", b_id);
    owned_id("carol", c_id);
    assert_string_equal(fld_owners_name(o, a_id), "alice");
    assert_string_equal(fld_owners_name(o, b_id), "bob");
    assert_null(fld_owners_name(o, c_id));
    assert_null(fld_owners_name(o, id40));
    assert_null(fld_owners_name(o, "short"));
    assert_null(fld_owners_name(NULL, a_id));

    /* A status names the holder by client, and carries no id. */
    struct fld_op op = {.route = FLD_ROUTE_STATUS};
    snprintf(op.resource, sizeof(op.resource), "res");
    struct lockcore_node_status st[3] = {0};
    for (int i = 0; i < 3; i++) {
        st[i].reachable = 1;
        snprintf(st[i].holder, sizeof(st[i].holder), "%s", a_id);
        snprintf(st[i].node, sizeof(st[i].node), "127.0.0.1:%d", 7000 + i);
        st[i].pttl_ms = 500;
    }
    struct fencehttp_response r = {0};
    fld_api_status(&op, 3, st, 3, NULL, 0, 2, NULL, o, &r);
    assert_int_equal(r.status, 200);
    assert_null(strstr(r.body, a_id));
    json_t *j = json_loadb(r.body, r.body_len, 0, NULL);
    assert_string_equal(json_string_value(json_object_get(j, "holder_client")), "alice");
    char ref[17];
    fld_api_ref(a_id, ref);
    assert_string_equal(json_string_value(json_object_get(j, "holder_ref")), ref);
    json_t *n0 = json_array_get(json_object_get(j, "nodes"), 0);
    assert_string_equal(json_string_value(json_object_get(n0, "holder_client")), "alice");
    assert_null(json_object_get(n0, "holder"));
    json_decref(j);
    fencehttp_response_clear(&r);
    /* rw: the waiting writer too. */
    op.status_kind = 'r';
    snprintf(st[0].writer_waits, sizeof(st[0].writer_waits), "%s", b_id);
    fld_api_status(&op, 3, st, 3, NULL, 0, 2, NULL, o, &r);
    assert_null(strstr(r.body, b_id));
    j = json_loadb(r.body, r.body_len, 0, NULL);
    n0 = json_array_get(json_object_get(j, "nodes"), 0);
    assert_string_equal(json_string_value(json_object_get(n0, "writer_waits_client")), "bob");
    json_decref(j);
    fencehttp_response_clear(&r);
    /* A semaphore's permits. */
    struct lockcore_permit_status ps[2] = {{.permit = 0, .held = 1, .reachable = 3}, {.permit = 1}};
    snprintf(ps[0].holder, sizeof(ps[0].holder), "%s", a_id);
    op.status_kind = 's';
    op.permits = 2;
    fld_api_status(&op, 1, NULL, 0, ps, 2, 2, NULL, o, &r);
    assert_null(strstr(r.body, a_id));
    j = json_loadb(r.body, r.body_len, 0, NULL);
    json_t *p0 = json_array_get(json_object_get(j, "permit"), 0);
    assert_string_equal(json_string_value(json_object_get(p0, "holder_client")), "alice");
    assert_string_equal(json_string_value(json_object_get(p0, "holder_ref")), ref);
    assert_true(json_is_null(json_object_get(json_array_get(json_object_get(j, "permit"), 1), "holder_ref")));
    json_decref(j);
    fencehttp_response_clear(&r);
    fld_owners_free(o);
    fencehttp_auth_free(a);

    /* An unnamed line: its name would move with the lines above it. */
    f = fopen(path, "w");
    assert_non_null(f);
    fprintf(f, "aaaaaaaaaaaaaaaaaaaa alice\nbbbbbbbbbbbbbbbbbbbb\n");
    fclose(f);
    assert_int_equal(fencehttp_auth_load(path, &a, err, sizeof(err)), 0);
    assert_int_equal(fld_owners_new(a, &o, err, sizeof(err)), -EINVAL);
    assert_non_null(strstr(err, "NAME"));
    fencehttp_auth_free(a);
    /* Two names of one tag (found by a birthday search over "c0", "c1",
     * ...): the file is refused. */
    char t1[LOCKCORE_OWNER_TAG_LEN + 1], t2[LOCKCORE_OWNER_TAG_LEN + 1];
    assert_int_equal(lockcore_owner_tag("c26589", t1), 0);
    assert_int_equal(lockcore_owner_tag("c38135", t2), 0);
    assert_string_equal(t1, t2);
    f = fopen(path, "w");
    assert_non_null(f);
    fprintf(f, "aaaaaaaaaaaaaaaaaaaa c26589\nbbbbbbbbbbbbbbbbbbbb c38135\n");
    fclose(f);
    assert_int_equal(fencehttp_auth_load(path, &a, err, sizeof(err)), 0);
    assert_int_equal(fld_owners_new(a, &o, err, sizeof(err)), -EINVAL);
    assert_non_null(strstr(err, "rename"));
    fencehttp_auth_free(a);
    unlink(path);
    rmdir(dir);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(api_routes),  cmocka_unit_test(api_acquire_bodies), cmocka_unit_test(api_refusals),
        cmocka_unit_test(api_answers), cmocka_unit_test(api_authorize),      cmocka_unit_test(api_owners),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
