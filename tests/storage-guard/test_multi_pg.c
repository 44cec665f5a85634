/* Three storage-guard processes on one PostgreSQL database, as behind one
 * address. Writers racing with close tokens through all three, and two
 * writers made to wait for the same fence row, never get a stale token
 * admitted. A holder paused past its lease, and a storage-guard process
 * paused with a holder's write inside it, are refused through the other
 * instances' fence. Fenced writers that contend for real Redlock locks
 * (three redis-server nodes) write through any of them while one instance
 * is killed -9 and restarted and PostgreSQL itself is restarted (an
 * immediate shutdown: recovery from the WAL). Each time the audit log must
 * show no stale token admitted and every acknowledged write, once. */
#include <errno.h>
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <jansson.h>
#include <libpq-fe.h>

#include <fencelock-testkit/testkit.h>
#include <lockcore/lockcore.h>

#define INSTANCES 3
#define WRITERS 6
#define RESOURCES 3
#define KEYS 2 /* per resource */
#define TTL_MS 300
#define ACKS_MAX 20000

static struct tk_pg *pg;
static struct rh_cluster *nodes;
static struct tk_sg *sg[INSTANCES];
static atomic_int up[INSTANCES]; /* 0 while an instance is killed */

static pthread_mutex_t acks_mu = PTHREAD_MUTEX_INITIALIZER;
static struct tk_ack acks[ACKS_MAX];
static char ack_keys[ACKS_MAX][32];
static size_t n_acks;
static atomic_int stop_writers, phase; /* phase 2: after the PostgreSQL restart */
static atomic_int acked_after_restart, refused, failed;

static lockcore_client *client_new(void)
{
    const char *addr[3];
    for (int i = 0; i < 3; i++)
        addr[i] = rh_url(nodes, i);
    struct lockcore_options o;
    lockcore_options_init(&o);
    o.nodes = addr;
    o.n_nodes = 3;
    o.ttl_ms = TTL_MS;
    o.retry_count = -1;
    o.retry_delay_ms = 10;
    o.retry_jitter_ms = 10;
    o.wait_ms = 3000;
    lockcore_client *c = NULL;
    char err[256];
    if (lockcore_client_new(&o, &c, err, sizeof(err)) != 0)
        fail_msg("lockcore: %s", err);
    return c;
}

/* PUT value under resource with token through instance i; the status (0
 * when the instance did not answer) and the new version. */
static int put(int i, const char *key, const char *resource, uint64_t token, const char *value,
               uint64_t *version)
{
    char path[96], body[256];
    snprintf(path, sizeof(path), "/v1/records/%s", key);
    snprintf(body, sizeof(body), "{\"value\":%s,\"token\":%llu,\"resource\":\"%s\"}", value,
             (unsigned long long)token, resource);
    struct hc_response r = {0};
    int rc = hc_put(tk_sg_port(sg[i]), path, body, NULL, &r);
    int status = rc == 0 ? r.status : 0;
    if (version != NULL)
        *version = (uint64_t)json_integer_value(json_object_get(r.json, "version"));
    if (rc == 0)
        hc_response_clear(&r);
    return status;
}

static void ack(const char *key, uint64_t version, uint64_t token)
{
    pthread_mutex_lock(&acks_mu);
    if (n_acks < ACKS_MAX) {
        snprintf(ack_keys[n_acks], sizeof(ack_keys[n_acks]), "%s", key);
        acks[n_acks] = (struct tk_ack){ack_keys[n_acks], version, token};
        n_acks++;
    }
    pthread_mutex_unlock(&acks_mu);
}

/* The log of one resource passes both checks, with these acks. */
static void check_log(const char *resource, const struct tk_ack *a, size_t n)
{
    struct tk_log log = {0};
    assert_int_equal(tk_log_fetch(tk_sg_port(sg[0]), resource, &log), 0);
    char msg[512] = "";
    if (tk_check_no_stale_write(&log, msg, sizeof(msg)) != 0)
        fail_msg("stale token admitted: %s", msg);
    if (tk_check_no_ack_lost(&log, a, n, msg, sizeof(msg)) != 0)
        fail_msg("acknowledged write lost: %s", msg);
    tk_log_clear(&log);
}

/* ---- racing tokens ---- */

#define RACERS 12
#define RACES 40

