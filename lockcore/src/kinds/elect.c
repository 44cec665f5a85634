/*
 * Leader election (lockcore.h, "Leader election"; docs/election.md). A
 * leader is the holder of the fair lock of the election's name, so:
 *
 *   - candidates wait in line in the order they asked, and one that dies
 *     while it waits is passed over once its place lapses, as any fair
 *     waiter (docs/fairness.md);
 *   - no two leaders' beliefs overlap where no two holders' do, since
 *     a leader believes it leads only within its lock's validity;
 *   - the epoch is the lock's fencing token, so epochs grow with election
 *     order and a deposed leader's writes are refused by every resource
 *     that checks tokens.
 *
 * Beside the lock, a leader keeps "<epoch> <value>" as its holder info,
 * set by a proclamation (an extension that also sets it, only where the
 * lock is still the leader's) right after the grant and whenever the
 * value changes; proclamations and resignations PUBLISH on the election's
 * channel "{key}:leader". Observers read the nodes and report a leader
 * only where a majority holds one lock id with one info: what a majority
 * holds for the name at once is one grant, so an observer never reports
 * an epoch that a majority had already left behind (the argument is in
 * docs/election.md). They read again when told, or when what they read
 * runs out (a leader that dies tells nobody), never on a period.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kinds.h"
#include "kind.h"
#include "lockcore_lua.h"

/* ---- the leader's lock: a plain fair lock with two commands of its own ---- */

/* The election's channel: "{" key "}:leader". */
static size_t leader_channel(const char *key, char *out)
{
    lockcore__kinds_tagged(out, key, ":leader");
    return strlen(out);
}

static int is_leader_channel(const char *chan, size_t len)
{
    return len > 9 && chan[0] == '{' && memcmp(chan + len - 8, "}:leader", 8) == 0;
}

/* Every extension of a leader's lock (a proclamation: op->say set; else a
 * keep-alive) and every release (a resignation, whichever call made it:
 * observers are told, the next candidate keeps its place) send the
 * election's scripts; everything else of a leader's lock is a plain
 * lock's. */
static int leader_resend(struct op *op, unsigned i, enum step step, int use_eval, uint64_t now)
{
    if (step != STEP_EXTEND && step != STEP_RELEASE)
        return 1;
    char chan[CHAN_MAX];
    leader_channel(op->key, chan);
    struct lockcore__kcmd k = {.nkeys = 0};
#define K(p, l) (k.keys[k.nkeys] = (p), k.klens[k.nkeys++] = (l))
#define A(p) (k.args[k.nargs] = (p), k.alens[k.nargs++] = strlen(p))
    if (step == STEP_EXTEND) {
        struct step_nums num;
        lockcore__step_nums(op, &num);
        lockcore__op_fence_keys(op);
        K(op->key, op->key_len);
        K(op->fhash, op->fhash_len);
        K(op->fkey, op->fkey_len);
        K(op->ikey, op->ikey_len);
        char ekey[KEY_MAX + 16];
        lockcore__kinds_tagged(ekey, op->key, ":epoch");
        K(ekey, strlen(ekey));
        A(op->lock.id);
        A(num.ttl);
        A(num.fexp);
        A(num.tok);
        A(op->fbucket);
        A(num.ahead);
        char epoch[24];
        lockcore__u64s(epoch, sizeof(epoch), op->lock.token);
        A(epoch);
        A(op->say != NULL ? op->say : "");
        A(op->say != NULL ? chan : ""); /* '': a keep-alive */
        return lockcore__kinds_send(op, i, step, KS_LEADER_PROCLAIM, lockcore__lua_leader_proclaim, use_eval,
                                    &k, now);
    }
    char reserve[24];
    lockcore__release_arg(op, step, reserve, sizeof(reserve));
    K(op->key, op->key_len);
    K(op->ikey, op->ikey_len);
    K(op->qkey, op->qkey_len);
    K(op->qexp, op->qexp_len);
    K(op->wkey, op->wkey_len);
    A(op->lock.id);
    A(reserve);
    A(chan);
#undef K
#undef A
    return lockcore__kinds_send(op, i, step, KS_LEADER_RESIGN, lockcore__lua_leader_resign, use_eval, &k,
                                now);
}

