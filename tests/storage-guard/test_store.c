/* The SQLite store of storage-guard on a real database file: durability
 * settings, a refused write's audit row, reopening, a locked database, a
 * rollback that fails. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>
#include <sqlite3.h>

#include "store.h"

struct fixture {
    char dir[256];
    char path[300];
};

static int setup(void **state)
{
    struct fixture *f = calloc(1, sizeof(*f));
    assert_non_null(f);
    snprintf(f->dir, sizeof(f->dir), "/tmp/sg-store-XXXXXX");
    assert_non_null(mkdtemp(f->dir));
    snprintf(f->path, sizeof(f->path), "%s/s.db", f->dir);
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    struct fixture *f = *state;
    const char *suffix[] = {"", "-wal", "-shm"};
    for (int i = 0; i < 3; i++) {
        char p[320];
        snprintf(p, sizeof(p), "%s%s", f->path, suffix[i]);
        unlink(p);
    }
    rmdir(f->dir);
    free(f);
    return 0;
}

static sg_store *open_store(const char *path)
{
    sg_store *s = NULL;
    char err[256];
    int rc = sg_store_open(path, &s, err, sizeof(err));
    if (rc != 0)
        fail_msg("open %s: %s", path, err);
    return s;
}

static int count_rows(void *arg, const struct sg_log_entry *e)
{
    (void)e;
    (*(int *)arg)++;
    return 0;
}

static void test_store_open_sets_wal_and_full_sync(void **state)
{
    struct fixture *f = *state;
    sg_store *s = open_store(f->path);
    char journal[16];
    int sync = -1;
    assert_int_equal(sg_store_health(s, journal, sizeof(journal), &sync), 0);
    assert_string_equal(journal, "wal");
    assert_int_equal(sync, 2);
    sg_store_close(s);
    /* WAL is a property of the file: another connection sees it too. */
    sqlite3 *db = NULL;
    assert_int_equal(sqlite3_open(f->path, &db), SQLITE_OK);
    sqlite3_stmt *st = NULL;
    assert_int_equal(sqlite3_prepare_v2(db, "PRAGMA journal_mode", -1, &st, NULL), SQLITE_OK);
    assert_int_equal(sqlite3_step(st), SQLITE_ROW);
    assert_string_equal((const char *)sqlite3_column_text(st, 0), "wal");
    sqlite3_finalize(st);
    sqlite3_close(db);
}

static void test_store_refused_write_is_logged_and_kept(void **state)
{
    struct fixture *f = *state;
    sg_store *s = open_store(f->path);
    struct sg_write_result res;
    assert_int_equal(sg_store_put(s, "k", 1, "r", 1, 10, "1", 1, 1000, &res), 0);
    assert_int_equal(res.outcome, SG_OUTCOME_ACCEPTED);
    assert_int_equal(res.version, 1);
    assert_int_equal(sg_store_put(s, "k", 1, "r", 1, 9, "2", 1, 1001, &res), 0);
    assert_int_equal(res.outcome, SG_OUTCOME_STALE);
    assert_int_equal(res.last_token, 10);
    sg_store_close(s);

    s = open_store(f->path);
    int rows = 0;
    struct sg_log_filter all = {.limit = 100};
    assert_int_equal(sg_store_log(s, &all, count_rows, &rows), 0);
    assert_int_equal(rows, 2);
    struct sg_record rec;
    int found = 0;
    assert_int_equal(sg_store_get(s, "k", 1, NULL, 0, 0, 0, NULL, &found, &rec), 0);
    assert_int_equal(found, 1);
    assert_string_equal(rec.value, "1");
    assert_int_equal(rec.token, 10);
    sg_record_clear(&rec);
    uint64_t last = 0;
    assert_int_equal(sg_store_fence(s, "r", 1, &last), 0);
    assert_int_equal(last, 10);
    sg_store_close(s);
}

static void test_store_refuses_bad_arguments(void **state)
{
    struct fixture *f = *state;
    sg_store *s = open_store(f->path);
    struct sg_write_result res;
    char big[1025];
    memset(big, 'x', sizeof(big));
    assert_int_equal(sg_store_put(s, "k", 1, "r", 1, 0, "1", 1, 0, &res), -EINVAL);
    assert_int_equal(sg_store_put(s, "k", 1, "r", 1, (uint64_t)1 << 53, "1", 1, 0, &res), -EINVAL);
    assert_int_equal(sg_store_put(s, "", 0, "r", 1, 1, "1", 1, 0, &res), -EINVAL);
    assert_int_equal(sg_store_put(s, big, sizeof(big), "r", 1, 1, "1", 1, 0, &res), -EINVAL);
    assert_int_equal(sg_store_put(s, "k", 1, big, sizeof(big), 1, "1", 1, 0, &res), -EINVAL);
    int rows = 0;
    struct sg_log_filter all = {.limit = 100};
    assert_int_equal(sg_store_log(s, &all, count_rows, &rows), 0);
    assert_int_equal(rows, 0);
    sg_store_close(s);
}

