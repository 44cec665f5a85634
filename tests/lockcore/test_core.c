/* lockcore's event core against real redis-server processes: the defects a
 * close review found, one test each (each fails on the code before its
 * fix), and the callback contract of lockcore.h.
 *
 * This program interposes poll() and getaddrinfo(): lockcore calls them
 * through the dynamic linker, so the definitions below are the ones it
 * gets. They pass every call on, except that poll() fails on demand and
 * getaddrinfo() counts look-ups of names (not of numeric addresses). */
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <poll.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <netinet/in.h>
#include <unistd.h>

#include <cmocka.h>
#include <hiredis/hiredis.h>

#include "proc.h"
#include "fence_probe.h"
#include "redis_harness.h"
#include <lockcore/lockcore.h>

/* ---- interposed libc calls ---- */

static int poll_fail_errno; /* non-zero: the next polls fail with it */

/* Default visibility: the project builds with -fvisibility=hidden, and
 * only an exported definition interposes. */
__attribute__((visibility("default"))) int poll(struct pollfd *fds, nfds_t n, int timeout)
{
    static int (*real)(struct pollfd *, nfds_t, int);
    if (poll_fail_errno != 0) {
        errno = poll_fail_errno;
        return -1;
    }
    if (real == NULL)
        *(void **)&real = dlsym(RTLD_NEXT, "poll");
    return real(fds, n, timeout);
}

static int name_lookups; /* getaddrinfo() of a host that is not numeric */

__attribute__((visibility("default"))) int getaddrinfo(const char *node, const char *service,
                                                       const struct addrinfo *hints, struct addrinfo **res)
{
    static int (*real)(const char *, const char *, const struct addrinfo *, struct addrinfo **);
    if (node != NULL && strcmp(node, "localhost") == 0)
        name_lookups++;
    if (real == NULL)
        *(void **)&real = dlsym(RTLD_NEXT, "getaddrinfo");
    return real(node, service, hints, res);
}

/* ---- fixture ---- */

struct fixture {
    struct rh_cluster *rc;
    unsigned n;
    const char *urls[5];
    char url_buf[5][256];
};

static int setup3(void **state)
{
    struct fixture *f = calloc(1, sizeof(*f));
    assert_non_null(f);
    f->n = 3;
    assert_int_equal(rh_cluster_start(3, NULL, &f->rc), 0);
    for (unsigned i = 0; i < f->n; i++) {
        snprintf(f->url_buf[i], sizeof(f->url_buf[i]), "%s", rh_url(f->rc, (int)i));
        f->urls[i] = f->url_buf[i];
    }
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    struct fixture *f = *state;
    rh_cluster_free(f->rc);
    free(f);
    return 0;
}

struct tuning {
    uint64_t ttl_ms;
    uint64_t request_timeout_ms;
    uint64_t fence_idle_ms;
    const char *holder_info;
    int retry_count;
    int fence_transition;
};

static lockcore_client *client(struct fixture *f, const struct tuning *t)
{
    struct lockcore_options o;
    lockcore_options_init(&o);
    o.nodes = f->urls;
    o.n_nodes = f->n;
    o.retry_count = t ? t->retry_count : 0;
    if (t && t->ttl_ms)
        o.ttl_ms = t->ttl_ms;
    if (t && t->request_timeout_ms)
        o.request_timeout_ms = t->request_timeout_ms;
    if (t && t->fence_idle_ms)
        o.fence_idle_ms = t->fence_idle_ms;
    if (t) {
        o.holder_info = t->holder_info;
        o.fence_transition = t->fence_transition;
    }
    lockcore_client *c = NULL;
    char err[256];
    if (lockcore_client_new(&o, &c, err, sizeof(err)) != 0)
        fail_msg("client: %s", err);
    return c;
}

struct lost {
    int calls;
    int rc;
    uint64_t at_ms;
    char msg[512];
    lockcore_keepalive *stop_other; /* on_lost stops this one */
};

static void on_lost(lockcore_client *c, int rc, const struct lockcore_lock *l, void *arg)
{
    (void)l;
    struct lost *s = arg;
    s->calls++;
    s->rc = rc;
    s->at_ms = lockcore_now_ms();
    snprintf(s->msg, sizeof(s->msg), "%s", lockcore_errmsg(c));
    if (s->stop_other != NULL) {
        lockcore_keepalive_stop(s->stop_other);
        s->stop_other = NULL;
    }
}

/* ---- 0. a late rollback of an earlier attempt ---- */

/* The quoted arguments of a MONITOR line into argv (each malloc'd). */
static int monitor_args(const char *line, char **argv, size_t *lens, int cap)
{
    int n = 0;
    const char *p = strchr(line, ']');
    while (p != NULL && (p = strchr(p, '"')) != NULL && n < cap) {
        char *out = malloc(strlen(p) + 1);
        size_t k = 0;
        for (p++; *p && *p != '"'; p++) {
            if (*p != '\\') {
                out[k++] = *p;
                continue;
            }
            p++;
            switch (*p) {
            case 'n':
                out[k++] = '\n';
                break;
            case 'r':
                out[k++] = '\r';
                break;
            case 't':
                out[k++] = '\t';
                break;
            case 'x': {
                char hex[3] = {p[1], p[2], 0};
                out[k++] = (char)strtol(hex, NULL, 16);
                p += 2;
                break;
            }
            default:
                out[k++] = *p;
                break;
            }
        }
        out[k] = '\0';
        argv[n] = out;
        lens[n++] = k;
        if (*p == '"')
            p++;
    }
    return n;
}

/* A command a node ran, as MONITOR showed it. */
struct seen {
    int argc;
    char *argv[32];
    size_t lens[32];
};

