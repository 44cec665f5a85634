/*
 * The counting semaphore: permits that are each a plain lock of the
 * resource "<resource>:permit:<i>". At most one client holds each permit
 * (the plain lock's majority argument), so at most `permits` hold at
 * once, by construction; counting holders per node and taking a majority
 * would not be safe over independent masters (docs/lockcore.md).
 *
 * An acquisition is a driver: it tries the permits one at a time in a
 * random order, each with one plain attempt, keeps the first granted, and
 * when every permit refused waits the retry delay and tries them all
 * again. Its timer runs in the client's loop (lockcore__kinds_next_timer,
 * lockcore__kinds_check).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kinds.h"

struct lockcore__sem {
    struct lockcore__sem *next, *prev;
    lockcore_client *c;
    char resource[LOCKCORE_RESOURCE_MAX + 1];
    unsigned permits;
    unsigned *order; /* the permits in this round's order */
    unsigned tried;  /* permits tried this round */
    unsigned rounds;
    uint64_t retry_at_ms; /* waiting for the next round; 0 if not */
    uint64_t deadline_ms; /* wait_ms, 0 = none */
    struct op *op;        /* the permit's acquisition in flight, or NULL */
    int locked;           /* a permit said "held" this round */
    int last_rc;
    int ending; /* the blocking caller gives up: no next permit */
    unsigned attempts;
    unsigned nodes_ok;
    lockcore_cb cb;
    void *arg;
};

static void sem_unlink(struct lockcore__sem *d)
{
    lockcore_client *c = d->c;
    if (d->prev != NULL)
        d->prev->next = d->next;
    else
        c->kx.sems = d->next;
    if (d->next != NULL)
        d->next->prev = d->prev;
    d->next = d->prev = NULL;
}

/* End the acquisition: the callback gets the permit (rc 0) or the counts. */
static void sem_finish(struct lockcore__sem *d, int rc, const struct lockcore_lock *granted)
{
    lockcore_client *c = d->c;
    struct lockcore_lock lock;
    if (granted != NULL) {
        lock = *granted;
        lock.flags |= LOCKCORE_LOCK_PERMIT;
    } else {
        memset(&lock, 0, sizeof(lock));
        snprintf(lock.resource, sizeof(lock.resource), "%s", d->resource);
        lock.nodes = c->n;
        lock.nodes_ok = d->nodes_ok;
    }
    lock.attempts = d->attempts;
    if (rc < 0 && c->errmsg[0] == '\0')
        lockcore__fmt(c->errmsg, sizeof(c->errmsg), "%s", lockcore_strerror(rc));
    sem_unlink(d);
    lockcore_cb cb = d->cb;
    void *arg = d->arg;
    free(d->order);
    free(d);
    lockcore__call(c, cb, rc, &lock, arg);
}

static void sem_on_permit(lockcore_client *c, int rc, const struct lockcore_lock *lock, void *arg);

/* A fresh random order of the permits: contenders spread over them. */
static void sem_shuffle(struct lockcore__sem *d)
{
    for (unsigned i = 0; i < d->permits; i++)
        d->order[i] = i;
    for (unsigned i = d->permits - 1; i > 0; i--) {
        unsigned j = (unsigned)(lockcore__rand64(&d->c->rng) % (i + 1));
        unsigned t = d->order[i];
        d->order[i] = d->order[j];
        d->order[j] = t;
    }
}

/* Try the next permit of the round. Returns 0, or the code of a start
 * that failed (nothing is in flight then). */
static int sem_try_next(struct lockcore__sem *d)
{
    char name[LOCKCORE_RESOURCE_MAX + 32]; /* the resource is at most LOCKCORE_RESOURCE_MAX - 16 */
    snprintf(name, sizeof(name), "%s:permit:%u", d->resource, d->order[d->tried]);
    d->tried++;
    d->attempts++;
    int rc;
    d->op = lockcore__kinds_start(d->c, name, 0, NULL, 1, sem_on_permit, d, &rc);
    return rc;
}

static int sem_round(struct lockcore__sem *d)
{
    d->rounds++;
    d->tried = 0;
    d->locked = 0;
    d->nodes_ok = 0;
    sem_shuffle(d);
    return sem_try_next(d);
}

static int retryable(int rc)
{
    return rc == LOCKCORE_ELOCKED || rc == -ETIMEDOUT || rc == LOCKCORE_ENOQUORUM || rc == LOCKCORE_EPROTO ||
           rc == LOCKCORE_EFENCE;
}

