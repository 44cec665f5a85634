/* Keep-alives: extend held locks from the client's own event loop. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

struct lockcore_keepalive {
    struct lockcore_keepalive *next, *prev;
    lockcore_client *c;
    struct lockcore_lock lock;
    uint64_t ttl_ms;
    uint64_t renew_before_ms;
    uint64_t next_try_ms;
    int extending; /* an extension is in flight */
    int stopped;   /* stopped by its owner: freed as soon as nothing uses it */
    int rc;        /* 0 while held, else why it was lost */
    unsigned extensions;
    lockcore_cb on_lost;
    void *arg;
    char last_err[256]; /* why the last extension failed, "" if none */
};

static void unlink_ka(lockcore_keepalive *k)
{
    lockcore_client *c = k->c;
    if (k->prev != NULL)
        k->prev->next = k->next;
    else if (c->keepalives == k)
        c->keepalives = k->next;
    if (k->next != NULL)
        k->next->prev = k->prev;
    k->next = k->prev = NULL;
}

/* A lost keep-alive stays on the client's list (so the client can free it)
 * but is never extended again. The reason goes to lockcore_errmsg() for
 * on_lost to read. */
static void lose(lockcore_keepalive *k, int rc, const char *why)
{
    lockcore_client *c = k->c;
    k->rc = rc;
    lockcore__fmt(c->errmsg, sizeof(c->errmsg), "lock on '%s' lost: %s", k->lock.resource, why);
    if (k->on_lost != NULL)
        lockcore__call(c, k->on_lost, rc, &k->lock, k->arg);
}

/* When to extend next: once renew_before_ms of validity is left. If less
 * than that is left already (nodes that answered slowly, or renew_before_ms
 * close to the TTL, which the drift alone eats into), at half of what is
 * left: extending at once would extend again at once, in a tight loop. */
static uint64_t renew_at(const lockcore_keepalive *k, uint64_t now)
{
    uint64_t until = k->lock.valid_until_ms;
    uint64_t left = until > now ? until - now : 0;
    uint64_t before = k->renew_before_ms < left ? k->renew_before_ms : left / 2;
    return until - before;
}

static void on_extended(lockcore_client *c, int rc, const struct lockcore_lock *lock, void *arg)
{
    lockcore_keepalive *k = arg;
    k->extending = 0;
    if (k->stopped) {
        free(k); /* unlinked when it was stopped (or by the walk after it) */
        return;
    }
    if (k->rc != 0)
        return; /* declared lost at valid_until_ms while this was in flight */
    uint64_t now = lockcore_now_ms();
    if (rc == 0) {
        k->lock = *lock;
        k->extensions++;
        k->last_err[0] = '\0';
        k->next_try_ms = renew_at(k, now);
        return;
    }
    lockcore__fmt(k->last_err, sizeof(k->last_err), "%s", lockcore_errmsg(c));
    if (rc == LOCKCORE_ELOST || now >= k->lock.valid_until_ms) {
        lose(k, rc, k->last_err);
        return;
    }
    /* Not lost yet (a majority unreachable for now): try again soon, well
     * before the validity runs out. */
    uint64_t left = k->lock.valid_until_ms - now;
    k->next_try_ms = now + (left / 4 < 50 ? left / 4 : 50);
}

int lockcore_keepalive_start(lockcore_client *c, const struct lockcore_lock *lock, uint64_t ttl_ms,
                             uint64_t renew_before_ms, lockcore_cb on_lost, void *arg,
                             lockcore_keepalive **out)
{
    if (c == NULL)
        return -EINVAL;
    if (out == NULL) {
        lockcore__fmt(c->errmsg, sizeof(c->errmsg), "keepalive: out is NULL");
        return -EINVAL;
    }
    if (c->freeing || c->free_pending) {
        lockcore__fmt(c->errmsg, sizeof(c->errmsg), "keepalive: the client is being freed");
        return LOCKCORE_ECANCELED;
    }
    /* Checked here, not at the first extension: a bad argument must not
     * turn into extensions that fail every few ms and a false "lost". */
    int rc = lockcore__check_lock(c, lock);
    if (rc < 0)
        return rc;
    if (ttl_ms == 0)
        ttl_ms = lock->ttl_ms ? lock->ttl_ms : c->o.ttl_ms;
    if ((rc = lockcore__check_ttl(c, ttl_ms, "keepalive: ttl_ms")) < 0)
        return rc;
    if (renew_before_ms == 0)
        renew_before_ms = ttl_ms / 3;
    if (renew_before_ms >= ttl_ms) {
        lockcore__fmt(c->errmsg, sizeof(c->errmsg), "keepalive: renew_before_ms must be below the TTL");
        return -EINVAL;
    }
    if ((lock->flags & LOCKCORE_LOCK_FROM_ID) || lockcore_remaining_ms(lock) == 0) {
        lockcore__fmt(c->errmsg, sizeof(c->errmsg), "keepalive '%s': %s", lock->resource,
                      (lock->flags & LOCKCORE_LOCK_FROM_ID) ? "validity unknown: extend the lock first"
                                                            : "validity already ran out");
        return LOCKCORE_ELOST;
    }
    lockcore_keepalive *k = calloc(1, sizeof(*k));
    if (k == NULL) {
        lockcore__fmt(c->errmsg, sizeof(c->errmsg), "keepalive: out of memory");
        return -ENOMEM;
    }
    k->c = c;
    k->lock = *lock;
    k->ttl_ms = ttl_ms;
    k->renew_before_ms = renew_before_ms;
    k->next_try_ms = renew_at(k, lockcore_now_ms());
    k->on_lost = on_lost;
    k->arg = arg;
    k->next = c->keepalives;
    if (c->keepalives != NULL)
        c->keepalives->prev = k;
    c->keepalives = k;
    *out = k;
    return 0;
}

