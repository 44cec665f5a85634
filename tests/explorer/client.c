/*
 * One explorer client, run as `fencelock-explore --client ...` in a process
 * of its own: one lock kind and one wait mode, operations until its
 * deadline, every belief in the shared log (explore.h). Around a step
 * (an acquisition, a re-entry, an extension, a release) it may ask the
 * explorer, over the control socket, to cut it from some nodes for that
 * step only: one-sided partitions that change from one step to the next.
 *
 * Election clients (docs/election.md): candidates campaign for
 * EX_ELECT_RES, lead (a belief like a lock's, with the epoch as its
 * token), proclaim, extend, keep alive, resign or die; observers observe
 * after their last reading and log each reading they are told.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include <fencelock-testkit/testkit.h>
#include <lockcore/lockcore.h>

#include "explore.h"

struct cl {
    const struct ex_client_args *a;
    struct ex_rng rng;
    lockcore_client *c;  /* the kind's TTL */
    lockcore_client *c2; /* a reentrant owner's inner holds: the short TTL */
    int log, ctl;
    unsigned seq;
    int cut;           /* a partition asked for this step */
    unsigned last_cut; /* the nodes it cut */
};

/* One line of the shared log, with one write() (hp_log_line). */
#define say(k, ...) (hp_log_line((k)->log, __VA_ARGS__) == 0 ? (void)0 : perror("explore client: log"))

/* Send a request to the explorer and wait for its answer (3 s at most;
 * without one the client goes on: a fault less, never a hang). */
static void ask(struct cl *k, const char *msg)
{
    if (k->ctl < 0)
        return;
    if (send(k->ctl, msg, strlen(msg), MSG_NOSIGNAL) < 0) {
        close(k->ctl);
        k->ctl = -1;
        return;
    }
    struct pollfd p = {.fd = k->ctl, .events = POLLIN};
    char buf[16];
    if (poll(&p, 1, 3000) <= 0 || recv(k->ctl, buf, sizeof(buf), 0) <= 0) {
        fprintf(stderr, "explore client %d: no answer to \"%s\"\n", k->a->id, msg);
        close(k->ctl);
        k->ctl = -1;
    }
}

/* Before a step: with probability p, ask to be cut from a random minority
 * of the nodes (now and then a majority) for this step. How: "lost" (the
 * requests are held, then thrown away with the connection), "late" (held,
 * then let through once the step is over), "noreply" (the answers are
 * held, then thrown away), "late-ttl" (held past the TTL, then let
 * through), "reset-late" (held, and 30 to 250 ms into the step the
 * connection closes while what it held still reaches the node later: the
 * client reconnects and goes on while its earlier requests are on their
 * way). hold names the belief the step belongs to. */
static void step_cut(struct cl *k, double p, const char *step, const char *hold)
{
    if (k->ctl < 0 || p <= 0 || !ex_chance(&k->rng, p))
        return;
    int n = k->a->n_nodes;
    int size = ex_chance(&k->rng, 0.05) ? n / 2 + 1 : (int)ex_between(&k->rng, 1, (n - 1) / 2);
    /* A minority other than the last one cut, where there is one: the
     * partition moves from one step to the next. */
    unsigned mask = 0;
    for (int tries = 0; tries < 8 && (mask == 0 || mask == k->last_cut); tries++) {
        mask = 0;
        while (__builtin_popcount(mask) < size)
            mask |= 1u << ex_between(&k->rng, 0, n - 1);
    }
    k->last_cut = mask;
    long r = ex_between(&k->rng, 0, 99);
    const char *mode = r < 40   ? "lost"
                       : r < 60 ? "late"
                       : r < 75 ? "noreply"
                       : r < 85 ? "late-ttl"
                                : "reset-late";
    char msg[128];
    snprintf(msg, sizeof(msg), "P %u %s %s %s", mask, mode, step, hold);
    ask(k, msg);
    k->cut = 1;
}

static void heal(struct cl *k)
{
    if (k->cut)
        ask(k, "H");
    k->cut = 0;
}

