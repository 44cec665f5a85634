/*
 * One non-blocking hiredis connection per node. Commands of many operations
 * are appended to the connection's output buffer and written together; the
 * replies come back in the same order, so a FIFO of `struct pending` says
 * whose each reply is. An operation that moved on (decided, retried, ended)
 * leaves its entries behind with an old serial: their replies are read and
 * dropped, and never reach the next operation.
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include <hiredis/sds.h>

#include "internal.h"
#include "lockcore_lua.h"

/* A node whose oldest reply is this late is treated as dead: its connection
 * is closed and re-opened later, so a hung server cannot grow the FIFO
 * without bound. Individual steps time out much earlier (request_timeout). */
static uint64_t stall_ms(const lockcore_client *c)
{
    uint64_t s = c->o.request_timeout_ms * 4;
    return s < 1000 ? 1000 : s;
}

void lockcore__node_init(lockcore_client *c, struct node *n, unsigned index)
{
    (void)c;
    n->index = index;
    n->state = NODE_DOWN;
    n->ctx = NULL;
    n->next_attempt_ms = 0;
    n->backoff_ms = 0;
    n->err[0] = '\0';
    n->err_kind = FAIL_NET;
    n->q = NULL;
    n->q_head = n->q_len = n->q_cap = 0;
    if (strchr(n->addr.host, ':') != NULL)
        lockcore__fmt(n->name, sizeof(n->name), "[%s]:%d", n->addr.host, n->addr.port);
    else
        lockcore__fmt(n->name, sizeof(n->name), "%s:%d", n->addr.host, n->addr.port);
}

static int q_push(struct node *n, const struct pending *p)
{
    if (n->q_len == n->q_cap) {
        size_t cap = n->q_cap ? n->q_cap * 2 : 64;
        struct pending *q = malloc(cap * sizeof(*q));
        if (q == NULL)
            return -ENOMEM;
        for (size_t i = 0; i < n->q_len; i++)
            q[i] = n->q[(n->q_head + i) % n->q_cap];
        free(n->q);
        n->q = q;
        n->q_head = 0;
        n->q_cap = cap;
    }
    n->q[(n->q_head + n->q_len) % n->q_cap] = *p;
    n->q_len++;
    return 0;
}

static int q_pop(struct node *n, struct pending *out)
{
    if (n->q_len == 0)
        return 0;
    *out = n->q[n->q_head];
    n->q_head = (n->q_head + 1) % n->q_cap;
    n->q_len--;
    return 1;
}

static int live(const struct pending *p)
{
    return p->op != NULL && p->op->serial == p->serial;
}

void lockcore__node_close(lockcore_client *c, struct node *n, enum fail_kind kind, const char *why)
{
    lockcore__tls_free(n);
    if (n->ctx != NULL) {
        redisFree(n->ctx);
        n->ctx = NULL;
    }
    n->state = NODE_DOWN;
    n->err_kind = kind;
    lockcore__fmt(n->err, sizeof(n->err), "%s", why);
    n->backoff_ms = n->backoff_ms ? n->backoff_ms * 2 : c->o.reconnect_min_ms;
    if (n->backoff_ms > c->o.reconnect_max_ms)
        n->backoff_ms = c->o.reconnect_max_ms;
    uint64_t now = lockcore_now_ms();
    n->next_attempt_ms = now + n->backoff_ms;

    /* Detach the FIFO first: failing an operation may make it send to other
     * nodes (or find this one down) while we walk the old entries. */
    struct pending *q = n->q;
    size_t head = n->q_head, len = n->q_len, cap = n->q_cap;
    n->q = NULL;
    n->q_head = n->q_len = n->q_cap = 0;
    for (size_t i = 0; i < len; i++) {
        struct pending *p = &q[(head + i) % cap];
        if (live(p))
            lockcore__op_node_failed(p->op, n->index, kind, n->err, now);
    }
    free(q);
}

