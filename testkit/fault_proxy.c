/* A fault-injecting TCP proxy: one thread, poll(), a queue of timed chunks
 * per direction of each connection. */
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "fault_proxy.h"
#include "proc.h"

#define CONNS_MAX 64
#define CHUNK 16384

struct chunk {
    struct chunk *next;
    long long due_ms;
    size_t len, off;
    char data[];
};

struct pipe_dir {
    int from, to;
    struct chunk *head, *tail;
    int eof; /* `from` closed: close `to` once the queue drains */
};

struct conn {
    int used;
    /* The client side was closed by fp_reset_late: what was read from the
     * client still goes to the server when due (no hold applies), the
     * server's answers are read and thrown away. */
    int orphan;
    struct pipe_dir d[2]; /* 0: up (client -> server), 1: down */
};

struct fp_proxy {
    int listen_fd, port, target_port;
    int wake[2];
    pthread_t thread;
    atomic_int stop, accepted;
    /* Resets asked for (fp_reset, fp_reset_late) and done, so that the
     * caller can wait for its own: a request number, the last done. */
    atomic_int reset_req, reset_done, late_req, late_done, late_delay_ms;
    int reset_seen, late_seen; /* the proxy thread's own */
    atomic_int delay_ms[2], hold[2], drop[2];
    struct conn conns[CONNS_MAX];
};

static void poke(struct fp_proxy *p)
{
    char b = 1;
    ssize_t w = write(p->wake[1], &b, 1);
    (void)w;
}

static void dir_free(struct pipe_dir *d)
{
    struct chunk *c = d->head;
    while (c) {
        struct chunk *n = c->next;
        free(c);
        c = n;
    }
    d->head = d->tail = NULL;
}

static void conn_close(struct conn *c)
{
    if (!c->used)
        return;
    if (c->d[0].from >= 0)
        close(c->d[0].from);
    close(c->d[0].to);
    dir_free(&c->d[0]);
    dir_free(&c->d[1]);
    c->used = 0;
    c->orphan = 0;
}

/* Close the client side of c; what it sent goes on delay_ms from now. */
static void conn_orphan(struct conn *c, int delay_ms)
{
    if (!c->used || c->orphan)
        return;
    close(c->d[0].from);
    c->d[0].from = c->d[1].to = -1;
    c->d[0].eof = 1;
    c->orphan = 1;
    long long due = hp_now_ms() + delay_ms;
    for (struct chunk *k = c->d[0].head; k; k = k->next)
        if (k->due_ms < due)
            k->due_ms = due;
    dir_free(&c->d[1]);
    if (c->d[0].head == NULL)
        conn_close(c); /* nothing in flight */
}

/* Is direction k of c held now? Bytes of a closed client are not. */
static int held(struct fp_proxy *p, const struct conn *c, int k)
{
    return !c->orphan && atomic_load(&p->hold[k]);
}

