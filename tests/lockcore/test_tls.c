/* lockcore over TLS (rediss://) against real redis-server processes that
 * listen with TLS, with certificates this test makes with the openssl
 * command: verification by CA and by name, client certificates, and the
 * failures a user must see clearly. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#include <cmocka.h>

#include "proc.h"
#include "redis_harness.h"
#include <lockcore/lockcore.h>

struct fixture {
    char dir[256];
    char ca[300], other_ca[300], srv_crt[300], srv_key[300], cli_crt[300], cli_key[300];
};

static struct fixture fx;

/* Two CAs; a server certificate for 127.0.0.1 and localhost signed by the
 * first; a client certificate signed by the first. EC keys: fast to make. */
static int make_certs(void **state)
{
    (void)state;
    if (rh_mkdtemp("tls", fx.dir, sizeof(fx.dir)) != 0)
        return -1;
    snprintf(fx.ca, sizeof(fx.ca), "%s/ca.crt", fx.dir);
    snprintf(fx.other_ca, sizeof(fx.other_ca), "%s/other-ca.crt", fx.dir);
    snprintf(fx.srv_crt, sizeof(fx.srv_crt), "%s/srv.crt", fx.dir);
    snprintf(fx.srv_key, sizeof(fx.srv_key), "%s/srv.key", fx.dir);
    snprintf(fx.cli_crt, sizeof(fx.cli_crt), "%s/cli.crt", fx.dir);
    snprintf(fx.cli_key, sizeof(fx.cli_key), "%s/cli.key", fx.dir);
    char script[4096];
    snprintf(
        script, sizeof(script),
        "set -e; cd '%s'\n"
        "key() { openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256 -out \"$1\" 2>/dev/null; }\n"
        "key ca.key; key other-ca.key; key srv.key; key cli.key\n"
        "openssl req -x509 -new -key ca.key -subj /CN=fencelock-test-ca -days 2 -out ca.crt\n"
        "openssl req -x509 -new -key other-ca.key -subj /CN=someone-else -days 2 -out other-ca.crt\n"
        "printf 'subjectAltName=IP:127.0.0.1,DNS:localhost\\nextendedKeyUsage=serverAuth\\n' > srv.ext\n"
        "printf 'extendedKeyUsage=clientAuth\\n' > cli.ext\n"
        "openssl req -new -key srv.key -subj /CN=localhost -out srv.csr\n"
        "openssl x509 -req -in srv.csr -CA ca.crt -CAkey ca.key -CAcreateserial -days 2 "
        "-extfile srv.ext -out srv.crt 2>/dev/null\n"
        "openssl req -new -key cli.key -subj /CN=fencelock-client -out cli.csr\n"
        "openssl x509 -req -in cli.csr -CA ca.crt -CAkey ca.key -CAcreateserial -days 2 "
        "-extfile cli.ext -out cli.crt 2>/dev/null\n",
        fx.dir);
    char *argv[] = {"sh", "-c", script, NULL};
    pid_t pid = hp_spawn(argv, NULL, NULL);
    int status = -1;
    if (pid < 0 || hp_wait(pid, 20000, &status) != 0 || !WIFEXITED(status) || WEXITSTATUS(status) != 0) {
        fprintf(stderr, "test_tls: making certificates with openssl failed\n");
        return -1;
    }
    return 0;
}

static int remove_certs(void **state)
{
    (void)state;
    rh_rmtree(fx.dir);
    return 0;
}

static struct rh_cluster *tls_cluster(int auth_clients)
{
    struct rh_options ro;
    rh_options_init(&ro);
    ro.tls_cert = fx.srv_crt;
    ro.tls_key = fx.srv_key;
    ro.tls_ca = fx.ca;
    ro.tls_auth_clients = auth_clients;
    struct rh_cluster *rc = NULL;
    assert_int_equal(rh_cluster_start(3, &ro, &rc), 0);
    return rc;
}

struct tls_opts {
    const char *ca, *cert, *key, *server_name;
    int no_verify;
};

static int tls_client(struct rh_cluster *rc, const struct tls_opts *t, lockcore_client **out, char *err,
                      size_t cap)
{
    const char *nodes[3];
    for (int i = 0; i < 3; i++)
        nodes[i] = rh_url(rc, i);
    struct lockcore_options o;
    lockcore_options_init(&o);
    o.nodes = nodes;
    o.n_nodes = 3;
    o.retry_count = 0;
    /* Generous: a handshake under valgrind takes hundreds of ms. */
    o.request_timeout_ms = 2000;
    o.connect_timeout_ms = 10000;
    o.holder_info = "tls-test";
    o.tls_ca_file = t->ca;
    o.tls_cert_file = t->cert;
    o.tls_key_file = t->key;
    o.tls_server_name = t->server_name;
    o.tls_verify = !t->no_verify;
    return lockcore_client_new(&o, out, err, cap);
}

