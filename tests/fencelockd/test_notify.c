/* systemd's notifications from fencelockd and storage-guard, each started
 * with its unit's ExecStart= line (systemd/NAME.service, with the shipped
 * etc/fencelock/NAME.conf) and a NOTIFY_SOCKET of the test's own (as systemd
 * would give a Type=notify unit): READY=1 once listening (fencelockd: only once a majority of its
 * nodes answers), WATCHDOG=1 every half of WATCHDOG_USEC, RELOADING=1 and
 * READY=1 around a SIGHUP's reload of the auth file, STOPPING=1 at
 * SIGTERM. */
#include <errno.h>
#include <poll.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "fld_daemon.h"

struct fx {
    struct rh_cluster *nodes;
    char dir[256], sock[300], log[300];
    int fd;
};

static int setup(void **state)
{
    struct fx *f = calloc(1, sizeof(*f));
    assert_non_null(f);
    assert_int_equal(rh_cluster_start(3, NULL, &f->nodes), 0);
    assert_int_equal(rh_mkdtemp("notify", f->dir, sizeof(f->dir)), 0);
    snprintf(f->sock, sizeof(f->sock), "%s/notify", f->dir);
    snprintf(f->log, sizeof(f->log), "%s/service.log", f->dir);
    f->fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    assert_true(f->fd >= 0);
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    assert_true(strlen(f->sock) < sizeof(sa.sun_path));
    memcpy(sa.sun_path, f->sock, strlen(f->sock) + 1);
    assert_int_equal(bind(f->fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    struct fx *f = *state;
    close(f->fd);
    rh_cluster_free(f->nodes);
    rh_rmtree(f->dir);
    free(f);
    return 0;
}

/* The next notification within ms into buf, or "" when none came. */
static const char *next(struct fx *f, int ms, char *buf, size_t cap)
{
    buf[0] = '\0';
    struct pollfd p = {.fd = f->fd, .events = POLLIN};
    if (poll(&p, 1, ms) == 1) {
        ssize_t n = recv(f->fd, buf, cap - 1, 0);
        buf[n > 0 ? n : 0] = '\0';
    }
    return buf;
}

/* Wait up to ms for a notification that contains what. */
static int told(struct fx *f, const char *what, int ms)
{
    char buf[512];
    for (long long end = hp_now_ms() + ms; hp_now_ms() < end;)
        if (strstr(next(f, (int)(end - hp_now_ms()), buf, sizeof(buf)), what) != NULL)
            return 1;
    return 0;
}

static pid_t spawn(struct fx *f, const char *const *argv)
{
    char env_sock[400];
    snprintf(env_sock, sizeof(env_sock), "NOTIFY_SOCKET=%s", f->sock);
    char *env[] = {env_sock, "WATCHDOG_USEC=400000", NULL};
    pid_t pid = hp_spawn((char *const *)argv, env, f->log);
    assert_true(pid > 0);
    return pid;
}

/* The ExecStart= line of the unit in systemd/, as argv: /usr/bin/PROGRAM
 * is exe, /etc/fencelock/FILE the tree's etc/fencelock/FILE, and the
 * $VARIABLE of /etc/default/... the options opts (NULL-terminated). The
 * words are kept in buf. */
static void unit_argv(const char *unit, const char *exe, const char *const *opts, const char **argv,
                      size_t cap, char *buf, size_t buf_cap)
{
    char path[512], line[1024] = "";
    snprintf(path, sizeof(path), "%s/systemd/%s", SOURCE_DIR, unit);
    FILE *fp = fopen(path, "r");
    assert_non_null(fp);
    while (fgets(line, sizeof(line), fp) != NULL && strncmp(line, "ExecStart=", 10) != 0)
        ;
    fclose(fp);
    assert_int_equal(strncmp(line, "ExecStart=", 10), 0);
    size_t n = 0, used = 0;
    for (char *save = NULL, *w = strtok_r(line + 10, " \t\n", &save); w != NULL && n + 1 < cap;
         w = strtok_r(NULL, " \t\n", &save)) {
        if (strncmp(w, "/usr/bin/", 9) == 0) {
            argv[n++] = exe;
        } else if (w[0] == '$') {
            for (size_t i = 0; opts[i] != NULL && n + 1 < cap; i++)
                argv[n++] = opts[i];
        } else {
            int len = strncmp(w, "/etc/fencelock/", 15) == 0
                          ? snprintf(buf + used, buf_cap - used, "%s/etc/fencelock/%s", SOURCE_DIR, w + 15)
                          : snprintf(buf + used, buf_cap - used, "%s", w);
            assert_true(len > 0 && (size_t)len < buf_cap - used);
            argv[n++] = buf + used;
            used += (size_t)len + 1;
        }
    }
    argv[n] = NULL;
    assert_string_equal(argv[0], exe);
}

static void stop(struct fx *f, pid_t pid)
{
    assert_int_equal(kill(pid, SIGTERM), 0);
    assert_true(told(f, "STOPPING=1", 5000));
    int st = 0;
    assert_int_equal(hp_wait(pid, 10000, &st), 0);
    assert_true(WIFEXITED(st) && WEXITSTATUS(st) == 0);
}

static void notify_fencelockd_ready_at_a_majority(void **state)
{
    struct fx *f = *state;
    char nodes[256];
    fld_nodes(f->nodes, nodes, sizeof(nodes));
    /* Two of three nodes down: listening, not ready. */
    assert_int_equal(rh_kill(f->nodes, 1), 0);
    assert_int_equal(rh_kill(f->nodes, 2), 0);
    const char *exe = getenv("FLD_EXE") ? getenv("FLD_EXE") : "fencelockd";
    const char *opts[] = {"--nodes", nodes, "--listen", "127.0.0.1:0", "--timeout", "150ms", NULL};
    const char *argv[24];
    char words[2048];
    unit_argv("fencelockd.service", exe, opts, argv, 24, words, sizeof(words));
    assert_string_equal(argv[1], "--config"); /* the shipped default configuration */
    pid_t pid = spawn(f, argv);
    char buf[512];
    long long end = hp_now_ms() + 1500;
    while (hp_now_ms() < end) {
        next(f, (int)(end - hp_now_ms()), buf, sizeof(buf));
        assert_null(strstr(buf, "READY=1"));
    }
    /* A second node back: a majority answers, and it is ready. */
    assert_int_equal(rh_restart(f->nodes, 1, 0), 0);
    assert_true(told(f, "READY=1", 5000));
    /* The watchdog is fed every 200 ms: several in a second. */
    int pings = 0;
    for (end = hp_now_ms() + 1000; hp_now_ms() < end;)
        pings += strstr(next(f, (int)(end - hp_now_ms()), buf, sizeof(buf)), "WATCHDOG=1") != NULL;
    assert_true(pings >= 3);
    stop(f, pid);
    assert_int_equal(rh_restart(f->nodes, 2, 0), 0);
}

/* The status of GET /v1/records/none with the headers. */
static int status_of(uint16_t port, const char *headers)
{
    struct hc_response r = {0};
    assert_int_equal(hc_request(port, "GET", "/v1/records/none", headers, NULL, 0, &r), 0);
    int st = r.status;
    hc_response_clear(&r);
    return st;
}

static void notify_storage_guard_ready_and_stopping(void **state)
{
    struct fx *f = *state;
    char db[320];
    snprintf(db, sizeof(db), "%s/records.db", f->dir);
    const char *exe = getenv("SG_EXE") ? getenv("SG_EXE") : "storage-guard";
    char tokens[320], port_file[320];
    snprintf(tokens, sizeof(tokens), "%s/tokens", f->dir);
    snprintf(port_file, sizeof(port_file), "%s/port", f->dir);
    FILE *fp = fopen(tokens, "w");
    assert_non_null(fp);
    fputs("first-token-0123456789 first\n", fp);
    fclose(fp);
    chmod(tokens, 0600);
    const char *opts[] = {"--db",        db,        "--listen", "127.0.0.1:0", "--auth-file", tokens,
                          "--port-file", port_file, NULL};
    const char *argv[24];
    char words[2048];
    unit_argv("storage-guard.service", exe, opts, argv, 24, words, sizeof(words));
    assert_string_equal(argv[1], "--config");
    pid_t pid = spawn(f, argv);
    assert_true(told(f, "READY=1", 10000));
    assert_true(told(f, "WATCHDOG=1", 1000));
    unsigned port = 0;
    fp = fopen(port_file, "r");
    assert_non_null(fp);
    assert_int_equal(fscanf(fp, "%u", &port), 1);
    fclose(fp);
    const char *first = "Authorization: Bearer first-token-0123456789\r\n";
    const char *second = "Authorization: Bearer second-token-0123456789\r\n";
    assert_int_equal(status_of((uint16_t)port, first), 404);
    assert_int_equal(status_of((uint16_t)port, second), 401);
    /* SIGHUP: the file read again, told as RELOADING then READY. */
    fp = fopen(tokens, "w");
    assert_non_null(fp);
    fputs("second-token-0123456789 second\n", fp);
    fclose(fp);
    assert_int_equal(kill(pid, SIGHUP), 0);
    assert_true(told(f, "RELOADING=1", 5000));
    assert_true(told(f, "READY=1", 5000));
    assert_int_equal(status_of((uint16_t)port, second), 404);
    assert_int_equal(status_of((uint16_t)port, first), 401);
    stop(f, pid);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(notify_fencelockd_ready_at_a_majority),
        cmocka_unit_test(notify_storage_guard_ready_and_stopping),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