static void op_done(struct cl *k, const char *op, int rc, uint64_t t0)
{
    uint64_t t = ex_now_us();
    say(k, "O %" PRIu64 " %d %s %s %s %d %" PRIu64, t, k->a->id, ex_kind_names[k->a->kind],
        ex_mode_names[k->a->mode], op, rc, t - t0);
    if (rc < 0) /* why, in the client's own log, for a run kept with --keep */
        fprintf(stderr, "%" PRIu64 " %s %s: %s%s%s\n", t, op, lockcore_strerror(rc), lockcore_errmsg(k->c),
                k->c2 != NULL ? " | inner holds: " : "", k->c2 != NULL ? lockcore_errmsg(k->c2) : "");
}

/* A belief begins: the acquisition that started at a0 returned now. Its
 * owner is its lock id, but for a reentrant hold the outer hold's (every
 * hold has an id of its own; the checker zeroes the attempt digits). */
static void believe_of(struct cl *k, const char *kind, const struct lockcore_lock *l, const char *owner,
                       uint64_t a0, unsigned permits, char *hold, size_t cap)
{
    uint64_t g = ex_now_us();
    char res[LOCKCORE_RESOURCE_MAX + 1];
    snprintf(res, sizeof(res), "%s", l->resource);
    for (char *p = res; *p; p++)
        if (*p == '\n')
            *p = ','; /* a set's members */
    snprintf(hold, cap, "%d.%u", k->a->id, ++k->seq);
    say(k, "G %" PRIu64 " %d %s %s %s %s %" PRIu64 " %" PRIu64 " %" PRIu64 " %u", g, k->a->id, kind, res,
        owner, hold, l->token, a0, l->valid_until_ms * 1000, permits);
}

static void believe(struct cl *k, const char *kind, const struct lockcore_lock *l, uint64_t a0,
                    unsigned permits, char *hold, size_t cap)
{
    believe_of(k, kind, l, l->id, a0, permits, hold, cap);
}

static void ends(struct cl *k, const char *hold, const char *why)
{
    say(k, "E %" PRIu64 " %d %s %s", ex_now_us(), k->a->id, hold, why);
}

static int past_deadline(const struct cl *k)
{
    return hp_now_ms() >= k->a->until_ms;
}

static void nap(struct cl *k, long lo, long hi)
{
    long ms = ex_between(&k->rng, lo, hi > lo ? hi : lo);
    if (ms > 0)
        hp_sleep_ms(ms);
}

/* Extend to ttl_ms; label names the step's belief for the schedule. */
static void extend(struct cl *k, lockcore_client *c, struct lockcore_lock *l, const char *hold,
                   uint64_t ttl_ms, const char *label)
{
    step_cut(k, k->a->step_p, "extend", label);
    uint64_t t0 = ex_now_us();
    int rc = lockcore_extend(c, l, ttl_ms);
    heal(k);
    op_done(k, "extend", rc, t0);
    if (rc == 0)
        say(k, "X %" PRIu64 " %d %s %" PRIu64, ex_now_us(), k->a->id, hold, l->valid_until_ms * 1000);
    else if (rc == LOCKCORE_ELOST)
        ends(k, hold, "lost");
}

static void release(struct cl *k, lockcore_client *c, struct lockcore_lock *l, const char *hold,
                    const char *label)
{
    /* Releases are cut less often: a release that reaches every node is
     * what turns counts that drifted apart into a key deleted early. */
    step_cut(k, k->a->step_p / 2, "release", label);
    ends(k, hold, "release");
    uint64_t t0 = ex_now_us();
    int rc = lockcore_release(c, l);
    heal(k);
    op_done(k, "release", rc, t0);
}

/* Work for ms while a keep-alive extends the lock; each extension it made
 * is logged when seen, the loss when it is reported. Returns 0, or the
 * code that ended it (the lock is then no longer believed). */
