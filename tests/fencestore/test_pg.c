/* The check inside PostgreSQL (fencelock.sql) and fencestore's libpq side,
 * against a real server from the test kit: the SQLite store's behaviour,
 * concurrent transactions at READ COMMITTED and SERIALIZABLE that never
 * admit out of order, the reader's check, the install, and switching
 * databases by the connection string. */
#include <errno.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <signal.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>
#include <libpq-fe.h>

#include <fencelock-testkit/testkit.h>
#include <fencestore/fencestore.h>

static struct tk_pg *pg;

static int group_setup(void **state)
{
    (void)state;
    int rc = tk_pg_start(NULL, &pg);
    if (rc != 0)
        fail_msg("PostgreSQL did not start: %s", strerror(-rc));
    return 0;
}

static int group_teardown(void **state)
{
    (void)state;
    tk_pg_free(pg);
    return 0;
}

static PGconn *connect_db(const char *url)
{
    PGconn *c = PQconnectdb(url);
    if (PQstatus(c) != CONNECTION_OK)
        fail_msg("connect %s: %s", url, PQerrorMessage(c));
    return c;
}

static void exec(PGconn *c, const char *sql)
{
    PGresult *r = PQexec(c, sql);
    ExecStatusType st = PQresultStatus(r);
    if (st != PGRES_COMMAND_OK && st != PGRES_TUPLES_OK)
        fail_msg("%s: %s", sql, PQerrorMessage(c));
    PQclear(r);
}

/* The one value of a query, as a number (-1 on failure). */
static long long value(PGconn *c, const char *sql)
{
    PGresult *r = PQexec(c, sql);
    long long v = -1;
    if (PQresultStatus(r) == PGRES_TUPLES_OK && PQntuples(r) == 1 && !PQgetisnull(r, 0, 0))
        v = atoll(PQgetvalue(r, 0, 0));
    PQclear(r);
    return v;
}

/* The SQLSTATE of a statement that must fail. */
static void expect_state(PGconn *c, const char *sql, const char *state)
{
    PGresult *r = PQexec(c, sql);
    const char *got = PQresultErrorField(r, PG_DIAG_SQLSTATE);
    if (PQresultStatus(r) != PGRES_FATAL_ERROR || got == NULL || strcmp(got, state) != 0)
        fail_msg("%s: wanted SQLSTATE %s, got %s (%s)", sql, state, got ? got : "none", PQerrorMessage(c));
    PQclear(r);
}

/* A store over its own connection. */
static fencestore *open_store(const char *conn)
{
    fencestore *s = NULL;
    char err[256] = "";
    if (fencestore_open(conn, &s, err, sizeof(err)) != 0)
        fail_msg("fencestore_open %s: %s", conn, err);
    return s;
}

/* ---- the SQLite store's behaviour, on PostgreSQL ---- */

