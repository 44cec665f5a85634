/*
 * fencelockd with bearer tokens for several clients, against real nodes and
 * two instances: a lock belongs to the client that took it (no other may
 * release, extend or re-enter it, through either instance, for any kind),
 * status and refusals name the holder's client and a ref but never the id
 * that releases it, and the auth file's per-client rules (read-only,
 * resource=, prefix=) hold on every route.
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
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "fld_daemon.h"

#define ALICE "Authorization: Bearer alice-token-0123456789\r\n"
#define BOB "Authorization: Bearer bob-token-0123456789abc\r\n"
#define WATCHER "Authorization: Bearer watcher-token-0123456789\r\n"
#define BILLING "Authorization: Bearer billing-token-0123456789\r\n"
#define POOLS "Authorization: Bearer pools-token-0123456789\r\n"

struct tfx {
    struct rh_cluster *rc;
    char nodes[512];
    char dir[256];
    struct fld a, b; /* two instances of the same nodes and auth file */
};

static int setup(void **state)
{
    struct tfx *f = calloc(1, sizeof(*f));
    assert_non_null(f);
    assert_int_equal(rh_cluster_start(3, NULL, &f->rc), 0);
    fld_nodes(f->rc, f->nodes, sizeof(f->nodes));
    assert_int_equal(rh_mkdtemp("fld-tenants", f->dir, sizeof(f->dir)), 0);
    char path[320];
    snprintf(path, sizeof(path), "%s/tokens", f->dir);
    FILE *fp = fopen(path, "w");
    assert_non_null(fp);
    fputs("alice-token-0123456789 alice\n"
          "pools-token-0123456789 pools prefix=pool:\n"
          "bob-token-0123456789abc bob\n"
          "watcher-token-0123456789 watcher read-only\n"
          "billing-token-0123456789 billing prefix=invoice: resource=pool resource=a%20b\n",
          fp);
    fclose(fp);
    chmod(path, 0600);
    const char *args[] = {"--auth-file", path, NULL};
    fld_start(&f->a, f->nodes, args);
    fld_start(&f->b, f->nodes, args);
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    struct tfx *f = *state;
    fld_destroy(&f->a);
    fld_destroy(&f->b);
    rh_cluster_free(f->rc);
    rh_rmtree(f->dir);
    free(f);
    return 0;
}

static int call(const struct fld *d, const char *who, const char *method, const char *path, const char *body,
                struct hc_response *r)
{
    hc_response_clear(r);
    fld_call(d, method, path, body, who, r);
    return r->status;
}

static const char *str(const struct hc_response *r, const char *field)
{
    json_t *v = r->json ? json_object_get(r->json, field) : NULL;
    return v ? json_string_value(v) : NULL;
}

struct grant {
    char id[64], ref[32], extend[2048], release[2048], resource[600];
};

static void take(const struct fld *d, const char *who, const char *path, const char *body, struct grant *g)
{
    struct hc_response r = {0};
    if (call(d, who, "POST", path, body, &r) != 200)
        fail_msg("acquire %s %s: %d %s", path, body ? body : "", r.status, r.body ? r.body : "");
    snprintf(g->id, sizeof(g->id), "%s", str(&r, "lock_id"));
    snprintf(g->ref, sizeof(g->ref), "%s", str(&r, "ref"));
    snprintf(g->resource, sizeof(g->resource), "%s", str(&r, "resource"));
    json_t *links = json_object_get(r.json, "links");
    snprintf(g->extend, sizeof(g->extend), "%s", json_string_value(json_object_get(links, "extend")));
    snprintf(g->release, sizeof(g->release), "%s", json_string_value(json_object_get(links, "release")));
    assert_int_equal(strlen(g->id), 40);
    assert_int_equal(strlen(g->ref), 16);
    hc_response_clear(&r);
}

static unsigned long long forbidden_total(const struct fld *d)
{
    struct hc_response r = {0};
    assert_int_equal(call(d, ALICE, "GET", "/metrics", NULL, &r), 200);
    unsigned long long sum = 0;
    for (const char *p = r.body; (p = strstr(p, "\nfencelockd_forbidden_total{")) != NULL; p++) {
        const char *v = strchr(p + 1, ' ');
        if (v != NULL)
            sum += strtoull(v + 1, NULL, 10);
    }
    hc_response_clear(&r);
    return sum;
}

/* For every kind: bob can neither release, extend nor re-enter alice's
 * lock through either instance, and it stays hers. */
