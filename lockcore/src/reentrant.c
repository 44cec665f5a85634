/*
 * The reentrant lock: the owner of a hold (its lock id) may acquire it
 * again; a hold count in "{key}:holds" (a hash: n the count, t the hold's
 * token) goes up, the token stays. The key's value stays the id, so other
 * Redlock clients see an ordinary lock. docs/lockcore.md has the argument
 * for the token a re-entry returns.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kinds.h"
#include "lockcore_lua.h"

/* The scripts, by their slots (kinds.h): lockcore/lua/re_*.lua. */
static const char *const re_scripts[] = {
    [KS_RE_ACQUIRE] = lockcore__lua_re_acquire,
    [KS_RE_RAISE] = lockcore__lua_re_raise,
    [KS_RE_EXTEND] = lockcore__lua_re_extend,
    [KS_RE_RELEASE] = lockcore__lua_re_release,
};

int lockcore__re_resend(struct op *op, unsigned i, enum step step, int use_eval, uint64_t now)
{
    lockcore_client *c = op->c;
    struct lockcore__keyset *ks = lockcore__kinds_keyset(c, op->lock.resource);
    if (ks == NULL)
        return -ENOMEM;
    struct lockcore__kcmd k = {.nkeys = 0};
    char reserve[24];
    int s = -1, rc;
    const char *body = NULL;
#define KEY(p) (k.keys[k.nkeys++] = (p))
#define ARG(p) (k.args[k.nargs] = (p), k.alens[k.nargs++] = strlen(p))
    struct step_nums num;
    lockcore__step_nums(op, &num);
    switch (step) {
    case STEP_LOCK:
        /* A fresh step: what this node said of a previous one is void. */
        op->kx.reentered[i] = 0;
        op->kx.held_token[i] = 0;
        s = KS_RE_ACQUIRE;
        KEY(ks->lock[0]);
        KEY(ks->fence[0]);
        KEY(ks->holds);
        ARG(op->lock.id);
        ARG(num.ttl);
        ARG(num.prop);
        ARG(num.idle);
        break;
    case STEP_RAISE:
        s = KS_RE_RAISE;
        KEY(ks->fence[0]);
        KEY(ks->lock[0]);
        KEY(ks->holds);
        ARG(num.prop);
        ARG(num.idle);
        ARG(op->lock.id);
        break;
    case STEP_EXTEND:
        s = KS_RE_EXTEND;
        KEY(ks->lock[0]);
        KEY(ks->fence[0]);
        KEY(ks->info[0]);
        KEY(ks->holds);
        ARG(op->lock.id);
        ARG(num.ttl);
        ARG(num.fexp);
        ARG(num.tok);
        break;
    case STEP_RELEASE:
    case STEP_IGNORE:
        /* One hold less; the last deletes the lock, the count and the
         * info, and tells the first waiter, as a plain release does. */
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
        break;
    case STEP_INFO:
        return 1; /* the plain script: one key */
    case STEP_STATUS:
        s = -1; /* EVAL */
        body = lockcore__lua_re_status;
        KEY(ks->lock[0]);
        KEY(ks->fence[0]);
        KEY(ks->info[0]);
        KEY(ks->holds);
        break;
    default:
        return -EINVAL;
    }
#undef KEY
#undef ARG
    rc = lockcore__kinds_send(op, i, step, s, body ? body : re_scripts[s], use_eval, &k, now);
    return rc;
}

/* A reentrant acquire's reply: {1, 0, fence, '', -1, 1, token} when the
 * node re-entered our hold. */
void lockcore__kinds_lock_reply(struct op *op, unsigned i, const redisReply *r)
{
    if (r->type != REDIS_REPLY_ARRAY || r->elements != 8 || r->element[5]->type != REDIS_REPLY_INTEGER ||
        r->element[5]->integer != 1 || r->element[6]->type != REDIS_REPLY_STRING)
        return;
    uint64_t t;
    if (fencing_token_parse(r->element[6]->str, r->element[6]->len, &t) < 0)
        return;
    op->kx.reentered[i] = 1;
    op->kx.held_token[i] = t;
    if (r->element[7]->type == REDIS_REPLY_INTEGER && r->element[7]->integer > op->kx.holds)
        op->kx.holds = r->element[7]->integer;
}

