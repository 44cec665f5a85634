/*
 * The multi-resource lock: a set of resources all or nothing. Each node
 * grants the whole set in one atomic script or none of it; the set is
 * granted when a majority granted it whole. The token is a proposal that
 * exceeds every fence value of the set on an accepting node and is stored
 * in every member's fence (its bucket), so each resource's fence only grows,
 * whether its grants are single or multi (docs/lockcore.md, docs/fencing.md).
 * The lock keys are the plain ones: plain clients of a member are excluded.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kinds.h"
#include "lockcore_lua.h"

/* The scripts, by their slots (kinds.h): lockcore/lua/multi_*.lua. */
static const char *const multi_scripts[] = {
    [KS_MULTI_ACQUIRE] = lockcore__lua_multi_acquire, [KS_MULTI_RAISE] = lockcore__lua_multi_raise,
    [KS_MULTI_EXTEND] = lockcore__lua_multi_extend,   [KS_MULTI_RELEASE] = lockcore__lua_multi_release,
    [KS_MULTI_INFO] = lockcore__lua_multi_info,       [KS_MULTI_QUEUED] = lockcore__lua_multi_acquire_queued,
    [KS_MULTI_DEQUEUE] = lockcore__lua_multi_dequeue,
};

static int multi_resend(struct op *op, unsigned i, enum step step, int use_eval, uint64_t now)
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
#define KEY(p) (k.keys[k.nkeys] = (p), k.klens[k.nkeys++] = strlen(p))
#define ARG(p) (k.args[k.nargs] = (p), k.alens[k.nargs++] = strlen(p))
/* One key (or argument, or bucket hash) per member, in the set's order. */
#define KEYS_OF(sort)                                                                                        \
    do {                                                                                                     \
        for (unsigned j = 0; j < n; j++)                                                                     \
            KEY(ks->sort[j]);                                                                                \
    } while (0)
#define ARGS_OF(sort)                                                                                        \
    do {                                                                                                     \
        for (unsigned j = 0; j < n; j++)                                                                     \
            ARG(ks->sort[j]);                                                                                \
    } while (0)
#define FHASHES()                                                                                            \
    do {                                                                                                     \
        for (unsigned j = 0; j < n; j++)                                                                     \
            KS_FHASH(ks, j);                                                                                 \
    } while (0)
    struct step_nums num;
    lockcore__step_nums(op, &num);
    switch (step) {
    case STEP_LOCK:
        if (op->queued) {
            /* A waiter: its place in every member's queue. */
            s = KS_MULTI_QUEUED;
            KEYS_OF(lock);
            KEYS_OF(fence);
            KEYS_OF(waiters);
            KEYS_OF(waiting);
            KEYS_OF(wanted);
            FHASHES();
            ARG(op->lock.id);
            ARG(num.ttl);
            ARG(num.prop);
            ARG(num.idle);
            ARG(num.ticket);
            ARG(num.qttl);
            ARG(num.mode);
            ARG(op->qid);
            ARG(num.ahead);
            ARGS_OF(fbucket);
            break;
        }
        s = KS_MULTI_ACQUIRE;
        KEYS_OF(lock);
        KEYS_OF(fence);
        FHASHES();
        ARG(op->lock.id);
        ARG(num.ttl);
        ARG(num.prop);
        ARG(num.idle);
        ARG(num.ahead);
        ARGS_OF(fbucket);
        break;
    case STEP_RAISE:
        s = KS_MULTI_RAISE;
        KEYS_OF(fence);
        FHASHES();
        ARG(num.prop);
        ARG(num.idle);
        ARGS_OF(fbucket);
        ARG(num.ahead);
        break;
    case STEP_EXTEND:
        /* As SCRIPT_EXTEND: the fence step of an extension. */
        s = KS_MULTI_EXTEND;
        KEYS_OF(lock);
        KEYS_OF(fence);
        KEYS_OF(info);
        FHASHES();
        ARG(op->lock.id);
        ARG(num.ttl);
        ARG(num.fexp);
        ARG(num.tok);
        ARGS_OF(fbucket);
        ARG(num.ahead);
        break;
    case STEP_RELEASE:
    case STEP_IGNORE:
        /* Deletes the keys of the set that hold the id (1 if any did) and
         * tells each member's first waiter, as a plain release does. */
        s = KS_MULTI_RELEASE;
        KEYS_OF(lock);
        KEYS_OF(info);
        KEYS_OF(waiters);
        KEYS_OF(waiting);
        KEYS_OF(wanted);
        ARG(op->lock.id);
        lockcore__release_arg(op, step, reserve, sizeof(reserve));
        ARG(reserve);
        ARG(op->qid);
        break;
    case STEP_INFO:
        s = KS_MULTI_INFO;
        KEYS_OF(lock);
        KEYS_OF(info);
        ARG(op->lock.id);
        k.args[k.nargs] = c->info, k.alens[k.nargs++] = c->info_len;
        ARG(num.ttl);
        break;
    case STEP_DEQUEUE:
        s = KS_MULTI_DEQUEUE;
        KEYS_OF(waiters);
        KEYS_OF(waiting);
        KEYS_OF(lock);
        KEYS_OF(wanted);
        ARG(op->qid);
        lockcore__release_mode(c, op->wait_mode, reserve, sizeof(reserve));
        ARG(reserve);
        break;
    default:
        /* Status is read per resource (lockcore_status of a member). */
        return -EINVAL;
    }
