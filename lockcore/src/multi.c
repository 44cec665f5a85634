/*
 * The multi-resource lock: a set of resources all or nothing. Each node
 * grants the whole set in one atomic script or none of it; the set is
 * granted when a majority granted it whole. The token is a proposal that
 * exceeds every fence value of the set on an accepting node and is stored
 * in every fence key of the set, so each resource's fence only grows,
 * whether its grants are single or multi (docs/lockcore.md, docs/fencing.md).
 * The lock keys are the plain ones: plain clients of a member are excluded.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kinds.h"

static const char *const multi_scripts[] = {
    /* KEYS: k lock keys, k fence keys; ARGV[1] id, ARGV[2] ttl ms,
     * ARGV[3] proposal, ARGV[4] fence idle expiry ms (0: none).
     * All or nothing on this node: refused if any key of the set is held;
     * else every key is set, and the proposal is stored in every fence key
     * if it is greater than all of them (so each resource's fence only
     * grows). Replies like fencing_script_acquire, the fence value being
     * the largest of the set. */
    [KS_MULTI_ACQUIRE] =
        "local k = #KEYS / 2\n"
        "local f = 0\n"
        "for i = 1, k do\n"
        "  local v = tonumber(redis.call('GET', KEYS[k + i]) or '0') or 0\n"
        "  if v > f then f = v end\n"
        "end\n"
        "for i = 1, k do\n"
        "  local h = redis.call('GET', KEYS[i])\n"
        "  if h then return {0, 0, string.format('%.0f', f), h, redis.call('PTTL', KEYS[i])} end\n"
        "end\n"
        "for i = 1, k do redis.call('SET', KEYS[i], ARGV[1], 'PX', ARGV[2]) end\n"
        "local p = tonumber(ARGV[3])\n"
        "if p > f then\n"
        "  for i = 1, k do\n"
        "    if ARGV[4] ~= '0' then redis.call('SET', KEYS[k + i], ARGV[3], 'PX', ARGV[4])\n"
        "    else redis.call('SET', KEYS[k + i], ARGV[3]) end\n"
        "  end\n"
        "  return {1, 1, ARGV[3]}\n"
        "end\n"
        "return {1, 0, string.format('%.0f', f)}\n",
    /* KEYS: k fence keys; ARGV[1] proposal, ARGV[2] idle expiry ms. "Set
     * if greater" over the set: stored in all if greater than all. */
    [KS_MULTI_RAISE] = "local f = 0\n"
                       "for i = 1, #KEYS do\n"
                       "  local v = tonumber(redis.call('GET', KEYS[i]) or '0') or 0\n"
                       "  if v > f then f = v end\n"
                       "end\n"
                       "local p = tonumber(ARGV[1])\n"
                       "if p > f then\n"
                       "  for i = 1, #KEYS do\n"
                       "    if ARGV[2] ~= '0' then redis.call('SET', KEYS[i], ARGV[1], 'PX', ARGV[2])\n"
                       "    else redis.call('SET', KEYS[i], ARGV[1]) end\n"
                       "  end\n"
                       "  return {1, ARGV[1]}\n"
                       "end\n"
                       "return {0, string.format('%.0f', f)}\n",
    /* KEYS: k lock, k fence, k info keys; ARGV[1] id, ARGV[2] ttl ms,
     * ARGV[3] fence expiry ms, ARGV[4] token. Extends only if every key of
     * the set still holds the id, as SCRIPT_EXTEND does for one. */
    [KS_MULTI_EXTEND] =
        "local k = #KEYS / 3\n"
        "for i = 1, k do\n"
        "  if redis.call('GET', KEYS[i]) ~= ARGV[1] then return 0 end\n"
        "end\n"
        "local t = tonumber(ARGV[4])\n"
        "for i = 1, k do\n"
        "  redis.call('PEXPIRE', KEYS[2 * k + i], ARGV[2])\n"
        "  local fk = KEYS[k + i]\n"
        "  local f = tonumber(redis.call('GET', fk) or '0') or 0\n"
        "  if t > f then\n"
        "    if ARGV[3] ~= '0' then redis.call('SET', fk, ARGV[4], 'PX', ARGV[3])\n"
        "    else redis.call('SET', fk, ARGV[4]) end\n"
        "  elseif ARGV[3] ~= '0' then\n"
        "    local pt = redis.call('PTTL', fk)\n"
        "    if pt >= 0 and pt < tonumber(ARGV[3]) then redis.call('PEXPIRE', fk, ARGV[3]) end\n"
        "  end\n"
        "  redis.call('PEXPIRE', KEYS[i], ARGV[2])\n"
        "end\n"
        "return 1\n",
    /* KEYS: k lock, k info keys; ARGV[1] id, ARGV[2] info, ARGV[3] ttl. */
    [KS_MULTI_INFO] = "local k = #KEYS / 2\n"
                      "for i = 1, k do\n"
                      "  if redis.call('GET', KEYS[i]) == ARGV[1] then\n"
                      "    redis.call('SET', KEYS[k + i], ARGV[2], 'PX', ARGV[3])\n"
                      "  end\n"
                      "end\n"
                      "return 1\n",
};

