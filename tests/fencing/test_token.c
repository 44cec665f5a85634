/* The pure logic of fencing tokens, with no I/O: proposals, the verdict of
 * a round (one and two), the resource-side check, parsing, fence keys and
 * buckets. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include <fencing/fencing.h>

static void test_token_quorum_is_a_strict_majority(void **state)
{
    (void)state;
    assert_int_equal(fencing_quorum(0), 0);
    assert_int_equal(fencing_quorum(1), 1);
    assert_int_equal(fencing_quorum(2), 2);
    assert_int_equal(fencing_quorum(3), 2);
    assert_int_equal(fencing_quorum(4), 3);
    assert_int_equal(fencing_quorum(5), 3);
    /* Two majorities of the same n always share a node. */
    for (unsigned n = 1; n < 64; n++)
        assert_true(2 * fencing_quorum(n) > n);
}

static void test_token_proposal_beats_time_and_history(void **state)
{
    (void)state;
    uint64_t p = 0;
    assert_int_equal(fencing_propose(1700000000000000ULL, 0, &p), 0);
    assert_true(p == 1700000000000000ULL);
    /* A clock behind what was seen: last + 1, never the clock. */
    assert_int_equal(fencing_propose(5, 1700000000000000ULL, &p), 0);
    assert_true(p == 1700000000000001ULL);
    /* Equal: still strictly above what was seen. */
    assert_int_equal(fencing_propose(42, 42, &p), 0);
    assert_true(p == 43);
    assert_int_equal(fencing_propose_next(99, &p), 0);
    assert_true(p == 100);
    assert_int_equal(fencing_propose(1, 0, NULL), -EINVAL);
}

static void test_token_proposal_stops_below_two_pow_53(void **state)
{
    (void)state;
    uint64_t p = 7;
    assert_int_equal(fencing_propose(0, FENCING_TOKEN_MAX - 2, &p), 0);
    assert_true(p == FENCING_TOKEN_MAX - 1);
    assert_int_equal(fencing_propose(0, FENCING_TOKEN_MAX - 1, &p), FENCING_EEXHAUSTED);
    assert_int_equal(fencing_propose(FENCING_TOKEN_MAX, 0, &p), FENCING_EEXHAUSTED);
    assert_int_equal(fencing_propose_next(FENCING_TOKEN_MAX - 1, &p), FENCING_EEXHAUSTED);
    assert_true(p == FENCING_TOKEN_MAX - 1); /* untouched on failure */
}

static enum fencing_verdict v(unsigned n, unsigned granted, unsigned accepted, unsigned answered, int fenced)
{
    struct fencing_tally t = {.n = n, .granted = granted, .accepted = accepted, .answered = answered};
    return fencing_decide(&t, fenced);
}

static void test_token_plain_round_decides_early(void **state)
{
    (void)state;
    assert_int_equal(v(5, 0, 0, 0, 0), FENCING_WAIT);
    assert_int_equal(v(5, 2, 0, 2, 0), FENCING_WAIT);
    assert_int_equal(v(5, 3, 0, 3, 0), FENCING_GRANTED); /* two still out */
    assert_int_equal(v(5, 2, 0, 4, 0), FENCING_WAIT);    /* the last could make it */
    assert_int_equal(v(5, 1, 0, 4, 0), FENCING_FAILED);  /* it cannot */
    assert_int_equal(v(5, 0, 0, 3, 0), FENCING_FAILED);  /* three said no */
    assert_int_equal(v(1, 1, 0, 1, 0), FENCING_GRANTED);
    assert_int_equal(v(1, 0, 0, 1, 0), FENCING_FAILED);
}

static void test_token_fenced_round_one_needs_acceptance(void **state)
{
    (void)state;
    assert_int_equal(v(5, 3, 3, 3, 1), FENCING_GRANTED);
    assert_int_equal(v(5, 3, 2, 3, 1), FENCING_WAIT);   /* two may still accept */
    assert_int_equal(v(5, 3, 2, 4, 1), FENCING_WAIT);   /* one may still accept */
    assert_int_equal(v(5, 3, 2, 5, 1), FENCING_ROUND2); /* none can */
    assert_int_equal(v(5, 5, 0, 5, 1), FENCING_ROUND2);
    assert_int_equal(v(5, 2, 2, 5, 1), FENCING_FAILED); /* no lock: no token */
    assert_int_equal(v(3, 2, 0, 3, 1), FENCING_ROUND2);
}