static void queue_setup(lockcore_client *c, struct node *n, uint64_t now)
{
    const char *argv[3];
    size_t lens[3];
    if (n->addr.pass[0] != '\0') {
        int argc = 0;
        argv[argc++] = "AUTH";
        if (n->addr.user[0] != '\0')
            argv[argc++] = n->addr.user;
        argv[argc++] = n->addr.pass;
        for (int i = 0; i < argc; i++)
            lens[i] = strlen(argv[i]);
        lockcore__node_send(c, n, argc, argv, lens, NULL, STEP_AUTH, 0, now);
    }
    if (n->sub) {
        lockcore__notify_setup(c, n, now); /* channels are global: no SELECT */
        return;
    }
    if (n->addr.db != 0) {
        char db[16];
        lockcore__fmt(db, sizeof(db), "%d", n->addr.db);
        argv[0] = "SELECT";
        argv[1] = db;
        lens[0] = 6;
        lens[1] = strlen(db);
        lockcore__node_send(c, n, 2, argv, lens, NULL, STEP_SELECT, 0, now);
    }
    /* With redis_functions, the function library first (Redis 7): once it
     * is known loaded and callable, the scripts go by FCALL, which runs
     * them without making their blocks' functions again on every call as
     * EVALSHA does. Loading a library the node has is refused as already
     * there: that is a success too. Then one FCALL of its ping: a user
     * allowed to load but not to call, or a node over maxmemory (which
     * refuses functions whole), is found here, not by a step that has
     * commands pipelined behind it (its holder info would run first). */
    n->fn = 0;
    if (c->o.redis_functions) {
        argv[0] = "FUNCTION";
        argv[1] = "LOAD";
        argv[2] = lockcore__lua_library;
        lens[0] = 8;
        lens[1] = 4;
        lens[2] = strlen(argv[2]);
        lockcore__node_send(c, n, 3, argv, lens, NULL, STEP_FNLOAD, 0, now);
        argv[0] = "FCALL";
        argv[1] = lockcore__lua_fn_ping;
        argv[2] = "0";
        lens[0] = 5;
        lens[1] = strlen(argv[1]);
        lens[2] = 1;
        lockcore__node_send(c, n, 3, argv, lens, NULL, STEP_FNLOAD, 1, now);
    }
    /* And the scripts, ahead of any EVALSHA, on every new connection: the
     * node may have restarted and forgotten them. */
    for (int s = 0; s < SCRIPT_COUNT; s++) {
        if (s == SCRIPT_STATUS || s == SCRIPT_FENCE_REPAIR ||
            (!c->o.fencing && (s == SCRIPT_ACQUIRE_FENCED || s == SCRIPT_RAISE)) ||
            (s == SCRIPT_SET_INFO && c->info_len == 0))
            continue;
        argv[0] = "SCRIPT";
        argv[1] = "LOAD";
        argv[2] = lockcore__scripts[s];
        lens[0] = 6;
        lens[1] = 4;
        lens[2] = strlen(argv[2]);
        lockcore__node_send(c, n, 3, argv, lens, NULL, STEP_LOAD, (uint8_t)s, now);
    }
}

/* ---- bounded replies ----
 * No lockcore command gets a reply bigger than a few hundred bytes: arrays
 * of at most 5 elements, strings up to the holder info or a server error.
 * hiredis 0.14 would allocate whatever a node announces (8 bytes per
 * element of "*2147483647", a buffer for a "$1073741824" bulk). These reply
 * builders refuse anything larger than lockcore can use, which fails that
 * node with a protocol error instead of an allocation; read_replies caps
 * what may sit unparsed in the read buffer. */
#define REPLY_ARRAY_MAX 16
#define REPLY_STRING_MAX 16384
#define REPLY_BUFFER_MAX (64 * 1024)

static void refuse(const redisReadTask *t, const char *what, long long size)
{
    struct node *n = t->privdata;
    if (n != NULL)
        lockcore__fmt(n->refused, sizeof(n->refused), "reply refused: %s of %lld (at most %d)", what, size,
                      strcmp(what, "array") == 0 ? REPLY_ARRAY_MAX : REPLY_STRING_MAX);
}

static void *attach(const redisReadTask *t, redisReply *r)
{
    if (t->parent != NULL) {
        redisReply *parent = t->parent->obj;
        parent->element[t->idx] = r;
    }
    return r;
}