int lockcore__multi_resend(struct op *op, unsigned i, enum step step, int use_eval, uint64_t now)
{
    lockcore_client *c = op->c;
    struct lockcore__keyset *ks = lockcore__kinds_keyset(c, op->lock.resource);
    if (ks == NULL)
        return -ENOMEM;
    struct lockcore__kcmd k = {.nkeys = 0};
    char reserve[24];
    int s = -1, rc;
    const char *body = NULL;
    unsigned n = ks->k;
#define KEY(p) (k.keys[k.nkeys++] = (p))
#define ARG(p) (k.args[k.nargs] = (p), k.alens[k.nargs++] = strlen(p))
    struct step_nums num;
    lockcore__step_nums(op, &num);
    switch (step) {
    case STEP_LOCK:
        s = KS_MULTI_ACQUIRE;
        for (unsigned j = 0; j < n; j++)
            KEY(ks->lock[j]);
        for (unsigned j = 0; j < n; j++)
            KEY(ks->fence[j]);
        ARG(op->lock.id);
        ARG(num.ttl);
        ARG(num.prop);
        ARG(num.idle);
        break;
    case STEP_RAISE:
        s = KS_MULTI_RAISE;
        for (unsigned j = 0; j < n; j++)
            KEY(ks->fence[j]);
        ARG(num.prop);
        ARG(num.idle);
        break;
    case STEP_EXTEND:
        /* As SCRIPT_EXTEND: fence keys outlive the lock's keys. */
        s = KS_MULTI_EXTEND;
        for (unsigned j = 0; j < n; j++)
            KEY(ks->lock[j]);
        for (unsigned j = 0; j < n; j++)
            KEY(ks->fence[j]);
        for (unsigned j = 0; j < n; j++)
            KEY(ks->info[j]);
        ARG(op->lock.id);
        ARG(num.ttl);
        ARG(num.fexp);
        ARG(num.tok);
        break;
    case STEP_RELEASE:
    case STEP_IGNORE:
        /* Deletes the keys of the set that hold the id (1 if any did) and
         * tells each member's first waiter, as a plain release does. */
        s = KS_MULTI_RELEASE;
        body = lockcore__kinds_multi_release();
        for (unsigned j = 0; j < n; j++)
            KEY(ks->lock[j]);
        for (unsigned j = 0; j < n; j++)
            KEY(ks->info[j]);
        for (unsigned j = 0; j < n; j++)
            KEY(ks->waiters[j]);
        for (unsigned j = 0; j < n; j++)
            KEY(ks->waiting[j]);
        for (unsigned j = 0; j < n; j++)
            KEY(ks->wanted[j]);
        ARG(op->lock.id);
        lockcore__release_arg(op, step, reserve, sizeof(reserve));
        ARG(reserve);
        break;
    case STEP_INFO:
        s = KS_MULTI_INFO;
        for (unsigned j = 0; j < n; j++)
            KEY(ks->lock[j]);
        for (unsigned j = 0; j < n; j++)
            KEY(ks->info[j]);
        ARG(op->lock.id);
        k.args[k.nargs] = c->info, k.alens[k.nargs++] = c->info_len;
        ARG(num.ttl);
        break;
    default:
        /* Status is read per resource (lockcore_status of a member). */
        return -EINVAL;
    }
#undef KEY
#undef ARG
    rc = lockcore__kinds_send(op, i, step, s, body ? body : multi_scripts[s], use_eval, &k, now);
    return rc;
}

/* Join a set's names with '\n' into out, checking them. */
static int join_set(lockcore_client *c, const char *const *resources, size_t n, char *out)
{
    if (resources == NULL || n == 0 || n > LOCKCORE_MULTI_MAX) {
        lockcore__fmt(c->errmsg, sizeof(c->errmsg), "a multi-resource lock takes 1..%d resources",
                      LOCKCORE_MULTI_MAX);
        return -EINVAL;
    }
    size_t len = 0;
    for (size_t i = 0; i < n; i++) {
        int rc = lockcore__kinds_check_name(c, resources[i], LOCKCORE_RESOURCE_MAX);
        if (rc < 0)
            return rc;
        if (strchr(resources[i], '\n') != NULL) {
            lockcore__fmt(c->errmsg, sizeof(c->errmsg),
                          "resource name with a newline in a multi-resource lock");
            return -EINVAL;
        }
        for (size_t j = 0; j < i; j++) {
            if (strcmp(resources[i], resources[j]) == 0) {
                lockcore__fmt(c->errmsg, sizeof(c->errmsg), "resource '%s' given twice", resources[i]);
                return -EINVAL;
            }
        }
        size_t l = strlen(resources[i]);
        if (len + l + (i > 0) > LOCKCORE_RESOURCE_MAX) {
            lockcore__fmt(c->errmsg, sizeof(c->errmsg), "resource names longer than %d bytes in all",
                          LOCKCORE_RESOURCE_MAX);
            return -EINVAL;
        }
        if (i > 0)
            out[len++] = '\n';
        memcpy(out + len, resources[i], l);
        len += l;
    }
    out[len] = '\0';
    return 0;
}

int lockcore_multi_acquire_async(lockcore_client *c, const char *const *resources, size_t n, lockcore_cb cb,
                                 void *arg)
{
    if (c == NULL)
        return -EINVAL;
    char joined[LOCKCORE_RESOURCE_MAX + 1];
    int rc = join_set(c, resources, n, joined);
    if (rc == 0)
        lockcore__kinds_start(c, joined, LOCKCORE_LOCK_MULTI, NULL, 0, cb, arg, &rc);
    return rc;
}

int lockcore_multi_acquire(lockcore_client *c, const char *const *resources, size_t n,
                           struct lockcore_lock *lock)
{
    if (c == NULL)
        return -EINVAL;
    if (lock == NULL) {
        lockcore__fmt(c->errmsg, sizeof(c->errmsg), "lock is NULL");
        return -EINVAL;
    }
    char joined[LOCKCORE_RESOURCE_MAX + 1];
    int rc = join_set(c, resources, n, joined);
    if (rc < 0)
        return rc;
    return lockcore__kinds_blocking(c, "lockcore_multi_acquire", joined, LOCKCORE_LOCK_MULTI, NULL, lock);
}
