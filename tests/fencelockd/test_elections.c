/*
 * Elections through fencelockd against real nodes: a campaign (a long
 * poll) answered with the epoch, a resignation handing over to the
 * candidate waiting, proclamations and long-poll observers told of each
 * change, a leader that stops extending deposed and its late write
 * refused by storage-guard with its epoch, candidates that hang up leaving
 * the line, another client's leadership refused, bad requests.
 */
#include <errno.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "fld_daemon.h"

static const char *str(const struct hc_response *r, const char *field)
{
    json_t *v = r->json ? json_object_get(r->json, field) : NULL;
    return v ? json_string_value(v) : NULL;
}

struct poll {
    const struct fld *d;
    const char *method, *path, *body, *headers;
    struct hc_response r;
    long long answered_ms;
};

static void *poll_thread(void *arg)
{
    struct poll *w = arg;
    if (hc_request(w->d->port, w->method, w->path, w->headers ? w->headers : "", w->body,
                   w->body ? strlen(w->body) : 0, &w->r) != 0)
        w->r.status = -1;
    w->answered_ms = hp_now_ms();
    return NULL;
}

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

static void wait_for_waiters(const struct fld *d, long long n)
{
    long long deadline = hp_now_ms() + 3000;
    while (metric(d, "fencelockd_waiters") != n && hp_now_ms() < deadline)
        hp_sleep_ms(10);
    assert_int_equal(metric(d, "fencelockd_waiters"), n);
}

struct lead {
    char id[64], ref[32], extend[1024], proclaim[1024], resign[1024];
    unsigned long long epoch;
};

static void lead_of(const struct hc_response *r, struct lead *l)
{
    assert_int_equal(r->status, 200);
    snprintf(l->id, sizeof(l->id), "%s", str(r, "lock_id"));
    snprintf(l->ref, sizeof(l->ref), "%s", str(r, "ref"));
    l->epoch = (unsigned long long)fld_int(r, "epoch");
    assert_int_equal(l->epoch, (unsigned long long)fld_int(r, "token"));
    json_t *links = json_object_get(r->json, "links");
    snprintf(l->extend, sizeof(l->extend), "%s", json_string_value(json_object_get(links, "extend")));
    snprintf(l->proclaim, sizeof(l->proclaim), "%s", json_string_value(json_object_get(links, "proclaim")));
    snprintf(l->resign, sizeof(l->resign), "%s", json_string_value(json_object_get(links, "resign")));
}

static void campaign(const struct fld *d, const char *name, const char *body, struct lead *l)
{
    char path[256];
    snprintf(path, sizeof(path), "/v1/elections/%s", name);
    struct hc_response r = {0};
    fld_call(d, "POST", path, body, NULL, &r);
    if (r.status != 200)
        fail_msg("campaign %s: %d %s", name, r.status, r.body ? r.body : "");
    lead_of(&r, l);
    hc_response_clear(&r);
}

static void elections_campaign_read_resign_hand_over(void **state)
{
    struct fld_fx *f = *state;
    struct fld *d = &f->d;
    struct lead a;
    campaign(d, "sched", "{\"value\":\"10.0.0.1:80\",\"ttl_ms\":30000}", &a);
    assert_true(a.epoch > 0);
    struct hc_response r = {0};
    fld_call(d, "GET", "/v1/elections/sched", NULL, NULL, &r);
    assert_int_equal(r.status, 200);
    assert_true(json_is_true(json_object_get(r.json, "leader")));
    assert_int_equal((unsigned long long)fld_int(&r, "epoch"), a.epoch);
    assert_string_equal(str(&r, "value"), "10.0.0.1:80");
    assert_string_equal(str(&r, "leader_ref"), a.ref);
    assert_null(strstr(r.body, a.id)); /* the id resigns: never shown */
    hc_response_clear(&r);

    /* A second candidate waits in line (a long poll)... */
    struct poll b = {.d = d,
                     .method = "POST",
                     .path = "/v1/elections/sched",
                     .body = "{\"value\":\"10.0.0.2:80\",\"ttl_ms\":30000,\"wait_ms\":20000}"};
    pthread_t t;
    assert_int_equal(pthread_create(&t, NULL, poll_thread, &b), 0);
    wait_for_waiters(d, 1);
    hp_sleep_ms(100);
    assert_int_equal(b.answered_ms, 0);
    /* ... and is elected at the resignation, not after the TTL. */
    long long t0 = hp_now_ms();
    fld_call(d, "DELETE", a.resign, NULL, NULL, &r);
    assert_int_equal(r.status, 200);
    assert_true(fld_int(&r, "nodes_released") >= 2);
    hc_response_clear(&r);
    pthread_join(t, NULL);
    assert_true(b.answered_ms - t0 < 2000);
    struct lead bl;
    lead_of(&b.r, &bl);
    assert_true(bl.epoch > a.epoch);
    assert_string_equal(str(&b.r, "value"), "10.0.0.2:80");
    hc_response_clear(&b.r);
    /* A's late resignation and proclamation change nothing. */
    fld_call(d, "DELETE", a.resign, NULL, NULL, &r);
    assert_int_equal(r.status, 200);
    assert_int_equal(fld_int(&r, "nodes_released"), 0);
    hc_response_clear(&r);
    fld_call(d, "POST", a.proclaim, "{\"value\":\"zombie\"}", NULL, &r);
    assert_int_equal(r.status, 409);
    assert_string_equal(str(&r, "error"), "lost");
    hc_response_clear(&r);
    fld_call(d, "GET", "/v1/elections/sched", NULL, NULL, &r);
    assert_string_equal(str(&r, "value"), "10.0.0.2:80");
    hc_response_clear(&r);
    fld_call(d, "DELETE", bl.resign, NULL, NULL, &r);
    hc_response_clear(&r);
    fld_call(d, "GET", "/v1/elections/sched", NULL, NULL, &r);
    assert_int_equal(r.status, 200);
    assert_true(json_is_false(json_object_get(r.json, "leader")));
    hc_response_clear(&r);
}

