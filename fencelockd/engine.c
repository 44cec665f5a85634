/*
 * The event loop of fencelockd's lock operations, and the thread of its
 * status reads.
 *
 * The loop thread owns the lockcore client of the operations: serving
 * threads hand it jobs through a queue and an eventfd, it starts them with
 * the _async calls and polls the client's descriptors, an epoll set of the
 * waiting requests' sockets (a client that hangs up) and the eventfd
 * together. Each acquisition carries its own TTL, wait and wait mode
 * (lockcore_call), and the bearer-token client it is for as its owner, so
 * that its ids name that client (fld_api_authorize).
 *
 * A request that waits and whose client hangs up is answered (to nobody)
 * at once and its acquisition canceled (lockcore_cancel): rolled back and
 * out of the nodes' queues, so the next waiter does not wait behind it. A
 * grant that arrives before the hang-up is seen is released at once.
 */
#include <errno.h>
#include <poll.h>
#include <stdatomic.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <time.h>
#include <unistd.h>

#include <jansson.h>

#include "engine.h"
#include "metrics.h"

/* Status views read at most this many nodes. */
#define STATUS_CAP LOCKCORE_NODES_MAX

struct job {
    struct job *next;          /* in a queue */
    struct job *wprev, *wnext; /* among the waiters */
    struct loop *e;            /* the loop it runs on */
    struct fld_op op;
    fencehttp_conn *conn; /* NULL once answered (told or hung up) */
    char client[FENCEHTTP_AUTH_NAME_MAX + 1];
    int fd;      /* the request's socket while watched, else -1 */
    int waiting; /* counted in the waiters gauge */
    uint64_t t0_ms;
    /* An election's reading (FLD_ROUTE_LEADER): the first, which a
     * long poll then waits to change. */
    struct lockcore_leader leader;
    /* A read's arrays (status, a refused acquisition's holder, a probe). */
    struct lockcore_node_status *st;
    struct lockcore_permit_status *ps;
    int second; /* the long poll's wait after its first reading */
    /* A refused acquisition on its way to the status thread for its
     * holder: its outcome. */
    int rc;
    struct lockcore_lock lock;
    char errmsg[512];
};

struct loop {
    fld_engine *eng; /* what every loop shares */
    struct fld_engine_options o;
    pthread_t loop_thread;
    int loop_started;
    int efd, epfd;

    pthread_mutex_t mu;                  /* guards the queues and the flags below */
    struct job *queue_head, *queue_tail; /* for the loop */
    int stopping;                        /* SIGTERM: no new work */
    int drain_ms;
    int loop_done;
    pthread_cond_t done_cv;

    /* The loop thread's own. */
    lockcore_client *c;
    int running;         /* jobs started and not ended */
    struct job *waiters; /* acquisitions that wait, for SIGTERM */
    int orphans;         /* running jobs whose request is answered already */
    unsigned nodes, quorum;
};

/* The loops: each owns a lockcore client and the resources that hash to
 * it, so one resource's waiters are all on one loop (and one client). */
struct fld_engine {
    struct loop *loops;
    int n_loops;
    unsigned nodes, quorum;
    _Atomic(const struct fld_owners *) owners;
};

static uint64_t now_ms(void)
{
    return lockcore_now_ms();
}

static double secs_since(uint64_t t0)
{
    return (double)(now_ms() - t0) / 1e3;
}

static void job_free(struct job *j)
{
    free(j->st);
    free(j->ps);
    free(j);
}

/* Answer the job's request (once) with resp. */
static void answer(struct job *j, struct fencehttp_response *resp)
{
    if (j->conn != NULL)
        fencehttp_answer_later(j->conn, resp);
    else
        fencehttp_response_clear(resp);
    j->conn = NULL;
}

static void answer_error(struct job *j, int status, const char *code, const char *msg)
{
    struct fencehttp_response r = {0};
    fencehttp_error(&r, status, code, "%s", msg);
    answer(j, &r);
}

static int client_new(struct loop *e, lockcore_client **out, char *err, size_t cap)
{
    struct lockcore_options o = *e->o.base;
    o.ttl_ms = e->o.limits.default_ttl_ms;
    o.wait_ms = 0;
    o.retry_count = 0;
    o.wait_mode = LOCKCORE_WAIT_NOTIFY;
    /* Every acquisition's TTL may be up to max_ttl_ms. */
    if (o.fence_idle_ms != 0 && o.fence_idle_ms < 2 * e->o.limits.max_ttl_ms)
        o.fence_idle_ms = 2 * e->o.limits.max_ttl_ms;
    return lockcore_client_new(&o, out, err, cap);
}

