/* What the lock kinds share (kinds.c): starting an acquisition of a kind,
 * and the blocking calls' loop. One file per kind: sem.c. */
#ifndef LOCKCORE_KINDS_H
#define LOCKCORE_KINDS_H

#include "internal.h"

/* Argument checks; they set c->errmsg. */
int lockcore__kinds_check_client(lockcore_client *c);
int lockcore__kinds_check_name(lockcore_client *c, const char *r, size_t max);
int lockcore__kinds_is_id(const char *id);

/* Start an acquisition of a kind: resource as the lock will name it, flags
 * its kind, id NULL for a fresh one. single: one attempt, no retries. */
struct op *lockcore__kinds_start(lockcore_client *c, const char *resource, unsigned flags, const char *id,
                                 int single, lockcore_cb cb, void *arg, int *rcp);

/* The blocking calls: a waiter the callback fills, and the loop. */
struct lockcore__waiter {
    int done;
    int rc;
    struct lockcore_lock lock;
};
void lockcore__kinds_wake(lockcore_client *c, int rc, const struct lockcore_lock *lock, void *arg);
/* Run the loop until w is done (after lockcore__enter); if the loop fails
 * or the client is being freed, abort_fn(what, err, why) must end it.
 * Leaves (lockcore__leave) and returns w->rc. */
int lockcore__kinds_wait(lockcore_client *c, struct lockcore__waiter *w,
                         void (*abort_fn)(void *, int, const char *), void *what);
void lockcore__kinds_abort_op(void *op, int err, const char *why);
/* enter, start an acquisition of a kind, wait, leave; *lock gets the result. */
int lockcore__kinds_blocking(lockcore_client *c, const char *what, const char *resource, unsigned flags,
                             const char *id, struct lockcore_lock *lock);

#endif