static void seen_free(struct seen *c)
{
    for (int k = 0; k < c->argc; k++)
        free(c->argv[k]);
    c->argc = 0;
}

static redisContext *monitor(struct fixture *f, int node)
{
    redisContext *mon = redisConnect("127.0.0.1", rh_port(f->rc, node));
    assert_true(mon != NULL && mon->err == 0);
    redisReply *r = redisCommand(mon, "MONITOR");
    assert_non_null(r);
    freeReplyObject(r);
    struct timeval tv = {1, 0};
    redisSetTimeout(mon, tv);
    return mon;
}

/* The next script call (EVAL, EVALSHA or FCALL) MONITOR shows on key with
 * the argument arg (NULL: any) and argc arguments (0: any); 0, or -1 if
 * none came within a second. */
static int monitor_next(redisContext *mon, const char *key, const char *arg, int argc, struct seen *out)
{
    redisReply *r;
    out->argc = 0;
    while (redisGetReply(mon, (void **)&r) == REDIS_OK) {
        int found = 0;
        if (r->type == REDIS_REPLY_STATUS) {
            seen_free(out);
            out->argc = monitor_args(r->str, out->argv, out->lens, 32);
            found = out->argc > 3 &&
                    (strcasecmp(out->argv[0], "EVALSHA") == 0 || strcasecmp(out->argv[0], "EVAL") == 0 ||
                     strcasecmp(out->argv[0], "FCALL") == 0) &&
                    (argc == 0 || out->argc == argc);
            int has_key = 0, has_arg = arg == NULL;
            for (int k = 3; found && k < out->argc; k++) {
                has_key |= strcmp(out->argv[k], key) == 0;
                has_arg |= arg != NULL && strcmp(out->argv[k], arg) == 0;
            }
            found = found && has_key && has_arg;
        }
        freeReplyObject(r);
        if (found)
            return 0;
    }
    seen_free(out);
    return -1;
}

/* Run a command again on every node: a copy of it that arrives late. */
static void deliver_late(struct fixture *f, const struct seen *c)
{
    for (unsigned i = 0; i < f->n; i++) {
        redisContext *late = redisConnect("127.0.0.1", rh_port(f->rc, (int)i));
        assert_true(late != NULL && late->err == 0);
        redisReply *r = redisCommandArgv(late, c->argc, (const char **)c->argv, c->lens);
        assert_non_null(r);
        freeReplyObject(r);
        redisFree(late);
    }
}

/* Every attempt of an acquisition has a lock id of its own: a rollback of
 * attempt 1 that reaches a node late (sent on a connection that was then
 * closed, and run after the next attempt) must not delete what attempt 2
 * was granted there. With one id for all attempts it did. The rollback is
 * taken from the node's MONITOR and delivered again after the grant. */
static void test_core_late_rollback_cannot_undo_a_later_grant(void **state)
{
    struct fixture *f = *state;
    /* Y holds nodes 1 and 2 (node 0 is out of its reach) for 400 ms. */
    const char *yurls[3];
    char dead[64];
    snprintf(dead, sizeof(dead), "127.0.0.1:%d", rh_free_port());
    yurls[0] = dead, yurls[1] = f->urls[1], yurls[2] = f->urls[2];
    struct lockcore_options o;
    lockcore_options_init(&o);
    o.nodes = yurls;
    o.n_nodes = 3;
    o.ttl_ms = 400;
    o.retry_count = 0;
    lockcore_client *y = NULL, *x = NULL;
    char err[256];
    assert_int_equal(lockcore_client_new(&o, &y, err, sizeof(err)), 0);
    struct lockcore_lock yl, xl;
    assert_int_equal(lockcore_acquire(y, "late:k", &yl), 0);

    redisContext *mon = monitor(f, 0);

    /* X polls: attempt 1 is granted by node 0 only, refused by 1 and 2,
     * and rolled back on node 0; attempt 2 comes after Y's TTL. */
    lockcore_options_init(&o);
    o.nodes = f->urls;
    o.n_nodes = 3;
    o.ttl_ms = 5000;
    o.wait_mode = LOCKCORE_WAIT_POLL;
    o.retry_count = 3;
    o.retry_delay_ms = 600;
    o.retry_jitter_ms = 0;
    assert_int_equal(lockcore_client_new(&o, &x, err, sizeof(err)), 0);
    assert_int_equal(lockcore_acquire(x, "late:k", &xl), 0);
    assert_int_equal(xl.attempts, 2);
    hp_sleep_ms(50); /* granted at a majority: node 0 may still be running it */

    /* The rollback: the first one-key script call on the lock's key, and
     * it comes again, late (to node 0, where it ran). */
    struct seen rb;
    assert_int_equal(monitor_next(mon, "late:k", NULL, 5, &rb), 0);
    redisFree(mon);
    redisContext *late = redisConnect("127.0.0.1", rh_port(f->rc, 0));
    assert_true(late != NULL && late->err == 0);
    redisReply *r = redisCommandArgv(late, rb.argc, (const char **)rb.argv, rb.lens);
    assert_non_null(r);
    freeReplyObject(r);
    redisFree(late);
    seen_free(&rb);

    char v[64];
    rh_get(f->rc, 0, "late:k", v, sizeof(v));
    assert_string_equal(v, xl.id);
    assert_int_equal(rh_holders(f->rc, "late:k", xl.id), 3);
    assert_int_equal(lockcore_release(x, &xl), 0);
    lockcore_client_free(x);
    lockcore_client_free(y);
}