struct racer {
    pthread_t th;
    int id;
    struct tk_ack acks[RACES];
    char keys[RACES][16];
    size_t n_acks;
    int refused;
};

/* Tokens that rise with i but overlap between racers: many writes arrive
 * close to the fence, through three instances at once, without locks. */
static void *racer_main(void *arg)
{
    struct racer *r = arg;
    unsigned seed = 7u * (unsigned)(r->id + 1);
    for (int i = 0; i < RACES; i++) {
        uint64_t token = 1000 + (uint64_t)i * 10 + (uint64_t)(rand_r(&seed) % 60);
        snprintf(r->keys[r->n_acks], sizeof(r->keys[0]), "race-%d", r->id % 4);
        uint64_t version = 0;
        int status = put((r->id + i) % INSTANCES, r->keys[r->n_acks], "race", token, "1", &version);
        if (status == 200) {
            r->acks[r->n_acks] = (struct tk_ack){r->keys[r->n_acks], version, token};
            r->n_acks++;
        } else if (status == 409) {
            r->refused++;
        } else {
            fail_msg("racer: status %d", status);
        }
    }
    return NULL;
}

static void test_multi_racing_tokens_never_go_back(void **state)
{
    (void)state;
    static struct racer r[RACERS];
    for (int i = 0; i < RACERS; i++) {
        r[i] = (struct racer){.id = i};
        pthread_create(&r[i].th, NULL, racer_main, &r[i]);
    }
    static struct tk_ack all[RACERS * RACES];
    size_t n = 0;
    int refused = 0;
    for (int i = 0; i < RACERS; i++) {
        pthread_join(r[i].th, NULL);
        for (size_t k = 0; k < r[i].n_acks; k++)
            all[n++] = r[i].acks[k];
        refused += r[i].refused;
    }
    print_message("racing: %zu accepted, %d refused\n", n, refused);
    assert_true(n > 0 && refused > 0);
    check_log("race", all, n);
}

/* ---- two writers waiting for one fence row ---- */

static void wait_lock_waiters(PGconn *c, int n)
{
    long long deadline = hp_now_ms() + 10000;
    for (;;) {
        PGresult *r =
            PQexec(c, "SELECT count(*) FROM pg_stat_activity WHERE application_name = 'storage-guard'"
                      " AND wait_event_type = 'Lock'");
        int got = PQresultStatus(r) == PGRES_TUPLES_OK ? atoi(PQgetvalue(r, 0, 0)) : -1;
        PQclear(r);
        if (got == n)
            return;
        if (hp_now_ms() > deadline)
            fail_msg("%d storage-guard sessions wait for a lock, not %d", got, n);
        hp_sleep_ms(5);
    }
}

struct waiting_write {
    pthread_t th;
    int instance;
    const char *key;
    uint64_t token;
    int status;
    uint64_t version;
};

static void *waiting_write_main(void *arg)
{
    struct waiting_write *w = arg;
    w->status = put(w->instance, w->key, "wait", w->token, "2", &w->version);
    return NULL;
}

/* While another transaction holds the fence row of "wait", a write with
 * token 10 arrives through instance 0 and one with token 7 through
 * instance 1 (other keys, same resource). When the row is let go, the
 * first decides on the fence as it is then, and the second on what the
 * first committed: 7 must not be admitted after 10. */
static void test_multi_waiting_writers_decide_on_the_commit(void **state)
{
    (void)state;
    uint64_t v = 0;
    assert_int_equal(put(2, "wait-0", "wait", 5, "0", &v), 200);
    struct tk_ack a[3] = {{"wait-0", v, 5}};
    size_t n = 1;
    PGconn *c = PQconnectdb(tk_pg_url(pg));
    assert_int_equal(PQstatus(c), CONNECTION_OK);
    PQclear(PQexec(c, "BEGIN"));
    PGresult *r =
        PQexec(c, "SELECT token FROM fencelock.last_token WHERE resource = 'wait'::bytea FOR UPDATE");
    assert_int_equal(PQresultStatus(r), PGRES_TUPLES_OK);
    PQclear(r);
    PGconn *watch = PQconnectdb(tk_pg_url(pg));
    struct waiting_write w1 = {.instance = 0, .key = "wait-1", .token = 10};
    struct waiting_write w2 = {.instance = 1, .key = "wait-2", .token = 7};
    pthread_create(&w1.th, NULL, waiting_write_main, &w1);
    wait_lock_waiters(watch, 1);
    pthread_create(&w2.th, NULL, waiting_write_main, &w2);
    wait_lock_waiters(watch, 2);
    PQclear(PQexec(c, "COMMIT"));
    pthread_join(w1.th, NULL);
    pthread_join(w2.th, NULL);
    print_message("token 10: %d, token 7: %d\n", w1.status, w2.status);
    assert_int_equal(w1.status, 200);
    assert_true(w2.status == 200 || w2.status == 409);
    a[n++] = (struct tk_ack){"wait-1", w1.version, 10};
    if (w2.status == 200)
        a[n++] = (struct tk_ack){"wait-2", w2.version, 7};
    check_log("wait", a, n);
    PQfinish(watch);
    PQfinish(c);
}