/* ---- watching the sockets of waiting requests ---- */

static void watch(struct loop *e, struct job *j, int fd)
{
    if (fd < 0)
        return;
    /* Only a hang-up or an error: bytes a client sends meanwhile (a
     * pipelined request) are libmicrohttpd's. */
    struct epoll_event ev = {.events = EPOLLRDHUP, .data.ptr = j};
    if (epoll_ctl(e->epfd, EPOLL_CTL_ADD, fd, &ev) == 0)
        j->fd = fd;
}

static void unwatch(struct loop *e, struct job *j)
{
    if (j->fd >= 0)
        epoll_ctl(e->epfd, EPOLL_CTL_DEL, j->fd, NULL);
    j->fd = -1;
    if (j->waiting) {
        fld_metrics_waiters(-1);
        j->waiting = 0;
        if (j->wprev)
            j->wprev->wnext = j->wnext;
        else
            e->waiters = j->wnext;
        if (j->wnext)
            j->wnext->wprev = j->wprev;
        j->wprev = j->wnext = NULL;
    }
}

/* ---- operations ---- */

/* Append j to a queue; e->mu held. */
static void push_locked(struct job **head, struct job **tail, struct job *j)
{
    j->next = NULL;
    if (*tail)
        (*tail)->next = j;
    else
        *head = j;
    *tail = j;
}

static void on_orphan_released(lockcore_client *c, int rc, const struct lockcore_lock *lock, void *arg)
{
    (void)c;
    (void)lock;
    struct job *j = arg;
    struct loop *e = j->e;
    if (rc != 0)
        fencehttp_log(FENCEHTTP_LOG_WARN,
                      "release of an abandoned grant of '%.200s' failed: %s (it expires by its TTL)",
                      j->op.resource, lockcore_strerror(rc));
    e->running--;
    e->orphans--;
    job_free(j);
}

static void log_op(const struct job *j, int rc, const struct lockcore_lock *lock)
{
    if (!fencehttp_log_enabled(FENCEHTTP_LOG_INFO))
        return;
    static const char *const what[FLD_ROUTE_COUNT] = {
        [FLD_ROUTE_ACQUIRE] = "acquire",   [FLD_ROUTE_EXTEND] = "extend",     [FLD_ROUTE_RELEASE] = "release",
        [FLD_ROUTE_CAMPAIGN] = "campaign", [FLD_ROUTE_PROCLAIM] = "proclaim", [FLD_ROUTE_RESIGN] = "resign"};
    /* The ref, not the id: a log is read by more people than may release. */
    char ref[17];
    fld_api_ref(lock && lock->id[0] ? lock->id : j->op.lock_id, ref);
    fencehttp_log(FENCEHTTP_LOG_INFO, "%s%s%s%s %s '%.200s' ref %s token %llu: %s",
                  j->client[0] ? "client " : "", j->client, j->client[0] ? ": " : "", what[j->op.route],
                  fld_kind_name(j->op.kind), j->op.resource, ref[0] ? ref : "-",
                  (unsigned long long)(lock ? lock->token : 0), rc == 0 ? "ok" : lockcore_strerror(rc));
}

static int read_holder(struct loop *e, struct job *j);