static void sem_on_permit(lockcore_client *c, int rc, const struct lockcore_lock *lock, void *arg)
{
    struct lockcore__sem *d = arg;
    d->op = NULL;
    if (rc == 0) {
        sem_finish(d, 0, lock);
        return;
    }
    d->last_rc = rc;
    d->locked |= rc == LOCKCORE_ELOCKED;
    if (lock->nodes_ok > d->nodes_ok)
        d->nodes_ok = lock->nodes_ok;
    if (d->ending || c->freeing || c->free_pending || !retryable(rc)) {
        sem_finish(d, rc, NULL);
        return;
    }
    if (d->tried < d->permits) {
        int src = sem_try_next(d);
        if (src < 0)
            sem_finish(d, src, NULL);
        return;
    }
    /* Every permit refused this round: all held (or a majority out of
     * reach). Wait like a plain lock's retry, then a new round. */
    int round_rc = d->locked ? LOCKCORE_ELOCKED : d->last_rc;
    uint64_t now = lockcore_now_ms();
    uint64_t delay = c->o.retry_delay_ms;
    if (c->o.retry_jitter_ms > 0)
        delay += lockcore__rand64(&c->rng) % (c->o.retry_jitter_ms + 1);
    int more = c->o.retry_count < 0 || d->rounds <= (unsigned)c->o.retry_count;
    if (d->deadline_ms != 0 && now + delay >= d->deadline_ms)
        more = 0;
    if (!more) {
        char last[ERRMSG_MAX];
        lockcore__fmt(last, sizeof(last), "%s", lockcore_errmsg(c));
        lockcore__fmt(c->errmsg, sizeof(c->errmsg), "semaphore '%s': %s of %u permits (round %u); last: %s",
                      d->resource, d->locked ? "no free permit" : "none acquired", d->permits, d->rounds,
                      last);
        sem_finish(d, round_rc, NULL);
        return;
    }
    d->last_rc = round_rc;
    d->retry_at_ms = now + delay;
}

static struct lockcore__sem *sem_start(lockcore_client *c, const char *resource, unsigned permits,
                                       lockcore_cb cb, void *arg, int *rcp)
{
    int rc = lockcore__kinds_check_client(c);
    if (rc == 0 && cb == NULL) {
        lockcore__fmt(c->errmsg, sizeof(c->errmsg), "callback is NULL");
        rc = -EINVAL;
    }
    if (rc == 0)
        rc = lockcore__kinds_check_name(c, resource, LOCKCORE_RESOURCE_MAX - 16);
    if (rc == 0 && (permits == 0 || permits > LOCKCORE_PERMITS_MAX)) {
        lockcore__fmt(c->errmsg, sizeof(c->errmsg), "permits must be 1..%d", LOCKCORE_PERMITS_MAX);
        rc = -EINVAL;
    }
    struct lockcore__sem *d = NULL;
    if (rc == 0 &&
        ((d = calloc(1, sizeof(*d))) == NULL || (d->order = calloc(permits, sizeof(unsigned))) == NULL)) {
        if (d != NULL)
            free(d);
        d = NULL;
        lockcore__fmt(c->errmsg, sizeof(c->errmsg), "out of memory");
        rc = -ENOMEM;
    }
    if (rc < 0) {
        *rcp = rc;
        return NULL;
    }
    d->c = c;
    snprintf(d->resource, sizeof(d->resource), "%s", resource);
    d->permits = permits;
    d->cb = cb;
    d->arg = arg;
    d->deadline_ms = c->o.wait_ms ? lockcore_now_ms() + c->o.wait_ms : 0;
    d->next = c->kx.sems;
    if (d->next != NULL)
        d->next->prev = d;
    c->kx.sems = d;
    if ((rc = sem_round(d)) < 0) {
        sem_unlink(d);
        free(d->order);
        free(d);
        d = NULL;
    }
    *rcp = rc;
    return d;
}

int lockcore_sem_acquire_async(lockcore_client *c, const char *resource, unsigned permits, lockcore_cb cb,
                               void *arg)
{
    if (c == NULL)
        return -EINVAL;
    int rc;
    sem_start(c, resource, permits, cb, arg, &rc);
    return rc;
}

static void abort_sem(void *what, int err, const char *why)
{
    struct lockcore__sem *d = what;
    d->ending = 1;
    lockcore__fmt(d->c->errmsg, sizeof(d->c->errmsg), "semaphore '%s': %s", d->resource, why);
    if (d->op == NULL)
        sem_finish(d, err, NULL);
    else if (d->op->phase != PH_DONE)
        lockcore__op_abort(d->op, err, why); /* its callback ends d */
    /* else ended, not yet delivered: its callback ends d */
}

int lockcore_sem_acquire(lockcore_client *c, const char *resource, unsigned permits,
                         struct lockcore_lock *lock)
{
    if (c == NULL)
        return -EINVAL;
    if (lock == NULL) {
        lockcore__fmt(c->errmsg, sizeof(c->errmsg), "lock is NULL");
        return -EINVAL;
    }
    int rc = lockcore__enter(c, "lockcore_sem_acquire");
    if (rc < 0)
        return rc;
    struct lockcore__waiter w = {0};
    struct lockcore__sem *d = sem_start(c, resource, permits, lockcore__kinds_wake, &w, &rc);
    if (d == NULL) {
        lockcore__leave(c);
        return rc;
    }
    rc = lockcore__kinds_wait(c, &w, abort_sem, d);
    *lock = w.lock;
    return rc;
}

