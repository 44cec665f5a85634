/* The client: options, the event loop, and the blocking calls built on the
 * non-blocking core. */
#include <errno.h>
#include <math.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>

#include <hiredis/sds.h>

#include "internal.h"
#include "kinds/kind.h"

#define TTL_MAX_MS LOCKCORE__TTL_MAX_MS
#define WAIT_MAX_MS LOCKCORE__WAIT_MAX_MS

int lockcore_options_init(struct lockcore_options *o)
{
    if (o == NULL)
        return -EINVAL;
    memset(o, 0, sizeof(*o));
    o->ttl_ms = 10000;
    o->request_timeout_ms = 50;
    o->connect_timeout_ms = 200;
    o->drift_factor = 0.01;
    o->drift_ms = 2;
    o->retry_count = 3;
    o->retry_delay_ms = 200;
    o->retry_jitter_ms = 100;
    o->wait_ms = 0;
    o->key_prefix = "";
    o->fencing = 1;
    o->fence_idle_ms = 7ULL * 24 * 3600 * 1000;
    o->reconnect_min_ms = 10;
    o->reconnect_max_ms = 1000;
    o->clock_us = NULL;
    o->clock_arg = NULL;
    o->tls_verify = 1;
    o->wait_mode = LOCKCORE_WAIT_NOTIFY;
    o->backoff = LOCKCORE_BACKOFF_FIXED;
    o->retry_delay_max_ms = 2000;
    o->queue_ttl_ms = 3000;
    o->proposal_ahead_max_ms = 5000;
    return 0;
}

static int check_options(const struct lockcore_options *o, char *err, size_t cap)
{
#define BAD(...)                                                                                             \
    do {                                                                                                     \
        lockcore__fmt(err, cap, __VA_ARGS__);                                                                \
        return -EINVAL;                                                                                      \
    } while (0)
    if (o->nodes == NULL || o->n_nodes == 0)
        BAD("no nodes given");
    if (o->n_nodes > LOCKCORE_NODES_MAX)
        BAD("%zu nodes given, at most %d allowed", o->n_nodes, LOCKCORE_NODES_MAX);
    if (o->ttl_ms == 0 || o->ttl_ms > TTL_MAX_MS)
        BAD("ttl_ms %llu out of range 1..%llu", (unsigned long long)o->ttl_ms, TTL_MAX_MS);
    if (o->request_timeout_ms == 0 || o->request_timeout_ms >= o->ttl_ms)
        BAD("request_timeout_ms must be between 1 and ttl_ms - 1");
    if (o->connect_timeout_ms == 0 || o->connect_timeout_ms > 60000)
        BAD("connect_timeout_ms must be between 1 and 60000");
    if (!isfinite(o->drift_factor) || o->drift_factor < 0 || o->drift_factor >= 0.5)
        BAD("drift_factor must be in [0, 0.5)");
    if (o->drift_ms >= o->ttl_ms)
        BAD("drift_ms must be below ttl_ms");
    if (o->retry_count < -1)
        BAD("retry_count must be -1 (no limit) or more");
    if (o->retry_delay_ms > WAIT_MAX_MS || o->retry_jitter_ms > WAIT_MAX_MS || o->wait_ms > WAIT_MAX_MS)
        BAD("retry_delay_ms, retry_jitter_ms and wait_ms must be below one year");
    if (o->key_prefix != NULL && strlen(o->key_prefix) > LOCKCORE_PREFIX_MAX)
        BAD("key_prefix longer than %d bytes", LOCKCORE_PREFIX_MAX);
    /* A fence key that expires while its lock is held would let a client
     * with a slow clock propose a token below the holder's: keep it far
     * above the TTL (extensions push it out too). */
    if (o->fence_idle_ms != 0 && o->fence_idle_ms / 2 < o->ttl_ms)
        BAD("fence_idle_ms must be 0 (never) or at least twice ttl_ms");
    if (o->holder_info != NULL && strlen(o->holder_info) > LOCKCORE_INFO_MAX)
        BAD("holder_info longer than %d bytes", LOCKCORE_INFO_MAX);
    if (o->reconnect_min_ms == 0 || o->reconnect_max_ms < o->reconnect_min_ms)
        BAD("reconnect_min_ms must be at least 1 and at most reconnect_max_ms");
    if (o->fencing != 0 && o->fencing != 1)
        BAD("fencing must be 0 or 1");
    if (o->wait_mode < LOCKCORE_WAIT_POLL || o->wait_mode > LOCKCORE_WAIT_FAIR)
        BAD("wait_mode must be LOCKCORE_WAIT_POLL, _NOTIFY or _FAIR");
    if (o->backoff != LOCKCORE_BACKOFF_FIXED && o->backoff != LOCKCORE_BACKOFF_EXPONENTIAL)
        BAD("backoff must be LOCKCORE_BACKOFF_FIXED or _EXPONENTIAL");
    if (o->retry_delay_max_ms > WAIT_MAX_MS || (o->backoff && o->retry_delay_max_ms < o->retry_delay_ms))
        BAD("retry_delay_max_ms must be at least retry_delay_ms and below one year");
    if (o->queue_ttl_ms < 30 || o->queue_ttl_ms > 3600000)
        BAD("queue_ttl_ms must be between 30 and 3600000");
    if (o->proposal_ahead_max_ms > 24ULL * 3600 * 1000)
        BAD("proposal_ahead_max_ms must be at most one day (0: no bound)");
    if (o->fence_transition != 0 && o->fence_transition != 1)
        BAD("fence_transition must be 0 or 1");
    if (o->redis_functions != 0 && o->redis_functions != 1)
        BAD("redis_functions must be 0 or 1");
    if (o->tls_verify != 0 && o->tls_verify != 1)
        BAD("tls_verify must be 0 or 1");
    if (o->password != NULL && (o->password[0] == '\0' || strlen(o->password) > 255))
        BAD("password must be 1 to 255 bytes");
    if ((o->tls_cert_file == NULL) != (o->tls_key_file == NULL))
        BAD("tls_cert_file and tls_key_file go together");
    return 0;
#undef BAD
}