/* Every lock operation ends here, from lockcore_process. */
static void on_done(lockcore_client *c, int rc, const struct lockcore_lock *lock, void *arg)
{
    struct job *j = arg;
    struct loop *e = j->e;
    unwatch(e, j);
    double secs = secs_since(j->t0_ms);
    log_op(j, rc, lock);
    int campaign = j->op.route == FLD_ROUTE_CAMPAIGN;
    if (j->op.route == FLD_ROUTE_ACQUIRE || campaign) {
        if (j->conn == NULL) {
            /* Its client hung up, or was told the server stops: a grant
             * nobody will use goes back (an election's to the next
             * candidate in line). */
            fld_metrics_acquired(j->op.kind, FLD_OUT_ABANDONED, secs);
            if (rc == 0) {
                if ((campaign ? lockcore_resign_async(c, lock, on_orphan_released, j)
                              : lockcore_release_async(c, lock, on_orphan_released, j)) == 0)
                    return;
            }
            e->running--;
            e->orphans--;
            job_free(j);
            return;
        }
        fld_metrics_acquired(j->op.kind, fld_metrics_outcome(rc), secs);
        if (rc == LOCKCORE_ELOCKED && !campaign && j->op.kind != FLD_KIND_PERMIT &&
            j->op.kind != FLD_KIND_MULTI) {
            /* Name the holder: a status read, on this loop. */
            j->rc = rc;
            j->lock = *lock;
            snprintf(j->errmsg, sizeof(j->errmsg), "%s", lockcore_errmsg(c));
            if (read_holder(e, j) == 0)
                return;
        }
    } else {
        fld_metrics_timed(j->op.route == FLD_ROUTE_EXTEND     ? FLD_T_EXTEND
                          : j->op.route == FLD_ROUTE_PROCLAIM ? FLD_T_PROCLAIM
                          : j->op.route == FLD_ROUTE_RESIGN   ? FLD_T_RESIGN
                                                              : FLD_T_RELEASE,
                          rc == 0, secs);
        if (rc == LOCKCORE_ELOST)
            fld_metrics_lost();
    }
    struct fencehttp_response r = {0};
    fld_api_result(&j->op, rc, lock, rc ? lockcore_errmsg(c) : NULL, NULL, 0, NULL, &r);
    answer(j, &r);
    e->running--;
    job_free(j);
}

static int start_acquire(struct loop *e, struct job *j)
{
    const struct fld_op *op = &j->op;
    lockcore_client *c = e->c;
    struct lockcore_call call;
    lockcore_call_init(c, &call);
    call.ttl_ms = op->ttl_ms;
    call.wait_ms = op->wait_ms;
    /* One attempt without a wait; with one, attempts until it runs out. */
    call.retry_count = op->wait_ms == 0 ? 0 : -1;
    call.wait_mode = op->wait_mode;
    call.owner = j->client[0] ? j->client : NULL;
    struct lockcore_request rq = {.kind = fld_kind_flag(op->kind), .resource = op->resource};
    switch (op->kind) {
    case FLD_KIND_PERMIT:
        rq.permits = op->permits;
        break;
    case FLD_KIND_MULTI:
        rq.resource = NULL;
        rq.resources = (const char *const *)op->names;
        rq.n_resources = op->n_names;
        break;
    case FLD_KIND_REENTRANT:
        rq.join = op->lock_id[0] ? op->lock_id : NULL;
        break;
    default:
        break;
    }
    int rc = lockcore_acquire_call_async(c, &rq, &call, on_done, j);
    if (rc != 0) {
        struct fencehttp_response r = {0};
        fld_api_result(op, rc, NULL, lockcore_errmsg(c), NULL, 0, NULL, &r);
        answer(j, &r);
        return -1;
    }
    return 0;
}

/* An acquisition's or a campaign's options of its own. */
static void call_of(struct loop *e, const struct job *j, struct lockcore_call *call)
{
    const struct fld_op *op = &j->op;
    lockcore_call_init(e->c, call);
    call->ttl_ms = op->ttl_ms;
    call->wait_ms = op->wait_ms;
    /* One attempt without a wait; with one, attempts until it runs out. */
    call->retry_count = op->wait_ms == 0 ? 0 : -1;
    call->wait_mode = op->wait_mode;
    call->owner = j->client[0] ? j->client : NULL;
}

static int start_campaign(struct loop *e, struct job *j)
{
    struct lockcore_call call;
    call_of(e, j, &call);
    int rc = lockcore_campaign_async(e->c, j->op.resource, j->op.value, &call, on_done, j);
    if (rc != 0) {
        struct fencehttp_response r = {0};
        fld_api_result(&j->op, rc, NULL, lockcore_errmsg(e->c), NULL, 0, NULL, &r);
        answer(j, &r);
        return -1;
    }
    return 0;
}

/* How long a reading without a wait may take to come: a majority that
 * answers, and a handoff's reservation (two request timeouts). */
#define LEADER_READ_MS 2000

static void on_leader(lockcore_client *c, int rc, const struct lockcore_leader *l, void *arg);

/* Read who leads (after NULL), or wait up to wait_ms for a reading that
 * differs from after. */
static int start_leader(struct loop *e, struct job *j, const struct lockcore_leader *after, uint64_t wait_ms)
{
    int rc =
        lockcore_observe_async(e->c, j->op.resource, after, wait_ms ? wait_ms : LEADER_READ_MS, on_leader, j);
    if (rc != 0) {
        struct fencehttp_response r = {0};
        fld_api_leader(&j->op, rc, NULL, 0, NULL, &r);
        answer(j, &r);
        return -1;
    }
    return 0;
}