static void test_pg_admits_newer_refuses_older(void **state)
{
    (void)state;
    fencestore *s = open_store(tk_pg_url(pg));
    assert_int_equal(fencestore_backend(s), FENCESTORE_POSTGRESQL);
    uint64_t last = 99, got = 7;
    assert_int_equal(fencestore_last(s, "a1", 2, &got), 0);
    assert_true(got == 0);
    assert_int_equal(fencestore_admit(s, "a1", 2, 10, &last), 0);
    assert_true(last == 0);
    assert_int_equal(fencestore_admit(s, "a1", 2, 10, &last), 0); /* the same holder again */
    assert_true(last == 10);
    assert_int_equal(fencestore_admit(s, "a1", 2, 9, &last), FENCING_ESTALE);
    assert_true(last == 10);
    assert_non_null(strstr(fencestore_errmsg(s), "older"));
    assert_int_equal(fencestore_admit(s, "a1", 2, 12, NULL), 0);
    assert_int_equal(fencestore_last(s, "a1", 2, &got), 0);
    assert_true(got == 12);
    /* Another resource has its own fence; resources are bytes. */
    const char a[] = {'x', '\0', 'y'}, b[] = {'x', '\0', 'z'};
    assert_int_equal(fencestore_admit(s, a, 3, 50, NULL), 0);
    assert_int_equal(fencestore_admit(s, b, 3, 5, NULL), 0);
    assert_int_equal(fencestore_admit(s, "x", 1, 1, NULL), 0);
    const char *sql = "'); DROP TABLE fencing_last_token; --";
    assert_int_equal(fencestore_admit(s, sql, strlen(sql), 7, NULL), 0);
    assert_int_equal(fencestore_last(s, a, 3, &got), 0);
    assert_true(got == 50);
    /* psql's text form names the same fence as the bytes. */
    PGconn *c = fencestore_db(s);
    assert_int_equal(value(c, "SELECT fencelock.last('a1')"), 12);
    assert_int_equal(value(c, "SELECT fencelock.admit('a1', 13)"), 12);
    expect_state(c, "SELECT fencelock.admit('a1', 11)", "FL409");
    expect_state(c, "SELECT fencelock.admit('a1', 0)", "FL428");
    expect_state(c, "SELECT fencelock.admit('a1', NULL)", "FL428");
    expect_state(c, "SELECT fencelock.admit('a1', 9007199254740992)", "22023");
    expect_state(c, "SELECT fencelock.admit('a1', -5)", "22023");
    expect_state(c, "SELECT fencelock.admit(''::bytea, 5)", "22023");
    expect_state(c, "SELECT fencelock.admit(decode(repeat('61', 1025), 'hex'), 5)", "22023");
    assert_int_equal(value(c, "SELECT fencelock.admit(decode(repeat('61', 1024), 'hex'), 5)"), 0);
    assert_int_equal(fencestore_last(s, "a1", 2, &got), 0);
    assert_true(got == 13);
    fencestore_free(s);
}

static void test_pg_rollback_undoes_admission_and_refusal_keeps_transaction(void **state)
{
    (void)state;
    fencestore *s = open_store(tk_pg_url(pg));
    PGconn *c = fencestore_db(s);
    exec(c, "CREATE TABLE IF NOT EXISTS audit (resource text, token bigint, outcome text)");
    assert_int_equal(fencestore_begin(s), 0);
    assert_int_equal(fencestore_admit(s, "t1", 2, 100, NULL), 0);
    assert_int_equal(fencestore_rollback(s), 0);
    uint64_t got = 1;
    assert_int_equal(fencestore_last(s, "t1", 2, &got), 0);
    assert_true(got == 0);
    assert_int_equal(fencestore_begin(s), 0);
    assert_int_equal(fencestore_admit(s, "t1", 2, 100, NULL), 0);
    assert_int_equal(fencestore_commit(s), 0);
    /* A refusal does not abort the transaction: its audit row commits. */
    assert_int_equal(fencestore_begin(s), 0);
    assert_int_equal(fencestore_admit(s, "t1", 2, 90, NULL), FENCING_ESTALE);
    exec(c, "INSERT INTO audit VALUES ('t1', 90, 'stale')");
    assert_int_equal(fencestore_commit(s), 0);
    assert_int_equal(value(c, "SELECT count(*) FROM audit WHERE token = 90"), 1);
    /* A transaction that failed commits nothing, and says so. */
    assert_int_equal(fencestore_begin(s), 0);
    assert_int_equal(fencestore_admit(s, "t1", 2, 200, NULL), 0);
    PQclear(PQexec(c, "SELECT 1/0"));
    assert_int_equal(fencestore_admit(s, "t1", 2, 200, NULL), FENCING_ESTORE);
    assert_int_equal(fencestore_commit(s), FENCING_ESTORE);
    assert_non_null(strstr(fencestore_errmsg(s), "rolled back"));
    assert_int_equal(fencestore_last(s, "t1", 2, &got), 0);
    assert_true(got == 100);
    fencestore_free(s);
}