/* Candidates wait in the lock's queue (always fair). */
static int leader_queues(const struct op *op)
{
    (void)op;
    return 1;
}

/* ---- campaigns ---- */

struct lockcore__campaign {
    struct lockcore__campaign *next, *prev;
    lockcore_client *c;
    lockcore_cb cb;
    void *arg;
    struct op *op; /* the acquisition, then the proclamation */
    int canceled;
    char value[LOCKCORE_VALUE_MAX + 1];
};

static void campaign_unlink(struct lockcore__campaign *g)
{
    lockcore_client *c = g->c;
    if (g->prev)
        g->prev->next = g->next;
    else
        c->kx.campaigns = g->next;
    if (g->next)
        g->next->prev = g->prev;
}

static void quietly(lockcore_client *c, int rc, const struct lockcore_lock *lock, void *arg)
{
    (void)c, (void)rc, (void)lock, (void)arg;
}

/* End a campaign with rc: the caller's callback, once. A grant that is
 * not reported (rc != 0) is released first. */
static void campaign_end(struct lockcore__campaign *g, int rc, const struct lockcore_lock *lock, int release)
{
    lockcore_client *c = g->c;
    if (release) {
        struct lockcore_lock l = *lock;
        lockcore_release_async(c, &l, quietly, NULL);
    }
    struct lockcore_lock out = *lock;
    if (rc != 0) {
        out.id[0] = '\0';
        out.token = 0;
        out.validity_ms = out.valid_until_ms = 0;
    }
    campaign_unlink(g);
    lockcore_cb cb = g->cb;
    void *arg = g->arg;
    free(g);
    cb(c, rc, &out, arg);
}

static void campaign_proclaimed(lockcore_client *c, int rc, const struct lockcore_lock *lock, void *arg)
{
    (void)c;
    struct lockcore__campaign *g = arg;
    g->op = NULL;
    if (rc == 0 && g->canceled)
        rc = LOCKCORE_ECANCELED;
    /* Leader only once observers can see it: a proclamation that missed
     * a majority gives the lock back. */
    campaign_end(g, rc, lock, rc != 0 && rc != LOCKCORE_ELOST);
}

static void campaign_granted(lockcore_client *c, int rc, const struct lockcore_lock *lock, void *arg)
{
    struct lockcore__campaign *g = arg;
    g->op = NULL;
    if (rc == 0 && g->canceled)
        rc = LOCKCORE_ECANCELED;
    if (rc != 0) {
        campaign_end(g, rc, lock, 0);
        return;
    }
    struct lockcore_lock l = *lock;
    l.flags |= LOCKCORE_LOCK_LEADER;
    int src = 0;
    struct op *op = lockcore__op_for_lock(c, OP_EXTEND, &l, l.ttl_ms, campaign_proclaimed, g, &src);
    if (op == NULL) {
        campaign_end(g, src, &l, 1);
        return;
    }
    op->say = g->value;
    g->op = op;
    lockcore__op_start(op, lockcore_now_ms());
}

static int check_value(lockcore_client *c, const char *value)
{
    if (value != NULL && strnlen(value, LOCKCORE_VALUE_MAX + 1) > LOCKCORE_VALUE_MAX) {
        lockcore__fmt(c->errmsg, sizeof(c->errmsg), "a leader's value is at most %d bytes",
                      LOCKCORE_VALUE_MAX);
        return -EINVAL;
    }
    return 0;
}