/* What lockcore_client_new allocated, freed (also for a half-built one). */
static void client_release(lockcore_client *c)
{
    lockcore__tls_ctx_free(c);
    for (size_t i = 0; i < 4; i++)
        free(c->tls_strings[i]);
    lockcore__idpool_free(c->idpool);
    free(c->nodes);
    free(c);
}

/* Copy an optional string option into the client; *dst keeps the copy. */
static int copy_opt(lockcore_client *c, size_t slot, const char **dst)
{
    if (*dst == NULL)
        return 0;
    c->tls_strings[slot] = strdup(*dst);
    *dst = c->tls_strings[slot];
    return *dst == NULL ? -ENOMEM : 0;
}

int lockcore_client_new(const struct lockcore_options *o, lockcore_client **out, char *errbuf, size_t errcap)
{
    char err[ERRMSG_MAX] = "";
    int rc;
    lockcore_client *c = NULL;
    if (o == NULL || out == NULL) {
        lockcore__fmt(errbuf, errcap, "options and out must not be NULL");
        return -EINVAL;
    }
    if ((rc = check_options(o, err, sizeof(err))) < 0)
        goto fail;
    rc = -ENOMEM;
    lockcore__fmt(err, sizeof(err), "out of memory");
    if ((c = calloc(1, sizeof(*c))) == NULL)
        goto fail;
    c->o = *o;
    c->o.nodes = NULL; /* copied below; the caller's array is not kept */
    if (c->o.clock_us == NULL)
        c->o.clock_us = lockcore__wall_us;
    if (o->key_prefix != NULL) {
        c->prefix_len = strlen(o->key_prefix);
        memcpy(c->prefix, o->key_prefix, c->prefix_len + 1);
    }
    c->o.key_prefix = c->prefix;
    if (o->holder_info != NULL) {
        c->info_len = strlen(o->holder_info);
        memcpy(c->info, o->holder_info, c->info_len + 1);
    }
    c->o.holder_info = c->info;
    c->o.password = NULL; /* copied into each node's address below */
    if (copy_opt(c, 0, &c->o.tls_ca_file) < 0 || copy_opt(c, 1, &c->o.tls_cert_file) < 0 ||
        copy_opt(c, 2, &c->o.tls_key_file) < 0 || copy_opt(c, 3, &c->o.tls_server_name) < 0)
        goto fail;
    c->n = (unsigned)o->n_nodes;
    c->quorum = fencing_quorum(c->n);
    if ((c->nodes = calloc(c->n, sizeof(*c->nodes))) == NULL)
        goto fail;
    int tls = 0;
    for (unsigned i = 0; i < c->n; i++) {
        if ((rc = lockcore__parse_address(o->nodes[i], &c->nodes[i].addr, err, sizeof(err))) < 0 ||
            (rc = lockcore__resolve(&c->nodes[i].addr, err, sizeof(err))) < 0)
            goto fail;
        tls |= c->nodes[i].addr.tls;
        struct address *a = &c->nodes[i].addr;
        if (o->password != NULL && a->pass[0] == '\0')
            memcpy(a->pass, o->password, strlen(o->password) + 1);
        lockcore__node_init(c, &c->nodes[i], i);
    }
    /* Certificates and keys are read now: a bad file is an error here,
     * not a failed handshake later. */
    if (tls && (rc = lockcore__tls_ctx_new(c, err, sizeof(err))) < 0)
        goto fail;
    if ((rc = lockcore__random_bytes(&c->rng, sizeof(c->rng))) < 0) {
        lockcore__fmt(err, sizeof(err), "no randomness: %s", strerror(-rc));
        goto fail;
    }
    c->rng |= 1; /* xorshift must not start at 0 */
    c->idpool = lockcore__idpool_new();
    unsigned char pre[8];
    if ((rc = lockcore__id_bytes(c->idpool, pre, sizeof(pre))) < 0) {
        lockcore__fmt(err, sizeof(err), "no randomness: %s", strerror(-rc));
        goto fail;
    }
    lockcore__hex(c->id_prefix, pre, sizeof(pre));
    *out = c;
    return 0;
fail:
    if (c != NULL)
        client_release(c);
    lockcore__fmt(errbuf, errcap, "%s", err);
    return rc;
}

/* What the client wrote last (the rollbacks of canceled attempts, a
 * waiter's leaving the queue, a writer's intent cleared, a hold's token
 * copied) is sent before the connections close, for a short while at
 * most: a program that frees its client right after its last call (the
 * fencelock command) would otherwise drop it with the buffers, and leave
 * a key or a place behind until it expires. */
static void flush_before_close(lockcore_client *c)
{
    uint64_t budget = c->o.request_timeout_ms < 50    ? 50
                      : c->o.request_timeout_ms > 500 ? 500
                                                      : c->o.request_timeout_ms;
    uint64_t deadline = lockcore_now_ms() + budget;
    for (;;) {
        struct pollfd fds[LOCKCORE_NODES_MAX];
        nfds_t k = 0;
        for (unsigned i = 0; i < c->n; i++) {
            struct node *n = &c->nodes[i];
            lockcore__node_flush(c, n);
            if (n->state == NODE_UP && sdslen(n->ctx->obuf) > 0) {
                fds[k].fd = n->ctx->fd;
                fds[k].events = (short)(n->tls_want ? n->tls_want : POLLOUT);
                fds[k++].revents = 0;
            }
        }
        uint64_t now = lockcore_now_ms();
        if (k == 0 || now >= deadline)
            return;
        if (poll(fds, k, (int)(deadline - now)) < 0 && errno != EINTR)
            return;
    }
}