static void test_token_round_two_counts_only_acceptance(void **state)
{
    (void)state;
    /* In round two the lock is held: granted = n from the start. */
    assert_int_equal(v(5, 5, 0, 0, 1), FENCING_WAIT);
    assert_int_equal(v(5, 5, 3, 3, 1), FENCING_GRANTED);
    assert_int_equal(v(5, 5, 2, 5, 1), FENCING_ROUND2); /* refused again: another round */
    assert_int_equal(v(1, 1, 1, 1, 1), FENCING_GRANTED);
}

static void test_token_malformed_tally_fails(void **state)
{
    (void)state;
    assert_int_equal(fencing_decide(NULL, 1), FENCING_FAILED);
    assert_int_equal(v(0, 0, 0, 0, 1), FENCING_FAILED);
    assert_int_equal(v(3, 4, 0, 3, 1), FENCING_FAILED); /* granted > n */
    assert_int_equal(v(3, 1, 2, 1, 1), FENCING_FAILED); /* accepted > answered */
    assert_int_equal(v(3, 1, 0, 4, 1), FENCING_FAILED); /* answered > n */
}

static void test_token_check_admits_equal_and_newer(void **state)
{
    (void)state;
    assert_int_equal(fencing_check(0, 1), 0);
    assert_int_equal(fencing_check(10, 10), 0);
    assert_int_equal(fencing_check(10, 11), 0);
    assert_int_equal(fencing_check(10, 9), FENCING_ESTALE);
    assert_int_equal(fencing_check(10, 0), FENCING_ENOTOKEN);
    assert_int_equal(fencing_token_cmp(1, 2), -1);
    assert_int_equal(fencing_token_cmp(2, 2), 0);
    assert_int_equal(fencing_token_cmp(UINT64_MAX, 0), 1);
}

static void test_token_parse_accepts_only_plain_digits(void **state)
{
    (void)state;
    uint64_t t = 99;
    assert_int_equal(fencing_token_parse("1731234567890123", 16, &t), 0);
    assert_true(t == 1731234567890123ULL);
    assert_int_equal(fencing_token_parse("", 0, &t), 0);
    assert_true(t == 0);
    assert_int_equal(fencing_token_parse(NULL, 0, &t), 0);
    assert_int_equal(fencing_token_parse("9007199254740991", 16, &t), 0); /* 2^53 - 1 */
    assert_true(t == FENCING_TOKEN_MAX - 1);
    assert_int_equal(fencing_token_parse("9007199254740992", 16, &t), -EINVAL); /* 2^53 */
    assert_int_equal(fencing_token_parse("12345678901234567", 17, &t), -EINVAL);
    assert_int_equal(fencing_token_parse("-1", 2, &t), -EINVAL);
    assert_int_equal(fencing_token_parse(" 1", 2, &t), -EINVAL);
    assert_int_equal(fencing_token_parse("1e5", 3, &t), -EINVAL);
    assert_int_equal(fencing_token_parse("12", 2, NULL), -EINVAL);
}

static void test_token_fence_key_shares_the_slot(void **state)
{
    (void)state;
    char buf[64];
    assert_int_equal(fencing_fence_key("acct:1", 6, buf, sizeof(buf)), 14);
    assert_string_equal(buf, "{acct:1}:fence");
    assert_int_equal(fencing_fence_key("acct:1", 6, buf, 14), -ENOSPC);
    assert_int_equal(fencing_fence_key("acct:1", 6, buf, 15), 14);
    assert_int_equal(fencing_fence_key(NULL, 6, buf, sizeof(buf)), -EINVAL);
    assert_int_equal(fencing_fence_key("a", 0, buf, sizeof(buf)), -EINVAL);
    assert_int_equal(fencing_fence_key("a", 1, NULL, 8), -EINVAL);
}

/* The bucket of a resource is part of the layout: every client sharing
 * resources must compute the same one, forever. These values are from an
 * independent implementation of the formula in fencing.h. */
