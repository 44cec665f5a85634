/*
 * One state machine per lock operation.
 *
 * acquire:  LOCK ──granted──────────────────────────────▶ done (token)
 *             │  └─granted, token refused─▶ RAISE ─────▶ done (token)
 *             └─failed─▶ rollback on all nodes ─▶ RETRY_WAIT ─▶ LOCK …
 * extend:   EXTEND ─▶ done          release: RELEASE ─▶ done
 *
 * Every phase sends one command to every node at once and is decided as
 * soon as the outcome is certain (fencing_decide), or at its deadline, when
 * nodes that have not answered count as failed.
 */
#include <errno.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"
#include "lockcore_lua.h"
#include "kinds/kind.h"

/* A lock whose token was refused may try this many second rounds before
 * the attempt is rolled back and retried. */
#define MAX_RAISES 10

static uint64_t key_hash(const char *s, size_t len)
{
    uint64_t h = 1469598103934665603ULL; /* FNV-1a */
    for (size_t i = 0; i < len; i++)
        h = (h ^ (unsigned char)s[i]) * 1099511628211ULL;
    return h;
}

uint64_t lockcore__far_from(const lockcore_client *c, int bounded)
{
    uint64_t ms = c->o.proposal_ahead_max_ms ? c->o.proposal_ahead_max_ms : bounded ? 5000 : 0;
    return ms ? c->o.clock_us(c->o.clock_arg) + ms * 1000 : UINT64_MAX;
}

unsigned lockcore__known_fences(const struct op *op, uint64_t *v)
{
    unsigned k = 0;
    for (unsigned i = 0; i < op->c->n; i++)
        if (op->fence_known[i]) {
            unsigned j = k++;
            for (; j > 0 && v[j - 1] > op->node_fence[i]; j--) /* insertion: a few nodes */
                v[j] = v[j - 1];
            v[j] = op->node_fence[i];
        }
    return k;
}

/* The largest fence value this client has seen for op's resource (0 if
 * none): a proposal must beat it. Slots are shared by hash; a value of
 * another resource is not ours (it may run far ahead of every clock). */
static uint64_t fence_seen(const struct op *op)
{
    uint64_t h = key_hash(op->key, op->key_len);
    const lockcore_client *c = op->c;
    return c->fence_seen[h & 255].hash == h ? c->fence_seen[h & 255].value : 0;
}

static void fence_saw(struct op *op, uint64_t f)
{
    if (f > lockcore__far_from(op->c, 0))
        return; /* proposed from, it would lose every first round */
    uint64_t h = key_hash(op->key, op->key_len);
    lockcore_client *c = op->c;
    if (c->fence_seen[h & 255].hash != h)
        c->fence_seen[h & 255].hash = h, c->fence_seen[h & 255].value = 0;
    if (f > c->fence_seen[h & 255].value)
        c->fence_seen[h & 255].value = f;
}

struct op *lockcore__op_new(lockcore_client *c, enum op_kind kind, lockcore_cb cb, void *arg)
{
    struct op *op = c->free_ops;
    if (op != NULL)
        c->free_ops = op->next;
    else if ((op = malloc(sizeof(*op))) == NULL)
        return NULL;
    memset(op, 0, offsetof(struct op, slot));
    memset(&op->kx, 0, sizeof(op->kx));
    op->qid[0] = '\0';
    op->c = c;
    op->kind = kind;
    op->cb = cb;
    op->arg = arg;
    op->errmsg[0] = '\0';
    op->lock.nodes = c->n;
    op->retry_count = c->o.retry_count;
    op->wait_mode = c->o.wait_mode;
    op->next = c->active;
    op->prev = NULL;
    if (c->active != NULL)
        c->active->prev = op;
    c->active = op;
    c->inflight++;
    return op;
}

void lockcore__ops_free(lockcore_client *c)
{
    while (c->free_ops != NULL) {
        struct op *op = c->free_ops;
        c->free_ops = op->next;
        free(op);
    }
}

/* ---- sending ---- */

/* v in decimal (buf holds at least 21 bytes). Not printf: this runs for
 * every command of every operation. */
void lockcore__u64s(char *buf, size_t cap, uint64_t v)
{
    char tmp[24];
    size_t n = 0;
    do {
        tmp[n++] = (char)('0' + v % 10);
        v /= 10;
    } while (v > 0 && n < sizeof(tmp));
    if (n >= cap)
        n = cap - 1;
    for (size_t k = 0; k < n; k++)
        buf[k] = tmp[n - 1 - k];
    buf[n] = '\0';
}

void lockcore__step_nums(const struct op *op, struct step_nums *n)
{
    const lockcore_client *c = op->c;
    lockcore__u64s(n->ttl, sizeof(n->ttl), op->ttl_ms);
    lockcore__u64s(n->prop, sizeof(n->prop), c->o.fencing ? op->proposal : 0);
    if (c->o.fence_transition) {
        uint64_t fexp = 0;
        if (c->o.fence_idle_ms != 0)
            fexp = c->o.fence_idle_ms > 2 * op->ttl_ms ? c->o.fence_idle_ms : 2 * op->ttl_ms;
        lockcore__u64s(n->idle, sizeof(n->idle), c->o.fence_idle_ms);
        lockcore__u64s(n->fexp, sizeof(n->fexp), fexp);
    } else {
        memcpy(n->idle, "-", 2);
        memcpy(n->fexp, "-", 2);
    }
    lockcore__u64s(n->tok, sizeof(n->tok), c->o.fencing ? op->lock.token : 0);
    lockcore__u64s(n->ticket, sizeof(n->ticket), op->ticket);
    lockcore__u64s(n->qttl, sizeof(n->qttl), c->o.queue_ttl_ms);
    n->mode = op->wait_mode == LOCKCORE_WAIT_FAIR ? "1" : op->lock.attempts <= 1 ? "2" : "0";
    lockcore__u64s(n->ahead, sizeof(n->ahead), c->o.proposal_ahead_max_ms * 1000);
}

/* What a release step does (SCRIPT_RELEASE's ARGV[2]): "r" a rollback,
 * which tells nobody and reserves nothing (the lock may well be held by
 * someone else); "" a polling client's release, which tells nobody; else
 * a release that names the next waiter and keeps the lock for it so many
 * ms ("f" first from a fair client, which keeps the named waiter's place).
 * The reservation must beat newcomers, not the releaser's own next
 * attempt, already on the wire behind its release: two request timeouts. */
void lockcore__release_arg(const struct op *op, enum step step, char *buf, size_t cap)
{
    if (step != STEP_RELEASE)
        lockcore__fmt(buf, cap, "r");
    else
        lockcore__release_mode(op->c, op->wait_mode, buf, cap);
}

void lockcore__release_mode(const lockcore_client *c, int wait_mode, char *buf, size_t cap)
{
    const struct lockcore_options *o = &c->o;
    if (wait_mode == LOCKCORE_WAIT_POLL)
        buf[0] = '\0';
    else if (wait_mode == LOCKCORE_WAIT_NOTIFY)
        lockcore__u64s(buf, cap, 2 * o->request_timeout_ms);
    else { /* fair: 'f' and the ms */
        buf[0] = 'f';
        lockcore__u64s(buf + 1, cap - 1, 2 * o->request_timeout_ms);
    }
}