static void client_destroy(lockcore_client *c)
{
    c->freeing = 1;
    lockcore__keepalives_detach(c);
    for (const struct lockcore__kind *const *k = lockcore__kinds; *k != NULL; k++)
        if ((*k)->cancel != NULL)
            (*k)->cancel(c);
    /* Canceled callbacks cannot start new operations (c->freeing), so this
     * ends with nothing in flight and nothing leaked. */
    while (c->active != NULL || c->done_head != NULL) {
        while (c->active != NULL)
            lockcore__op_cancel(c->active);
        lockcore__deliver(c);
    }
    flush_before_close(c);
    for (unsigned i = 0; i < c->n; i++) {
        lockcore__tls_free(&c->nodes[i]);
        if (c->nodes[i].ctx != NULL)
            redisFree(c->nodes[i].ctx);
        free(c->nodes[i].q);
    }
    lockcore__ops_free(c);
    lockcore__notify_free(c);
    for (const struct lockcore__kind *const *k = lockcore__kinds; *k != NULL; k++)
        if ((*k)->release != NULL)
            (*k)->release(c);
    client_release(c);
}

void lockcore_client_free(lockcore_client *c)
{
    if (c == NULL || c->freeing)
        return;
    /* From a callback, the loop that runs it still uses the client: free
     * it when the outermost lockcore call returns (see leave()). */
    if (c->in_cb > 0 || c->depth > 0) {
        c->free_pending = 1;
        return;
    }
    client_destroy(c);
}

/* Public calls that run the loop bracket it with enter/leave. A call made
 * from a callback would re-enter the loop: refused. Returns 0 or -EDEADLK. */
static int enter(lockcore_client *c, const char *what)
{
    if (c->in_cb > 0) {
        lockcore__fmt(c->errmsg, sizeof(c->errmsg), "%s called from a callback (not allowed: see lockcore.h)",
                      what);
        return -EDEADLK;
    }
    c->depth++;
    return 0;
}

/* Returns 1 if the client was freed (a callback asked for it). */
static int leave(lockcore_client *c)
{
    if (--c->depth == 0 && c->free_pending) {
        client_destroy(c);
        return 1;
    }
    return 0;
}

int lockcore__enter(lockcore_client *c, const char *what)
{
    return enter(c, what);
}

int lockcore__leave(lockcore_client *c)
{
    return leave(c);
}

void lockcore__call(lockcore_client *c, lockcore_cb cb, int rc, const struct lockcore_lock *lock, void *arg)
{
    c->in_cb++;
    cb(c, rc, lock, arg);
    c->in_cb--;
}

unsigned lockcore_nodes(const lockcore_client *c)
{
    return c ? c->n : 0;
}

unsigned lockcore_quorum(const lockcore_client *c)
{
    return c ? c->quorum : 0;
}

const char *lockcore_errmsg(const lockcore_client *c)
{
    if (c == NULL)
        return "no client";
    return c->errmsg[0] ? c->errmsg : lockcore_strerror(0);
}

/* ---- completion ---- */

void lockcore__op_finish(struct op *op, int rc)
{
    lockcore_client *c = op->c;
    /* A waiter that gives up leaves every queue it joined (unless its
     * driver waits on: a permit); one that was granted leaves them with
     * its release (lua/lib/release.lua), or when its place, cut to the
     * lock's TTL by the grant, lapses. And it lets go of its release
     * channel. */
    if (op->kind == OP_ACQUIRE && op->queued && rc != 0 && !op->keep_place)
        for (unsigned i = 0; i < c->n; i++)
            if (c->nodes[i].state != NODE_DOWN)
                lockcore__op_resend(op, i, STEP_DEQUEUE, 0, lockcore_now_ms());
    if (op->subscribed)
        lockcore__notify_drop(c, op);
    op->rc = rc;
    op->phase = PH_DONE;
    op->serial = ++c->serial;
    if (op->prev != NULL)
        op->prev->next = op->next;
    else
        c->active = op->next;
    if (op->next != NULL)
        op->next->prev = op->prev;
    op->next = NULL;
    if (c->done_tail != NULL)
        c->done_tail->next = op;
    else
        c->done_head = op;
    c->done_tail = op;
}

/* Run callbacks of ended operations. Each op goes back to the pool before
 * its callback runs, so a callback may start the next operation cheaply. */
int lockcore__deliver(lockcore_client *c)
{
    int count = 0;
    while (c->done_head != NULL) {
        struct op *op = c->done_head;
        c->done_head = op->next;
        if (c->done_head == NULL)
            c->done_tail = NULL;
        struct lockcore_lock lock = op->lock;
        int rc = op->rc;
        if (op->kind == OP_ACQUIRE && rc < 0) {
            /* Not held: keep the counts, drop what could pass for a lock. */
            lock.id[0] = '\0';
            lock.token = 0;
            lock.validity_ms = 0;
            lock.valid_until_ms = 0;
        }
        lockcore_cb cb = op->cb;
        void *arg = op->arg;
        if (rc < 0)
            lockcore__fmt(c->errmsg, sizeof(c->errmsg), "%s",
                          op->errmsg[0] ? op->errmsg : lockcore_strerror(rc));
        else
            c->errmsg[0] = '\0';
        op->next = c->free_ops;
        c->free_ops = op;
        c->inflight--;
        count++;
        if (cb != NULL)
            lockcore__call(c, cb, rc, &lock, arg);
    }
    return count;
}