static int keep_alive(struct cl *k, struct lockcore_lock *l, const char *hold, long ms)
{
    lockcore_keepalive *ka = NULL;
    uint64_t t0 = ex_now_us();
    int rc = lockcore_keepalive_start(k->c, l, 0, 0, NULL, NULL, &ka);
    if (rc != 0) {
        op_done(k, "keepalive", rc, t0);
        if (rc == LOCKCORE_ELOST)
            ends(k, hold, "lost");
        return rc;
    }
    long long end = hp_now_ms() + ms;
    while (hp_now_ms() < end) {
        long long left = end - hp_now_ms();
        lockcore_run(k->c, left < 50 ? (int)left : 50);
        struct lockcore_lock now;
        rc = lockcore_keepalive_get(ka, &now);
        if (rc != 0) {
            ends(k, hold, "lost");
            break;
        }
        if (now.valid_until_ms != l->valid_until_ms) {
            *l = now;
            say(k, "X %" PRIu64 " %d %s %" PRIu64, ex_now_us(), k->a->id, hold, l->valid_until_ms * 1000);
        }
    }
    lockcore_keepalive_stop(ka);
    op_done(k, "keepalive", rc, t0);
    return rc;
}

/* Hold a lock of a kind other than reentrant, one of several ways, then
 * release it. */
static void hold_and_release(struct cl *k, struct lockcore_lock *l, const char *hold)
{
    long ttl = (long)k->a->ttl_ms, validity = (long)lockcore_remaining_ms(l);
    long r = past_deadline(k) ? 99 : ex_between(&k->rng, 0, 99);
    if (r < 45) {
        nap(k, 0, validity * 6 / 10);
    } else if (r < 60) {
        /* Never to less than is left: a shorter TTL would cut the key
         * while the extension is on its way and the holder still counts
         * on the validity it had. */
        nap(k, 0, validity / 2);
        long left = (long)lockcore_remaining_ms(l);
        extend(k, k->c, l, hold, (uint64_t)ex_between(&k->rng, left > ttl / 2 ? left : ttl / 2, ttl), hold);
        nap(k, 0, (long)lockcore_remaining_ms(l) / 2);
    } else if (r < 75) {
        keep_alive(k, l, hold, ex_between(&k->rng, ttl, ttl * 5 / 2));
    } else if (r < 85) {
        nap(k, validity, validity + 300); /* past its validity: it is no longer believed */
    }
    release(k, k->c, l, hold, hold);
}

/* Acquire with one of the kinds' calls; returns its code. */
static int acquire(struct cl *k, const char *step, int (*fn)(struct cl *, struct lockcore_lock *, void *),
                   void *arg, struct lockcore_lock *l, uint64_t *a0)
{
    char next[32]; /* the hold it will be, if granted */
    snprintf(next, sizeof(next), "%d.%u", k->a->id, k->seq + 1);
    step_cut(k, k->a->step_p, "acquire", next);
    *a0 = ex_now_us();
    int rc = fn(k, l, arg);
    heal(k);
    op_done(k, step, rc, *a0);
    return rc;
}

static int plain_fn(struct cl *k, struct lockcore_lock *l, void *arg)
{
    return lockcore_acquire(k->c, arg, l);
}

static int multi_fn(struct cl *k, struct lockcore_lock *l, void *arg)
{
    const char **set = arg;
    size_t n = 0;
    while (set[n] != NULL)
        n++;
    return lockcore_multi_acquire(k->c, set, n, l);
}

static int rw_fn(struct cl *k, struct lockcore_lock *l, void *arg)
{
    return lockcore_rw_acquire(k->c, EX_RW_RES, *(int *)arg, l);
}

static int sem_fn(struct cl *k, struct lockcore_lock *l, void *arg)
{
    (void)arg;
    return lockcore_sem_acquire(k->c, EX_SEM_RES, EX_PERMITS, l);
}

static int outer_fn(struct cl *k, struct lockcore_lock *l, void *arg)
{
    return lockcore_reentrant_acquire(k->c, arg, NULL, l);
}