/* One call of a plain script: its keys and arguments. */
struct pcmd {
    const char *keys[7], *args[11];
    size_t klens[7], alens[11];
    int nkeys, nargs;
};
#define KEY(p, l) (k.keys[k.nkeys] = (p), k.klens[k.nkeys++] = (l))
#define ARG(p) (k.args[k.nargs] = (p), k.alens[k.nargs++] = strlen(p))

/* Queue one call of the plain script `script` for node i: FCALL where the
 * node has the function library, else EVALSHA when its sha is known, else
 * EVAL (which also caches it). Fire-and-forget steps have no operation:
 * their replies are dropped. */
static int send_script(struct op *op, unsigned i, enum step step, int script, const struct pcmd *k,
                       int use_eval, uint64_t now)
{
    lockcore_client *c = op->c;
    const char *argv[3 + 7 + 11];
    size_t lens[3 + 7 + 11];
    int argc = 0;
    static const char *const nk[] = {"0", "1", "2", "3", "4", "5", "6", "7"};
    _Static_assert(sizeof(k->keys) / sizeof(k->keys[0]) < sizeof(nk) / sizeof(nk[0]), "nk too short");
    const char *fn = use_eval || c->nodes[i].fn != 1 ? NULL : lockcore__lua_fn(lockcore__scripts[script]);
    if (fn != NULL) {
        argv[argc] = "FCALL", lens[argc++] = 5;
        argv[argc] = fn, lens[argc++] = strlen(fn);
    } else if (use_eval || c->sha[script][0] == '\0') {
        argv[argc] = "EVAL", lens[argc++] = 4;
        argv[argc] = lockcore__scripts[script], lens[argc++] = strlen(lockcore__scripts[script]);
    } else {
        argv[argc] = "EVALSHA", lens[argc++] = 7;
        argv[argc] = c->sha[script], lens[argc++] = 40;
    }
    argv[argc] = nk[k->nkeys], lens[argc++] = 1;
    for (int j = 0; j < k->nkeys; j++)
        argv[argc] = k->keys[j], lens[argc++] = k->klens[j];
    for (int j = 0; j < k->nargs; j++)
        argv[argc] = k->args[j], lens[argc++] = k->alens[j];
    int mine = step != STEP_IGNORE && step != STEP_INFO && step != STEP_DEQUEUE;
    return lockcore__node_send(c, &c->nodes[i], argc, argv, lens, mine ? op : NULL, step, 0, now);
}

int lockcore__queued_lock(struct op *op, unsigned i, const char *value, const char *holds, int use_eval,
                          uint64_t now)
{
    struct pcmd k = {.nkeys = 0};
    struct step_nums num;
    lockcore__step_nums(op, &num);
    lockcore__op_fence_keys(op);
    KEY(op->key, op->key_len);
    KEY(op->fhash, op->fhash_len);
    KEY(op->fkey, op->fkey_len);
    KEY(op->qkey, op->qkey_len);
    KEY(op->qexp, op->qexp_len);
    KEY(op->wkey, op->wkey_len);
    if (holds != NULL)
        KEY(holds, strlen(holds));
    ARG(value);
    ARG(num.ttl);
    ARG(num.prop);
    ARG(num.idle);
    ARG(num.ticket);
    ARG(num.qttl);
    ARG(num.mode);
    ARG(op->qid);
    ARG(holds != NULL ? op->lock.id : "");
    ARG(num.ahead);
    ARG(op->fbucket);
    return send_script(op, i, STEP_LOCK, SCRIPT_ACQUIRE_QUEUED, &k, use_eval, now);
}

/* Build and queue the command of `step` for one node: the lock's kind's,
 * or the plain lock's. */
int lockcore__op_resend(struct op *op, unsigned i, enum step step, int use_eval, uint64_t now)
{
    lockcore_client *c = op->c;
    struct node *n = &c->nodes[i];
    struct pcmd k = {.nkeys = 0};
    struct step_nums num; /* not for releases: they send none of it */
    char reserve[24], qid[LOCKCORE_ID_LEN + 1];
    int script = -1;
    if (op->type != NULL) {
        int krc = op->type->resend(op, i, step, use_eval, now);
        if (krc != 1)
            return krc;
    }

    switch (step) {
    case STEP_LOCK:
        if (op->queued) /* a waiter: takes its place in the queue and tries */
            return lockcore__queued_lock(op, i, op->lock.id, NULL, use_eval, now);
        if (!c->o.fencing) {
            /* Plain Redlock: the classic SET NX PX, no script needed (a
             * notified waiter's first attempt too: a reservation is the lock
             * key itself, so SET NX respects it). Only the TTL to write. */
            lockcore__u64s(num.ttl, sizeof(num.ttl), op->ttl_ms);
            const char *v[] = {"SET", op->key, op->lock.id, "NX", "PX", num.ttl};
            size_t l[] = {3, op->key_len, LOCKCORE_ID_LEN, 2, 2, strlen(num.ttl)};
            return lockcore__node_send(c, n, 6, v, l, op, step, 0, now);
        }
        lockcore__step_nums(op, &num);
        lockcore__op_fence_keys(op);
        script = SCRIPT_ACQUIRE_FENCED;
        KEY(op->key, op->key_len);
        KEY(op->fhash, op->fhash_len);
        KEY(op->fkey, op->fkey_len);
        ARG(op->lock.id);
        ARG(num.ttl);
        ARG(num.prop);
        ARG(num.idle);
        ARG(num.ahead);
        ARG(op->fbucket);
        break;
    case STEP_RAISE:
        lockcore__step_nums(op, &num);
        lockcore__op_fence_keys(op);
        script = SCRIPT_RAISE;
        KEY(op->fhash, op->fhash_len);
        KEY(op->fkey, op->fkey_len);
        ARG(num.prop);
        ARG(num.idle);
        ARG(op->fbucket);
        ARG(num.ahead); /* further ahead stays the resource's own */
        break;
    case STEP_EXTEND:
        lockcore__step_nums(op, &num);
        lockcore__op_fence_keys(op);
        script = SCRIPT_EXTEND;
        KEY(op->key, op->key_len);
        KEY(op->fhash, op->fhash_len);
        KEY(op->fkey, op->fkey_len);
        KEY(op->ikey, op->ikey_len);
        ARG(op->lock.id);
        ARG(num.ttl);
        ARG(num.fexp);
        ARG(num.tok);
        ARG(op->fbucket);
        ARG(num.ahead);
        break;
    case STEP_RELEASE:
    case STEP_IGNORE:
        if (op->wait_mode == LOCKCORE_WAIT_POLL && c->info_len == 0 &&
            !(op->lock.flags & LOCKCORE_LOCK_FROM_ID)) {
            /* Nothing beside the key to clean, nobody of ours to tell (a
             * polling client neither queues nor reserves). A lock known by
             * its id may have been taken with holder info: full release. */
            script = SCRIPT_RELEASE_PLAIN;
            KEY(op->key, op->key_len);
            ARG(op->lock.id);
            break;
        }
        script = SCRIPT_RELEASE;
        KEY(op->key, op->key_len);
        KEY(op->ikey, op->ikey_len);
        KEY(op->qkey, op->qkey_len);
        KEY(op->qexp, op->qexp_len);
        KEY(op->wkey, op->wkey_len);
        ARG(op->lock.id);
        lockcore__release_arg(op, step, reserve, sizeof(reserve));
        ARG(reserve);
        /* The place in the queue goes only where it is not the id's own
         * acquisition, which the script derives (lua/lib/release.lua): one
         * argument fewer saves the node about 5 % of a plain release
         * (bench/node-cost.sh). */
        _Static_assert(LOCKCORE__ATTEMPT_DIGITS == 6, "lua/lib/release.lua zeroes 6 attempt digits");
        lockcore__qid(op->lock.id, qid);
        if (strcmp(qid, op->qid) != 0)
            ARG(op->qid);
        break;
    case STEP_DEQUEUE:
        script = SCRIPT_DEQUEUE;
        KEY(op->qkey, op->qkey_len);
        KEY(op->qexp, op->qexp_len);
        KEY(op->key, op->key_len);
        KEY(op->wkey, op->wkey_len);
        ARG(op->qid);
        lockcore__release_mode(c, op->wait_mode, reserve, sizeof(reserve));
        ARG(reserve);
        break;
    case STEP_INFO:
        lockcore__step_nums(op, &num);
        script = SCRIPT_SET_INFO;
        KEY(op->key, op->key_len);
        KEY(op->ikey, op->ikey_len);
        ARG(op->lock.id);
        k.args[k.nargs] = c->info, k.alens[k.nargs++] = c->info_len;
        ARG(num.ttl);
        break;
    case STEP_STATUS:
        use_eval = 1; /* rare: never loaded */
        lockcore__op_fence_keys(op);
        if (op->repair) {
            char to[24];
            lockcore__step_nums(op, &num);
            lockcore__u64s(to, sizeof(to), op->repair_to);
            script = SCRIPT_FENCE_REPAIR;
            KEY(op->key, op->key_len);
            KEY(op->fhash, op->fhash_len);
            KEY(op->fkey, op->fkey_len);
            char ekey[KEY_MAX + 16];
            snprintf(ekey, sizeof(ekey), "{%s}:epoch", op->key); /* an election's (kinds/elect.c) */
            KEY(ekey, strlen(ekey));
            ARG(to);
            ARG(num.idle);
            ARG(op->fbucket);
            ARG(num.ahead);
            return send_script(op, i, step, script, &k, use_eval, now);
        }
        script = SCRIPT_STATUS;
        KEY(op->key, op->key_len);
        KEY(op->fhash, op->fhash_len);
        KEY(op->fkey, op->fkey_len);
        KEY(op->ikey, op->ikey_len);
        KEY(op->qkey, op->qkey_len);
        ARG(op->fbucket);
        break;
    default:
        return -EINVAL;
    }
    return send_script(op, i, step, script, &k, use_eval, now);
}
#undef KEY
#undef ARG