static void tenants_cannot_touch_another_s_lock(void **state)
{
    struct tfx *f = *state;
    static const struct {
        const char *path, *body, *status;
    } kinds[] = {
        {"/v1/locks/t:plain", "{\"ttl_ms\":20000}", "/v1/locks/t:plain"},
        {"/v1/locks/t:sem", "{\"kind\":\"semaphore\",\"permits\":2,\"ttl_ms\":20000}",
         "/v1/locks/t:sem?kind=semaphore&permits=2"},
        {"/v1/locks", "{\"resources\":[\"t:m1\",\"t:m2\"],\"ttl_ms\":20000}", "/v1/locks/t:m1"},
        {"/v1/locks/t:re", "{\"kind\":\"reentrant\",\"ttl_ms\":20000}", "/v1/locks/t:re?kind=reentrant"},
        {"/v1/locks/t:rw", "{\"kind\":\"read\",\"ttl_ms\":20000}", "/v1/locks/t:rw?kind=rw"},
        {"/v1/locks/t:w", "{\"kind\":\"write\",\"ttl_ms\":20000}", "/v1/locks/t:w?kind=rw"},
    };
    unsigned long long forbidden0 = forbidden_total(&f->a);
    unsigned refused = 0;
    for (size_t k = 0; k < sizeof(kinds) / sizeof(kinds[0]); k++) {
        struct grant g;
        take(&f->a, ALICE, kinds[k].path, kinds[k].body, &g);
        struct hc_response r = {0};
        const struct fld *inst[] = {&f->a, &f->b};
        for (int i = 0; i < 2; i++) {
            assert_int_equal(call(inst[i], BOB, "DELETE", g.release, NULL, &r), 403);
            assert_string_equal(str(&r, "error"), "forbidden");
            assert_int_equal(call(inst[i], BOB, "POST", g.extend, "{\"ttl_ms\":60000}", &r), 403);
            assert_string_equal(str(&r, "error"), "forbidden");
            refused += 2;
            if (strstr(kinds[k].body, "reentrant") != NULL) {
                char body[128];
                snprintf(body, sizeof(body), "{\"kind\":\"reentrant\",\"lock_id\":\"%s\"}", g.id);
                assert_int_equal(call(inst[i], BOB, "POST", kinds[k].path, body, &r), 403);
                refused++;
                /* alice re-enters her own. */
                assert_int_equal(call(inst[i], ALICE, "POST", kinds[k].path, body, &r), 200);
                char hold_release[2048];
                snprintf(hold_release, sizeof(hold_release), "%s",
                         json_string_value(json_object_get(json_object_get(r.json, "links"), "release")));
                assert_int_equal(call(inst[1 - i], ALICE, "DELETE", hold_release, NULL, &r), 200);
            }
        }
        /* Still alice's: she extends it through the other instance. */
        assert_int_equal(call(&f->b, ALICE, "POST", g.extend, "{\"ttl_ms\":20000}", &r), 200);
        assert_true(fld_int(&r, "nodes_granted") >= 2);
        /* Status names her and her ref, never the id. */
        assert_int_equal(call(&f->b, BOB, "GET", kinds[k].status, NULL, &r), 200);
        assert_null(strstr(r.body, g.id));
        if (strstr(kinds[k].body, "semaphore") != NULL) {
            json_t *permits = json_object_get(r.json, "permit");
            int named = 0;
            for (size_t p = 0; p < json_array_size(permits); p++) {
                json_t *e = json_array_get(permits, p);
                const char *c = json_string_value(json_object_get(e, "holder_client"));
                if (c != NULL && strcmp(c, "alice") == 0 &&
                    strcmp(json_string_value(json_object_get(e, "holder_ref")), g.ref) == 0)
                    named++;
            }
            assert_int_equal(named, 1);
        } else if (strstr(kinds[k].body, "\"read\"") == NULL) {
            assert_string_equal(str(&r, "holder_client"), "alice");
            assert_string_equal(str(&r, "holder_ref"), g.ref);
            assert_null(json_object_get(r.json, "holder"));
        }
        assert_int_equal(call(&f->b, ALICE, "DELETE", g.release, NULL, &r), 200);
        assert_true(fld_int(&r, "nodes_released") >= 2);
        hc_response_clear(&r);
    }
    assert_int_equal(forbidden_total(&f->a) + forbidden_total(&f->b) - forbidden0, refused);
}