static int connect_target(int port)
{
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return -1;
    struct sockaddr_in a = {
        .sin_family = AF_INET, .sin_port = htons((uint16_t)port), .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    if (connect(fd, (struct sockaddr *)&a, sizeof(a)) < 0) {
        close(fd);
        return -1;
    }
    return fd;
}

static void nodelay_nonblock(int fd)
{
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
}

static void on_accept(struct fp_proxy *p)
{
    int cfd = accept4(p->listen_fd, NULL, NULL, SOCK_CLOEXEC);
    if (cfd < 0)
        return;
    int sfd = connect_target(p->target_port);
    struct conn *slot = NULL;
    for (int i = 0; i < CONNS_MAX && !slot; i++)
        if (!p->conns[i].used)
            slot = &p->conns[i];
    if (sfd < 0 || slot == NULL) {
        close(cfd);
        if (sfd >= 0)
            close(sfd);
        return;
    }
    nodelay_nonblock(cfd);
    nodelay_nonblock(sfd);
    memset(slot, 0, sizeof(*slot));
    slot->used = 1;
    slot->d[0].from = cfd;
    slot->d[0].to = sfd;
    slot->d[1].from = sfd;
    slot->d[1].to = cfd;
    atomic_fetch_add(&p->accepted, 1);
}

/* Read what is there; queue it with its due time. Returns -1 to close. */
static int pump_in(struct fp_proxy *p, struct pipe_dir *d, int k)
{
    char buf[CHUNK];
    ssize_t r = read(d->from, buf, sizeof(buf));
    if (r == 0) {
        d->eof = 1;
        return 0;
    }
    if (r < 0)
        return errno == EAGAIN || errno == EINTR ? 0 : -1;
    if (atomic_load(&p->drop[k]) || d->to < 0)
        return 0; /* dropped, or an answer to a client that is gone */
    struct chunk *c = malloc(sizeof(*c) + (size_t)r);
    if (c == NULL)
        return -1;
    c->next = NULL;
    c->due_ms = hp_now_ms() + atomic_load(&p->delay_ms[k]);
    c->len = (size_t)r;
    c->off = 0;
    memcpy(c->data, buf, (size_t)r);
    if (d->tail)
        d->tail->next = c;
    else
        d->head = c;
    d->tail = c;
    return 0;
}

/* Write every chunk that is due. Returns -1 to close. */
static int pump_out(struct fp_proxy *p, struct conn *c, int k, long long now)
{
    struct pipe_dir *d = &c->d[k];
    if (held(p, c, k))
        return 0;
    while (d->head && d->head->due_ms <= now) {
        struct chunk *ch = d->head;
        /* send, not write: a peer that closed must not raise SIGPIPE in
         * the process that runs the proxy. */
        ssize_t w = send(d->to, ch->data + ch->off, ch->len - ch->off, MSG_NOSIGNAL);
        if (w < 0)
            return errno == EAGAIN || errno == EINTR ? 0 : -1;
        ch->off += (size_t)w;
        if (ch->off < ch->len)
            return 0;
        d->head = ch->next;
        if (d->head == NULL)
            d->tail = NULL;
        free(ch);
    }
    if (d->head == NULL && d->eof)
        return -1;
    return 0;
}

static void *run(void *arg)
{
    struct fp_proxy *p = arg;
    struct pollfd fds[2 + 2 * CONNS_MAX];
    int owner[2 + 2 * CONNS_MAX];
    while (!atomic_load(&p->stop)) {
        int req = atomic_load(&p->reset_req);
        if (req != p->reset_seen) {
            for (int i = 0; i < CONNS_MAX; i++)
                conn_close(&p->conns[i]);
            p->reset_seen = req;
            atomic_store(&p->reset_done, req);
        }
        req = atomic_load(&p->late_req);
        if (req != p->late_seen) {
            for (int i = 0; i < CONNS_MAX; i++)
                conn_orphan(&p->conns[i], atomic_load(&p->late_delay_ms));
            p->late_seen = req;
            atomic_store(&p->late_done, req);
        }
        long long now = hp_now_ms();
        int timeout = 50;
        size_t n = 0;
        fds[n++] = (struct pollfd){.fd = p->listen_fd, .events = POLLIN};
        fds[n++] = (struct pollfd){.fd = p->wake[0], .events = POLLIN};
        for (int i = 0; i < CONNS_MAX; i++) {
            struct conn *c = &p->conns[i];
            if (!c->used)
                continue;
            for (int k = 0; k < 2; k++) {
                struct pipe_dir *d = &c->d[k];
                short ev = d->eof ? 0 : POLLIN;
                if (d->head && !held(p, c, k)) {
                    if (d->head->due_ms <= now)
                        ev |= POLLOUT; /* on d->to: handled below */
                    else if (d->head->due_ms - now < timeout)
                        timeout = (int)(d->head->due_ms - now);
                }
                owner[n] = i * 2 + k;
                fds[n++] = (struct pollfd){.fd = d->from, .events = (short)(ev & POLLIN)};
                if (ev & POLLOUT)
                    timeout = 0;
            }
        }
        if (poll(fds, n, timeout) < 0 && errno != EINTR)
            break;
        if (fds[1].revents & POLLIN) {
            char b[64];
            ssize_t r = read(p->wake[0], b, sizeof(b));
            (void)r;
        }
        if (fds[0].revents & POLLIN)
            on_accept(p);
        for (size_t j = 2; j < n; j++) {
            struct conn *c = &p->conns[owner[j] / 2];
            int k = owner[j] % 2;
            if (c->used && (fds[j].revents & (POLLIN | POLLHUP | POLLERR)) && pump_in(p, &c->d[k], k) < 0)
                conn_close(c);
        }
        now = hp_now_ms();
        for (int i = 0; i < CONNS_MAX; i++) {
            struct conn *c = &p->conns[i];
            for (int k = 0; k < 2 && c->used; k++)
                if (pump_out(p, c, k, now) < 0)
                    conn_close(c);
        }
    }
    for (int i = 0; i < CONNS_MAX; i++)
        conn_close(&p->conns[i]);
    return NULL;
}

int fp_new(int target_port, struct fp_proxy **out)
{
    if (target_port <= 0 || out == NULL)
        return -EINVAL;
    struct fp_proxy *p = calloc(1, sizeof(*p));
    if (p == NULL)
        return -ENOMEM;
    p->target_port = target_port;
    p->listen_fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t len = sizeof(a);
    if (p->listen_fd < 0 || bind(p->listen_fd, (struct sockaddr *)&a, sizeof(a)) < 0 ||
        listen(p->listen_fd, 64) < 0 || getsockname(p->listen_fd, (struct sockaddr *)&a, &len) < 0 ||
        pipe2(p->wake, O_CLOEXEC | O_NONBLOCK) < 0) {
        int e = errno;
        if (p->listen_fd >= 0)
            close(p->listen_fd);
        free(p);
        return -e;
    }
    p->port = ntohs(a.sin_port);
    int rc = pthread_create(&p->thread, NULL, run, p);
    if (rc != 0) {
        close(p->listen_fd);
        close(p->wake[0]);
        close(p->wake[1]);
        free(p);
        return -rc;
    }
    *out = p;
    return 0;
}

void fp_free(struct fp_proxy *p)
{
    if (p == NULL)
        return;
    atomic_store(&p->stop, 1);
    poke(p);
    pthread_join(p->thread, NULL);
    close(p->listen_fd);
    close(p->wake[0]);
    close(p->wake[1]);
    free(p);
}

int fp_port(const struct fp_proxy *p)
{
    return p ? p->port : -1;
}

static void set_both(struct fp_proxy *p, atomic_int *v, enum fp_dir dir, int val)
{
    if (dir & FP_UP)
        atomic_store(&v[0], val);
    if (dir & FP_DOWN)
        atomic_store(&v[1], val);
    poke(p);
}

void fp_set_delay(struct fp_proxy *p, enum fp_dir dir, int ms)
{
    if (p)
        set_both(p, p->delay_ms, dir, ms < 0 ? 0 : ms);
}

void fp_set_hold(struct fp_proxy *p, enum fp_dir dir, int on)
{
    if (p)
        set_both(p, p->hold, dir, on != 0);
}

void fp_set_drop(struct fp_proxy *p, enum fp_dir dir, int on)
{
    if (p)
        set_both(p, p->drop, dir, on != 0);
}

/* Ask the proxy thread for a reset (req, done: fp_reset's or
 * fp_reset_late's counters) and wait until it has done it, up to 2 s. */
static void reset_and_wait(struct fp_proxy *p, atomic_int *req, atomic_int *done)
{
    int mine = atomic_fetch_add(req, 1) + 1;
    poke(p);
    long long until = hp_now_ms() + 2000;
    while (atomic_load(done) - mine < 0 && hp_now_ms() < until)
        hp_sleep_ms(1);
}

void fp_reset(struct fp_proxy *p)
{
    if (p != NULL)
        reset_and_wait(p, &p->reset_req, &p->reset_done);
}

void fp_reset_late(struct fp_proxy *p, int delay_ms)
{
    if (p == NULL)
        return;
    atomic_store(&p->late_delay_ms, delay_ms < 0 ? 0 : delay_ms);
    reset_and_wait(p, &p->late_req, &p->late_done);
}

int fp_accepted(const struct fp_proxy *p)
{
    return p ? atomic_load(&((struct fp_proxy *)p)->accepted) : 0;
}
