/*
 * The reentrant lock. Its lock key holds the owner, the id of the
 * acquisition that took it; each hold is a field of "{key}:holds" named
 * by the hold's lock id, with its own expiry, beside the owner and the
 * hold's token (lockcore/lua/lib/holds.lua). A re-entry names a live hold
 * of the owner (lockcore_reentrant_acquire with its id) and adds a hold of
 * its own; a release removes its own; the key goes when no live hold is
 * left. Nothing is counted, and no hold ever shortens another's TTL.
 * docs/lockcore.md ("Reentrant lock") has the argument.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kinds.h"
#include "lockcore_lua.h"

/* The scripts, by their slots (kinds.h): lockcore/lua/re_*.lua. */
static const char *const re_scripts[] = {
    [KS_RE_ACQUIRE] = lockcore__lua_re_acquire, [KS_RE_RAISE] = lockcore__lua_re_raise,
    [KS_RE_EXTEND] = lockcore__lua_re_extend,   [KS_RE_RELEASE] = lockcore__lua_re_release,
    [KS_RE_ENTER] = lockcore__lua_re_enter,     [KS_RE_INFO] = lockcore__lua_set_info,
};

static int re_resend(struct op *op, unsigned i, enum step step, int use_eval, uint64_t now)
{
    lockcore_client *c = op->c;
    struct lockcore__keyset *ks = lockcore__kinds_keyset(c, op->lock.resource);
    if (ks == NULL)
        return -ENOMEM;
    struct lockcore__kcmd k = {.nkeys = 0};
    char reserve[24];
    int s = -1;
    const char *body = NULL;
#define KEY(p) (k.keys[k.nkeys] = (p), k.klens[k.nkeys++] = strlen(p))
#define ARG(p) (k.args[k.nargs] = (p), k.alens[k.nargs++] = strlen(p))
    struct step_nums num;
    lockcore__step_nums(op, &num);
    switch (step) {
    case STEP_LOCK:
        /* A fresh step: what this node said of a previous one is void. */
        op->kx.reentered[i] = 0;
        op->kx.held_token[i] = 0;
        if (op->queued) /* a waiter's attempt: the key holds the owner */
            return lockcore__queued_lock(op, i, op->qid, ks->holds, use_eval, now);
        if (op->joins) {
            s = KS_RE_ENTER;
            KEY(ks->lock[0]);
            KS_FHASH(ks, 0);
            KEY(ks->fence[0]);
            KEY(ks->holds);
            ARG(op->kx.join);
            ARG(op->lock.id);
            ARG(num.ttl);
            ARG(ks->fbucket[0]);
            break;
        }
        s = KS_RE_ACQUIRE;
        KEY(ks->lock[0]);
        KS_FHASH(ks, 0);
        KEY(ks->fence[0]);
        KEY(ks->holds);
        ARG(op->qid);
        ARG(op->lock.id);
        ARG(num.ttl);
        ARG(num.prop);
        ARG(num.idle);
        ARG(num.ahead);
        ARG(ks->fbucket[0]);
        break;
    case STEP_RAISE:
        s = KS_RE_RAISE;
        KS_FHASH(ks, 0);
        KEY(ks->fence[0]);
        KEY(ks->holds);
        ARG(num.prop);
        ARG(num.idle);
        ARG(op->lock.id);
        ARG(ks->fbucket[0]);
        ARG(num.ahead);
        break;
    case STEP_EXTEND:
        s = KS_RE_EXTEND;
        KEY(ks->lock[0]);
        KS_FHASH(ks, 0);
        KEY(ks->fence[0]);
        KEY(ks->info[0]);
        KEY(ks->holds);
        ARG(op->lock.id);
        ARG(num.ttl);
        ARG(num.fexp);
        ARG(num.tok);
        ARG(ks->fbucket[0]);
        ARG(num.ahead);
        break;
    case STEP_RELEASE:
    case STEP_IGNORE:
        /* This hold goes; the last live one takes the key, the holds and
         * the info with it and tells the first waiter, as a plain release
         * does (a rollback only deletes). */
        s = KS_RE_RELEASE;
        KEY(ks->lock[0]);
        KEY(ks->info[0]);
        KEY(ks->waiters[0]);
        KEY(ks->waiting[0]);
        KEY(ks->wanted[0]);
        KEY(ks->holds);
        ARG(op->lock.id);
        lockcore__release_arg(op, step, reserve, sizeof(reserve));
        ARG(reserve);
        ARG(op->qid);
        break;
    case STEP_INFO:
        /* The owner's info: where the key holds the owner (a re-entry
         * leaves the owner's info alone). */
        if (op->joins)
            return 0;
        s = KS_RE_INFO;
        KEY(ks->lock[0]);
        KEY(ks->info[0]);
        ARG(op->qid);
        k.args[k.nargs] = c->info, k.alens[k.nargs++] = c->info_len;
        ARG(num.ttl);
        break;
    case STEP_STATUS:
        body = lockcore__lua_re_status; /* by EVAL: status is rare */
        KEY(ks->lock[0]);
        KS_FHASH(ks, 0);
        KEY(ks->fence[0]);
        KEY(ks->info[0]);
        KEY(ks->holds);
        ARG(ks->fbucket[0]);
        break;
    case STEP_DEQUEUE:
        /* The plain step with the holds: a key that holds the owner with
         * its holds is a grant's leftover for the rollback, not a
         * reservation to hand back. */
        body = lockcore__lua_dequeue;
        KEY(ks->waiters[0]);
        KEY(ks->waiting[0]);
        KEY(ks->lock[0]);
        KEY(ks->wanted[0]);
        KEY(ks->holds);
        ARG(op->qid);
        lockcore__release_mode(c, op->wait_mode, reserve, sizeof(reserve));
        ARG(reserve);
        break;
    default:
        return -EINVAL;
    }
#undef KEY
#undef ARG
    return lockcore__kinds_send(op, i, step, s, body ? body : re_scripts[s], use_eval, &k, now);
}