/* An observer's long poll (after the epoch it has) is answered by a
 * proclamation, then by a death (the leader stops extending). */
static void elections_observers_long_poll(void **state)
{
    struct fld_fx *f = *state;
    struct fld *d = &f->d;
    struct lead a;
    campaign(d, "obs", "{\"value\":\"one\",\"ttl_ms\":800}", &a);
    char path[256];
    snprintf(path, sizeof(path), "/v1/elections/obs?after=%llu&value=one&wait_ms=10000", a.epoch);
    struct poll w = {.d = d, .method = "GET", .path = path};
    pthread_t t;
    assert_int_equal(pthread_create(&t, NULL, poll_thread, &w), 0);
    wait_for_waiters(d, 1);
    long long t0 = hp_now_ms();
    struct hc_response r = {0};
    fld_call(d, "POST", a.proclaim, "{\"value\":\"two\",\"ttl_ms\":800}", NULL, &r);
    assert_int_equal(r.status, 200);
    hc_response_clear(&r);
    pthread_join(t, NULL);
    assert_int_equal(w.r.status, 200);
    assert_true(w.answered_ms - t0 < 1000);
    assert_true(json_is_true(json_object_get(w.r.json, "changed")));
    assert_int_equal((unsigned long long)fld_int(&w.r, "epoch"), a.epoch);
    assert_string_equal(str(&w.r, "value"), "two");
    hc_response_clear(&w.r);

    /* Epoch alone: a proclamation is no change, the leader's end is. */
    snprintf(path, sizeof(path), "/v1/elections/obs?after=%llu&wait_ms=10000", a.epoch);
    memset(&w, 0, sizeof(w));
    w.d = d, w.method = "GET", w.path = path;
    assert_int_equal(pthread_create(&t, NULL, poll_thread, &w), 0);
    pthread_join(t, NULL);
    assert_int_equal(w.r.status, 200);
    assert_true(json_is_true(json_object_get(w.r.json, "changed")));
    assert_true(json_is_false(json_object_get(w.r.json, "leader")));
    hc_response_clear(&w.r);

    /* Nothing changes: the wait runs out, changed false. */
    snprintf(path, sizeof(path), "/v1/elections/obs?after=0&wait_ms=300");
    fld_call(d, "GET", path, NULL, NULL, &r);
    assert_int_equal(r.status, 200);
    assert_true(json_is_false(json_object_get(r.json, "changed")));
    hc_response_clear(&r);

    /* The observer's value is compared decoded: one that needs escapes
     * (a space, '+', '%', '&', UTF-8) is the same value, no change. */
    struct lead e;
    campaign(d, "obs-esc", "{\"value\":\"a b+c%d&e=\u00e9\"}", &e);
    snprintf(path, sizeof(path),
             "/v1/elections/obs-esc?after=%llu&value=a%%20b%%2Bc%%25d%%26e%%3D%%C3%%A9&wait_ms=300", e.epoch);
    fld_call(d, "GET", path, NULL, NULL, &r);
    assert_int_equal(r.status, 200);
    assert_true(json_is_false(json_object_get(r.json, "changed")));
    hc_response_clear(&r);
    snprintf(path, sizeof(path), "/v1/elections/obs-esc?after=%llu&value=a%%20b&wait_ms=5000", e.epoch);
    fld_call(d, "GET", path, NULL, NULL, &r);
    assert_int_equal(r.status, 200);
    assert_true(json_is_true(json_object_get(r.json, "changed")));
    assert_string_equal(str(&r, "value"), "a b+c%d&e=\u00e9");
    hc_response_clear(&r);
    const char *bad[] = {"value=a%2", "value=a%00b", "value=%zz"};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        snprintf(path, sizeof(path), "/v1/elections/obs-esc?after=%llu&%s", e.epoch, bad[i]);
        fld_call(d, "GET", path, NULL, NULL, &r);
        assert_int_equal(r.status, 400);
        assert_string_equal(str(&r, "error"), "bad_parameter");
        hc_response_clear(&r);
    }
    fld_call(d, "DELETE", e.resign, NULL, NULL, &r);
    assert_int_equal(r.status, 200);
    hc_response_clear(&r);
}

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