static void note_failure(struct op *op, unsigned i, const char *why)
{
    /* Keep the first failure of a phase: it is usually the cause. */
    if (op->errmsg[0] == '\0')
        lockcore__fmt(op->errmsg, sizeof(op->errmsg), "%s: %s", op->c->nodes[i].name, why);
}

static void decide(struct op *op, uint64_t now);

/* Start a phase: a fresh serial (older replies no longer match), all slots
 * open, one command to every node. */
static void phase_begin(struct op *op, enum phase ph, enum step step, uint64_t now)
{
    lockcore_client *c = op->c;
    int connecting = 0;
    op->phase = ph;
    op->phase_start_ms = now;
    op->serial = ++c->serial;
    memset(op->slot, SLOT_OPEN, c->n);
    memset(op->accepted, 0, c->n);
    op->errmsg[0] = '\0';
    for (unsigned i = 0; i < c->n; i++) {
        struct node *n = &c->nodes[i];
        if (!lockcore__node_usable(c, n, now)) {
            op->slot[i] = n->err_kind == FAIL_PROTO ? SLOT_PROTO : SLOT_NET;
            note_failure(op, i, n->err[0] ? n->err : "unreachable");
            continue;
        }
        connecting |= n->state == NODE_CONNECTING || n->state == NODE_HANDSHAKE;
        if (lockcore__op_resend(op, i, step, 0, now) < 0) {
            op->slot[i] = SLOT_NET;
            note_failure(op, i, "out of memory");
        } else if (step == STEP_LOCK && c->info_len > 0) {
            lockcore__op_resend(op, i, STEP_INFO, 0, now);
        }
    }
    /* A connection still being set up gets its connect budget on top. */
    op->phase_deadline_ms = now + c->o.request_timeout_ms + (connecting ? c->o.connect_timeout_ms : 0);
    decide(op, now);
}

/* ---- acquire ---- */

/* Each attempt's lock id: the acquisition's id with the attempt's number
 * (mod 16^LOCKCORE__ATTEMPT_DIGITS, never 0) in its last digits. */
static void attempt_id(struct op *op)
{
    static const char hex[] = "0123456789abcdef";
    unsigned n = op->lock.attempts % 0xffffffu + 1;
    memcpy(op->lock.id, op->qid, LOCKCORE_ID_LEN + 1);
    for (int k = LOCKCORE_ID_LEN - 1; k >= LOCKCORE_ID_LEN - LOCKCORE__ATTEMPT_DIGITS; k--, n >>= 4)
        op->lock.id[k] = hex[n & 15];
}

static void attempt_begin(struct op *op, uint64_t now)
{
    attempt_id(op);
    op->lock.attempts++;
    op->attempt_start_ms = now;
    op->raises = 0;
    op->write_back = 0;
    op->max_fence = 0;
    memset(op->fence_known, 0, op->c->n);
    op->holder[0] = '\0';
    op->holder_pttl_ms = -2;
    op->holder_nodes = 0;
    op->n_holders = 0;
    op->behind = 0;
    op->reserved_ahead = 0;
    if (op->c->o.fencing) {
        uint64_t wall = op->c->o.clock_us(op->c->o.clock_arg);
        int rc = fencing_propose(wall, fence_seen(op), &op->proposal);
        if (rc < 0) {
            lockcore__fmt(op->errmsg, sizeof(op->errmsg), "cannot propose a token: %s", fencing_strerror(rc));
            lockcore__op_finish(op, LOCKCORE_EFENCE);
            return;
        }
    }
    phase_begin(op, PH_LOCK, STEP_LOCK, now);
}

/* The backoff: fixed (delay + jitter), or exponential with full jitter. */
static uint64_t backoff_delay(struct op *op)
{
    lockcore_client *c = op->c;
    if (c->o.backoff == LOCKCORE_BACKOFF_EXPONENTIAL) {
        unsigned shift = op->lock.attempts > 1 ? op->lock.attempts - 1 : 0;
        uint64_t cap = c->o.retry_delay_ms;
        for (unsigned k = 0; k < shift && cap < c->o.retry_delay_max_ms; k++)
            cap *= 2;
        if (cap > c->o.retry_delay_max_ms)
            cap = c->o.retry_delay_max_ms;
        return lockcore__rand64(&c->rng) % (cap + 1);
    }
    uint64_t delay = c->o.retry_delay_ms;
    if (c->o.retry_jitter_ms > 0)
        delay += lockcore__rand64(&c->rng) % (c->o.retry_jitter_ms + 1);
    return delay;
}

/* How long a refused acquisition waits. Polling: the backoff. Notified and
 * fair: a waiter first takes its place in the nodes' queues (the next
 * attempt, at once), then sleeps until a release names it or until the
 * holder's TTL runs out (a crashed holder sends nothing), refreshing its
 * place before it lapses. A refusal by nodes that do not agree on one
 * holder (a split vote: nobody holds a majority) retries after the
 * backoff, since nobody will release. */
