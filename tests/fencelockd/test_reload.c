/*
 * Both services as an operator runs them: options from a configuration
 * file (--config), the command line over it, --check-config naming the
 * line of the first error, and SIGHUP re-reading the file to apply the log
 * level and swap the TLS certificate and key without dropping connections
 * or waiters; a pair that does not match is refused and the one in use
 * stays. Real fencelockd and storage-guard processes, real redis-server
 * nodes, curl for HTTPS.
 */
#include <errno.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "fld_daemon.h"

/* Run a tool to its end (at most 20 s), its output into log; its exit code. */
static int run_tool(const char *const argv[], const char *log)
{
    return hp_run((char *const *)argv, log, 20000);
}

static void write_file(const char *path, const char *text)
{
    char tmp[400];
    snprintf(tmp, sizeof(tmp), "%s.tmp", path);
    FILE *f = fopen(tmp, "w");
    assert_non_null(f);
    fputs(text, f);
    assert_int_equal(fclose(f), 0);
    chmod(tmp, 0600);
    assert_int_equal(rename(tmp, path), 0); /* as an operator's tools replace a file */
}

/* Does the file at path hold s? */
static int file_has(const char *path, const char *s)
{
    char *text = NULL;
    FILE *f = fopen(path, "r");
    if (f == NULL)
        return 0;
    size_t cap = 0;
    ssize_t n = getdelim(&text, &cap, '\0', f);
    fclose(f);
    int has = n > 0 && strstr(text, s) != NULL;
    free(text);
    return has;
}

/* Wait up to ms for path to hold s. */
static int wait_for(const char *path, const char *s, int ms)
{
    long long deadline = hp_now_ms() + ms;
    while (!file_has(path, s)) {
        if (hp_now_ms() > deadline)
            return 0;
        hp_sleep_ms(20);
    }
    return 1;
}

/* A self-signed pair for 127.0.0.1 at dir/NAME-cert.pem, -key.pem. */
static void make_pair(const char *dir, const char *name, char *cert, char *key, size_t cap)
{
    assert_int_equal(hp_self_signed(dir, name, cert, key, cap), 0);
}

static void copy_file(const char *from, const char *to)
{
    FILE *f = fopen(from, "r");
    assert_non_null(f);
    char buf[8192];
    size_t n = fread(buf, 1, sizeof(buf) - 1, f);
    fclose(f);
    buf[n] = '\0';
    write_file(to, buf);
}

/* curl's exit code for GET url trusting cacert only (0: answered, 60: the
 * server's certificate is not the one trusted). */
static int curl_get(const char *url, const char *cacert, const char *dir)
{
    char log[400], out[400];
    snprintf(log, sizeof(log), "%s/curl.log", dir);
    snprintf(out, sizeof(out), "%s/curl.out", dir);
    const char *argv[] = {"curl", "-sS", "--max-time", "10", "--cacert", cacert, "-o", out, url, NULL};
    return run_tool(argv, log);
}

/* Wait up to ms for GET url to be answered with a server trusted by cacert. */
static int trusted_within(const char *url, const char *cacert, const char *dir, int ms)
{
    long long deadline = hp_now_ms() + ms;
    while (curl_get(url, cacert, dir) != 0) {
        if (hp_now_ms() > deadline)
            return 0;
        hp_sleep_ms(50);
    }
    return 1;
}

/* SIGHUP swaps the certificate for new connections; a waiter that waits
 * through it is granted; a key that is not the certificate's is refused
 * and the pair in use stays. */
