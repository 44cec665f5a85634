/* What the lock kinds share (kinds.c): keys, sending a script, starting an
 * acquisition of a kind, and the blocking calls' loop. One file per kind:
 * sem.c, multi.c, reentrant.c. */
#ifndef LOCKCORE_KINDS_H
#define LOCKCORE_KINDS_H

#include "kind.h"

/* The kinds' scripts that go by EVALSHA: their bits in c->kx.sent. */
enum kscript {
    KS_MULTI_ACQUIRE,
    KS_MULTI_RAISE,
    KS_MULTI_EXTEND,
    KS_MULTI_RELEASE,
    KS_MULTI_INFO,
    KS_MULTI_QUEUED,
    KS_MULTI_DEQUEUE,
    KS_RE_ACQUIRE,
    KS_RE_RAISE,
    KS_RE_EXTEND,
    KS_RE_RELEASE,
    KS_RE_ENTER,
    KS_RE_INFO,
    KS_RW_READ,
    KS_RW_WRITE,
    KS_RW_RRELEASE,
    KS_RW_REXTEND,
    KS_RW_WRELEASE,
    KS_RW_READ_QUEUED,
    KS_RW_WRITE_QUEUED,
    KS_LEADER_PROCLAIM,
    KS_LEADER_RESIGN,
    KS_COUNT,
};
_Static_assert(KS_COUNT <= 8 * sizeof(((lockcore_client *)0)->kx.sent[0]), "c->kx.sent too small");

/* Up to LOCKCORE_MULTI_MAX keys of each sort: the lock key, the fence's
 * bucket (its hash and field) and the old layout's "{key}:fence",
 * "{key}:holder", the waiters' queue "{key}:waiters" and "{key}:waiting",
 * the mark that anyone waits "{key}:wanted"; and "{key}:holds" of the
 * first. */
struct lockcore__keyset {
    unsigned k;
    char lock[LOCKCORE_MULTI_MAX][KEY_MAX + 1];
    char fence[LOCKCORE_MULTI_MAX][FENCE_KEY_MAX + 1];
    char fhash[LOCKCORE_MULTI_MAX][FENCE_HASH_MAX + 1]; /* a NUL inside: see fhash_len */
    size_t fhash_len[LOCKCORE_MULTI_MAX];
    char fbucket[LOCKCORE_MULTI_MAX][4];
    char info[LOCKCORE_MULTI_MAX][INFO_KEY_MAX + 1];
    char waiters[LOCKCORE_MULTI_MAX][INFO_KEY_MAX + 1];
    char waiting[LOCKCORE_MULTI_MAX][INFO_KEY_MAX + 1];
    char wanted[LOCKCORE_MULTI_MAX][INFO_KEY_MAX + 1];
    char holds[INFO_KEY_MAX + 1];
    char readers[INFO_KEY_MAX + 1];
    char intent[INFO_KEY_MAX + 1];
};

/* The keys of a lock's resource: its names split at '\n' (one name for a
 * reentrant lock). */
void lockcore__kinds_keys(const lockcore_client *c, const char *resource, struct lockcore__keyset *ks);
/* The client's keyset, filled for resource (kept until the next resource:
 * the pointers are valid until the next call). NULL when out of memory. */
struct lockcore__keyset *lockcore__kinds_keyset(lockcore_client *c, const char *resource);
/* A key's release channel for this client, "{" key "}:released:" and
 * its prefix, into out (CHAN_MAX bytes); returns its length. */
size_t lockcore__kinds_channel(const lockcore_client *c, const char *key, char *out);
/* "{" key "}" suffix into out (INFO_KEY_MAX + 1 bytes; key <= KEY_MAX). */
void lockcore__kinds_tagged(char *out, const char *key, const char *suffix);

/* One script call: its keys and arguments (with their lengths: a fence's
 * hash has a NUL inside). */