/* A refused acquisition names the holder's client and ref, not its id. */
static void tenants_refusal_shows_the_holder_s_client(void **state)
{
    struct tfx *f = *state;
    struct grant g;
    take(&f->a, ALICE, "/v1/locks/t:held", "{\"ttl_ms\":20000}", &g);
    struct hc_response r = {0};
    assert_int_equal(call(&f->b, BOB, "POST", "/v1/locks/t:held", NULL, &r), 409);
    assert_string_equal(str(&r, "error"), "locked");
    assert_string_equal(str(&r, "holder_client"), "alice");
    assert_string_equal(str(&r, "holder_ref"), g.ref);
    assert_null(strstr(r.body, g.id));
    /* A write lock refused by a reader: the same. */
    struct grant rd;
    take(&f->a, ALICE, "/v1/locks/t:readers", "{\"kind\":\"read\",\"ttl_ms\":20000}", &rd);
    assert_int_equal(call(&f->b, BOB, "POST", "/v1/locks/t:readers", "{\"kind\":\"write\"}", &r), 409);
    assert_null(strstr(r.body, rd.id));
    assert_int_equal(call(&f->a, ALICE, "DELETE", rd.release, NULL, &r), 200);
    assert_int_equal(call(&f->a, ALICE, "DELETE", g.release, NULL, &r), 200);
    hc_response_clear(&r);
}

/* read-only reads; prefix= and resource= bound what a client may name. */
static void tenants_rules_of_the_auth_file(void **state)
{
    struct tfx *f = *state;
    struct hc_response r = {0};
    assert_int_equal(call(&f->a, WATCHER, "GET", "/v1/locks/anything", NULL, &r), 200);
    assert_int_equal(call(&f->a, WATCHER, "GET", "/metrics", NULL, &r), 200);
    assert_int_equal(call(&f->a, WATCHER, "POST", "/v1/locks/anything", NULL, &r), 403);
    assert_non_null(strstr(str(&r, "message"), "read-only"));

    struct grant g;
    take(&f->a, BILLING, "/v1/locks/invoice:42", NULL, &g);
    assert_int_equal(call(&f->a, BILLING, "DELETE", g.release, NULL, &r), 200);
    take(&f->a, BILLING, "/v1/locks/a%20b", NULL, &g);
    assert_int_equal(call(&f->a, BILLING, "DELETE", g.release, NULL, &r), 200);
    assert_int_equal(call(&f->a, BILLING, "POST", "/v1/locks/order:1", NULL, &r), 403);
    assert_int_equal(call(&f->a, BILLING, "GET", "/v1/locks/order:1", NULL, &r), 403);
    assert_int_equal(call(&f->a, BILLING, "POST", "/v1/locks/a%20bc", NULL, &r), 403);
    assert_int_equal(
        call(&f->a, BILLING, "POST", "/v1/locks", "{\"resources\":[\"invoice:1\",\"order:1\"]}", &r), 403);
    take(&f->a, BILLING, "/v1/locks", "{\"resources\":[\"invoice:1\",\"invoice:2\"]}", &g);
    assert_int_equal(call(&f->a, BILLING, "DELETE", g.release, NULL, &r), 200);
    /* A permit of its semaphore, released by the permit's own path. */
    take(&f->a, BILLING, "/v1/locks/pool", "{\"kind\":\"semaphore\",\"permits\":3}", &g);
    assert_non_null(strstr(g.release, "pool%3Apermit%3A"));
    assert_int_equal(call(&f->b, BILLING, "DELETE", g.release, NULL, &r), 200);
    assert_int_equal(
        call(&f->a, BILLING, "POST", "/v1/locks/pool2", "{\"kind\":\"semaphore\",\"permits\":3}", &r), 403);
    /* Another's prefix "pool:" does not reach into the semaphore "pool":
     * its permits' names are the semaphore's. */
    assert_int_equal(call(&f->a, POOLS, "POST", "/v1/locks/pool%3Apermit%3A0", NULL, &r), 403);
    take(&f->a, POOLS, "/v1/locks/pool%3Aa", NULL, &g);
    assert_int_equal(call(&f->a, POOLS, "DELETE", g.release, NULL, &r), 200);
    hc_response_clear(&r);
}

/* Every route with a second tenant's token, on the first tenant's locks,
 * with the kind in the query changed, the id's case changed, the resource
 * swapped: never a 2xx, never a lock lost. */
