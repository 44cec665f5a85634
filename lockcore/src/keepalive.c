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
    int stopped;   /* unlinked; freed when its extension ends */
    int rc;        /* 0 while held, else why it was lost */
    unsigned extensions;
    lockcore_cb on_lost;
    void *arg;
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
 * but is never extended again. */
static void lose(lockcore_keepalive *k, int rc)
{
    k->rc = rc;
    if (k->on_lost != NULL)
        k->on_lost(k->c, rc, &k->lock, k->arg);
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
    (void)c;
    lockcore_keepalive *k = arg;
    k->extending = 0;
    if (k->stopped) {
        free(k);
        return;
    }
    uint64_t now = lockcore_now_ms();
    if (rc == 0) {
        k->lock = *lock;
        k->extensions++;
        k->next_try_ms = renew_at(k, now);
        return;
    }
    if (rc == LOCKCORE_ELOST || rc == -EINVAL || now >= k->lock.valid_until_ms) {
        lose(k, rc == -EINVAL ? LOCKCORE_ELOST : rc);
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
    if (c == NULL || lock == NULL || out == NULL)
        return -EINVAL;
    if (ttl_ms == 0)
        ttl_ms = lock->ttl_ms ? lock->ttl_ms : c->o.ttl_ms;
    if (renew_before_ms == 0)
        renew_before_ms = ttl_ms / 3;
    if (renew_before_ms >= ttl_ms) {
        lockcore__fmt(c->errmsg, sizeof(c->errmsg), "renew_before_ms must be below the TTL");
        return -EINVAL;
    }
    if (lockcore_remaining_ms(lock) == 0) {
        lockcore__fmt(c->errmsg, sizeof(c->errmsg), "keepalive '%s': validity already ran out",
                      lock->resource);
        return LOCKCORE_ELOST;
    }
    lockcore_keepalive *k = calloc(1, sizeof(*k));
    if (k == NULL)
        return -ENOMEM;
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
    return k->rc;
}

unsigned lockcore_keepalive_extensions(const lockcore_keepalive *k)
{
    return k ? k->extensions : 0;
}

void lockcore_keepalive_stop(lockcore_keepalive *k)
{
    if (k == NULL)
        return;
    if (!k->stopped)
        unlink_ka(k);
    k->stopped = 1;
    if (!k->extending)
        free(k);
}

uint64_t lockcore__keepalive_next_timer(const lockcore_client *c)
{
    uint64_t next = UINT64_MAX;
    for (const lockcore_keepalive *k = c->keepalives; k != NULL; k = k->next) {
        if (k->rc != 0)
            continue;
        uint64_t t = k->extending ? k->lock.valid_until_ms : k->next_try_ms;
        if (t < next)
            next = t;
    }
    return next;
}

void lockcore__keepalive_check(lockcore_client *c, uint64_t now)
{
    for (lockcore_keepalive *k = c->keepalives, *next; k != NULL; k = next) {
        next = k->next;
        if (k->extending || k->rc != 0)
            continue; /* an extension in flight decides by its own deadline */
        if (now >= k->lock.valid_until_ms) {
            lose(k, LOCKCORE_ELOST);
            continue;
        }
        if (now < k->next_try_ms)
            continue;
        if (lockcore_extend_async(c, &k->lock, k->ttl_ms, on_extended, k) == 0)
            k->extending = 1;
        else
            k->next_try_ms = now + 10;
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