#undef KEY
#undef ARG
#undef KEYS_OF
#undef ARGS_OF
#undef FHASHES
    rc = lockcore__kinds_send(op, i, step, s, body ? body : multi_scripts[s], use_eval, &k, now);
    return rc;
}

/* A set waits in line on every member: its place in each member's queue,
 * and each member's release channel (a release of any member names its
 * head, and keeps that member for it). */
static int multi_queues(const struct op *op)
{
    (void)op;
    return 1;
}

static unsigned multi_channels(struct op *op, char (*name)[CHAN_MAX], size_t *len, unsigned cap)
{
    struct lockcore__keyset *ks = lockcore__kinds_keyset(op->c, op->lock.resource);
    unsigned n = 0;
    for (unsigned j = 0; ks != NULL && j < ks->k && n < cap; j++, n++)
        len[n] = lockcore__kinds_channel(op->c, ks->lock[j], name[n]);
    return n;
}

const struct lockcore__kind lockcore__kind_multi = {
    .name = "multi",
    .flag = LOCKCORE_LOCK_MULTI,
    .resend = multi_resend,
    .queues = multi_queues,
    .channels = multi_channels,
    .release = lockcore__kinds_keyset_free,
};

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

struct op *lockcore__multi_start(lockcore_client *c, const char *const *resources, size_t n,
                                 const struct lockcore__call *k, lockcore_cb cb, void *arg, int *rcp)
{
    char joined[LOCKCORE_RESOURCE_MAX + 1];
    *rcp = join_set(c, resources, n, joined);
    return *rcp == 0 ? lockcore__kinds_start(c, joined, LOCKCORE_LOCK_MULTI, NULL, 0, k, cb, arg, rcp) : NULL;
}

int lockcore_multi_acquire_async(lockcore_client *c, const char *const *resources, size_t n, lockcore_cb cb,
                                 void *arg)
{
    struct lockcore_request rq = {.kind = LOCKCORE_LOCK_MULTI, .resources = resources, .n_resources = n};
    return lockcore_acquire_call_async(c, &rq, NULL, cb, arg);
}

int lockcore_multi_acquire(lockcore_client *c, const char *const *resources, size_t n,
                           struct lockcore_lock *lock)
{
    struct lockcore_request rq = {.kind = LOCKCORE_LOCK_MULTI, .resources = resources, .n_resources = n};
    return lockcore__acquire_blocking(c, "lockcore_multi_acquire", &rq, NULL, lock);
}
