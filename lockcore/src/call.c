/*
 * Acquisitions with options of their own (lockcore_call) and of any kind
 * (lockcore_request): every kind's public acquire comes through here with
 * the client's options, so one client serves acquisitions with different
 * TTLs, waits and owners. An owner's tag in the lock id (lockcore.h) lets
 * a service tell by the id alone whom an acquisition was for.
 */
#include <errno.h>
#include <string.h>

#include "internal.h"
#include "kinds/kinds.h"

int lockcore_call_init(const lockcore_client *c, struct lockcore_call *call)
{
    if (c == NULL || call == NULL)
        return -EINVAL;
    memset(call, 0, sizeof(*call));
    call->ttl_ms = c->o.ttl_ms;
    call->wait_ms = c->o.wait_ms;
    call->retry_count = c->o.retry_count;
    call->wait_mode = c->o.wait_mode;
    return 0;
}

int lockcore_owner_tag(const char *owner, char tag[LOCKCORE_OWNER_TAG_LEN + 1])
{
    if (owner == NULL || tag == NULL || owner[0] == '\0' ||
        strnlen(owner, LOCKCORE_OWNER_MAX + 1) > LOCKCORE_OWNER_MAX)
        return -EINVAL;
    static const char domain[] = "lockcore owner\n";
    unsigned char in[sizeof(domain) - 1 + LOCKCORE_OWNER_MAX], md[32];
    size_t n = strlen(owner);
    memcpy(in, domain, sizeof(domain) - 1);
    memcpy(in + sizeof(domain) - 1, owner, n);
    if (lockcore__sha256(in, sizeof(domain) - 1 + n, md) < 0)
        return -ENOMEM;
    lockcore__hex(tag, md, LOCKCORE_OWNER_TAG_LEN / 2);
    return 0;
}

int lockcore_id_owned_by(const char *id, const char *owner)
{
    char tag[LOCKCORE_OWNER_TAG_LEN + 1];
    if (id == NULL || !lockcore__kinds_is_id(id) || lockcore_owner_tag(owner, tag) < 0)
        return 0;
    return memcmp(id + 16, tag, LOCKCORE_OWNER_TAG_LEN) == 0;
}

int lockcore__call_check(lockcore_client *c, const struct lockcore_call *call, struct lockcore__call *out)
{
    memset(out, 0, sizeof(*out));
    if (call == NULL) {
        out->ttl_ms = c->o.ttl_ms;
        out->wait_ms = c->o.wait_ms;
        out->retry_count = c->o.retry_count;
        out->wait_mode = c->o.wait_mode;
        return 0;
    }
    const char *bad = NULL;
    if (call->ttl_ms <= c->o.request_timeout_ms || call->ttl_ms <= c->o.drift_ms ||
        call->ttl_ms > LOCKCORE__TTL_MAX_MS)
        bad = "ttl_ms out of range: above the request timeout and drift_ms, at most 24 h";
    else if (call->wait_ms > LOCKCORE__WAIT_MAX_MS)
        bad = "wait_ms must be below one year";
    else if (call->retry_count < -1)
        bad = "retry_count must be -1 (no limit) or more";
    else if (call->wait_mode < LOCKCORE_WAIT_POLL || call->wait_mode > LOCKCORE_WAIT_FAIR)
        bad = "wait_mode must be LOCKCORE_WAIT_POLL, _NOTIFY or _FAIR";
    else if (call->owner != NULL && lockcore_owner_tag(call->owner, out->tag) < 0)
        bad = "owner must be 1..64 bytes";
    if (bad != NULL) {
        lockcore__fmt(c->errmsg, sizeof(c->errmsg), "%s", bad);
        return -EINVAL;
    }
    out->ttl_ms = call->ttl_ms;
    out->wait_ms = call->wait_ms;
    out->retry_count = call->retry_count;
    out->wait_mode = call->wait_mode;
    return 0;
}