static int check_election(lockcore_client *c, const char *name, const char *value)
{
    if (!c->o.fencing) {
        lockcore__fmt(c->errmsg, sizeof(c->errmsg), "an election needs fencing: its epoch is the token");
        return -EINVAL;
    }
    int rc = lockcore__kinds_check_name(c, name, LOCKCORE_RESOURCE_MAX);
    return rc == 0 ? check_value(c, value) : rc;
}

static struct lockcore__campaign *campaign_start(lockcore_client *c, const char *name, const char *value,
                                                 const struct lockcore_call *call, lockcore_cb cb, void *arg,
                                                 int *rcp)
{
    struct lockcore__call k;
    int rc = lockcore__kinds_check_client(c);
    if (rc == 0 && cb == NULL) {
        lockcore__fmt(c->errmsg, sizeof(c->errmsg), "callback is NULL");
        rc = -EINVAL;
    }
    if (rc == 0)
        rc = check_election(c, name, value);
    if (rc == 0)
        rc = lockcore__call_check(c, call, &k);
    struct lockcore__campaign *g = NULL;
    if (rc == 0 && (g = calloc(1, sizeof(*g))) == NULL) {
        lockcore__fmt(c->errmsg, sizeof(c->errmsg), "out of memory");
        rc = -ENOMEM;
    }
    *rcp = rc;
    if (rc < 0)
        return NULL;
    /* Candidates wait in line, in the order they asked. */
    k.wait_mode = LOCKCORE_WAIT_FAIR;
    if (call == NULL)
        k.retry_count = -1;
    g->c = c;
    g->cb = cb;
    g->arg = arg;
    snprintf(g->value, sizeof(g->value), "%s", value ? value : "");
    g->op = lockcore__kinds_start(c, name, LOCKCORE_LOCK_LEADER, NULL, 0, &k, campaign_granted, g, rcp);
    if (g->op == NULL) {
        free(g);
        return NULL;
    }
    g->next = c->kx.campaigns;
    if (g->next)
        g->next->prev = g;
    c->kx.campaigns = g;
    return g;
}

int lockcore_campaign_async(lockcore_client *c, const char *name, const char *value,
                            const struct lockcore_call *call, lockcore_cb cb, void *arg)
{
    if (c == NULL)
        return -EINVAL;
    int rc;
    campaign_start(c, name, value, call, cb, arg, &rc);
    return rc;
}

static void campaign_abort(void *what, int err, const char *why)
{
    struct lockcore__campaign *g = what;
    g->canceled = 1;
    if (g->op != NULL && g->op->phase != PH_DONE)
        lockcore__op_abort(g->op, err, why); /* its callback ends g */
}

int lockcore_campaign(lockcore_client *c, const char *name, const char *value,
                      const struct lockcore_call *call, struct lockcore_lock *lock)
{
    if (c == NULL)
        return -EINVAL;
    if (lock == NULL) {
        lockcore__fmt(c->errmsg, sizeof(c->errmsg), "lock is NULL");
        return -EINVAL;
    }
    int rc = lockcore__enter(c, "lockcore_campaign");
    if (rc < 0)
        return rc;
    struct lockcore__waiter w = {0};
    struct lockcore__campaign *g = campaign_start(c, name, value, call, lockcore__kinds_wake, &w, &rc);
    if (g == NULL) {
        lockcore__leave(c);
        return rc;
    }
    rc = lockcore__kinds_wait(c, &w, campaign_abort, g);
    *lock = w.lock;
    return rc;
}

/* A campaign's acquisition carries the campaign: the caller's callback is
 * in it (lockcore_cancel). */
static int leader_started_by(const struct op *op, lockcore_cb cb, void *arg)
{
    const struct lockcore__campaign *g = op->arg;
    return op->cb == campaign_granted && g != NULL && g->cb == cb && g->arg == arg;
}

/* Campaigns past their grant, proclaiming: canceled, their lock released
 * (the proclamation's callback does both). */