static void one_kind_cycle(struct cl *k)
{
    struct lockcore_lock l;
    uint64_t a0;
    char hold[32], names[EX_PLAIN_RES][8];
    const char *set[EX_PLAIN_RES + 1] = {NULL};
    const char *kind = ex_kind_names[k->a->kind];
    unsigned permits = 0;
    int rc = -1, write = 0;
    for (int i = 0; i < EX_PLAIN_RES; i++)
        snprintf(names[i], sizeof(names[i]), "p%d", i);
    switch (k->a->kind) {
    case EK_PLAIN:
        rc = acquire(k, "acquire", plain_fn, names[ex_between(&k->rng, 0, EX_PLAIN_RES - 1)], &l, &a0);
        break;
    case EK_MULTI: {
        /* Two or three of the plain locks' resources, in a random order. */
        int n = (int)ex_between(&k->rng, 2, EX_PLAIN_RES),
            start = (int)ex_between(&k->rng, 0, EX_PLAIN_RES - 1);
        int step = ex_chance(&k->rng, 0.5) ? 1 : EX_PLAIN_RES - 1;
        for (int i = 0; i < n; i++)
            set[i] = names[(start + i * step) % EX_PLAIN_RES];
        rc = acquire(k, "acquire", multi_fn, set, &l, &a0);
        break;
    }
    case EK_RW:
        write = ex_chance(&k->rng, 0.3);
        kind = write ? "write" : "read";
        rc = acquire(k, "acquire", rw_fn, &write, &l, &a0);
        break;
    case EK_SEM:
        kind = "permit";
        permits = EX_PERMITS;
        rc = acquire(k, "acquire", sem_fn, NULL, &l, &a0);
        break;
    default:
        return;
    }
    if (rc != 0)
        return;
    believe(k, kind, &l, a0, permits, hold, sizeof(hold));
    hold_and_release(k, &l, hold);
}

/* A reentrant owner: an outer hold with the long TTL, one to three holds
 * nested in it (each through the long- or the short-TTL client, the way
 * a nested `fencelock run` with its own --ttl would), some extended to a
 * short TTL, released in reverse order or abandoned right after their
 * extension (a nested process that died), then the outer hold works on
 * and is released. */
static void reentrant_cycle(struct cl *k)
{
    struct lockcore_lock outer;
    uint64_t a0;
    char res[8];
    snprintf(res, sizeof(res), "re%ld", ex_between(&k->rng, 0, EX_REENTRANT_RES - 1));
    if (acquire(k, "acquire", outer_fn, res, &outer, &a0) != 0)
        return;
    char h0[32];
    believe(k, "reentrant", &outer, a0, 0, h0, sizeof(h0));
    struct inner {
        struct lockcore_lock l;
        lockcore_client *c;
        char hold[32];
        int ok, extended;
    } in[3];
    int depth = (int)ex_between(&k->rng, 1, 3);
    /* Re-entries are where different minorities bite: cut them more often. */
    double p = k->a->step_p > 0 ? (k->a->step_p > 0.5 ? k->a->step_p : 0.5) : 0;
    for (int d = 0; d < depth; d++) {
        in[d].ok = in[d].extended = 0;
        nap(k, 0, 60);
        if (lockcore_remaining_ms(&outer) < 200 || past_deadline(k))
            continue;
        in[d].c = k->c2 != NULL && ex_chance(&k->rng, 0.6) ? k->c2 : k->c;
        step_cut(k, p, "reenter", h0);
        a0 = ex_now_us();
        int rc = lockcore_reentrant_acquire(in[d].c, res, outer.id, &in[d].l);
        heal(k);
        op_done(k, "reenter", rc, a0);
        if (rc != 0)
            continue;
        in[d].ok = 1;
        believe_of(k, "reentrant", &in[d].l, outer.id, a0, 0, in[d].hold, sizeof(in[d].hold));
        if (k->a->short_ttl_ms > 0 && ex_chance(&k->rng, 0.6)) {
            long s = (long)k->a->short_ttl_ms;
            extend(k, in[d].c, &in[d].l, in[d].hold, (uint64_t)ex_between(&k->rng, s / 2, s), h0);
            in[d].extended = 1;
        }
    }
    for (int d = depth - 1; d >= 0; d--) {
        if (!in[d].ok)
            continue;
        if (in[d].extended && ex_chance(&k->rng, 0.25)) {
            ends(k, in[d].hold, "died"); /* never released */
            continue;
        }
        nap(k, 0, 40);
        release(k, in[d].c, &in[d].l, in[d].hold, h0);
    }
    if (!past_deadline(k)) {
        nap(k, 0, (long)lockcore_remaining_ms(&outer) * 6 / 10);
        if (ex_chance(&k->rng, 0.2))
            extend(k, k->c, &outer, h0, k->a->ttl_ms, h0);
    }
    release(k, k->c, &outer, h0, h0);
}