/* ---- one paused holder, one paused instance ---- */

struct late_write {
    pthread_t th;
    int instance;
    uint64_t token;
    int status;
};

static void *late_write_main(void *arg)
{
    struct late_write *w = arg;
    w->status = put(w->instance, "paused-inst", "paused-inst", w->token, "\"late\"", NULL);
    return NULL;
}

static void test_multi_paused_holder_and_instance_are_refused(void **state)
{
    (void)state;
    lockcore_client *h = client_new(), *w = client_new();
    struct lockcore_lock lh, lw;
    uint64_t v = 0;

    /* A holder writes through instance 0, then stalls past its lease; the
     * next holder writes through instance 1; the first one's late write,
     * through instance 2, meets the fence instance 1 raised. */
    assert_int_equal(lockcore_acquire(h, "paused", &lh), 0);
    assert_int_equal(put(0, "paused", "paused", lh.token, "\"first\"", &v), 200);
    ack("paused", v, lh.token);
    hp_sleep_ms(TTL_MS + 100);
    assert_int_equal(lockcore_acquire(w, "paused", &lw), 0);
    assert_true(lw.token > lh.token);
    assert_int_equal(put(1, "paused", "paused", lw.token, "\"second\"", &v), 200);
    ack("paused", v, lw.token);
    assert_int_equal(put(2, "paused", "paused", lh.token, "\"late\"", NULL), 409);
    lockcore_release(w, &lw);

    /* A holder's write waits inside a stopped storage-guard (instance 0)
     * while its lease runs out and the next holder writes through
     * instance 1; resumed, instance 0 refuses it. */
    assert_int_equal(lockcore_acquire(h, "paused-inst", &lh), 0);
    assert_int_equal(tk_sg_pause(sg[0]), 0);
    struct late_write late = {.instance = 0, .token = lh.token};
    pthread_create(&late.th, NULL, late_write_main, &late);
    hp_sleep_ms(TTL_MS + 100);
    assert_int_equal(lockcore_acquire(w, "paused-inst", &lw), 0);
    assert_true(lw.token > lh.token);
    assert_int_equal(put(1, "paused-inst", "paused-inst", lw.token, "\"next\"", &v), 200);
    ack("paused-inst", v, lw.token);
    assert_int_equal(tk_sg_resume(sg[0]), 0);
    pthread_join(late.th, NULL);
    if (late.status != 409) {
        struct tk_log log = {0};
        tk_log_fetch(tk_sg_port(sg[1]), "paused-inst", &log);
        for (size_t i = 0; i < log.n; i++)
            print_error("seq %llu token %llu last %llu %s\n", (unsigned long long)log.entries[i].seq,
                        (unsigned long long)log.entries[i].token,
                        (unsigned long long)log.entries[i].last_token, log.entries[i].outcome);
        fail_msg("late write (token %llu, next holder's %llu): %d", (unsigned long long)lh.token,
                 (unsigned long long)lw.token, late.status);
    }
    lockcore_release(w, &lw);
    lockcore_client_free(h);
    lockcore_client_free(w);
}

/* ---- a restart of PostgreSQL between requests ---- */

struct first_write {
    pthread_t th;
    int instance, n;
    int status;
};

static void *first_write_main(void *arg)
{
    struct first_write *w = arg;
    char key[32];
    snprintf(key, sizeof(key), "after-restart-%d-%d", w->instance, w->n);
    w->status = put(w->instance, key, key, 5, "1", NULL);
    return NULL;
}

/* Every pooled connection of every instance was cut by the restart: the
 * first requests after it find that out before they send anything, and
 * are answered as usual (4 at once per instance, one per connection). */