static void reload_swaps_the_tls_certificate(void **state)
{
    struct fld_fx *f = *state;
    struct fld *d = &f->d;
    char dir[256], a_cert[320], a_key[320], b_cert[320], b_key[320], cert[320], key[320], url[128];
    assert_int_equal(rh_mkdtemp("fld-reload", dir, sizeof(dir)), 0);
    make_pair(dir, "a", a_cert, a_key, sizeof(a_cert));
    make_pair(dir, "b", b_cert, b_key, sizeof(b_cert));
    snprintf(cert, sizeof(cert), "%s/cert.pem", dir);
    snprintf(key, sizeof(key), "%s/key.pem", dir);
    copy_file(a_cert, cert);
    copy_file(a_key, key);
    const char *args[] = {"--tls-cert", cert, "--tls-key", key, NULL};
    fld_start(d, f->nodes, args);
    snprintf(url, sizeof(url), "https://127.0.0.1:%u/healthz", d->port);
    assert_int_equal(curl_get(url, a_cert, dir), 0);
    assert_int_equal(curl_get(url, b_cert, dir), 60);

    /* A lock held, and a waiter for it over HTTPS, before the reload. */
    char lock_url[160], wait_out[400], wait_log[400], held[128];
    snprintf(lock_url, sizeof(lock_url), "https://127.0.0.1:%u/v1/locks/reload", d->port);
    snprintf(wait_out, sizeof(wait_out), "%s/wait.out", dir);
    snprintf(wait_log, sizeof(wait_log), "%s/wait.log", dir);
    char held_out[400];
    snprintf(held_out, sizeof(held_out), "%s/held.out", dir);
    const char *hold[] = {"curl",   "-sS", "--max-time", "10", "--cacert",           a_cert,   "-o",
                          held_out, "-X",  "POST",       "-d", "{\"ttl_ms\":20000}", lock_url, NULL};
    assert_int_equal(run_tool(hold, wait_log), 0);
    assert_true(file_has(held_out, "\"lock_id\""));
    FILE *fp = fopen(held_out, "r");
    assert_non_null(fp);
    char body[2048] = "";
    body[fread(body, 1, sizeof(body) - 1, fp)] = '\0';
    fclose(fp);
    const char *idp = strstr(body, "\"lock_id\":\"");
    assert_non_null(idp);
    idp += strlen("\"lock_id\":\"");
    snprintf(held, sizeof(held), "%.*s", (int)strcspn(idp, "\""), idp);
    const char *waiter[] = {"curl",     "-sS",  "--max-time", "20",
                            "--cacert", a_cert, "-o",         wait_out,
                            "-X",       "POST", "-d",         "{\"ttl_ms\":5000,\"wait_ms\":15000}",
                            lock_url,   NULL};
    pid_t wpid = hp_spawn((char *const *)waiter, NULL, wait_log);
    assert_true(wpid > 0);
    hp_sleep_ms(300); /* the waiter is waiting: the lock is held for 20 s */

    /* The new pair over the same paths, and SIGHUP. */
    copy_file(b_cert, cert);
    copy_file(b_key, key);
    assert_int_equal(kill(d->pid, SIGHUP), 0);
    assert_true(trusted_within(url, b_cert, dir, 10000));
    assert_int_equal(curl_get(url, a_cert, dir), 60);
    assert_true(file_has(d->log, "reloaded: new connections use them"));

    /* The waiter's connection was made with the old pair and is kept. */
    char release[300];
    snprintf(release, sizeof(release), "/v1/locks/reload/%s", held);
    char rel_url[400], rel_out[400];
    snprintf(rel_url, sizeof(rel_url), "https://127.0.0.1:%u%s", d->port, release);
    snprintf(rel_out, sizeof(rel_out), "%s/rel.out", dir);
    const char *rel[] = {"curl", "-sS",   "--max-time", "10",     "--cacert", b_cert,
                         "-o",   rel_out, "-X",         "DELETE", rel_url,    NULL};
    assert_int_equal(run_tool(rel, wait_log), 0);
    int st = 0;
    assert_int_equal(hp_wait(wpid, 15000, &st), 0);
    assert_true(WIFEXITED(st) && WEXITSTATUS(st) == 0);
    assert_true(file_has(wait_out, "\"lock_id\""));

    /* A certificate with a key not its own: refused, B still served. */
    copy_file(a_cert, cert);
    assert_int_equal(kill(d->pid, SIGHUP), 0);
    assert_true(wait_for(d->log, "not the key of the certificate); the pair in use stays", 10000));
    assert_int_equal(curl_get(url, b_cert, dir), 0);
    assert_int_equal(curl_get(url, a_cert, dir), 60);

    /* A FIFO planted at the certificate's path: refused at once (a reader
     * of it would wait for a writer), the service still serves and stops. */
    char fifo[400];
    snprintf(fifo, sizeof(fifo), "%s/fifo", dir);
    assert_int_equal(mkfifo(fifo, 0600), 0);
    assert_int_equal(rename(fifo, cert), 0);
    assert_int_equal(kill(d->pid, SIGHUP), 0);
    assert_true(wait_for(d->log, "not a regular file", 10000));
    assert_int_equal(curl_get(url, b_cert, dir), 0);
    assert_int_equal(fld_stop(d, 10000), 0);
    rh_rmtree(dir);
}

/* The exit code of fencelockd with argv (after the program), its output in log. */
static int fencelockd_run(const char *const *args, const char *log)
{
    const char *argv[16] = {getenv("FLD_EXE") ? getenv("FLD_EXE") : "fencelockd"};
    size_t n = 1;
    for (size_t i = 0; args[i] != NULL && n < 15; i++)
        argv[n++] = args[i];
    argv[n] = NULL;
    return run_tool(argv, log);
}

