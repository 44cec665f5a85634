/*
 * Steps with undo under a held lock (seed 004's "transaction manager"): run
 * the steps in order, check that the lock is still held before the first
 * step and after each one, and on a failed step or a lost lock undo the
 * steps done so far, last first. See lockcore.h, "Steps with undo".
 */
#include <errno.h>
#include <string.h>

#include "internal.h"

int lockcore_steps_options_init(struct lockcore_steps_options *o)
{
    if (o == NULL)
        return -EINVAL;
    memset(o, 0, sizeof(*o));
    o->confirm = 1;
    return 0;
}

static const char *step_name(const struct lockcore_step *s, char *buf, size_t cap, size_t i)
{
    if (s->name != NULL && s->name[0] != '\0')
        lockcore__fmt(buf, cap, "step %zu ('%s')", i, s->name);
    else
        lockcore__fmt(buf, cap, "step %zu", i);
    return buf;
}

/*
 * Is the lock still ours? Runs the keep-alive's due work, then (confirm)
 * extends the lock on a majority, then checks the validity left. Returns 0,
 * or the code it was lost with; why gets the detail.
 */
static int checkpoint(lockcore_client *c, struct lockcore_lock *lock, const struct lockcore_steps_options *o,
                      char *why, size_t cap)
{
    if (o->keepalive != NULL) {
        int rc = lockcore_run(c, 0); /* on_lost runs from here, if it is due */
        if (rc < 0) {
            lockcore__fmt(why, cap, "%s", lockcore_errmsg(c));
            return rc;
        }
        struct lockcore_lock cur;
        rc = lockcore_keepalive_get(o->keepalive, &cur);
        if (rc != 0) {
            lockcore__fmt(why, cap, "the keep-alive lost it (%s)", lockcore_strerror(rc));
            return rc;
        }
        /* The keep-alive's copy carries the latest extension. */
        if (strcmp(cur.id, lock->id) == 0 && cur.valid_until_ms > lock->valid_until_ms)
            *lock = cur;
    }
    if (o->confirm) {
        int rc = lockcore_extend(c, lock, o->ttl_ms);
        if (rc != 0) {
            lockcore__fmt(why, cap, "%s", lockcore_errmsg(c));
            return rc;
        }
    }
    uint64_t left = lockcore_remaining_ms(lock);
    if (left == 0 || left < o->min_validity_ms) {
        lockcore__fmt(why, cap, "%llu ms of validity left, %llu ms needed", (unsigned long long)left,
                      (unsigned long long)(o->min_validity_ms ? o->min_validity_ms : 1));
        return LOCKCORE_ELOST;
    }
    return 0;
}

int lockcore_steps_run(lockcore_client *c, struct lockcore_lock *lock, const struct lockcore_step *steps,
                       size_t n, const struct lockcore_steps_options *opts,
                       struct lockcore_steps_report *report)
{
    if (c == NULL)
        return -EINVAL;
    if (c->in_cb > 0) {
        lockcore__fmt(c->errmsg, sizeof(c->errmsg),
                      "lockcore_steps_run called from a callback (not allowed: see lockcore.h)");
        return -EDEADLK;
    }
    int rc = lockcore__check_lock(c, lock);
    if (rc != 0)
        return rc;
    if (steps == NULL && n > 0) {
        lockcore__fmt(c->errmsg, sizeof(c->errmsg), "steps is NULL");
        return -EINVAL;
    }
    for (size_t i = 0; i < n; i++) {
        if (steps[i].run == NULL) {
            lockcore__fmt(c->errmsg, sizeof(c->errmsg), "step %zu has no run function", i);
            return -EINVAL;
        }
    }
    struct lockcore_steps_options o;
    lockcore_steps_options_init(&o);
    if (opts != NULL)
        o = *opts;
    if ((rc = lockcore__check_ttl(c, o.ttl_ms, "steps ttl_ms")) != 0)
        return rc;
    if (o.keepalive == NULL && !o.confirm && lock->flags & LOCKCORE_LOCK_FROM_ID) {
        lockcore__fmt(c->errmsg, sizeof(c->errmsg),
                      "a lock from lockcore_lock_from_id has no known validity: confirm it with the nodes");
        return -EINVAL;
    }
    struct lockcore_steps_report r;
    memset(&r, 0, sizeof(r));
    r.stopped_at = n;

    char why[ERRMSG_MAX], name[96];
    size_t done = 0;
    rc = checkpoint(c, lock, &o, why, sizeof(why));
    if (rc != 0) {
        r.lost = 1;
        r.stopped_at = 0;
        lockcore__fmt(c->errmsg, sizeof(c->errmsg), "lock on '%s' lost before step 0: %s", lock->resource,
                      why);
    }
    while (rc == 0 && done < n) {
        const struct lockcore_step *s = &steps[done];
        struct lockcore_step_ctx ctx = {.lock = lock, .index = done, .reason = 0, .stopped_at = n, .lost = 0};
        int src = s->run(&ctx, s->arg);
        if (src != 0) {
            rc = src;
            r.stopped_at = done;
            lockcore__fmt(c->errmsg, sizeof(c->errmsg), "%s failed with %d",
                          step_name(s, name, sizeof(name), done), src);
            break;
        }
        done++;
        /* After every step, the last included: a step that ran past the
         * validity may have acted without the lock, so it is undone too. */
        rc = checkpoint(c, lock, &o, why, sizeof(why));
        if (rc != 0) {
            r.lost = 1;
            r.stopped_at = done;
            lockcore__fmt(c->errmsg, sizeof(c->errmsg), "lock on '%s' lost after %s: %s", lock->resource,
                          step_name(s, name, sizeof(name), done - 1), why);
        }
    }
    r.done = done;
    r.reason = rc;
    if (rc != 0) {
        /* Undo what was done, last first; an undo that fails does not stop
         * the others (each one undoes its own step). */
        for (size_t i = done; i-- > 0;) {
            const struct lockcore_step *s = &steps[i];
            if (s->undo == NULL)
                continue;
            struct lockcore_step_ctx ctx = {
                .lock = lock, .index = i, .reason = rc, .stopped_at = r.stopped_at, .lost = r.lost};
            if (s->undo(&ctx, s->arg) == 0)
                r.undone++;
            else
                r.undo_failed++;
        }
    } else {
        c->errmsg[0] = '\0';
    }
    if (report != NULL)
        *report = r;
    return rc;
}