static void test_multi_restart_of_postgresql_between_requests(void **state)
{
    (void)state;
    assert_int_equal(tk_pg_restart(pg, 0), 0);
    struct first_write w[INSTANCES * 4];
    for (int i = 0; i < INSTANCES * 4; i++) {
        w[i] = (struct first_write){.instance = i % INSTANCES, .n = i};
        pthread_create(&w[i].th, NULL, first_write_main, &w[i]);
    }
    for (int i = 0; i < INSTANCES * 4; i++) {
        pthread_join(w[i].th, NULL);
        assert_int_equal(w[i].status, 200);
    }
}

/* ---- contending writers under faults ---- */

struct writer {
    pthread_t th;
    int id;
};

static void *writer_main(void *arg)
{
    struct writer *wr = arg;
    lockcore_client *c = client_new();
    unsigned seed = 104729u * (unsigned)(wr->id + 1);
    int n = 0;
    while (!atomic_load(&stop_writers)) {
        int r = rand_r(&seed) % RESOURCES;
        char resource[16];
        snprintf(resource, sizeof(resource), "m%d", r);
        struct lockcore_lock lock;
        if (lockcore_acquire(c, resource, &lock) != 0)
            continue;
        int writes = 1 + rand_r(&seed) % 4;
        for (int k = 0; k < writes && !atomic_load(&stop_writers); k++) {
            /* Now and then a holder stalls past its lease before writing:
             * by then another may hold the lock and have written. */
            if (rand_r(&seed) % 8 == 0)
                hp_sleep_ms(TTL_MS + 50);
            char key[32], value[48];
            snprintf(key, sizeof(key), "m%d-%d", r, rand_r(&seed) % KEYS);
            snprintf(value, sizeof(value), "{\"w\":%d,\"n\":%d}", wr->id, n++);
            int i = rand_r(&seed) % INSTANCES;
            while (!atomic_load(&up[i]))
                i = (i + 1) % INSTANCES;
            uint64_t version = 0;
            int status = put(i, key, resource, lock.token, value, &version);
            if (status == 200) {
                ack(key, version, lock.token);
                if (atomic_load(&phase) == 2)
                    atomic_fetch_add(&acked_after_restart, 1);
            } else if (status == 409) {
                atomic_fetch_add(&refused, 1);
            } else {
                atomic_fetch_add(&failed, 1); /* a killed instance, PostgreSQL restarting */
            }
        }
        lockcore_release(c, &lock);
    }
    lockcore_client_free(c);
    return NULL;
}

static void test_multi_faults_lose_no_ack_and_admit_no_stale(void **state)
{
    (void)state;
    struct writer w[WRITERS];
    for (int i = 0; i < WRITERS; i++) {
        w[i].id = i;
        pthread_create(&w[i].th, NULL, writer_main, &w[i]);
    }
    hp_sleep_ms(1500);
    /* kill -9 of one instance in the middle of the traffic, and back. */
    atomic_store(&up[1], 0);
    assert_int_equal(tk_sg_kill(sg[1]), 0);
    hp_sleep_ms(1000);
    assert_int_equal(tk_sg_restart(sg[1]), 0);
    atomic_store(&up[1], 1);
    hp_sleep_ms(1000);
    /* PostgreSQL stops at once (no checkpoint) and starts again with
     * recovery; every instance loses its connections on the way. */
    assert_int_equal(tk_pg_restart(pg, 1), 0);
    atomic_store(&phase, 2);
    hp_sleep_ms(1500);
    atomic_store(&stop_writers, 1);
    for (int i = 0; i < WRITERS; i++)
        pthread_join(w[i].th, NULL);

    struct tk_log log = {0};
    assert_int_equal(tk_log_fetch(tk_sg_port(sg[2]), NULL, &log), 0);
    char msg[512] = "";
    print_message(
        "%zu acknowledged writes (%d after the PostgreSQL restart), %d refused, %d failed; %zu log rows\n",
        n_acks, atomic_load(&acked_after_restart), atomic_load(&refused), atomic_load(&failed), log.n);
    int stale = tk_check_no_stale_write(&log, msg, sizeof(msg));
    if (stale != 0)
        fail_msg("stale token admitted: %s", msg);
    int lost = tk_check_no_ack_lost(&log, acks, n_acks, msg, sizeof(msg));
    if (lost != 0)
        fail_msg("acknowledged write lost: %s", msg);
    /* The story happened: writes before and after the faults, and
     * refusals. (Failures are counted, not required: a request in flight
     * when an instance or the database went down fails, and there may be
     * none.) */
    assert_true(n_acks > 50);
    assert_true(atomic_load(&acked_after_restart) > 0);
    assert_true(atomic_load(&refused) > 0);
    /* Every instance reads the same records, each at least at its last
     * acknowledged version. */
    for (size_t a = 0; a < n_acks; a++) {
        uint64_t max = 0;
        int first = 1;
        for (size_t b = 0; b < n_acks && first; b++) {
            if (strcmp(acks[b].key, acks[a].key) != 0)
                continue;
            first = b == a; /* check each key once, at its first ack */
            max = acks[b].version > max ? acks[b].version : max;
        }
        for (size_t b = a + 1; first && b < n_acks; b++)
            if (strcmp(acks[b].key, acks[a].key) == 0 && acks[b].version > max)
                max = acks[b].version;
        for (int i = 0; first && i < INSTANCES; i++) {
            char path[64];
            snprintf(path, sizeof(path), "/v1/records/%s", acks[a].key);
            struct hc_response r = {0};
            assert_int_equal(hc_get(tk_sg_port(sg[i]), path, &r), 0);
            assert_int_equal(r.status, 200);
            assert_true((uint64_t)json_integer_value(json_object_get(r.json, "version")) >= max);
            hc_response_clear(&r);
        }
    }
    tk_log_clear(&log);
    for (int i = 0; i < INSTANCES; i++)
        assert_int_equal(tk_sg_stop(sg[i]), 0);
}