/* ---- event loop ---- */

/* Every connection: the command connections, then the subscriber ones
 * (while notified waiting has set them up). */
static unsigned n_conns(const lockcore_client *c)
{
    return c->subs != NULL ? 2 * c->n : c->n;
}

static struct node *conn(lockcore_client *c, unsigned j)
{
    return j < c->n ? &c->nodes[j] : &c->subs[j - c->n];
}

/* Send what the replies and timers produced, one write per node, then run
 * the callbacks; what the callbacks queue (a waiter leaving its line, a
 * writer's intent cleared) is sent before we return, not after the next
 * poll, which may block. A failed write ends operations, which are
 * delivered too; the rounds are bounded since a callback may start more. */
int lockcore__flush_deliver(lockcore_client *c)
{
    int count = 0;
    for (int round = 0; round < 8; round++) {
        for (unsigned i = 0; i < n_conns(c); i++)
            lockcore__node_flush(c, conn(c, i));
        int d = lockcore__deliver(c);
        count += d;
        if (d == 0)
            break;
    }
    return count;
}

static int pollfds(lockcore_client *c, struct pollfd *fds, size_t cap, int *timeout_ms)
{
    uint64_t next = UINT64_MAX;
    size_t k = 0;
    for (unsigned i = 0; i < n_conns(c); i++) {
        struct node *n = conn(c, i);
        lockcore__node_flush(c, n);
        uint64_t t = lockcore__node_next_timer(c, n);
        if (t < next)
            next = t;
        if (n->state == NODE_DOWN)
            continue;
        if (k == cap)
            return -ENOSPC;
        fds[k].fd = n->ctx->fd;
        if (n->state == NODE_CONNECTING)
            fds[k].events = POLLOUT;
        else if (n->state == NODE_HANDSHAKE)
            fds[k].events = (short)n->tls_want;
        else
            fds[k].events = (short)(POLLIN | (sdslen(n->ctx->obuf) > 0 ? POLLOUT : 0) | n->tls_want);
        fds[k].revents = 0;
        k++;
    }
    for (struct op *op = c->active; op != NULL; op = op->next) {
        uint64_t t = lockcore__op_next_timer(op);
        if (t < next)
            next = t;
    }
    uint64_t kt = lockcore__keepalive_next_timer(c);
    if (kt < next)
        next = kt;
    if ((kt = lockcore__notify_next_timer(c)) < next)
        next = kt;
    for (const struct lockcore__kind *const *k = lockcore__kinds; *k != NULL; k++)
        if ((*k)->next_timer != NULL && (kt = (*k)->next_timer(c)) < next)
            next = kt;
    if (c->done_head != NULL)
        *timeout_ms = 0;
    else if (next == UINT64_MAX)
        *timeout_ms = -1;
    else {
        uint64_t now = lockcore_now_ms();
        uint64_t d = next > now ? next - now : 0;
        *timeout_ms = d > 60000 ? 60000 : (int)d;
    }
    return (int)k;
}

int lockcore_pollfds(lockcore_client *c, struct pollfd *fds, size_t cap, int *timeout_ms)
{
    if (c == NULL || fds == NULL || timeout_ms == NULL)
        return -EINVAL;
    int rc = enter(c, "lockcore_pollfds");
    if (rc < 0)
        return rc;
    rc = pollfds(c, fds, cap, timeout_ms);
    c->depth--; /* runs no callback: nothing to free here */
    return rc;
}

static int process(lockcore_client *c, const struct pollfd *fds, size_t nfds)
{
    uint64_t now = lockcore_now_ms();
    for (size_t k = 0; k < nfds; k++) {
        if (fds[k].revents == 0)
            continue;
        for (unsigned i = 0; i < n_conns(c); i++) {
            struct node *n = conn(c, i);
            if (n->state != NODE_DOWN && n->ctx->fd == fds[k].fd) {
                lockcore__node_on_events(c, n, fds[k].revents, now);
                break;
            }
        }
    }
    now = lockcore_now_ms();
    for (unsigned i = 0; i < n_conns(c); i++)
        lockcore__node_check_timers(c, conn(c, i), now);
    for (struct op *op = c->active, *next; op != NULL; op = next) {
        next = op->next;
        lockcore__op_check_timers(op, now);
    }
    lockcore__keepalive_check(c, now);
    lockcore__notify_check(c, now);
    for (const struct lockcore__kind *const *k = lockcore__kinds; *k != NULL; k++)
        if ((*k)->check != NULL)
            (*k)->check(c, now);
    return lockcore__flush_deliver(c);
}

int lockcore_process(lockcore_client *c, const struct pollfd *fds, size_t nfds)
{
    if (c == NULL || (fds == NULL && nfds > 0))
        return -EINVAL;
    int rc = enter(c, "lockcore_process");
    if (rc < 0)
        return rc;
    rc = process(c, fds, nfds);
    leave(c);
    return rc;
}

static void cancel_release_done(lockcore_client *c, int rc, const struct lockcore_lock *lock, void *arg)
{
    (void)c, (void)rc, (void)lock, (void)arg;
}

static int started_by(const struct op *op, lockcore_cb cb, void *arg)
{
    return op->kind == OP_ACQUIRE &&
           ((op->cb == cb && op->arg == arg) ||
            (op->type != NULL && op->type->started_by != NULL && op->type->started_by(op, cb, arg)));
}