static uint64_t sem_next_timer(const lockcore_client *c)
{
    uint64_t next = UINT64_MAX;
    for (const struct lockcore__sem *d = c->kx.sems; d != NULL; d = d->next)
        if (d->retry_at_ms != 0 && d->retry_at_ms < next)
            next = d->retry_at_ms;
    return next;
}

static void sem_check(lockcore_client *c, uint64_t now)
{
    /* A callback run from here may start new acquisitions (they go to the
     * head of the list, unvisited) but cannot end others. */
    for (struct lockcore__sem *d = c->kx.sems, *next; d != NULL; d = next) {
        next = d->next;
        if (d->retry_at_ms == 0 || now < d->retry_at_ms)
            continue;
        d->retry_at_ms = 0;
        int rc = sem_round(d);
        if (rc < 0)
            sem_finish(d, rc, NULL);
    }
}

static void sem_cancel(lockcore_client *c)
{
    /* Those waiting for their next round end here; those with a permit's
     * acquisition in flight end when it is canceled. */
    for (struct lockcore__sem *d = c->kx.sems, *next; d != NULL; d = next) {
        next = d->next;
        d->ending = 1;
        if (d->op == NULL) {
            lockcore__fmt(c->errmsg, sizeof(c->errmsg), "semaphore '%s': canceled: the client was freed",
                          d->resource);
            sem_finish(d, LOCKCORE_ECANCELED, NULL);
        }
    }
}

/* A driver over plain acquisitions: its rounds are timers of the client's
 * loop, ended when the client is freed. */
const struct lockcore__kind lockcore__kind_sem = {
    .name = "semaphore",
    .next_timer = sem_next_timer,
    .check = sem_check,
    .cancel = sem_cancel,
};

int lockcore_sem_status(lockcore_client *c, const char *resource, unsigned permits,
                        struct lockcore_permit_status *out, size_t cap)
{
    if (c == NULL)
        return -EINVAL;
    int rc = lockcore__kinds_check_name(c, resource, LOCKCORE_RESOURCE_MAX - 16);
    if (rc < 0)
        return rc;
    if (permits == 0 || permits > LOCKCORE_PERMITS_MAX || out == NULL) {
        lockcore__fmt(c->errmsg, sizeof(c->errmsg), "permits must be 1..%d, out not NULL",
                      LOCKCORE_PERMITS_MAX);
        return -EINVAL;
    }
    if (cap < permits) {
        lockcore__fmt(c->errmsg, sizeof(c->errmsg), "status needs room for %u permits", permits);
        return -ENOSPC;
    }
    struct lockcore_node_status *st = calloc(c->n, sizeof(*st));
    if (st == NULL) {
        lockcore__fmt(c->errmsg, sizeof(c->errmsg), "out of memory");
        return -ENOMEM;
    }
    int held = 0;
    for (unsigned p = 0; p < permits; p++) {
        char name[LOCKCORE_RESOURCE_MAX + 32];
        snprintf(name, sizeof(name), "%s:permit:%u", resource, p);
        if ((rc = lockcore_status(c, name, st, c->n)) < 0)
            goto out;
        struct lockcore_permit_status *ps = &out[p];
        memset(ps, 0, sizeof(*ps));
        ps->permit = p;
        ps->pttl_ms = -2;
        /* The id most nodes hold. */
        for (unsigned i = 0; i < c->n; i++) {
            if (!st[i].reachable)
                continue;
            ps->reachable++;
            if (st[i].fence > ps->fence)
                ps->fence = st[i].fence;
            if (st[i].holder[0] == '\0')
                continue;
            unsigned same = 0;
            int64_t pttl = -2;
            for (unsigned j = 0; j < c->n; j++) {
                if (st[j].reachable && strcmp(st[j].holder, st[i].holder) == 0) {
                    same++;
                    if (st[j].pttl_ms > pttl)
                        pttl = st[j].pttl_ms;
                }
            }
            if (same > ps->nodes) {
                ps->nodes = same;
                ps->pttl_ms = pttl;
                memcpy(ps->holder, st[i].holder, sizeof(ps->holder));
            }
        }
        ps->held = ps->nodes >= c->quorum;
        held += ps->held;
        if (ps->reachable < c->quorum) {
            lockcore__fmt(c->errmsg, sizeof(c->errmsg), "semaphore '%s': permit %u: %u of %u nodes answered",
                          resource, p, ps->reachable, c->n);
            rc = LOCKCORE_ENOQUORUM;
            goto out;
        }
    }
    rc = held;
    c->errmsg[0] = '\0';
out:
    free(st);
    return rc;
}