/* A reading came: the answer, or (a long poll whose first reading is what
 * the caller already has) the wait for the next one. */
static void on_leader(lockcore_client *c, int rc, const struct lockcore_leader *l, void *arg)
{
    (void)c;
    struct job *j = arg;
    struct loop *e = j->e;
    int orphan = j->conn == NULL; /* answered already: hung up, or the server stops */
    /* News for the caller: a reading that differs from what it has, and
     * not an older leader than the one it has (a reading of keys that a
     * late lock step left on a majority; docs/election.md): the caller's
     * epochs never go back. */
    int older = rc == 0 && l->held && j->op.after_epoch != 0 && l->epoch < j->op.after_epoch;
    int news = rc == 0 && !older && fld_api_leader_changed(&j->op, l);
    if (!orphan && rc == 0 && j->op.has_after && !news) {
        uint64_t spent = now_ms() - j->t0_ms;
        j->leader = *l;
        if (older) { /* wait for a change of what the caller has */
            memset(&j->leader, 0, sizeof(j->leader));
            j->leader.held = 1;
            j->leader.epoch = j->op.after_epoch;
            if (j->op.has_after_value)
                snprintf(j->leader.value, sizeof(j->leader.value), "%s", j->op.after_value);
        }
        if (spent < j->op.wait_ms) {
            j->second = 1;
            if (lockcore_observe_async(e->c, j->op.resource, &j->leader, j->op.wait_ms - spent, on_leader,
                                       j) == 0)
                return;
        }
        rc = -ETIMEDOUT;
    }
    unwatch(e, j);
    fld_metrics_timed(FLD_T_LEADER, rc == 0 || rc == -ETIMEDOUT, secs_since(j->t0_ms));
    int changed = news;
    struct fencehttp_response r = {0};
    fld_api_leader(&j->op, rc, l, changed, atomic_load(&e->eng->owners), &r);
    answer(j, &r);
    e->running--;
    if (orphan)
        e->orphans--;
    job_free(j);
}

static int start_extend_release(struct loop *e, struct job *j)
{
    lockcore_client *c = e->c;
    struct lockcore_lock lock;
    int rc = lockcore_lock_from_id(c, j->op.resource, j->op.lock_id, &lock);
    if (rc == 0) {
        lock.flags |= fld_kind_flag(j->op.kind);
        switch (j->op.route) {
        case FLD_ROUTE_EXTEND:
            rc = lockcore_extend_async(c, &lock, j->op.ttl_ms, on_done, j);
            break;
        case FLD_ROUTE_PROCLAIM:
            rc = lockcore_proclaim_async(c, &lock, j->op.value, j->op.ttl_ms, on_done, j);
            break;
        case FLD_ROUTE_RESIGN:
            rc = lockcore_resign_async(c, &lock, on_done, j);
            break;
        default:
            rc = lockcore_release_async(c, &lock, on_done, j);
            break;
        }
    }
    if (rc != 0) {
        struct fencehttp_response r = {0};
        fld_api_result(&j->op, rc, NULL, lockcore_errmsg(c), NULL, 0, NULL, &r);
        answer(j, &r);
        return -1;
    }
    return 0;
}

/* ---- reads: status, health and metrics, on the loop ---- */

/* Each read has arrays of its own (freed with the job): what lockcore
 * fills until the read's callback. */
static int job_arrays(struct loop *e, struct job *j, unsigned permits)
{
    if ((j->st = calloc(e->nodes, sizeof(*j->st))) == NULL ||
        (permits > 0 && (j->ps = calloc(permits, sizeof(*j->ps))) == NULL)) {
        answer_error(j, 500, "internal", "out of memory");
        return -1;
    }
    return 0;
}

static unsigned status_flag(const struct fld_op *op)
{
    if (op->route == FLD_ROUTE_ACQUIRE) /* a refused acquisition's kind */
        return op->kind == FLD_KIND_REENTRANT                            ? LOCKCORE_LOCK_REENTRANT
               : op->kind == FLD_KIND_READ || op->kind == FLD_KIND_WRITE ? LOCKCORE_LOCK_READ
                                                                         : 0;
    return op->status_kind == 'r' ? LOCKCORE_LOCK_READ : op->status_kind == 'e' ? LOCKCORE_LOCK_REENTRANT : 0;
}