int lockcore_cancel(lockcore_client *c, lockcore_cb cb, void *arg)
{
    if (c == NULL || cb == NULL)
        return -EINVAL;
    if (c->freeing)
        return 0; /* everything ends anyway */
    int n = 0;
    for (struct op *op = c->active, *next; op != NULL; op = next) {
        next = op->next;
        if (started_by(op, cb, arg)) {
            lockcore__op_abort(op, LOCKCORE_ECANCELED, "canceled by the caller");
            n++;
        }
    }
    /* Ended in this turn, their callbacks not run yet: a grant is released
     * (nobody will use it) and reported canceled too. */
    for (struct op *op = c->done_head; op != NULL; op = op->next) {
        if (op->rc == LOCKCORE_ECANCELED || !started_by(op, cb, arg))
            continue;
        if (op->rc == 0) {
            struct lockcore_lock l = op->lock;
            lockcore_release_async(c, &l, cancel_release_done, NULL);
        }
        op->rc = LOCKCORE_ECANCELED;
        lockcore__fmt(op->errmsg, sizeof(op->errmsg), "acquire '%s': canceled by the caller",
                      op->lock.resource);
        n++;
    }
    for (const struct lockcore__kind *const *k = lockcore__kinds; *k != NULL; k++)
        if ((*k)->cancel_calls != NULL)
            n += (int)(*k)->cancel_calls(c, cb, arg);
    /* Their rollbacks and leavings go out, and their callbacks run, now;
     * from a callback, the loop that ran it does both. */
    if (c->in_cb == 0) {
        c->depth++;
        lockcore__flush_deliver(c);
        leave(c);
    }
    return n;
}

/* One turn of the loop: poll, then process. A failed poll changes nothing
 * and is returned. */
static int run_once(lockcore_client *c, int timeout_ms)
{
    struct pollfd fds[LOCKCORE_POLLFDS_MAX];
    int t;
    int nfds = pollfds(c, fds, LOCKCORE_POLLFDS_MAX, &t);
    if (nfds < 0)
        return nfds;
    if (timeout_ms >= 0 && (t < 0 || t > timeout_ms))
        t = timeout_ms;
    if (nfds == 0 && t < 0)
        return 0; /* nothing in flight, nothing to wait for */
    int r = poll(fds, (nfds_t)nfds, t);
    if (r < 0) {
        if (errno != EINTR) {
            int e = errno;
            lockcore__fmt(c->errmsg, sizeof(c->errmsg), "poll: %s", strerror(e));
            return -e;
        }
        /* Interrupted (a signal; or the process was stopped, a GC pause,
         * and continued): what arrived meanwhile is read before any timer
         * may say that a node did not answer. */
        if (poll(fds, (nfds_t)nfds, 0) < 0)
            for (int k = 0; k < nfds; k++)
                fds[k].revents = 0;
    }
    return process(c, fds, (size_t)nfds);
}

int lockcore__run_once(lockcore_client *c, int timeout_ms)
{
    return run_once(c, timeout_ms);
}

int lockcore_run(lockcore_client *c, int timeout_ms)
{
    if (c == NULL)
        return -EINVAL;
    int rc = enter(c, "lockcore_run");
    if (rc < 0)
        return rc;
    rc = run_once(c, timeout_ms);
    leave(c);
    return rc;
}

/* ---- starting operations ---- */

static int check_resource(lockcore_client *c, const char *resource)
{
    if (resource == NULL || resource[0] == '\0') {
        lockcore__fmt(c->errmsg, sizeof(c->errmsg), "resource name is empty");
        return -EINVAL;
    }
    size_t len = strnlen(resource, LOCKCORE_RESOURCE_MAX + 1);
    if (len > LOCKCORE_RESOURCE_MAX) {
        lockcore__fmt(c->errmsg, sizeof(c->errmsg), "resource name longer than %d bytes",
                      LOCKCORE_RESOURCE_MAX);
        return -EINVAL;
    }
    return 0;
}

/* No operation may start on a client that is being freed: it could never
 * end, and its callback would never run. */
static int check_client(lockcore_client *c)
{
    if (c->freeing || c->free_pending) {
        lockcore__fmt(c->errmsg, sizeof(c->errmsg), "the client is being freed");
        return LOCKCORE_ECANCELED;
    }
    return 0;
}

void lockcore__op_set_keys(struct op *op, const char *resource)
{
    lockcore_client *c = op->c;
    size_t len = strlen(resource);
    memcpy(op->lock.resource, resource, len + 1);
    memcpy(op->key, c->prefix, c->prefix_len);
    memcpy(op->key + c->prefix_len, resource, len + 1);
    op->key_len = c->prefix_len + len;
    op->fhash_len = 0; /* the fence's keys: made where a step sends them */
    /* "{" key "}:holder", in the lock key's cluster slot like the fence key. */
    op->ikey[0] = '{';
    memcpy(op->ikey + 1, op->key, op->key_len);
    memcpy(op->ikey + 1 + op->key_len, "}:holder", 9);
    op->ikey_len = op->key_len + 9;
    lockcore__op_set_queue(op, op->key, op->key_len);
}

/* A plain SET NX and a release send no fence key, and the bucket's hash
 * costs the client as much as the rest of the keys (fencing_bucket). */
void lockcore__op_fence_keys(struct op *op)
{
    if (op->fhash_len != 0)
        return;
    int fk = fencing_fence_key(op->key, op->key_len, op->fkey, sizeof(op->fkey));
    op->fkey_len = fk > 0 ? (size_t)fk : 0;
    lockcore__fence_bucket(op->c, op->lock.resource, strlen(op->lock.resource), op->fhash, &op->fhash_len,
                           op->fbucket);
}