static void test_pg_rejects_bad_arguments(void **state)
{
    (void)state;
    fencestore *s = open_store(tk_pg_url(pg));
    uint64_t got = 0;
    char big[FENCING_RESOURCE_MAX + 1];
    memset(big, 'b', sizeof(big));
    assert_int_equal(fencestore_admit(s, NULL, 1, 1, NULL), -EINVAL);
    assert_int_equal(fencestore_admit(s, "r", 0, 1, NULL), -EINVAL);
    assert_int_equal(fencestore_admit(s, big, sizeof(big), 1, NULL), -EINVAL);
    assert_int_equal(fencestore_admit(s, big, sizeof(big) - 1, 1, NULL), 0);
    assert_int_equal(fencestore_admit(s, "r", 1, 0, NULL), FENCING_ENOTOKEN);
    assert_int_equal(fencestore_admit(s, "r", 1, FENCING_TOKEN_MAX, NULL), -EINVAL);
    assert_int_equal(fencestore_check(s, "r", 1, 0, NULL), FENCING_ENOTOKEN);
    assert_int_equal(fencestore_last(s, "r", 1, NULL), -EINVAL);
    assert_int_equal(fencestore_last(NULL, "r", 1, &got), -EINVAL);
    assert_int_equal(fencestore_begin(NULL), -EINVAL);
    assert_int_equal(fencestore_commit(NULL), -EINVAL);
    assert_int_equal(fencestore_rollback(NULL), -EINVAL);
    assert_int_equal(fencestore_backend(NULL), 0);
    assert_null(fencestore_db(NULL));
    fencestore *t = (fencestore *)1;
    char err[256] = "";
    assert_int_equal(fencestore_new_pg(NULL, &t, err, sizeof(err)), -EINVAL);
    assert_true(t == (fencestore *)1); /* not written on failure */
    assert_int_equal(fencestore_open(NULL, &t, err, sizeof(err)), -EINVAL);
    assert_int_equal(fencestore_open("", &t, err, sizeof(err)), -EINVAL);
    /* A server that is not there: the message names it, without a password. */
    char url[128];
    snprintf(url, sizeof(url), "postgresql://fencelock:secret-pw@127.0.0.1:%d/postgres?connect_timeout=2",
             rh_free_port());
    err[0] = '\0';
    assert_int_equal(fencestore_open(url, &t, err, sizeof(err)), FENCING_ESTORE);
    assert_true(t == (fencestore *)1);
    assert_true(err[0] != '\0');
    assert_null(strstr(err, "secret-pw"));
    fencestore_free(s);
}

/* ---- switching databases by the connection string ---- */

/* One guarded write through the same calls, whatever the database. */
static int guarded_write(fencestore *s, const char *resource, uint64_t token)
{
    int rc = fencestore_begin(s);
    if (rc != 0)
        return rc;
    rc = fencestore_admit(s, resource, strlen(resource), token, NULL);
    if (rc != 0) {
        fencestore_rollback(s);
        return rc;
    }
    return fencestore_commit(s);
}

static void test_pg_open_switches_by_connection_string(void **state)
{
    (void)state;
    char dir[256], path[300];
    assert_int_equal(rh_mkdtemp("fencestore", dir, sizeof(dir)), 0);
    snprintf(path, sizeof(path), "%s/fences.db", dir);
    const char *conns[] = {path, tk_pg_url(pg)};
    const int backends[] = {FENCESTORE_SQLITE, FENCESTORE_POSTGRESQL};
    for (int i = 0; i < 2; i++) {
        fencestore *s = open_store(conns[i]);
        assert_int_equal(fencestore_backend(s), backends[i]);
        assert_non_null(fencestore_db(s));
        assert_int_equal(guarded_write(s, "sw", 5), 0);
        assert_int_equal(guarded_write(s, "sw", 4), FENCING_ESTALE);
        assert_int_equal(guarded_write(s, "sw", 6), 0);
        uint64_t last = 0;
        assert_int_equal(fencestore_check(s, "sw", 2, 6, &last), 0);
        assert_int_equal(fencestore_check(s, "sw", 2, 5, &last), FENCING_ESTALE);
        assert_true(last == 6);
        assert_int_equal(fencestore_last(s, "sw", 2, &last), 0);
        assert_true(last == 6); /* a check never raises */
        fencestore_free(s);
    }
    /* The SQLite file is in WAL mode, as fencestore_open promises. */
    char wal[320];
    snprintf(wal, sizeof(wal), "%s-wal", path);
    assert_int_equal(access(wal, F_OK) == 0 || access(path, F_OK) == 0, 1);
    rh_rmtree(dir);
}