/* The zombie leader: it stops extending (a pause), the next candidate is
 * elected and writes, the old one's late write is refused by its epoch. */
static void elections_deposed_leader_write_refused(void **state)
{
    struct fld_fx *f = *state;
    struct fld *d = &f->d;
    struct tk_sg_options so;
    tk_sg_options_init(&so);
    struct tk_sg *sg = NULL;
    assert_int_equal(tk_sg_start(&so, &sg), 0);
    struct lead a, b;
    campaign(d, "writer", "{\"value\":\"a\",\"ttl_ms\":400}", &a);
    assert_int_equal(sg_put(tk_sg_port(sg), "ledger", "by a", a.epoch), 200);
    struct poll w = {.d = d,
                     .method = "POST",
                     .path = "/v1/elections/writer",
                     .body = "{\"value\":\"b\",\"ttl_ms\":5000,\"wait_ms\":5000}"};
    pthread_t t;
    assert_int_equal(pthread_create(&t, NULL, poll_thread, &w), 0);
    pthread_join(t, NULL); /* elected once a's lease ran out */
    lead_of(&w.r, &b);
    hc_response_clear(&w.r);
    assert_true(b.epoch > a.epoch);
    assert_int_equal(sg_put(tk_sg_port(sg), "ledger", "by b", b.epoch), 200);
    assert_int_equal(sg_put(tk_sg_port(sg), "ledger", "late by a", a.epoch), 409);
    struct hc_response r = {0};
    fld_call(d, "POST", a.extend, NULL, NULL, &r);
    assert_int_equal(r.status, 409);
    assert_string_equal(str(&r, "error"), "lost");
    hc_response_clear(&r);
    tk_sg_free(sg);
}

static void node_set(struct fld_fx *f, int node, const char *key, const char *value)
{
    redisReply *x = rh_command(f->rc, node, "SET %s %s PX 30000", key, value);
    assert_non_null(x);
    assert_int_equal(x->type, REDIS_REPLY_STATUS);
    freeReplyObject(x);
}

/* An observer that has a leader's epoch is never answered with an older
 * one: here a majority shows a leader that resigned before (its
 * resignation missed node 0, a late lock step and proclamation reached
 * node 2: the state a node of an older version could be left in; the
 * nodes' own refusal is tested in tests/lockcore/test_elect.c), and the
 * long poll after the newer epoch waits instead of going back. */