void lockcore__op_set_queue(struct op *op, const char *key, size_t key_len)
{
    lockcore_client *c = op->c;
    op->qkey[0] = op->qexp[0] = op->chan[0] = '{';
    memcpy(op->qkey + 1, key, key_len);
    memcpy(op->qkey + 1 + key_len, "}:waiters", 10);
    op->qkey_len = key_len + 10;
    memcpy(op->qexp + 1, key, key_len);
    memcpy(op->qexp + 1 + key_len, "}:waiting", 10);
    op->qexp_len = key_len + 10;
    op->wkey[0] = '{';
    memcpy(op->wkey + 1, key, key_len);
    memcpy(op->wkey + 1 + key_len, "}:wanted", 9);
    op->wkey_len = key_len + 9;
    memcpy(op->chan + 1, key, key_len);
    memcpy(op->chan + 1 + key_len, "}:released:", 11);
    memcpy(op->chan + 12 + key_len, c->id_prefix, 17);
    op->chan_len = key_len + 28;
}

static int is_id(const char *id, size_t cap)
{
    if (strnlen(id, cap) != LOCKCORE_ID_LEN)
        return 0;
    for (size_t i = 0; i < LOCKCORE_ID_LEN; i++)
        if (!((id[i] >= '0' && id[i] <= '9') || (id[i] >= 'a' && id[i] <= 'f')))
            return 0;
    return 1;
}

int lockcore__check_lock(lockcore_client *c, const struct lockcore_lock *lock)
{
    if (lock == NULL) {
        lockcore__fmt(c->errmsg, sizeof(c->errmsg), "lock is NULL");
        return -EINVAL;
    }
    if (memchr(lock->resource, '\0', sizeof(lock->resource)) == NULL ||
        check_resource(c, lock->resource) < 0) {
        lockcore__fmt(c->errmsg, sizeof(c->errmsg), "lock has no valid resource name");
        return -EINVAL;
    }
    if (!is_id(lock->id, sizeof(lock->id))) {
        lockcore__fmt(c->errmsg, sizeof(c->errmsg), "lock has no valid id (%d lowercase hex digits)",
                      LOCKCORE_ID_LEN);
        return -EINVAL;
    }
    return 0;
}

/* A TTL to extend to: 0 (the client's), or one that an extension can
 * meet with validity left (above the request timeout), at most 24 h. */
int lockcore__check_ttl(lockcore_client *c, uint64_t ttl_ms, const char *what)
{
    if (ttl_ms != 0 && (ttl_ms <= c->o.request_timeout_ms || ttl_ms > TTL_MAX_MS)) {
        lockcore__fmt(c->errmsg, sizeof(c->errmsg),
                      "%s %llu ms out of range: above the request timeout (%llu ms), at most %llu ms", what,
                      (unsigned long long)ttl_ms, (unsigned long long)c->o.request_timeout_ms, TTL_MAX_MS);
        return -EINVAL;
    }
    return 0;
}

int lockcore_lock_from_id(lockcore_client *c, const char *resource, const char *id, struct lockcore_lock *out)
{
    if (c == NULL)
        return -EINVAL;
    int rc = check_resource(c, resource);
    if (rc < 0)
        return rc;
    if (id == NULL || !is_id(id, LOCKCORE_ID_LEN + 1)) {
        lockcore__fmt(c->errmsg, sizeof(c->errmsg), "lock id must be %d lowercase hex digits",
                      LOCKCORE_ID_LEN);
        return -EINVAL;
    }
    if (out == NULL) {
        lockcore__fmt(c->errmsg, sizeof(c->errmsg), "lock is NULL");
        return -EINVAL;
    }
    memset(out, 0, sizeof(*out));
    memcpy(out->resource, resource, strlen(resource) + 1);
    memcpy(out->id, id, LOCKCORE_ID_LEN + 1);
    out->nodes = c->n;
    out->flags = LOCKCORE_LOCK_FROM_ID;
    return 0;
}

int lockcore__new_qid(lockcore_client *c, const char *tag, char *out)
{
    /* The 9 bytes (18 digits) after the prefix: random, or the owner's
     * tag (4 bytes) and 5 random bytes. */
    unsigned char raw[9];
    size_t tl = tag != NULL ? strlen(tag) : 0;
    int rc = lockcore__id_bytes(c->idpool, raw, sizeof(raw) - tl / 2);
    if (rc < 0)
        return rc;
    memcpy(out, c->id_prefix, 16);
    memcpy(out + 16, tag, tl);
    lockcore__hex(out + 16 + tl, raw, sizeof(raw) - tl / 2);
    memset(out + LOCKCORE_ID_LEN - LOCKCORE__ATTEMPT_DIGITS, '0', LOCKCORE__ATTEMPT_DIGITS);
    out[LOCKCORE_ID_LEN] = '\0';
    return 0;
}

