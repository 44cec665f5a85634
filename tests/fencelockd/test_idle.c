/*
 * Many idle connections: fencelockd keeps answering others while
 * thousands of clients hold connections open and send nothing, and lets
 * them go when they close.
 *
 * How many: FLD_IDLE_CONNECTIONS (10,000 in the plain build; 1,000 in the
 * ASan+UBSan build, set by tests/fencelockd/meson.build, and under
 * valgrind, where scripts/test.sh sets FENCELOCK_TEST_WRAPPER): the
 * sanitized and valgrind runs check the same behaviour at a tenth of the
 * size to keep CI within its time. The test prints the number it used.
 */
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <sys/socket.h>
#include <unistd.h>

#include <netinet/in.h>

#include <cmocka.h>

#include "fld_daemon.h"

static long rss_kib(pid_t pid)
{
    char path[64], line[256];
    snprintf(path, sizeof(path), "/proc/%d/status", (int)pid);
    FILE *f = fopen(path, "r");
    long kib = -1;
    while (f != NULL && fgets(line, sizeof(line), f))
        if (sscanf(line, "VmRSS: %ld kB", &kib) == 1)
            break;
    if (f)
        fclose(f);
    return kib;
}

static int connect_nb(uint16_t port)
{
    int s = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (s < 0)
        return -errno;
    struct sockaddr_in a = {
        .sin_family = AF_INET, .sin_port = htons(port), .sin_addr.s_addr = htonl(0x7f000001)};
    if (connect(s, (struct sockaddr *)&a, sizeof(a)) != 0 && errno != EINPROGRESS) {
        int e = errno;
        close(s);
        return -e;
    }
    return s;
}

static void idle_connections_do_not_stop_others(void **state)
{
    (void)state;
    int n = 10000;
    const char *env = getenv("FLD_IDLE_CONNECTIONS");
    if (env != NULL)
        n = atoi(env);
    if (getenv("FENCELOCK_TEST_WRAPPER") != NULL && getenv("FENCELOCK_TEST_WRAPPER")[0] != '\0')
        n = 1000;
    assert_true(n >= 100);
    printf("# %d idle connections (10,000 in the plain build; 1,000 under sanitizers or valgrind)\n", n);
    /* This process holds one descriptor per connection too. */
    struct rlimit rl;
    assert_int_equal(getrlimit(RLIMIT_NOFILE, &rl), 0);
    if (rl.rlim_cur < (rlim_t)n + 256) {
        rl.rlim_cur = (rlim_t)n + 256;
        if (rl.rlim_max < rl.rlim_cur)
            rl.rlim_max = rl.rlim_cur; /* root may raise the hard limit */
        if (setrlimit(RLIMIT_NOFILE, &rl) != 0)
            fail_msg("cannot allow %d descriptors (ulimit -n): %s", n + 256, strerror(errno));
    }
    struct rh_cluster *rc = NULL;
    assert_int_equal(rh_cluster_start(3, NULL, &rc), 0);
    char nodes[512];
    fld_nodes(rc, nodes, sizeof(nodes));
    struct fld d;
    const char *args[] = {"--log-level", "warn", NULL};
    fld_start(&d, nodes, args);
    long rss0 = rss_kib(d.pid);

    int *fds = calloc((size_t)n, sizeof(*fds));
    assert_non_null(fds);
    /* In batches, so that the listen queue keeps up. */
    for (int i = 0; i < n; i++) {
        fds[i] = connect_nb(d.port);
        if (fds[i] < 0)
            fail_msg("connection %d: %s", i, strerror(-fds[i]));
        if (i % 500 == 499)
            hp_sleep_ms(20);
    }
    hp_sleep_ms(300);
    long rss1 = rss_kib(d.pid);

    /* Others are served, at once. */
    long long t0 = hp_now_ms();
    char id[64];
    assert_int_equal(fld_acquire(&d, "while-idle", NULL, id, sizeof(id), NULL), 200);
    char buf[32];
    fld_expect(&d, "GET", "/healthz", NULL, 200, "status", buf, sizeof(buf));
    long long took = hp_now_ms() - t0;
    printf(
        "# served in %lld ms with %d idle connections; fencelockd RSS %ld KiB -> %ld KiB (%.1f KiB each)\n",
        took, n, rss0, rss1, (double)(rss1 - rss0) / n);
    assert_true(took < 2000);
    /* Every idle connection is still open (none was refused or dropped):
     * a request on the last one is answered. */
    static const char req[] = "GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n";
    int last = fds[n - 1];
    int fl = fcntl(last, F_GETFL);
    fcntl(last, F_SETFL, fl & ~O_NONBLOCK);
    struct timeval tv = {5, 0};
    setsockopt(last, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
    assert_int_equal(write(last, req, sizeof(req) - 1), (ssize_t)(sizeof(req) - 1));
    char answer[512] = "";
    ssize_t got = read(last, answer, sizeof(answer) - 1);
    assert_true(got > 12);
    assert_memory_equal(answer, "HTTP/1.1 200", 12);

    for (int i = 0; i < n; i++)
        close(fds[i]);
    free(fds);
    hp_sleep_ms(200);
    assert_int_equal(fld_acquire(&d, "after-idle", NULL, id, sizeof(id), NULL), 200);
    int st = fld_stop(&d, 10000);
    assert_true(WIFEXITED(st) && WEXITSTATUS(st) == 0);
    fld_destroy(&d);
    rh_cluster_free(rc);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(idle_connections_do_not_stop_others),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