/* A refused acquisition's holder was read: its answer. */
static void on_holder(lockcore_client *c, int rc, const struct lockcore_lock *lock, void *arg)
{
    (void)c, (void)lock;
    struct job *j = arg;
    struct loop *e = j->e;
    struct fencehttp_response r = {0};
    fld_api_result(&j->op, j->rc, &j->lock, j->errmsg, rc > 0 ? j->st : NULL, rc > 0 ? rc : 0,
                   atomic_load(&e->eng->owners), &r);
    answer(j, &r);
    e->running--;
    job_free(j);
}

/* Name the holder of a refused acquisition: a status read. Returns 0
 * (the read's callback answers) or -1 (not started: answer without). */
static int read_holder(struct loop *e, struct job *j)
{
    if ((j->st = calloc(e->nodes, sizeof(*j->st))) == NULL)
        return -1;
    return lockcore_status_async(e->c, j->op.resource, status_flag(&j->op), j->st, e->nodes, on_holder, j) ==
                   0
               ? 0
               : -1;
}

static void on_status(lockcore_client *c, int rc, const struct lockcore_lock *lock, void *arg)
{
    (void)lock;
    struct job *j = arg;
    struct loop *e = j->e;
    fld_metrics_timed(FLD_T_STATUS, rc >= 0, secs_since(j->t0_ms));
    int sem = j->op.status_kind == 's';
    int n = !sem && rc > 0 ? rc : 0, np = sem && rc >= 0 ? (int)j->op.permits : 0;
    struct fencehttp_response r = {0};
    fld_api_status(&j->op, rc, j->st, n, j->ps, np, e->quorum, rc < 0 ? lockcore_errmsg(c) : NULL,
                   atomic_load(&e->eng->owners), &r);
    answer(j, &r);
    e->running--;
    job_free(j);
}

static int start_status(struct loop *e, struct job *j)
{
    int sem = j->op.status_kind == 's';
    if (job_arrays(e, j, sem ? j->op.permits : 0) != 0)
        return -1;
    int rc =
        sem ? lockcore_sem_status_async(e->c, j->op.resource, j->op.permits, j->ps, j->op.permits, on_status,
                                        j)
            : lockcore_status_async(e->c, j->op.resource, status_flag(&j->op), j->st, e->nodes, on_status, j);
    if (rc != 0) {
        struct fencehttp_response r = {0};
        fld_api_status(&j->op, rc, NULL, 0, NULL, 0, e->quorum, lockcore_errmsg(e->c), NULL, &r);
        answer(j, &r);
        return -1;
    }
    return 0;
}

/* A health probe or a metrics scrape: which nodes answer. */
static void on_probe(lockcore_client *c, int rc, const struct lockcore_lock *lock, void *arg)
{
    (void)c, (void)lock;
    struct job *j = arg;
    struct loop *e = j->e;
    int n = rc > 0 ? rc : 0, up = 0;
    for (int i = 0; i < n; i++) {
        fld_metrics_node((unsigned)i, j->st[i].node, j->st[i].reachable);
        up += j->st[i].reachable != 0;
    }
    struct fencehttp_response r = {0};
    if (j->op.route == FLD_ROUTE_METRICS) {
        size_t len = 0;
        char *text = fld_metrics_render(&len, 1);
        if (text == NULL) {
            fencehttp_error(&r, 500, "internal", "out of memory");
        } else {
            r.status = 200;
            r.body = text;
            r.body_len = len;
            r.content_type = "text/plain; version=0.0.4; charset=utf-8";
        }
    } else {
        json_t *nodes = json_array();
        for (int i = 0; nodes != NULL && i < n; i++) {
            json_t *o = json_pack("{s:s, s:b}", "node", j->st[i].node, "reachable", j->st[i].reachable);
            if (o != NULL && !j->st[i].reachable)
                json_object_set_new(o, "error", json_string(j->st[i].error));
            json_array_append_new(nodes, o);
        }
        int ok = (unsigned)up >= e->quorum;
        const char *status = !ok ? "no_quorum" : (unsigned)up == e->nodes ? "ok" : "degraded";
        json_t *o =
            json_pack("{s:s, s:i, s:i, s:i, s:o}", "status", status, "nodes", (int)e->nodes, "reachable", up,
                      "quorum", (int)e->quorum, "node", nodes ? nodes : json_array());
        if (o != NULL && !ok)
            json_object_set_new(o, "error", json_string("no_quorum"));
        fld_api_json(&r, ok ? 200 : 503, o);
    }
    answer(j, &r);
    e->running--;
    job_free(j);
}

