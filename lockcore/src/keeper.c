/*
 * A keep-alive in a thread of its own (lockcore_keeper_*), for a program
 * whose critical section blocks: the client's own keep-alive runs only
 * while the caller turns its loop, and a client may be used by one thread
 * at a time. The keeper has a client of its own, which only its thread
 * touches after the start; the caller reads what the thread last saw
 * under a mutex. A loss is seen at the lock's validity at the latest,
 * whatever the thread is doing: get() holds the lock's valid_until_ms
 * against the monotonic clock itself, so a starved or stuck thread can
 * never make a lost lock look held.
 */
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

struct lockcore_keeper {
    lockcore_client *c;
    lockcore_keepalive *ka;
    pthread_t thread;
    atomic_int stop;
    pthread_mutex_t mu;
    struct lockcore_lock lock; /* as last extended (mu) */
    int rc;                    /* 0 while held, else the loss (mu) */
    char why[ERRMSG_MAX];      /* (mu) */
};

static void keeper_lost(lockcore_client *c, int rc, const struct lockcore_lock *lock, void *arg)
{
    struct lockcore_keeper *k = arg;
    pthread_mutex_lock(&k->mu);
    k->rc = rc < 0 ? rc : LOCKCORE_ELOST;
    k->lock = *lock;
    lockcore__fmt(k->why, sizeof(k->why), "%s", lockcore_errmsg(c));
    pthread_mutex_unlock(&k->mu);
}

static void *keeper_main(void *arg)
{
    struct lockcore_keeper *k = arg;
    while (!atomic_load(&k->stop)) {
        int r = lockcore_run(k->c, 20);
        struct lockcore_lock l;
        int rc = lockcore_keepalive_get(k->ka, &l);
        pthread_mutex_lock(&k->mu);
        if (k->rc == 0) {
            if (rc == 0)
                k->lock = l;
            else
                k->rc = rc;
        }
        if (r < 0 && k->rc == 0) { /* poll failed: the lock can no longer be kept */
            k->rc = r;
            lockcore__fmt(k->why, sizeof(k->why), "%s", lockcore_errmsg(k->c));
        }
        int done = k->rc != 0;
        pthread_mutex_unlock(&k->mu);
        if (done)
            break;
    }
    return NULL;
}

int lockcore_keeper_start(const struct lockcore_options *o, const struct lockcore_lock *lock, uint64_t ttl_ms,
                          uint64_t renew_before_ms, lockcore_keeper **out, char *errbuf, size_t errcap)
{
    if (o == NULL || lock == NULL || out == NULL) {
        lockcore__fmt(errbuf, errcap, "options, lock and out must not be NULL");
        return -EINVAL;
    }
    struct lockcore_keeper *k = calloc(1, sizeof(*k));
    if (k == NULL) {
        lockcore__fmt(errbuf, errcap, "out of memory");
        return -ENOMEM;
    }
    int rc = lockcore_client_new(o, &k->c, errbuf, errcap);
    if (rc == 0 &&
        (rc = lockcore_keepalive_start(k->c, lock, ttl_ms, renew_before_ms, keeper_lost, k, &k->ka)) < 0)
        lockcore__fmt(errbuf, errcap, "%s", lockcore_errmsg(k->c));
    if (rc == 0) {
        k->lock = *lock;
        pthread_mutex_init(&k->mu, NULL);
        if ((rc = -pthread_create(&k->thread, NULL, keeper_main, k)) < 0) {
            pthread_mutex_destroy(&k->mu);
            lockcore__fmt(errbuf, errcap, "pthread_create: %s", strerror(-rc));
        }
    }
    if (rc < 0) {
        lockcore_keepalive_stop(k->ka);
        lockcore_client_free(k->c);
        free(k);
        return rc;
    }
    *out = k;
    return 0;
}

int lockcore_keeper_get(lockcore_keeper *k, struct lockcore_lock *out)
{
    if (k == NULL)
        return -EINVAL;
    pthread_mutex_lock(&k->mu);
    int rc = k->rc;
    /* The validity is the last word, whatever the thread has or has not
     * done: a lease that ran out is lost. */
    if (rc == 0 && lockcore_remaining_ms(&k->lock) == 0) {
        rc = k->rc = LOCKCORE_ELOST;
        lockcore__fmt(k->why, sizeof(k->why),
                      "lock on '%s' lost: validity ran out before it could be extended", k->lock.resource);
    }
    if (out != NULL)
        *out = k->lock;
    pthread_mutex_unlock(&k->mu);
    return rc;
}

const char *lockcore_keeper_errmsg(lockcore_keeper *k)
{
    if (k == NULL)
        return "no keeper";
    pthread_mutex_lock(&k->mu);
    const char *m = k->rc == 0 ? lockcore_strerror(0) : k->why;
    pthread_mutex_unlock(&k->mu);
    return m;
}

int lockcore_keeper_stop(lockcore_keeper *k, struct lockcore_lock *out)
{
    if (k == NULL)
        return 0;
    atomic_store(&k->stop, 1);
    pthread_join(k->thread, NULL);
    int rc = lockcore_keeper_get(k, out);
    lockcore_keepalive_stop(k->ka);
    lockcore_client_free(k->c);
    pthread_mutex_destroy(&k->mu);
    free(k);
    return rc;
}