static unsigned leader_cancel_calls(lockcore_client *c, lockcore_cb cb, void *arg)
{
    unsigned n = 0;
    for (struct lockcore__campaign *g = c->kx.campaigns; g != NULL; g = g->next) {
        if (g->cb != cb || g->arg != arg || g->canceled || g->op == NULL || g->op->kind != OP_EXTEND)
            continue;
        g->canceled = 1;
        if (g->op->phase != PH_DONE)
            lockcore__op_abort(g->op, LOCKCORE_ECANCELED, "campaign canceled by the caller");
        n++;
    }
    return n;
}

/* ---- proclaiming and resigning ---- */

/* What an election's call keeps while its operation runs. */
struct say {
    lockcore_cb cb;
    void *arg;
    char value[LOCKCORE_VALUE_MAX + 1];
};

static void said(lockcore_client *c, int rc, const struct lockcore_lock *lock, void *arg)
{
    struct say *s = arg;
    lockcore_cb cb = s->cb;
    void *a = s->arg;
    free(s);
    cb(c, rc, lock, a);
}

static int check_leader_lock(lockcore_client *c, const struct lockcore_lock *lock)
{
    int rc = lockcore__check_lock(c, lock);
    if (rc == 0 && !(lock->flags & LOCKCORE_LOCK_LEADER)) {
        lockcore__fmt(c->errmsg, sizeof(c->errmsg), "not a leader's lock (lockcore_campaign gives one)");
        rc = -EINVAL;
    }
    return rc;
}

/* Start a proclamation (kind OP_EXTEND) or a resignation (OP_RELEASE). */
static struct op *say_start(lockcore_client *c, enum op_kind kind, const struct lockcore_lock *lock,
                            const char *value, uint64_t ttl_ms, lockcore_cb cb, void *arg, int *rcp)
{
    int rc = lockcore__kinds_check_client(c);
    if (rc == 0 && cb == NULL) {
        lockcore__fmt(c->errmsg, sizeof(c->errmsg), "callback is NULL");
        rc = -EINVAL;
    }
    if (rc == 0)
        rc = check_leader_lock(c, lock);
    if (rc == 0)
        rc = check_value(c, value);
    struct say *s = NULL;
    if (rc == 0 && (s = calloc(1, sizeof(*s))) == NULL) {
        lockcore__fmt(c->errmsg, sizeof(c->errmsg), "out of memory");
        rc = -ENOMEM;
    }
    *rcp = rc;
    if (rc < 0)
        return NULL;
    s->cb = cb;
    s->arg = arg;
    snprintf(s->value, sizeof(s->value), "%s", value ? value : "");
    struct op *op = lockcore__op_for_lock(c, kind, lock, ttl_ms ? ttl_ms : lock->ttl_ms, said, s, rcp);
    if (op == NULL) {
        free(s);
        return NULL;
    }
    op->say = s->value;
    lockcore__op_start(op, lockcore_now_ms());
    return op;
}

int lockcore_proclaim_async(lockcore_client *c, const struct lockcore_lock *lock, const char *value,
                            uint64_t ttl_ms, lockcore_cb cb, void *arg)
{
    if (c == NULL)
        return -EINVAL;
    int rc;
    say_start(c, OP_EXTEND, lock, value, ttl_ms, cb, arg, &rc);
    return rc;
}

int lockcore_resign_async(lockcore_client *c, const struct lockcore_lock *lock, lockcore_cb cb, void *arg)
{
    if (c == NULL)
        return -EINVAL;
    int rc;
    say_start(c, OP_RELEASE, lock, NULL, 0, cb, arg, &rc);
    return rc;
}

static int say_blocking(lockcore_client *c, const char *what, enum op_kind kind, struct lockcore_lock *lock,
                        const char *value, uint64_t ttl_ms)
{
    if (c == NULL)
        return -EINVAL;
    int rc = lockcore__enter(c, what);
    if (rc < 0)
        return rc;
    struct lockcore__waiter w = {0};
    struct op *op = say_start(c, kind, lock, value, ttl_ms, lockcore__kinds_wake, &w, &rc);
    if (op == NULL) {
        lockcore__leave(c);
        return rc;
    }
    rc = lockcore__kinds_wait(c, &w, lockcore__kinds_abort_op, op);
    *lock = w.lock;
    return rc;
}

