/*
 * The lock kinds beside the plain lock: the counting semaphore (sem.c:
 * permits that are each a plain lock), the multi-resource lock (multi.c:
 * one atomic script per node over the whole set) and the reentrant lock
 * (reentrant.c: holds by id beside the plain key). docs/lockcore.md
 * ("Lock kinds") has the safety argument of each; docs/fencing.md the
 * fencing story.
 *
 * Multi-resource and reentrant locks are ordinary operations of op.c whose
 * lock flags send their commands through lockcore__kinds_resend. A
 * semaphore acquisition is a driver of its own that runs one plain
 * single-attempt acquisition per permit it tries. This file holds what
 * they share.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kinds.h"
#include "kind.h"
#include "lockcore_lua.h"

void lockcore__kinds_tagged(char *out, const char *key, const char *suffix)
{
    size_t kl = strlen(key), sl = strlen(suffix);
    out[0] = '{';
    memcpy(out + 1, key, kl);
    out[1 + kl] = '}';
    memcpy(out + 2 + kl, suffix, sl + 1);
}

size_t lockcore__kinds_channel(const lockcore_client *c, const char *key, char *out)
{
    lockcore__kinds_tagged(out, key, ":released:");
    size_t l = strlen(out);
    memcpy(out + l, c->id_prefix, 17);
    return l + 16;
}

void lockcore__kinds_keys(const lockcore_client *c, const char *resource, struct lockcore__keyset *ks)
{
    ks->k = 0;
    const char *p = resource;
    while (ks->k < LOCKCORE_MULTI_MAX) {
        const char *e = strchr(p, '\n');
        size_t len = e ? (size_t)(e - p) : strlen(p);
        char *key = ks->lock[ks->k];
        memcpy(key, c->prefix, c->prefix_len);
        memcpy(key + c->prefix_len, p, len);
        key[c->prefix_len + len] = '\0';
        lockcore__kinds_tagged(ks->fence[ks->k], key, ":fence");
        lockcore__fence_bucket(c, p, len, ks->fhash[ks->k], &ks->fhash_len[ks->k], ks->fbucket[ks->k]);
        lockcore__kinds_tagged(ks->info[ks->k], key, ":holder");
        lockcore__kinds_tagged(ks->waiters[ks->k], key, ":waiters");
        lockcore__kinds_tagged(ks->waiting[ks->k], key, ":waiting");
        lockcore__kinds_tagged(ks->wanted[ks->k], key, ":wanted");
        ks->k++;
        if (e == NULL)
            break;
        p = e + 1;
    }
    lockcore__kinds_tagged(ks->holds, ks->lock[0], ":holds");
    lockcore__kinds_tagged(ks->readers, ks->lock[0], ":readers");
    lockcore__kinds_tagged(ks->intent, ks->lock[0], ":wintent");
}

struct lockcore__keyset *lockcore__kinds_keyset(lockcore_client *c, const char *resource)
{
    if (c->kx.ks_for != NULL && strcmp(c->kx.ks_for, resource) == 0)
        return c->kx.ks;
    if (c->kx.ks == NULL && (c->kx.ks = malloc(sizeof(*c->kx.ks))) == NULL)
        return NULL;
    free(c->kx.ks_for);
    if ((c->kx.ks_for = strdup(resource)) == NULL)
        return NULL;
    lockcore__kinds_keys(c, resource, c->kx.ks);
    return c->kx.ks;
}

void lockcore__kinds_keyset_free(lockcore_client *c)
{
    free(c->kx.ks);
    free(c->kx.ks_for);
    c->kx.ks = NULL;
    c->kx.ks_for = NULL;
}

/* Every kind: a new kind is a file of this folder and a line here. */
const struct lockcore__kind *const lockcore__kinds[] = {
    &lockcore__kind_sem,
    &lockcore__kind_multi,
    &lockcore__kind_reentrant,
    &lockcore__kind_read,
    &lockcore__kind_write,
    &lockcore__kind_leader,
    NULL,
};