static void test_tls_locks_over_verified_tls(void **state)
{
    (void)state;
    struct rh_cluster *rc = tls_cluster(0);
    assert_non_null(strstr(rh_url(rc, 0), "rediss://"));
    lockcore_client *c = NULL;
    char err[256];
    assert_int_equal(tls_client(rc, &(struct tls_opts){.ca = fx.ca}, &c, err, sizeof(err)), 0);
    struct lockcore_lock l;
    assert_int_equal(lockcore_acquire(c, "tls", &l), 0);
    assert_true(l.token > 0);
    assert_int_equal(lockcore_extend(c, &l, 0), 0);
    struct lockcore_node_status st[3];
    assert_int_equal(lockcore_status(c, "tls", st, 3), 3);
    for (int i = 0; i < 3; i++) {
        assert_true(st[i].reachable);
        assert_string_equal(st[i].holder, l.id);
    }
    /* The nodes saw the lock (read back over their plain port). */
    assert_int_equal(rh_holders(rc, "tls", l.id), 3);
    assert_int_equal(lockcore_release(c, &l), 0);
    assert_int_equal(rh_holders(rc, "tls", l.id), 0);
    lockcore_client_free(c);

    /* The name checked can be given: localhost is in the certificate. */
    assert_int_equal(
        tls_client(rc, &(struct tls_opts){.ca = fx.ca, .server_name = "localhost"}, &c, err, sizeof(err)), 0);
    assert_int_equal(lockcore_acquire(c, "tls", &l), 0);
    assert_int_equal(lockcore_release(c, &l), 0);
    lockcore_client_free(c);
    rh_cluster_free(rc);
}

static void test_tls_refuses_nodes_it_cannot_verify(void **state)
{
    (void)state;
    struct rh_cluster *rc = tls_cluster(0);
    lockcore_client *c = NULL;
    char err[256];
    struct lockcore_lock l;

    /* Signed by a CA we do not trust. */
    assert_int_equal(tls_client(rc, &(struct tls_opts){.ca = fx.other_ca}, &c, err, sizeof(err)), 0);
    assert_int_equal(lockcore_acquire(c, "tls", &l), LOCKCORE_EPROTO);
    assert_non_null(strstr(lockcore_errmsg(c), "certificate verify failed"));
    lockcore_client_free(c);

    /* A certificate for another name. */
    assert_int_equal(tls_client(rc, &(struct tls_opts){.ca = fx.ca, .server_name = "locks.example.org"}, &c,
                                err, sizeof(err)),
                     0);
    assert_int_equal(lockcore_acquire(c, "tls", &l), LOCKCORE_EPROTO);
    assert_non_null(strstr(lockcore_errmsg(c), "certificate verify failed"));
    lockcore_client_free(c);

    /* Verification off (testing only): encrypted, not authenticated. */
    assert_int_equal(
        tls_client(rc, &(struct tls_opts){.ca = fx.other_ca, .no_verify = 1}, &c, err, sizeof(err)), 0);
    assert_int_equal(lockcore_acquire(c, "tls", &l), 0);
    assert_int_equal(lockcore_release(c, &l), 0);
    lockcore_client_free(c);

    /* A plain client on a TLS port: a protocol failure, not a hang. */
    const char *plain[3];
    char urls[3][64];
    for (int i = 0; i < 3; i++) {
        snprintf(urls[i], sizeof(urls[i]), "127.0.0.1:%d", rh_tls_port(rc, i));
        plain[i] = urls[i];
    }
    struct lockcore_options o;
    lockcore_options_init(&o);
    o.nodes = plain;
    o.n_nodes = 3;
    o.retry_count = 0;
    o.request_timeout_ms = 300;
    assert_int_equal(lockcore_client_new(&o, &c, err, sizeof(err)), 0);
    int rc2 = lockcore_acquire(c, "tls", &l);
    assert_true(rc2 == LOCKCORE_ENOQUORUM || rc2 == LOCKCORE_EPROTO);
    lockcore_client_free(c);
    rh_cluster_free(rc);
}