static int start_probe(struct loop *e, struct job *j)
{
    if (job_arrays(e, j, 0) != 0)
        return -1;
    if (lockcore_status_async(e->c, "fencelockd:healthz", 0, j->st, e->nodes, on_probe, j) != 0) {
        answer_error(j, 500, "internal", lockcore_errmsg(e->c));
        return -1;
    }
    return 0;
}

/* Start a job taken from the queue (loop thread). */
static void start(struct loop *e, struct job *j, int stopping)
{
    if (stopping) {
        answer_error(j, 503, "shutting_down", "the server is stopping");
        job_free(j);
        return;
    }
    int fd = j->fd;
    j->fd = -1;
    j->e = e;
    j->t0_ms = now_ms();
    int rc;
    switch (j->op.route) {
    case FLD_ROUTE_ACQUIRE:
        rc = start_acquire(e, j);
        break;
    case FLD_ROUTE_CAMPAIGN:
        rc = start_campaign(e, j);
        break;
    case FLD_ROUTE_LEADER:
        rc = start_leader(e, j, NULL, j->op.has_after ? j->op.wait_ms : 0);
        break;
    case FLD_ROUTE_STATUS:
        rc = start_status(e, j);
        break;
    case FLD_ROUTE_HEALTH:
    case FLD_ROUTE_METRICS:
        rc = start_probe(e, j);
        break;
    default: /* extend, release, proclaim, resign: by the lock's id */
        rc = start_extend_release(e, j);
        break;
    }
    if (rc != 0) {
        job_free(j);
        return;
    }
    e->running++;
    int long_poll = (j->op.route == FLD_ROUTE_ACQUIRE || j->op.route == FLD_ROUTE_CAMPAIGN ||
                     j->op.route == FLD_ROUTE_LEADER) &&
                    j->op.wait_ms > 0;
    if (long_poll) {
        j->waiting = 1;
        fld_metrics_waiters(1);
        j->wnext = e->waiters;
        if (e->waiters)
            e->waiters->wprev = j;
        e->waiters = j;
        watch(e, j, fd);
    }
}

/* Requests whose client hung up while they waited. */
static void reap_hangups(struct loop *e)
{
    struct epoll_event ev[256];
    int cancel[256];
    int n = epoll_wait(e->epfd, ev, 256, 0);
    for (int i = 0; i < n; i++) {
        struct job *j = ev[i].data.ptr;
        unwatch(e, j);
        if (fencehttp_log_enabled(FENCEHTTP_LOG_DEBUG))
            fencehttp_log(FENCEHTTP_LOG_DEBUG, "a waiter for '%.200s' hung up", j->op.resource);
        answer_error(j, 499, "client_closed", "the client hung up");
        e->orphans++;
        cancel[i] = j->op.route == FLD_ROUTE_ACQUIRE || j->op.route == FLD_ROUTE_CAMPAIGN ? 1
                    : j->op.route == FLD_ROUTE_LEADER                                     ? 2
                                                                                          : 0;
    }
    /* Then cancel them: each one's callback runs inside lockcore_cancel
     * and frees its job (and may end others of the batch: only the
     * pointers are compared from here on). */
    for (int i = 0; i < n; i++) {
        if (cancel[i] == 1)
            lockcore_cancel(e->c, on_done, ev[i].data.ptr);
        else if (cancel[i] == 2)
            lockcore_observe_cancel(e->c, on_leader, ev[i].data.ptr);
    }
}

/* SIGTERM: tell every waiter now. */
static void tell_waiters(struct loop *e)
{
    while (e->waiters != NULL) {
        struct job *j = e->waiters;
        unwatch(e, j);
        answer_error(j, 503, "shutting_down", "the server is stopping; try another instance or again later");
        e->orphans++;
    }
}

static struct job *take_queue(struct loop *e, int *stopping)
{
    pthread_mutex_lock(&e->mu);
    struct job *q = e->queue_head;
    e->queue_head = e->queue_tail = NULL;
    *stopping = e->stopping;
    pthread_mutex_unlock(&e->mu);
    return q;
}