/* Options from the file, the command line over them, --check-config with
 * the line of the first error, and SIGHUP applying a new log level. */
static void config_file_check_and_log_level(void **state)
{
    struct fld_fx *f = *state;
    struct fld *d = &f->d;
    char dir[256], conf[320], log[320], text[2048];
    assert_int_equal(rh_mkdtemp("fld-conf", dir, sizeof(dir)), 0);
    snprintf(conf, sizeof(conf), "%s/fencelockd.conf", dir);
    snprintf(log, sizeof(log), "%s/check.log", dir);
    snprintf(text, sizeof(text),
             "# fencelockd's options, as keys\n"
             "nodes = %s\n"
             "\n"
             "  ttl = 4s   # four seconds\n"
             "log-level = \"warn\"   # quoted, then a comment\n"
             "fence-transition = no # a flag\n",
             f->nodes);
    write_file(conf, text);
    const char *check[] = {"--config", conf, "--check-config", NULL};
    assert_int_equal(fencelockd_run(check, log), 0);
    assert_true(file_has(log, "the configuration is OK"));

    /* Errors: each names its line. */
    static const struct {
        const char *line, *says;
    } bad[] = {
        {"threads = 99\n", ":7: --threads must be 1..64"},
        {"no-such-option = 1\n", ":7: unknown key 'no-such-option'"},
        {"redis-functions = maybe\n", ":7: redis-functions wants yes or no"},
        {"listen\n", ":7: want key = value"},
        {"help = yes\n", ":7: unknown key 'help'"},
        {"auth-file = /nonexistent/tokens\n", "/nonexistent/tokens"},
        {"key-prefix = \"app: \" trailing\n", ":7: key-prefix: after a quoted value, only a comment"},
        {"key-prefix = app\"s\n", ":7: key-prefix: a quote inside a value not in quotes"},
        /* What only the start found before: the nodes, the timeout
         * against the TTL, the port file's directory. */
        {"nodes = notaurl\n", "missing :port"},
        {"timeout = 20s\n", "request_timeout_ms must be"},
        {"port-file = /nonexistent/dir/port\n", "its directory cannot be written"},
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        char t[2200];
        snprintf(t, sizeof(t), "%s%s", text, bad[i].line);
        write_file(conf, t);
        unlink(log);
        int rc = fencelockd_run(check, log);
        if (rc == 0 || !file_has(log, bad[i].says))
            fail_msg("%s: exit %d, want non-zero and '%s' (see %s)", bad[i].line, rc, bad[i].says, log);
    }
    /* A FIFO as the file: refused, not waited on. */
    char fifo[400];
    snprintf(fifo, sizeof(fifo), "%s/fifo.conf", dir);
    assert_int_equal(mkfifo(fifo, 0600), 0);
    const char *fifo_check[] = {"--config", fifo, "--check-config", NULL};
    unlink(log);
    assert_int_equal(fencelockd_run(fifo_check, log), 2);
    assert_true(file_has(log, "fifo.conf: not a regular file"));
    const char *missing[] = {"--config", "/nonexistent/fencelockd.conf", "--check-config", NULL};
    unlink(log);
    assert_int_not_equal(fencelockd_run(missing, log), 0);
    assert_true(file_has(log, "/nonexistent/fencelockd.conf: No such file"));

    /* Started with the file: its TTL and its log level (warn: no line per
     * lock operation); the command line's --timeout and --listen over it. */
    write_file(conf, text);
    const char *args[] = {"--config", conf, NULL};
    fld_start(d, f->nodes, args);
    struct hc_response r = {0};
    fld_call(d, "POST", "/v1/locks/conf-a", "{}", NULL, &r);
    assert_int_equal(r.status, 200);
    assert_int_equal(fld_int(&r, "ttl_ms"), 4000);
    hc_response_clear(&r);
    assert_false(file_has(d->log, "conf-a"));

    /* SIGHUP: info now, and a --threads that waits for a restart. */
    snprintf(text, sizeof(text), "nodes = %s\nttl = 4s\nlog-level = info\nthreads = 3\n", f->nodes);
    write_file(conf, text);
    assert_int_equal(kill(d->pid, SIGHUP), 0);
    assert_true(wait_for(d->log, "taking effect on restart: --threads", 10000));
    fld_call(d, "POST", "/v1/locks/conf-b", "{}", NULL, &r);
    assert_int_equal(r.status, 200);
    hc_response_clear(&r);
    assert_true(wait_for(d->log, "conf-b", 5000));

    /* A file that no longer parses changes nothing. */
    snprintf(text, sizeof(text), "nodes = %s\nlog-level = loud\n", f->nodes);
    write_file(conf, text);
    assert_int_equal(kill(d->pid, SIGHUP), 0);
    assert_true(wait_for(d->log, "the configuration is refused", 10000));
    fld_call(d, "POST", "/v1/locks/conf-c", "{}", NULL, &r);
    assert_int_equal(r.status, 200);
    assert_int_equal(fld_int(&r, "ttl_ms"), 4000);
    hc_response_clear(&r);
    assert_true(wait_for(d->log, "conf-c", 5000));
    assert_int_equal(fld_stop(d, 10000), 0);
    rh_rmtree(dir);
}

