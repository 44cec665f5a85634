/*
 * The read-write lock: many readers or one writer. The writer holds the
 * plain key (its value the writer's id); readers are members of the sorted
 * set "{key}:readers", scored by the node time (ms) at which each expires.
 * A writer that readers refused declares that it waits in "{key}:wintent"
 * (its id, for its TTL), and no node admits a new reader while a writer
 * holds the key or waits. docs/lockcore.md has the intersection argument;
 * a reader's token is the newest fence value it saw, not a new token.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kinds.h"
#include "lockcore_lua.h"

/* The scripts, by their slots (kinds.h): lockcore/lua/rw_*.lua. */
static const char *const rw_scripts[] = {
    [KS_RW_READ] = lockcore__lua_rw_read,
    [KS_RW_WRITE] = lockcore__lua_rw_write,
    [KS_RW_RRELEASE] = lockcore__lua_rw_rrelease,
    [KS_RW_REXTEND] = lockcore__lua_rw_rextend,
    [KS_RW_WRELEASE] = lockcore__lua_rw_wrelease,
    [KS_RW_READ_QUEUED] = lockcore__lua_rw_read_queued,
    [KS_RW_WRITE_QUEUED] = lockcore__lua_rw_write_queued,
};

static int rw_resend(struct op *op, unsigned i, enum step step, int use_eval, uint64_t now)
{
    lockcore_client *c = op->c;
    int write = (op->lock.flags & LOCKCORE_LOCK_WRITE) != 0;
    struct lockcore__keyset *ks = lockcore__kinds_keyset(c, op->lock.resource);
    if (ks == NULL)
        return -ENOMEM;
    struct lockcore__kcmd k = {.nkeys = 0};
    char res[24];
    int s = -1, rc;
    const char *body = NULL;
#define KEY(p) (k.keys[k.nkeys] = (p), k.klens[k.nkeys++] = strlen(p))
#define ARG(p) (k.args[k.nargs] = (p), k.alens[k.nargs++] = strlen(p))
    struct step_nums num;
    lockcore__step_nums(op, &num);
    switch (step) {
    case STEP_LOCK:
        KEY(ks->lock[0]);
        KS_FHASH(ks, 0);
        KEY(ks->fence[0]);
        KEY(ks->readers);
        KEY(ks->intent);
        if (op->queued) {
            /* A waiter of either side: its place in the key's queue. */
            s = write ? KS_RW_WRITE_QUEUED : KS_RW_READ_QUEUED;
            KEY(ks->waiters[0]);
            KEY(ks->waiting[0]);
            KEY(ks->wanted[0]);
            ARG(op->lock.id);
            ARG(num.ttl);
            if (write) {
                ARG(num.prop);
                ARG(num.idle);
            }
            ARG(num.ticket);
            ARG(num.qttl);
            ARG(num.mode);
            ARG(op->qid);
            if (write)
                ARG(num.ahead);
            ARG(ks->fbucket[0]);
            break;
        }
        s = write ? KS_RW_WRITE : KS_RW_READ;
        ARG(op->lock.id);
        ARG(num.ttl);
        if (write) {
            ARG(num.prop);
            ARG(num.idle);
            ARG(op->qid); /* its intent names the acquisition */
            ARG(num.ahead);
        }
        ARG(ks->fbucket[0]);
        break;
    case STEP_RELEASE:
    case STEP_IGNORE:
        if (write) {
            /* The plain release, telling waiters; a real release also ends
             * the writer's intent (a rollback keeps it: the writer retries). */
            s = KS_RW_WRELEASE;
            KEY(ks->lock[0]);
            KEY(ks->info[0]);
            KEY(ks->waiters[0]);
            KEY(ks->waiting[0]);
            KEY(ks->wanted[0]);
            KEY(ks->intent);
            ARG(op->lock.id);
            lockcore__release_arg(op, step, res, sizeof(res));
            ARG(res);
            ARG(op->qid);
        } else {
            /* Its own member goes; the last reader names the first waiter. */
            s = KS_RW_RRELEASE;
            KEY(ks->readers);
            KEY(ks->lock[0]);
            KEY(ks->waiters[0]);
            KEY(ks->waiting[0]);
            KEY(ks->wanted[0]);
            KEY(ks->intent);
            ARG(op->lock.id);
            lockcore__release_arg(op, step, res, sizeof(res));
            ARG(res);
            ARG(op->qid);
        }
        break;
    case STEP_EXTEND:
        if (write) {
            return 1; /* the plain extension: the writer holds the plain key */
        }
        s = KS_RW_REXTEND;
        KEY(ks->readers);
        ARG(op->lock.id);
        ARG(num.ttl);
        break;
    case STEP_STATUS:
        if (!(op->lock.flags & LOCKCORE_LOCK_READ))
            goto plain;
        body = lockcore__lua_rw_status;
        KEY(ks->lock[0]);
        KS_FHASH(ks, 0);
        KEY(ks->fence[0]);
        KEY(ks->info[0]);
        KEY(ks->readers);
        KEY(ks->intent);
        ARG(ks->fbucket[0]);
        break;
    case STEP_RAISE:
        return 1; /* a writer's second round, a reader's write-back: the plain raise */
    case STEP_INFO:
    plain:
        if (write)
            return 1; /* as a plain lock */
        return 0;     /* a reader keeps no holder info */
    case STEP_DEQUEUE:
        return 1; /* the plain step: one queue */
    default:
        return -EINVAL;
    }
#undef KEY
#undef ARG
    rc = lockcore__kinds_send(op, i, step, body == lockcore__lua_rw_status ? -1 : s,
                              body ? body : rw_scripts[s], use_eval, &k, now);
    return rc;
}

