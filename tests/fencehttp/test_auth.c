/* The auth file of both services: clients, their tokens and their rules,
 * and the line of the first error. No sockets. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include <fencehttp/fencehttp.h>

static char dir[] = "/tmp/fencehttp-auth-XXXXXX";
static char path[64];

static int setup(void **state)
{
    (void)state;
    if (mkdtemp(dir) == NULL)
        return -1;
    snprintf(path, sizeof(path), "%s/tokens", dir);
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    unlink(path);
    rmdir(dir);
    return 0;
}

static int load(const char *text, fencehttp_auth **a, char *err, size_t cap)
{
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fputs(text, f);
    fclose(f);
    return fencehttp_auth_load(path, a, err, cap);
}

static void test_auth_rules_are_read(void **state)
{
    (void)state;
    fencehttp_auth *a = NULL;
    char err[256];
    assert_int_equal(load("# clients\n"
                          "aaaaaaaaaaaaaaaaaaaa alice\n"
                          "bbbbbbbbbbbbbbbbbbbb ops admin\n"
                          "cccccccccccccccccccc watcher read-only\n"
                          "dddddddddddddddddddd billing prefix=invoice: resource=a%20b\tresource=pool\n",
                          &a, err, sizeof(err)),
                     0);
    assert_int_equal(fencehttp_auth_count(a), 4);
    assert_int_equal(fencehttp_auth_rules(a), FENCEHTTP_RULE_READ_ONLY | FENCEHTTP_RULE_RESOURCES);
    const struct fencehttp_client *alice = fencehttp_auth_check(a, "Bearer aaaaaaaaaaaaaaaaaaaa");
    assert_non_null(alice);
    assert_string_equal(alice->name, "alice");
    assert_int_equal(alice->n_rules, 0);
    assert_false(alice->read_only);
    assert_true(fencehttp_client_allows(alice, "anything", 8));
    assert_true(alice->named);
    const struct fencehttp_client *ops = fencehttp_auth_client(a, 1);
    assert_true(ops->admin);
    assert_false(ops->read_only);
    const struct fencehttp_client *w = fencehttp_auth_client(a, 2);
    assert_true(w->read_only);
    const struct fencehttp_client *b = fencehttp_auth_client(a, 3);
    assert_string_equal(b->name, "billing");
    assert_int_equal(b->n_rules, 3);
    assert_true(fencehttp_client_allows(b, "invoice:42", 10));
    assert_true(fencehttp_client_allows(b, "invoice:", 8));
    assert_false(fencehttp_client_allows(b, "invoice", 7));
    assert_true(fencehttp_client_allows(b, "a b", 3));
    assert_false(fencehttp_client_allows(b, "a%20b", 5));
    assert_false(fencehttp_client_allows(b, "a b ", 4));
    assert_true(fencehttp_client_allows(b, "pool", 4));
    assert_false(fencehttp_client_allows(b, "pool2", 5));
    assert_false(fencehttp_client_allows(NULL, "pool", 4));
    assert_null(fencehttp_auth_client(a, 4));
    fencehttp_auth_free(a);

    /* Without rules, none is reported. */
    assert_int_equal(load("aaaaaaaaaaaaaaaaaaaa alice admin\n", &a, err, sizeof(err)), 0);
    assert_int_equal(fencehttp_auth_rules(a), 0);
    fencehttp_auth_free(a);
    assert_int_equal(fencehttp_auth_rules(NULL), 0);
    assert_int_equal(fencehttp_auth_count(NULL), 0);
}

static void test_auth_bad_lines_name_their_line(void **state)
{
    (void)state;
    static const struct {
        const char *text;
        const char *want;
    } bad[] = {
        {"aaaaaaaaaaaaaaaaaaaa alice root\n", ":1: want: TOKEN [NAME"},
        {"# c\naaaaaaaaaaaaaaaaaaaa alice prefix=\n", ":2: a resource= or prefix= value"},
        {"aaaaaaaaaaaaaaaaaaaa alice resource=%zz\n", ":1: a resource= or prefix= value"},
        {"aaaaaaaaaaaaaaaaaaaa alice resource=a%00b\n", ":1: a resource= or prefix= value"},
        {"aaaaaaaaaaaaaaaaaaaa alice admin extra\n", ":1: want"},
        {"short alice\n", ":1: a token must be"},
        /* A rule's word or an unnamed line's name as the NAME. */
        {"aaaaaaaaaaaaaaaaaaaa read-only\n", ":1: a NAME comes before the rules"},
        {"aaaaaaaaaaaaaaaaaaaa prefix=x\n", ":1: a NAME comes before the rules"},
        {"aaaaaaaaaaaaaaaaaaaa admin\n", ":1: a NAME comes before the rules"},
        {"aaaaaaaaaaaaaaaaaaaa x\nbbbbbbbbbbbbbbbbbbbb line-1\n", ":2: a NAME comes before the rules"},
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        fencehttp_auth *a = NULL;
        char err[256] = "";
        assert_int_equal(load(bad[i].text, &a, err, sizeof(err)), -EINVAL);
        assert_null(a);
        if (strstr(err, bad[i].want) == NULL)
            fail_msg("line %zu: '%s' does not say '%s'", i, err, bad[i].want);
    }
    /* 65 rules on a line: over the limit. */
    char text[4096] = "aaaaaaaaaaaaaaaaaaaa many";
    for (int i = 0; i < 65; i++)
        snprintf(text + strlen(text), sizeof(text) - strlen(text), " prefix=p%d", i);
    strcat(text, "\n");
    fencehttp_auth *a = NULL;
    char err[256];
    assert_int_equal(load(text, &a, err, sizeof(err)), -EINVAL);
    assert_non_null(strstr(err, "at most 64"));
    /* A value over 1024 bytes. */
    char big[1200] = "aaaaaaaaaaaaaaaaaaaa big resource=";
    memset(big + strlen(big), 'x', 1030);
    strcat(big, "\n");
    assert_int_equal(load(big, &a, err, sizeof(err)), -EINVAL);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_auth_rules_are_read),
        cmocka_unit_test(test_auth_bad_lines_name_their_line),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
