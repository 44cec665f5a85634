/*
 * The counting semaphore: permits that are each a plain lock of the
 * resource "<resource>:permit:<i>". At most one client holds each permit
 * (the plain lock's majority argument), so at most `permits` hold at
 * once, by construction; counting holders per node and taking a majority
 * would not be safe over independent masters (docs/lockcore.md).
 *
 * An acquisition is a driver: it tries the permits one at a time in a
 * random order, each with one plain attempt, keeps the first granted, and
 * when every permit refused waits and tries them all again. Polling, it
 * waits the retry delay. Notified or fair, it waits in line: one place in
 * the semaphore's own queue ("{" resource "}:waiters"), taken by its
 * permit attempts (the waiter's queued acquire, on the permit's key and
 * the semaphore's queue); a permit's release names the first waiter there
 * and keeps that permit for it ("id@permit key" on the semaphore's
 * channel), and the driver tries that permit first. Its timers run in the
 * client's loop (the kind table's next_timer and check).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kinds.h"
#include "lockcore_lua.h"

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
    struct lockcore__call call; /* the acquisition's options; its permits' too */
    /* Waiting in line (notified or fair): the acquisition's id and ticket,
     * shared by its permit attempts; the semaphore's release channel. */
    int line;
    int listening;          /* holds a reference on the channel */
    unsigned behind;        /* the last attempt's nodes with another waiter first */
    unsigned free_rounds;   /* rounds that only refreshed its place in line */
    int free_next;          /* the next round is one of those */
    int noticed;            /* named while a round was in flight: go again at once */
    unsigned first;         /* a permit a release kept for it; permits: none */
    int64_t pttl_min;       /* the least holder pttl this round's refusals named; -1: none */
    uint64_t hint_at;       /* the waiter ahead's reservation ends then: look; 0 = none */
    uint64_t counted_at_ms; /* in line: the last refused round that counted */
    unsigned named[8];      /* permits releases kept for it (handed back when done) */
    unsigned n_named;
    char qid[LOCKCORE_ID_LEN + 1];
    uint64_t ticket;
    char chan[1][CHAN_MAX];
    size_t chan_len[1];
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

/* The semaphore's base key (prefix and resource), for its queue. */
static size_t sem_key(const struct lockcore__sem *d, char *out)
{
    const lockcore_client *c = d->c;
    size_t l = strlen(d->resource);
    memcpy(out, c->prefix, c->prefix_len);
    memcpy(out + c->prefix_len, d->resource, l + 1);
    return c->prefix_len + l;
}

/* A driver that is done leaves the semaphore's queue on every node (fire
 * and forget), and hands back the permits releases kept for it other than
 * the one it took (taken: its index; permits: none), to the next waiter. */
static void sem_leave_line(struct lockcore__sem *d, unsigned taken)
{
    lockcore_client *c = d->c;
    char key[KEY_MAX + 1], q[QUEUE_KEY_MAX + 1], dl[QUEUE_KEY_MAX + 1], mark[QUEUE_KEY_MAX + 1];
    char permit[8][KEY_MAX + 32], what[24];
    size_t kl = sem_key(d, key);
    lockcore__kinds_tagged(q, key, ":waiters");
    lockcore__kinds_tagged(dl, key, ":waiting");
    lockcore__kinds_tagged(mark, key, ":wanted");
    lockcore__release_mode(c, d->call.wait_mode, what, sizeof(what));
    const char *argv[6 + 8 + 2] = {"EVAL", lockcore__lua_sem_leave, NULL, q, dl, mark};
    int argc = 6;
    char nkeys[16];
    for (unsigned k = 0; k < d->n_named; k++) {
        if (d->named[k] == taken)
            continue;
        snprintf(permit[k], sizeof(permit[k]), "%.*s:permit:%u", (int)kl, key, d->named[k]);
        argv[argc++] = permit[k];
    }
    snprintf(nkeys, sizeof(nkeys), "%d", argc - 3);
    argv[2] = nkeys;
    argv[argc++] = d->qid;
    argv[argc++] = what;
    size_t lens[6 + 8 + 2];
    for (int k = 0; k < argc; k++)
        lens[k] = strlen(argv[k]);
    uint64_t now = lockcore_now_ms();
    for (unsigned i = 0; i < c->n; i++)
        if (c->nodes[i].state != NODE_DOWN)
            lockcore__node_send(c, &c->nodes[i], argc, argv, lens, NULL, STEP_IGNORE, 0, now);
    /* Sent now, not after the caller's callback: a slow one would keep a
     * fair line waiting meanwhile. */
    for (unsigned i = 0; i < c->n; i++)
        lockcore__node_flush(c, &c->nodes[i]);
}