int lockcore_proclaim(lockcore_client *c, struct lockcore_lock *lock, const char *value, uint64_t ttl_ms)
{
    return say_blocking(c, "lockcore_proclaim", OP_EXTEND, lock, value, ttl_ms);
}

int lockcore_resign(lockcore_client *c, struct lockcore_lock *lock)
{
    return say_blocking(c, "lockcore_resign", OP_RELEASE, lock, NULL, 0);
}

/* ---- who leads ---- */

/* A reading of the nodes: the lock id and info that a majority holds, or
 * what stands in for one. Returns 1 (a leader), 0 (none), -EAGAIN
 * (changing hands) or LOCKCORE_ENOQUORUM. */
static int reading(const lockcore_client *c, const struct lockcore_node_status *st,
                   struct lockcore_leader *out)
{
    memset(out, 0, sizeof(*out));
    unsigned held = 0;
    for (unsigned i = 0; i < c->n; i++) {
        if (!st[i].reachable)
            continue;
        out->reachable++;
        held += st[i].holder[0] != '\0';
    }
    if (out->reachable < c->quorum)
        return LOCKCORE_ENOQUORUM;
    for (unsigned i = 0; i < c->n; i++) {
        if (!st[i].reachable || st[i].holder[0] == '\0' || st[i].info[0] == '\0')
            continue;
        unsigned same = 0;
        int64_t least = INT64_MAX;
        for (unsigned j = 0; j < c->n; j++) {
            if (st[j].reachable && strcmp(st[j].holder, st[i].holder) == 0 &&
                strcmp(st[j].info, st[i].info) == 0) {
                same++;
                if (st[j].pttl_ms < least)
                    least = st[j].pttl_ms;
            }
        }
        if (same < c->quorum)
            continue;
        char *end = NULL;
        unsigned long long epoch = strtoull(st[i].info, &end, 10);
        if (end == st[i].info || *end != ' ' || epoch == 0)
            continue; /* not an election's info: another lock of the name */
        out->held = 1;
        out->epoch = epoch;
        snprintf(out->value, sizeof(out->value), "%s", end + 1);
        snprintf(out->id, sizeof(out->id), "%s", st[i].holder);
        out->ttl_ms_left = least > 0 ? (uint64_t)least : 0;
        return 1;
    }
    /* Nobody on a majority: no leader. A lock of the name held without a
     * majority's info: a handoff's reservation, a proclamation under way. */
    return out->reachable - held >= c->quorum ? 0 : -EAGAIN;
}

static struct op *read_start(lockcore_client *c, const char *name, struct lockcore_node_status *st,
                             lockcore_cb cb, void *arg, int *rcp)
{
    struct op *op = lockcore__op_new(c, OP_STATUS, cb, arg);
    if (op == NULL) {
        lockcore__fmt(c->errmsg, sizeof(c->errmsg), "out of memory");
        *rcp = -ENOMEM;
        return NULL;
    }
    lockcore__op_set_keys(op, name);
    op->status = st;
    lockcore__op_start(op, lockcore_now_ms());
    *rcp = 0;
    return op;
}