static void test_token_buckets_are_fixed_and_spread(void **state)
{
    (void)state;
    assert_int_equal(fencing_bucket("invoice:42", 10), 10565);
    assert_int_equal(fencing_bucket("order:7", 7), 2275);
    assert_int_equal(fencing_bucket("a", 1), 5074);
    assert_int_equal(fencing_bucket("room-42:permit:2", 16), 2416);
    assert_int_equal(fencing_bucket("", 0), 3123);
    assert_int_equal(fencing_bucket(NULL, 3), 0);
    /* Sequential names spread like random ones: 163,840 names over 16,384
     * buckets, 10 a bucket on average; Poisson puts the fullest near 24. */
    static unsigned short count[FENCING_BUCKETS];
    memset(count, 0, sizeof(count));
    char name[32];
    for (int i = 0; i < 163840; i++) {
        int n = snprintf(name, sizeof(name), "invoice:%d", i);
        unsigned b = fencing_bucket(name, (size_t)n);
        assert_true(b < FENCING_BUCKETS);
        count[b]++;
    }
    unsigned used = 0, fullest = 0;
    for (unsigned b = 0; b < FENCING_BUCKETS; b++) {
        used += count[b] > 0;
        fullest = count[b] > fullest ? count[b] : fullest;
    }
    assert_true(used > FENCING_BUCKETS - 16);
    assert_true(fullest < 32);
}

/* A bucket's hash: the prefix, a NUL, "fence:" and the bucket / 64; its
 * field the bucket % 64. */
static void test_token_bucket_key_has_a_nul_after_the_prefix(void **state)
{
    (void)state;
    char buf[64], field[4];
    assert_int_equal(fencing_bucket_key("app:", 4, 10565, buf, sizeof(buf)), 4 + 7 + 3);
    assert_memory_equal(buf, "app:\0fence:165", 15);
    assert_int_equal(fencing_bucket_field(10565, field, sizeof(field)), 1);
    assert_string_equal(field, "5");
    assert_int_equal(fencing_bucket_key("", 0, 0, buf, sizeof(buf)), 8);
    assert_memory_equal(buf, "\0fence:0", 9);
    assert_int_equal(fencing_bucket_key(NULL, 0, 63, buf, sizeof(buf)), 8);
    assert_int_equal(fencing_bucket_field(FENCING_BUCKETS - 1, field, sizeof(field)), 2);
    assert_string_equal(field, "63");
    assert_int_equal(fencing_bucket_key("app:", 4, FENCING_BUCKETS - 1, buf, sizeof(buf)), 14);
    assert_memory_equal(buf, "app:\0fence:255", 15);
    /* Room for the name and its terminating NUL, or -ENOSPC. */
    assert_int_equal(fencing_bucket_key("app:", 4, 16383, buf, 15), 14);
    assert_int_equal(fencing_bucket_key("app:", 4, 16383, buf, 14), -ENOSPC);
    assert_int_equal(fencing_bucket_key("app:", 4, FENCING_BUCKETS, buf, sizeof(buf)), -EINVAL);
    assert_int_equal(fencing_bucket_key(NULL, 4, 1, buf, sizeof(buf)), -EINVAL);
    assert_int_equal(fencing_bucket_key("app:", 4, 1, NULL, 64), -EINVAL);
    assert_int_equal(fencing_bucket_field(FENCING_BUCKETS, field, sizeof(field)), -EINVAL);
    assert_int_equal(fencing_bucket_field(1, field, 2), -EINVAL);
    assert_int_equal(fencing_bucket_field(1, NULL, 4), -EINVAL);
}

static void test_token_strerror_names_every_code(void **state)
{
    (void)state;
    const int codes[] = {FENCING_ESTALE, FENCING_EEXHAUSTED, FENCING_ESTORE, FENCING_ENOTOKEN};
    for (size_t i = 0; i < sizeof(codes) / sizeof(codes[0]); i++)
        assert_string_not_equal(fencing_strerror(codes[i]), "unknown error");
    assert_string_equal(fencing_strerror(0), "success");
    assert_string_equal(fencing_strerror(-EINVAL), strerror(EINVAL));
    assert_string_equal(fencing_strerror(12345), "unknown error");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_token_quorum_is_a_strict_majority),
        cmocka_unit_test(test_token_proposal_beats_time_and_history),
        cmocka_unit_test(test_token_proposal_stops_below_two_pow_53),
        cmocka_unit_test(test_token_plain_round_decides_early),
        cmocka_unit_test(test_token_fenced_round_one_needs_acceptance),
        cmocka_unit_test(test_token_round_two_counts_only_acceptance),
        cmocka_unit_test(test_token_malformed_tally_fails),
        cmocka_unit_test(test_token_check_admits_equal_and_newer),
        cmocka_unit_test(test_token_parse_accepts_only_plain_digits),
        cmocka_unit_test(test_token_fence_key_shares_the_slot),
        cmocka_unit_test(test_token_buckets_are_fixed_and_spread),
        cmocka_unit_test(test_token_bucket_key_has_a_nul_after_the_prefix),
        cmocka_unit_test(test_token_strerror_names_every_code),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