/* A database without fencelock.sql: installed by the first store, one
 * installer at a time when several start at once; inside a transaction it
 * is only looked for. */
struct opener {
    pthread_t th;
    const char *url;
    int rc;
};

static void *open_concurrently(void *arg)
{
    struct opener *o = arg;
    fencestore *s = NULL;
    char err[256];
    o->rc = fencestore_open(o->url, &s, err, sizeof(err));
    if (o->rc != 0)
        fprintf(stderr, "open: %s\n", err);
    fencestore_free(s);
    return NULL;
}

static void test_pg_installs_once_when_missing(void **state)
{
    (void)state;
    assert_int_equal(tk_pg_exec(pg, "CREATE DATABASE fresh1"), 0);
    assert_int_equal(tk_pg_exec(pg, "CREATE DATABASE fresh2"), 0);
    char url1[160], url2[160];
    snprintf(url1, sizeof(url1), "postgresql://fencelock@127.0.0.1:%u/fresh1", (unsigned)tk_pg_port(pg));
    snprintf(url2, sizeof(url2), "postgresql://fencelock@127.0.0.1:%u/fresh2", (unsigned)tk_pg_port(pg));

    PGconn *c = connect_db(url1);
    exec(c, "BEGIN");
    fencestore *s = NULL;
    char err[256] = "";
    assert_int_equal(fencestore_new_pg(c, &s, err, sizeof(err)), FENCING_ESTORE);
    assert_non_null(strstr(err, "fencelock.sql"));
    exec(c, "ROLLBACK");
    assert_int_equal(fencestore_new_pg(c, &s, err, sizeof(err)), 0);
    assert_int_equal(value(c, "SELECT count(*) FROM pg_proc WHERE pronamespace = 'fencelock'::regnamespace"),
                     15);
    /* Now present: found inside a transaction too, and the connection is
     * the caller's, left open. */
    fencestore_free(s);
    exec(c, "BEGIN");
    assert_int_equal(fencestore_new_pg(c, &s, err, sizeof(err)), 0);
    exec(c, "COMMIT");
    fencestore_free(s);
    assert_int_equal(PQstatus(c), CONNECTION_OK);
    PQfinish(c);

    struct opener o[6];
    for (int i = 0; i < 6; i++) {
        o[i] = (struct opener){.url = url2};
        pthread_create(&o[i].th, NULL, open_concurrently, &o[i]);
    }
    for (int i = 0; i < 6; i++) {
        pthread_join(o[i].th, NULL);
        assert_int_equal(o[i].rc, 0);
    }
}

/* ---- concurrent transactions ---- */

/* Wait (bounded) until the backend pid waits for a lock. */
static void wait_for_lock_wait(PGconn *c, int pid)
{
    char sql[160];
    snprintf(sql, sizeof(sql),
             "SELECT count(*) FROM pg_stat_activity WHERE pid = %d AND wait_event_type = 'Lock'", pid);
    long long deadline = hp_now_ms() + 10000;
    while (value(c, sql) != 1) {
        if (hp_now_ms() > deadline)
            fail_msg("backend %d never waited for the lock", pid);
        hp_sleep_ms(5);
    }
}

struct attempt {
    pthread_t th;
    fencestore *s;
    const char *resource;
    uint64_t token;
    int check; /* 1: a reader's check instead of an admission */
    int rc;
    uint64_t last;
};

static void *run_attempt(void *arg)
{
    struct attempt *a = arg;
    a->rc = a->check ? fencestore_check(a->s, a->resource, strlen(a->resource), a->token, &a->last)
                     : fencestore_admit(a->s, a->resource, strlen(a->resource), a->token, &a->last);
    return NULL;
}

/* READ COMMITTED: a writer that waited for another decides on what that
 * one committed, for a row that existed and for one both created. */