/* A re-entry was decided: the nodes that did not re-enter may have set
 * the key afresh in the same attempt (where the hold had been lost), with
 * a count of 1 and this attempt's proposal as the hold's token. Give them
 * the majority's count and token, behind the attempt's own command on
 * each connection, so that the hold's token stays the one a majority
 * accepted and later re-entries find it. */
static void reentry_fixup(struct op *op, uint64_t token)
{
    lockcore_client *c = op->c;
    char holds[INFO_KEY_MAX + 1], n[24], t[24];
    lockcore__kinds_tagged(holds, op->key, ":holds");
    lockcore__u64s(n, sizeof(n), op->kx.holds > 0 ? (uint64_t)op->kx.holds : 1);
    lockcore__u64s(t, sizeof(t), token);
    const char *argv[] = {"EVAL", lockcore__lua_re_fixup, "2", op->key, holds, op->lock.id, n, t};
    size_t lens[8];
    for (int k = 0; k < 8; k++)
        lens[k] = strlen(argv[k]);
    uint64_t now = lockcore_now_ms();
    for (unsigned i = 0; i < c->n; i++) {
        /* Only where the attempt may have set the key afresh: a node that
         * said so, or one that has not answered yet. */
        int fresh = op->slot[i] == SLOT_YES && !op->kx.reentered[i];
        if (!(fresh || op->slot[i] == SLOT_OPEN) || c->nodes[i].state == NODE_DOWN)
            continue;
        lockcore__node_send(c, &c->nodes[i], 8, argv, lens, NULL, STEP_IGNORE, 0, now);
    }
}

/* Did a majority re-enter our hold (1), may it still (-1), or not (0)?
 * If it did, the grant keeps the hold's token:
 * the largest any of them keeps. Each node keeps only proposals of this id
 * that it accepted while the lock held the id, and a majority accepted the
 * hold's token, so a majority of re-entering nodes includes one that keeps
 * it, and none keeps a larger one (docs/lockcore.md). With fencing and no
 * token kept anywhere, it is not a re-entry: the attempt goes on as a
 * fresh grant, which agrees on a new token. */
int lockcore__kinds_reentered(struct op *op)
{
    unsigned n = 0, open = 0;
    uint64_t t = 0;
    for (unsigned i = 0; i < op->c->n; i++) {
        open += op->slot[i] == SLOT_OPEN;
        if (op->slot[i] == SLOT_YES && op->kx.reentered[i]) {
            n++;
            if (op->kx.held_token[i] > t)
                t = op->kx.held_token[i];
        }
    }
    if (n >= op->c->quorum && (t != 0 || !op->c->o.fencing)) {
        op->proposal = t;
        if (n < op->c->n)
            reentry_fixup(op, t);
        return 1;
    }
    /* Not before every node that may still re-enter has answered: the
     * fresh-grant path would agree on a new token (a second round) for a
     * hold that a majority is about to re-enter. */
    return n + open >= op->c->quorum ? -1 : 0;
}

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

int lockcore_reentrant_acquire_async(lockcore_client *c, const char *resource, const char *id, lockcore_cb cb,
                                     void *arg)
{
    if (c == NULL)
        return -EINVAL;
    int rc = check_reentrant(c, resource, id);
    if (rc == 0)
        lockcore__kinds_start(c, resource, LOCKCORE_LOCK_REENTRANT, id, 0, cb, arg, &rc);
    return rc;
}

int lockcore_reentrant_acquire(lockcore_client *c, const char *resource, const char *id,
                               struct lockcore_lock *lock)
{
    if (c == NULL)
        return -EINVAL;
    if (lock == NULL) {
        lockcore__fmt(c->errmsg, sizeof(c->errmsg), "lock is NULL");
        return -EINVAL;
    }
    int rc = check_reentrant(c, resource, id);
    if (rc < 0)
        return rc;
    return lockcore__kinds_blocking(c, "lockcore_reentrant_acquire", resource, LOCKCORE_LOCK_REENTRANT, id,
                                    lock);
}

int lockcore_reentrant_status(lockcore_client *c, const char *resource, struct lockcore_node_status *out,
                              size_t cap)
{
    return lockcore__kinds_status(c, "lockcore_reentrant_status", resource, LOCKCORE_LOCK_REENTRANT, out,
                                  cap);
}