static void *make_string(const redisReadTask *t, char *str, size_t len)
{
    if (len > REPLY_STRING_MAX) {
        refuse(t, "string", (long long)len);
        return NULL;
    }
    redisReply *r = calloc(1, sizeof(*r));
    char *copy = malloc(len + 1);
    if (r == NULL || copy == NULL) {
        free(r);
        free(copy);
        return NULL;
    }
    memcpy(copy, str, len);
    copy[len] = '\0';
    r->type = t->type;
    r->str = copy;
    r->len = len;
    return attach(t, r);
}

static void *make_array(const redisReadTask *t, int elements)
{
    if (elements < 0 || elements > REPLY_ARRAY_MAX) {
        refuse(t, "array", elements);
        return NULL;
    }
    redisReply *r = calloc(1, sizeof(*r));
    if (r == NULL)
        return NULL;
    if (elements > 0 && (r->element = calloc((size_t)elements, sizeof(*r->element))) == NULL) {
        free(r);
        return NULL;
    }
    r->type = REDIS_REPLY_ARRAY;
    r->elements = (size_t)elements;
    return attach(t, r);
}

static void *make_integer(const redisReadTask *t, long long v)
{
    redisReply *r = calloc(1, sizeof(*r));
    if (r == NULL)
        return NULL;
    r->type = REDIS_REPLY_INTEGER;
    r->integer = v;
    return attach(t, r);
}

static void *make_nil(const redisReadTask *t)
{
    redisReply *r = calloc(1, sizeof(*r));
    if (r == NULL)
        return NULL;
    r->type = REDIS_REPLY_NIL;
    return attach(t, r);
}

/* The objects are redisReply as hiredis makes them, so freeReplyObject
 * frees them. */
static redisReplyObjectFunctions bounded_replies = {make_string, make_array, make_integer, make_nil,
                                                    freeReplyObject};

int lockcore__node_connect(lockcore_client *c, struct node *n, uint64_t now)
{
    /* A numeric address (resolved at client creation): no DNS here. */
    redisContext *ctx = redisConnectNonBlock(n->addr.ip, n->addr.port);
    if (ctx == NULL) {
        lockcore__node_close(c, n, FAIL_NET, "out of memory");
        return 0;
    }
    n->ctx = ctx;
    if (ctx->err) {
        char why[256];
        lockcore__fmt(why, sizeof(why), "connect: %s", ctx->errstr);
        lockcore__node_close(c, n, FAIL_NET, why);
        return 0;
    }
    /* hiredis 0.14 opens sockets without SOCK_CLOEXEC: a program that
     * embeds lockcore and execs must not leak the connections. */
    int fl = fcntl(ctx->fd, F_GETFD);
    if (fl < 0 || fcntl(ctx->fd, F_SETFD, fl | FD_CLOEXEC) < 0) {
        char why[256];
        lockcore__fmt(why, sizeof(why), "connect: close-on-exec: %s", strerror(errno));
        lockcore__node_close(c, n, FAIL_NET, why);
        return 0;
    }
    ctx->reader->fn = &bounded_replies;
    ctx->reader->privdata = n;
    n->refused[0] = '\0';
    n->state = NODE_CONNECTING;
    n->connect_deadline_ms = now + c->o.connect_timeout_ms;
    queue_setup(c, n, now);
    return 1;
}

int lockcore__node_usable(lockcore_client *c, struct node *n, uint64_t now)
{
    if (n->state != NODE_DOWN)
        return 1;
    if (now < n->next_attempt_ms)
        return 0;
    return lockcore__node_connect(c, n, now);
}

/* Decimal digits of v, written backwards from end; returns the start. */
static char *utoa_back(char *end, size_t v)
{
    do {
        *--end = (char)('0' + v % 10);
        v /= 10;
    } while (v > 0);
    return end;
}

static size_t put_header(char *out, char kind, size_t v)
{
    char tmp[24], *end = tmp + sizeof(tmp);
    char *d = utoa_back(end, v);
    size_t n = (size_t)(end - d);
    out[0] = kind;
    memcpy(out + 1, d, n);
    out[1 + n] = '\r';
    out[2 + n] = '\n';
    return n + 3;
}