/* A re-entry's reply: {1, 0, '0', '', -1, token, owner} where the node
 * added the hold. */
static void re_lock_reply(struct op *op, unsigned i, const redisReply *r)
{
    if (!op->joins || r->type != REDIS_REPLY_ARRAY || r->elements != 7 ||
        r->element[0]->type != REDIS_REPLY_INTEGER || r->element[0]->integer != 1 ||
        r->element[5]->type != REDIS_REPLY_STRING || r->element[6]->type != REDIS_REPLY_STRING ||
        r->element[6]->len != LOCKCORE_ID_LEN)
        return;
    uint64_t t;
    if (fencing_token_parse(r->element[5]->str, r->element[5]->len, &t) < 0)
        return;
    op->kx.reentered[i] = 1;
    op->kx.held_token[i] = t;
    memcpy(op->kx.owner, r->element[6]->str, LOCKCORE_ID_LEN);
    op->kx.owner[LOCKCORE_ID_LEN] = '\0';
}

/* The hold's token to the nodes that may keep a smaller one (fire and
 * forget, behind the attempt's own commands on each connection): only
 * where the key still holds the owner, and only ever upwards. A later
 * re-entry takes the largest token of a majority, which includes a node
 * that a majority's acceptance reached (docs/lockcore.md). */
static void send_token(struct op *op, const char *owner, uint64_t token, const uint8_t *skip)
{
    lockcore_client *c = op->c;
    char holds[INFO_KEY_MAX + 1], t[24];
    lockcore__kinds_tagged(holds, op->key, ":holds");
    lockcore__u64s(t, sizeof(t), token);
    const char *argv[] = {"EVAL", lockcore__lua_re_token, "2", op->key, holds, owner, t};
    size_t lens[7];
    for (int k = 0; k < 7; k++)
        lens[k] = strlen(argv[k]);
    uint64_t now = lockcore_now_ms();
    for (unsigned i = 0; i < c->n; i++)
        if (!skip[i] && c->nodes[i].state != NODE_DOWN)
            lockcore__node_send(c, &c->nodes[i], 7, argv, lens, NULL, STEP_IGNORE, 0, now);
}

static void re_granted(struct op *op)
{
    lockcore_client *c = op->c;
    if (!c->o.fencing || op->lock.token == 0)
        return;
    uint8_t skip[LOCKCORE_NODES_MAX] = {0};
    unsigned n = 0;
    for (unsigned i = 0; i < c->n; i++) {
        /* A re-entering node with the token, or a first hold's node that
         * accepted it in its own acquire: nothing to fix there. */
        skip[i] = op->joins ? op->kx.reentered[i] && op->kx.held_token[i] >= op->lock.token
                            : op->raises == 0 && op->accepted[i];
        n += skip[i];
    }
    if (n < c->n)
        send_token(op, op->joins ? op->kx.owner : op->qid, op->lock.token, skip);
}