static void test_tls_client_certificates(void **state)
{
    (void)state;
    struct rh_cluster *rc = tls_cluster(1);
    lockcore_client *c = NULL;
    char err[256];
    struct lockcore_lock l;
    /* The nodes require a client certificate: none, refused. */
    assert_int_equal(tls_client(rc, &(struct tls_opts){.ca = fx.ca}, &c, err, sizeof(err)), 0);
    int r = lockcore_acquire(c, "tls-auth", &l);
    assert_true(r == LOCKCORE_EPROTO || r == LOCKCORE_ENOQUORUM);
    assert_non_null(strstr(lockcore_errmsg(c), "TLS"));
    lockcore_client_free(c);
    /* With one, granted. */
    assert_int_equal(tls_client(rc, &(struct tls_opts){.ca = fx.ca, .cert = fx.cli_crt, .key = fx.cli_key},
                                &c, err, sizeof(err)),
                     0);
    assert_int_equal(lockcore_acquire(c, "tls-auth", &l), 0);
    assert_int_equal(lockcore_release(c, &l), 0);
    lockcore_client_free(c);
    rh_cluster_free(rc);
}

static void test_tls_bad_files_fail_at_creation(void **state)
{
    (void)state;
    struct rh_cluster *rc = tls_cluster(0);
    lockcore_client *c = NULL;
    char err[256] = "";
    assert_int_equal(tls_client(rc, &(struct tls_opts){.ca = "/nonexistent/ca.pem"}, &c, err, sizeof(err)),
                     -EINVAL);
    assert_non_null(strstr(err, "/nonexistent/ca.pem"));
    assert_int_equal(tls_client(rc, &(struct tls_opts){.ca = fx.ca, .cert = fx.cli_crt, .key = fx.srv_key},
                                &c, err, sizeof(err)),
                     -EINVAL);
    assert_non_null(strstr(err, "key"));
    assert_int_equal(
        tls_client(rc, &(struct tls_opts){.ca = fx.ca, .cert = fx.cli_crt}, &c, err, sizeof(err)), -EINVAL);
    rh_cluster_free(rc);
}

/* The CLI over TLS: --cacert (or FENCELOCK_CACERT) verifies the nodes;
 * without a CA that signed them, the nodes are refused (exit 70). */
static int fencelock_exit(const char *nodes, const char *const *extra)
{
    const char *bin = getenv("FENCELOCK_BIN");
    if (bin == NULL)
        fail_msg("FENCELOCK_BIN is not set: run this test through meson");
    char *argv[16];
    int k = 0;
    argv[k++] = (char *)bin;
    argv[k++] = "--nodes";
    argv[k++] = (char *)nodes;
    argv[k++] = "--timeout";
    argv[k++] = "2s";
    for (int i = 0; extra[i] != NULL && k < 14; i++)
        argv[k++] = (char *)extra[i];
    argv[k] = NULL;
    char log[300];
    snprintf(log, sizeof(log), "%s/cli.log", fx.dir);
    pid_t pid = hp_spawn(argv, NULL, log);
    int status = -1;
    assert_true(pid > 0);
    assert_int_equal(hp_wait(pid, 20000, &status), 0);
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

static void test_tls_cli_verifies_with_cacert(void **state)
{
    (void)state;
    struct rh_cluster *rc = tls_cluster(0);
    char nodes[512] = "";
    for (int i = 0; i < 3; i++) {
        strcat(nodes, i ? "," : "");
        strcat(nodes, rh_url(rc, i));
    }
    const char *ok[] = {"--cacert", fx.ca, "status", "tls-cli", NULL};
    assert_int_equal(fencelock_exit(nodes, ok), 0);
    const char *named[] = {"--cacert", fx.ca, "--tls-server-name", "localhost", "acquire", "tls-cli", NULL};
    assert_int_equal(fencelock_exit(nodes, named), 0);
    const char *other[] = {"--cacert", fx.other_ca, "acquire", "tls-cli2", NULL};
    assert_int_equal(fencelock_exit(nodes, other), 70);
    const char *missing[] = {"--cacert", "/nonexistent/ca.pem", "status", "tls-cli", NULL};
    assert_int_equal(fencelock_exit(nodes, missing), 64);
    rh_cluster_free(rc);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_tls_locks_over_verified_tls),
        cmocka_unit_test(test_tls_refuses_nodes_it_cannot_verify),
        cmocka_unit_test(test_tls_client_certificates),
        cmocka_unit_test(test_tls_bad_files_fail_at_creation),
        cmocka_unit_test(test_tls_cli_verifies_with_cacert),
    };
    return cmocka_run_group_tests(tests, make_certs, remove_certs);
}