int lockcore_leader(lockcore_client *c, const char *name, struct lockcore_leader *out)
{
    if (c == NULL)
        return -EINVAL;
    int rc = lockcore__kinds_check_name(c, name, LOCKCORE_RESOURCE_MAX);
    if (rc == 0 && out == NULL) {
        lockcore__fmt(c->errmsg, sizeof(c->errmsg), "out is NULL");
        rc = -EINVAL;
    }
    if (rc < 0)
        return rc;
    struct lockcore_node_status *st = calloc(c->n, sizeof(*st));
    if (st == NULL)
        return -ENOMEM;
    if ((rc = lockcore__enter(c, "lockcore_leader")) < 0) {
        free(st);
        return rc;
    }
    struct lockcore__waiter w = {0};
    struct op *op = (rc = lockcore__kinds_check_client(c)) == 0
                        ? read_start(c, name, st, lockcore__kinds_wake, &w, &rc)
                        : NULL;
    if (op == NULL) {
        lockcore__leave(c);
        free(st);
        return rc;
    }
    rc = lockcore__kinds_wait(c, &w, lockcore__kinds_abort_op, op);
    if (rc >= 0)
        rc = reading(c, st, out);
    free(st);
    return rc;
}

/* ---- observers ---- */

struct lockcore__observer {
    struct lockcore__observer *next, *prev;
    lockcore_client *c;
    char name[LOCKCORE_RESOURCE_MAX + 1];
    char chan[1][CHAN_MAX];
    size_t chan_len[1];
    int listening;
    int have_after;
    struct lockcore_leader after, last;
    uint64_t deadline_ms; /* 0: none */
    uint64_t read_at_ms;  /* the next reading; 0: when told */
    struct op *op;        /* the reading in flight */
    int again;            /* told while it read: read once more */
    int ending;
    lockcore_leader_cb cb;
    void *arg;
    struct lockcore_node_status *st;
};

static void observer_unlink(struct lockcore__observer *o)
{
    lockcore_client *c = o->c;
    if (o->prev)
        o->prev->next = o->next;
    else
        c->kx.observers = o->next;
    if (o->next)
        o->next->prev = o->prev;
}

static void observer_end(struct lockcore__observer *o, int rc)
{
    lockcore_client *c = o->c;
    if (o->listening)
        lockcore__notify_drop_names(c, o->chan, o->chan_len, 1);
    observer_unlink(o);
    struct lockcore_leader l = o->last;
    lockcore_leader_cb cb = o->cb;
    void *arg = o->arg;
    free(o->st);
    free(o);
    c->in_cb++;
    cb(c, rc, &l, arg);
    c->in_cb--;
}

static int differs(const struct lockcore_leader *a, const struct lockcore_leader *b)
{
    return a->held != b->held || (a->held && (a->epoch != b->epoch || strcmp(a->id, b->id) != 0 ||
                                              strcmp(a->value, b->value) != 0));
}

static void observer_read(lockcore_client *c, int rc, const struct lockcore_lock *lock, void *arg)
{
    (void)lock;
    struct lockcore__observer *o = arg;
    o->op = NULL;
    if (o->ending || rc == LOCKCORE_ECANCELED) {
        observer_end(o, LOCKCORE_ECANCELED);
        return;
    }
    uint64_t now = lockcore_now_ms();
    struct lockcore_leader l;
    int r = rc < 0 ? rc : reading(c, o->st, &l);
    /* An older leader than one reported is not news: its keys on a
     * majority are stale (a lock step that reached a node late, after its
     * release; docs/election.md), and gone by their TTL. */
    if (r == 1 && o->have_after && o->after.held && l.epoch < o->after.epoch)
        r = -EAGAIN;
    if ((r == 0 || r == 1) && (!o->have_after || differs(&l, &o->after))) {
        o->last = l;
        observer_end(o, 0);
        return;
    }
    if (r == 0 || r == 1)
        o->last = l;
    /* Read again when told, or when what was read runs out: the leader's
     * lock (a leader that dies tells nobody), a handoff's reservation (two
     * request timeouts), nodes out of reach (the retry delay). */
    if (o->again)
        o->read_at_ms = now;
    else if (r == 1)
        o->read_at_ms = now + l.ttl_ms_left + 1;
    else if (r == -EAGAIN && l.held) /* an older leader: when its keys run out */
        o->read_at_ms = now + l.ttl_ms_left + 1;
    else if (r == -EAGAIN)
        o->read_at_ms = now + 2 * c->o.request_timeout_ms + 1;
    else if (r == 0) /* told by the next proclamation; without the channel, a look now and then */
        o->read_at_ms = o->listening && !c->notify_refused ? 0 : now + c->o.queue_ttl_ms;
    else
        o->read_at_ms = now + c->o.retry_delay_ms;
    o->again = 0;
}

