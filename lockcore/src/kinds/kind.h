/* A lock kind as the core sees it: a table of operations that op.c and
 * client.c call through, and nothing else. The core names no kind; each
 * kind is a file of this folder with a table of its own, listed once in
 * kinds.c (libuv's handle types, seen from its loop). */
#ifndef LOCKCORE_KIND_H
#define LOCKCORE_KIND_H

#include "../internal.h"

/* What a kind decides of its lock step before the plain decision. */
enum kind_verdict {
    KIND_PLAIN, /* the plain decision (fencing_decide) decides */
    KIND_WAIT,  /* not decided yet: more replies are needed */
    KIND_GRANT, /* granted, with op->proposal as the token */
    KIND_FAIL,  /* the attempt failed with *rc (op->errmsg says why) */
    /* Granted on a majority, but the token op->proposal is not yet at
     * most the fence value of a majority: one round raises the fences to
     * it first (a reader's write-back), then it is granted. */
    KIND_WRITE_BACK,
};

struct lockcore__kind {
    const char *name;
    /* The LOCKCORE_LOCK_* flag of its locks; 0 for a driver that runs plain
     * acquisitions of its own (the semaphore: a permit is a plain lock). */
    unsigned flag;
    /* Build and queue op's command of `step` for node i, as
     * lockcore__op_resend does; 1: send the plain lock's command. */
    int (*resend)(struct op *op, unsigned node, enum step step, int use_eval, uint64_t now);
    /* Optional. A node's reply to op's lock step, before the core reads it. */
    void (*lock_reply)(struct op *op, unsigned node, const redisReply *r);
    /* Optional. Decide op's lock step first; *rc for KIND_FAIL. */
    enum kind_verdict (*decide_lock)(struct op *op, int *rc);
    /* Optional. op was just granted (op->lock has its token). */
    void (*granted)(struct op *op);
    /* Optional. May op, refused, wait in the nodes' queues (notified and
     * fair waiting)? NULL: it polls. */
    int (*queues)(const struct op *op);
    /* Optional. The release channels a waiter of the kind listens on (at
     * most cap; names NUL-terminated, lengths in len); NULL: the one of
     * the op's key. */
    unsigned (*channels)(struct op *op, char (*name)[CHAN_MAX], size_t *len, unsigned cap);
    /* Optional. Point op's queue keys and release channel at those its
     * waiters use, when not its own key's (a permit: its semaphore's). */
    void (*queue_key)(struct op *op);
    /* Optional, per client: a release named the waiter qid (hint 0), or
     * told it to try in hint ms; key: the lock key reserved for it, if the
     * notice says ("" if not). A waiter that is no operation of the core
     * (a driver) hears it here. */
    void (*notice)(lockcore_client *c, const char *qid, const char *key, size_t key_len, uint64_t hint,
                   uint64_t now);
    /* Optional, per client: a message on a channel the client listens to,
     * before it is read as a release's notice. Returns 1 if it was the
     * kind's (an election's channel), else 0. */
    int (*message)(lockcore_client *c, const char *chan, size_t chan_len, const char *msg, size_t msg_len,
                   uint64_t now);
    /* Optional, per client: a node confirmed the subscription to chan. */
    void (*subscribed)(lockcore_client *c, const char *chan, size_t len, uint64_t now);
    /* Optional, per client: the kind's own timers (drivers), run from the
     * client's loop; cancel ends them when the client is freed; release
     * frees what the kind keeps in the client. */
    uint64_t (*next_timer)(const lockcore_client *c);
    void (*check)(lockcore_client *c, uint64_t now);
    void (*cancel)(lockcore_client *c);
    /* Optional. Was op, whose callback is the kind's own (a writer's
     * wrapper, a semaphore driver's permit), started by the caller with
     * (cb, arg)? lockcore_cancel ends it then. */
    int (*started_by)(const struct op *op, lockcore_cb cb, void *arg);
    /* Optional, per client: lockcore_cancel of the kind's drivers started
     * with (cb, arg): those between rounds end here, those with an
     * operation end with it. Returns how many. */
    unsigned (*cancel_calls)(lockcore_client *c, lockcore_cb cb, void *arg);
    void (*release)(lockcore_client *c);
};

/* Every kind, NULL-terminated (kinds.c). */
extern const struct lockcore__kind *const lockcore__kinds[];

/* The kind a lock's flags name, or NULL for a plain lock. */
const struct lockcore__kind *lockcore__kind_of(unsigned flags);

#endif