static void test_pg_read_committed_waits_and_sees_the_commit(void **state)
{
    (void)state;
    fencestore *a = open_store(tk_pg_url(pg)), *b = open_store(tk_pg_url(pg));
    PGconn *watch = connect_db(tk_pg_url(pg));
    int b_pid = PQbackendPID(fencestore_db(b));
    const char *resources[] = {"rc-new", "rc-old"};
    assert_int_equal(fencestore_admit(a, "rc-old", 6, 3, NULL), 0);
    for (int i = 0; i < 2; i++) {
        assert_int_equal(fencestore_begin(a), 0);
        assert_int_equal(fencestore_admit(a, resources[i], strlen(resources[i]), 10, NULL), 0);
        assert_int_equal(fencestore_begin(b), 0);
        struct attempt at = {.s = b, .resource = resources[i], .token = 7};
        pthread_create(&at.th, NULL, run_attempt, &at);
        wait_for_lock_wait(watch, b_pid);
        assert_int_equal(fencestore_commit(a), 0);
        pthread_join(at.th, NULL);
        assert_int_equal(at.rc, FENCING_ESTALE);
        assert_true(at.last == 10);
        assert_int_equal(fencestore_rollback(b), 0);
    }
    /* And when the first rolls back, the second decides on the old value. */
    assert_int_equal(fencestore_begin(a), 0);
    assert_int_equal(fencestore_admit(a, "rc-old", 6, 50, NULL), 0);
    assert_int_equal(fencestore_begin(b), 0);
    struct attempt at = {.s = b, .resource = "rc-old", .token = 20};
    pthread_create(&at.th, NULL, run_attempt, &at);
    wait_for_lock_wait(watch, b_pid);
    assert_int_equal(fencestore_rollback(a), 0);
    pthread_join(at.th, NULL);
    assert_int_equal(at.rc, 0);
    assert_true(at.last == 10);
    assert_int_equal(fencestore_commit(b), 0);
    PQfinish(watch);
    fencestore_free(a);
    fencestore_free(b);
}

/* REPEATABLE READ and SERIALIZABLE: a writer whose snapshot predates the
 * other's commit is told to retry (40001), never admitted on an old token;
 * the retry decides on the new one. */
static void test_pg_serializable_old_snapshot_must_retry(void **state)
{
    (void)state;
    fencestore *a = open_store(tk_pg_url(pg)), *b = open_store(tk_pg_url(pg));
    PGconn *bc = fencestore_db(b);
    const char *levels[] = {"REPEATABLE READ", "SERIALIZABLE"};
    const char *resources[][2] = {{"rr-new", "rr-old"}, {"ser-new", "ser-old"}};
    for (int l = 0; l < 2; l++) {
        for (int i = 0; i < 2; i++) {
            const char *r = resources[l][i];
            if (i == 1)
                assert_int_equal(fencestore_admit(a, r, strlen(r), 3, NULL), 0);
            char begin[64];
            snprintf(begin, sizeof(begin), "BEGIN ISOLATION LEVEL %s", levels[l]);
            exec(bc, begin);
            exec(bc, "SELECT 1"); /* the snapshot is taken here */
            assert_int_equal(guarded_write(a, r, 10), 0);
            /* Older or newer, the old snapshot may not decide. */
            assert_int_equal(fencestore_admit(b, r, strlen(r), i == 0 ? 7 : 12, NULL), -EAGAIN);
            assert_non_null(strstr(fencestore_errmsg(b), "serialize"));
            assert_int_equal(fencestore_rollback(b), 0);
            exec(bc, begin);
            uint64_t last = 0;
            assert_int_equal(fencestore_admit(b, r, strlen(r), 7, &last), FENCING_ESTALE);
            assert_true(last == 10);
            assert_int_equal(fencestore_admit(b, r, strlen(r), 12, &last), 0);
            assert_int_equal(fencestore_commit(b), 0);
        }
    }
    fencestore_free(a);
    fencestore_free(b);
}

/* A reader's check holds the row FOR SHARE: other readers pass, a writer
 * waits for the reader's transaction to end; and it never raises. */