/* The RESP encoding of a command into buf, as hiredis would make it, but
 * without its printf-style formatting (a quarter of a busy client's time).
 * Returns the length, or 0 if it does not fit (the caller lets hiredis
 * format it: scripts sent whole with EVAL). */
static int format_command(char *buf, size_t cap, int argc, const char **argv, const size_t *lens)
{
    size_t need = 16;
    for (int i = 0; i < argc; i++)
        need += lens[i] + 24;
    if (need > cap)
        return 0;
    size_t k = put_header(buf, '*', (size_t)argc);
    for (int i = 0; i < argc; i++) {
        k += put_header(buf + k, '$', lens[i]);
        memcpy(buf + k, argv[i], lens[i]);
        k += lens[i];
        buf[k++] = '\r';
        buf[k++] = '\n';
    }
    return (int)k;
}

int lockcore__node_send(lockcore_client *c, struct node *n, int argc, const char **argv, const size_t *lens,
                        struct op *op, enum step step, uint8_t arg, uint64_t now)
{
    (void)c;
    if (n->ctx == NULL)
        return -ENOTCONN;
    struct pending p = {.op = op,
                        .serial = op ? op->serial : 0,
                        .sent_ms = now,
                        .step = (uint8_t)step,
                        .arg = arg,
                        .sent = argc > 0 && lens[0] == 5 && memcmp(argv[0], "FCALL", 5) == 0 ? SENT_FCALL
                                : argc > 0 && lens[0] == 3 && memcmp(argv[0], "SET", 3) == 0 ? SENT_SET
                                                                                             : SENT_SCRIPT};
    if (q_push(n, &p) < 0)
        return -ENOMEM;
    char buf[1024];
    int len = format_command(buf, sizeof(buf), argc, argv, lens);
    int rc = len > 0 ? redisAppendFormattedCommand(n->ctx, buf, (size_t)len)
                     : redisAppendCommandArgv(n->ctx, argc, argv, lens);
    if (rc != REDIS_OK) {
        /* Nothing was appended: take the entry back off the tail. */
        n->q_len--;
        return -ENOMEM;
    }
    return 0;
}

/* Write what the socket takes. send() with MSG_NOSIGNAL instead of
 * redisBufferWrite(): hiredis 0.14 uses write(), and a write to a node that
 * just died would raise SIGPIPE and kill the calling program. */
void lockcore__node_flush(lockcore_client *c, struct node *n)
{
    if (n->state != NODE_UP)
        return;
    redisContext *ctx = n->ctx;
    while (sdslen(ctx->obuf) > 0) {
        if (n->ssl != NULL) {
            char why[256];
            ssize_t w = lockcore__tls_write(n, ctx->obuf, sdslen(ctx->obuf), why, sizeof(why));
            if (w < 0) {
                lockcore__node_close(c, n, FAIL_NET, why);
                return;
            }
            if (w == 0)
                return; /* the rest goes when poll says n->tls_want */
            if ((size_t)w == sdslen(ctx->obuf))
                sdsclear(ctx->obuf);
            else
                sdsrange(ctx->obuf, w, -1);
            continue;
        }
        ssize_t w = send(ctx->fd, ctx->obuf, sdslen(ctx->obuf), MSG_NOSIGNAL);
        if (w < 0) {
            if (errno == EINTR)
                continue;
            if (errno == EAGAIN || errno == EWOULDBLOCK)
                return; /* the rest goes when poll says POLLOUT */
            char why[256];
            lockcore__fmt(why, sizeof(why), "write: %s", strerror(errno));
            lockcore__node_close(c, n, FAIL_NET, why);
            return;
        }
        if ((size_t)w == sdslen(ctx->obuf))
            sdsclear(ctx->obuf);
        else
            sdsrange(ctx->obuf, w, -1);
    }
}

static int reply_is_error(const redisReply *r)
{
    return r == NULL || r->type == REDIS_REPLY_ERROR;
}

/* Hand one reply to whoever it belongs to. Returns -1 if the node was
 * closed (the caller must stop reading it). */