static void test_store_locked_database_is_busy_and_writes_nothing(void **state)
{
    struct fixture *f = *state;
    sg_store *s = open_store(f->path);
    sg_store_set_busy_timeout(s, 100);
    /* Another process (here: another connection) holds the write lock. */
    sqlite3 *other = NULL;
    assert_int_equal(sqlite3_open(f->path, &other), SQLITE_OK);
    assert_int_equal(sqlite3_exec(other, "BEGIN IMMEDIATE", NULL, NULL, NULL), SQLITE_OK);
    struct sg_write_result res;
    assert_int_equal(sg_store_put(s, "k", 1, "r", 1, 5, "1", 1, 0, &res), SG_STORE_EBUSY);
    struct sg_record rec;
    int found = 1;
    assert_int_equal(sg_store_get(s, "k", 1, "r", 1, 6, 0, &res, &found, &rec), SG_STORE_EBUSY);
    assert_int_equal(found, 0);
    assert_int_equal(sqlite3_exec(other, "COMMIT", NULL, NULL, NULL), SQLITE_OK);
    sqlite3_close(other);
    /* Once released, the same store writes again; nothing leaked from the
     * failed attempts. */
    assert_int_equal(sg_store_put(s, "k", 1, "r", 1, 5, "1", 1, 0, &res), 0);
    assert_int_equal(res.outcome, SG_OUTCOME_ACCEPTED);
    assert_int_equal(res.last_token, 0);
    sg_store_close(s);
}

static void test_store_pool_hands_out_each_connection_once(void **state)
{
    struct fixture *f = *state;
    sg_store_pool *p = NULL;
    char err[256];
    assert_int_equal(sg_store_pool_open(f->path, 3, &p, err, sizeof(err)), 0);
    sg_store *a = sg_store_pool_get(p), *b = sg_store_pool_get(p), *c = sg_store_pool_get(p);
    assert_true(a != b && b != c && a != c);
    struct sg_write_result res;
    assert_int_equal(sg_store_put(a, "k", 1, "r", 1, 5, "1", 1, 0, &res), 0);
    uint64_t last = 0;
    assert_int_equal(sg_store_fence(c, "r", 1, &last), 0);
    assert_int_equal(last, 5);
    sg_store_pool_put(p, a);
    sg_store_pool_put(p, b);
    sg_store_pool_put(p, c);
    sg_store_pool_close(p);
}

/* An authorizer on the store's connection: refuses the audit row, so that a
 * write fails after BEGIN; with deny_rollback also refuses ROLLBACK; with
 * interrupt it calls sqlite3_interrupt as the write fails, as a shutdown
 * would. Setting an authorizer expires every prepared statement, so the
 * store's statements meet it when they are prepared again on next use. */
struct trap {
    sqlite3 *db;
    int deny_rollback;
    int interrupt;
};

static int trap_auth(void *arg, int action, const char *a1, const char *a2, const char *a3, const char *a4)
{
    struct trap *t = arg;
    (void)a2;
    (void)a3;
    (void)a4;
    if (action == SQLITE_INSERT && a1 != NULL && strcmp(a1, "sg_log") == 0) {
        if (t->interrupt)
            sqlite3_interrupt(t->db);
        return SQLITE_DENY;
    }
    if (action == SQLITE_TRANSACTION && a1 != NULL && strcmp(a1, "ROLLBACK") == 0 && t->deny_rollback)
        return SQLITE_DENY;
    return SQLITE_OK;
}

/* After a failed write on a whose ROLLBACK failed too: nothing of it is
 * stored, b (the pool's other connection) can write at once, and so can a. */
