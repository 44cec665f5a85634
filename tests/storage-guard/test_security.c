/* storage-guard as a real process against a hostile neighbour or client:
 * file modes, the port file, header tricks. */
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>
#include <jansson.h>

#include "http.h"
#include "proc.h"
#include "sg_daemon.h"

static int setup(void **state)
{
    struct sgd *d = calloc(1, sizeof(*d));
    assert_non_null(d);
    sgd_init(d);
    *state = d;
    return 0;
}

static int teardown(void **state)
{
    struct sgd *d = *state;
    sgd_destroy(d);
    free(d);
    return 0;
}

/* One request; fails the test unless the answer is JSON with this status
 * (and this error code unless NULL). */
static void expect(uint16_t port, const char *method, const char *path, const char *headers, const char *body,
                   int status, const char *code)
{
    struct hc_response r;
    assert_int_equal(hc_request(port, method, path, headers, body, body ? strlen(body) : 0, &r), 0);
    if (r.status != status)
        fail_msg("%s %s: want %d, got %d: %s", method, path, status, r.status, r.body ? r.body : "");
    if (r.json == NULL)
        fail_msg("%s %s: not JSON: %s", method, path, r.body ? r.body : "");
    if (code != NULL) {
        const char *got = json_string_value(json_object_get(r.json, "error"));
        if (got == NULL || strcmp(got, code) != 0)
            fail_msg("%s %s: want error %s, got %s", method, path, code, r.body);
    }
    hc_response_clear(&r);
}

static unsigned mode_of(const char *path)
{
    struct stat sb;
    if (stat(path, &sb) != 0)
        fail_msg("stat %s: %s", path, strerror(errno));
    return (unsigned)(sb.st_mode & 0777);
}

static void check_modes(struct sgd *d, unsigned want)
{
    char p[600];
    const char *suffix[] = {"", "-wal", "-shm"};
    for (int i = 0; i < 3; i++) {
        snprintf(p, sizeof(p), "%s%s", d->db, suffix[i]);
        if (mode_of(p) != want)
            fail_msg("%s is %04o, not %04o", p, mode_of(p), want);
    }
    if (mode_of(d->port_file) != want)
        fail_msg("%s is %04o, not %04o", d->port_file, mode_of(d->port_file), want);
}

/* ---- files ---- */

static void test_security_files_are_private(void **state)
{
    struct sgd *d = *state;
    /* Whatever umask the caller has. */
    mode_t old = umask(022);
    sgd_start(d, NULL);
    umask(old);
    expect(d->port, "PUT", "/v1/records/k", NULL, "{\"value\":1,\"token\":1}", 200, NULL);
    check_modes(d, 0600);
}

static void test_security_umask_option(void **state)
{
    struct sgd *d = *state;
    static const char *const args[] = {"--umask", "027", NULL};
    sgd_start(d, args);
    expect(d->port, "PUT", "/v1/records/k", NULL, "{\"value\":1,\"token\":1}", 200, NULL);
    check_modes(d, 0640);
    assert_int_equal(sgd_stop(d), 0);

    static const char *const bad[][3] = {
        {"--umask", "8", NULL}, {"--umask", "01000", NULL}, {"--umask", "", NULL}, {"--umask", "-1", NULL}};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        char *argv[] = {getenv("SG_EXE"), "--db", d->db, (char *)bad[i][0], (char *)bad[i][1], NULL};
        pid_t pid = hp_spawn(argv, NULL, d->log);
        assert_true(pid > 0);
        int st = 0;
        assert_int_equal(hp_wait(pid, 10000, &st), 0);
        assert_true(WIFEXITED(st));
        assert_int_equal(WEXITSTATUS(st), 2);
    }
}

static void test_security_port_file_ignores_planted_symlink(void **state)
{
    struct sgd *d = *state;
    /* A neighbour who can write the directory plants PATH.tmp pointing at a
     * file of ours; the old fixed temporary name wrote the port through it. */
    char victim[600], planted[600];
    snprintf(victim, sizeof(victim), "%s/victim", d->dir);
    snprintf(planted, sizeof(planted), "%s.tmp", d->port_file);
    FILE *f = fopen(victim, "w");
    assert_non_null(f);
    fputs("precious\n", f);
    fclose(f);
    assert_int_equal(symlink(victim, planted), 0);
    sgd_start(d, NULL);
    char buf[64] = "";
    f = fopen(victim, "r");
    assert_non_null(f);
    assert_non_null(fgets(buf, sizeof(buf), f));
    fclose(f);
    assert_string_equal(buf, "precious\n");
    /* The port file is a regular file of its own, and no temporary is left. */
    struct stat sb;
    assert_int_equal(lstat(d->port_file, &sb), 0);
    assert_true(S_ISREG(sb.st_mode));
    assert_int_equal(sgd_stop(d), 0);
    assert_int_equal(lstat(planted, &sb), 0); /* the plant is not ours to remove */
    unlink(planted);
}

#define T(f) cmocka_unit_test_setup_teardown(f, setup, teardown)

int main(void)
{
    const struct CMUnitTest tests[] = {
        T(test_security_files_are_private),
        T(test_security_umask_option),
        T(test_security_port_file_ignores_planted_symlink),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