/* Start rq with k: the op, or the semaphore's driver, and how to end it. */
static void *start_request(lockcore_client *c, const struct lockcore_request *rq,
                           const struct lockcore__call *k, lockcore_cb cb, void *arg,
                           void (**abort_fn)(void *, int, const char *), int *rcp)
{
    *abort_fn = lockcore__kinds_abort_op;
    switch (rq->kind) {
    case 0:
        return lockcore__plain_start(c, rq->resource, k, cb, arg, rcp);
    case LOCKCORE_LOCK_PERMIT:
        *abort_fn = lockcore__sem_abort;
        return lockcore__sem_start(c, rq->resource, rq->permits, k, cb, arg, rcp);
    case LOCKCORE_LOCK_MULTI:
        return lockcore__multi_start(c, rq->resources, rq->n_resources, k, cb, arg, rcp);
    case LOCKCORE_LOCK_REENTRANT:
        return lockcore__re_start(c, rq->resource, rq->join, k, cb, arg, rcp);
    case LOCKCORE_LOCK_READ:
    case LOCKCORE_LOCK_WRITE:
        return lockcore__rw_start(c, rq->resource, rq->kind == LOCKCORE_LOCK_WRITE, k, cb, arg, rcp);
    default:
        lockcore__fmt(c->errmsg, sizeof(c->errmsg),
                      "kind must be 0 or one of LOCKCORE_LOCK_PERMIT, _MULTI, _REENTRANT, _READ, _WRITE");
        *rcp = -EINVAL;
        return NULL;
    }
}

static int check_request(lockcore_client *c, const struct lockcore_request *rq)
{
    if (rq == NULL) {
        lockcore__fmt(c->errmsg, sizeof(c->errmsg), "request is NULL");
        return -EINVAL;
    }
    if (rq->kind != LOCKCORE_LOCK_REENTRANT && rq->join != NULL) {
        lockcore__fmt(c->errmsg, sizeof(c->errmsg), "only a reentrant acquisition joins a hold");
        return -EINVAL;
    }
    if (rq->kind != LOCKCORE_LOCK_PERMIT && rq->permits != 0) {
        lockcore__fmt(c->errmsg, sizeof(c->errmsg), "only a semaphore has permits");
        return -EINVAL;
    }
    return 0;
}

int lockcore_acquire_call_async(lockcore_client *c, const struct lockcore_request *rq,
                                const struct lockcore_call *call, lockcore_cb cb, void *arg)
{
    if (c == NULL)
        return -EINVAL;
    struct lockcore__call k;
    void (*abort_fn)(void *, int, const char *);
    int rc = check_request(c, rq);
    if (rc == 0)
        rc = lockcore__call_check(c, call, &k);
    if (rc == 0)
        start_request(c, rq, &k, cb, arg, &abort_fn, &rc);
    return rc;
}

int lockcore__acquire_blocking(lockcore_client *c, const char *what, const struct lockcore_request *rq,
                               const struct lockcore_call *call, struct lockcore_lock *lock)
{
    if (c == NULL)
        return -EINVAL;
    if (lock == NULL) {
        lockcore__fmt(c->errmsg, sizeof(c->errmsg), "lock is NULL");
        return -EINVAL;
    }
    struct lockcore__call k;
    int rc = check_request(c, rq);
    if (rc == 0)
        rc = lockcore__call_check(c, call, &k);
    if (rc == 0)
        rc = lockcore__enter(c, what);
    if (rc < 0)
        return rc;
    struct lockcore__waiter w = {0};
    void (*abort_fn)(void *, int, const char *);
    void *started = start_request(c, rq, &k, lockcore__kinds_wake, &w, &abort_fn, &rc);
    if (started == NULL) {
        lockcore__leave(c);
        return rc;
    }
    rc = lockcore__kinds_wait(c, &w, abort_fn, started);
    *lock = w.lock;
    return rc;
}

int lockcore_acquire_call(lockcore_client *c, const struct lockcore_request *rq,
                          const struct lockcore_call *call, struct lockcore_lock *lock)
{
    return lockcore__acquire_blocking(c, "lockcore_acquire_call", rq, call, lock);
}