/* A child of the kit dies with the thread that started it: each starter
 * thread stays until the group ends. */
static pthread_mutex_t start_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t start_cv = PTHREAD_COND_INITIALIZER;
static int started, starters_end;

struct starter {
    pthread_t th;
    int i, rc;
};
static struct starter starters[INSTANCES];

static void *start_main(void *arg)
{
    struct starter *st = arg;
    struct tk_sg_options o;
    tk_sg_options_init(&o);
    o.db = tk_pg_url(pg);
    o.log_level = "warn";
    st->rc = tk_sg_start(&o, &sg[st->i]);
    pthread_mutex_lock(&start_mu);
    started++;
    pthread_cond_broadcast(&start_cv);
    while (!starters_end)
        pthread_cond_wait(&start_cv, &start_mu);
    pthread_mutex_unlock(&start_mu);
    return NULL;
}

/* The instances start together on an empty database: each finds the
 * tables missing, and they create them one at a time. */
static int group_setup(void **state)
{
    (void)state;
    if (tk_pg_start(NULL, &pg) != 0 || rh_cluster_start(3, NULL, &nodes) != 0)
        fail_msg("PostgreSQL or redis-server did not start (see above)");
    for (int i = 0; i < INSTANCES; i++) {
        starters[i] = (struct starter){.i = i};
        pthread_create(&starters[i].th, NULL, start_main, &starters[i]);
    }
    pthread_mutex_lock(&start_mu);
    while (started < INSTANCES)
        pthread_cond_wait(&start_cv, &start_mu);
    pthread_mutex_unlock(&start_mu);
    for (int i = 0; i < INSTANCES; i++) {
        if (starters[i].rc != 0)
            fail_msg("storage-guard %d did not start", i);
        atomic_store(&up[i], 1);
    }
    return 0;
}

static int group_teardown(void **state)
{
    (void)state;
    for (int i = 0; i < INSTANCES; i++)
        tk_sg_free(sg[i]);
    pthread_mutex_lock(&start_mu);
    starters_end = 1;
    pthread_cond_broadcast(&start_cv);
    pthread_mutex_unlock(&start_mu);
    for (int i = 0; i < INSTANCES; i++)
        pthread_join(starters[i].th, NULL);
    rh_cluster_free(nodes);
    tk_pg_free(pg);
    return 0;
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_multi_racing_tokens_never_go_back),
        cmocka_unit_test(test_multi_waiting_writers_decide_on_the_commit),
        cmocka_unit_test(test_multi_paused_holder_and_instance_are_refused),
        cmocka_unit_test(test_multi_restart_of_postgresql_between_requests),
        cmocka_unit_test(test_multi_faults_lose_no_ack_and_admit_no_stale),
    };
    return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