struct lockcore__kcmd {
    const char *keys[6 * LOCKCORE_MULTI_MAX + 1];
    size_t klens[6 * LOCKCORE_MULTI_MAX + 1];
    int nkeys;
    const char *args[LOCKCORE_MULTI_MAX + 10];
    size_t alens[LOCKCORE_MULTI_MAX + 10];
    int nargs;
};
/* In a kind's resend (its command k): the bucket hash of member j. */
#define KS_FHASH(ks, j) (k.keys[k.nkeys] = (ks)->fhash[j], k.klens[k.nkeys++] = (ks)->fhash_len[j])

/* Send a script for one step of op to node i: EVALSHA of script slot
 * `slot` (body its text) unless use_eval, slot < 0 (EVAL always) or the
 * step is fire-and-forget. Returns what lockcore__node_send returns. */
int lockcore__kinds_send(struct op *op, unsigned i, enum step step, int slot, const char *body, int use_eval,
                         const struct lockcore__kcmd *k, uint64_t now);

/* Each kind's table (kind.h), listed in kinds.c. */
extern const struct lockcore__kind lockcore__kind_sem, lockcore__kind_multi, lockcore__kind_reentrant,
    lockcore__kind_read, lockcore__kind_write, lockcore__kind_leader;

/* The client's keyset cache, freed (idempotent: every kind that uses it
 * has it as its release). */
void lockcore__kinds_keyset_free(lockcore_client *c);

/* Argument checks; they set c->errmsg. */
int lockcore__kinds_check_client(lockcore_client *c);
int lockcore__kinds_check_name(lockcore_client *c, const char *r, size_t max);
int lockcore__kinds_is_id(const char *id);

/* Start an acquisition of a kind: resource as the lock will name it, flags
 * its kind, id NULL for a fresh one. single: one attempt, no retries. */
struct op *lockcore__kinds_start(lockcore_client *c, const char *resource, unsigned flags, const char *id,
                                 int single, const struct lockcore__call *k, lockcore_cb cb, void *arg,
                                 int *rcp);
/* Set op->queued: whether its next attempt is the one that waits in line. */
void lockcore__kinds_queue_first(struct op *op);

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
                             const char *id, const struct lockcore__call *k, struct lockcore_lock *lock);

/* Each kind's start with one acquisition's options k (call.c calls them
 * for lockcore_acquire_call and every kind's own call). NULL with *rcp
 * and c->errmsg set. The plain lock's is in client.c. */
struct op *lockcore__plain_start(lockcore_client *c, const char *resource, const struct lockcore__call *k,
                                 lockcore_cb cb, void *arg, int *rcp);
struct lockcore__sem *lockcore__sem_start(lockcore_client *c, const char *resource, unsigned permits,
                                          const struct lockcore__call *k, lockcore_cb cb, void *arg,
                                          int *rcp);
/* End a semaphore's acquisition that the blocking call gives up. */
void lockcore__sem_abort(void *d, int err, const char *why);
struct op *lockcore__multi_start(lockcore_client *c, const char *const *resources, size_t n,
                                 const struct lockcore__call *k, lockcore_cb cb, void *arg, int *rcp);
struct op *lockcore__re_start(lockcore_client *c, const char *resource, const char *id,
                              const struct lockcore__call *k, lockcore_cb cb, void *arg, int *rcp);
struct op *lockcore__rw_start(lockcore_client *c, const char *resource, int write,
                              const struct lockcore__call *k, lockcore_cb cb, void *arg, int *rcp);
/* lockcore_acquire_call, with what naming the public call for messages. */
int lockcore__acquire_blocking(lockcore_client *c, const char *what, const struct lockcore_request *rq,
                               const struct lockcore_call *call, struct lockcore_lock *lock);

/* lockcore_status through a kind's status script (flags name the kind). */
int lockcore__kinds_status(lockcore_client *c, const char *what, const char *resource, unsigned flags,
                           struct lockcore_node_status *out, size_t cap);

#endif