static uint64_t wait_delay_planned(struct op *op, int rc, uint64_t now);

/* A release's wake-up (a notice, a hint, a subscription's race) is an
 * attempt the caller does not count, and it must not put off the attempts
 * that count: a set named by every release of a member it cannot use yet
 * would otherwise never make one, and never give up. So the wait planned
 * before the wake-up resumes after it, unless the new one is sooner. */
static uint64_t wait_delay(struct op *op, int rc, uint64_t now)
{
    if (op->again) {
        op->again = 0;
        return 0;
    }
    uint64_t delay = wait_delay_planned(op, rc, now);
    if (op->resume_at != 0) {
        uint64_t r = op->resume_at > now ? op->resume_at - now : 0;
        if (r < delay) {
            delay = r;
            op->free_next = op->resume_free;
        }
        op->resume_at = 0;
    }
    if (op->noticed) {
        /* Named while the attempt was in flight: try again at once (that
         * answers a release: not a retry), then as planned. */
        op->noticed = 0;
        op->resume_at = delay == UINT64_MAX ? UINT64_MAX : now + delay;
        op->resume_free = op->free_next;
        op->free_next = 1;
        return 0;
    }
    return delay;
}

void lockcore__op_wake(struct op *op, uint64_t at)
{
    if (op->phase != PH_RETRY_WAIT || op->retry_at_ms <= at)
        return;
    if (op->resume_at == 0 || op->retry_at_ms < op->resume_at) {
        op->resume_at = op->retry_at_ms;
        op->resume_free = op->free_next;
    }
    op->retry_at_ms = at;
    op->free_next = 1;
}

static uint64_t wait_delay_planned(struct op *op, int rc, uint64_t now)
{
    lockcore_client *c = op->c;
    uint64_t delay = backoff_delay(op);
    int refused = rc == LOCKCORE_ELOCKED;
    /* A kind that keeps no place in the nodes' queues polls (kind.h). */
    if (op->wait_mode == LOCKCORE_WAIT_POLL || !refused ||
        (op->type != NULL && (op->type->queues == NULL || !op->type->queues(op))))
        return delay;
    if (!op->queued) {
        /* The next attempt, at once, takes the place; it is not one of
         * the retries the caller allowed. */
        op->queued = 1;
        op->free_next = 1;
        return 0;
    }
    if (c->notify_refused || lockcore__notify_want(c, op) < 0)
        return op->wait_mode == LOCKCORE_WAIT_FAIR && delay > c->o.queue_ttl_ms / 3 ? c->o.queue_ttl_ms / 3
                                                                                    : delay;
    int behind = op->behind >= c->quorum;
    if (behind && op->reserved_ahead >= c->quorum && op->holder_pttl_ms >= 0) {
        /* The waiter ahead was named: if it has died, its reservation and
         * its place end together, and we are next. A look, not a retry. */
        delay = (uint64_t)op->holder_pttl_ms + 1;
        op->free_next = 1;
    } else if (behind) {
        delay = UINT64_MAX; /* waiters before us: the release before ours names us */
    } else if (op->holder[0] != '\0' && op->holder_nodes >= c->quorum && op->holder_pttl_ms >= 0) {
        delay = (uint64_t)op->holder_pttl_ms;
        if (c->o.retry_jitter_ms > 0)
            delay += lockcore__rand64(&c->rng) % (c->o.retry_jitter_ms + 1);
    }
    if (op->hint_at != 0) {
        /* A release named the waiter before us: if that one died, its
         * reservation and its place lapse at hint_at, and we are next. A
         * look, not a retry. */
        uint64_t h = op->hint_at > now ? op->hint_at - now : 0;
        op->hint_at = 0;
        if (h < delay) {
            delay = h;
            op->free_next = 1;
        }
    }
    if (delay > c->o.queue_ttl_ms / 3) {
        delay = c->o.queue_ttl_ms / 3; /* keep the place in the queue */
        op->free_next |= behind;       /* in line behind others: a refresh, not a retry */
    }
    return delay;
}

/* Release whatever this attempt set, on every connected node, then retry
 * or give up. The release is pipelined behind the attempt's own command on
 * each connection, so it runs after it even when that reply is late. */
static void attempt_failed(struct op *op, int rc, uint64_t now)
{
    lockcore_client *c = op->c;
    /* A node that answered "refused" to the lock step did not set our key
     * (the step is one atomic script): nothing to roll back there. After
     * a raise, every node may hold the key set in the lock step. */
    for (unsigned i = 0; i < c->n; i++)
        if (c->nodes[i].state != NODE_DOWN && !(op->phase == PH_LOCK && op->slot[i] == SLOT_NO))
            lockcore__op_resend(op, i, STEP_IGNORE, 0, now);

    if (op->free_next) {
        op->free_next = 0;
        op->free_retries++;
    } else if (rc == LOCKCORE_ELOCKED && op->queued && op->wait_mode != LOCKCORE_WAIT_POLL) {
        /* In line, at most one refusal per refresh period counts: one that
         * raced a handoff (its nodes named different holders, a set's
         * members held by different clients) retries after the backoff,
         * and would otherwise spend the retries in a fraction of the wait
         * a waiter in line is given. */
        if (op->counted_at_ms != 0 && now - op->counted_at_ms < c->o.queue_ttl_ms / 3)
            op->free_retries++;
        else
            op->counted_at_ms = now;
    }
    unsigned counted = op->lock.attempts - op->free_retries;
    int retries_left = (op->retry_count < 0 || counted <= (unsigned)op->retry_count) &&
                       (op->wait_deadline_ms == 0 || now < op->wait_deadline_ms);
    /* Only an acquisition that will retry waits (takes a place, listens). */
    uint64_t delay = retries_left ? wait_delay(op, rc, now) : 0;
    /* With a deadline, the last attempt is made at the deadline, not one
     * delay before it (a notice may still come in between). */
    if (op->wait_deadline_ms != 0 && now + delay > op->wait_deadline_ms)
        delay = op->wait_deadline_ms - now;
    if (!retries_left) {
        lockcore__op_finish(op, rc);
        return;
    }
    op->phase = PH_RETRY_WAIT;
    op->serial = ++c->serial;
    op->retry_at_ms = now + delay;
}

static void counts(const struct op *op, unsigned *yes, unsigned *no, unsigned *net, unsigned *proto,
                   unsigned *acc)
{
    *yes = *no = *net = *proto = *acc = 0;
    for (unsigned i = 0; i < op->c->n; i++) {
        switch (op->slot[i]) {
        case SLOT_YES:
            (*yes)++;
            break;
        case SLOT_NO:
            (*no)++;
            break;
        case SLOT_NET:
            (*net)++;
            break;
        case SLOT_PROTO:
            (*proto)++;
            break;
        default:
            break;
        }
        *acc += op->accepted[i];
    }
}

/* Why a majority did not agree. Refusals that alone leave no majority mean
 * another client holds the lock; otherwise the nodes that failed are the
 * cause (had they answered yes, a majority would have agreed). */
static int failure_code(const struct op *op, unsigned no, unsigned net, unsigned proto, int no_code)
{
    unsigned n = op->c->n, q = op->c->quorum;
    if (no > n - q || net + proto == 0)
        return no_code;
    return proto > net ? LOCKCORE_EPROTO : LOCKCORE_ENOQUORUM;
}

/* Why a phase failed, in counts that add up to the nodes, then who holds
 * the lock (when a refusal said), then the first node failure. */