/* ---- elections ---- */

struct told {
    int done, rc;
    struct lockcore_lock l;
    struct lockcore_leader r;
};

static void on_campaign(lockcore_client *c, int rc, const struct lockcore_lock *l, void *arg)
{
    (void)c;
    struct told *t = arg;
    t->done = 1;
    t->rc = rc;
    if (l != NULL)
        t->l = *l;
}

static void on_observed(lockcore_client *c, int rc, const struct lockcore_leader *l, void *arg)
{
    (void)c;
    struct told *t = arg;
    t->done = 1;
    t->rc = rc;
    if (l != NULL)
        t->r = *l;
}

/* Run the client until *done or ms pass. */
static void run_for(struct cl *k, const int *done, long ms)
{
    long long end = hp_now_ms() + ms;
    while (!*done && hp_now_ms() < end) {
        long long left = end - hp_now_ms();
        lockcore_run(k->c, left < 20 ? (int)(left > 0 ? left : 0) : 20);
    }
}

/* A candidate dies: its process ends without resigning, at once (no
 * lockcore call runs on), by _exit or by SIGKILL. The explorer starts it
 * again. */
static void die(struct cl *k, const char *hold)
{
    if (hold != NULL)
        ends(k, hold, "died");
    if (ex_chance(&k->rng, 0.5))
        _exit(0);
    raise(SIGKILL);
    _exit(0); /* not reached */
}

/* Campaign: in line with a wait bound (blocking), or asynchronously,
 * canceled (or the candidate dies in line) if not elected within a
 * random time. Returns the campaign's code; *l the leader's lock. */
static int campaign(struct cl *k, const char *value, struct lockcore_lock *l, uint64_t *a0)
{
    char next[32];
    snprintf(next, sizeof(next), "%d.%u", k->a->id, k->seq + 1);
    long ttl = (long)k->a->ttl_ms;
    struct lockcore_call call;
    lockcore_call_init(k->c, &call);
    call.retry_count = -1;
    /* Long enough to outwait a leader now and then, short enough to end
     * soon after the deadline. */
    call.wait_ms = (uint64_t)ex_between(&k->rng, 200, 2 * ttl + 1000);
    step_cut(k, k->a->step_p, "campaign", next);
    *a0 = ex_now_us();
    int rc;
    if (ex_chance(&k->rng, 0.6)) {
        rc = lockcore_campaign(k->c, EX_ELECT_RES, value, &call, l);
    } else {
        struct told t = {0};
        call.wait_ms = 0; /* until elected, canceled, or dead */
        rc = lockcore_campaign_async(k->c, EX_ELECT_RES, value, &call, on_campaign, &t);
        if (rc == 0) {
            run_for(k, &t.done, ex_between(&k->rng, 50, 2 * ttl + 1000));
            if (!t.done && ex_chance(&k->rng, 0.15)) {
                op_done(k, "campaign", -EINTR, *a0);
                die(k, NULL); /* in line */
            }
            if (!t.done)
                lockcore_cancel(k->c, on_campaign, &t); /* its callback runs before this returns */
            rc = t.done ? t.rc : LOCKCORE_ECANCELED;
            if (rc == 0)
                *l = t.l;
        }
    }
    heal(k);
    op_done(k, "campaign", rc, *a0);
    return rc;
}

/* Proclaim a new value, extending the leader's lock to no less than it
 * has left (0: its TTL). Returns its code. */