static void *loop_main(void *arg)
{
    struct loop *e = arg;
    struct pollfd fds[2 + LOCKCORE_POLLFDS_MAX];
    uint64_t stop_deadline = 0;
    int told = 0;
    for (;;) {
        int stopping = 0;
        struct job *q = take_queue(e, &stopping);
        while (q != NULL) {
            struct job *next = q->next;
            start(e, q, stopping);
            q = next;
        }
        if (stopping && !told) {
            told = 1;
            tell_waiters(e);
            stop_deadline = now_ms() + (uint64_t)e->drain_ms;
        }
        /* Stop once only acquisitions nobody waits for are left: freeing
         * the client rolls them back. */
        if (stopping && (e->running == e->orphans || now_ms() >= stop_deadline))
            break;
        fds[0] = (struct pollfd){.fd = e->efd, .events = POLLIN};
        fds[1] = (struct pollfd){.fd = e->epfd, .events = POLLIN};
        int timeout = 1000, t = -1;
        int n = lockcore_pollfds(e->c, fds + 2, LOCKCORE_POLLFDS_MAX, &t);
        size_t k = 2 + (size_t)(n > 0 ? n : 0);
        if (t >= 0 && t < timeout)
            timeout = t;
        if (stopping && timeout > 50)
            timeout = 50;
        if (poll(fds, k, timeout) < 0 && errno != EINTR) {
            fencehttp_log(FENCEHTTP_LOG_ERROR, "poll: %s", strerror(errno));
            continue;
        }
        if (fds[0].revents & POLLIN) {
            uint64_t v;
            if (read(e->efd, &v, sizeof(v)) < 0 && errno != EAGAIN)
                fencehttp_log(FENCEHTTP_LOG_WARN, "eventfd: %s", strerror(errno));
        }
        if (fds[1].revents & POLLIN)
            reap_hangups(e);
        lockcore_process(e->c, fds + 2, k - 2);
    }
    /* Cancel what is left: the callbacks answer 503 or release. */
    lockcore_client_free(e->c);
    e->c = NULL;
    pthread_mutex_lock(&e->mu);
    e->loop_done = 1;
    pthread_cond_broadcast(&e->done_cv);
    pthread_mutex_unlock(&e->mu);
    return NULL;
}

/* ---- the engine ---- */

/* The loop of a resource: by a hash of its name (a multi-resource lock's
 * first name); reads of nothing in particular go to loop 0. */
static struct loop *loop_of(fld_engine *e, const struct fld_op *op)
{
    if (e->n_loops == 1 || op->route == FLD_ROUTE_HEALTH || op->route == FLD_ROUTE_METRICS)
        return &e->loops[0];
    const char *r = op->kind == FLD_KIND_MULTI && op->n_names > 0 ? op->names[0] : op->resource;
    /* A permit's waiters wait in its semaphore's line: one loop for both. */
    size_t n = strlen(r);
    const char *perm = strstr(r, ":permit:");
    if (perm != NULL && perm[8] != '\0' && strspn(perm + 8, "0123456789") == strlen(perm + 8))
        n = (size_t)(perm - r);
    uint64_t h = 1469598103934665603ULL; /* FNV-1a */
    for (size_t i = 0; i < n; i++)
        h = (h ^ (unsigned char)r[i]) * 1099511628211ULL;
    return &e->loops[h % (uint64_t)e->n_loops];
}

void fld_engine_submit(fld_engine *eng, const struct fld_op *op, fencehttp_conn *conn, const char *client)
{
    struct job *j = calloc(1, sizeof(*j));
    if (j == NULL) {
        struct fencehttp_response r = {0};
        fencehttp_error(&r, 500, "internal", "out of memory");
        fencehttp_answer_later(conn, &r);
        return;
    }
    struct loop *e = loop_of(eng, op);
    fld_op_copy(&j->op, op);
    j->conn = conn;
    j->e = e;
    j->fd = fencehttp_conn_fd(conn);
    snprintf(j->client, sizeof(j->client), "%s", client ? client : "");
    pthread_mutex_lock(&e->mu);
    if (e->loop_done) {
        pthread_mutex_unlock(&e->mu);
        answer_error(j, 503, "shutting_down", "the server is stopping");
        job_free(j);
        return;
    }
    push_locked(&e->queue_head, &e->queue_tail, j);
    pthread_mutex_unlock(&e->mu);
    uint64_t one = 1;
    if (write(e->efd, &one, sizeof(one)) < 0)
        fencehttp_log(FENCEHTTP_LOG_WARN, "eventfd: %s", strerror(errno));
}