static void elections_observer_never_told_an_older_epoch(void **state)
{
    struct fld_fx *f = *state;
    struct fld *d = &f->d;
    struct lead a, b;
    campaign(d, "ghost", "{\"value\":\"a\",\"ttl_ms\":30000}", &a);
    char key[256] = "", hkey[300], info[128];
    redisReply *x = rh_command(f->rc, 0, "KEYS *ghost");
    assert_non_null(x);
    for (size_t i = 0; i < x->elements; i++)
        if (x->element[i]->str[0] != '{')
            snprintf(key, sizeof(key), "%s", x->element[i]->str);
    freeReplyObject(x);
    assert_true(key[0] != '\0');
    snprintf(hkey, sizeof(hkey), "{%s}:holder", key);
    rh_get(f->rc, 0, hkey, info, sizeof(info));
    assert_true(info[0] != '\0');
    struct hc_response r = {0};
    fld_call(d, "DELETE", a.resign, NULL, NULL, &r);
    assert_int_equal(r.status, 200);
    hc_response_clear(&r);
    node_set(f, 0, key, a.id);
    node_set(f, 0, hkey, info);
    campaign(d, "ghost", "{\"value\":\"b\",\"ttl_ms\":30000}", &b);
    assert_true(b.epoch > a.epoch);
    fld_call(d, "DELETE", b.resign, NULL, NULL, &r);
    assert_int_equal(r.status, 200);
    hc_response_clear(&r);
    node_set(f, 2, key, a.id);
    node_set(f, 2, hkey, info);
    char path[256];
    snprintf(path, sizeof(path), "/v1/elections/ghost?after=%llu&value=b&wait_ms=400", b.epoch);
    fld_call(d, "GET", path, NULL, NULL, &r);
    assert_int_equal(r.status, 200);
    assert_true(json_is_false(json_object_get(r.json, "changed")));
    assert_int_equal((unsigned long long)fld_int(&r, "epoch"), b.epoch);
    hc_response_clear(&r);
    /* Without a value: the same. */
    snprintf(path, sizeof(path), "/v1/elections/ghost?after=%llu&wait_ms=400", b.epoch);
    fld_call(d, "GET", path, NULL, NULL, &r);
    assert_int_equal(r.status, 200);
    assert_true(json_is_false(json_object_get(r.json, "changed")));
    hc_response_clear(&r);
}

/* A candidate that hangs up while it waits leaves the line: the next one
 * is elected at the resignation. */