static void prefix_msg(struct op *op, const char *what, unsigned yes, unsigned no, unsigned net,
                       unsigned proto)
{
    char detail[ERRMSG_MAX], held[160] = "";
    unsigned n = op->c->n;
    unsigned open = n - yes - no - net - proto;
    lockcore__fmt(detail, sizeof(detail), "%s", op->errmsg);
    if (op->holder[0] != '\0' && op->holder_pttl_ms >= 0)
        lockcore__fmt(held, sizeof(held), "; held by %.12s... (on %u of them, %lld ms left)", op->holder,
                      op->holder_nodes, (long long)op->holder_pttl_ms);
    else if (op->holder[0] != '\0')
        lockcore__fmt(held, sizeof(held), "; held by %.12s... (on %u of them)", op->holder, op->holder_nodes);
    lockcore__fmt(op->errmsg, sizeof(op->errmsg),
                  "%s '%s': %u of %u nodes agreed (quorum %u): %u refused, %u unreachable, %u errors, %u not "
                  "awaited%s%s%s",
                  what, op->lock.resource, yes, n, op->c->quorum, no, net, proto, open, held,
                  detail[0] ? "; first failure: " : "", detail);
}

/* Validity = TTL - elapsed - drift, elapsed on the monotonic clock since
 * the attempt began. Returns 0 if nothing is left. */
static int64_t validity(const struct op *op, uint64_t now)
{
    const struct lockcore_options *o = &op->c->o;
    uint64_t drift = (uint64_t)((double)op->ttl_ms * o->drift_factor) + o->drift_ms;
    return (int64_t)op->ttl_ms - (int64_t)(now - op->attempt_start_ms) - (int64_t)drift;
}

static void granted(struct op *op, unsigned yes, uint64_t now)
{
    int64_t v = validity(op, now);
    if (v <= 0) {
        lockcore__fmt(op->errmsg, sizeof(op->errmsg),
                      "acquire '%s': granted too slowly (%llu ms), no validity left", op->lock.resource,
                      (unsigned long long)(now - op->attempt_start_ms));
        attempt_failed(op, -ETIMEDOUT, now);
        return;
    }
    op->lock.validity_ms = (uint64_t)v;
    op->lock.valid_until_ms = now + (uint64_t)v;
    op->lock.ttl_ms = op->ttl_ms;
    op->lock.nodes_ok = yes;
    op->lock.token = op->c->o.fencing ? op->proposal : 0;
    op->lock.rounds = op->c->o.fencing ? 1 + op->raises : 0;
    if (op->c->o.fencing)
        fence_saw(op, op->lock.token);
    if (op->type != NULL && op->type->granted != NULL)
        op->type->granted(op);
    op->errmsg[0] = '\0';
    lockcore__op_finish(op, 0);
}

/* A second round proposes just above the fences of a majority: the
 * smallest value larger than `quorum` of the values the nodes reported
 * (their largest, when fewer answered). Not above the largest: a node
 * whose clock runs fast may have taken a fast client's first-round
 * proposal, hours ahead, and a raise has no bound; carried to a majority
 * it would push the tokens of every resource of the bucket that far ahead
 * (docs/fencing.md, "Clocks"). Any value a majority accepts is safe; this
 * one needs no more than a majority. Clients whose first rounds lost in
 * one bucket (other resources of it) raise at once, all with the same
 * value, and split the nodes so that none gets a majority; after a refused
 * second round, a random spread makes their proposals differ, and the
 * largest is accepted wherever it arrives before a later round's. */
#define RAISE_SPREAD 1024

static void raise_begin(struct op *op, uint64_t now)
{
    uint64_t spread = op->raises > 0 ? lockcore__rand64(&op->c->rng) % RAISE_SPREAD : 0;
    /* Above the fences of a majority of the nodes that answered round one
     * (decide_lock waits for all of them, or the round's deadline). */
    uint64_t v[LOCKCORE_NODES_MAX], far_at = lockcore__far_from(op->c, 0);
    unsigned k = lockcore__known_fences(op, v), q = op->c->quorum, far = 0;
    uint64_t base = k >= q ? v[q - 1] : op->max_fence;
    for (unsigned i = 0; i < k; i++)
        far += v[i] > far_at;
    if (base > far_at && far < q) {
        /* Only a minority holds a value that far ahead of our clock, and
         * the nodes that answered need it for a majority (the others are
         * down or slow): carried to a majority, it would stay. */
        lockcore__fmt(
            op->errmsg, sizeof(op->errmsg),
            "acquire '%s': a second round would carry a fence far ahead of this client's clock from "
            "%u node(s) to a majority; not while nodes are missing",
            op->lock.resource, far);
        attempt_failed(op, LOCKCORE_EFENCE, now);
        return;
    }
    int rc = fencing_propose_next(base + spread, &op->proposal);
    if (rc < 0) {
        lockcore__fmt(op->errmsg, sizeof(op->errmsg), "acquire '%s': %s", op->lock.resource,
                      fencing_strerror(rc));
        attempt_failed(op, LOCKCORE_EFENCE, now);
        return;
    }
    op->raises++;
    phase_begin(op, PH_RAISE, STEP_RAISE, now);
}

static int same_key(const struct op *a, const struct op *b)
{
    return a->key_len == b->key_len && memcmp(a->key, b->key, a->key_len) == 0;
}

/* A release of this client frees the resource for the acquisitions of the
 * same client that wait to retry it: the oldest of them tries again now
 * instead of sleeping out its retry delay. It need not wait for the release
 * to be answered: on every connection its command goes out after the
 * release's compare-and-delete, so each node runs the two in that order,
 * and the lock passes within one round trip. Its command also goes out
 * before anything the release's callback starts, so waiters of one client
 * get the resource in the order they asked for it. */
static void wake_local_waiter(const struct op *rel, uint64_t now)
{
    struct op *oldest = NULL, *queued = NULL;
    for (struct op *o = rel->c->active; o != NULL; o = o->next) /* newest first */
        if (o->kind == OP_ACQUIRE && o->phase == PH_RETRY_WAIT && same_key(o, rel)) {
            oldest = o;
            if (o->queued)
                queued = o;
        }
    /* A waiter with a place in the nodes' queues is the one a notified
     * release names (and keeps the lock for) when it is first there: any
     * other would only be refused. */
    if (queued != NULL && rel->wait_mode != LOCKCORE_WAIT_POLL)
        oldest = queued;
    if (oldest != NULL && oldest->retry_at_ms > now)
        oldest->retry_at_ms = now;
}