static int proclaim(struct cl *k, struct lockcore_lock *l, const char *hold, const char *value)
{
    long ttl = (long)k->a->ttl_ms, left = (long)lockcore_remaining_ms(l);
    uint64_t to =
        ex_chance(&k->rng, 0.5) ? 0 : (uint64_t)ex_between(&k->rng, left > ttl / 2 ? left : ttl / 2, ttl);
    step_cut(k, k->a->step_p, "proclaim", hold);
    uint64_t t0 = ex_now_us();
    int rc = lockcore_proclaim(k->c, l, value, to);
    heal(k);
    op_done(k, "proclaim", rc, t0);
    if (rc == 0)
        say(k, "X %" PRIu64 " %d %s %" PRIu64, ex_now_us(), k->a->id, hold, l->valid_until_ms * 1000);
    else if (rc == LOCKCORE_ELOST)
        ends(k, hold, "lost");
    return rc;
}

/* A candidate: campaign; once elected, lead for one to four steps
 * (work, extend, keep alive, proclaim, outlive the validity), then
 * resign, or die without resigning. */
static void candidate_cycle(struct cl *k)
{
    struct lockcore_lock l;
    uint64_t a0;
    char value[32], hold[32];
    snprintf(value, sizeof(value), "v%d.%u", k->a->id, k->seq + 1);
    if (campaign(k, value, &l, &a0) != 0)
        return;
    believe(k, "leader", &l, a0, 0, hold, sizeof(hold));
    long ttl = (long)k->a->ttl_ms;
    int steps = (int)ex_between(&k->rng, 1, 4), lost = 0;
    for (int s = 0; s < steps && !lost; s++) {
        long validity = (long)lockcore_remaining_ms(&l);
        long r = past_deadline(k) ? 99 : ex_between(&k->rng, 0, 99);
        if (r < 25) {
            nap(k, 0, validity * 6 / 10);
        } else if (r < 45) {
            long left = (long)lockcore_remaining_ms(&l);
            extend(k, k->c, &l, hold, (uint64_t)ex_between(&k->rng, left > ttl / 2 ? left : ttl / 2, ttl),
                   hold);
        } else if (r < 70) {
            nap(k, 0, validity / 2);
            snprintf(value, sizeof(value), "v%d.%u.%d", k->a->id, k->seq, s);
            lost = proclaim(k, &l, hold, value) == LOCKCORE_ELOST;
        } else if (r < 85) {
            lost = keep_alive(k, &l, hold, ex_between(&k->rng, ttl, ttl * 5 / 2)) != 0;
        } else if (r < 92) {
            nap(k, validity, validity + 300); /* past its validity: no longer believed */
        }
    }
    if (!past_deadline(k) && ex_chance(&k->rng, 0.12))
        die(k, hold);
    /* Resign even when lost: a deposed leader's resignation must change
     * nothing. */
    step_cut(k, k->a->step_p / 2, "resign", hold);
    ends(k, hold, "release");
    uint64_t t0 = ex_now_us();
    int rc = lockcore_resign(k->c, &l);
    heal(k);
    op_done(k, "resign", rc, t0);
}

/* An observer, for the life of its process: the first reading, then
 * each next one after the last it was told (blocking, or asynchronously
 * and sometimes canceled), each logged as an R line. */
static void observer_loop(struct cl *k)
{
    struct lockcore_leader last;
    int have = 0;
    while (!past_deadline(k)) {
        long long left = k->a->until_ms - hp_now_ms();
        long wait = ex_between(&k->rng, 200, 3000);
        if (wait > left)
            wait = left > 1 ? (long)left : 1;
        step_cut(k, k->a->step_p / 2, "observe", "-");
        uint64_t t0 = ex_now_us();
        struct told t = {0};
        int rc;
        if (ex_chance(&k->rng, 0.7)) {
            rc = lockcore_observe(k->c, EX_ELECT_RES, have ? &last : NULL, (uint64_t)wait, &t.r);
        } else {
            rc = lockcore_observe_async(k->c, EX_ELECT_RES, have ? &last : NULL, (uint64_t)wait, on_observed,
                                        &t);
            if (rc == 0) {
                run_for(k, &t.done, ex_chance(&k->rng, 0.3) ? ex_between(&k->rng, 0, wait) : wait + 1000);
                if (!t.done)
                    lockcore_observe_cancel(k->c, on_observed,
                                            &t); /* its callback runs before this returns */
                rc = t.done ? t.rc : LOCKCORE_ECANCELED;
            }
        }
        heal(k);
        op_done(k, "observe", rc, t0);
        if (rc == 0) {
            last = t.r;
            have = 1;
            say(k, "R %" PRIu64 " %d %s %d %" PRIu64 " %s %s", ex_now_us(), k->a->id, EX_ELECT_RES, last.held,
                last.held ? last.epoch : 0, last.held && last.id[0] ? last.id : "-",
                last.held && last.value[0] ? last.value : "-");
        } else if (rc != -ETIMEDOUT && rc != LOCKCORE_ECANCELED) {
            nap(k, 20, 100);
        }
    }
}

