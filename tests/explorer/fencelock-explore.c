/*
 * fencelock-explore: K client processes of every lock kind and wait mode
 * against N real redis-server nodes (AOF, appendfsync always), each client
 * reaching each node through a fault proxy of its own, while faults are
 * injected per client link and per node on a seeded schedule, between and
 * during operations. Every client logs what it believes it holds; the
 * checker (check.c) then judges the whole history. See docs/reliability.md,
 * "The explorer".
 *
 *   fencelock-explore --seed S --nodes 3 --seconds 20
 *   fencelock-explore --self-test
 *   fencelock-explore --check LOG
 */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <inttypes.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <fencelock-testkit/testkit.h>

#include "explore.h"

const char *const ex_kind_names[EK_COUNT] = {"plain", "reentrant", "multi", "rw", "sem", "elect", "observe"};
const char *const ex_mode_names[EX_MODES] = {"poll", "notify", "fair"};

uint64_t ex_rnd(struct ex_rng *r)
{
    uint64_t z = (r->s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

long ex_between(struct ex_rng *r, long lo, long hi)
{
    if (hi <= lo)
        return lo;
    return lo + (long)(ex_rnd(r) % (uint64_t)(hi - lo + 1));
}

int ex_chance(struct ex_rng *r, double p)
{
    return (double)(ex_rnd(r) >> 11) / 9007199254740992.0 < p;
}

uint64_t ex_now_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000u + (uint64_t)ts.tv_nsec / 1000u;
}

/* ---- the faults ---- */

enum fault {
    F_DROP,          /* a link loses requests or replies for a while, then breaks */
    F_DELAY,         /* a link delays one direction */
    F_HOLD,          /* a link holds one direction past the client's TTL, then lets it through */
    F_RESET,         /* a link's connections are closed */
    F_RESET_LATE,    /* closed while a request is held: it reaches the node after the reconnect */
    F_RESTART,       /* a node killed -9 and restarted with its data */
    F_RESTART_EMPTY, /* a node killed, down for the max TTL, restarted without its data */
    F_NODE_PAUSE,    /* a node stopped (SIGSTOP) for a while */
    F_STOP,          /* a client process stopped past its TTL, then resumed */
    F_PARTITION,     /* a client cut from some nodes for one step (asked by the client) */
    F_KILL,          /* an election client killed -9, then started again */
    F_EARLY_EMPTY,   /* --unsafe: a node restarted without its data at once */
    F_COUNT,
};

static const struct {
    const char *name;
    int weight; /* how often the schedule draws it (partitions: per step) */
    const char *what;
} faults[F_COUNT] = {
    [F_DROP] = {"drop", 3, "a request or reply lost on one link, then its connection closed"},
    [F_DELAY] = {"delay", 2, "requests or replies on one link delayed 20-300 ms for up to 2 s"},
    [F_HOLD] = {"hold", 2, "requests (or replies) on one link held past the client's TTL, then let through"},
    [F_RESET] = {"reset", 2, "one link's connections closed"},
    [F_RESET_LATE] = {"reset-late", 2,
                      "one link closed while a request is held: it arrives after the reconnect"},
    [F_RESTART] = {"restart", 1, "a node killed -9 and restarted with its data (AOF, appendfsync always)"},
    [F_RESTART_EMPTY] = {"restart-empty", 1, "a node down for the max TTL, then restarted without its data"},
    [F_NODE_PAUSE] = {"node-pause", 1, "a node stopped (SIGSTOP) for 0.1 to 1.5 s"},
    [F_STOP] = {"stop", 2, "a client process stopped past its TTL, then resumed"},
    [F_PARTITION] = {"partition", 0, "a client cut from a minority (or a majority) for one step"},
    [F_KILL] = {"kill", 1, "an election client (candidate or observer) killed -9, then started again"},
    [F_EARLY_EMPTY] = {"restart-empty-early", 1,
                       "--unsafe: a node restarted without its data at once (outside Redlock's assumptions)"},
};

#define CLIENTS_MAX 64
/* The lock keys the explorer reads on the nodes: those of the exclusive
 * kinds (the reentrant ones, the plain locks and sets, the writer, the
 * election's). */
#define WATCHED (EX_REENTRANT_RES + EX_PLAIN_RES + 2)
#define NODES_MAX 7
#define EVENTS_MAX 1024

struct opts {
    unsigned long long seed;
    int nodes, seconds, clients, runs;
    int kind_on[EK_COUNT], mode_on[EX_MODES], fault_on[F_COUNT];
    double step_p;
    int same_ttl, unsafe, keep, details, verbose;
};

/* A client's link to a node: its proxy and the faults on it. Holds, drops
 * and delays are counted, so that a step's partition and a scheduled fault
 * on one link do not undo each other. */
struct link {
    struct fp_proxy *p;
    char url[64];
    int hold[2], drop[2], delay_ms[2];
    long long busy_until; /* a scheduled fault runs on it */
};

struct client {
    pid_t pid;
    enum ex_kind kind;
    int mode;
    uint64_t ttl_ms, short_ttl_ms;
    int fd; /* control connection, -1 until it says hello */
    int stopped, exited, status;
    int life; /* an election client: its process's deaths so far */
    /* the partition it asked for this step */
    unsigned cut_mask;
    char cut_mode[16];
};

/* Something the schedule does later: the end of a fault. */
struct event {
    long long at;
    enum fault f;
    int k, i, dir;
    long arg;
};

/* How a step's partition treats what the client sends meanwhile (see
 * client.c, step_cut). */
#define CUT_MODES 5
static const char *const cut_modes[CUT_MODES] = {"lost", "late", "noreply", "late-ttl", "reset-late"};

struct run {
    const struct opts *o;
    unsigned long long seed;
    struct ex_rng rng;
    int n, k;
    char dir[256], log[300], ctl[300];
    int logfd, listen_fd;
    struct rh_cluster *rc;
    struct link link[CLIENTS_MAX][NODES_MAX];
    struct client cl[CLIENTS_MAX];
    struct event ev[EVENTS_MAX];
    int nev;
    long long node_busy_until;
    int node_down[NODES_MAX];
    int node_paused[NODES_MAX];
    /* The watched resources as each node last showed them. */
    struct seen {
        char holder[48];
        long long n, pttl, at;
    } seen[NODES_MAX][WATCHED];
    long injected[F_COUNT];
    long cuts[CUT_MODES]; /* per mode of cut_modes */
    uint64_t t0_us;
    int enabled[F_COUNT];
};

static void note(struct run *r, enum fault f, int k, const char *nodes, const char *fmt, ...)
    __attribute__((format(printf, 5, 6)));
static void note(struct run *r, enum fault f, int k, const char *nodes, const char *fmt, ...)
{
    char detail[256], line[400];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(detail, sizeof(detail), fmt, ap);
    va_end(ap);
    int n = snprintf(line, sizeof(line), "F %" PRIu64 " %s %d %s %d %s\n", ex_now_us(), faults[f].name, k,
                     nodes, f == F_EARLY_EMPTY, detail);
    if (n > 0 && write(r->logfd, line, (size_t)n) != n)
        perror("explore: log");
    if (r->o->verbose)
        fprintf(stderr, "%8.3f s  %s", (double)(ex_now_us() - r->t0_us) / 1e6, line + 2);
}

static void link_apply(struct link *l)
{
    fp_set_hold(l->p, FP_UP, l->hold[0] > 0);
    fp_set_hold(l->p, FP_DOWN, l->hold[1] > 0);
    fp_set_drop(l->p, FP_UP, l->drop[0] > 0);
    fp_set_drop(l->p, FP_DOWN, l->drop[1] > 0);
    fp_set_delay(l->p, FP_UP, l->delay_ms[0]);
    fp_set_delay(l->p, FP_DOWN, l->delay_ms[1]);
}

static int is_election(enum ex_kind k)
{
    return k == EK_ELECT || k == EK_OBSERVE;
}

static void later(struct run *r, long long at, enum fault f, int k, int i, int dir, long arg)
{
    if (r->nev < EVENTS_MAX)
        r->ev[r->nev++] = (struct event){at, f, k, i, dir, arg};
}

/* ---- the schedule ---- */

static int pick_link(struct run *r, int *k, int *i)
{
    for (int tries = 0; tries < 8; tries++) {
        *k = (int)ex_between(&r->rng, 0, r->k - 1);
        *i = (int)ex_between(&r->rng, 0, r->n - 1);
        if (r->link[*k][*i].busy_until < hp_now_ms() && !r->cl[*k].exited)
            return 0;
    }
    return -1;
}

static const char *dir_name(int dir)
{
    return dir == 0 ? "requests" : "replies";
}

/* Draw a fault and inject it (a fault whose target is busy is skipped). */
static void inject(struct run *r)
{
    int total = 0;
    for (int f = 0; f < F_COUNT; f++)
        total += r->enabled[f] ? faults[f].weight : 0;
    if (total == 0)
        return;
    long w = ex_between(&r->rng, 0, total - 1);
    enum fault f = F_DROP;
    for (int g = 0; g < F_COUNT; g++) {
        int wt = r->enabled[g] ? faults[g].weight : 0;
        if (w < wt) {
            f = (enum fault)g;
            break;
        }
        w -= wt;
    }
    long long now = hp_now_ms();
    int k = 0, i = 0, dir = ex_chance(&r->rng, 0.7) ? 0 : 1;
    char nodes[16];
    switch (f) {
    case F_DROP:
    case F_DELAY:
    case F_HOLD:
    case F_RESET:
    case F_RESET_LATE: {
        if (pick_link(r, &k, &i) != 0)
            return;
        struct link *l = &r->link[k][i];
        snprintf(nodes, sizeof(nodes), "%d", i);
        long ms = 0;
        if (f == F_DROP) {
            ms = ex_between(&r->rng, 50, 600);
            l->drop[dir]++;
            note(r, f, k, nodes, "%s lost for %ld ms, then the connection closed", dir_name(dir), ms);
        } else if (f == F_DELAY) {
            ms = ex_between(&r->rng, 200, 2000);
            l->delay_ms[dir] = (int)ex_between(&r->rng, 20, 300);
            note(r, f, k, nodes, "%s delayed %d ms for %ld ms", dir_name(dir), l->delay_ms[dir], ms);
        } else if (f == F_HOLD) {
            ms = (long)r->cl[k].ttl_ms + ex_between(&r->rng, 100, 1000);
            l->hold[dir]++;
            note(r, f, k, nodes, "%s held %ld ms (past the TTL %" PRIu64 " ms), then let through",
                 dir_name(dir), ms, r->cl[k].ttl_ms);
        } else if (f == F_RESET) {
            fp_reset(l->p);
            note(r, f, k, nodes, "connections closed");
        } else {
            ms = ex_between(&r->rng, 30, 300);
            l->hold[0]++;
            note(r, f, k, nodes, "requests held %ld ms, then the connection closed with them in flight", ms);
        }
        link_apply(l);
        l->busy_until = now + ms + 10;
        if (ms > 0)
            later(r, now + ms, f, k, i, dir, 0);
        break;
    }
    case F_RESTART:
    case F_RESTART_EMPTY:
    case F_NODE_PAUSE:
    case F_EARLY_EMPTY:
        if (r->node_busy_until > now)
            return;
        i = (int)ex_between(&r->rng, 0, r->n - 1);
        snprintf(nodes, sizeof(nodes), "%d", i);
        if (f == F_RESTART) {
            note(r, f, -1, nodes, "node %d killed -9 and restarted with its data", i);
            if (rh_restart(r->rc, i, 1) != 0)
                fprintf(stderr, "explore: restart of node %d failed\n", i);
            r->node_busy_until = hp_now_ms() + 300;
        } else if (f == F_RESTART_EMPTY) {
            /* Down longer than any TTL: every lock it held has expired
             * everywhere before it comes back empty (Redlock's rule). */
            long ms = EX_MAX_TTL_MS + ex_between(&r->rng, 300, 800);
            note(r, f, -1, nodes, "node %d killed, down %ld ms, then restarted without its data", i, ms);
            rh_kill(r->rc, i);
            r->node_down[i] = 1;
            later(r, now + ms, f, -1, i, 0, 0);
            r->node_busy_until = now + ms + 300;
        } else if (f == F_NODE_PAUSE) {
            long ms = ex_between(&r->rng, 100, 1500);
            note(r, f, -1, nodes, "node %d stopped for %ld ms", i, ms);
            rh_pause(r->rc, i);
            r->node_paused[i] = 1;
            later(r, now + ms, f, -1, i, 0, 0);
            r->node_busy_until = now + ms + 300;
        } else {
            note(r, f, -1, nodes, "node %d restarted without its data at once, within the TTL", i);
            rh_restart(r->rc, i, 0);
            r->node_busy_until = hp_now_ms() + 300;
        }
        break;
    case F_STOP: {
        for (int tries = 0; tries < 8; tries++) {
            k = (int)ex_between(&r->rng, 0, r->k - 1);
            if (!r->cl[k].stopped && !r->cl[k].exited)
                break;
            k = -1;
        }
        if (k < 0)
            return;
        long ms = (long)r->cl[k].ttl_ms + ex_between(&r->rng, 100, 1000);
        note(r, f, k, "-", "client %d stopped for %ld ms (TTL %" PRIu64 " ms)", k, ms, r->cl[k].ttl_ms);
        kill(r->cl[k].pid, SIGSTOP);
        r->cl[k].stopped = 1;
        later(r, now + ms, f, k, -1, 0, 0);
        break;
    }
    case F_KILL: {
        /* A candidate or an observer dies at a random moment: in line,
         * leading, in the middle of a step. The run starts its process
         * again (one_run, when it sees the process gone), as a supervisor would. */
        k = -1;
        for (int tries = 0; tries < 8 && k < 0; tries++) {
            int j = (int)ex_between(&r->rng, 0, r->k - 1);
            if (is_election(r->cl[j].kind) && !r->cl[j].stopped && !r->cl[j].exited)
                k = j;
        }
        if (k < 0)
            return;
        note(r, f, k, "-", "client %d (%s, process %d) killed -9", k, ex_kind_names[r->cl[k].kind],
             r->cl[k].life);
        kill(r->cl[k].pid, SIGKILL);
        break;
    }
    default:
        return;
    }
    r->injected[f]++;
}

/* The end of a fault. */
static void finish(struct run *r, const struct event *e)
{
    struct link *l = e->k >= 0 && e->i >= 0 ? &r->link[e->k][e->i] : NULL;
    switch (e->f) {
    case F_DROP:
        /* What was lost leaves the stream out of step: close it, as a
         * network that loses a segment for good ends the connection. */
        fp_reset(l->p);
        l->drop[e->dir]--;
        link_apply(l);
        break;
    case F_DELAY:
        l->delay_ms[e->dir] = 0;
        link_apply(l);
        break;
    case F_HOLD:
        l->hold[e->dir]--;
        link_apply(l);
        break;
    case F_RESET_LATE:
        fp_reset_late(l->p, (int)ex_between(&r->rng, 100, (long)r->cl[e->k].ttl_ms));
        l->hold[0]--;
        link_apply(l);
        break;
    case F_PARTITION: /* a late-ttl cut ends */
        l->hold[0]--;
        link_apply(l);
        break;
    case F_RESTART_EMPTY:
        if (rh_restart(r->rc, e->i, 0) != 0)
            fprintf(stderr, "explore: restart of node %d failed\n", e->i);
        r->node_down[e->i] = 0;
        break;
    case F_NODE_PAUSE:
        rh_resume(r->rc, e->i);
        r->node_paused[e->i] = 0;
        break;
    case F_STOP:
        if (!r->cl[e->k].exited)
            kill(r->cl[e->k].pid, SIGCONT);
        r->cl[e->k].stopped = 0;
        break;
    default:
        break;
    }
}

/* The name of watched lock key q. */
static void watched_name(int q, char *out, size_t cap)
{
    if (q < EX_REENTRANT_RES)
        snprintf(out, cap, "re%d", q);
    else if (q < EX_REENTRANT_RES + EX_PLAIN_RES)
        snprintf(out, cap, "p%d", q - EX_REENTRANT_RES);
    else if (q == EX_REENTRANT_RES + EX_PLAIN_RES)
        snprintf(out, cap, "%s", EX_RW_RES);
    else
        snprintf(out, cap, "%s", EX_ELECT_RES);
}

/* Read the watched lock keys on every node that runs (the holder, the
 * reentrant hold count, the time left) and log a W line where one
 * changed: a new holder or count, or a time left that jumped (an
 * extension pushed it out or cut it). The checker shows these lines
 * around a violation. */
static void watch(struct run *r)
{
    static const char script[] =
        "return {redis.call('GET', KEYS[1]) or '', redis.call('HGET', KEYS[2], 'n') or '0', "
        "redis.call('PTTL', KEYS[1])}";
    for (int i = 0; i < r->n; i++) {
        if (r->node_down[i] || r->node_paused[i] || rh_pid(r->rc, i) <= 0)
            continue;
        for (int q = 0; q < WATCHED; q++) {
            char res[16];
            watched_name(q, res, sizeof(res));
            redisReply *x = rh_command(r->rc, i, "EVAL %s 2 %s {%s}:holds", script, res, res);
            if (x == NULL || x->type != REDIS_REPLY_ARRAY || x->elements != 3 ||
                x->element[0]->type != REDIS_REPLY_STRING || x->element[1]->type != REDIS_REPLY_STRING ||
                x->element[2]->type != REDIS_REPLY_INTEGER) {
                if (x != NULL)
                    freeReplyObject(x);
                continue;
            }
            long long now = hp_now_ms(), n = atoll(x->element[1]->str), pttl = x->element[2]->integer;
            const char *holder = x->element[0]->str;
            struct seen *s = &r->seen[i][q];
            long long expect = s->pttl - (now - s->at);
            if (strncmp(holder, s->holder, sizeof(s->holder) - 1) != 0 || n != s->n ||
                (pttl > 0 && (pttl > expect + 100 || pttl < expect - 100))) {
                char line[200];
                int len = snprintf(line, sizeof(line), "W %" PRIu64 " %d %s %s %lld %lld\n", ex_now_us(), i,
                                   res, holder[0] ? holder : "-", n, pttl);
                if (len > 0 && write(r->logfd, line, (size_t)len) != len)
                    perror("explore: log");
            }
            snprintf(s->holder, sizeof(s->holder), "%s", holder);
            s->n = n;
            s->pttl = pttl;
            s->at = now;
            freeReplyObject(x);
        }
    }
}

/* ---- the clients' requests ---- */

static void cut(struct run *r, int k, unsigned mask, const char *mode, const char *step, const char *hold)
{
    struct client *c = &r->cl[k];
    int m = 0;
    while (m < CUT_MODES && strcmp(cut_modes[m], mode) != 0)
        m++;
    if (m == CUT_MODES || c->cut_mask != 0)
        return;
    long long now = hp_now_ms();
    char nodes[32] = "";
    for (int i = 0; i < r->n; i++) {
        if (!(mask & (1u << i)))
            continue;
        size_t n = strlen(nodes);
        snprintf(nodes + n, sizeof(nodes) - n, "%s%d", n ? "," : "", i);
        r->link[k][i].hold[m == 2 ? 1 : 0]++;
        link_apply(&r->link[k][i]);
        /* reset-late: while the step goes on, the connection closes with
         * what it held in flight (F_RESET_LATE's end, arg 1: a step's). */
        if (m == 4)
            later(r, now + ex_between(&r->rng, 30, 250), F_RESET_LATE, k, i, 0, 1);
    }
    c->cut_mask = mask & ((1u << r->n) - 1);
    snprintf(c->cut_mode, sizeof(c->cut_mode), "%s", mode);
    r->cuts[m]++;
    r->injected[F_PARTITION]++;
    note(r, F_PARTITION, k, nodes[0] ? nodes : "-", "%s %s %s", mode, step, hold);
}

static void heal(struct run *r, int k)
{
    struct client *c = &r->cl[k];
    long long now = hp_now_ms();
    for (int i = 0; i < r->n; i++) {
        if (!(c->cut_mask & (1u << i)))
            continue;
        struct link *l = &r->link[k][i];
        if (strcmp(c->cut_mode, "lost") == 0) {
            fp_reset(l->p); /* the held requests go with the connection */
            l->hold[0]--;
        } else if (strcmp(c->cut_mode, "late") == 0) {
            l->hold[0]--;
        } else if (strcmp(c->cut_mode, "noreply") == 0) {
            fp_reset(l->p);
            l->hold[1]--;
        } else if (strcmp(c->cut_mode, "reset-late") == 0) {
            /* The step ended before its connection was closed: close it
             * now, with what it holds still on its way. */
            for (int e = 0; e < r->nev; e++)
                if (r->ev[e].f == F_RESET_LATE && r->ev[e].k == k && r->ev[e].i == i && r->ev[e].arg == 1)
                    r->ev[e].at = now;
        } else {
            later(r, now + (long long)c->ttl_ms + ex_between(&r->rng, 100, 500), F_PARTITION, k, i, 0, 0);
        }
        link_apply(l);
    }
    c->cut_mask = 0;
}

static void serve(struct run *r, int fd)
{
    char buf[256];
    ssize_t n = recv(fd, buf, sizeof(buf) - 1, 0);
    int k = -1;
    for (int j = 0; j < r->k; j++)
        if (r->cl[j].fd == fd)
            k = j;
    if (n <= 0) {
        close(fd);
        if (k >= 0) {
            if (r->cl[k].cut_mask)
                heal(r, k);
            r->cl[k].fd = -1;
        }
        return;
    }
    buf[n] = '\0';
    unsigned mask;
    int id;
    char mode[16], step[16], hold[32];
    if (k < 0 && sscanf(buf, "C %d", &id) == 1 && id >= 0 && id < r->k)
        r->cl[id].fd = fd;
    else if (k >= 0 && sscanf(buf, "P %u %15s %15s %31s", &mask, mode, step, hold) == 4)
        cut(r, k, mask, mode, step, hold);
    else if (k >= 0 && buf[0] == 'H')
        heal(r, k);
    if (send(fd, "K", 1, MSG_NOSIGNAL) < 0 && k >= 0)
        r->cl[k].fd = -1;
}

/* ---- one run ---- */

static int listen_ctl(struct run *r)
{
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    snprintf(r->ctl, sizeof(r->ctl), "%s/ctl", r->dir);
    if (strlen(r->ctl) >= sizeof(sa.sun_path))
        return -ENAMETOOLONG;
    memcpy(sa.sun_path, r->ctl, strlen(r->ctl) + 1);
    r->listen_fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
    if (r->listen_fd < 0 || bind(r->listen_fd, (struct sockaddr *)&sa, sizeof(sa)) < 0 ||
        listen(r->listen_fd, CLIENTS_MAX) < 0)
        return -errno;
    return 0;
}

static int spawn_client(struct run *r, int k, long long until_ms)
{
    struct client *c = &r->cl[k];
    char self[] = "/proc/self/exe", id[16], kind[16], mode[16], nodes[NODES_MAX * 64], ttl[24], ttl2[24],
         sp[24], seed[32], life[16], until[32], log[300];
    snprintf(id, sizeof(id), "%d", k);
    snprintf(kind, sizeof(kind), "%s", ex_kind_names[c->kind]);
    snprintf(mode, sizeof(mode), "%s", ex_mode_names[c->mode]);
    nodes[0] = '\0';
    for (int i = 0; i < r->n; i++) {
        size_t n = strlen(nodes);
        snprintf(nodes + n, sizeof(nodes) - n, "%s%s", i ? "," : "", r->link[k][i].url);
    }
    snprintf(ttl, sizeof(ttl), "%" PRIu64, c->ttl_ms);
    snprintf(ttl2, sizeof(ttl2), "%" PRIu64, c->short_ttl_ms);
    snprintf(sp, sizeof(sp), "%.3f", r->o->fault_on[F_PARTITION] ? r->o->step_p : 0.0);
    snprintf(seed, sizeof(seed), "%llu",
             r->seed * 1000003ull + (unsigned long long)k + 1 + (unsigned long long)c->life * 7919);
    snprintf(life, sizeof(life), "%d", c->life);
    snprintf(until, sizeof(until), "%lld", until_ms);
    /* A process started again has a log of its own: client-K.L.log, L its life. */
    snprintf(log, sizeof(log), "%s/client-%d%s%s.log", r->dir, k, c->life ? "." : "", c->life ? life : "");
    char *argv[] = {self,       "--client", "--id",   id,      "--kind", kind,     "--mode",
                    mode,       "--nodes",  nodes,    "--ttl", ttl,      "--ttl2", ttl2,
                    "--step-p", sp,         "--seed", seed,    "--life", life,     "--until",
                    until,      "--log",    r->log,   "--ctl", r->ctl,   NULL};
    pid_t pid = hp_spawn(argv, NULL, log);
    if (pid < 0)
        return (int)pid;
    c->pid = pid;
    return 0;
}

/* Everything a run holds; safe on a half-set-up run. */
static void run_free(struct run *r, int keep)
{
    for (int k = 0; k < r->k; k++) {
        if (r->cl[k].pid > 0 && !r->cl[k].exited)
            hp_signal(r->cl[k].pid, SIGKILL, 0);
        if (r->cl[k].fd >= 0)
            close(r->cl[k].fd);
        for (int i = 0; i < r->n; i++)
            fp_free(r->link[k][i].p);
    }
    rh_cluster_free(r->rc);
    if (r->listen_fd >= 0)
        close(r->listen_fd);
    if (r->logfd >= 0)
        close(r->logfd);
    if (!keep && r->dir[0])
        rh_rmtree(r->dir);
}

static void print_clients(const struct run *r)
{
    printf("  clients:");
    for (int k = 0; k < r->k; k++) {
        const struct client *c = &r->cl[k];
        printf("%s %d %s/%s %" PRIu64, k % 5 == 0 ? "\n   " : ",", k, ex_kind_names[c->kind],
               ex_mode_names[c->mode], c->ttl_ms);
        if (c->short_ttl_ms)
            printf("/%" PRIu64, c->short_ttl_ms);
        printf(" ms");
    }
    printf("\n");
}

static void print_checks(const struct ex_verdict *v);

/* The faults injected, the operations, what the log shows and what the
 * checks found: of one run, or of several added up. */
static void print_summary(const struct opts *o, const long *injected, const long *cuts,
                          const struct ex_verdict *v)
{
    printf("  faults:");
    for (int f = 0; f < F_COUNT; f++)
        if (injected[f] > 0 || o->fault_on[f])
            printf(" %s %ld,", faults[f].name, injected[f]);
    printf(" of which partitions");
    for (int m = 0; m < CUT_MODES; m++)
        printf(" %s %ld%s", cut_modes[m], cuts[m], m + 1 < CUT_MODES ? "," : "\n");
    printf("  operations (succeeded/all):");
    for (int k = 0; k < EK_COUNT; k++)
        if (o->kind_on[k])
            printf(" %s %ld/%ld,", ex_kind_names[k], v->ops[k][1], v->ops[k][0]);
    printf("\n");
    print_checks(v);
}

/* What the log shows, and what the checks found in it. */
static void print_checks(const struct ex_verdict *v)
{
    printf("  beliefs:");
    for (int b = 0; b < 7; b++)
        printf(" %s %ld,", ex_belief_names[b], v->beliefs[b]);
    printf(" observers' readings of a leader %ld\n", v->readings);
    printf("  checks:");
    for (int e = 0; e < EV_COUNT; e++)
        printf(" %s %ld;", ex_violation_names[e], v->violations[e]);
    printf(
        " outside Redlock's assumptions (not counted) %ld; read tokens below a write whose fence a node lost "
        "with its data (not counted) %ld\n",
        v->unsafe, v->fences_lost);
    static const char *const what[2] = {"without a reentrant hold", "with a reentrant hold"};
    for (int r = 1; r >= 0; r--) {
        long n = v->signs[r][0] + v->signs[r][1] + v->signs[r][2];
        if (n > 0)
            printf("  violations %s: %ld (a node let go of a valid hold%s: %ld; a TTL cut%s: %ld; neither: "
                   "%ld)\n",
                   what[r], n, r ? ", hold counts drifted apart" : "", v->signs[r][1],
                   r ? ", an extension shortened a hold" : "", v->signs[r][2], v->signs[r][0]);
    }
}

/* What several runs add up to. */
struct totals {
    long injected[F_COUNT], cuts[CUT_MODES];
    struct ex_verdict v;
    char failed[512]; /* the seeds of the runs that failed */
};

static void add_up(struct totals *t, const struct run *r, const struct ex_verdict *v)
{
    for (int f = 0; f < F_COUNT; f++)
        t->injected[f] += r->injected[f];
    for (int m = 0; m < CUT_MODES; m++)
        t->cuts[m] += r->cuts[m];
    for (int e = 0; e < EV_COUNT; e++)
        t->v.violations[e] += v->violations[e];
    for (int b = 0; b < 7; b++)
        t->v.beliefs[b] += v->beliefs[b];
    t->v.readings += v->readings;
    for (int k = 0; k < EK_COUNT; k++)
        for (int j = 0; j < 2; j++)
            t->v.ops[k][j] += v->ops[k][j];
    t->v.unsafe += v->unsafe;
    t->v.fences_lost += v->fences_lost;
    for (int r = 0; r < 2; r++)
        for (int g = 0; g < 3; g++)
            t->v.signs[r][g] += v->signs[r][g];
    t->v.faults += v->faults;
    t->v.lines += v->lines;
    t->v.bad_lines += v->bad_lines;
}

/* 0 pass, 1 fail, 2 inconclusive. */
static int one_run(const struct opts *o, unsigned long long seed, int index, struct totals *t)
{
    struct run *r = calloc(1, sizeof(*r));
    if (r == NULL)
        return 1;
    r->o = o;
    r->seed = seed;
    r->rng.s = seed;
    r->n = o->nodes;
    r->logfd = r->listen_fd = -1;
    struct ex_rng cfg = {seed ^ 0x5eed5eed5eedull};
    int kinds[EK_COUNT], nk = 0, modes[EX_MODES], nm = 0;
    for (int k = 0; k < EK_COUNT; k++)
        if (o->kind_on[k])
            kinds[nk++] = k;
    for (int m = 0; m < EX_MODES; m++)
        if (o->mode_on[m])
            modes[nm++] = m;
    r->k = o->clients > 0 ? o->clients : nk * nm;
    if (r->k > CLIENTS_MAX)
        r->k = CLIENTS_MAX;
    for (int f = 0; f < F_COUNT; f++)
        r->enabled[f] = o->fault_on[f] && f != F_PARTITION && (f != F_EARLY_EMPTY || o->unsafe);
    for (int k = 0; k < r->k; k++) {
        struct client *c = &r->cl[k];
        c->fd = -1;
        c->kind = (enum ex_kind)kinds[k % nk];
        c->mode = modes[(k / nk) % nm];
        if (c->kind == EK_REENTRANT) {
            c->ttl_ms = (uint64_t)ex_between(&cfg, 1500, EX_MAX_TTL_MS);
            c->short_ttl_ms = o->same_ttl ? 0 : (uint64_t)ex_between(&cfg, 250, 500);
        } else if (is_election(c->kind)) {
            c->ttl_ms = (uint64_t)ex_between(&cfg, 500, 1500);
        } else {
            c->ttl_ms = (uint64_t)ex_between(&cfg, 400, 1200);
        }
    }
    int rc = 1;
    struct ex_log *log = NULL;
    if (rh_mkdtemp("explore", r->dir, sizeof(r->dir)) != 0)
        goto out;
    snprintf(r->log, sizeof(r->log), "%s/log", r->dir);
    r->logfd = open(r->log, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
    struct rh_options ro;
    rh_options_init(&ro);
    ro.persistent = 1; /* a restart keeps what a node acknowledged */
    if (r->logfd < 0 || rh_cluster_start(r->n, &ro, &r->rc) != 0 || listen_ctl(r) != 0)
        goto out;
    for (int k = 0; k < r->k; k++)
        for (int i = 0; i < r->n; i++) {
            if (fp_new(rh_port(r->rc, i), &r->link[k][i].p) != 0)
                goto out;
            snprintf(r->link[k][i].url, sizeof(r->link[k][i].url), "127.0.0.1:%d", fp_port(r->link[k][i].p));
        }

    printf("run %d: seed %llu, %d nodes, %d clients, %d s%s%s\n", index, seed, r->n, r->k, o->seconds,
           o->same_ttl ? ", inner holds with the outer TTL" : "",
           o->unsafe ? ", UNSAFE schedules included" : "");
    print_clients(r);
    fflush(stdout);
    r->t0_us = ex_now_us();
    char head[128];
    int hn =
        snprintf(head, sizeof(head), "S %" PRIu64 " %llu %d %d %d\n", r->t0_us, seed, r->n, r->k, o->seconds);
    if (write(r->logfd, head, (size_t)hn) != hn)
        goto out;
    long long start = hp_now_ms(), end = start + (long long)o->seconds * 1000;
    /* Long enough for the slowest cycle to end after the deadline (an
     * acquisition that waits, nested re-entries, a keep-alive). */
    long long hard = end + 45000;
    for (int k = 0; k < r->k; k++)
        if (spawn_client(r, k, end) != 0)
            goto out;
    long long next = start + ex_between(&r->rng, 100, 400), next_watch = start;
    int stopping = 0, stragglers = 0;
    for (;;) {
        long long now = hp_now_ms();
        if (!stopping && now >= end) {
            /* No new faults; end those that need not wait (a node that
             * forgot its data still stays down for the max TTL). */
            stopping = 1;
            for (int e = 0; e < r->nev; e++)
                if (r->ev[e].f != F_RESTART_EMPTY)
                    r->ev[e].at = now;
        }
        int alive = 0;
        for (int k = 0; k < r->k; k++) {
            struct client *c = &r->cl[k];
            if (c->exited)
                continue;
            int st = 0;
            if (hp_wait(c->pid, 0, &st) != 0) {
                alive++;
                continue;
            }
            /* An election client that died (killed -9, by the schedule
             * or by itself, or exited at a step "die") before the end is
             * started again. */
            int died =
                (WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL) || (WIFEXITED(st) && WEXITSTATUS(st) == 0);
            if (is_election(c->kind) && died && !stopping && hp_now_ms() + 200 < end) {
                if (c->cut_mask)
                    heal(r, k);
                if (c->fd >= 0)
                    close(c->fd);
                c->fd = -1;
                c->stopped = 0;
                c->life++;
                if (spawn_client(r, k, end) == 0) {
                    alive++;
                    continue;
                }
                fprintf(stderr, "explore: client %d could not be started again\n", k);
                st = -1;
            }
            c->exited = 1;
            c->status = st;
        }
        if (stopping && alive == 0 && r->nev == 0)
            break;
        if (now >= hard) {
            for (int k = 0; k < r->k; k++)
                if (!r->cl[k].exited) {
                    fprintf(stderr, "explore: client %d did not end in time; killed\n", k);
                    hp_signal(r->cl[k].pid, SIGKILL, 0);
                    r->cl[k].exited = 1;
                    r->cl[k].status = -1;
                    stragglers++;
                }
            for (int e = 0; e < r->nev; e++)
                finish(r, &r->ev[e]);
            r->nev = 0;
            break;
        }
        for (int e = 0; e < r->nev;) {
            if (r->ev[e].at <= now) {
                struct event ev = r->ev[e];
                r->ev[e] = r->ev[--r->nev];
                finish(r, &ev);
            } else {
                e++;
            }
        }
        if (!stopping && now >= next) {
            inject(r);
            next = hp_now_ms() + ex_between(&r->rng, 100, 500);
        }
        if (now >= next_watch) {
            watch(r);
            next_watch = hp_now_ms() + 10;
        }
        long long wake = stopping ? now + 50 : next;
        if (next_watch < wake)
            wake = next_watch;
        for (int e = 0; e < r->nev; e++)
            if (r->ev[e].at < wake)
                wake = r->ev[e].at;
        long long wait = wake - hp_now_ms();
        struct pollfd pf[CLIENTS_MAX + 1];
        int np = 0;
        pf[np++] = (struct pollfd){.fd = r->listen_fd, .events = POLLIN};
        for (int k = 0; k < r->k; k++)
            if (r->cl[k].fd >= 0)
                pf[np++] = (struct pollfd){.fd = r->cl[k].fd, .events = POLLIN};
        /* Not yet identified connections are read in accept below. */
        int got = poll(pf, (nfds_t)np, wait < 0 ? 0 : wait > 50 ? 50 : (int)wait);
        if (got <= 0)
            continue;
        if (pf[0].revents & POLLIN) {
            int fd = accept4(r->listen_fd, NULL, NULL, SOCK_CLOEXEC);
            if (fd >= 0) {
                struct pollfd h = {.fd = fd, .events = POLLIN};
                if (poll(&h, 1, 2000) > 0)
                    serve(r, fd); /* its hello */
                else
                    close(fd);
            }
        }
        for (int j = 1; j < np; j++)
            if (pf[j].revents & (POLLIN | POLLHUP | POLLERR))
                serve(r, pf[j].fd);
    }
    int crashed = 0;
    for (int k = 0; k < r->k; k++) {
        int st = r->cl[k].status;
        if (st != -1 && is_election(r->cl[k].kind) && WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL)
            continue; /* died near the end: part of the schedule */
        if (st == -1 || !WIFEXITED(st) || WEXITSTATUS(st) != 0) {
            crashed++;
            if (st != -1)
                fprintf(stderr, "explore: client %d ended with status %d (log %s/client-%d.log)\n", k, st,
                        r->dir, k);
        }
    }
    if (ex_log_read(r->log, &log) != 0) {
        fprintf(stderr, "explore: cannot read %s\n", r->log);
        goto out;
    }
    struct ex_verdict v;
    struct ex_check_opts co = {.out = stdout, .details = o->details, .max_ttl_ms = EX_MAX_TTL_MS};
    long bad = ex_check(log, &co, &v);
    print_summary(o, r->injected, r->cuts, &v);
    add_up(t, r, &v);
    /* A run that granted nothing of some kind proves nothing about it. */
    int weak = 0;
    for (int k = 0; k < EK_COUNT; k++) {
        if (!o->kind_on[k])
            continue;
        long b = k == EK_PLAIN       ? v.beliefs[0]
                 : k == EK_REENTRANT ? v.beliefs[1]
                 : k == EK_MULTI     ? v.beliefs[2]
                 : k == EK_RW        ? v.beliefs[3] + v.beliefs[4]
                 : k == EK_SEM       ? v.beliefs[5]
                 : k == EK_ELECT     ? v.beliefs[6]
                                     : v.readings;
        if (b == 0) {
            printf("  no belief of kind %s: the run is too weak to judge it\n", ex_kind_names[k]);
            weak++;
        }
    }
    if (bad < 0) {
        printf("  verdict: the checker failed (%s)\n", strerror((int)-bad));
    } else if (bad > 0 || crashed || stragglers || weak || v.bad_lines) {
        printf(
            "  verdict: FAIL, seed %llu: %ld violations, %d clients crashed or hung, %ld bad log lines%s\n",
            seed, bad, crashed, v.bad_lines, weak ? ", a kind never granted" : "");
    } else if (v.unsafe > 0) {
        printf("  verdict: inconclusive, seed %llu: %ld violations under schedules outside Redlock's "
               "assumptions, none otherwise\n",
               seed, v.unsafe);
        rc = 2;
    } else {
        printf("  verdict: pass, seed %llu\n", seed);
        rc = 0;
    }
    if (rc == 1 || o->keep)
        printf("  run directory kept: %s (log: the shared log; client-K.log: each client's stderr; "
               "client-K.L.log: that of life L of an election client)\n",
               r->dir);
out:
    fflush(stdout);
    ex_log_free(log);
    run_free(r, rc == 1 || o->keep);
    free(r);
    return rc;
}

/* ---- options ---- */

static int parse_list(const char *arg, const char *const *names, int n, int *on, const char *what)
{
    for (int i = 0; i < n; i++)
        on[i] = 0;
    char buf[512];
    snprintf(buf, sizeof(buf), "%s", arg);
    for (char *save = NULL, *t = strtok_r(buf, ",", &save); t != NULL; t = strtok_r(NULL, ",", &save)) {
        int found = 0;
        for (int i = 0; i < n; i++)
            if (strcmp(t, "all") == 0 || strcmp(t, names[i]) == 0) {
                on[i] = 1;
                found = 1;
            }
        if (!found && strcmp(t, "none") != 0) {
            fprintf(stderr, "fencelock-explore: unknown %s \"%s\"\n", what, t);
            return -1;
        }
    }
    return 0;
}

static void usage(FILE *f)
{
    fprintf(f, "usage: fencelock-explore [--seed S] [--nodes 3|5] [--seconds T] [--clients K] [--runs R]\n"
               "                         [--kinds LIST] [--modes LIST] [--faults LIST] [--step-p P]\n"
               "                         [--same-ttl] [--unsafe] [--keep] [--details N] [-v]\n"
               "       fencelock-explore --self-test\n"
               "       fencelock-explore --check LOG\n"
               "kinds: plain,reentrant,multi,rw,sem,elect,observe (default all); modes: poll,notify,fair "
               "(default all)\n"
               "faults (default all; or none):\n");
    for (int i = 0; i < F_COUNT; i++)
        fprintf(f, "  %-20s %s\n", faults[i].name, faults[i].what);
}

static int client_mode(int argc, char **argv)
{
    struct ex_client_args a = {0};
    char *nodes = NULL;
    for (int i = 2; i + 1 < argc; i += 2) {
        const char *k = argv[i], *v = argv[i + 1];
        if (strcmp(k, "--id") == 0)
            a.id = atoi(v);
        else if (strcmp(k, "--kind") == 0)
            for (int j = 0; j < EK_COUNT; j++)
                a.kind = strcmp(v, ex_kind_names[j]) == 0 ? (enum ex_kind)j : a.kind;
        else if (strcmp(k, "--mode") == 0)
            for (int j = 0; j < EX_MODES; j++)
                a.mode = strcmp(v, ex_mode_names[j]) == 0 ? j : a.mode;
        else if (strcmp(k, "--nodes") == 0)
            nodes = strdup(v);
        else if (strcmp(k, "--ttl") == 0)
            a.ttl_ms = strtoull(v, NULL, 10);
        else if (strcmp(k, "--ttl2") == 0)
            a.short_ttl_ms = strtoull(v, NULL, 10);
        else if (strcmp(k, "--step-p") == 0)
            a.step_p = atof(v);
        else if (strcmp(k, "--seed") == 0)
            a.seed = strtoull(v, NULL, 10);
        else if (strcmp(k, "--life") == 0)
            a.life = atoi(v);
        else if (strcmp(k, "--until") == 0)
            a.until_ms = atoll(v);
        else if (strcmp(k, "--log") == 0)
            a.log = v;
        else if (strcmp(k, "--ctl") == 0)
            a.ctl = v;
    }
    char *urls[NODES_MAX];
    for (char *save = NULL, *t = nodes ? strtok_r(nodes, ",", &save) : NULL;
         t != NULL && a.n_nodes < NODES_MAX; t = strtok_r(NULL, ",", &save))
        urls[a.n_nodes++] = t;
    a.nodes = urls;
    int rc = a.n_nodes > 0 && a.log && a.ctl && a.ttl_ms > 0 ? ex_client_main(&a) : 64;
    free(nodes);
    return rc;
}

/* --check: judge a kept log again. */
static int check_log(const char *path, int details)
{
    struct ex_log *l = NULL;
    if (ex_log_read(path, &l) != 0) {
        fprintf(stderr, "fencelock-explore: cannot read %s\n", path);
        return 1;
    }
    struct ex_verdict v;
    struct ex_check_opts co = {.out = stdout, .details = details, .max_ttl_ms = EX_MAX_TTL_MS};
    long bad = ex_check(l, &co, &v);
    print_checks(&v);
    printf("%ld violations, %ld outside Redlock's assumptions, %ld lines (%ld bad)\n", bad, v.unsafe, v.lines,
           v.bad_lines);
    ex_log_free(l);
    return bad != 0 ? 1 : 0;
}

int main(int argc, char **argv)
{
    if (argc > 1 && strcmp(argv[1], "--client") == 0)
        return client_mode(argc, argv);
    /* The harness's own connection to a node that was just killed must
     * not end the explorer (hiredis writes with write()). */
    signal(SIGPIPE, SIG_IGN);
    struct opts o = {.seed = (unsigned long long)time(NULL),
                     .nodes = 3,
                     .seconds = 30,
                     .runs = 1,
                     .step_p = 0.3,
                     .details = 3};
    for (int k = 0; k < EK_COUNT; k++)
        o.kind_on[k] = 1;
    for (int m = 0; m < EX_MODES; m++)
        o.mode_on[m] = 1;
    for (int f = 0; f < F_COUNT; f++)
        o.fault_on[f] = f != F_EARLY_EMPTY;
    const char *fault_names[F_COUNT];
    for (int f = 0; f < F_COUNT; f++)
        fault_names[f] = faults[f].name;
    enum {
        O_SEED = 256,
        O_NODES,
        O_SECONDS,
        O_CLIENTS,
        O_RUNS,
        O_KINDS,
        O_MODES,
        O_FAULTS,
        O_STEP,
        O_SAME,
        O_UNSAFE,
        O_KEEP,
        O_DETAILS,
        O_SELF,
        O_CHECK
    };
    static const struct option longopts[] = {
        {"seed", required_argument, NULL, O_SEED},
        {"nodes", required_argument, NULL, O_NODES},
        {"seconds", required_argument, NULL, O_SECONDS},
        {"clients", required_argument, NULL, O_CLIENTS},
        {"runs", required_argument, NULL, O_RUNS},
        {"kinds", required_argument, NULL, O_KINDS},
        {"modes", required_argument, NULL, O_MODES},
        {"faults", required_argument, NULL, O_FAULTS},
        {"step-p", required_argument, NULL, O_STEP},
        {"same-ttl", no_argument, NULL, O_SAME},
        {"unsafe", no_argument, NULL, O_UNSAFE},
        {"keep", no_argument, NULL, O_KEEP},
        {"details", required_argument, NULL, O_DETAILS},
        {"self-test", no_argument, NULL, O_SELF},
        {"check", required_argument, NULL, O_CHECK},
        {"verbose", no_argument, NULL, 'v'},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    int c, self_test = 0;
    const char *check = NULL;
    while ((c = getopt_long(argc, argv, "vh", longopts, NULL)) != -1) {
        switch (c) {
        case O_SEED:
            o.seed = strtoull(optarg, NULL, 10);
            break;
        case O_NODES:
            o.nodes = atoi(optarg);
            break;
        case O_SECONDS:
            o.seconds = atoi(optarg);
            break;
        case O_CLIENTS:
            o.clients = atoi(optarg);
            break;
        case O_RUNS:
            o.runs = atoi(optarg);
            break;
        case O_KINDS:
            if (parse_list(optarg, ex_kind_names, EK_COUNT, o.kind_on, "kind") != 0)
                return 64;
            break;
        case O_MODES:
            if (parse_list(optarg, ex_mode_names, EX_MODES, o.mode_on, "mode") != 0)
                return 64;
            break;
        case O_FAULTS:
            if (parse_list(optarg, fault_names, F_COUNT, o.fault_on, "fault") != 0)
                return 64;
            break;
        case O_STEP:
            o.step_p = atof(optarg);
            break;
        case O_SAME:
            o.same_ttl = 1;
            break;
        case O_UNSAFE:
            o.unsafe = 1;
            o.fault_on[F_EARLY_EMPTY] = 1;
            break;
        case O_KEEP:
            o.keep = 1;
            break;
        case O_DETAILS:
            o.details = atoi(optarg);
            break;
        case O_SELF:
            self_test = 1;
            break;
        case O_CHECK:
            check = optarg;
            break;
        case 'v':
            o.verbose = 1;
            break;
        case 'h':
            usage(stdout);
            return 0;
        default:
            usage(stderr);
            return 64;
        }
    }
    if (self_test) {
        int fails = ex_self_test(stdout);
        printf("%d passed, %d failed\n", fails ? 0 : 1, fails ? 1 : 0);
        return fails ? 1 : 0;
    }
    if (check != NULL)
        return check_log(check, o.details);
    int nk = 0, nm = 0;
    for (int k = 0; k < EK_COUNT; k++)
        nk += o.kind_on[k];
    for (int m = 0; m < EX_MODES; m++)
        nm += o.mode_on[m];
    if (optind != argc || o.nodes < 1 || o.nodes > NODES_MAX || o.nodes % 2 == 0 || o.seconds < 1 ||
        o.clients < 0 || o.clients > CLIENTS_MAX || o.runs < 1 || nk == 0 || nm == 0 || o.step_p < 0 ||
        o.step_p > 1) {
        fprintf(stderr,
                "fencelock-explore: bad arguments (nodes: an odd number up to %d; clients up to %d)\n",
                NODES_MAX, CLIENTS_MAX);
        usage(stderr);
        return 64;
    }
    if (o.unsafe)
        printf("--unsafe: nodes are also restarted without their data within the TTL; violations near those "
               "restarts are named, not counted\n");
    int pass = 0, fail = 0, unsure = 0;
    long long t0 = hp_now_ms();
    struct totals *t = calloc(1, sizeof(*t));
    if (t == NULL)
        return 1;
    for (int i = 0; i < o.runs; i++) {
        unsigned long long seed = o.seed + (unsigned long long)i;
        int rc = one_run(&o, seed, i + 1, t);
        pass += rc == 0;
        fail += rc == 1;
        unsure += rc == 2;
        size_t n = strlen(t->failed);
        if (rc == 1 && n + 24 < sizeof(t->failed))
            snprintf(t->failed + n, sizeof(t->failed) - n, " %llu", seed);
    }
    if (o.runs > 1) {
        printf("all %d runs:\n", o.runs);
        print_summary(&o, t->injected, t->cuts, &t->v);
        if (fail)
            printf("  failed seeds:%s\n", t->failed);
    }
    free(t);
    printf("%d runs in %.1f s: %d passed, %d failed, %d inconclusive\n", o.runs,
           (double)(hp_now_ms() - t0) / 1000, pass, fail, unsure);
    printf("%d passed, %d failed\n", pass, fail);
    return fail ? 1 : unsure ? 2 : 0;
}
