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

static const char *const re_scripts[] = {
    /* KEYS[1] lock, KEYS[2] fence, KEYS[3] holds; ARGV[1] id, ARGV[2] ttl,
     * ARGV[3] proposal, ARGV[4] fence idle expiry ms.
     * Held under our id: one more hold (a held key without a count has
     * one hold), the TTL pushed out to at least ttl, and 1, the token kept
     * for the hold and the new count returned (elements 6 to 8; the fence
     * is not read: a re-entry proposes nothing).
     * Free: the fenced acquire, with a hold count of 1 and the proposal
     * kept as the hold's token where it was accepted. Held by another:
     * refused with the holder, as fencing_script_acquire. */
    [KS_RE_ACQUIRE] = "local v = redis.call('GET', KEYS[1])\n"
                      "if v == ARGV[1] then\n"
                      "  local n = redis.call('HINCRBY', KEYS[3], 'n', 1)\n"
                      "  if n == 1 then n = 2; redis.call('HSET', KEYS[3], 'n', 2) end\n"
                      "  local pt = redis.call('PTTL', KEYS[1])\n"
                      "  local ttl = tonumber(ARGV[2])\n"
                      "  if pt < ttl then redis.call('PEXPIRE', KEYS[1], ARGV[2]); pt = ttl end\n"
                      "  redis.call('PEXPIRE', KEYS[3], pt)\n"
                      "  return {1, 0, '0', '', -1, 1, redis.call('HGET', KEYS[3], 't') or '0', n}\n"
                      "end\n"
                      "local f = tonumber(redis.call('GET', KEYS[2]) or '0') or 0\n"
                      "local fs = string.format('%.0f', f)\n"
                      "if v then return {0, 0, fs, v, redis.call('PTTL', KEYS[1])} end\n"
                      "redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])\n"
                      "local t = '0'\n"
                      "if tonumber(ARGV[3]) > f then\n"
                      "  if ARGV[4] ~= '0' then redis.call('SET', KEYS[2], ARGV[3], 'PX', ARGV[4])\n"
                      "  else redis.call('SET', KEYS[2], ARGV[3]) end\n"
                      "  t = ARGV[3]\n"
                      "  fs = ARGV[3]\n"
                      "end\n"
                      "redis.call('DEL', KEYS[3])\n"
                      "redis.call('HSET', KEYS[3], 'n', 1, 't', t)\n"
                      "redis.call('PEXPIRE', KEYS[3], ARGV[2])\n"
                      "if t == '0' then return {1, 0, fs} end\n"
                      "return {1, 1, fs}\n",
    /* KEYS[1] fence, KEYS[2] lock, KEYS[3] holds; ARGV[1] proposal,
     * ARGV[2] idle expiry ms, ARGV[3] id. fencing_script_raise, and where
     * the lock holds our id the accepted proposal becomes the hold's token. */
    [KS_RE_RAISE] =
        "local f = tonumber(redis.call('GET', KEYS[1]) or '0') or 0\n"
        "local p = tonumber(ARGV[1])\n"
        "if p > f then\n"
        "  if ARGV[2] ~= '0' then redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])\n"
        "  else redis.call('SET', KEYS[1], ARGV[1]) end\n"
        "  if redis.call('GET', KEYS[2]) == ARGV[3] then redis.call('HSET', KEYS[3], 't', ARGV[1]) end\n"
        "  return {1, ARGV[1]}\n"
        "end\n"
        "return {0, string.format('%.0f', f)}\n",
    /* KEYS[1] lock, KEYS[2] fence, KEYS[3] info, KEYS[4] holds; ARGV as
     * SCRIPT_EXTEND. SCRIPT_EXTEND, and the hold count keeps the key's TTL. */
    [KS_RE_EXTEND] =
        "if redis.call('GET', KEYS[1]) ~= ARGV[1] then return 0 end\n"
        "redis.call('PEXPIRE', KEYS[3], ARGV[2])\n"
        "redis.call('PEXPIRE', KEYS[4], ARGV[2])\n"
        "local t = tonumber(ARGV[4])\n"
        "local f = tonumber(redis.call('GET', KEYS[2]) or '0') or 0\n"
        "if t > f then\n"
        "  if ARGV[3] ~= '0' then redis.call('SET', KEYS[2], ARGV[4], 'PX', ARGV[3])\n"
        "  else redis.call('SET', KEYS[2], ARGV[4]) end\n"
        "elseif ARGV[3] ~= '0' then\n"
        "  local pt = redis.call('PTTL', KEYS[2])\n"
        "  if pt >= 0 and pt < tonumber(ARGV[3]) then redis.call('PEXPIRE', KEYS[2], ARGV[3]) end\n"
        "end\n"
        "return redis.call('PEXPIRE', KEYS[1], ARGV[2])\n",
};

/* The scripts below go by EVAL: status is rare, the fix-up is
 * fire-and-forget. The release is lockcore__kinds_re_release(). */
/* KEYS[1] lock, KEYS[2] holds; ARGV[1] id, ARGV[2] count, ARGV[3] token.
 * After a re-entry, on the nodes that did not re-enter: where the attempt
 * set the key afresh, the hold gets the count and token of the majority. */
static const char re_fixup[] = "if redis.call('GET', KEYS[1]) ~= ARGV[1] then return 0 end\n"
                               "redis.call('HSET', KEYS[2], 'n', ARGV[2], 't', ARGV[3])\n"
                               "return redis.call('PEXPIRE', KEYS[2], redis.call('PTTL', KEYS[1]))\n";
/* SCRIPT_STATUS and the hold count. */
static const char re_status[] =
    "local n = 0\n"
    "if redis.call('EXISTS', KEYS[1]) == 1 then n = tonumber(redis.call('HGET', KEYS[4], 'n') or '1') or 1 "
    "end\n"
    "return {redis.call('GET', KEYS[1]) or '', redis.call('PTTL', KEYS[1]),\n"
    "        redis.call('GET', KEYS[2]) or '', redis.call('GET', KEYS[3]) or '', n}\n";

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
        body = lockcore__kinds_re_release();
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
        body = re_status;
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
    const char *argv[] = {"EVAL", re_fixup, "2", op->key, holds, op->lock.id, n, t};
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