static void observer_told(struct lockcore__observer *o, uint64_t now)
{
    if (o->op != NULL)
        o->again = 1;
    else
        o->read_at_ms = now;
}

static int leader_message(lockcore_client *c, const char *chan, size_t chan_len, const char *msg,
                          size_t msg_len, uint64_t now)
{
    (void)msg, (void)msg_len;
    if (!is_leader_channel(chan, chan_len))
        return 0;
    for (struct lockcore__observer *o = c->kx.observers; o != NULL; o = o->next)
        if (o->chan_len[0] == chan_len && memcmp(o->chan[0], chan, chan_len) == 0)
            observer_told(o, now);
    return 1;
}

/* A node confirmed the subscription: what was told before it was told to
 * nobody, so read again. */
static void leader_subscribed(lockcore_client *c, const char *chan, size_t len, uint64_t now)
{
    if (!is_leader_channel(chan, len))
        return;
    for (struct lockcore__observer *o = c->kx.observers; o != NULL; o = o->next)
        if (o->chan_len[0] == len && memcmp(o->chan[0], chan, len) == 0)
            observer_told(o, now);
}

static uint64_t leader_next_timer(const lockcore_client *c)
{
    uint64_t next = UINT64_MAX;
    for (const struct lockcore__observer *o = c->kx.observers; o != NULL; o = o->next) {
        if (o->op == NULL && o->read_at_ms != 0 && o->read_at_ms < next)
            next = o->read_at_ms;
        if (o->deadline_ms != 0 && o->deadline_ms < next)
            next = o->deadline_ms;
    }
    return next;
}

static void leader_check(lockcore_client *c, uint64_t now)
{
    /* A callback run from here may start or end observers: the search
     * starts over after each one that ends. */
    for (;;) {
        struct lockcore__observer *o = c->kx.observers;
        while (o != NULL && (o->ending || o->op != NULL || o->deadline_ms == 0 || now < o->deadline_ms))
            o = o->next;
        if (o == NULL)
            break;
        observer_end(o, -ETIMEDOUT);
    }
    for (struct lockcore__observer *o = c->kx.observers; o != NULL; o = o->next) {
        if (o->ending || o->op != NULL || o->read_at_ms == 0 || now < o->read_at_ms)
            continue;
        int rc;
        o->read_at_ms = 0;
        if ((o->op = read_start(c, o->name, o->st, observer_read, o, &rc)) == NULL)
            o->read_at_ms = now + c->o.retry_delay_ms; /* out of memory: later */
    }
}

/* The client is freed: observers between readings end here, those
 * reading with their reading. */
static void leader_cancel(lockcore_client *c)
{
    for (struct lockcore__observer *o = c->kx.observers, *next; o != NULL; o = next) {
        next = o->next;
        o->ending = 1;
        if (o->op == NULL)
            observer_end(o, LOCKCORE_ECANCELED);
    }
}