static int dispatch(lockcore_client *c, struct node *n, const struct pending *p, redisReply *r, uint64_t now)
{
    char why[300];
    /* The reconnect backoff ends with the first good reply, not with the
     * TCP connect: a node that accepts and then refuses every client (AUTH,
     * maxclients) keeps backing off. */
    if (!reply_is_error(r))
        n->backoff_ms = 0;
    switch ((enum step)p->step) {
    case STEP_IGNORE:
    case STEP_INFO:
        return 0;
    case STEP_AUTH:
    case STEP_SELECT:
        if (reply_is_error(r)) {
            lockcore__fmt(why, sizeof(why), "%s refused: %s", p->step == STEP_AUTH ? "AUTH" : "SELECT",
                          r ? r->str : "no reply");
            lockcore__node_close(c, n, FAIL_PROTO, why);
            return -1;
        }
        return 0;
    case STEP_LOAD:
        if (r->type == REDIS_REPLY_STRING && r->len == 40)
            memcpy(c->sha[p->arg], r->str, 41);
        return 0;
    case STEP_FNLOAD:
        if (p->arg == 0) { /* the load */
            if (reply_is_error(r) && !(r != NULL && strncmp(r->str, "ERR Library '", 13) == 0 &&
                                       strstr(r->str, "' already exists")))
                n->fn = -1;
        } else { /* the ping */
            n->fn = n->fn == 0 && r != NULL && r->type == REDIS_REPLY_INTEGER && r->integer == 1 ? 1 : -1;
        }
        return 0;
    default:
        if (live(p))
            lockcore__op_reply(p->op, n->index, (enum step)p->step, (enum sent_as)p->sent, r, now);
        return 0;
    }
}

static int drain(lockcore_client *c, struct node *n, uint64_t now);

/* Read what the socket has into the reply reader. Returns 0, or -1 if the
 * node was closed. */
static int fill(lockcore_client *c, struct node *n)
{
    if (n->ssl == NULL) {
        if (redisBufferRead(n->ctx) != REDIS_OK) {
            char why[256];
            lockcore__fmt(why, sizeof(why), "read: %s", n->ctx->errstr);
            lockcore__node_close(c, n, FAIL_NET, why);
            return -1;
        }
        return 0;
    }
    char buf[16384], why[256];
    ssize_t r = lockcore__tls_read(n, buf, sizeof(buf), why, sizeof(why));
    if (r < 0 || (r > 0 && redisReaderFeed(n->ctx->reader, buf, (size_t)r) != REDIS_OK)) {
        lockcore__node_close(c, n, FAIL_NET, r < 0 ? why : "read: out of memory");
        return -1;
    }
    return 0;
}

static void read_replies(lockcore_client *c, struct node *n, uint64_t now)
{
    /* TLS may hold decrypted bytes that poll cannot see: read those too,
     * a bounded number of records per event. */
    for (int round = 0; round < 16; round++) {
        if (fill(c, n) < 0 || !drain(c, n, now) || !lockcore__tls_pending(n))
            return;
    }
}

/* Hand every complete reply to its owner. Returns 1 if the node is still
 * up. */
static int drain(lockcore_client *c, struct node *n, uint64_t now)
{
    for (;;) {
        void *reply = NULL;
        if (redisGetReplyFromReader(n->ctx, &reply) != REDIS_OK) {
            char why[256];
            lockcore__fmt(why, sizeof(why), "protocol: %s", n->refused[0] ? n->refused : n->ctx->errstr);
            lockcore__node_close(c, n, FAIL_PROTO, why);
            return 0;
        }
        if (reply == NULL) {
            /* What is left is one reply still arriving: bounded, so that a
             * node announcing a huge bulk (or sending without end) cannot
             * grow the buffer. */
            redisReader *rd = n->ctx->reader;
            if (rd->len - rd->pos > REPLY_BUFFER_MAX) {
                char why[128];
                lockcore__fmt(why, sizeof(why), "protocol: reply refused: more than %d bytes unparsed",
                              REPLY_BUFFER_MAX);
                lockcore__node_close(c, n, FAIL_PROTO, why);
                return 0;
            }
            return 1;
        }
        struct pending p;
        if (n->sub && (n->q_len == 0 || ((redisReply *)reply)->type == REDIS_REPLY_ARRAY)) {
            /* Pushes, and answers to (UN)SUBSCRIBE: not in the FIFO. */
            lockcore__notify_reply(c, n, reply, now);
            freeReplyObject(reply);
            if (n->state == NODE_DOWN)
                return 0;
            continue;
        }
        if (!q_pop(n, &p)) {
            freeReplyObject(reply);
            lockcore__node_close(c, n, FAIL_PROTO, "protocol: reply nobody asked for");
            return 0;
        }
        int closed = dispatch(c, n, &p, reply, now);
        freeReplyObject(reply);
        if (closed)
            return 0;
    }
}