const struct lockcore__kind *lockcore__kind_of(unsigned flags)
{
    for (const struct lockcore__kind *const *k = lockcore__kinds; *k != NULL; k++)
        if ((*k)->flag & flags)
            return *k;
    return NULL;
}

int lockcore__kinds_send(struct op *op, unsigned i, enum step step, int slot, const char *body, int use_eval,
                         const struct lockcore__kcmd *k, uint64_t now)
{
    lockcore_client *c = op->c;
    const char *argv[3 + sizeof(k->keys) / sizeof(k->keys[0]) + sizeof(k->args) / sizeof(k->args[0])];
    size_t lens[sizeof(argv) / sizeof(argv[0])];
    char nk[8];
    int argc = 0;
    /* A fire-and-forget step never sees a NOSCRIPT reply: send the body. */
    int mine = step != STEP_IGNORE && step != STEP_INFO && step != STEP_DEQUEUE;
    /* An EVALSHA answered NOSCRIPT is sent again whole, but what was
     * pipelined behind it (the holder info, a rollback) has run by then: a
     * script's first use on a connection goes whole instead. A node that
     * forgets its scripts without a reconnect (SCRIPT FLUSH) is still
     * caught by the NOSCRIPT resend. */
    struct node *nd = &c->nodes[i];
    if (c->kx.sent_on[i] != (const void *)nd->ctx) {
        c->kx.sent_on[i] = nd->ctx;
        c->kx.sent[i] = 0;
    }
    /* A function of the library (redis_functions, and the node has said
     * it runs them) needs no first use by EVAL. */
    const char *fn = use_eval || !mine || nd->fn != 1 ? NULL : lockcore__lua_fn(body);
    if (fn == NULL && slot >= 0 && !(c->kx.sent[i] & (1u << slot))) {
        use_eval = 1;
        c->kx.sent[i] |= 1u << slot;
    }
    /* The sha is the composer's (lockcore__lua_sha): nothing to hash here.
     * A NOSCRIPT reply resends the body by EVAL, which caches it. */
    const char *sha = fn != NULL || slot < 0 || use_eval || !mine ? NULL : lockcore__lua_sha(body);
    if (fn != NULL) {
        argv[argc] = "FCALL", lens[argc++] = 5;
        argv[argc] = fn, lens[argc++] = strlen(fn);
    } else if (sha == NULL) {
        argv[argc] = "EVAL", lens[argc++] = 4;
        argv[argc] = body, lens[argc++] = strlen(body);
    } else {
        argv[argc] = "EVALSHA", lens[argc++] = 7;
        argv[argc] = sha, lens[argc++] = 40;
    }
    snprintf(nk, sizeof(nk), "%d", k->nkeys);
    argv[argc] = nk, lens[argc++] = strlen(nk);
    for (int j = 0; j < k->nkeys; j++)
        argv[argc] = k->keys[j], lens[argc++] = k->klens[j];
    for (int j = 0; j < k->nargs; j++)
        argv[argc] = k->args[j], lens[argc++] = k->alens[j];
    return lockcore__node_send(c, &c->nodes[i], argc, argv, lens, mine ? op : NULL, step, 0, now);
}

/* ---- starting acquisitions of a kind ---- */

int lockcore__kinds_check_client(lockcore_client *c)
{
    if (c->freeing || c->free_pending) {
        lockcore__fmt(c->errmsg, sizeof(c->errmsg), "the client is being freed");
        return LOCKCORE_ECANCELED;
    }
    return 0;
}

int lockcore__kinds_check_name(lockcore_client *c, const char *r, size_t max)
{
    if (r == NULL || r[0] == '\0') {
        lockcore__fmt(c->errmsg, sizeof(c->errmsg), "resource name is empty");
        return -EINVAL;
    }
    if (strnlen(r, max + 1) > max) {
        lockcore__fmt(c->errmsg, sizeof(c->errmsg), "resource name longer than %zu bytes", max);
        return -EINVAL;
    }
    return 0;
}