/* The lock step of an attempt: the verdict of fencing_decide. */
static void decide_lock(struct op *op, const struct fencing_tally *t, unsigned no, unsigned net,
                        unsigned proto, uint64_t now)
{
    lockcore_client *c = op->c;
    if (op->type != NULL && op->type->decide_lock != NULL) {
        int rc = 0;
        switch (op->type->decide_lock(op, &rc)) {
        case KIND_WAIT:
            return;
        case KIND_GRANT:
            granted(op, t->granted, now);
            return;
        case KIND_FAIL:
            attempt_failed(op, rc, now);
            return;
        case KIND_WRITE_BACK:
            if (validity(op, now) <= 0) {
                granted(op, t->granted, now); /* reports no validity left */
                return;
            }
            op->lock.nodes_ok = t->granted;
            op->write_back = 1;
            op->raises++;
            phase_begin(op, PH_RAISE, STEP_RAISE, now);
            return;
        case KIND_PLAIN:
            break;
        }
    }
    switch (fencing_decide(t, c->o.fencing)) {
    case FENCING_WAIT:
        return;
    case FENCING_GRANTED:
        granted(op, t->granted, now);
        return;
    case FENCING_ROUND2:
        if (validity(op, now) <= 0) {
            granted(op, t->granted, now); /* reports no validity left */
            return;
        }
        /* Every node's fence, or the round's deadline, first: the value of
         * round two must not come from a minority ahead of the rest
         * (raise_begin). */
        if (t->answered < t->n && now < op->phase_deadline_ms)
            return;
        op->lock.nodes_ok = t->granted;
        raise_begin(op, now);
        return;
    case FENCING_FAILED:
        op->lock.nodes_ok = t->granted;
        prefix_msg(op, "acquire", t->granted, no, net, proto);
        attempt_failed(op, failure_code(op, no, net, proto, LOCKCORE_ELOCKED), now);
        return;
    }
}

/* A second-round proposal: the lock is held, only acceptance is open. */
static void decide_raise(struct op *op, struct fencing_tally t, unsigned net, unsigned proto, uint64_t now)
{
    lockcore_client *c = op->c;
    t.granted = c->n;
    switch (fencing_decide(&t, 1)) {
    case FENCING_WAIT:
        return;
    case FENCING_GRANTED:
        granted(op, op->lock.nodes_ok, now);
        return;
    default:
        if (!op->write_back && op->raises < MAX_RAISES && validity(op, now) > 0) {
            raise_begin(op, now);
            return;
        }
        prefix_msg(op, "fencing token for", t.accepted, c->n - t.accepted - net - proto, net, proto);
        attempt_failed(op, failure_code(op, 0, net, proto, LOCKCORE_EFENCE), now);
        return;
    }
}

/* An extension: a majority extended (with validity left), or can no longer. */
static void decide_extend(struct op *op, unsigned yes, unsigned no, unsigned net, unsigned proto,
                          unsigned answered, uint64_t now)
{
    lockcore_client *c = op->c;
    if (yes >= c->quorum) {
        int64_t v = validity(op, now);
        if (v <= 0) {
            lockcore__fmt(op->errmsg, sizeof(op->errmsg),
                          "extend '%s': extended too slowly, no validity left", op->lock.resource);
            lockcore__op_finish(op, LOCKCORE_ELOST);
            return;
        }
        op->lock.validity_ms = (uint64_t)v;
        op->lock.valid_until_ms = now + (uint64_t)v;
        op->lock.ttl_ms = op->ttl_ms;
        op->lock.nodes_ok = yes;
        op->lock.flags &= ~LOCKCORE_LOCK_FROM_ID; /* validity known now */
        op->errmsg[0] = '\0';
        lockcore__op_finish(op, 0);
    } else if (yes + (c->n - answered) < c->quorum) {
        prefix_msg(op, "extend", yes, no, net, proto);
        op->lock.nodes_ok = yes;
        lockcore__op_finish(op, failure_code(op, no, net, proto, LOCKCORE_ELOST));
    }
}

/* A release waits for every node: a majority that answered, whatever it
 * said, is a release done. */
static void decide_release(struct op *op, unsigned yes, unsigned no, unsigned net, unsigned proto,
                           unsigned answered)
{
    lockcore_client *c = op->c;
    if (answered < c->n)
        return;
    op->lock.nodes_ok = yes;
    op->lock.validity_ms = 0;
    op->lock.valid_until_ms = 0;
    if (yes + no >= c->quorum) {
        op->errmsg[0] = '\0';
        lockcore__op_finish(op, 0);
    } else {
        /* Errors (an ACL refusal) rather than silence: a protocol error,
         * as for the other operations (the table in lockcore.h). */
        prefix_msg(op, "release", yes, no, net, proto);
        lockcore__op_finish(op, proto > net ? LOCKCORE_EPROTO : LOCKCORE_ENOQUORUM);
    }
}

/* Decide the current phase as soon as its outcome is certain. */
static void decide(struct op *op, uint64_t now)
{
    lockcore_client *c = op->c;
    unsigned yes, no, net, proto, acc;
    counts(op, &yes, &no, &net, &proto, &acc);
    unsigned answered = yes + no + net + proto;
    struct fencing_tally t = {.n = c->n, .granted = yes, .accepted = acc, .answered = answered};

    switch (op->phase) {
    case PH_LOCK:
        decide_lock(op, &t, no, net, proto, now);
        return;
    case PH_RAISE:
        decide_raise(op, t, net, proto, now);
        return;
    case PH_EXTEND:
        decide_extend(op, yes, no, net, proto, answered, now);
        return;
    case PH_RELEASE:
        decide_release(op, yes, no, net, proto, answered);
        return;
    case PH_STATUS:
        if (answered == c->n)
            lockcore__op_finish(op, op->repair ? (int)op->lowered : (int)c->n);
        return;
    default:
        return;
    }
}

/* An acquisition that may retry, started while another operation of this
 * client is acquiring, waiting for or releasing the same resource, would
 * only lose to it: its command queues behind the other's on every
 * connection. It waits its retry delay instead, without an attempt, and is
 * woken early by the release that frees the resource. */
static int queue_behind_local(struct op *op, uint64_t now)
{
    lockcore_client *c = op->c;
    /* A fair acquisition takes its place in the nodes' queues at once:
     * waiting here, it would let later waiters of other clients ahead. */
    if (op->retry_count == 0 || op->wait_mode == LOCKCORE_WAIT_FAIR)
        return 0;
    int busy = 0;
    for (const struct op *o = c->active; o != NULL && !busy; o = o->next)
        busy = o != op && same_key(o, op) &&
               ((o->kind == OP_ACQUIRE && o->phase != PH_DONE) ||
                (o->kind == OP_RELEASE && o->phase == PH_RELEASE));
    if (!busy)
        return 0;
    uint64_t delay = c->o.retry_delay_ms;
    if (c->o.retry_jitter_ms > 0)
        delay += lockcore__rand64(&c->rng) % (c->o.retry_jitter_ms + 1);
    if (op->wait_deadline_ms != 0 && now + delay >= op->wait_deadline_ms)
        return 0;
    op->phase = PH_RETRY_WAIT;
    op->serial = ++c->serial;
    op->retry_at_ms = now + delay;
    return 1;
}

void lockcore__op_start(struct op *op, uint64_t now)
{
    switch (op->kind) {
    case OP_ACQUIRE:
        if (!queue_behind_local(op, now))
            attempt_begin(op, now);
        break;
    case OP_EXTEND:
        if (!(op->lock.flags & LOCKCORE_LOCK_FROM_ID) && lockcore_remaining_ms(&op->lock) == 0) {
            lockcore__fmt(op->errmsg, sizeof(op->errmsg), "extend '%s': validity already ran out",
                          op->lock.resource);
            lockcore__op_finish(op, LOCKCORE_ELOST);
            return;
        }
        op->attempt_start_ms = now;
        phase_begin(op, PH_EXTEND, STEP_EXTEND, now);
        break;
    case OP_RELEASE:
        phase_begin(op, PH_RELEASE, STEP_RELEASE, now);
        wake_local_waiter(op, now);
        break;
    case OP_STATUS:
        for (unsigned i = 0; i < op->c->n; i++) {
            memset(&op->status[i], 0, sizeof(op->status[i]));
            lockcore__fmt(op->status[i].node, sizeof(op->status[i].node), "%s", op->c->nodes[i].name);
            op->status[i].pttl_ms = -2;
        }
        phase_begin(op, PH_STATUS, STEP_STATUS, now);
        break;
    }
}