static void test_pg_reader_check_blocks_writers_only(void **state)
{
    (void)state;
    fencestore *r1 = open_store(tk_pg_url(pg)), *r2 = open_store(tk_pg_url(pg));
    fencestore *w = open_store(tk_pg_url(pg));
    PGconn *watch = connect_db(tk_pg_url(pg));
    assert_int_equal(fencestore_admit(w, "rd", 2, 10, NULL), 0);
    assert_int_equal(fencestore_begin(r1), 0);
    assert_int_equal(fencestore_check(r1, "rd", 2, 10, NULL), 0);
    assert_int_equal(fencestore_begin(r2), 0);
    assert_int_equal(fencestore_check(r2, "rd", 2, 11, NULL), 0); /* not blocked by r1 */
    assert_int_equal(fencestore_commit(r2), 0);
    assert_int_equal(fencestore_begin(w), 0);
    struct attempt at = {.s = w, .resource = "rd", .token = 12};
    pthread_create(&at.th, NULL, run_attempt, &at);
    wait_for_lock_wait(watch, PQbackendPID(fencestore_db(w)));
    uint64_t last = 0;
    assert_int_equal(fencestore_last(r1, "rd", 2, &last), 0);
    assert_true(last == 10); /* the writer has not moved it */
    assert_int_equal(fencestore_commit(r1), 0);
    pthread_join(at.th, NULL);
    assert_int_equal(at.rc, 0);
    assert_int_equal(fencestore_commit(w), 0);
    assert_int_equal(fencestore_check(r1, "rd", 2, 11, &last), FENCING_ESTALE);
    assert_true(last == 12);
    /* A check of a resource nobody wrote passes and leaves it at 0. */
    assert_int_equal(fencestore_check(r1, "rd-none", 7, 5, &last), 0);
    assert_int_equal(fencestore_last(r1, "rd-none", 7, &last), 0);
    assert_true(last == 0);
    PQfinish(watch);
    fencestore_free(r1);
    fencestore_free(r2);
    fencestore_free(w);
}

/* A holder killed (kill -9) inside its transaction, with the fence row
 * locked and raised to its token: the server rolls the transaction back
 * when the connection goes, the waiting writer goes on, and the dead
 * holder's token was never admitted. */
static void test_pg_killed_holder_rolls_back(void **state)
{
    (void)state;
    int ready[2];
    assert_int_equal(pipe(ready), 0);
    pid_t child = fork();
    assert_true(child >= 0);
    if (child == 0) {
        fencestore *s = NULL;
        char err[256];
        if (fencestore_open(tk_pg_url(pg), &s, err, sizeof(err)) != 0 || fencestore_begin(s) != 0 ||
            fencestore_admit(s, "k9", 2, 100, NULL) != 0)
            _exit(1);
        ssize_t w = write(ready[1], "L", 1);
        (void)w;
        for (;;)
            pause();
    }
    close(ready[1]);
    char c = 0;
    assert_int_equal(read(ready[0], &c, 1), 1);
    close(ready[0]);
    fencestore *w = open_store(tk_pg_url(pg));
    PGconn *watch = connect_db(tk_pg_url(pg));
    assert_int_equal(fencestore_begin(w), 0);
    struct attempt at = {.s = w, .resource = "k9", .token = 50};
    pthread_create(&at.th, NULL, run_attempt, &at);
    wait_for_lock_wait(watch, PQbackendPID(fencestore_db(w)));
    assert_int_equal(kill(child, SIGKILL), 0);
    assert_int_equal(waitpid(child, NULL, 0), child);
    pthread_join(at.th, NULL);
    assert_int_equal(at.rc, 0);
    assert_true(at.last == 0);
    assert_int_equal(fencestore_commit(w), 0);
    uint64_t last = 0;
    assert_int_equal(fencestore_last(w, "k9", 2, &last), 0);
    assert_true(last == 50);
    PQfinish(watch);
    fencestore_free(w);
}

/* Many writers with random tokens on a few resources, at READ COMMITTED
 * and SERIALIZABLE, each admitted write recorded in the same transaction:
 * per resource, the recorded tokens never decrease in commit order, and
 * the fence ends at the largest admitted one. */
#define STRESS_THREADS 8
#define STRESS_TXNS 60

struct stress {
    pthread_t th;
    int id;
    int serializable;
    int admitted, refused, retries;
};