int lockcore_observe_async(lockcore_client *c, const char *name, const struct lockcore_leader *after,
                           uint64_t wait_ms, lockcore_leader_cb cb, void *arg)
{
    if (c == NULL)
        return -EINVAL;
    int rc = lockcore__kinds_check_client(c);
    if (rc == 0 && cb == NULL) {
        lockcore__fmt(c->errmsg, sizeof(c->errmsg), "callback is NULL");
        rc = -EINVAL;
    }
    if (rc == 0)
        rc = lockcore__kinds_check_name(c, name, LOCKCORE_RESOURCE_MAX);
    if (rc < 0)
        return rc;
    struct lockcore__observer *o = calloc(1, sizeof(*o));
    if (o == NULL || (o->st = calloc(c->n, sizeof(*o->st))) == NULL) {
        free(o);
        lockcore__fmt(c->errmsg, sizeof(c->errmsg), "out of memory");
        return -ENOMEM;
    }
    o->c = c;
    o->cb = cb;
    o->arg = arg;
    snprintf(o->name, sizeof(o->name), "%s", name);
    if (after != NULL) {
        o->after = *after;
        o->have_after = 1;
    }
    o->last = o->after;
    char key[KEY_MAX + 1];
    snprintf(key, sizeof(key), "%s%s", c->prefix, name);
    o->chan_len[0] = leader_channel(key, o->chan[0]);
    /* Listen first, then read: what is told between the two reads again
     * (leader_subscribed). Without the channel (ACL), readings come when
     * what was read runs out. */
    o->listening = !c->notify_refused && lockcore__notify_want_names(c, o->chan, o->chan_len, 1) == 0;
    uint64_t now = lockcore_now_ms();
    o->deadline_ms = wait_ms ? now + wait_ms : 0;
    o->read_at_ms = now;
    o->next = c->kx.observers;
    if (o->next)
        o->next->prev = o;
    c->kx.observers = o;
    return 0;
}

int lockcore_observe_cancel(lockcore_client *c, lockcore_leader_cb cb, void *arg)
{
    if (c == NULL || cb == NULL)
        return -EINVAL;
    int n = 0;
    for (;;) {
        struct lockcore__observer *o = c->kx.observers;
        while (o != NULL && (o->ending || o->cb != cb || o->arg != arg))
            o = o->next;
        if (o == NULL)
            return n;
        n++;
        o->ending = 1;
        if (o->op != NULL)
            lockcore__op_abort(o->op, LOCKCORE_ECANCELED, "observer canceled by the caller");
        else
            observer_end(o, LOCKCORE_ECANCELED);
    }
}

struct observed {
    int done, rc;
    struct lockcore_leader l;
};

static void observed(lockcore_client *c, int rc, const struct lockcore_leader *l, void *arg)
{
    (void)c;
    struct observed *w = arg;
    w->done = 1;
    w->rc = rc;
    w->l = *l;
}

int lockcore_observe(lockcore_client *c, const char *name, const struct lockcore_leader *after,
                     uint64_t wait_ms, struct lockcore_leader *out)
{
    if (c == NULL)
        return -EINVAL;
    if (out == NULL) {
        lockcore__fmt(c->errmsg, sizeof(c->errmsg), "out is NULL");
        return -EINVAL;
    }
    int rc = lockcore__enter(c, "lockcore_observe");
    if (rc < 0)
        return rc;
    struct observed w = {0};
    if ((rc = lockcore_observe_async(c, name, after, wait_ms, observed, &w)) < 0) {
        lockcore__leave(c);
        return rc;
    }
    while (!w.done) {
        int r = lockcore__run_once(c, -1);
        if (r < 0 || c->free_pending) {
            lockcore_observe_cancel(c, observed, &w);
            while (!w.done && lockcore__flush_deliver(c) > 0)
                ;
            break;
        }
    }
    lockcore__leave(c);
    *out = w.l;
    return w.rc;
}

static void leader_release(lockcore_client *c)
{
    (void)c; /* campaigns end with their operations, observers in cancel */
}

const struct lockcore__kind lockcore__kind_leader = {
    .name = "leader",
    .flag = LOCKCORE_LOCK_LEADER,
    .resend = leader_resend,
    .queues = leader_queues,
    .message = leader_message,
    .subscribed = leader_subscribed,
    .next_timer = leader_next_timer,
    .check = leader_check,
    .cancel = leader_cancel,
    .started_by = leader_started_by,
    .cancel_calls = leader_cancel_calls,
    .release = leader_release,
};
