/*
 * A real lockcore client against a fake node that answers with the fuzz
 * input: whatever a hostile or broken node sends, the client must not
 * crash, must not allocate without bound (run with -malloc_limit_mb, see
 * fuzz/run.sh) and must end every operation in bounded time.
 *
 * Input: one flags byte, then the bytes the node sends, as they are.
 *   flags bit 0: fencing off (plain Redlock: SET NX PX instead of scripts)
 *   flags bit 1: holder_info set (one more script, one more reply)
 *   flags bit 2: a password in the address (AUTH first)
 *   flags bit 3: a database in the address (SELECT first)
 *   flags bit 4: the fair lock (the queued acquire script, six replies)
 *   flags bit 5: polling (a release that tells no waiter)
 *   flags bit 6: the status is a read-write lock's (lockcore_rw_status:
 *                its reply lists readers and a waiting writer)
 * The node is a loopback listener of this process. The client connects,
 * the target accepts, writes the bytes and shuts its side down, and the
 * client reads them as the replies to an acquire, an extend and a release
 * (of a lock from an id) in flight together, and then a status, all on
 * one connection: pipelining and the reply FIFO get hostile input too.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <lockcore/lockcore.h>

#define DEADLINE_MS 2000 /* far above what one input needs */

static int listener = -1;
static int port;

static void listen_once(void)
{
    listener = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (listener < 0)
        abort();
    struct sockaddr_in sa;
    memset(&sa, 0, sizeof(sa));
    sa.sin_family = AF_INET;
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof(sa);
    if (bind(listener, (struct sockaddr *)&sa, len) < 0 || listen(listener, 64) < 0 ||
        getsockname(listener, (struct sockaddr *)&sa, &len) < 0)
        abort();
    port = ntohs(sa.sin_port);
}

/* Connections the client opened and we did not serve (reconnects after the
 * node closed): accept and close them, so that none waits into the next
 * input. */
static void drain_backlog(void)
{
    for (;;) {
        struct pollfd p = {.fd = listener, .events = POLLIN};
        if (poll(&p, 1, 0) != 1)
            return;
        int fd = accept(listener, NULL, NULL);
        if (fd < 0)
            return;
        close(fd);
    }
}

static void write_all(int fd, const uint8_t *p, size_t n)
{
    while (n > 0) {
        ssize_t w = send(fd, p, n, MSG_NOSIGNAL);
        if (w < 0) {
            if (errno == EINTR)
                continue;
            return; /* the client closed: fine, it had its reasons */
        }
        p += w;
        n -= (size_t)w;
    }
}

/* FUZZ_VERBOSE=1 prints what each operation ended with: to check that a
 * seed drives the client where it was meant to. */
static int verbose = -1;

static void done_cb(lockcore_client *c, int rc, const struct lockcore_lock *lock, void *arg)
{
    if (verbose)
        fprintf(stderr, "op: %s (token %llu): %s\n", lockcore_strerror(rc), (unsigned long long)lock->token,
                lockcore_errmsg(c));
    int *left = arg;
    (*left)--;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    if (listener < 0)
        listen_once();
    if (verbose < 0)
        verbose = getenv("FUZZ_VERBOSE") != NULL;
    unsigned flags = data[0];
    data++;
    size--;

    char node[128];
    snprintf(node, sizeof(node), "redis://%s127.0.0.1:%d%s", (flags & 4) ? "u:p@" : "", port,
             (flags & 8) ? "/3" : "");
    const char *nodes[] = {node};
    struct lockcore_options o;
    lockcore_options_init(&o);
    o.nodes = nodes;
    o.n_nodes = 1;
    o.ttl_ms = 1000;
    o.request_timeout_ms = 100;
    o.connect_timeout_ms = 200;
    o.retry_count = 0;
    o.reconnect_min_ms = 60000; /* no reconnect within one input */
    o.reconnect_max_ms = 60000;
    o.fencing = (flags & 1) ? 0 : 1;
    o.wait_mode = (flags & 16)   ? LOCKCORE_WAIT_FAIR
                  : (flags & 32) ? LOCKCORE_WAIT_POLL
                                 : LOCKCORE_WAIT_NOTIFY;
    o.holder_info = (flags & 2) ? "fuzz host 1" : NULL;
    lockcore_client *c = NULL;
    char err[256];
    if (lockcore_client_new(&o, &c, err, sizeof(err)) != 0)
        abort();

    int left = 0;
    struct lockcore_lock held;
    if (lockcore_lock_from_id(c, "r", "0123456789abcdef0123456789abcdef01234567", &held) != 0)
        abort();
    if (lockcore_acquire_async(c, "r", done_cb, &left) == 0)
        left++;
    if (lockcore_extend_async(c, &held, 0, done_cb, &left) == 0)
        left++;
    if (lockcore_release_async(c, &held, done_cb, &left) == 0)
        left++;
    /* Nothing sent yet may be read from us; the connect is under way. */
    if (lockcore_run(c, 0) < 0)
        abort();
    struct pollfd p = {.fd = listener, .events = POLLIN};
    if (poll(&p, 1, 1000) != 1)
        abort(); /* the client never connected */
    int fd = accept(listener, NULL, NULL);
    if (fd < 0)
        abort();
    write_all(fd, data, size);
    shutdown(fd, SHUT_WR);

    struct lockcore_node_status st[1];
    int n = (flags & 64) ? lockcore_rw_status(c, "r", st, 1) : lockcore_status(c, "r", st, 1);
    if (n != 1)
        abort();
    if (verbose)
        fprintf(
            stderr,
            "status: reachable %d holder '%s' fence %llu info '%s' holds %u reader '%s' writer waits '%s' "
            "error '%s'\n",
            st[0].reachable, st[0].holder, (unsigned long long)st[0].fence, st[0].info, st[0].holds,
            st[0].readers[0].id, st[0].writer_waits, st[0].error);
    uint64_t deadline = lockcore_now_ms() + DEADLINE_MS;
    while (left > 0 && lockcore_now_ms() < deadline)
        if (lockcore_run(c, 10) < 0)
            abort();
    if (left != 0)
        abort(); /* an operation that never ended */
    /* The message of a failure is text: bounded and terminated. */
    if (strlen(lockcore_errmsg(c)) >= 512)
        abort();
    lockcore_client_free(c);
    close(fd);
    drain_backlog();
    return 0;
}