/* An extension that reaches the nodes late (sent before a newer one,
 * with a shorter TTL) must not shorten what the newer one gave: a plain
 * lock, a reentrant hold under another, a reader. Each extension is taken
 * from node 0's MONITOR and delivered again to every node after the newer
 * one; then another client must still be refused. With TTLs set, not
 * pushed out, it was granted 1.5 s later. */
static void test_core_late_extension_cannot_shorten_a_lock(void **state)
{
    struct fixture *f = *state;
    lockcore_client *c = client(f, &(struct tuning){.ttl_ms = 5000});
    lockcore_client *other = client(f, &(struct tuning){.ttl_ms = 5000});
    struct lockcore_lock l, in, x;
    struct seen ext;

    /* A plain lock. */
    assert_int_equal(lockcore_acquire(c, "ext:p", &l), 0);
    redisContext *mon = monitor(f, 0);
    assert_int_equal(lockcore_extend(c, &l, 1000), 0);
    assert_int_equal(monitor_next(mon, "ext:p", "1000", 0, &ext), 0);
    redisFree(mon);
    assert_int_equal(lockcore_extend(c, &l, 20000), 0);
    deliver_late(f, &ext);
    seen_free(&ext);
    hp_sleep_ms(1500);
    assert_true(lockcore_remaining_ms(&l) > 10000);
    assert_int_equal(lockcore_acquire(other, "ext:p", &x), LOCKCORE_ELOCKED);
    assert_int_equal(lockcore_release(c, &l), 0);

    /* A reentrant hold, under an outer hold that then goes. */
    assert_int_equal(lockcore_reentrant_acquire(c, "ext:r", NULL, &l), 0);
    assert_int_equal(lockcore_reentrant_acquire(c, "ext:r", l.id, &in), 0);
    mon = monitor(f, 0);
    assert_int_equal(lockcore_extend(c, &in, 1000), 0);
    assert_int_equal(monitor_next(mon, "ext:r", "1000", 0, &ext), 0);
    redisFree(mon);
    assert_int_equal(lockcore_extend(c, &in, 20000), 0);
    deliver_late(f, &ext);
    seen_free(&ext);
    assert_int_equal(lockcore_release(c, &l), 0);
    hp_sleep_ms(1500);
    assert_true(lockcore_remaining_ms(&in) > 10000);
    assert_int_equal(lockcore_acquire(other, "ext:r", &x), LOCKCORE_ELOCKED);
    assert_int_equal(lockcore_release(c, &in), 0);

    /* A reader, and a writer that must wait for it. */
    assert_int_equal(lockcore_rw_acquire(c, "ext:rw", 0, &l), 0);
    mon = monitor(f, 0);
    assert_int_equal(lockcore_extend(c, &l, 1000), 0);
    assert_int_equal(monitor_next(mon, "{ext:rw}:readers", "1000", 0, &ext), 0);
    redisFree(mon);
    assert_int_equal(lockcore_extend(c, &l, 20000), 0);
    deliver_late(f, &ext);
    seen_free(&ext);
    hp_sleep_ms(1500);
    assert_true(lockcore_remaining_ms(&l) > 10000);
    assert_int_equal(lockcore_rw_acquire(other, "ext:rw", 1, &x), LOCKCORE_ELOCKED);
    assert_int_equal(lockcore_release(c, &l), 0);
    lockcore_client_free(other);
    lockcore_client_free(c);
}

/* ---- 1. keep-alive with an extension in flight when validity runs out ---- */

static void test_core_keepalive_lost_at_validity_with_extension_in_flight(void **state)
{
    struct fixture *f = *state;
    /* The case measured: TTL 1000 ms, request timeout 400 ms, every node
     * stopped. The extension goes out at 2/3 of the validity and cannot be
     * answered before it runs out. */
    lockcore_client *c = client(f, &(struct tuning){.ttl_ms = 1000, .request_timeout_ms = 400});
    struct lockcore_lock l;
    assert_int_equal(lockcore_acquire(c, "ka-spin", &l), 0);
    struct lost lost = {0};
    lockcore_keepalive *k = NULL;
    assert_int_equal(lockcore_keepalive_start(c, &l, 0, 0, on_lost, &lost, &k), 0);
    for (int i = 0; i < 3; i++)
        assert_int_equal(rh_pause(f->rc, i), 0);

    unsigned runs = 0;
    int held_past_validity = 0;
    uint64_t end = lockcore_now_ms() + 3000;
    while (lost.calls == 0 && lockcore_now_ms() < end) {
        lockcore_run(c, 1000);
        runs++;
        struct lockcore_lock cur;
        if (lockcore_keepalive_get(k, &cur) == 0 && lockcore_now_ms() >= cur.valid_until_ms)
            held_past_validity = 1;
    }
    for (int i = 0; i < 3; i++)
        assert_int_equal(rh_resume(f->rc, i), 0);
    assert_int_equal(lost.calls, 1);
    assert_int_equal(lost.rc, LOCKCORE_ELOST);
    assert_false(held_past_validity);
    /* Declared at valid_until_ms, within a few ms (timer slack). */
    assert_true(lost.at_ms >= l.valid_until_ms);
    assert_true(lost.at_ms <= l.valid_until_ms + 30);
    /* A handful of loop turns, not a spin (31,015 before the fix). */
    assert_true(runs <= 10);
    assert_non_null(strstr(lost.msg, "in flight"));
    lockcore_keepalive_stop(k);
    lockcore_client_free(c);
}

/* ---- 2. on_lost stopping another keep-alive ---- */