static void elections_candidate_hangs_up(void **state)
{
    struct fld_fx *f = *state;
    struct fld *d = &f->d;
    struct lead a;
    campaign(d, "hang", "{\"ttl_ms\":30000}", &a);
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    assert_true(fd >= 0);
    struct sockaddr_in sa = {
        .sin_family = AF_INET, .sin_port = htons(d->port), .sin_addr.s_addr = htonl(0x7f000001)};
    assert_int_equal(connect(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
    const char *body = "{\"wait_ms\":20000}";
    char req[256];
    int n = snprintf(req, sizeof(req),
                     "POST /v1/elections/hang HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                     "Content-Length: %zu\r\n\r\n%s",
                     strlen(body), body);
    assert_int_equal(write(fd, req, (size_t)n), n);
    wait_for_waiters(d, 1);
    struct poll w = {.d = d, .method = "POST", .path = "/v1/elections/hang", .body = "{\"wait_ms\":20000}"};
    pthread_t t;
    assert_int_equal(pthread_create(&t, NULL, poll_thread, &w), 0);
    wait_for_waiters(d, 2);
    close(fd); /* the first in line hangs up */
    wait_for_waiters(d, 1);
    long long t0 = hp_now_ms();
    struct hc_response r = {0};
    fld_call(d, "DELETE", a.resign, NULL, NULL, &r);
    hc_response_clear(&r);
    pthread_join(t, NULL);
    assert_int_equal(w.r.status, 200);
    assert_true(w.answered_ms - t0 < 2000);
    hc_response_clear(&w.r);
}

static void elections_bad_requests(void **state)
{
    struct fld_fx *f = *state;
    struct fld *d = &f->d;
    char big[400], body[512];
    memset(big, 'v', 300);
    big[300] = '\0';
    snprintf(body, sizeof(body), "{\"value\":\"%s\"}", big);
    static const struct {
        const char *method, *path, *body;
        int status;
        const char *code;
    } bad[] = {
        {"POST", "/v1/elections/x", "{\"value\":5}", 400, "bad_body"},
        {"POST", "/v1/elections/x", "{\"kind\":\"plain\"}", 400, "bad_body"},
        {"GET", "/v1/elections/x?wait_ms=100", NULL, 400, "bad_parameter"},
        {"GET", "/v1/elections/x?value=a", NULL, 400, "bad_parameter"},
        {"GET", "/v1/elections/x?after=-1", NULL, 400, "bad_parameter"},
        {"PUT", "/v1/elections/x", NULL, 405, "method_not_allowed"},
        {"POST", "/v1/elections", NULL, 404, "not_found"},
        {"POST", "/v1/elections/x/0123/extend", NULL, 400, "bad_lock_id"},
        {"POST", "/v1/elections/x/0123456789abcdef0123456789abcdef01234567/renew", NULL, 404, "not_found"},
        {"GET", "/v1/elections/x/0123456789abcdef0123456789abcdef01234567", NULL, 405, "method_not_allowed"},
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        struct hc_response r = {0};
        fld_call(d, bad[i].method, bad[i].path, bad[i].body, NULL, &r);
        if (r.status != bad[i].status || str(&r, "error") == NULL ||
            strcmp(str(&r, "error"), bad[i].code) != 0)
            fail_msg("%s %s: %d %s", bad[i].method, bad[i].path, r.status, r.body ? r.body : "");
        hc_response_clear(&r);
    }
    struct hc_response r = {0};
    fld_call(d, "POST", "/v1/elections/x", body, NULL, &r);
    assert_int_equal(r.status, 400);
    hc_response_clear(&r);
    /* Not elected within the wait: 409 not_elected. */
    struct lead a;
    campaign(d, "taken", "{\"ttl_ms\":30000}", &a);
    fld_call(d, "POST", "/v1/elections/taken", "{\"wait_ms\":200}", NULL, &r);
    assert_int_equal(r.status, 409);
    assert_string_equal(str(&r, "error"), "not_elected");
    hc_response_clear(&r);
    fld_call(d, "DELETE", a.resign, NULL, NULL, &r);
    hc_response_clear(&r);
}

/* With an auth file, another client can neither resign, extend nor
 * proclaim the leader's; a reader sees the leader's client. */
static void elections_belong_to_their_client(void **state)
{
    struct fld_fx *f = *state;
    struct fld *d = &f->d;
    char dir[256], path[320];
    assert_int_equal(rh_mkdtemp("fld-el-auth", dir, sizeof(dir)), 0);
    snprintf(path, sizeof(path), "%s/tokens", dir);
    FILE *fp = fopen(path, "w");
    assert_non_null(fp);
    fputs(
        "alice-token-0123456789 alice\nbob-token-0123456789abc bob\nwatch-token-0123456789 watch read-only\n",
        fp);
    fclose(fp);
    chmod(path, 0600);
    const char *args[] = {"--auth-file", path, NULL};
    fld_start(d, f->nodes, args);
    const char *alice = "Authorization: Bearer alice-token-0123456789\r\n";
    const char *bob = "Authorization: Bearer bob-token-0123456789abc\r\n";
    const char *watch = "Authorization: Bearer watch-token-0123456789\r\n";
    struct hc_response r = {0};
    fld_call(d, "POST", "/v1/elections/owned", "{\"value\":\"a\",\"ttl_ms\":30000}", alice, &r);
    struct lead a;
    lead_of(&r, &a);
    hc_response_clear(&r);
    fld_call(d, "DELETE", a.resign, NULL, bob, &r);
    assert_int_equal(r.status, 403);
    hc_response_clear(&r);
    fld_call(d, "POST", a.extend, NULL, bob, &r);
    assert_int_equal(r.status, 403);
    hc_response_clear(&r);
    fld_call(d, "POST", a.proclaim, "{\"value\":\"bob's\"}", bob, &r);
    assert_int_equal(r.status, 403);
    hc_response_clear(&r);
    fld_call(d, "POST", "/v1/elections/owned", NULL, watch, &r);
    assert_int_equal(r.status, 403);
    hc_response_clear(&r);
    fld_call(d, "GET", "/v1/elections/owned", NULL, watch, &r);
    assert_int_equal(r.status, 200);
    assert_string_equal(str(&r, "leader_client"), "alice");
    assert_string_equal(str(&r, "value"), "a");
    hc_response_clear(&r);
    fld_call(d, "DELETE", a.resign, NULL, alice, &r);
    assert_int_equal(r.status, 200);
    hc_response_clear(&r);
    rh_rmtree(dir);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(elections_campaign_read_resign_hand_over, fld_fx_setup_started,
                                        fld_fx_teardown),
        cmocka_unit_test_setup_teardown(elections_observers_long_poll, fld_fx_setup_started, fld_fx_teardown),
        cmocka_unit_test_setup_teardown(elections_deposed_leader_write_refused, fld_fx_setup_started,
                                        fld_fx_teardown),
        cmocka_unit_test_setup_teardown(elections_candidate_hangs_up, fld_fx_setup_started, fld_fx_teardown),
        cmocka_unit_test_setup_teardown(elections_observer_never_told_an_older_epoch, fld_fx_setup_started,
                                        fld_fx_teardown),
        cmocka_unit_test_setup_teardown(elections_bad_requests, fld_fx_setup_started, fld_fx_teardown),
        cmocka_unit_test_setup_teardown(elections_belong_to_their_client, fld_fx_setup, fld_fx_teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