void lockcore__node_on_events(lockcore_client *c, struct node *n, short revents, uint64_t now)
{
    if (n->state == NODE_CONNECTING) {
        if (!(revents & (POLLOUT | POLLERR | POLLHUP)))
            return;
        int err = 0;
        socklen_t len = sizeof(err);
        if (getsockopt(n->ctx->fd, SOL_SOCKET, SO_ERROR, &err, &len) < 0)
            err = errno;
        if (err != 0) {
            char why[256];
            lockcore__fmt(why, sizeof(why), "connect: %s", strerror(err));
            lockcore__node_close(c, n, FAIL_NET, why);
            return;
        }
        if (n->addr.tls) {
            char why[256];
            if (lockcore__tls_start(c, n, why, sizeof(why)) < 0) {
                lockcore__node_close(c, n, FAIL_PROTO, why);
                return;
            }
            n->state = NODE_HANDSHAKE;
            revents = POLLOUT; /* start the handshake now */
        } else {
            n->state = NODE_UP;
            lockcore__node_flush(c, n);
            return;
        }
    }
    if (n->state == NODE_HANDSHAKE) {
        if (!(revents & (POLLIN | POLLOUT | POLLERR | POLLHUP)))
            return;
        char why[256];
        int rc = lockcore__tls_handshake(n, why, sizeof(why));
        if (rc < 0)
            lockcore__node_close(c, n, FAIL_PROTO, why);
        if (rc == 1) {
            n->state = NODE_UP;
            lockcore__node_flush(c, n);
        }
        return;
    }
    if (n->state != NODE_UP)
        return;
    if (revents & (POLLIN | POLLERR | POLLHUP))
        read_replies(c, n, now);
    /* A TLS write may wait on a read (and a plain one on POLLOUT). */
    if (n->state == NODE_UP && ((revents & POLLOUT) || n->ssl != NULL))
        lockcore__node_flush(c, n);
}

/* A subscriber connection is wanted while the client has waiters. */
static int sub_wanted(const lockcore_client *c, const struct node *n)
{
    return n->sub && c->n_channels > 0 && !c->notify_refused;
}

void lockcore__node_check_timers(lockcore_client *c, struct node *n, uint64_t now)
{
    if (n->state == NODE_DOWN && sub_wanted(c, n) && now >= n->next_attempt_ms) {
        lockcore__node_connect(c, n, now);
        return;
    }
    if ((n->state == NODE_CONNECTING || n->state == NODE_HANDSHAKE) && now >= n->connect_deadline_ms) {
        char why[128];
        lockcore__fmt(why, sizeof(why), "%s: timed out after %llu ms",
                      n->state == NODE_HANDSHAKE ? "TLS handshake" : "connect",
                      (unsigned long long)c->o.connect_timeout_ms);
        lockcore__node_close(c, n, FAIL_NET, why);
    } else if (n->state == NODE_UP && n->q_len > 0 && now >= n->q[n->q_head].sent_ms + stall_ms(c)) {
        char why[128];
        lockcore__fmt(why, sizeof(why), "no reply for %llu ms",
                      (unsigned long long)(now - n->q[n->q_head].sent_ms));
        lockcore__node_close(c, n, FAIL_NET, why);
    }
}

uint64_t lockcore__node_next_timer(const lockcore_client *c, const struct node *n)
{
    if (n->state == NODE_CONNECTING || n->state == NODE_HANDSHAKE)
        return n->connect_deadline_ms;
    if (n->state == NODE_UP && n->q_len > 0)
        return n->q[n->q_head].sent_ms + stall_ms(c);
    if (n->state == NODE_DOWN && sub_wanted(c, n))
        return n->next_attempt_ms;
    return UINT64_MAX;
}