static void *stress_main(void *arg)
{
    struct stress *st = arg;
    fencestore *s = open_store(tk_pg_url(pg));
    PGconn *c = fencestore_db(s);
    unsigned seed = 7919u * (unsigned)(st->id + 1);
    for (int i = 0; i < STRESS_TXNS; i++) {
        char resource[16];
        snprintf(resource, sizeof(resource), "st-%d", rand_r(&seed) % 3);
        /* Tokens that rise with i, close enough to race each other. */
        uint64_t token = 1000 + (uint64_t)i * 40 + (uint64_t)(rand_r(&seed) % 200);
        for (int attempt = 0; attempt < 100; attempt++) {
            PQclear(PQexec(c, st->serializable ? "BEGIN ISOLATION LEVEL SERIALIZABLE" : "BEGIN"));
            int rc = fencestore_admit(s, resource, strlen(resource), token, NULL);
            if (rc == 0) {
                /* The caller's own write, in the same transaction; its
                 * sequence number is taken under the resource's row lock. */
                char sql[160];
                snprintf(sql, sizeof(sql), "INSERT INTO stress_writes (resource, token) VALUES ('%s', %llu)",
                         resource, (unsigned long long)token);
                PGresult *r = PQexec(c, sql);
                rc = PQresultStatus(r) == PGRES_COMMAND_OK ? 0 : -EAGAIN;
                PQclear(r);
            }
            if (rc == 0)
                rc = fencestore_commit(s);
            else
                fencestore_rollback(s);
            if (rc == -EAGAIN || (rc == FENCING_ESTORE && strstr(fencestore_errmsg(s), "serialize"))) {
                st->retries++;
                continue;
            }
            if (rc == 0)
                st->admitted++;
            else if (rc == FENCING_ESTALE)
                st->refused++;
            else
                fprintf(stderr, "stress: %d %s\n", rc, fencestore_errmsg(s));
            break;
        }
    }
    fencestore_free(s);
    return NULL;
}

static void test_pg_concurrent_writers_never_admit_out_of_order(void **state)
{
    (void)state;
    assert_int_equal(tk_pg_exec(pg, "CREATE TABLE stress_writes (seq bigserial PRIMARY KEY, resource text,"
                                    " token bigint)"),
                     0);
    struct stress st[STRESS_THREADS];
    for (int i = 0; i < STRESS_THREADS; i++) {
        st[i] = (struct stress){.id = i, .serializable = i % 2};
        pthread_create(&st[i].th, NULL, stress_main, &st[i]);
    }
    int admitted = 0, refused = 0, retries = 0;
    for (int i = 0; i < STRESS_THREADS; i++) {
        pthread_join(st[i].th, NULL);
        admitted += st[i].admitted;
        refused += st[i].refused;
        retries += st[i].retries;
    }
    print_message("admitted %d, refused %d, retried %d\n", admitted, refused, retries);
    assert_int_equal(admitted + refused, STRESS_THREADS * STRESS_TXNS);
    assert_true(admitted > 0 && refused > 0);
    PGconn *c = connect_db(tk_pg_url(pg));
    assert_int_equal(value(c, "SELECT count(*) FROM stress_writes"), admitted);
    /* No recorded write has a token below one recorded before it. */
    assert_int_equal(value(c, "SELECT count(*) FROM (SELECT token, max(token) OVER (PARTITION BY resource"
                              " ORDER BY seq ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING) AS before"
                              " FROM stress_writes) w WHERE token < before"),
                     0);
    assert_int_equal(value(c, "SELECT count(*) FROM (SELECT resource, max(token) AS m FROM stress_writes"
                              " GROUP BY resource) w WHERE m <> fencelock.last(resource)"),
                     0);
    PQfinish(c);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_pg_admits_newer_refuses_older),
        cmocka_unit_test(test_pg_rollback_undoes_admission_and_refusal_keeps_transaction),
        cmocka_unit_test(test_pg_rejects_bad_arguments),
        cmocka_unit_test(test_pg_open_switches_by_connection_string),
        cmocka_unit_test(test_pg_installs_once_when_missing),
        cmocka_unit_test(test_pg_read_committed_waits_and_sees_the_commit),
        cmocka_unit_test(test_pg_serializable_old_snapshot_must_retry),
        cmocka_unit_test(test_pg_reader_check_blocks_writers_only),
        cmocka_unit_test(test_pg_killed_holder_rolls_back),
        cmocka_unit_test(test_pg_concurrent_writers_never_admit_out_of_order),
    };
    return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