/* End the acquisition: the callback gets the permit (rc 0) or the counts. */
static void sem_finish(struct lockcore__sem *d, int rc, const struct lockcore_lock *granted)
{
    lockcore_client *c = d->c;
    struct lockcore_lock lock;
    /* Granted or given up, a driver waits no more: it leaves the line
     * (a holder left at its head would be named by the next permit's
     * release, and the permit kept for it, instead of for a waiter). */
    if (d->line) /* even while the client is freed: flushed before close */
        sem_leave_line(d, granted != NULL && d->tried > 0 ? d->order[d->tried - 1] : d->permits);
    if (d->listening)
        lockcore__notify_drop_names(c, d->chan, d->chan_len, 1);
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
    lockcore_client *c = d->c;
    char name[LOCKCORE_RESOURCE_MAX + 32]; /* the resource is at most LOCKCORE_RESOURCE_MAX - 16 */
    snprintf(name, sizeof(name), "%s:permit:%u", d->resource, d->order[d->tried]);
    d->tried++;
    d->attempts++;
    d->behind = 0;
    int rc = lockcore__kinds_check_client(c);
    struct op *op = rc == 0 ? lockcore__acquire_op(c, name, NULL, &d->call, sem_on_permit, d, &rc) : NULL;
    if (op == NULL)
        return rc;
    op->lock.flags = LOCKCORE_LOCK_PERMIT;
    op->type = &lockcore__kind_sem;
    op->wait_deadline_ms = 1; /* one attempt: the driver retries */
    if (d->line) {
        /* In line: the semaphore's queue, the driver's id and ticket, and
         * attempt numbers that go on across its permits (each attempt's
         * lock id stays its own). */
        memcpy(op->qid, d->qid, sizeof(op->qid));
        op->ticket = op->lock.ticket = d->ticket;
        op->lock.attempts = d->attempts - 1;
        op->queued = 1;
        op->keep_place = 1;
        char key[KEY_MAX + 1];
        lockcore__op_set_queue(op, key, sem_key(d, key));
    }
    d->op = op;
    lockcore__op_start(op, lockcore_now_ms());
    return 0;
}