struct op *lockcore__acquire_op(lockcore_client *c, const char *resource, const char *id,
                                const struct lockcore__call *k, lockcore_cb cb, void *arg, int *rcp)
{
    int rc = 0;
    if (cb == NULL) {
        lockcore__fmt(c->errmsg, sizeof(c->errmsg), "callback is NULL");
        rc = -EINVAL;
    }
    char qid[LOCKCORE_ID_LEN + 1];
    /* The client's prefix, which names its release channel, then the
     * owner's tag and random bits of this acquisition; the last digits
     * number its attempts (attempt_begin writes each attempt's lock id). */
    if (rc == 0 && (rc = lockcore__new_qid(c, k->tag, qid)) < 0)
        lockcore__fmt(c->errmsg, sizeof(c->errmsg), "no randomness for the lock id: %s", strerror(-rc));
    struct op *op = NULL;
    if (rc == 0 && (op = lockcore__op_new(c, OP_ACQUIRE, cb, arg)) == NULL) {
        lockcore__fmt(c->errmsg, sizeof(c->errmsg), "out of memory");
        rc = -ENOMEM;
    }
    *rcp = rc;
    if (rc < 0)
        return NULL;
    lockcore__op_set_keys(op, resource);
    memcpy(op->qid, qid, sizeof(qid));
    memcpy(op->lock.id, op->qid, LOCKCORE_ID_LEN + 1);
    if (id != NULL) /* a re-entry: the hold it joins */
        memcpy(op->kx.join, id, LOCKCORE_ID_LEN + 1);
    op->ttl_ms = k->ttl_ms;
    op->retry_count = k->retry_count;
    op->wait_mode = k->wait_mode;
    /* The ticket orders waiters; a fair acquisition waits its turn from the
     * first attempt on. */
    op->ticket = c->o.clock_us(c->o.clock_arg);
    op->lock.ticket = op->ticket;
    return op;
}

struct op *lockcore__plain_start(lockcore_client *c, const char *resource, const struct lockcore__call *k,
                                 lockcore_cb cb, void *arg, int *rcp)
{
    int rc = check_client(c);
    if (rc == 0)
        rc = check_resource(c, resource);
    *rcp = rc;
    struct op *op = rc == 0 ? lockcore__acquire_op(c, resource, NULL, k, cb, arg, rcp) : NULL;
    if (op == NULL)
        return NULL;
    uint64_t now = lockcore_now_ms();
    op->wait_deadline_ms = k->wait_ms ? now + k->wait_ms : 0;
    /* A notified waiter that will retry tries first and takes its place
     * in the queue with the same script when refused (one round, not two).
     * Without fencing its first attempt is the bare SET NX PX of a polling
     * client, and a refusal costs a second round to take the place. */
    op->queued = k->wait_mode == LOCKCORE_WAIT_FAIR ||
                 (k->wait_mode == LOCKCORE_WAIT_NOTIFY && k->retry_count != 0 && c->o.fencing);
    lockcore__op_start(op, now);
    return op;
}

int lockcore_acquire_async(lockcore_client *c, const char *resource, lockcore_cb cb, void *arg)
{
    if (c == NULL)
        return -EINVAL;
    struct lockcore__call k;
    int rc = lockcore__call_check(c, NULL, &k);
    if (rc == 0)
        lockcore__plain_start(c, resource, &k, cb, arg, &rc);
    return rc;
}

static struct op *start_with_lock(lockcore_client *c, enum op_kind kind, const struct lockcore_lock *lock,
                                  uint64_t ttl_ms, lockcore_cb cb, void *arg, int *rcp)
{
    struct op *op = lockcore__op_for_lock(c, kind, lock, ttl_ms, cb, arg, rcp);
    if (op != NULL)
        lockcore__op_start(op, lockcore_now_ms());
    return op;
}

struct op *lockcore__op_for_lock(lockcore_client *c, enum op_kind kind, const struct lockcore_lock *lock,
                                 uint64_t ttl_ms, lockcore_cb cb, void *arg, int *rcp)
{
    int rc = check_client(c);
    if (rc == 0 && cb == NULL) {
        lockcore__fmt(c->errmsg, sizeof(c->errmsg), "callback is NULL");
        rc = -EINVAL;
    }
    if (rc == 0)
        rc = lockcore__check_lock(c, lock);
    if (rc == 0)
        rc = lockcore__check_ttl(c, ttl_ms, "ttl_ms");
    struct op *op = NULL;
    if (rc == 0 && (op = lockcore__op_new(c, kind, cb, arg)) == NULL) {
        lockcore__fmt(c->errmsg, sizeof(c->errmsg), "out of memory");
        rc = -ENOMEM;
    }
    *rcp = rc;
    if (rc < 0)
        return NULL;
    op->lock = *lock;
    op->lock.nodes = c->n;
    op->type = lockcore__kind_of(lock->flags);
    lockcore__qid(lock->id, op->qid);
    lockcore__op_set_keys(op, lock->resource);
    if (op->type != NULL && op->type->queue_key != NULL)
        op->type->queue_key(op);
    op->ttl_ms = ttl_ms ? ttl_ms : c->o.ttl_ms;
    /* Candidates wait in line (elect.c): every release of a leader's lock,
     * a resignation or not, names the next and keeps its place. */
    if (kind == OP_RELEASE && (lock->flags & LOCKCORE_LOCK_LEADER))
        op->wait_mode = LOCKCORE_WAIT_FAIR;
    return op;
}

int lockcore_extend_async(lockcore_client *c, const struct lockcore_lock *lock, uint64_t ttl_ms,
                          lockcore_cb cb, void *arg)
{
    if (c == NULL)
        return -EINVAL;
    int rc;
    start_with_lock(c, OP_EXTEND, lock, ttl_ms, cb, arg, &rc);
    return rc;
}

int lockcore_release_async(lockcore_client *c, const struct lockcore_lock *lock, lockcore_cb cb, void *arg)
{
    if (c == NULL)
        return -EINVAL;
    int rc;
    start_with_lock(c, OP_RELEASE, lock, 0, cb, arg, &rc);
    return rc;
}