void fld_engine_set_owners(fld_engine *e, const struct fld_owners *owners)
{
    if (e != NULL)
        atomic_store(&e->owners, owners);
}

unsigned fld_engine_nodes(const fld_engine *e)
{
    return e ? e->nodes : 0;
}

static int loop_start(fld_engine *eng, struct loop *e, const struct fld_engine_options *o, char *errbuf,
                      size_t errcap)
{
    e->eng = eng;
    e->o = *o;
    e->efd = e->epfd = -1;
    pthread_mutex_init(&e->mu, NULL);
    pthread_cond_init(&e->done_cv, NULL);
    int rc;
    if ((rc = client_new(e, &e->c, errbuf, errcap)) != 0)
        return rc;
    e->nodes = lockcore_nodes(e->c);
    e->quorum = lockcore_quorum(e->c);
    e->efd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    e->epfd = epoll_create1(EPOLL_CLOEXEC);
    if (e->efd < 0 || e->epfd < 0) {
        snprintf(errbuf, errcap, "eventfd/epoll: %s", strerror(errno));
        return -errno;
    }
    if ((rc = -pthread_create(&e->loop_thread, NULL, loop_main, e)) != 0) {
        snprintf(errbuf, errcap, "cannot start a thread");
        return rc;
    }
    e->loop_started = 1;
    return 0;
}

int fld_engine_start(const struct fld_engine_options *o, fld_engine **out, char *errbuf, size_t errcap)
{
    if (o == NULL || o->base == NULL || out == NULL || o->loops < 1 || o->loops > FLD_LOOPS_MAX) {
        snprintf(errbuf, errcap, "fld_engine_start: bad options (loops 1..%d)", FLD_LOOPS_MAX);
        return -EINVAL;
    }
    fld_engine *e = calloc(1, sizeof(*e));
    if (e == NULL || (e->loops = calloc((size_t)o->loops, sizeof(*e->loops))) == NULL) {
        free(e);
        return -ENOMEM;
    }
    atomic_init(&e->owners, NULL);
    int rc = 0;
    for (int i = 0; i < o->loops && rc == 0; i++) {
        e->n_loops = i + 1;
        rc = loop_start(e, &e->loops[i], o, errbuf, errcap);
    }
    if (rc != 0) {
        fld_engine_free(e);
        return rc;
    }
    e->nodes = e->loops[0].nodes;
    e->quorum = e->loops[0].quorum;
    *out = e;
    return 0;
}

static void loop_shutdown(struct loop *e, int drain_ms)
{
    pthread_mutex_lock(&e->mu);
    if (!e->stopping) {
        e->stopping = 1;
        e->drain_ms = drain_ms;
    }
    pthread_mutex_unlock(&e->mu);
    uint64_t one = 1;
    if (e->loop_started && write(e->efd, &one, sizeof(one)) < 0)
        fencehttp_log(FENCEHTTP_LOG_WARN, "eventfd: %s", strerror(errno));
}

static void loop_join(struct loop *e)
{
    if (e->loop_started) {
        pthread_join(e->loop_thread, NULL);
        e->loop_started = 0;
    }
    pthread_mutex_lock(&e->mu);
    e->loop_done = 1;
    pthread_mutex_unlock(&e->mu);
    /* Jobs queued between the loop's last look and loop_done. */
    struct job *q = e->queue_head;
    e->queue_head = e->queue_tail = NULL;
    while (q != NULL) {
        struct job *next = q->next;
        answer_error(q, 503, "shutting_down", "the server is stopping");
        job_free(q);
        q = next;
    }
}

void fld_engine_shutdown(fld_engine *e, int drain_ms)
{
    if (e == NULL)
        return;
    /* Every loop is told first, so they drain together. */
    for (int i = 0; i < e->n_loops; i++)
        loop_shutdown(&e->loops[i], drain_ms);
    for (int i = 0; i < e->n_loops; i++)
        loop_join(&e->loops[i]);
}

void fld_engine_free(fld_engine *e)
{
    if (e == NULL)
        return;
    fld_engine_shutdown(e, 0);
    for (int i = 0; i < e->n_loops; i++) {
        struct loop *l = &e->loops[i];
        lockcore_client_free(l->c);
        if (l->efd >= 0)
            close(l->efd);
        if (l->epfd >= 0)
            close(l->epfd);
        pthread_mutex_destroy(&l->mu);
        pthread_cond_destroy(&l->done_cv);
    }
    free(e->loops);
    free(e);
}