int lockcore_keepalive_get(const lockcore_keepalive *k, struct lockcore_lock *out)
{
    if (k == NULL)
        return -EINVAL;
    if (out != NULL)
        *out = k->lock;
    if (k->rc == 0 && lockcore_now_ms() >= k->lock.valid_until_ms)
        return LOCKCORE_ELOST; /* not held past its validity, whatever the loop has seen */
    return k->rc;
}

unsigned lockcore_keepalive_extensions(const lockcore_keepalive *k)
{
    return k ? k->extensions : 0;
}

void lockcore_keepalive_stop(lockcore_keepalive *k)
{
    if (k == NULL || k->stopped)
        return;
    k->stopped = 1;
    if (k->c->ka_walking)
        return; /* the walk holds pointers into the list: it reaps k after */
    unlink_ka(k);
    if (!k->extending)
        free(k);
}

uint64_t lockcore__keepalive_next_timer(const lockcore_client *c)
{
    uint64_t next = UINT64_MAX;
    for (const lockcore_keepalive *k = c->keepalives; k != NULL; k = k->next) {
        if (k->rc != 0 || k->stopped)
            continue;
        /* The validity's end is always a timer: the loss is declared then,
         * whatever is in flight. */
        uint64_t t = k->lock.valid_until_ms;
        if (!k->extending && k->next_try_ms < t)
            t = k->next_try_ms;
        if (t < next)
            next = t;
    }
    return next;
}

void lockcore__keepalive_check(lockcore_client *c, uint64_t now)
{
    /* on_lost may stop any keep-alive, start one, or start operations:
     * while walking, a stop only marks, and the marked ones go after. */
    c->ka_walking = 1;
    for (lockcore_keepalive *k = c->keepalives; k != NULL; k = k->next) {
        if (k->rc != 0 || k->stopped)
            continue;
        if (now >= k->lock.valid_until_ms) {
            char why[400];
            if (k->extending)
                lockcore__fmt(why, sizeof(why), "validity ran out with an extension still in flight");
            else if (k->last_err[0] != '\0')
                lockcore__fmt(why, sizeof(why), "validity ran out before an extension succeeded (last: %s)",
                              k->last_err);
            else
                lockcore__fmt(why, sizeof(why), "validity ran out before it could be extended");
            lose(k, LOCKCORE_ELOST, why);
            continue;
        }
        if (k->extending || now < k->next_try_ms)
            continue;
        int rc = lockcore_extend_async(c, &k->lock, k->ttl_ms, on_extended, k);
        if (rc == 0)
            k->extending = 1;
        else /* out of memory: try again soon */
            k->next_try_ms = now + 10;
    }
    c->ka_walking = 0;
    for (lockcore_keepalive *k = c->keepalives, *next; k != NULL; k = next) {
        next = k->next;
        if (k->stopped) {
            unlink_ka(k);
            if (!k->extending)
                free(k);
        }
    }
}

/* At client free: keep-alives with an extension in flight are freed by its
 * (canceled) callback, the others here. */
void lockcore__keepalives_detach(lockcore_client *c)
{
    for (lockcore_keepalive *k = c->keepalives, *next; k != NULL; k = next) {
        next = k->next;
        k->next = k->prev = NULL;
        k->stopped = 1;
        if (!k->extending)
            free(k);
    }
    c->keepalives = NULL;
}