int lockcore__kinds_is_id(const char *id)
{
    if (strnlen(id, LOCKCORE_ID_LEN + 1) != LOCKCORE_ID_LEN)
        return 0;
    for (size_t i = 0; i < LOCKCORE_ID_LEN; i++)
        if (!((id[i] >= '0' && id[i] <= '9') || (id[i] >= 'a' && id[i] <= 'f')))
            return 0;
    return 1;
}

/* Start an acquisition of a kind: resource as the lock will name it, flags
 * its kind, id NULL for a fresh one. single: one attempt, no retries (a
 * semaphore's permit; the driver retries). */
struct op *lockcore__kinds_start(lockcore_client *c, const char *resource, unsigned flags, const char *id,
                                 int single, const struct lockcore__call *k, lockcore_cb cb, void *arg,
                                 int *rcp)
{
    int rc = lockcore__kinds_check_client(c);
    *rcp = rc;
    /* The keys of op.c name the operation for the waiters of one client and
     * for the fence values it has seen, and a reentrant waiter uses the
     * queue's; the other commands of a kind build their own. */
    struct op *op = rc == 0 ? lockcore__acquire_op(c, resource, id, k, cb, arg, rcp) : NULL;
    if (op == NULL)
        return NULL;
    op->lock.flags = flags;
    op->type = lockcore__kind_of(flags);
    op->joins = id != NULL;
    uint64_t now = lockcore_now_ms();
    /* A deadline already past (1 ms after boot) leaves no room for a retry
     * and keeps the attempt from queueing behind the client's own. */
    op->wait_deadline_ms = single ? 1 : (k->wait_ms ? now + k->wait_ms : 0);
    lockcore__kinds_queue_first(op);
    lockcore__op_start(op, now);
    return op;
}

/* A kind that waits in line makes even its first attempt the queued one
 * where it may wait (one round: refused, it has its place; fair, it takes
 * nothing ahead of the line). A single attempt (deadline 1) never waits. */
void lockcore__kinds_queue_first(struct op *op)
{
    op->queued = op->wait_deadline_ms != 1 && op->type != NULL && op->type->queues != NULL &&
                 op->type->queues(op) &&
                 (op->wait_mode == LOCKCORE_WAIT_FAIR ||
                  (op->wait_mode == LOCKCORE_WAIT_NOTIFY && op->retry_count != 0));
}

/* ---- blocking forms ---- */

void lockcore__kinds_wake(lockcore_client *c, int rc, const struct lockcore_lock *lock, void *arg)
{
    (void)c;
    struct lockcore__waiter *w = arg;
    w->done = 1;
    w->rc = rc;
    w->lock = *lock;
}

/* As the blocking calls of client.c do: nothing may point at the
 * caller's stack (the waiter) once this returns. */
int lockcore__kinds_wait(lockcore_client *c, struct lockcore__waiter *w,
                         void (*abort_fn)(void *, int, const char *), void *what)
{
    int err = 0;
    while (!w->done) {
        int r = lockcore__run_once(c, -1);
        if (r < 0 || c->free_pending) {
            err = r < 0 ? r : LOCKCORE_ECANCELED;
            break;
        }
    }
    if (!w->done) {
        char why[ERRMSG_MAX];
        lockcore__fmt(why, sizeof(why), "%s",
                      err == LOCKCORE_ECANCELED ? "canceled: the client was freed by a callback" : c->errmsg);
        abort_fn(what, err, why);
        while (!w->done && lockcore__flush_deliver(c) > 0)
            ;
    }
    lockcore__leave(c);
    return w->rc;
}

void lockcore__kinds_abort_op(void *what, int err, const char *why)
{
    struct op *op = what;
    if (op->phase != PH_DONE)
        lockcore__op_abort(op, err, why);
}