/* A reader's token is not a new one (the top of this file): a fence value
 * the nodes reported, chosen so that every write granted before the read
 * began has a token no larger, and every write that begins after it a
 * larger one (docs/fencing.md, "Read-write"). A write's token is on the
 * fences of a majority (q of n), so with k nodes' values known at least
 * q - (n - k) of them are at least it: the token is the (q - (n - k))-th
 * largest known value. With every node known that is the q-th largest,
 * which q nodes hold: a later writer's majority meets them and must go
 * above it. With nodes missing it may be held by fewer: the reader waits
 * for the others, and then writes it back to a majority (a raise that
 * counts where a node's fence is at least the token) before it is
 * granted, unless the value is far ahead of its clock (a minority's trace
 * of a fast clock, which a write-back would spread): the attempt fails
 * then, and is retried. */
static enum kind_verdict read_decide(struct op *op, int *rc)
{
    lockcore_client *c = op->c;
    unsigned yes = 0, open = 0, at = 0;
    for (unsigned i = 0; i < c->n; i++) {
        yes += op->slot[i] == SLOT_YES;
        open += op->slot[i] == SLOT_OPEN;
    }
    uint64_t v[LOCKCORE_NODES_MAX];
    unsigned k = lockcore__known_fences(op, v);
    if (yes < c->quorum || !c->o.fencing || k < c->quorum)
        return KIND_PLAIN;
    op->proposal = v[k - (c->quorum - (c->n - k))]; /* the (q - (n - k))-th largest */
    for (unsigned i = 0; i < k; i++)
        at += v[i] >= op->proposal;
    if (at >= c->quorum || op->proposal == 0)
        return KIND_PLAIN;
    if (open > 0)
        return KIND_WAIT; /* the others may hold it: no round for nothing */
    if (op->proposal > lockcore__far_from(c, 1)) {
        lockcore__fmt(op->errmsg, sizeof(op->errmsg),
                      "acquire '%s': a read would write a fence far ahead of this client's clock back to a "
                      "majority; not while nodes are missing",
                      op->lock.resource);
        *rc = LOCKCORE_EFENCE;
        return KIND_FAIL;
    }
    return KIND_WRITE_BACK;
}

/* Both sides wait in the key's queue: a writer's release names the
 * first waiter (a reader or a writer), a reader admitted wakes the next,
 * the last reader's release names the first (a writer). */
static int rw_queues(const struct op *op)
{
    (void)op;
    return 1;
}

const struct lockcore__kind lockcore__kind_read = {
    .name = "read",
    .flag = LOCKCORE_LOCK_READ,
    .resend = rw_resend,
    .decide_lock = read_decide,
    .queues = rw_queues,
    .release = lockcore__kinds_keyset_free,
};

static int write_started_by(const struct op *op, lockcore_cb cb, void *arg);

const struct lockcore__kind lockcore__kind_write = {
    .name = "write",
    .flag = LOCKCORE_LOCK_WRITE,
    .resend = rw_resend,
    .queues = rw_queues,
    .release = lockcore__kinds_keyset_free,
    .started_by = write_started_by,
};