static int sem_round(struct lockcore__sem *d)
{
    d->rounds++;
    d->tried = 0;
    d->locked = 0;
    d->nodes_ok = 0;
    d->pttl_min = -1;
    sem_shuffle(d);
    if (d->first < d->permits) {
        /* The permit a release kept for it goes first. */
        for (unsigned k = 0; k < d->permits; k++) {
            if (d->order[k] == d->first) {
                d->order[k] = d->order[0];
                d->order[0] = d->first;
                break;
            }
        }
        d->first = d->permits;
    }
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
     * reach). Wait, then a new round: polling, the retry delay; in line,
     * until a release names it or its place needs a refresh. */
    int round_rc = d->locked ? LOCKCORE_ELOCKED : d->last_rc;
    uint64_t now = lockcore_now_ms();
    uint64_t delay = c->o.retry_delay_ms;
    if (c->o.retry_jitter_ms > 0)
        delay += lockcore__rand64(&c->rng) % (c->o.retry_jitter_ms + 1);
    if (d->free_next) {
        d->free_next = 0;
        d->free_rounds++;
    } else if (d->line && d->locked) {
        /* In line, at most one refused round per refresh period counts, as
         * for any waiter (fairness.md, "Retries"). */
        if (d->counted_at_ms != 0 && now - d->counted_at_ms < c->o.queue_ttl_ms / 3)
            d->free_rounds++;
        else
            d->counted_at_ms = now;
    }
    int noticed = d->noticed;
    d->noticed = 0;
    if (d->line && d->locked && !c->notify_refused) {
        if (!d->listening)
            d->listening = lockcore__notify_want_names(c, d->chan, d->chan_len, 1) == 0;
        if (d->listening) {
            /* Until a release names it, a lease runs out (a holder that
             * died, or a permit kept for a waiter that did) or its place
             * needs a refresh. A refresh while other waiters are ahead is
             * not a retry. */
            delay = noticed ? 0 : c->o.queue_ttl_ms / 3;
            if (!noticed && d->behind < c->quorum && d->pttl_min >= 0 && (uint64_t)d->pttl_min + 1 < delay)
                delay = (uint64_t)d->pttl_min + 1;
            /* Answering a release, or refreshing while others are ahead:
             * not a retry. */
            d->free_next = noticed || d->behind >= c->quorum;
            if (d->hint_at != 0) {
                uint64_t h = d->hint_at > now ? d->hint_at - now : 0;
                if (h < delay) {
                    delay = h;
                    d->free_next = 1; /* a look at the reservation ahead */
                }
            }
        }
    }
    d->hint_at = 0;
    int more = d->call.retry_count < 0 || d->rounds - d->free_rounds <= (unsigned)d->call.retry_count;
    if (d->deadline_ms != 0 && now + delay >= d->deadline_ms) {
        delay = d->deadline_ms > now ? d->deadline_ms - now : 0;
        more = more && d->deadline_ms > now;
    }
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

struct lockcore__sem *lockcore__sem_start(lockcore_client *c, const char *resource, unsigned permits,
                                          const struct lockcore__call *k, lockcore_cb cb, void *arg, int *rcp)
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
    d->first = permits;
    d->cb = cb;
    d->arg = arg;
    d->call = *k;
    d->line =
        k->retry_count != 0 && (k->wait_mode == LOCKCORE_WAIT_NOTIFY || k->wait_mode == LOCKCORE_WAIT_FAIR);
    if (d->line) {
        if ((rc = lockcore__new_qid(c, k->tag, d->qid)) < 0) {
            lockcore__fmt(c->errmsg, sizeof(c->errmsg), "no randomness for the lock id: %s", strerror(-rc));
            free(d->order);
            free(d);
            *rcp = rc;
            return NULL;
        }
        d->ticket = c->o.clock_us(c->o.clock_arg);
        char key[KEY_MAX + 1];
        size_t kl = sem_key(d, key);
        lockcore__kinds_tagged(d->chan[0], key, ":released:");
        memcpy(d->chan[0] + kl + 12, c->id_prefix, 17);
        d->chan_len[0] = kl + 28;
    }
    d->deadline_ms = k->wait_ms ? lockcore_now_ms() + k->wait_ms : 0;
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
    struct lockcore_request rq = {.kind = LOCKCORE_LOCK_PERMIT, .resource = resource, .permits = permits};
    return lockcore_acquire_call_async(c, &rq, NULL, cb, arg);
}