/* ---- replies ---- */

/* A step that did not run for the way it was sent, and runs sent whole:
 * the node lost the script (NOSCRIPT: SCRIPT FLUSH, or a restart not
 * seen) or the function library (FUNCTION FLUSH or DELETE); or the node
 * refused an FCALL before running any of it: a user without +fcall, or a
 * node over maxmemory, which refuses a function whole where a script runs
 * and only its commands that need memory fail (a release or an extension
 * needs none). Only a reply to an FCALL counts for those two: a script's
 * own OOM may come after it wrote, and must not run it twice. Any of
 * these ends FCALL on that connection: a step is resent once for them. */
static int is_noscript(enum sent_as how, const redisReply *r)
{
    if (r->type != REDIS_REPLY_ERROR)
        return 0;
    if (strncmp(r->str, "NOSCRIPT", 8) == 0 || strcmp(r->str, "ERR Function not found") == 0)
        return 1;
    return how == SENT_FCALL && (strncmp(r->str, "OOM ", 4) == 0 ||
                                 (strncmp(r->str, "NOPERM ", 7) == 0 && strstr(r->str, "'fcall'") != NULL));
}

static long long int_at(const redisReply *r, size_t i)
{
    return r->element[i]->type == REDIS_REPLY_INTEGER ? r->element[i]->integer : -1;
}

static int fence_at(const redisReply *r, size_t i, uint64_t *out)
{
    const redisReply *e = r->element[i];
    if (e->type != REDIS_REPLY_STRING)
        return -EINVAL;
    return fencing_token_parse(e->str, e->len, out);
}

static void slot_error(struct op *op, unsigned i, const redisReply *r)
{
    char why[256];
    if (r->type == REDIS_REPLY_ERROR)
        lockcore__fmt(why, sizeof(why), "server error: %.200s", r->str);
    else
        lockcore__fmt(why, sizeof(why), "unexpected reply type %d", r->type);
    op->slot[i] = SLOT_PROTO;
    note_failure(op, i, why);
}

static void note_fence(struct op *op, unsigned i, uint64_t f)
{
    op->node_fence[i] = f;
    op->fence_known[i] = 1;
    if (f > op->max_fence)
        op->max_fence = f;
    fence_saw(op, f);
}

/* Remember who refused us: the holder most nodes named, with the longest
 * time left it has on one of them. Replies come in any order, and during a
 * handoff the first may well name the old holder on a minority. */
static void note_holder(struct op *op, const redisReply *h, long long pttl)
{
    if (h->type != REDIS_REPLY_STRING || h->len == 0 || h->len > LOCKCORE_ID_LEN)
        return;
    unsigned k = 0;
    while (k < op->n_holders &&
           (strlen(op->holders[k].id) != h->len || memcmp(op->holders[k].id, h->str, h->len) != 0))
        k++;
    if (k == op->n_holders) {
        if (k == sizeof(op->holders) / sizeof(op->holders[0]))
            return;
        memcpy(op->holders[k].id, h->str, h->len);
        op->holders[k].id[h->len] = '\0';
        op->holders[k].nodes = 0;
        op->holders[k].pttl_ms = -2;
        op->n_holders++;
    }
    op->holders[k].nodes++;
    if (pttl > op->holders[k].pttl_ms)
        op->holders[k].pttl_ms = pttl;
    if (op->holders[k].nodes > op->holder_nodes) {
        memcpy(op->holder, op->holders[k].id, sizeof(op->holder));
        op->holder_nodes = op->holders[k].nodes;
        op->holder_pttl_ms = op->holders[k].pttl_ms;
    }
}

/* A fence repair's reply: {lowered, fence before, after, holder, node µs}. */
static void repair_reply(struct op *op, unsigned i, const redisReply *r)
{
    struct lockcore_node_status *st = &op->status[i];
    if (r->type != REDIS_REPLY_ARRAY || r->elements != 5 || r->element[0]->type != REDIS_REPLY_INTEGER ||
        r->element[3]->type != REDIS_REPLY_STRING || fence_at(r, 2, &st->fence) < 0 ||
        fence_at(r, 4, &st->node_time_us) < 0) {
        slot_error(op, i, r);
        lockcore__fmt(st->error, sizeof(st->error), "%s", op->errmsg);
        return;
    }
    st->reachable = 1;
    size_t hl = r->element[3]->len < LOCKCORE_ID_LEN ? r->element[3]->len : LOCKCORE_ID_LEN;
    memcpy(st->holder, r->element[3]->str, hl);
    st->holder[hl] = '\0';
    op->lowered += r->element[0]->integer == 1;
    op->slot[i] = SLOT_YES;
}

static void status_reply(struct op *op, unsigned i, const redisReply *r)
{
    struct lockcore_node_status *st = &op->status[i];
    if (op->repair) {
        repair_reply(op, i, r);
        return;
    }
    /* The plain status: 6 elements (with the queue of waiters); a kind's
     * with 5 has a count of holds; with 7 the readers' count, the first
     * readers and the waiting writer (kinds/); each then the node's clock
     * in µs (lua/lib/clock.lua). */
    size_t ne = r->type == REDIS_REPLY_ARRAY && r->elements > 0 ? r->elements - 1 : 0;
    if (r->type != REDIS_REPLY_ARRAY || ne < 5 || ne > 7 || r->element[0]->type != REDIS_REPLY_STRING ||
        r->element[3]->type != REDIS_REPLY_STRING || (ne >= 6 && r->element[5]->type != REDIS_REPLY_ARRAY) ||
        (ne == 7 && r->element[6]->type != REDIS_REPLY_STRING) || fence_at(r, ne, &st->node_time_us) < 0) {
        slot_error(op, i, r);
        lockcore__fmt(st->error, sizeof(st->error), "%s", op->errmsg);
        return;
    }
    st->reachable = 1;
    size_t hl = r->element[0]->len < LOCKCORE_ID_LEN ? r->element[0]->len : LOCKCORE_ID_LEN;
    memcpy(st->holder, r->element[0]->str, hl);
    st->holder[hl] = '\0';
    st->pttl_ms = int_at(r, 1);
    if (fence_at(r, 2, &st->fence) < 0)
        st->fence = 0;
    size_t il = r->element[3]->len < LOCKCORE_INFO_MAX ? r->element[3]->len : LOCKCORE_INFO_MAX;
    memcpy(st->info, r->element[3]->str, il);
    st->info[il] = '\0';
    if (ne == 6) {
        long long w = int_at(r, 4);
        st->waiters = w > 0 ? (unsigned)w : 0;
        const redisReply *q = r->element[5];
        for (size_t k = 0; k + 1 < q->elements && k / 2 < LOCKCORE_STATUS_WAITERS; k += 2) {
            const redisReply *id = q->element[k], *score = q->element[k + 1];
            struct lockcore_waiter *wt = &st->queue[k / 2];
            if (id->type != REDIS_REPLY_STRING || id->len != LOCKCORE_ID_LEN ||
                score->type != REDIS_REPLY_STRING)
                break;
            memcpy(wt->id, id->str, LOCKCORE_ID_LEN + 1);
            wt->ticket = strtoull(score->str, NULL, 10);
        }
    } else if (int_at(r, 4) > 0) { /* a reentrant lock's hold count, or readers */
        st->holds = (unsigned)int_at(r, 4);
    }
    if (ne == 7) {
        const redisReply *q = r->element[5], *w = r->element[6];
        for (size_t k = 0; k + 1 < q->elements && k / 2 < LOCKCORE_STATUS_READERS; k += 2) {
            const redisReply *id = q->element[k];
            struct lockcore_reader *rd = &st->readers[k / 2];
            if (id->type != REDIS_REPLY_STRING || q->element[k + 1]->type != REDIS_REPLY_INTEGER)
                break;
            size_t n = id->len < LOCKCORE_ID_LEN ? id->len : LOCKCORE_ID_LEN;
            memcpy(rd->id, id->str, n);
            rd->id[n] = '\0';
            rd->pttl_ms = q->element[k + 1]->integer;
        }
        size_t n = w->len < LOCKCORE_ID_LEN ? w->len : LOCKCORE_ID_LEN;
        memcpy(st->writer_waits, w->str, n);
        st->writer_waits[n] = '\0';
    }
    op->slot[i] = SLOT_YES;
}