static lockcore_client *new_client(const struct ex_client_args *a, uint64_t ttl_ms)
{
    struct lockcore_options o;
    lockcore_options_init(&o);
    o.nodes = (const char *const *)a->nodes;
    o.n_nodes = (size_t)a->n_nodes;
    o.ttl_ms = ttl_ms;
    o.request_timeout_ms = 100;
    o.retry_count = -1;
    o.retry_delay_ms = 20;
    o.retry_jitter_ms = 30;
    o.wait_mode = a->mode;
    /* Long enough to outwait a holder, short enough to end soon after
     * the deadline. */
    o.wait_ms = a->ttl_ms + 500;
    /* FENCELOCK_REDIS_FUNCTIONS=1: the scripts as functions (FCALL). */
    const char *rf = getenv("FENCELOCK_REDIS_FUNCTIONS");
    o.redis_functions = rf != NULL && strcmp(rf, "1") == 0;
    lockcore_client *c = NULL;
    char err[256];
    if (lockcore_client_new(&o, &c, err, sizeof(err)) != 0) {
        fprintf(stderr, "explore client %d: %s\n", a->id, err);
        return NULL;
    }
    return c;
}

static int connect_ctl(const char *path)
{
    int fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    if (fd < 0 || strlen(path) >= sizeof(sa.sun_path)) {
        if (fd >= 0)
            close(fd);
        return -1;
    }
    memcpy(sa.sun_path, path, strlen(path) + 1);
    if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
        close(fd);
        return -1;
    }
    return fd;
}

int ex_client_main(const struct ex_client_args *a)
{
    struct cl k = {.a = a, .rng = {a->seed}, .ctl = -1};
    /* Holds of an election client's processes stay apart in the log. */
    k.seq = (unsigned)a->life * 1000u;
    k.log = open(a->log, O_WRONLY | O_APPEND | O_CLOEXEC);
    if (k.log < 0) {
        perror("explore client: open log");
        return 70;
    }
    k.ctl = connect_ctl(a->ctl);
    if (k.ctl < 0) {
        fprintf(stderr, "explore client %d: cannot reach the explorer at %s\n", a->id, a->ctl);
        close(k.log);
        return 70;
    }
    char hello[32];
    snprintf(hello, sizeof(hello), "C %d", a->id);
    ask(&k, hello);
    say(&k, "C %" PRIu64 " %d %s %s %" PRIu64 " %" PRIu64 " %d", ex_now_us(), a->id, ex_kind_names[a->kind],
        ex_mode_names[a->mode], a->ttl_ms, a->short_ttl_ms, (int)getpid());
    k.c = new_client(a, a->ttl_ms);
    if (a->kind == EK_REENTRANT && a->short_ttl_ms > 0)
        k.c2 = new_client(a, a->short_ttl_ms);
    int rc = 0;
    if (k.c == NULL || (a->kind == EK_REENTRANT && a->short_ttl_ms > 0 && k.c2 == NULL)) {
        rc = 70;
    } else {
        while (!past_deadline(&k)) {
            if (a->kind == EK_REENTRANT)
                reentrant_cycle(&k);
            else if (a->kind == EK_ELECT)
                candidate_cycle(&k);
            else if (a->kind == EK_OBSERVE)
                observer_loop(&k);
            else
                one_kind_cycle(&k);
            nap(&k, 0, 30);
        }
    }
    lockcore_client_free(k.c2);
    lockcore_client_free(k.c);
    if (k.ctl >= 0)
        close(k.ctl);
    close(k.log);
    return rc;
}
