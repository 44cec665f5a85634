/* Argument checking of lockcore's public API, with no server: every bad
 * input gives a clear error and no crash. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <string.h>

#include <cmocka.h>

#include <lockcore/lockcore.h>

static const char *one[] = {"127.0.0.1:6379"};

static int make(struct lockcore_options *o, char *err, size_t cap)
{
    lockcore_client *c = NULL;
    int rc = lockcore_client_new(o, &c, err, cap);
    lockcore_client_free(c);
    return rc;
}

static void base(struct lockcore_options *o)
{
    assert_int_equal(lockcore_options_init(o), 0);
    o->nodes = one;
    o->n_nodes = 1;
}

static void test_options_defaults(void **state)
{
    (void)state;
    struct lockcore_options o;
    assert_int_equal(lockcore_options_init(&o), 0);
    assert_int_equal(o.ttl_ms, 10000);
    assert_true(o.request_timeout_ms > 0 && o.request_timeout_ms < o.ttl_ms / 10);
    assert_int_equal(o.fencing, 1);
    assert_int_equal(o.fence_idle_ms, 7ULL * 24 * 3600 * 1000);
    assert_int_equal(lockcore_options_init(NULL), -EINVAL);
}

static void test_options_rejects_bad_addresses(void **state)
{
    (void)state;
    const char *bad[] = {"",
                         "localhost",
                         "127.0.0.1:",
                         "127.0.0.1:0",
                         "127.0.0.1:65536",
                         "127.0.0.1:12ab",
                         "http://127.0.0.1:6379",
                         "redis://127.0.0.1:6379/x",
                         "redis://:pa%zzss@127.0.0.1:6379",
                         "[::1:6379",
                         "redis://@:6379"};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        struct lockcore_options o;
        char err[256] = "";
        base(&o);
        o.nodes = &bad[i];
        assert_int_equal(make(&o, err, sizeof(err)), -EINVAL);
        assert_true(strlen(err) > 0);
    }
}

static void test_options_accepts_address_forms(void **state)
{
    (void)state;
    const char *good[] = {"127.0.0.1:6379",
                          "redis://127.0.0.1:6379",
                          "redis://127.0.0.1:6379/15",
                          "redis://:secret@127.0.0.1:1",
                          "redis://user:p%40ss@localhost:2/3",
                          "[::1]:6379",
                          "redis://u:p@[::1]:6380/"};
    for (size_t i = 0; i < sizeof(good) / sizeof(good[0]); i++) {
        struct lockcore_options o;
        char err[256] = "";
        base(&o);
        o.nodes = &good[i];
        assert_int_equal(make(&o, err, sizeof(err)), 0);
    }
}

/* A password never shows in a message, whatever is wrong with the address. */
static void test_options_address_errors_mask_the_password(void **state)
{
    (void)state;
    const char *bad[] = {"redis://alice:S3cretPW@127.0.0.1:99999", "redis://S3cretPW@127.0.0.1:x",
                         "redis://alice:S3cretPW@[::1:6379", "redis://alice:S3cretPW@127.0.0.1:1/db"};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        struct lockcore_options o;
        char err[256] = "";
        base(&o);
        o.nodes = &bad[i];
        assert_int_equal(make(&o, err, sizeof(err)), -EINVAL);
        assert_null(strstr(err, "S3cretPW"));
        assert_non_null(strstr(err, "***"));
    }
}

static void test_options_rejects_bad_values(void **state)
{
    (void)state;
    struct lockcore_options o;
    char err[256];

    base(&o);
    o.n_nodes = 0;
    assert_int_equal(make(&o, err, sizeof(err)), -EINVAL);
    base(&o);
    o.nodes = NULL;
    assert_int_equal(make(&o, err, sizeof(err)), -EINVAL);
    base(&o);
    o.n_nodes = LOCKCORE_NODES_MAX + 1;
    assert_int_equal(make(&o, err, sizeof(err)), -EINVAL);
    base(&o);
    o.ttl_ms = 0;
    assert_int_equal(make(&o, err, sizeof(err)), -EINVAL);
    assert_non_null(strstr(err, "ttl_ms"));
    base(&o);
    o.ttl_ms = 400ULL * 24 * 3600 * 1000;
    assert_int_equal(make(&o, err, sizeof(err)), -EINVAL);
    base(&o);
    o.request_timeout_ms = o.ttl_ms;
    assert_int_equal(make(&o, err, sizeof(err)), -EINVAL);
    base(&o);
    o.drift_factor = -0.1;
    assert_int_equal(make(&o, err, sizeof(err)), -EINVAL);
    base(&o);
    o.drift_factor = 0.0 / 0.0;
    assert_int_equal(make(&o, err, sizeof(err)), -EINVAL);
    base(&o);
    o.retry_count = -2;
    assert_int_equal(make(&o, err, sizeof(err)), -EINVAL);
    base(&o);
    char prefix[LOCKCORE_PREFIX_MAX + 2];
    memset(prefix, 'p', sizeof(prefix) - 1);
    prefix[sizeof(prefix) - 1] = '\0';
    o.key_prefix = prefix;
    assert_int_equal(make(&o, err, sizeof(err)), -EINVAL);
    base(&o);
    o.fence_idle_ms = 5;
    assert_int_equal(make(&o, err, sizeof(err)), -EINVAL);
    /* The fence key must outlive the lock by far: twice the TTL at least. */
    base(&o);
    o.fence_idle_ms = 2 * o.ttl_ms - 1;
    assert_int_equal(make(&o, err, sizeof(err)), -EINVAL);
    assert_non_null(strstr(err, "fence_idle_ms"));
    base(&o);
    o.fence_idle_ms = 2 * o.ttl_ms;
    assert_int_equal(make(&o, err, sizeof(err)), 0);
    base(&o);
    char info[LOCKCORE_INFO_MAX + 2];
    memset(info, 'i', sizeof(info) - 1);
    info[sizeof(info) - 1] = '\0';
    o.holder_info = info;
    assert_int_equal(make(&o, err, sizeof(err)), -EINVAL);
    assert_non_null(strstr(err, "holder_info"));
    base(&o);
    o.fencing = 2;
    assert_int_equal(make(&o, err, sizeof(err)), -EINVAL);
    assert_int_equal(lockcore_client_new(NULL, NULL, err, sizeof(err)), -EINVAL);
    assert_int_equal(lockcore_client_new(&o, NULL, NULL, 0), -EINVAL);
}