void lockcore__op_reply(struct op *op, unsigned i, enum step step, enum sent_as how, redisReply *r,
                        uint64_t now)
{
    if (op->slot[i] != SLOT_OPEN)
        return;
    if (is_noscript(how, r)) {
        /* Send the whole script this once; and no more FCALL on this
         * connection (the next one loads the library again). */
        op->c->nodes[i].fn = -1;
        if (lockcore__op_resend(op, i, step, 1, now) < 0)
            slot_error(op, i, r);
        else
            return;
    }
    if (step == STEP_LOCK && op->type != NULL && op->type->lock_reply != NULL)
        op->type->lock_reply(op, i, r);
    switch (step) {
    case STEP_LOCK:
        if (how == SENT_SET) { /* plain Redlock: a plain lock's, or a kind's that takes one (a permit) */
            if (r->type == REDIS_REPLY_STATUS && strcmp(r->str, "OK") == 0)
                op->slot[i] = SLOT_YES;
            else if (r->type == REDIS_REPLY_NIL)
                op->slot[i] = SLOT_NO;
            else
                slot_error(op, i, r);
            break;
        }
        if (r->type == REDIS_REPLY_ARRAY && r->elements >= 3) {
            uint64_t f;
            if (fence_at(r, 2, &f) == 0) {
                note_fence(op, i, f);
                op->slot[i] = int_at(r, 0) == 1 ? SLOT_YES : SLOT_NO;
                op->accepted[i] = op->slot[i] == SLOT_YES && int_at(r, 1) == 1;
                if (op->slot[i] == SLOT_NO && r->elements >= 5)
                    note_holder(op, r->element[3], int_at(r, 4));
                if (op->slot[i] == SLOT_NO && r->elements >= 6 && r->element[5]->type == REDIS_REPLY_STRING &&
                    (r->element[5]->len != LOCKCORE_ID_LEN ||
                     memcmp(r->element[5]->str, op->qid, LOCKCORE_ID_LEN) != 0)) {
                    op->behind++;
                    /* The waiter ahead holds the key: a release named it,
                     * and this is its reservation. */
                    const redisReply *h = r->element[3], *w = r->element[5];
                    op->reserved_ahead += h->type == REDIS_REPLY_STRING && h->len == w->len &&
                                          memcmp(h->str, w->str, w->len) == 0;
                }
                break;
            }
        }
        slot_error(op, i, r);
        break;
    case STEP_RAISE:
        if (r->type == REDIS_REPLY_ARRAY && r->elements == 2) {
            uint64_t f;
            if (fence_at(r, 1, &f) == 0) {
                note_fence(op, i, f);
                /* A write-back needs the fence at least there, whoever
                 * put it there. */
                op->accepted[i] = int_at(r, 0) == 1 || (op->write_back && f >= op->proposal);
                op->slot[i] = op->accepted[i] ? SLOT_YES : SLOT_NO;
                break;
            }
        }
        slot_error(op, i, r);
        break;
    case STEP_EXTEND:
    case STEP_RELEASE:
        if (r->type == REDIS_REPLY_INTEGER)
            op->slot[i] = r->integer == 1 ? SLOT_YES : SLOT_NO;
        else
            slot_error(op, i, r);
        break;
    case STEP_STATUS:
        status_reply(op, i, r);
        break;
    default:
        return;
    }
    decide(op, now);
}

void lockcore__op_node_failed(struct op *op, unsigned i, enum fail_kind kind, const char *why, uint64_t now)
{
    if (op->slot[i] != SLOT_OPEN)
        return;
    op->slot[i] = kind == FAIL_PROTO ? SLOT_PROTO : SLOT_NET;
    note_failure(op, i, why);
    if (op->kind == OP_STATUS)
        lockcore__fmt(op->status[i].error, sizeof(op->status[i].error), "%s", why);
    decide(op, now);
}

void lockcore__op_check_timers(struct op *op, uint64_t now)
{
    if (op->phase == PH_RETRY_WAIT) {
        if (now >= op->retry_at_ms)
            attempt_begin(op, now);
        return;
    }
    if (op->phase == PH_DONE || now < op->phase_deadline_ms)
        return;
    /* Nodes that have not answered by the deadline count as failed for this
     * phase; their replies, if they come, no longer match the serial. */
    lockcore_client *c = op->c;
    uint64_t waited = now - op->phase_start_ms;
    for (unsigned i = 0; i < c->n; i++) {
        if (op->slot[i] != SLOT_OPEN)
            continue;
        op->slot[i] = SLOT_NET;
        char why[64];
        lockcore__fmt(why, sizeof(why), "no reply within %llu ms", (unsigned long long)waited);
        note_failure(op, i, why);
        if (op->kind == OP_STATUS)
            lockcore__fmt(op->status[i].error, sizeof(op->status[i].error), "%s", why);
    }
    decide(op, now);
}

uint64_t lockcore__op_next_timer(const struct op *op)
{
    if (op->phase == PH_RETRY_WAIT)
        return op->retry_at_ms;
    if (op->phase == PH_DONE)
        return UINT64_MAX;
    return op->phase_deadline_ms;
}

void lockcore__op_cancel(struct op *op)
{
    lockcore__op_abort(op, LOCKCORE_ECANCELED, "canceled: the client was freed");
}

/* End an operation before its outcome is known. An acquisition may have
 * set its key on some nodes: those are rolled back (best effort) so that
 * nothing is left to block others until the TTL. */
void lockcore__op_abort(struct op *op, int rc, const char *why)
{
    lockcore_client *c = op->c;
    if (op->kind == OP_ACQUIRE && (op->phase == PH_LOCK || op->phase == PH_RAISE))
        for (unsigned i = 0; i < c->n; i++)
            if (c->nodes[i].state != NODE_DOWN)
                lockcore__op_resend(op, i, STEP_IGNORE, 0, lockcore_now_ms());
    lockcore__fmt(op->errmsg, sizeof(op->errmsg), "%s '%s': %s",
                  op->kind == OP_ACQUIRE   ? "acquire"
                  : op->kind == OP_EXTEND  ? "extend"
                  : op->kind == OP_RELEASE ? "release"
                                           : "status",
                  op->lock.resource, why);
    lockcore__op_finish(op, rc);
}