static void test_core_on_lost_may_stop_another_keepalive(void **state)
{
    struct fixture *f = *state;
    lockcore_client *c = client(f, &(struct tuning){.ttl_ms = 600, .request_timeout_ms = 50});
    struct lockcore_lock l1, l2;
    assert_int_equal(lockcore_acquire(c, "ka-uaf-long", &l2), 0);
    assert_int_equal(lockcore_extend(c, &l2, 5000), 0);
    assert_int_equal(lockcore_acquire(c, "ka-uaf-short", &l1), 0);
    struct lost lost1 = {0}, lost2 = {0};
    lockcore_keepalive *k1 = NULL, *k2 = NULL;
    /* k2 first: the list is newest first, so k2 is next after k1, and k2
     * is not extending when k1 is found lost (renews 1 s before its end). */
    assert_int_equal(lockcore_keepalive_start(c, &l2, 5000, 1000, on_lost, &lost2, &k2), 0);
    assert_int_equal(lockcore_keepalive_start(c, &l1, 600, 100, on_lost, &lost1, &k1), 0);
    lost1.stop_other = k2;
    /* The loop does not run until k1's validity is over, so no extension
     * of k1 is ever in flight: the loop's own check finds k1 lost at its
     * next turn, with k2 next in line. (Failing extensions would race the
     * check and often report the loss outside the walk.) */
    for (int i = 0; i < 200 && lockcore_now_ms() < l1.valid_until_ms + 20; i++)
        usleep(10 * 1000);
    uint64_t end = lockcore_now_ms() + 2000;
    while (lost1.calls == 0 && lockcore_now_ms() < end)
        lockcore_run(c, 100);
    assert_int_equal(lost1.calls, 1);
    assert_non_null(strstr(lost1.msg, "validity ran out before it could be extended"));
    /* k2 was stopped by the callback: it never reports, and freeing the
     * client after does not touch it again (ASan/valgrind watch that). */
    end = lockcore_now_ms() + 200;
    while (lockcore_now_ms() < end)
        lockcore_run(c, 50);
    assert_int_equal(lost2.calls, 0);
    lockcore_keepalive_stop(k1);
    lockcore_client_free(c);
}

/* ---- 3. client_free with operations in flight ---- */

struct restart {
    int calls;
    int codes[8];
    int restart_rc;
};

static void on_canceled_restart(lockcore_client *c, int rc, const struct lockcore_lock *l, void *arg)
{
    (void)l;
    struct restart *r = arg;
    if (r->calls < 8)
        r->codes[r->calls] = rc;
    r->calls++;
    if (rc == LOCKCORE_ECANCELED && r->calls == 1)
        r->restart_rc = lockcore_acquire_async(c, "free-restart", on_canceled_restart, r);
}

static void test_core_free_refuses_operations_started_by_canceled_callbacks(void **state)
{
    struct fixture *f = *state;
    lockcore_client *c = client(f, NULL);
    struct restart r = {0};
    assert_int_equal(lockcore_acquire_async(c, "free-restart", on_canceled_restart, &r), 0);
    lockcore_client_free(c);
    /* The callback ran once with ECANCELED; the operation it tried to start
     * was refused, so nothing leaked and no callback was promised. */
    assert_int_equal(r.calls, 1);
    assert_int_equal(r.codes[0], LOCKCORE_ECANCELED);
    assert_int_equal(r.restart_rc, LOCKCORE_ECANCELED);
}

/* ---- 4. a blocking call whose poll fails ---- */

static void test_core_failed_poll_ends_the_blocking_operation(void **state)
{
    struct fixture *f = *state;
    lockcore_client *c = client(f, NULL);
    struct lockcore_lock l;
    /* Connect first, so that the acquire goes out in the first poll turn. */
    assert_int_equal(lockcore_acquire(c, "poll-warmup", &l), 0);
    assert_int_equal(lockcore_release(c, &l), 0);

    poll_fail_errno = ENOMEM;
    int rc = lockcore_acquire(c, "poll-fails", &l);
    poll_fail_errno = 0;
    assert_int_equal(rc, -ENOMEM);
    assert_non_null(strstr(lockcore_errmsg(c), "poll"));
    /* Nothing is left in flight pointing at the returned call's stack. */
    assert_int_equal(lockcore_inflight(c), 0);
    /* And the attempt's keys were rolled back once the loop runs again. */
    for (int i = 0; i < 5; i++)
        lockcore_run(c, 20);
    for (int i = 0; i < 3; i++) {
        char v[64];
        rh_get(f->rc, i, "poll-fails", v, sizeof(v));
        assert_string_equal(v, "");
    }

    struct lockcore_node_status st[3];
    poll_fail_errno = EINVAL;
    rc = lockcore_status(c, "poll-fails", st, 3);
    poll_fail_errno = 0;
    assert_int_equal(rc, -EINVAL);
    assert_int_equal(lockcore_inflight(c), 0);
    lockcore_run(c, 20);
    lockcore_client_free(c);
}

/* ---- 5. reconnect backoff against a node that accepts and refuses ---- */

struct refuser {
    int fd;
    int port;
    int accepted;
    volatile int stop;
    pthread_t th;
};

/* Accepts every connection, says what a full Redis says, and closes it. */
static void *refuse_loop(void *arg)
{
    struct refuser *r = arg;
    static const char msg[] = "-ERR max number of clients reached\r\n";
    while (!r->stop) {
        struct pollfd p = {r->fd, POLLIN, 0};
        if (poll(&p, 1, 20) <= 0)
            continue;
        int s = accept(r->fd, NULL, NULL);
        if (s < 0)
            continue;
        r->accepted++;
        ssize_t w = write(s, msg, sizeof(msg) - 1);
        (void)w;
        close(s);
    }
    return NULL;
}

