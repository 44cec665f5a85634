/*
 * Two fencelockd instances and the fencelock command contend for one
 * resource: every holder logs when it knew it held the lock and when it
 * let go (CLOCK_MONOTONIC, shared by every process on the machine) with
 * its token, and the logs are checked for two holders at once and for
 * tokens out of order. HTTP holders release through the other instance
 * (the server keeps no state).
 */
#include <errno.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "fld_daemon.h"

#define RUN_MS 3000
#define MAX_HOLDS 4096

struct hold {
    long long from, to; /* the holder held it in [from, to] */
    unsigned long long token;
    int who;
};

static struct hold holds[MAX_HOLDS];
static int n_holds;
static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;

static void record(long long from, long long to, unsigned long long token, int who)
{
    pthread_mutex_lock(&mu);
    if (n_holds < MAX_HOLDS)
        holds[n_holds++] = (struct hold){from, to, token, who};
    pthread_mutex_unlock(&mu);
}

struct worker {
    const struct fld *a, *b; /* acquire through a, release through b */
    int who;
    int grants, errors;
    const char *cli_nodes; /* the CLI worker: FENCELOCK_NODES */
};

static void *http_worker(void *arg)
{
    struct worker *w = arg;
    long long end = hp_now_ms() + RUN_MS;
    while (hp_now_ms() < end) {
        long long sent = hp_now_ms();
        struct hc_response r = {0};
        const char *body = "{\"ttl_ms\":400,\"wait_ms\":2000}";
        if (hc_request(w->a->port, "POST", "/v1/locks/contended", "", body, strlen(body), &r) != 0) {
            w->errors++;
            continue;
        }
        if (r.status != 200) {
            w->errors += r.status != 409;
            hc_response_clear(&r);
            continue;
        }
        long long got = hp_now_ms();
        long long valid_until = sent + fld_int(&r, "validity_ms");
        unsigned long long token = (unsigned long long)fld_int(&r, "token");
        char path[128];
        snprintf(path, sizeof(path), "/v1/locks/contended/%s",
                 json_string_value(json_object_get(r.json, "lock_id")));
        hc_response_clear(&r);
        hp_sleep_ms(2); /* the work */
        long long let_go = hp_now_ms();
        record(got, let_go < valid_until ? let_go : valid_until, token, w->who);
        w->grants++;
        if (hc_request(w->b->port, "DELETE", path, "", NULL, 0, &r) != 0 || r.status != 200)
            w->errors++;
        hc_response_clear(&r);
    }
    return NULL;
}

/* Run the fencelock command; its stdout into out. Returns its exit code. */
static int fencelock(const char *nodes, char *out, size_t cap, const char *const *args)
{
    char env_nodes[600];
    snprintf(env_nodes, sizeof(env_nodes), "FENCELOCK_NODES=%s", nodes);
    char *env[] = {env_nodes, NULL};
    const char *argv[16] = {getenv("FENCELOCK_BIN")};
    size_t n = 1;
    for (; args[n - 1] != NULL && n < 15; n++)
        argv[n] = args[n - 1];
    argv[n] = NULL;
    int fd = -1;
    pid_t pid = hp_spawn_io((char *const *)argv, env, "/dev/null", NULL, &fd);
    if (pid < 0)
        return -1;
    size_t len = 0;
    ssize_t got;
    while (len + 1 < cap && (got = read(fd, out + len, cap - len - 1)) > 0)
        len += (size_t)got;
    out[len] = '\0';
    close(fd);
    int st = 0;
    if (hp_wait(pid, 10000, &st) != 0)
        return -1;
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

static void *cli_worker(void *arg)
{
    struct worker *w = arg;
    long long end = hp_now_ms() + RUN_MS;
    char out[4096];
    while (hp_now_ms() < end) {
        long long sent = hp_now_ms();
        const char *acq[] = {"acquire", "contended", "--ttl", "400ms", "--wait", "2s", NULL};
        int code = fencelock(w->cli_nodes, out, sizeof(out), acq);
        if (code != 0) {
            w->errors += code != 75; /* 75: held, the wait ran out */
            continue;
        }
        long long got = hp_now_ms();
        json_t *j = json_loads(out, 0, NULL);
        if (j == NULL) {
            w->errors++;
            continue;
        }
        long long valid_until = sent + (long long)json_integer_value(json_object_get(j, "validity_ms"));
        unsigned long long token = (unsigned long long)json_integer_value(json_object_get(j, "token"));
        char id[64];
        snprintf(id, sizeof(id), "%s", json_string_value(json_object_get(j, "lock_id")));
        json_decref(j);
        long long let_go = hp_now_ms();
        record(got, let_go < valid_until ? let_go : valid_until, token, w->who);
        w->grants++;
        const char *rel[] = {"release", "contended", id, NULL};
        if (fencelock(w->cli_nodes, out, sizeof(out), rel) != 0)
            w->errors++;
    }
    return NULL;
}

static int by_from(const void *x, const void *y)
{
    const struct hold *a = x, *b = y;
    return a->from < b->from ? -1 : a->from > b->from;
}

static void contention_never_two_holders(void **state)
{
    (void)state;
    struct rh_cluster *rc = NULL;
    assert_int_equal(rh_cluster_start(3, NULL, &rc), 0);
    char nodes[512];
    fld_nodes(rc, nodes, sizeof(nodes));
    struct fld a, b;
    const char *quiet[] = {"--log-level", "warn", NULL};
    fld_start(&a, nodes, quiet);
    fld_start(&b, nodes, quiet);
    struct worker w[5] = {
        {.a = &a, .b = &b, .who = 0}, {.a = &a, .b = &b, .who = 1},   {.a = &b, .b = &a, .who = 2},
        {.a = &b, .b = &a, .who = 3}, {.who = 4, .cli_nodes = nodes},
    };
    pthread_t t[5];
    for (int i = 0; i < 5; i++)
        assert_int_equal(pthread_create(&t[i], NULL, i < 4 ? http_worker : cli_worker, &w[i]), 0);
    for (int i = 0; i < 5; i++)
        pthread_join(t[i], NULL);
    int grants = 0;
    for (int i = 0; i < 5; i++) {
        printf("# holder %d: %d grants, %d errors\n", i, w[i].grants, w[i].errors);
        assert_int_equal(w[i].errors, 0);
        assert_true(w[i].grants > 0); /* everyone, the CLI too, got in */
        grants += w[i].grants;
    }
    assert_int_equal(grants, n_holds);
    qsort(holds, (size_t)n_holds, sizeof(holds[0]), by_from);
    for (int i = 1; i < n_holds; i++) {
        if (holds[i].from < holds[i - 1].to)
            fail_msg("holders %d and %d overlap: [%lld, %lld] and [%lld, %lld]", holds[i - 1].who,
                     holds[i].who, holds[i - 1].from, holds[i - 1].to, holds[i].from, holds[i].to);
        if (holds[i].token <= holds[i - 1].token)
            fail_msg("token %llu of holder %d after %llu", holds[i].token, holds[i].who, holds[i - 1].token);
    }
    printf("# %d holds, none overlapping, tokens in order\n", n_holds);
    fld_destroy(&a);
    fld_destroy(&b);
    rh_cluster_free(rc);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(contention_never_two_holders),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