/* A re-entry: did a majority add our hold (op->proposal: the hold's
 * token, the largest any of them keeps), may it still, or not? Each node
 * keeps the token of the owner's first hold where it accepted it, and
 * the token agreed on goes to the others afterwards, only ever upwards;
 * a majority of re-entering nodes meets the majority that accepted it,
 * so the largest is the hold's token (docs/lockcore.md). A re-entry is
 * never a fresh grant: if a majority refused (the hold it named is gone
 * there), the acquisition goes on at once as a first hold of its own. */
static enum kind_verdict re_decide(struct op *op, int *rc)
{
    lockcore_client *c = op->c;
    if (!op->joins)
        return KIND_PLAIN;
    unsigned n = 0, open = 0, no = 0;
    uint64_t t = 0;
    for (unsigned i = 0; i < c->n; i++) {
        open += op->slot[i] == SLOT_OPEN;
        no += op->slot[i] == SLOT_NO;
        if (op->slot[i] == SLOT_YES && op->kx.reentered[i] && op->kx.held_token[i] > t)
            t = op->kx.held_token[i];
        n += op->slot[i] == SLOT_YES && op->kx.reentered[i];
    }
    if (n >= c->quorum) {
        op->proposal = t;
        if (t != 0 || !c->o.fencing)
            return KIND_GRANT;
        lockcore__fmt(op->errmsg, sizeof(op->errmsg),
                      "re-enter '%s': the re-entering nodes keep no token for the hold", op->lock.resource);
        *rc = LOCKCORE_EFENCE;
        return KIND_FAIL;
    }
    if (n + open >= c->quorum)
        return KIND_WAIT;
    if (no > c->n - c->quorum) {
        op->joins = 0;
        op->kx.join[0] = '\0';
        op->again = 1;
        op->free_next = 1;
        lockcore__kinds_queue_first(op); /* now a first hold: it waits in line as one */
    }
    return KIND_PLAIN; /* failed: the plain decision says why */
}

/* A first hold waits in the nodes' queue as a plain lock does; a
 * re-entry polls (the hold it names is there or gone, and in the queue
 * its owner's key would pass for a reservation). */
static int re_queues(const struct op *op)
{
    return !op->joins;
}

const struct lockcore__kind lockcore__kind_reentrant = {
    .name = "reentrant",
    .flag = LOCKCORE_LOCK_REENTRANT,
    .resend = re_resend,
    .lock_reply = re_lock_reply,
    .decide_lock = re_decide,
    .granted = re_granted,
    .queues = re_queues,
    .release = lockcore__kinds_keyset_free,
};

static int check_reentrant(lockcore_client *c, const char *resource, const char *id)
{
    int rc = lockcore__kinds_check_name(c, resource, LOCKCORE_RESOURCE_MAX);
    if (rc == 0 && id != NULL && !lockcore__kinds_is_id(id)) {
        lockcore__fmt(c->errmsg, sizeof(c->errmsg), "lock id must be %d lowercase hex digits",
                      LOCKCORE_ID_LEN);
        rc = -EINVAL;
    }
    return rc;
}

struct op *lockcore__re_start(lockcore_client *c, const char *resource, const char *id,
                              const struct lockcore__call *k, lockcore_cb cb, void *arg, int *rcp)
{
    *rcp = check_reentrant(c, resource, id);
    return *rcp == 0 ? lockcore__kinds_start(c, resource, LOCKCORE_LOCK_REENTRANT, id, 0, k, cb, arg, rcp)
                     : NULL;
}

int lockcore_reentrant_acquire_async(lockcore_client *c, const char *resource, const char *id, lockcore_cb cb,
                                     void *arg)
{
    struct lockcore_request rq = {.kind = LOCKCORE_LOCK_REENTRANT, .resource = resource, .join = id};
    return lockcore_acquire_call_async(c, &rq, NULL, cb, arg);
}

int lockcore_reentrant_acquire(lockcore_client *c, const char *resource, const char *id,
                               struct lockcore_lock *lock)
{
    struct lockcore_request rq = {.kind = LOCKCORE_LOCK_REENTRANT, .resource = resource, .join = id};
    return lockcore__acquire_blocking(c, "lockcore_reentrant_acquire", &rq, NULL, lock);
}

int lockcore_reentrant_status(lockcore_client *c, const char *resource, struct lockcore_node_status *out,
                              size_t cap)
{
    return lockcore__kinds_status(c, "lockcore_reentrant_status", resource, LOCKCORE_LOCK_REENTRANT, out,
                                  cap);
}