int lockcore__kinds_blocking(lockcore_client *c, const char *what, const char *resource, unsigned flags,
                             const char *id, const struct lockcore__call *k, struct lockcore_lock *lock)
{
    int rc = lockcore__enter(c, what);
    if (rc < 0)
        return rc;
    struct lockcore__waiter w = {0};
    struct op *op = lockcore__kinds_start(c, resource, flags, id, 0, k, lockcore__kinds_wake, &w, &rc);
    if (op == NULL) {
        lockcore__leave(c);
        return rc;
    }
    rc = lockcore__kinds_wait(c, &w, lockcore__kinds_abort_op, op);
    *lock = w.lock;
    return rc;
}

/* A status read of resource through its kind's status script (flags:
 * 0 for the plain lock's), started. NULL with *rcp and c->errmsg set. */
static struct op *status_start(lockcore_client *c, const char *resource, unsigned flags,
                               struct lockcore_node_status *out, size_t cap, lockcore_cb cb, void *arg,
                               int *rcp)
{
    int rc = lockcore__kinds_check_client(c);
    if (rc == 0 && cb == NULL) {
        lockcore__fmt(c->errmsg, sizeof(c->errmsg), "callback is NULL");
        rc = -EINVAL;
    }
    if (rc == 0)
        rc = lockcore__kinds_check_name(c, resource, LOCKCORE_RESOURCE_MAX);
    if (rc == 0 && (out == NULL || cap < c->n)) {
        lockcore__fmt(c->errmsg, sizeof(c->errmsg), "status needs room for %u nodes", c->n);
        rc = out == NULL ? -EINVAL : -ENOSPC;
    }
    if (rc == 0 && flags != 0 && flags != LOCKCORE_LOCK_REENTRANT && flags != LOCKCORE_LOCK_READ &&
        flags != LOCKCORE_LOCK_WRITE) {
        lockcore__fmt(c->errmsg, sizeof(c->errmsg), "status reads a plain, reentrant or read-write lock");
        rc = -EINVAL;
    }
    struct op *op = NULL;
    if (rc == 0 && (op = lockcore__op_new(c, OP_STATUS, cb, arg)) == NULL) {
        lockcore__fmt(c->errmsg, sizeof(c->errmsg), "out of memory");
        rc = -ENOMEM;
    }
    *rcp = rc;
    if (op == NULL)
        return NULL;
    if (flags == 0) {
        lockcore__op_set_keys(op, resource);
    } else {
        size_t len = strlen(resource);
        memcpy(op->lock.resource, resource, len + 1);
        memcpy(op->key, c->prefix, c->prefix_len);
        memcpy(op->key + c->prefix_len, resource, len + 1);
        op->key_len = c->prefix_len + len;
        op->lock.flags = flags;
        op->type = lockcore__kind_of(flags);
    }
    op->status = out;
    lockcore__op_start(op, lockcore_now_ms());
    return op;
}

int lockcore_status_async(lockcore_client *c, const char *resource, unsigned kind,
                          struct lockcore_node_status *out, size_t cap, lockcore_cb cb, void *arg)
{
    if (c == NULL)
        return -EINVAL;
    int rc;
    status_start(c, resource, kind == LOCKCORE_LOCK_WRITE ? LOCKCORE_LOCK_READ : kind, out, cap, cb, arg,
                 &rc);
    return rc;
}

int lockcore__kinds_status(lockcore_client *c, const char *what, const char *resource, unsigned flags,
                           struct lockcore_node_status *out, size_t cap)
{
    if (c == NULL)
        return -EINVAL;
    int rc = lockcore__enter(c, what);
    if (rc < 0)
        return rc;
    struct lockcore__waiter w = {0};
    struct op *op = status_start(c, resource, flags, out, cap, lockcore__kinds_wake, &w, &rc);
    if (op == NULL) {
        lockcore__leave(c);
        return rc;
    }
    return lockcore__kinds_wait(c, &w, lockcore__kinds_abort_op, op);
}
