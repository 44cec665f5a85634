/* The SQLite-backed resource-side check: admit equal and newer tokens,
 * refuse older ones, per resource, inside the caller's transaction. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>
#include <sqlite3.h>

#include <fencestore/fencestore.h>

struct fx {
    sqlite3 *db;
    fencestore *s;
};

static int setup(void **state)
{
    static struct fx f;
    assert_int_equal(sqlite3_open(":memory:", &f.db), SQLITE_OK);
    char err[256];
    assert_int_equal(fencestore_new(f.db, &f.s, err, sizeof(err)), 0);
    *state = &f;
    return 0;
}

static int teardown(void **state)
{
    struct fx *f = *state;
    fencestore_free(f->s);
    sqlite3_close(f->db);
    return 0;
}

static void exec(sqlite3 *db, const char *sql)
{
    assert_int_equal(sqlite3_exec(db, sql, NULL, NULL, NULL), SQLITE_OK);
}

static void test_store_admits_newer_refuses_older(void **state)
{
    struct fx *f = *state;
    uint64_t last = 99, got = 0;
    assert_int_equal(fencestore_last(f->s, "r", 1, &got), 0);
    assert_true(got == 0);
    assert_int_equal(fencestore_admit(f->s, "r", 1, 10, &last), 0);
    assert_true(last == 0);
    assert_int_equal(fencestore_admit(f->s, "r", 1, 10, &last), 0); /* same holder again */
    assert_true(last == 10);
    assert_int_equal(fencestore_admit(f->s, "r", 1, 9, &last), FENCING_ESTALE);
    assert_true(last == 10);
    assert_non_null(strstr(fencestore_errmsg(f->s), "older"));
    assert_int_equal(fencestore_admit(f->s, "r", 1, 12, &last), 0);
    assert_int_equal(fencestore_last(f->s, "r", 1, &got), 0);
    assert_true(got == 12);
    /* Another resource has its own fence. */
    assert_int_equal(fencestore_admit(f->s, "s", 1, 3, NULL), 0);
    assert_int_equal(fencestore_last(f->s, "s", 1, &got), 0);
    assert_true(got == 3);
}

static void test_store_resources_are_bytes(void **state)
{
    struct fx *f = *state;
    const char a[] = {'x', '\0', 'y'}, b[] = {'x', '\0', 'z'};
    assert_int_equal(fencestore_admit(f->s, a, 3, 50, NULL), 0);
    assert_int_equal(fencestore_admit(f->s, b, 3, 5, NULL), 0); /* not the same resource */
    assert_int_equal(fencestore_admit(f->s, "x", 1, 1, NULL), 0);
    const char *sql = "'; DROP TABLE fencing_last_token; --";
    assert_int_equal(fencestore_admit(f->s, sql, strlen(sql), 7, NULL), 0);
    uint64_t got = 0;
    assert_int_equal(fencestore_last(f->s, a, 3, &got), 0);
    assert_true(got == 50);
}

static void test_store_rollback_undoes_admission(void **state)
{
    struct fx *f = *state;
    exec(f->db, "BEGIN IMMEDIATE");
    assert_int_equal(fencestore_admit(f->s, "t", 1, 100, NULL), 0);
    exec(f->db, "ROLLBACK");
    uint64_t got = 1;
    assert_int_equal(fencestore_last(f->s, "t", 1, &got), 0);
    assert_true(got == 0);
    exec(f->db, "BEGIN IMMEDIATE");
    assert_int_equal(fencestore_admit(f->s, "t", 1, 100, NULL), 0);
    exec(f->db, "COMMIT");
    assert_int_equal(fencestore_last(f->s, "t", 1, &got), 0);
    assert_true(got == 100);
}

static void test_store_rejects_bad_arguments(void **state)
{
    struct fx *f = *state;
    uint64_t got;
    char big[FENCING_RESOURCE_MAX + 1];
    memset(big, 'a', sizeof(big));
    assert_int_equal(fencestore_admit(NULL, "r", 1, 1, NULL), -EINVAL);
    assert_int_equal(fencestore_admit(f->s, NULL, 1, 1, NULL), -EINVAL);
    assert_int_equal(fencestore_admit(f->s, "r", 0, 1, NULL), -EINVAL);
    assert_int_equal(fencestore_admit(f->s, big, sizeof(big), 1, NULL), -EINVAL);
    assert_int_equal(fencestore_admit(f->s, big, sizeof(big) - 1, 1, NULL), 0);
    assert_int_equal(fencestore_admit(f->s, "r", 1, 0, NULL), FENCING_ENOTOKEN);
    assert_int_equal(fencestore_admit(f->s, "r", 1, FENCING_TOKEN_MAX, NULL), -EINVAL);
    assert_int_equal(fencestore_last(f->s, "r", 1, NULL), -EINVAL);
    assert_int_equal(fencestore_last(NULL, "r", 1, &got), -EINVAL);
    fencestore *s = (fencestore *)1;
    char err[128] = "";
    assert_int_equal(fencestore_new(NULL, &s, err, sizeof(err)), -EINVAL);
    assert_true(s == (fencestore *)1); /* not written on failure */
    assert_true(err[0] != '\0');
    fencestore_free(NULL);
}

static void test_store_reports_sqlite_failure(void **state)
{
    (void)state;
    sqlite3 *db;
    assert_int_equal(sqlite3_open_v2(":memory:", &db, SQLITE_OPEN_READONLY, NULL), SQLITE_OK);
    fencestore *s = NULL;
    char err[256] = "";
    assert_int_equal(fencestore_new(db, &s, err, sizeof(err)), FENCING_ESTORE);
    assert_null(s);
    assert_non_null(strstr(err, "readonly"));
    sqlite3_close(db);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_store_admits_newer_refuses_older, setup, teardown),
        cmocka_unit_test_setup_teardown(test_store_resources_are_bytes, setup, teardown),
        cmocka_unit_test_setup_teardown(test_store_rollback_undoes_admission, setup, teardown),
        cmocka_unit_test_setup_teardown(test_store_rejects_bad_arguments, setup, teardown),
        cmocka_unit_test(test_store_reports_sqlite_failure),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