static void tenants_hostile_routes(void **state)
{
    struct tfx *f = *state;
    struct grant g;
    take(&f->a, ALICE, "/v1/locks/t:victim", "{\"ttl_ms\":20000}", &g);
    char upper[64];
    snprintf(upper, sizeof(upper), "%s", g.id);
    for (char *p = upper; *p; p++)
        if (*p >= 'a' && *p <= 'f')
            *p = (char)(*p - 'a' + 'A');
    const char *kinds[] = {"",           "?kind=plain", "?kind=permit", "?kind=multi", "?kind=reentrant",
                           "?kind=read", "?kind=write"};
    const char *resources[] = {"t:victim", "t:other", "t%3Avictim"};
    struct hc_response r = {0};
    for (size_t k = 0; k < sizeof(kinds) / sizeof(kinds[0]); k++) {
        for (size_t res = 0; res < sizeof(resources) / sizeof(resources[0]); res++) {
            char path[512];
            snprintf(path, sizeof(path), "/v1/locks/%s/%s%s", resources[res], g.id, kinds[k]);
            assert_int_equal(call(&f->b, BOB, "DELETE", path, NULL, &r), 403);
            snprintf(path, sizeof(path), "/v1/locks/%s/%s/extend%s", resources[res], g.id, kinds[k]);
            assert_int_equal(call(&f->b, BOB, "POST", path, NULL, &r), 403);
            snprintf(path, sizeof(path), "/v1/locks/%s/%s%s", resources[res], upper, kinds[k]);
            int st = call(&f->b, BOB, "DELETE", path, NULL, &r);
            assert_true(st == 400 || st == 403);
        }
    }
    /* The id in a body, in the path twice, in a multi's set. */
    char body[256];
    snprintf(body, sizeof(body), "{\"kind\":\"reentrant\",\"lock_id\":\"%s\"}", g.id);
    assert_int_equal(call(&f->b, BOB, "POST", "/v1/locks/t:victim", body, &r), 403);
    char path[512];
    snprintf(path, sizeof(path), "/v1/locks/%s/%s", g.id, g.id);
    assert_int_equal(call(&f->b, BOB, "DELETE", path, NULL, &r), 403);
    /* Nothing lost: alice's lock holds on a majority, with its own id. */
    assert_true(rh_holders(f->rc, "t:victim", g.id) >= 2);
    assert_int_equal(call(&f->a, ALICE, "DELETE", g.release, NULL, &r), 200);
    hc_response_clear(&r);
}

struct waiter {
    const struct fld *d;
    const char *path;
    struct hc_response r;
};

static void *wait_main(void *arg)
{
    struct waiter *w = arg;
    fld_call(w->d, "POST", w->path, "{\"wait_ms\":8000}", ALICE, &w->r);
    return NULL;
}

static void write_tokens(const struct tfx *f, const char *text)
{
    char path[320], tmp[330];
    snprintf(path, sizeof(path), "%s/tokens", f->dir);
    snprintf(tmp, sizeof(tmp), "%s.new", path);
    FILE *fp = fopen(tmp, "w");
    assert_non_null(fp);
    fputs(text, fp);
    fclose(fp);
    chmod(tmp, 0600);
    assert_int_equal(rename(tmp, path), 0);
}

/* SIGHUP reads the auth file again: bob's token goes, carol's comes, a
 * waiting request of alice's goes on; a file that does not load is
 * refused and the clients in use stay. */
static void tenants_sighup_reloads_the_auth_file(void **state)
{
    struct tfx *f = *state;
    struct fld *d = &f->a;
    const char *carol = "Authorization: Bearer carol-token-0123456789\r\n";
    struct hc_response r = {0};
    struct grant g;
    take(d, ALICE, "/v1/locks/reload:held", "{\"ttl_ms\":30000}", &g);
    struct waiter w = {.d = d, .path = "/v1/locks/reload:held"};
    pthread_t t;
    assert_int_equal(pthread_create(&t, NULL, wait_main, &w), 0);
    hp_sleep_ms(300); /* the waiter is in */
    assert_int_equal(call(d, carol, "GET", "/v1/locks/reload:x", NULL, &r), 401);
    write_tokens(f, "alice-token-0123456789 alice\ncarol-token-0123456789 carol\n");
    assert_int_equal(kill(d->pid, SIGHUP), 0);
    int st = 0;
    for (long long end = hp_now_ms() + 5000; hp_now_ms() < end; hp_sleep_ms(50))
        if ((st = call(d, carol, "GET", "/v1/locks/reload:x", NULL, &r)) == 200)
            break;
    assert_int_equal(st, 200);
    assert_int_equal(call(d, BOB, "GET", "/v1/locks/reload:x", NULL, &r), 401);
    /* Alice's waiter is still there: her release hands the lock over. */
    assert_int_equal(call(d, ALICE, "DELETE", g.release, NULL, &r), 200);
    pthread_join(t, NULL);
    assert_int_equal(w.r.status, 200);
    hc_response_clear(&w.r);
    /* A file that does not load: refused, carol stays. */
    write_tokens(f, "short alice\n");
    assert_int_equal(kill(d->pid, SIGHUP), 0);
    hp_sleep_ms(500);
    assert_int_equal(call(d, carol, "GET", "/v1/locks/reload:x", NULL, &r), 200);
    assert_true(d->pid > 0 && kill(d->pid, 0) == 0);
    hc_response_clear(&r);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(tenants_cannot_touch_another_s_lock),
        cmocka_unit_test(tenants_refusal_shows_the_holder_s_client),
        cmocka_unit_test(tenants_rules_of_the_auth_file),
        cmocka_unit_test(tenants_hostile_routes),
        cmocka_unit_test(tenants_sighup_reloads_the_auth_file), /* last: it changes the file */
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