static void test_core_backoff_survives_connect_then_refuse(void **state)
{
    (void)state;
    struct refuser r = {0};
    r.fd = socket(AF_INET, SOCK_STREAM, 0);
    assert_true(r.fd >= 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    assert_int_equal(bind(r.fd, (struct sockaddr *)&a, sizeof(a)), 0);
    socklen_t al = sizeof(a);
    assert_int_equal(getsockname(r.fd, (struct sockaddr *)&a, &al), 0);
    assert_int_equal(listen(r.fd, 64), 0);
    r.port = ntohs(a.sin_port);
    assert_int_equal(pthread_create(&r.th, NULL, refuse_loop, &r), 0);

    char url[64];
    snprintf(url, sizeof(url), "127.0.0.1:%d", r.port);
    const char *nodes[] = {url};
    struct lockcore_options o;
    lockcore_options_init(&o);
    o.nodes = nodes;
    o.n_nodes = 1;
    o.retry_count = -1;
    o.retry_delay_ms = 5;
    o.retry_jitter_ms = 0;
    o.wait_ms = 1500;
    lockcore_client *c = NULL;
    char err[256];
    assert_int_equal(lockcore_client_new(&o, &c, err, sizeof(err)), 0);
    struct lockcore_lock l;
    int rc = lockcore_acquire(c, "refused", &l);
    r.stop = 1;
    pthread_join(r.th, NULL);
    close(r.fd);
    assert_true(rc == LOCKCORE_ENOQUORUM || rc == LOCKCORE_EPROTO);
    /* Backoff 10, 20, 40, ... 1000 ms: about 8 connections in 1.5 s; it
     * was one every 10 ms (~100/s) when a TCP connect reset it. */
    assert_true(r.accepted >= 2);
    assert_true(r.accepted <= 15);
    lockcore_client_free(c);
}

/* ---- hostile nodes: replies bigger than lockcore can use ---- */

enum hostile { HOSTILE_ARRAY, HOSTILE_BULK, HOSTILE_ENDLESS_LINE };

struct hostile_node {
    int fd;
    enum hostile mode;
    volatile int stop;
    pthread_t th;
};

/* Answers every connection with one hostile reply, then keeps streaming
 * filler for up to 3 s or until the client hangs up. */
static void *hostile_loop(void *arg)
{
    struct hostile_node *h = arg;
    static const char array[] = "*2147483647\r\n";
    static const char bulk[] = "$1073741824\r\n";
    static const char line[] = "+";
    char filler[16384];
    memset(filler, 'x', sizeof(filler));
    while (!h->stop) {
        struct pollfd p = {h->fd, POLLIN, 0};
        if (poll(&p, 1, 20) <= 0)
            continue;
        int s = accept(h->fd, NULL, NULL);
        if (s < 0)
            continue;
        const char *head = h->mode == HOSTILE_ARRAY ? array : h->mode == HOSTILE_BULK ? bulk : line;
        ssize_t w = send(s, head, strlen(head), MSG_NOSIGNAL);
        long long end = hp_now_ms() + 3000;
        while (w >= 0 && h->mode != HOSTILE_ARRAY && !h->stop && hp_now_ms() < end)
            w = send(s, filler, sizeof(filler), MSG_NOSIGNAL);
        close(s);
    }
    return NULL;
}

static long rss_kb(void)
{
    FILE *fp = fopen("/proc/self/statm", "r");
    long size = 0, resident = 0;
    if (fp != NULL) {
        if (fscanf(fp, "%ld %ld", &size, &resident) != 2)
            resident = 0;
        fclose(fp);
    }
    return resident * (sysconf(_SC_PAGESIZE) / 1024);
}

static void test_core_hostile_replies_fail_the_node_not_the_memory(void **state)
{
    (void)state;
    for (int mode = HOSTILE_ARRAY; mode <= HOSTILE_ENDLESS_LINE; mode++) {
        struct hostile_node h = {.mode = (enum hostile)mode};
        h.fd = socket(AF_INET, SOCK_STREAM, 0);
        assert_true(h.fd >= 0);
        struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
        assert_int_equal(bind(h.fd, (struct sockaddr *)&a, sizeof(a)), 0);
        socklen_t al = sizeof(a);
        assert_int_equal(getsockname(h.fd, (struct sockaddr *)&a, &al), 0);
        assert_int_equal(listen(h.fd, 16), 0);
        assert_int_equal(pthread_create(&h.th, NULL, hostile_loop, &h), 0);

        char url[64];
        snprintf(url, sizeof(url), "127.0.0.1:%d", ntohs(a.sin_port));
        const char *nodes[] = {url};
        struct lockcore_options o;
        lockcore_options_init(&o);
        o.nodes = nodes;
        o.n_nodes = 1;
        o.retry_count = 0;
        o.request_timeout_ms = 500;
        lockcore_client *c = NULL;
        char err[256];
        assert_int_equal(lockcore_client_new(&o, &c, err, sizeof(err)), 0);
        long before = rss_kb();
        uint64_t t0 = lockcore_now_ms();
        struct lockcore_lock l;
        int rc = lockcore_acquire(c, "hostile", &l);
        uint64_t took = lockcore_now_ms() - t0;
        long grew = rss_kb() - before;
        h.stop = 1;
        pthread_join(h.th, NULL);
        close(h.fd);
        /* A protocol error for that node, within the step's deadline (plus
         * the connect budget), and no big allocation (it took 2 GiB and more
         * before the reply builders were bounded). */
        assert_int_equal(rc, LOCKCORE_EPROTO);
        assert_non_null(strstr(lockcore_errmsg(c), "reply refused"));
        assert_true(took <= 500 + 200 + 300);
        assert_true(grew < 16 * 1024);
        lockcore_client_free(c);
    }
}

/* ---- 6. close-on-exec ---- */

static void test_core_node_sockets_are_close_on_exec(void **state)
{
    struct fixture *f = *state;
    lockcore_client *c = client(f, NULL);
    struct lockcore_lock l;
    assert_int_equal(lockcore_acquire(c, "cloexec", &l), 0);
    struct pollfd fds[LOCKCORE_NODES_MAX];
    int timeout;
    int n = lockcore_pollfds(c, fds, LOCKCORE_NODES_MAX, &timeout);
    assert_int_equal(n, 3);
    for (int i = 0; i < n; i++) {
        int fl = fcntl(fds[i].fd, F_GETFD);
        assert_true(fl >= 0);
        assert_true(fl & FD_CLOEXEC);
    }
    assert_int_equal(lockcore_release(c, &l), 0);
    lockcore_client_free(c);
}

/* ---- 7. host names resolve once, at creation ---- */

static void test_core_host_names_resolve_only_at_creation(void **state)
{
    struct fixture *f = *state;
    char urls[3][64];
    const char *nodes[3];
    for (int i = 0; i < 3; i++) {
        snprintf(urls[i], sizeof(urls[i]), "localhost:%d", rh_port(f->rc, i));
        nodes[i] = urls[i];
    }
    struct lockcore_options o;
    lockcore_options_init(&o);
    o.nodes = nodes;
    o.n_nodes = 3;
    o.retry_count = 0;
    lockcore_client *c = NULL;
    char err[256];
    name_lookups = 0;
    assert_int_equal(lockcore_client_new(&o, &c, err, sizeof(err)), 0);
    assert_true(name_lookups >= 3);
    name_lookups = 0;
    struct lockcore_lock l;
    assert_int_equal(lockcore_acquire(c, "dns", &l), 0);
    assert_int_equal(lockcore_release(c, &l), 0);
    /* A reconnect after a node restart does not look the name up either. */
    assert_int_equal(rh_restart(f->rc, 0, 1), 0);
    int reached_all = 0;
    struct lockcore_node_status st[3];
    for (int i = 0; i < 50 && !reached_all; i++) {
        assert_int_equal(lockcore_acquire(c, "dns", &l), 0);
        assert_int_equal(lockcore_release(c, &l), 0);
        assert_int_equal(lockcore_status(c, "dns", st, 3), 3);
        reached_all = st[0].reachable && st[1].reachable && st[2].reachable;
        lockcore_run(c, 20);
    }
    assert_true(reached_all); /* node 0 was reconnected */
    assert_int_equal(name_lookups, 0);
    assert_non_null(strstr(st[1].node, "localhost"));
    lockcore_client_free(c);
}

/* ---- 9. keepalive_start checks its arguments ---- */

static void test_core_keepalive_start_checks_its_arguments(void **state)
{
    struct fixture *f = *state;
    lockcore_client *c = client(f, NULL);
    struct lockcore_lock l;
    assert_int_equal(lockcore_acquire(c, "ka-args", &l), 0);
    lockcore_keepalive *k = NULL;
    struct lockcore_lock bad = l;
    memcpy(bad.id, "not-hex-not-hex-not-hex-not-hex-not-hex!", LOCKCORE_ID_LEN);
    assert_int_equal(lockcore_keepalive_start(c, &bad, 0, 0, NULL, NULL, &k), -EINVAL);
    assert_non_null(strstr(lockcore_errmsg(c), "id"));
    bad = l;
    bad.resource[0] = '\0';
    assert_int_equal(lockcore_keepalive_start(c, &bad, 0, 0, NULL, NULL, &k), -EINVAL);
    /* A TTL no extension can meet (at or below the request timeout), or
     * above 24 h. */
    assert_int_equal(lockcore_keepalive_start(c, &l, 50, 10, NULL, NULL, &k), -EINVAL);
    assert_non_null(strstr(lockcore_errmsg(c), "ttl"));
    assert_int_equal(lockcore_keepalive_start(c, &l, 25ULL * 3600 * 1000, 0, NULL, NULL, &k), -EINVAL);
    assert_int_equal(lockcore_keepalive_start(c, &l, 1000, 1000, NULL, NULL, &k), -EINVAL);
    assert_int_equal(lockcore_keepalive_start(c, NULL, 0, 0, NULL, NULL, &k), -EINVAL);
    assert_null(k);
    /* A lock known only by its id: extend it first. */
    struct lockcore_lock byid;
    assert_int_equal(lockcore_lock_from_id(c, "ka-args", l.id, &byid), 0);
    assert_int_equal(lockcore_keepalive_start(c, &byid, 0, 0, NULL, NULL, &k), LOCKCORE_ELOST);
    assert_int_equal(lockcore_keepalive_start(c, &l, 0, 0, NULL, NULL, &k), 0);
    lockcore_keepalive_stop(k);
    assert_int_equal(lockcore_release(c, &l), 0);
    lockcore_client_free(c);
}

/* ---- 10. the fence outlives a lock kept alive ---- */

/* The bucket never expires; in transition mode the old layout's fence key,
 * which does, is kept alive by the extensions. A node that forgot either
 * gets the lock's token back at the next extension. */
static void test_core_extension_keeps_the_fence_key_alive(void **state)
{
    struct fixture *f = *state;
    lockcore_client *c =
        client(f, &(struct tuning){.ttl_ms = 500, .fence_idle_ms = 1000, .fence_transition = 1});
    struct lockcore_lock l;
    assert_int_equal(lockcore_acquire(c, "fence-idle", &l), 0);
    lockcore_keepalive *k = NULL;
    assert_int_equal(lockcore_keepalive_start(c, &l, 0, 0, NULL, NULL, &k), 0);
    /* Held for three fence idle periods. */
    uint64_t end = lockcore_now_ms() + 3000;
    while (lockcore_now_ms() < end)
        lockcore_run(c, 100);
    assert_int_equal(lockcore_keepalive_get(k, &l), 0);
    char tok[32];
    snprintf(tok, sizeof(tok), "%llu", (unsigned long long)l.token);
    /* Every node that holds the lock holds the fence too (with a 50 ms
     * request timeout, a slow node may have missed the grant). */
    unsigned holding = rh_holders(f->rc, "fence-idle", l.id);
    assert_true(holding >= 2);
    assert_int_equal(rh_holders(f->rc, "{fence-idle}:fence", tok), holding);
    unsigned in_bucket = 0;
    for (int i = 0; i < 3; i++)
        in_bucket += tf_bucket(f->rc, i, "", "fence-idle") == l.token;
    assert_int_equal(in_bucket, holding);
    /* A node that forgot the fence gets the lock's token back at the next
     * extension ("set if greater" of a token a majority accepted). */
    int forgot = 0;
    char v[64];
    for (rh_get(f->rc, forgot, "fence-idle", v, sizeof(v)); strcmp(v, l.id) != 0 && forgot < 2;)
        rh_get(f->rc, ++forgot, "fence-idle", v, sizeof(v));
    redisReply *r = rh_command(f->rc, forgot, "DEL %s", "{fence-idle}:fence");
    assert_non_null(r);
    freeReplyObject(r);
    tf_set_bucket(f->rc, forgot, "", "fence-idle", 0);
    assert_int_equal(lockcore_extend(c, &l, 0), 0);
    /* The extension returns at a quorum; a status goes behind it on every
     * connection and waits for every node, so each node has run it. */
    struct lockcore_node_status st[3];
    assert_int_equal(lockcore_status(c, "fence-idle", st, 3), 3);
    assert_int_equal(rh_holders(f->rc, "{fence-idle}:fence", tok), holding);
    long long pttl = rh_pttl(f->rc, forgot, "{fence-idle}:fence");
    assert_true(pttl > 500 && pttl <= 1000);
    assert_true(tf_bucket(f->rc, forgot, "", "fence-idle") == l.token);
    lockcore_keepalive_stop(k);
    assert_int_equal(lockcore_release(c, &l), 0);
    lockcore_client_free(c);
}

/* ---- holder info, refusal messages, locks from ids, counts on failure ---- */

static void test_core_holder_info_lives_and_dies_with_the_lock(void **state)
{
    struct fixture *f = *state;
    lockcore_client *c = client(f, &(struct tuning){.ttl_ms = 5000, .holder_info = "{\"pid\":42}"});
    struct lockcore_lock l;
    assert_int_equal(lockcore_acquire(c, "info", &l), 0);
    /* The status goes behind the acquire on each connection: every node
     * has run the acquire when it answers. */
    struct lockcore_node_status st[3];
    assert_int_equal(lockcore_status(c, "info", st, 3), 3);
    for (int i = 0; i < 3; i++) {
        assert_string_equal(st[i].info, "{\"pid\":42}");
        assert_string_equal(st[i].holder, l.id);
    }
    assert_int_equal(rh_holders(f->rc, "{info}:holder", "{\"pid\":42}"), 3);
    assert_int_equal(rh_holders(f->rc, "info", l.id), 3); /* the lock key still holds the id */
    long long pttl = rh_pttl(f->rc, 0, "{info}:holder");
    assert_true(pttl > 4000 && pttl <= 5000);
    assert_int_equal(lockcore_extend(c, &l, 20000), 0);
    assert_int_equal(lockcore_status(c, "info", st, 3), 3);
    assert_true(rh_pttl(f->rc, 2, "{info}:holder") > 15000);

    /* A second client is refused and told who holds it; the counts add up
     * to the nodes. */
    lockcore_client *c2 = client(f, NULL);
    struct lockcore_lock l2;
    assert_int_equal(lockcore_acquire(c2, "info", &l2), LOCKCORE_ELOCKED);
    const char *msg = lockcore_errmsg(c2);
    char prefix[13];
    memcpy(prefix, l.id, 12);
    prefix[12] = '\0';
    assert_non_null(strstr(msg, prefix));
    unsigned yes, n, q, no, net, err, open;
    const char *p = strstr(msg, "': ");
    assert_non_null(p);
    assert_int_equal(sscanf(p,
                            "': %u of %u nodes agreed (quorum %u): %u refused, %u unreachable, %u errors, %u",
                            &yes, &n, &q, &no, &net, &err, &open),
                     7);
    assert_int_equal(yes + no + net + err + open, n);
    assert_int_equal(n, 3);
    /* Its failed acquire still reports the counts, with no id. */
    assert_int_equal(l2.nodes, 3);
    assert_int_equal(l2.nodes_ok, 0);
    assert_string_equal(l2.id, "");
    assert_int_equal(l2.token, 0);

    assert_int_equal(lockcore_release(c, &l), 0);
    assert_int_equal(rh_holders(f->rc, "{info}:holder", "{\"pid\":42}"), 0);
    lockcore_client_free(c2);
    lockcore_client_free(c);
}

static void test_core_lock_from_id_extends_and_releases(void **state)
{
    struct fixture *f = *state;
    lockcore_client *c = client(f, NULL);
    lockcore_client *c2 = client(f, NULL);
    struct lockcore_lock l, byid;
    assert_int_equal(lockcore_acquire(c, "byid", &l), 0);
    assert_int_equal(lockcore_lock_from_id(c2, "byid", "xyz", &byid), -EINVAL);
    assert_int_equal(lockcore_lock_from_id(c2, "", l.id, &byid), -EINVAL);
    assert_int_equal(lockcore_lock_from_id(c2, "byid", l.id, &byid), 0);
    assert_int_equal(lockcore_remaining_ms(&byid), 0);
    assert_true(byid.flags & LOCKCORE_LOCK_FROM_ID);
    assert_int_equal(lockcore_nodes(c2), 3);
    assert_int_equal(lockcore_quorum(c2), 2);
    /* The nodes decide: extended (validity known from then on). */
    assert_int_equal(lockcore_extend(c2, &byid, 0), 0);
    assert_true(byid.nodes_ok >= 2);
    assert_false(byid.flags & LOCKCORE_LOCK_FROM_ID);
    assert_true(lockcore_remaining_ms(&byid) > 0);
    assert_int_equal(lockcore_release(c2, &byid), 0);
    assert_int_equal(byid.nodes_ok, 3); /* a release waits for every node */
    /* Extending a lock nobody holds any more: ELOST, and nodes_ok says
     * that no node extended it (it kept the old count before). */
    assert_int_equal(lockcore_extend(c, &l, 0), LOCKCORE_ELOST);
    assert_int_equal(l.nodes_ok, 0);
    lockcore_client_free(c2);
    lockcore_client_free(c);
}

/* ---- the callback contract ---- */

struct contract {
    int blocking_rc;
    int run_rc;
    int calls;
    int free_client;
};

static void on_contract(lockcore_client *c, int rc, const struct lockcore_lock *l, void *arg)
{
    (void)rc, (void)l;
    struct contract *k = arg;
    struct lockcore_lock tmp;
    k->calls++;
    k->blocking_rc = lockcore_acquire(c, "contract-inner", &tmp);
    k->run_rc = lockcore_run(c, 0);
    if (k->free_client)
        lockcore_client_free(c); /* deferred to the end of the loop's turn */
}

static void on_code(lockcore_client *c, int rc, const struct lockcore_lock *l, void *arg)
{
    (void)c, (void)l;
    *(int *)arg = rc;
}

static void test_core_callbacks_follow_the_contract(void **state)
{
    struct fixture *f = *state;
    lockcore_client *c = client(f, NULL);
    struct contract k = {0};
    assert_int_equal(lockcore_acquire_async(c, "contract", on_contract, &k), 0);
    uint64_t end = lockcore_now_ms() + 2000;
    while (k.calls == 0 && lockcore_now_ms() < end)
        lockcore_run(c, 100);
    assert_int_equal(k.calls, 1);
    assert_int_equal(k.blocking_rc, -EDEADLK);
    assert_int_equal(k.run_rc, -EDEADLK);
    assert_int_equal(lockcore_inflight(c), 0);

    lockcore_client_free(c);

    /* A callback frees the client: the loop finishes its turn, frees it,
     * and returns; an operation still in flight (waiting to retry a lock
     * another client holds) ends with ECANCELED, its callback run. */
    c = client(f, &(struct tuning){.retry_count = 3});
    lockcore_client *holder = client(f, NULL);
    struct lockcore_lock held;
    assert_int_equal(lockcore_acquire(holder, "contract-held", &held), 0);
    int waiting_rc = 1;
    assert_int_equal(lockcore_acquire_async(c, "contract-held", on_code, &waiting_rc), 0);
    struct contract k2 = {.free_client = 1};
    assert_int_equal(lockcore_acquire_async(c, "contract-2", on_contract, &k2), 0);
    end = lockcore_now_ms() + 2000;
    while (k2.calls == 0 && lockcore_now_ms() < end)
        lockcore_run(c, 100);
    /* c is gone now: the turn that ran k2's callback freed it. */
    assert_int_equal(k2.calls, 1);
    assert_int_equal(waiting_rc, LOCKCORE_ECANCELED);
    assert_int_equal(lockcore_release(holder, &held), 0);
    lockcore_client_free(holder);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_core_late_rollback_cannot_undo_a_later_grant, setup3, teardown),
        cmocka_unit_test_setup_teardown(test_core_late_extension_cannot_shorten_a_lock, setup3, teardown),
        cmocka_unit_test_setup_teardown(test_core_keepalive_lost_at_validity_with_extension_in_flight, setup3,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_core_on_lost_may_stop_another_keepalive, setup3, teardown),
        cmocka_unit_test_setup_teardown(test_core_free_refuses_operations_started_by_canceled_callbacks,
                                        setup3, teardown),
        cmocka_unit_test_setup_teardown(test_core_failed_poll_ends_the_blocking_operation, setup3, teardown),
        cmocka_unit_test(test_core_backoff_survives_connect_then_refuse),
        cmocka_unit_test(test_core_hostile_replies_fail_the_node_not_the_memory),
        cmocka_unit_test_setup_teardown(test_core_node_sockets_are_close_on_exec, setup3, teardown),
        cmocka_unit_test_setup_teardown(test_core_host_names_resolve_only_at_creation, setup3, teardown),
        cmocka_unit_test_setup_teardown(test_core_keepalive_start_checks_its_arguments, setup3, teardown),
        cmocka_unit_test_setup_teardown(test_core_extension_keeps_the_fence_key_alive, setup3, teardown),
        cmocka_unit_test_setup_teardown(test_core_holder_info_lives_and_dies_with_the_lock, setup3, teardown),
        cmocka_unit_test_setup_teardown(test_core_lock_from_id_extends_and_releases, setup3, teardown),
        cmocka_unit_test_setup_teardown(test_core_callbacks_follow_the_contract, setup3, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