size_t lockcore_inflight(const lockcore_client *c)
{
    return c ? c->inflight : 0;
}

/* ---- blocking calls ---- */

struct waiter {
    int done;
    int rc;
    struct lockcore_lock lock;
};

static void wake(lockcore_client *c, int rc, const struct lockcore_lock *lock, void *arg)
{
    (void)c;
    struct waiter *w = arg;
    w->done = 1;
    w->rc = rc;
    w->lock = *lock;
}

/* Run the loop until op ends. Every operation ends by its own timers, so
 * this is bounded. If the loop fails (poll), or a callback of another
 * operation frees the client, op is ended here: nothing may keep pointing
 * at the caller's stack (the waiter, a status array) once we return.
 * Returns op's code; *freed is set if the client is gone. */
static int wait_for(lockcore_client *c, struct op *op, struct waiter *w, int *freed)
{
    int err = 0;
    while (!w->done) {
        int r = run_once(c, -1);
        if (r < 0 || c->free_pending) {
            err = r < 0 ? r : LOCKCORE_ECANCELED;
            break;
        }
    }
    if (!w->done) {
        /* Ended already (by pollfds) but not delivered: deliver it. */
        if (op->phase != PH_DONE) {
            char why[ERRMSG_MAX];
            lockcore__fmt(why, sizeof(why), "%s",
                          err == LOCKCORE_ECANCELED ? "canceled: the client was freed by a callback"
                                                    : c->errmsg);
            lockcore__op_abort(op, err, why);
        }
        lockcore__flush_deliver(c);
    }
    *freed = leave(c);
    return w->rc;
}

/* The blocking calls: enter, start, wait, leave. */
static int blocking(lockcore_client *c, enum op_kind kind, const char *resource, struct lockcore_lock *lock,
                    uint64_t ttl_ms, struct lockcore_node_status *status, const uint64_t *repair_to)
{
    static const char *const names[] = {"lockcore_acquire", "lockcore_extend", "lockcore_release",
                                        "lockcore_status"};
    int rc = enter(c, names[kind]);
    if (rc < 0)
        return rc;
    struct waiter w = {0};
    struct op *op = NULL;
    struct lockcore__call k;
    if (kind == OP_ACQUIRE && (rc = lockcore__call_check(c, NULL, &k)) == 0)
        op = lockcore__plain_start(c, resource, &k, wake, &w, &rc);
    else if (kind == OP_STATUS) {
        if ((rc = check_client(c)) == 0 && (op = lockcore__op_new(c, OP_STATUS, wake, &w)) == NULL)
            rc = -ENOMEM;
        if (op != NULL) {
            lockcore__op_set_keys(op, resource);
            op->status = status;
            if (repair_to != NULL) {
                op->repair = 1;
                op->repair_to = *repair_to;
            }
            lockcore__op_start(op, lockcore_now_ms());
        }
    } else
        op = start_with_lock(c, kind, lock, ttl_ms, wake, &w, &rc);
    if (op == NULL) {
        leave(c);
        return rc;
    }
    int freed = 0;
    rc = wait_for(c, op, &w, &freed);
    if (lock != NULL)
        *lock = w.lock; /* the result, or on failure its counts */
    return rc;
}

int lockcore_acquire(lockcore_client *c, const char *resource, struct lockcore_lock *lock)
{
    if (c == NULL)
        return -EINVAL;
    if (lock == NULL) {
        lockcore__fmt(c->errmsg, sizeof(c->errmsg), "lock is NULL");
        return -EINVAL;
    }
    return blocking(c, OP_ACQUIRE, resource, lock, 0, NULL, NULL);
}

int lockcore_extend(lockcore_client *c, struct lockcore_lock *lock, uint64_t ttl_ms)
{
    if (c == NULL)
        return -EINVAL;
    return blocking(c, OP_EXTEND, NULL, lock, ttl_ms, NULL, NULL);
}

int lockcore_release(lockcore_client *c, struct lockcore_lock *lock)
{
    if (c == NULL)
        return -EINVAL;
    return blocking(c, OP_RELEASE, NULL, lock, 0, NULL, NULL);
}

int lockcore_status(lockcore_client *c, const char *resource, struct lockcore_node_status *out, size_t cap)
{
    if (c == NULL)
        return -EINVAL;
    int rc = check_resource(c, resource);
    if (rc < 0)
        return rc;
    if (out == NULL || cap < c->n) {
        lockcore__fmt(c->errmsg, sizeof(c->errmsg), "status needs room for %u nodes", c->n);
        return out == NULL ? -EINVAL : -ENOSPC;
    }
    return blocking(c, OP_STATUS, resource, NULL, 0, out, NULL);
}

int lockcore_fence_repair(lockcore_client *c, const char *resource, uint64_t to,
                          struct lockcore_node_status *out, size_t cap)
{
    if (c == NULL)
        return -EINVAL;
    int rc = check_resource(c, resource);
    if (rc < 0)
        return rc;
    if (!c->o.fencing) {
        lockcore__fmt(c->errmsg, sizeof(c->errmsg), "fence repair with fencing off: there is no fence");
        return -EINVAL;
    }
    if (to >= FENCING_TOKEN_MAX) {
        lockcore__fmt(c->errmsg, sizeof(c->errmsg), "a fence value is below 2^53");
        return -EINVAL;
    }
    if (out == NULL || cap < c->n) {
        lockcore__fmt(c->errmsg, sizeof(c->errmsg), "fence repair needs room for %u nodes", c->n);
        return out == NULL ? -EINVAL : -ENOSPC;
    }
    return blocking(c, OP_STATUS, resource, NULL, 0, out, &to);
}