void lockcore__sem_abort(void *what, int err, const char *why)
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
    struct lockcore_request rq = {.kind = LOCKCORE_LOCK_PERMIT, .resource = resource, .permits = permits};
    return lockcore__acquire_blocking(c, "lockcore_sem_acquire", &rq, NULL, lock);
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
    /* A callback run from here (a driver that ends) may start acquisitions
     * and cancel others: the search starts over after each round. A round
     * begun is not due again (retry_at_ms 0), so this ends. */
    for (;;) {
        struct lockcore__sem *d = c->kx.sems;
        while (d != NULL && (d->retry_at_ms == 0 || now < d->retry_at_ms))
            d = d->next;
        if (d == NULL)
            return;
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

/* A permit's acquisition carries its driver: the caller's is there. */
static int sem_started_by(const struct op *op, lockcore_cb cb, void *arg)
{
    const struct lockcore__sem *d = op->arg;
    return op->cb == sem_on_permit && d != NULL && d->cb == cb && d->arg == arg;
}

/* The drivers the caller started with (cb, arg) end: one with a permit's
 * acquisition (in flight or ended, not yet delivered: the core canceled
 * it) when that is delivered, one between rounds at once. A callback run
 * here may start or cancel others: the search starts over after each. */
static unsigned sem_cancel_calls(lockcore_client *c, lockcore_cb cb, void *arg)
{
    unsigned n = 0;
    for (struct lockcore__sem *d = c->kx.sems; d != NULL; d = d->next)
        if (!d->ending && d->cb == cb && d->arg == arg && d->op != NULL)
            d->ending = 1; /* counted with its operation */
    for (;;) {
        struct lockcore__sem *d = c->kx.sems;
        while (d != NULL && (d->ending || d->cb != cb || d->arg != arg))
            d = d->next;
        if (d == NULL)
            return n;
        d->ending = 1;
        n++;
        lockcore__fmt(c->errmsg, sizeof(c->errmsg), "semaphore '%s': canceled by the caller", d->resource);
        sem_finish(d, LOCKCORE_ECANCELED, NULL);
    }
}

/* A permit is a plain lock: its commands are the plain ones. */
static int permit_resend(struct op *op, unsigned i, enum step step, int use_eval, uint64_t now)
{
    (void)op, (void)i, (void)step, (void)use_eval, (void)now;
    return 1;
}

/* A permit's waiters wait in its semaphore's queue: its key is the
 * permit's with ":permit:<i>" cut off. */
static void permit_queue_key(struct op *op)
{
    const char *p = strrchr(op->key, ':');
    size_t len = p != NULL ? (size_t)(p - op->key) : 0;
    if (len >= 7 && memcmp(op->key + len - 7, ":permit", 7) == 0)
        lockcore__op_set_queue(op, op->key, len - 7);
}

/* Which of a permit attempt's refusals name another waiter first. */
static void permit_reply(struct op *op, unsigned i, const redisReply *r)
{
    (void)i;
    struct lockcore__sem *d = op->arg;
    if (op->cb != sem_on_permit || d == NULL || !d->line)
        return;
    if (r->type == REDIS_REPLY_ARRAY && r->elements >= 6 && r->element[0]->type == REDIS_REPLY_INTEGER &&
        r->element[0]->integer == 0 && r->element[5]->type == REDIS_REPLY_STRING &&
        (r->element[5]->len != LOCKCORE_ID_LEN || memcmp(r->element[5]->str, d->qid, LOCKCORE_ID_LEN) != 0))
        d->behind++;
    if (r->type == REDIS_REPLY_ARRAY && r->elements >= 5 && r->element[0]->type == REDIS_REPLY_INTEGER &&
        r->element[0]->integer == 0 && r->element[4]->type == REDIS_REPLY_INTEGER &&
        r->element[4]->integer >= 0 && (d->pttl_min < 0 || r->element[4]->integer < d->pttl_min))
        d->pttl_min = r->element[4]->integer;
}

static struct lockcore__sem *sem_of(lockcore_client *c, const char *qid)
{
    for (struct lockcore__sem *d = c->kx.sems; d != NULL; d = d->next)
        if (d->line && memcmp(d->qid, qid, LOCKCORE_ID_LEN) == 0)
            return d;
    return NULL;
}

/* A release named a waiting driver (and the permit it kept for it: that
 * one goes first), or told it to try when the waiter ahead's reservation
 * ends. */
static void sem_notice(lockcore_client *c, const char *qid, const char *key, size_t key_len, uint64_t hint,
                       uint64_t now)
{
    struct lockcore__sem *d = sem_of(c, qid);
    if (d == NULL)
        return;
    /* The permit kept for it: tried first, and handed back when done if
     * another was taken. */
    const char *p = key_len > 0 ? memrchr(key, ':', key_len) : NULL;
    size_t n = p != NULL ? key_len - (size_t)(p + 1 - key) : 0;
    if (n > 0 && n < 16) {
        char num[16];
        memcpy(num, p + 1, n);
        num[n] = '\0';
        unsigned long v = strtoul(num, NULL, 10);
        d->first = v < d->permits ? (unsigned)v : d->permits;
        int seen = d->first == d->permits;
        for (unsigned k = 0; k < d->n_named && !seen; k++)
            seen = d->named[k] == d->first;
        if (!seen && d->n_named < sizeof(d->named) / sizeof(d->named[0]))
            d->named[d->n_named++] = d->first;
    }
    if (hint != 0) {
        /* The waiter ahead was named: if it died, its reservation lapses
         * then, and a permit with it. A look, not a retry; one planned
         * sooner (a round in flight) keeps it for its own wait. */
        if (d->retry_at_ms > now + hint) {
            d->retry_at_ms = now + hint;
            d->free_next = 1;
        } else if (d->hint_at == 0 || now + hint < d->hint_at) {
            d->hint_at = now + hint;
        }
        return;
    }
    if (d->retry_at_ms == 0) { /* a round in flight: it may be refused yet */
        d->noticed = 1;
        return;
    }
    if (d->retry_at_ms > now) {
        d->retry_at_ms = now;
        d->free_next = 1; /* answers a release: not a retry */
    }
}

/* A node confirmed the semaphore's channel: a release between the
 * driver's refusal and now told nobody; try again (not a retry). */
static void sem_subscribed(lockcore_client *c, const char *chan, size_t len, uint64_t now)
{
    for (struct lockcore__sem *d = c->kx.sems; d != NULL; d = d->next) {
        if (d->listening && d->retry_at_ms > now && d->chan_len[0] == len &&
            memcmp(d->chan[0], chan, len) == 0) {
            d->retry_at_ms = now;
            d->free_next = 1;
        }
    }
}

/* A driver over plain acquisitions (a permit is a plain lock): its rounds
 * are timers of the client's loop, ended when the client is freed. */
const struct lockcore__kind lockcore__kind_sem = {
    .name = "semaphore",
    .flag = LOCKCORE_LOCK_PERMIT,
    .resend = permit_resend,
    .lock_reply = permit_reply,
    .queue_key = permit_queue_key,
    .notice = sem_notice,
    .subscribed = sem_subscribed,
    .next_timer = sem_next_timer,
    .check = sem_check,
    .cancel = sem_cancel,
    .started_by = sem_started_by,
    .cancel_calls = sem_cancel_calls,
};

/* One permit's view from its nodes' (st, n of them): the id most hold. */
static void permit_view(const lockcore_client *c, const struct lockcore_node_status *st, unsigned p,
                        struct lockcore_permit_status *ps)
{
    memset(ps, 0, sizeof(*ps));
    ps->permit = p;
    ps->pttl_ms = -2;
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
}

static int check_sem_status(lockcore_client *c, const char *resource, unsigned permits,
                            const struct lockcore_permit_status *out, size_t cap)
{
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
    return 0;
}

int lockcore_sem_status(lockcore_client *c, const char *resource, unsigned permits,
                        struct lockcore_permit_status *out, size_t cap)
{
    if (c == NULL)
        return -EINVAL;
    int rc = check_sem_status(c, resource, permits, out, cap);
    if (rc < 0)
        return rc;
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
        permit_view(c, st, p, &out[p]);
        held += out[p].held;
        if (out[p].reachable < c->quorum) {
            lockcore__fmt(c->errmsg, sizeof(c->errmsg), "semaphore '%s': permit %u: %u of %u nodes answered",
                          resource, p, out[p].reachable, c->n);
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

/* A semaphore's status read without blocking: every permit's read at
 * once, the answer when the last is in. */
struct sem_read {
    lockcore_client *c;
    lockcore_cb cb;
    void *arg;
    char resource[LOCKCORE_RESOURCE_MAX + 1];
    unsigned permits, left;
    int rc;
    struct lockcore_permit_status *out;
    struct lockcore_node_status *st; /* permits x c->n */
};

static void sem_read_one(lockcore_client *c, int rc, const struct lockcore_lock *lock, void *arg)
{
    struct sem_read *r = arg;
    unsigned p = 0;
    /* Which permit: the resource ends in ":permit:<p>". */
    const char *colon = strrchr(lock->resource, ':');
    if (colon != NULL)
        p = (unsigned)strtoul(colon + 1, NULL, 10);
    if (rc < 0 && r->rc >= 0)
        r->rc = rc;
    if (rc >= 0 && p < r->permits) {
        permit_view(c, r->st + (size_t)p * c->n, p, &r->out[p]);
        if (r->out[p].reachable < c->quorum && r->rc >= 0)
            r->rc = LOCKCORE_ENOQUORUM;
        else if (r->rc >= 0)
            r->rc += r->out[p].held;
    }
    if (--r->left > 0)
        return;
    struct lockcore_lock none;
    memset(&none, 0, sizeof(none));
    snprintf(none.resource, sizeof(none.resource), "%s", r->resource);
    none.nodes = c->n;
    lockcore_cb cb = r->cb;
    void *a = r->arg;
    int out_rc = r->rc;
    free(r->st);
    free(r);
    cb(c, out_rc, &none, a);
}

int lockcore_sem_status_async(lockcore_client *c, const char *resource, unsigned permits,
                              struct lockcore_permit_status *out, size_t cap, lockcore_cb cb, void *arg)
{
    if (c == NULL)
        return -EINVAL;
    int rc = lockcore__kinds_check_client(c);
    if (rc == 0 && cb == NULL) {
        lockcore__fmt(c->errmsg, sizeof(c->errmsg), "callback is NULL");
        rc = -EINVAL;
    }
    if (rc == 0)
        rc = check_sem_status(c, resource, permits, out, cap);
    if (rc < 0)
        return rc;
    struct sem_read *r = calloc(1, sizeof(*r));
    if (r == NULL || (r->st = calloc((size_t)permits * c->n, sizeof(*r->st))) == NULL) {
        free(r);
        lockcore__fmt(c->errmsg, sizeof(c->errmsg), "out of memory");
        return -ENOMEM;
    }
    r->c = c;
    r->cb = cb;
    r->arg = arg;
    r->permits = permits;
    r->out = out;
    snprintf(r->resource, sizeof(r->resource), "%s", resource);
    /* Each read counts once it is started; the last to end answers. */
    r->left = 1;
    for (unsigned p = 0; p < permits; p++) {
        char name[LOCKCORE_RESOURCE_MAX + 32];
        snprintf(name, sizeof(name), "%s:permit:%u", resource, p);
        r->left++;
        if (lockcore_status_async(c, name, 0, r->st + (size_t)p * c->n, c->n, sem_read_one, r) != 0) {
            r->left--;
            if (r->rc >= 0)
                r->rc = -ENOMEM;
        }
    }
    /* The reads' callbacks run from a later turn of the loop: none has
     * ended yet. */
    if (--r->left == 0) {
        free(r->st);
        free(r);
        return -ENOMEM;
    }
    return 0;
}