static void check_no_open_transaction(sg_store *a, sg_store *b)
{
    struct sg_write_result res;
    sg_store_set_busy_timeout(b, 200);
    int rc = sg_store_put(b, "other", 5, "r2", 2, 7, "2", 1, 0, &res);
    if (rc != 0)
        fail_msg("a second connection cannot write (%d: %s): the first still holds the write lock", rc,
                 sg_store_errmsg(b));
    assert_int_equal(res.outcome, SG_OUTCOME_ACCEPTED);
    uint64_t last = 1;
    assert_int_equal(sg_store_fence(b, "r", 1, &last), 0);
    assert_int_equal(last, 0);
    struct sg_record rec;
    int found = 1;
    assert_int_equal(sg_store_get(b, "k", 1, NULL, 0, 0, 0, NULL, &found, &rec), 0);
    assert_int_equal(found, 0);
    rc = sg_store_put(a, "k", 1, "r", 1, 5, "1", 1, 0, &res);
    if (rc != 0)
        fail_msg("the connection cannot write again (%d: %s)", rc, sg_store_errmsg(a));
    assert_int_equal(res.outcome, SG_OUTCOME_ACCEPTED);
    assert_int_equal(res.version, 1);
}

static void test_store_denied_rollback_reopens_the_connection(void **state)
{
    struct fixture *f = *state;
    sg_store_pool *p = NULL;
    char err[256];
    assert_int_equal(sg_store_pool_open(f->path, 2, &p, err, sizeof(err)), 0);
    sg_store *a = sg_store_pool_get(p), *b = sg_store_pool_get(p);
    sqlite3 *db = sg_store_handle(a);
    struct trap t = {.db = db, .deny_rollback = 1};
    assert_int_equal(sqlite3_set_authorizer(db, trap_auth, &t), SQLITE_OK);
    struct sg_write_result res;
    assert_int_equal(sg_store_put(a, "k", 1, "r", 1, 5, "1", 1, 0, &res), SG_STORE_EFAIL);
    const char *msg = sg_store_errmsg(a);
    if (strstr(msg, "append log row") == NULL || strstr(msg, "rollback failed") == NULL ||
        strstr(msg, "reopened") == NULL)
        fail_msg("the message does not tell what happened: %s", msg);
    /* A new connection, without the authorizer. */
    assert_ptr_not_equal(sg_store_handle(a), NULL);
    check_no_open_transaction(a, b);
    sg_store_pool_put(p, a);
    sg_store_pool_put(p, b);
    sg_store_pool_close(p);
}

static void test_store_interrupted_rollback_is_retried(void **state)
{
    struct fixture *f = *state;
    sg_store_pool *p = NULL;
    char err[256];
    assert_int_equal(sg_store_pool_open(f->path, 2, &p, err, sizeof(err)), 0);
    sg_store *a = sg_store_pool_get(p), *b = sg_store_pool_get(p);
    sqlite3 *db = sg_store_handle(a);
    struct trap t = {.db = db, .interrupt = 1};
    assert_int_equal(sqlite3_set_authorizer(db, trap_auth, &t), SQLITE_OK);
    /* A statement left running on the connection keeps the interrupt alive
     * into the ROLLBACK, which then fails with SQLITE_INTERRUPT. */
    sqlite3_stmt *running = NULL;
    assert_int_equal(sqlite3_prepare_v2(db, "SELECT 1 UNION ALL SELECT 2", -1, &running, NULL), SQLITE_OK);
    assert_int_equal(sqlite3_step(running), SQLITE_ROW);
    struct sg_write_result res;
    assert_int_equal(sg_store_put(a, "k", 1, "r", 1, 5, "1", 1, 0, &res), SG_STORE_EFAIL);
    assert_non_null(strstr(sg_store_errmsg(a), "append log row"));
    /* Rolled back on the second try: the same connection. */
    assert_ptr_equal(sg_store_handle(a), db);
    assert_int_equal(sqlite3_get_autocommit(db), 1);
    sqlite3_finalize(running);
    assert_int_equal(sqlite3_set_authorizer(db, NULL, NULL), SQLITE_OK);
    check_no_open_transaction(a, b);
    sg_store_pool_put(p, a);
    sg_store_pool_put(p, b);
    sg_store_pool_close(p);
}

#define T(f) cmocka_unit_test_setup_teardown(f, setup, teardown)

int main(void)
{
    const struct CMUnitTest tests[] = {
        T(test_store_open_sets_wal_and_full_sync),
        T(test_store_refused_write_is_logged_and_kept),
        T(test_store_refuses_bad_arguments),
        T(test_store_locked_database_is_busy_and_writes_nothing),
        T(test_store_pool_hands_out_each_connection_once),
        T(test_store_denied_rollback_reopens_the_connection),
        T(test_store_interrupted_rollback_is_retried),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