static void noop(lockcore_client *c, int rc, const struct lockcore_lock *l, void *arg)
{
    (void)c, (void)rc, (void)l, (void)arg;
}

static void test_options_rejects_bad_resources_and_locks(void **state)
{
    (void)state;
    struct lockcore_options o;
    char err[256];
    lockcore_client *c;
    base(&o);
    assert_int_equal(lockcore_client_new(&o, &c, err, sizeof(err)), 0);

    struct lockcore_lock lock;
    assert_int_equal(lockcore_acquire(c, "", &lock), -EINVAL);
    assert_non_null(strstr(lockcore_errmsg(c), "empty"));
    assert_int_equal(lockcore_acquire(c, NULL, &lock), -EINVAL);
    assert_int_equal(lockcore_acquire(c, "r", NULL), -EINVAL);
    char big[LOCKCORE_RESOURCE_MAX + 2];
    memset(big, 'r', sizeof(big) - 1);
    big[sizeof(big) - 1] = '\0';
    assert_int_equal(lockcore_acquire(c, big, &lock), -EINVAL);
    assert_non_null(strstr(lockcore_errmsg(c), "longer"));
    assert_int_equal(lockcore_acquire_async(c, "r", NULL, NULL), -EINVAL);

    memset(&lock, 0, sizeof(lock));
    assert_int_equal(lockcore_release(c, &lock), -EINVAL);
    strcpy(lock.resource, "r");
    strcpy(lock.id, "short");
    assert_int_equal(lockcore_extend(c, &lock, 1000), -EINVAL);
    assert_int_equal(lockcore_release_async(c, &lock, noop, NULL), -EINVAL);
    memset(lock.resource, 'x', sizeof(lock.resource)); /* no NUL anywhere */
    assert_int_equal(lockcore_release(c, &lock), -EINVAL);
    assert_int_equal(lockcore_release(c, NULL), -EINVAL);
    assert_int_equal(lockcore_extend(NULL, &lock, 0), -EINVAL);

    struct lockcore_node_status st[1];
    assert_int_equal(lockcore_status(c, "r", st, 0), -ENOSPC);
    assert_int_equal(lockcore_status(c, "r", NULL, 1), -EINVAL);
    assert_int_equal(lockcore_inflight(c), 0);
    lockcore_client_free(c);
    lockcore_client_free(NULL);
}

static void test_options_strerror_names_every_code(void **state)
{
    (void)state;
    int codes[] = {LOCKCORE_ELOCKED, LOCKCORE_ENOQUORUM, LOCKCORE_ELOST,
                   LOCKCORE_EPROTO,  LOCKCORE_EFENCE,    LOCKCORE_ECANCELED};
    for (size_t i = 0; i < sizeof(codes) / sizeof(codes[0]); i++) {
        const char *s = lockcore_strerror(codes[i]);
        assert_non_null(s);
        assert_string_not_equal(s, "unknown error");
        for (size_t j = 0; j < i; j++)
            assert_string_not_equal(s, lockcore_strerror(codes[j]));
    }
    assert_string_equal(lockcore_strerror(-EINVAL), strerror(EINVAL));
    assert_string_equal(lockcore_strerror(-99999), "unknown error");
}

static void test_options_remaining_of_expired_lock_is_zero(void **state)
{
    (void)state;
    struct lockcore_lock l;
    memset(&l, 0, sizeof(l));
    assert_int_equal(lockcore_remaining_ms(&l), 0);
    assert_int_equal(lockcore_remaining_ms(NULL), 0);
    l.valid_until_ms = lockcore_now_ms() + 5000;
    assert_true(lockcore_remaining_ms(&l) > 4000 && lockcore_remaining_ms(&l) <= 5000);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_options_defaults),
        cmocka_unit_test(test_options_rejects_bad_addresses),
        cmocka_unit_test(test_options_accepts_address_forms),
        cmocka_unit_test(test_options_address_errors_mask_the_password),
        cmocka_unit_test(test_options_rejects_bad_values),
        cmocka_unit_test(test_options_rejects_bad_resources_and_locks),
        cmocka_unit_test(test_options_strerror_names_every_code),
        cmocka_unit_test(test_options_remaining_of_expired_lock_is_zero),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