/* storage-guard: the same file format and checks, and its TLS pair
 * swapped at SIGHUP. */
static void storage_guard_config_and_tls_reload(void **state)
{
    (void)state;
    char dir[256], conf[320], log[320], text[2048], a_cert[320], a_key[320], b_cert[320], b_key[320];
    char cert[320], key[320], port_file[320], url[128];
    assert_int_equal(rh_mkdtemp("sg-conf", dir, sizeof(dir)), 0);
    make_pair(dir, "a", a_cert, a_key, sizeof(a_cert));
    make_pair(dir, "b", b_cert, b_key, sizeof(b_cert));
    snprintf(cert, sizeof(cert), "%s/cert.pem", dir);
    snprintf(key, sizeof(key), "%s/key.pem", dir);
    snprintf(conf, sizeof(conf), "%s/storage-guard.conf", dir);
    snprintf(log, sizeof(log), "%s/sg.log", dir);
    snprintf(port_file, sizeof(port_file), "%s/port", dir);
    copy_file(a_cert, cert);
    copy_file(a_key, key);
    snprintf(text, sizeof(text),
             "db = %s/records.db\nlisten = 127.0.0.1:0\nport-file = %s\ntls-cert = %s\ntls-key = %s\n"
             "max-token-ahead = 10m\n",
             dir, port_file, cert, key);
    write_file(conf, text);
    const char *exe = getenv("SG_EXE") ? getenv("SG_EXE") : "storage-guard";
    const char *check[] = {exe, "--config", conf, "--check-config", NULL};
    assert_int_equal(run_tool(check, log), 0);
    assert_true(file_has(log, "the configuration is OK"));
    /* A mismatched pair is found by the check, before any start. */
    char t[2400];
    snprintf(t, sizeof(t), "%stls-key = %s\n", text, b_key);
    write_file(conf, t);
    unlink(log);
    assert_int_not_equal(run_tool(check, log), 0);
    assert_true(file_has(log, "not the key of the certificate"));
    snprintf(t, sizeof(t), "%smax-body = lots\n", text);
    write_file(conf, t);
    unlink(log);
    assert_int_equal(run_tool(check, log), 2);
    assert_true(file_has(log, "storage-guard.conf:7: --max-body must be"));

    write_file(conf, text);
    unlink(log);
    const char *argv[] = {exe, "--config", conf, NULL};
    pid_t pid = hp_spawn((char *const *)argv, NULL, log);
    assert_true(pid > 0);
    assert_true(wait_for(port_file, "\n", 10000));
    FILE *fp = fopen(port_file, "r");
    assert_non_null(fp);
    unsigned port = 0;
    assert_int_equal(fscanf(fp, "%u", &port), 1);
    fclose(fp);
    snprintf(url, sizeof(url), "https://127.0.0.1:%u/healthz", port);
    assert_int_equal(curl_get(url, a_cert, dir), 0);
    copy_file(b_cert, cert);
    copy_file(b_key, key);
    assert_int_equal(kill(pid, SIGHUP), 0);
    assert_true(trusted_within(url, b_cert, dir, 10000));
    assert_int_equal(curl_get(url, a_cert, dir), 60);
    assert_int_equal(kill(pid, SIGTERM), 0);
    int st = 0;
    assert_int_equal(hp_wait(pid, 10000, &st), 0);
    assert_true(WIFEXITED(st) && WEXITSTATUS(st) == 0);
    rh_rmtree(dir);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(reload_swaps_the_tls_certificate, fld_fx_setup, fld_fx_teardown),
        cmocka_unit_test_setup_teardown(config_file_check_and_log_level, fld_fx_setup, fld_fx_teardown),
        cmocka_unit_test(storage_guard_config_and_tls_reload),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