/* A writer that gives up, or is granted, must not leave its intent behind
 * to keep readers out until its TTL: its acquisition's callback is
 * wrapped, and its end deletes the intent where it is still the writer's
 * (fire-and-forget, on every connection behind the attempt's own
 * commands). */
struct rw_call {
    lockcore_cb cb;
    void *arg;
    char id[LOCKCORE_ID_LEN + 1];
    char intent[INFO_KEY_MAX + 1];
};

static void rw_done(lockcore_client *c, int rc, const struct lockcore_lock *lock, void *arg)
{
    struct rw_call *w = arg;
    /* Given up, or granted (a node that refused its last attempt may still
     * keep its intent, and would keep readers out for nothing): the intent
     * goes wherever it is still this writer's. */
    /* Even while the client is freed: what is queued here is sent before
     * the connections close. */
    const char *argv[] = {"EVAL", lockcore__lua_rw_intent_clear, "1", w->intent, w->id};
    size_t lens[5];
    for (int k = 0; k < 5; k++)
        lens[k] = strlen(argv[k]);
    uint64_t now = lockcore_now_ms();
    for (unsigned i = 0; i < c->n; i++)
        if (c->nodes[i].state != NODE_DOWN)
            lockcore__node_send(c, &c->nodes[i], 5, argv, lens, NULL, STEP_IGNORE, 0, now);
    for (unsigned i = 0; i < c->n; i++) /* before the callback, however long it runs */
        lockcore__node_flush(c, &c->nodes[i]);
    lockcore_cb cb = w->cb;
    void *a = w->arg;
    free(w);
    cb(c, rc, lock, a);
}

/* A writer's acquisition carries rw_done: the caller's callback is in it,
 * in flight or ended in this turn (lockcore_cancel ends both). */
static int write_started_by(const struct op *op, lockcore_cb cb, void *arg)
{
    const struct rw_call *w = op->arg;
    return op->cb == rw_done && w != NULL && w->cb == cb && w->arg == arg;
}

struct op *lockcore__rw_start(lockcore_client *c, const char *resource, int write,
                              const struct lockcore__call *k, lockcore_cb cb, void *arg, int *rcp)
{
    int rc = lockcore__kinds_check_name(c, resource, LOCKCORE_RESOURCE_MAX);
    if (rc == 0 && cb == NULL) {
        lockcore__fmt(c->errmsg, sizeof(c->errmsg), "callback is NULL");
        rc = -EINVAL;
    }
    if (rc < 0) {
        *rcp = rc;
        return NULL;
    }
    if (!write)
        return lockcore__kinds_start(c, resource, LOCKCORE_LOCK_READ, NULL, 0, k, cb, arg, rcp);
    struct rw_call *w = calloc(1, sizeof(*w));
    if (w == NULL) {
        lockcore__fmt(c->errmsg, sizeof(c->errmsg), "out of memory");
        *rcp = -ENOMEM;
        return NULL;
    }
    w->cb = cb;
    w->arg = arg;
    struct op *op = lockcore__kinds_start(c, resource, LOCKCORE_LOCK_WRITE, NULL, 0, k, rw_done, w, rcp);
    if (op == NULL) {
        free(w);
        return NULL;
    }
    memcpy(w->id, op->qid, sizeof(w->id)); /* the intent names the acquisition */
    lockcore__kinds_tagged(w->intent, op->key, ":wintent");
    return op;
}

int lockcore_rw_acquire_async(lockcore_client *c, const char *resource, int write, lockcore_cb cb, void *arg)
{
    struct lockcore_request rq = {.kind = write ? LOCKCORE_LOCK_WRITE : LOCKCORE_LOCK_READ,
                                  .resource = resource};
    return lockcore_acquire_call_async(c, &rq, NULL, cb, arg);
}

int lockcore_rw_acquire(lockcore_client *c, const char *resource, int write, struct lockcore_lock *lock)
{
    struct lockcore_request rq = {.kind = write ? LOCKCORE_LOCK_WRITE : LOCKCORE_LOCK_READ,
                                  .resource = resource};
    return lockcore__acquire_blocking(c, "lockcore_rw_acquire", &rq, NULL, lock);
}

int lockcore_rw_status(lockcore_client *c, const char *resource, struct lockcore_node_status *out, size_t cap)
{
    /* The status op carries the read flag: the readers and the waiting
     * writer come back. */
    return lockcore__kinds_status(c, "lockcore_rw_status", resource, LOCKCORE_LOCK_READ, out, cap);
}
