/*
 * fencelock-campaign: K clients increment one counter in storage-guard
 * under a fencelock lock (read, add one, write), while faults are injected
 * on a seeded schedule; then the history is checked. Each fault runs once
 * with fencing (fenced reads and writes, storage-guard refusing stale
 * tokens) and once on the same schedule without (--no-fencing clients,
 * storage-guard --unfenced), which must lose updates for the faults that
 * bite, or the campaign proves nothing. See docs/reliability.md.
 */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <fencelock-testkit/testkit.h>

#include "campaign.h"

#define NODES 3
#define CLIENTS_MAX 16
#define FAKETIME_LIB "/usr/lib/x86_64-linux-gnu/faketime/libfaketime.so.1"

enum fault {
    F_CLIENT_PAUSE,
    F_WRITE_DELAY,
    F_NODE_RESTART,
    F_CLOCK_JUMP,
    F_SG_KILL,
    F_CLIENT_KILL,
    F_NODE_PAUSE,
    F_SLOW_NODE,
    F_PART_MINORITY,
    F_PART_MAJORITY,
    F_CLIENT_CLOCK,
    F_SG_PAUSE,
    F_NODE_RESTART_LATE,
    F_KEEPALIVE_WORK,
    F_MIXED,
    F_COUNT,
};

static const struct {
    const char *name;
    uint64_t ttl_ms; /* long enough for the fault to land inside one lease */
    int bites;       /* without fencing, this fault must lose updates */
    int no_double;   /* in both modes, this fault must not cause a double grant */
    const char *what;
} faults[F_COUNT] = {
    [F_CLIENT_PAUSE] = {"client-pause", 500, 1, 0, "holder stopped after its read for 2 TTL + 300 ms"},
    [F_WRITE_DELAY] = {"write-delay", 500, 1, 0, "holder's write held in the proxy for 2 TTL + 300 ms"},
    [F_NODE_RESTART] = {"node-restart", 2000, 1, 0,
                        "node 2 down while a holder gets nodes 0+1, then node 1 restarted without data"},
    [F_CLOCK_JUMP] = {"clock-jump", 5000, 1, 0,
                      "node 2 down while a holder gets nodes 0+1, then node 1's clock jumps +1 h"},
    [F_SG_KILL] = {"sg-kill9", 500, 0, 0, "storage-guard kill -9 and restart on its port"},
    [F_CLIENT_KILL] = {"client-kill9", 500, 0, 0, "holder killed -9 after its read, then restarted"},
    [F_NODE_PAUSE] = {"node-pause", 500, 0, 0, "one node stopped for 2 TTL"},
    [F_SLOW_NODE] = {"slow-node", 500, 0, 0, "one node's traffic delayed 20 ms each way for 3 TTL"},
    [F_PART_MINORITY] = {"partition-minority", 2000, 1, 0,
                         "one client cut from one node, its holder's other node restarted without data"},
    [F_PART_MAJORITY] = {"partition-majority", 500, 1, 0,
                         "a holder cut from two nodes while it works 2 TTL + 300 ms under a keep-alive"},
    [F_CLIENT_CLOCK] = {"client-clock", 500, 1, 0,
                        "a holder's wall clock jumps 1 h forward or back while it is stopped after its read"},
    [F_SG_PAUSE] = {"sg-pause", 500, 1, 0,
                    "storage-guard stopped for 2 TTL + 300 ms with a holder's write waiting in it"},
    [F_NODE_RESTART_LATE] = {"node-restart-delayed", 2000, 0, 1,
                             "as node-restart, but node 1 stays down for the TTL before it restarts empty"},
    [F_KEEPALIVE_WORK] =
        {"keepalive-work", 500, 0, 1,
         "a holder works 2 TTL + 300 ms under a keep-alive, uncut: partition-majority's control"},
    [F_MIXED] = {"mixed", 1500, 1, 0, "a seeded mix of all of the above but clock-jump"},
};

struct opts {
    unsigned long long seed;
    int clients;
    int duration_s;
    int runs;
    uint64_t ttl_ms; /* 0: the fault's own */
    int fault_on[F_COUNT];
    int modes; /* 1 fenced, 2 unfenced, 3 both */
    int require_loss;
    int keep;
    const char *sg_exe;
    const char *cli;       /* clients through the fencelock command */
    long restart_delay_ms; /* node-restart-delayed's downtime; < 0: TTL + 200 ms */
    int verbose;
};

/* ---- seeded schedule --------------------------------------------------- */

static uint64_t rng_state;

static uint64_t rnd(void)
{
    uint64_t z = (rng_state += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static long rnd_between(long lo, long hi)
{
    return lo + (long)(rnd() % (uint64_t)(hi - lo + 1));
}

/* ---- one run ----------------------------------------------------------- */

struct run {
    enum fault fault;
    int fencing;
    uint64_t ttl_ms;
    long long start_ms, end_ms;
    char dir[256];
    struct rh_cluster *cluster;
    /* Each client reaches each node through a proxy of its own, so that
     * one client can be cut from a node while the others still reach it. */
    struct fp_proxy *node_proxy[CLIENTS_MAX][NODES];
    char *urls[CLIENTS_MAX][NODES];
    struct tk_sg *sg;
    struct fp_proxy *sg_proxy[CLIENTS_MAX];
    pid_t pid[CLIENTS_MAX];
    int clients;
    long clock_offset_s;
    /* Clients under libfaketime (client-clock, mixed): each one's offset
     * file and current offset. */
    int client_faketime;
    long client_offset_s[CLIENTS_MAX];
    long long real_off_us; /* CLOCK_REALTIME µs - CLOCK_MONOTONIC ms * 1000 */
    /* Each injection that caught a holder: whom and when, to tell
     * afterwards whether its write came after another client's grant. */
    struct injection {
        enum fault f;
        int k;
        long long t;
    } inj[256];
    int n_inj;
    /* Partitions: the client cut, and when. */
    struct cut {
        int k, majority;
        long long t0, t1;
    } cuts[128];
    int n_cuts;
    int jumps_fwd, jumps_back;
    /* counts */
    int injected, missed;
    int kind_injected[F_COUNT];
};

struct result {
    int injected, missed;
    int kind_injected[F_COUNT], kind_bit[F_COUNT];
    int bit;               /* injections whose caught holder wrote after another grant */
    long late_writes;      /* writes answered after another client's grant */
    long ka_runs, ka_lost; /* keep-alives run in a work phase, and lost */
    long cuts[2];          /* partitions from a minority [0] and a majority [1] */
    long cut_grants[2];    /* grants of the cut client meanwhile */
    int jumps_fwd, jumps_back;
    long clock_grants; /* grants while the client's clock was off by over a minute */
    long fence_tokens; /* tokens not read off the client's clock (round two, seen + 1) */
    long ahead_tokens; /* tokens read off a clock that was ahead */
    long acks, refused, unknown, stale_reads, grants;
    long long final_value, accepted_writes;
    double per_min;
    long long longest_gap_ms;
    long double_grants;
    long long double_ms;
    int client_failures; /* clients that did not end well */
    /* violations */
    long stale_accepted, lost, bad_rmw, acks_lost, dup_tokens, order;
    char first[512];
};

static const struct opts *O;

static void say(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void say(const char *fmt, ...)
{
    if (!O->verbose)
        return;
    va_list ap;
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
}

static int spawn_client(struct run *r, int k)
{
    /* The running binary itself, even if a rebuild replaced the file. */
    char self[] = "/proc/self/exe";
    char id[16], port[16], ttl[32], until[32], fencing[4], hist[400], nodes[256], log[400];
    snprintf(id, sizeof(id), "%d", k);
    snprintf(port, sizeof(port), "%d", fp_port(r->sg_proxy[k]));
    snprintf(ttl, sizeof(ttl), "%" PRIu64, r->ttl_ms);
    snprintf(until, sizeof(until), "%lld", r->end_ms);
    snprintf(fencing, sizeof(fencing), "%d", r->fencing);
    snprintf(hist, sizeof(hist), "%s/history-%d", r->dir, k);
    snprintf(log, sizeof(log), "%s/client-%d.log", r->dir, k);
    snprintf(nodes, sizeof(nodes), "%s,%s,%s", r->urls[k][0], r->urls[k][1], r->urls[k][2]);
    char *argv[21] = {self,        "--client", "--id",    id,          "--sg-port", port,        "--ttl-ms",
                      ttl,         "--until",  until,     "--fencing", fencing,     "--history", hist,
                      "--run-dir", r->dir,     "--nodes", nodes,       NULL};
    if (O->cli != NULL) {
        argv[18] = "--cli";
        argv[19] = (char *)O->cli; /* argv[18..19] replace the NULL */
    }
    /* Under libfaketime the client's wall clock (and that of the fencelock
     * commands it runs: they inherit the environment) follows its offset
     * file; CLOCK_MONOTONIC, which lockcore times leases with, stays real. */
    char preload[160], ftfile[420], asan[600];
    char *env[6] = {NULL};
    if (r->client_faketime) {
        const char *old = getenv("ASAN_OPTIONS");
        snprintf(preload, sizeof(preload), "LD_PRELOAD=%s", FAKETIME_LIB);
        snprintf(ftfile, sizeof(ftfile), "FAKETIME_TIMESTAMP_FILE=%s/clock-%d", r->dir, k);
        /* A sanitized build wants its runtime first; libfaketime comes first. */
        snprintf(asan, sizeof(asan), "ASAN_OPTIONS=%s%sverify_asan_link_order=0", old ? old : "",
                 old && old[0] ? ":" : "");
        env[0] = preload;
        env[1] = ftfile;
        env[2] = "FAKETIME_CACHE_DURATION=1";
        env[3] = "FAKETIME_DONT_FAKE_MONOTONIC=1";
        env[4] = asan;
    }
    pid_t pid = hp_spawn(argv, env, log);
    if (pid < 0)
        return (int)pid;
    r->pid[k] = pid;
    return 0;
}

/* Set client k's wall clock to real time + offset_s (a rename, so the
 * client never reads half a file; it reads the file again about once a
 * second). */
static int set_client_clock(struct run *r, int k, long offset_s)
{
    char path[420], tmp[430];
    snprintf(path, sizeof(path), "%s/clock-%d", r->dir, k);
    snprintf(tmp, sizeof(tmp), "%s.tmp", path);
    FILE *f = fopen(tmp, "w");
    if (f == NULL)
        return -errno;
    fprintf(f, "%+ld\n", offset_s);
    if (fclose(f) != 0 || rename(tmp, path) != 0)
        return -errno;
    r->client_offset_s[k] = offset_s;
    return 0;
}

/* Cut client k from node i, or heal the cut: its proxy to that node holds
 * every byte both ways, as a partition does (TCP delivers them when it
 * heals); the other clients' proxies to the node are untouched. */
static void cut(struct run *r, int k, int i, int on)
{
    fp_set_hold(r->node_proxy[k][i], FP_BOTH, on);
}

/* Remember that client k was cut from a minority or a majority of the
 * nodes from t0 until now (call it before healing). */
static void note_cut(struct run *r, int k, int majority, long long t0)
{
    if (r->n_cuts < (int)(sizeof(r->cuts) / sizeof(r->cuts[0])))
        r->cuts[r->n_cuts++] = (struct cut){k, majority, t0, hp_now_ms()};
}

/* Is pid stopped (state T in /proc)? */
static int is_stopped(pid_t pid)
{
    char path[64], buf[256];
    snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
    FILE *f = fopen(path, "r");
    if (f == NULL)
        return 0;
    size_t n = fread(buf, 1, sizeof(buf) - 1, f);
    fclose(f);
    buf[n] = '\0';
    char *p = strrchr(buf, ')');
    return p != NULL && p[1] == ' ' && (p[2] == 'T' || p[2] == 't');
}

/* Ask client k (or any, k < 0) to stop right after its next read, and wait
 * until one did. With work_ms > 0, the client, once resumed, works that
 * long under a keep-alive before it writes. Returns its index, or -1 if
 * none did in time. */
static int catch_after_read_work(struct run *r, int k, long long timeout_ms, long work_ms)
{
    char path[400];
    if (k >= 0)
        snprintf(path, sizeof(path), "%s/stop-%d", r->dir, k);
    else
        snprintf(path, sizeof(path), "%s/stop-any", r->dir);
    /* Written whole before it appears under its name: a client that takes
     * it reads all of it. */
    char tmp[410];
    snprintf(tmp, sizeof(tmp), "%s.tmp", path);
    FILE *f = fopen(tmp, "w");
    if (f == NULL)
        return -1;
    if (work_ms > 0)
        fprintf(f, "work %ld\n", work_ms);
    if (fclose(f) != 0 || rename(tmp, path) != 0)
        return -1;
    long long deadline = hp_now_ms() + timeout_ms;
    while (hp_now_ms() < deadline) {
        for (int i = 0; i < r->clients; i++)
            if ((k < 0 || i == k) && r->pid[i] > 0 && is_stopped(r->pid[i]))
                return i;
        hp_sleep_ms(2);
    }
    if (unlink(path) != 0) {
        /* Taken just now: wait for that client to stop. */
        for (int t = 0; t < 500; t++) {
            for (int i = 0; i < r->clients; i++)
                if ((k < 0 || i == k) && r->pid[i] > 0 && is_stopped(r->pid[i]))
                    return i;
            hp_sleep_ms(2);
        }
    }
    return -1;
}

static int catch_after_read(struct run *r, int k, long long timeout_ms)
{
    return catch_after_read_work(r, k, timeout_ms, 0);
}

/* Remember that fault f caught client k now. */
static void caught(struct run *r, enum fault f, int k)
{
    if (r->n_inj < (int)(sizeof(r->inj) / sizeof(r->inj[0])))
        r->inj[r->n_inj++] = (struct injection){f, k, hp_now_ms()};
}

static void sleep_until(long long t_ms)
{
    long long left = t_ms - hp_now_ms();
    if (left > 0)
        hp_sleep_ms((long)left);
}

static void resume(struct run *r, int k)
{
    if (r->pid[k] > 0)
        kill(r->pid[k], SIGCONT);
}

/* How the holder of bare_majority() loses its lock on node 1. */
enum forget {
    FORGET_RESTART, /* node 1 restarts empty at once */
    FORGET_CLOCK,   /* node 1's clock jumps an hour ahead */
    FORGET_LATE,    /* node 1 restarts empty after the TTL (Redlock's answer) */
};

/* Whether nodes a and b hold the lock key under one id. */
static int same_holder(struct run *r, int a, int b)
{
    redisReply *x = rh_command(r->cluster, a, "GET %s", CC_RESOURCE);
    redisReply *y = rh_command(r->cluster, b, "GET %s", CC_RESOURCE);
    int same = x != NULL && y != NULL && x->type == REDIS_REPLY_STRING && y->type == REDIS_REPLY_STRING &&
               x->len == y->len && memcmp(x->str, y->str, x->len) == 0;
    if (x != NULL)
        freeReplyObject(x);
    if (y != NULL)
        freeReplyObject(y);
    return same;
}

/* Wait until another client holds nodes a and b, bounded by 2 TTL + 1 s:
 * a polling waiter gets there within its retry delay, a notified one (the
 * default) hears no release when a node forgets, and wakes on its timer
 * (the holder's TTL, or a third of the queue's TTL). */
static void await_other_holder(struct run *r, int a, int b)
{
    long long until = hp_now_ms() + (long long)r->ttl_ms * 2 + 1000;
    while (hp_now_ms() < until && !same_holder(r, a, b))
        hp_sleep_ms(10);
}

/* The holder sits on nodes 0 and 1 only (node 2 is down), then loses the
 * lock on node 1 without knowing: node 1 restarts empty, or its clock
 * jumps past the lease. Another client then gets nodes 1 and 2. With
 * FORGET_LATE node 1 stays down for the TTL first: by the time it is back
 * empty, the holder's key has expired everywhere, so nobody else could be
 * granted the lock while the holder's lease ran. */
static void bare_majority(struct run *r, enum fault f, enum forget how)
{
    rh_kill(r->cluster, 2);
    hp_sleep_ms((long)r->ttl_ms + 100); /* leases from before have ended */
    int k = catch_after_read(r, -1, (long long)r->ttl_ms * 2 + 3000);
    if (k < 0) {
        rh_restart(r->cluster, 2, 0);
        r->missed++;
        return;
    }
    caught(r, f, k);
    rh_restart(r->cluster, 2, 0);
    long long down = 0;
    if (how == FORGET_CLOCK) {
        r->clock_offset_s += 3600;
        rh_clock_offset(r->cluster, 1, r->clock_offset_s);
    } else {
        rh_kill(r->cluster, 1);
        down = hp_now_ms();
        if (how == FORGET_RESTART)
            rh_restart(r->cluster, 1, 0);
    }
    long long wake = hp_now_ms() + (long)r->ttl_ms / 3; /* another client gets nodes 1 and 2 */
    if (how == FORGET_LATE) {
        /* Node 1 comes back empty after the delay, before or after the
         * holder resumes: too early, and the holder's lease still runs. */
        long delay = O->restart_delay_ms >= 0 ? O->restart_delay_ms : (long)r->ttl_ms + 200;
        long long back = down + delay;
        if (back < wake) {
            sleep_until(back);
            rh_restart(r->cluster, 1, 0);
        }
        sleep_until(wake);
        resume(r, k);
        if (back >= wake) {
            sleep_until(back);
            rh_restart(r->cluster, 1, 0);
        }
    } else {
        sleep_until(wake);
        await_other_holder(r, 1, 2);
        resume(r, k);
    }
    r->injected++;
    r->kind_injected[f]++;
}

/* Client k is cut from one node (a minority: it keeps working on the
 * other two, and the campaign counts its grants meanwhile). Once its
 * grants can only sit on its two other nodes, it is caught holding the
 * lock and one of those two restarts without its data: its lock is left
 * on one node, and a client that reaches all three gets the two others. */
static void partition_minority(struct run *r, int k, int node, int which)
{
    long long t0 = hp_now_ms();
    cut(r, k, node, 1);
    hp_sleep_ms((long)r->ttl_ms + 100); /* k's leases from before have ended */
    int got = catch_after_read(r, k, (long long)r->ttl_ms * 2 + 3000);
    if (got < 0) {
        note_cut(r, k, 0, t0);
        cut(r, k, node, 0);
        r->missed++;
        return;
    }
    caught(r, F_PART_MINORITY, k);
    int other = (node + 1 + which) % NODES; /* one of the two k reaches */
    rh_kill(r->cluster, other);
    rh_restart(r->cluster, other, 0);
    await_other_holder(r, other, node); /* the restarted node, and the one k cannot reach */
    resume(r, k);
    hp_sleep_ms(200); /* k writes and releases before the cut heals */
    note_cut(r, k, 0, t0);
    cut(r, k, node, 0);
    r->injected++;
    r->kind_injected[F_PART_MINORITY]++;
}

static void inject(struct run *r, enum fault f)
{
    int k = (int)rnd_between(0, r->clients - 1);
    int node = (int)rnd_between(0, NODES - 1);
    int which = (int)rnd_between(0, 1);
    long pause_ms = 2 * (long)r->ttl_ms + 300;
    say("  %lld ms: %s\n", hp_now_ms() - r->start_ms, faults[f].name);
    switch (f) {
    case F_CLIENT_PAUSE:
        if (catch_after_read(r, k, pause_ms + 3000) < 0) {
            r->missed++;
            return;
        }
        caught(r, f, k);
        hp_sleep_ms(pause_ms);
        resume(r, k);
        break;
    case F_WRITE_DELAY:
        if (catch_after_read(r, k, pause_ms + 3000) < 0) {
            r->missed++;
            return;
        }
        caught(r, f, k);
        fp_set_delay(r->sg_proxy[k], FP_UP, (int)pause_ms);
        resume(r, k);
        hp_sleep_ms(pause_ms + 100);
        fp_set_delay(r->sg_proxy[k], FP_UP, 0);
        break;
    case F_CLIENT_KILL:
        if (catch_after_read(r, k, pause_ms + 3000) < 0) {
            r->missed++;
            return;
        }
        hp_signal(r->pid[k], SIGKILL, 0);
        r->pid[k] = 0;
        spawn_client(r, k);
        break;
    case F_SG_KILL:
        tk_sg_kill(r->sg);
        if (tk_sg_restart(r->sg) != 0)
            fprintf(stderr, "campaign: storage-guard did not restart\n");
        break;
    case F_NODE_PAUSE:
        rh_pause(r->cluster, node);
        hp_sleep_ms(2 * (long)r->ttl_ms);
        rh_resume(r->cluster, node);
        break;
    case F_SLOW_NODE:
        for (int c = 0; c < r->clients; c++)
            fp_set_delay(r->node_proxy[c][node], FP_BOTH, 20);
        hp_sleep_ms(3 * (long)r->ttl_ms);
        for (int c = 0; c < r->clients; c++)
            fp_set_delay(r->node_proxy[c][node], FP_BOTH, 0);
        break;
    case F_NODE_RESTART:
        bare_majority(r, f, FORGET_RESTART);
        return;
    case F_CLOCK_JUMP:
        bare_majority(r, f, FORGET_CLOCK);
        return;
    case F_NODE_RESTART_LATE:
        bare_majority(r, f, FORGET_LATE);
        return;
    case F_PART_MINORITY:
        partition_minority(r, k, node, which);
        return;
    case F_PART_MAJORITY: {
        /* The holder works past its TTL under a keep-alive. Healthy, the
         * keep-alive would keep the lock and nobody would be granted it;
         * cut from two nodes, its extensions fail, its lease runs out,
         * another client takes the lock, and then the holder writes. */
        if (catch_after_read_work(r, k, pause_ms + 3000, pause_ms) < 0) {
            r->missed++;
            return;
        }
        caught(r, f, k);
        long long t0 = hp_now_ms();
        cut(r, k, node, 1);
        cut(r, k, (node + 1) % NODES, 1);
        resume(r, k);
        hp_sleep_ms(pause_ms + 200); /* its work, then its write */
        note_cut(r, k, 1, t0);
        cut(r, k, node, 0);
        cut(r, k, (node + 1) % NODES, 0);
        break;
    }
    case F_KEEPALIVE_WORK:
        /* partition-majority without the cut: the keep-alive must keep
         * the lock through the work, so nobody else is granted it and the
         * write is on time. */
        if (catch_after_read_work(r, k, pause_ms + 3000, pause_ms) < 0) {
            r->missed++;
            return;
        }
        caught(r, f, k);
        resume(r, k);
        hp_sleep_ms(pause_ms + 200);
        break;
    case F_CLIENT_CLOCK: {
        /* Forward or back by an hour from real time, or back to real
         * time if it was off: the jumps alternate in direction. The jump
         * lands while the holder is stopped after its read; stopped past
         * its lease, it then writes late, and every proposal it makes
         * afterwards comes from the moved clock. */
        long to = r->client_offset_s[k] != 0 ? 0 : which ? 3600 : -3600;
        if (!r->client_faketime || catch_after_read(r, k, pause_ms + 3000) < 0) {
            r->missed++;
            return;
        }
        caught(r, f, k);
        if (to > r->client_offset_s[k])
            r->jumps_fwd++;
        else
            r->jumps_back++;
        set_client_clock(r, k, to);
        hp_sleep_ms(pause_ms); /* over a second: the client reads its clock file again */
        resume(r, k);
        break;
    }
    case F_SG_PAUSE:
        /* The holder's write reaches a stopped storage-guard and waits
         * there while its lease runs out and the next holder's fenced
         * read queues up behind it; storage-guard's worker threads then
         * take both at once, in either order. */
        if (catch_after_read(r, k, pause_ms + 3000) < 0) {
            r->missed++;
            return;
        }
        caught(r, f, k);
        tk_sg_pause(r->sg);
        resume(r, k);
        hp_sleep_ms(pause_ms);
        tk_sg_resume(r->sg);
        break;
    case F_MIXED:
    case F_COUNT:
        return;
    }
    r->injected++;
    r->kind_injected[f]++;
}

/* ---- the history ------------------------------------------------------- */

struct grant {
    int id;
    uint64_t token;
    long long t0, t1, until, end;
    long long wdone;  /* when its write was answered (or gave up); 0: no write */
    uint64_t wall_us; /* the client's wall clock at the grant; 0: not logged */
};

struct ack {
    int id;
    uint64_t token, rver, wver;
    long long value, ta;
};

struct history {
    struct grant *g;
    size_t ng, capg;
    struct ack *a;
    size_t na, capa;
    long refused, unknown, stale_reads;
    long ka_runs, ka_lost;
};

static int grow(void **p, size_t *cap, size_t n, size_t size)
{
    if (n < *cap)
        return 0;
    size_t nc = *cap ? *cap * 2 : 256;
    void *q = realloc(*p, nc * size);
    if (q == NULL)
        return -ENOMEM;
    *p = q;
    *cap = nc;
    return 0;
}

static int read_history(const char *path, struct history *h)
{
    FILE *f = fopen(path, "r");
    if (f == NULL)
        return -errno;
    char line[512];
    /* The open grant of this client, to close at its L line. */
    long open = -1;
    while (fgets(line, sizeof(line), f)) {
        int id;
        uint64_t tok, u1, u2;
        long long a, b, c, v;
        unsigned nodes;
        switch (line[0]) {
        case 'G':
            u1 = 0;
            if (sscanf(line, "G %d %" SCNu64 " %lld %lld %lld %u %" SCNu64, &id, &tok, &a, &b, &c, &nodes,
                       &u1) < 6)
                break;
            if (grow((void **)&h->g, &h->capg, h->ng, sizeof(*h->g)) != 0)
                goto nomem;
            h->g[h->ng] = (struct grant){id, tok, a, b, c, c, 0, u1};
            open = (long)h->ng++;
            break;
        case 'K': {
            /* The keep-alive of a work phase: its end state and the lease's
             * end as last extended. */
            int krc;
            unsigned ext;
            if (sscanf(line, "K %d %" SCNu64 " %d %u %lld", &id, &tok, &krc, &ext, &a) != 5)
                break;
            h->ka_runs++;
            if (krc != 0)
                h->ka_lost++;
            if (open >= 0 && a > h->g[open].until) {
                h->g[open].until = a;
                h->g[open].end = a;
            }
            break;
        }
        case 'L':
            if (open >= 0 && sscanf(line, "L %d %" SCNu64 " %lld", &id, &tok, &a) == 3 && a < h->g[open].end)
                h->g[open].end = a;
            open = -1;
            break;
        case 'A':
            if (sscanf(line, "A %d %" SCNu64 " %lld %" SCNu64 " %" SCNu64 " %lld %lld", &id, &tok, &v, &u1,
                       &u2, &a, &b) != 7)
                break;
            if (grow((void **)&h->a, &h->capa, h->na, sizeof(*h->a)) != 0)
                goto nomem;
            h->a[h->na++] = (struct ack){id, tok, u1, u2, v, b};
            if (open >= 0)
                h->g[open].wdone = b;
            break;
        case 'R':
            h->refused++;
            if (open >= 0 && sscanf(line, "R %d %" SCNu64 " %lld %lld", &id, &tok, &a, &b) == 4)
                h->g[open].wdone = b;
            break;
        case 'U':
            h->unknown++;
            if (open >= 0 && sscanf(line, "U %d %" SCNu64 " %lld %lld", &id, &tok, &a, &b) == 4)
                h->g[open].wdone = b;
            break;
        case 'S':
            h->stale_reads++;
            break;
        case 'B':
            open = -1; /* a restarted client: the killed one's lease ends by expiry */
            break;
        default:
            break;
        }
    }
    fclose(f);
    return 0;
nomem:
    fclose(f);
    return -ENOMEM;
}

static int cmp_ll(const void *x, const void *y)
{
    long long a = *(const long long *)x, b = *(const long long *)y;
    return (a > b) - (a < b);
}

static int cmp_u64(const void *x, const void *y)
{
    uint64_t a = *(const uint64_t *)x, b = *(const uint64_t *)y;
    return (a > b) - (a < b);
}

static void note(struct result *res, const char *what)
{
    if (res->first[0] == '\0')
        snprintf(res->first, sizeof(res->first), "%s", what);
}

/* Was g's write answered after another grant (t1s: every grant's t1,
 * sorted)? */
static int late(const struct grant *g, const long long *t1s, size_t n)
{
    if (g->wdone == 0)
        return 0;
    /* The first grant after g's own. */
    size_t lo = 0, hi = n;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (t1s[mid] <= g->t1)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo < n && t1s[lo] < g->wdone;
}

static void check(struct run *r, struct history *h, struct result *res)
{
    char msg[400];
    /* The final value, read unfenced. */
    struct hc_response resp = {0};
    if (hc_get(tk_sg_port(r->sg), "/v1/records/" CC_KEY, &resp) == 0 && resp.status == 200)
        res->final_value = json_integer_value(json_object_get(resp.json, "value"));
    hc_response_clear(&resp);

    struct tk_log log = {0};
    if (tk_log_fetch(tk_sg_port(r->sg), CC_RESOURCE, &log) != 0) {
        note(res, "could not read the audit log");
        res->acks_lost = 1;
        return;
    }
    for (size_t i = 0; i < log.n; i++)
        if (strcmp(log.entries[i].op, "write") == 0 && strcmp(log.entries[i].outcome, "accepted") == 0)
            res->accepted_writes++;

    /* No stale write accepted. */
    int n = tk_check_no_stale_write(&log, msg, sizeof(msg));
    if (n > 0) {
        res->stale_accepted = n;
        note(res, msg);
    }
    /* No lost update: every accepted write added one. */
    if (res->final_value != res->accepted_writes) {
        res->lost = llabs(res->accepted_writes - res->final_value);
        snprintf(msg, sizeof(msg), "lost update: %lld writes accepted, the counter reads %lld",
                 res->accepted_writes, res->final_value);
        note(res, msg);
    }
    /* Every acknowledged write was computed from the value its own read
     * returned: the version it wrote follows the version it read. */
    for (size_t i = 0; i < h->na; i++)
        if (h->a[i].wver != h->a[i].rver + 1) {
            if (res->bad_rmw++ == 0) {
                snprintf(msg, sizeof(msg),
                         "client %d read version %" PRIu64
                         " (value %lld) but its write became version %" PRIu64,
                         h->a[i].id, h->a[i].rver, h->a[i].value, h->a[i].wver);
                note(res, msg);
            }
        }
    /* No acknowledged write lost (across storage-guard kill -9). */
    struct tk_ack *acks = calloc(h->na + 1, sizeof(*acks));
    if (acks != NULL) {
        for (size_t i = 0; i < h->na; i++)
            acks[i] = (struct tk_ack){CC_KEY, h->a[i].wver, h->a[i].token};
        n = tk_check_no_ack_lost(&log, acks, h->na, msg, sizeof(msg));
        if (n > 0) {
            res->acks_lost = n;
            note(res, msg);
        }
        free(acks);
    }
    tk_log_clear(&log);

    if (r->fencing) {
        /* No token handed to two acquisitions. */
        uint64_t *t = calloc(h->ng + 1, sizeof(*t));
        if (t != NULL) {
            for (size_t i = 0; i < h->ng; i++)
                t[i] = h->g[i].token;
            qsort(t, h->ng, sizeof(*t), cmp_u64);
            for (size_t i = 1; i < h->ng; i++)
                if (t[i] == t[i - 1] && res->dup_tokens++ == 0) {
                    snprintf(msg, sizeof(msg), "token %" PRIu64 " granted twice", t[i]);
                    note(res, msg);
                }
            free(t);
        }
        /* Tokens increase in the real-time order of grants: a grant that
         * ended before another began has the smaller token. */
        for (size_t i = 0; i < h->ng; i++)
            for (size_t j = 0; j < h->ng; j++)
                if (h->g[i].t1 < h->g[j].t0 && h->g[i].token >= h->g[j].token && res->order++ == 0) {
                    snprintf(msg, sizeof(msg),
                             "grant of token %" PRIu64 " (client %d) ended before the grant of token %" PRIu64
                             " (client %d) began",
                             h->g[i].token, h->g[i].id, h->g[j].token, h->g[j].id);
                    note(res, msg);
                }
    }
    /* Double grants: two leases that overlap in time, each from its grant
     * to its release or its validity's end, whichever came first. Redlock
     * alone allows them under some faults; fencing makes them harmless. */
    for (size_t i = 0; i < h->ng; i++)
        for (size_t j = i + 1; j < h->ng; j++) {
            long long lo = h->g[i].t1 > h->g[j].t1 ? h->g[i].t1 : h->g[j].t1;
            long long hi = h->g[i].end < h->g[j].end ? h->g[i].end : h->g[j].end;
            if (hi > lo) {
                res->double_grants++;
                res->double_ms += hi - lo;
            }
        }
    /* Late writes: a write answered after another client was granted the
     * lock since its own grant. That is what every fault that bites must
     * bring about; with fencing such a write is refused once the newer
     * holder has read, without fencing it overwrites. Per injection that
     * caught a holder: did that holder's write come late ("bit")? */
    long long *t1s = calloc(h->ng + 1, sizeof(*t1s));
    if (t1s != NULL) {
        for (size_t i = 0; i < h->ng; i++)
            t1s[i] = h->g[i].t1;
        qsort(t1s, h->ng, sizeof(*t1s), cmp_ll);
        for (size_t i = 0; i < h->ng; i++)
            if (late(&h->g[i], t1s, h->ng))
                res->late_writes++;
        for (int j = 0; j < r->n_inj; j++) {
            /* The caught holder's grant: its last one before the catch. */
            const struct grant *g = NULL;
            for (size_t i = 0; i < h->ng; i++)
                if (h->g[i].id == r->inj[j].k && h->g[i].t1 <= r->inj[j].t &&
                    (g == NULL || h->g[i].t1 > g->t1))
                    g = &h->g[i];
            if (g != NULL && late(g, t1s, h->ng)) {
                res->bit++;
                res->kind_bit[r->inj[j].f]++;
            }
        }
        free(t1s);
    }
    /* A client cut from a minority of nodes keeps being granted the lock;
     * cut from a majority, it is not. */
    for (int j = 0; j < r->n_cuts; j++)
        for (size_t i = 0; i < h->ng; i++)
            if (h->g[i].id == r->cuts[j].k && h->g[i].t1 >= r->cuts[j].t0 && h->g[i].t1 <= r->cuts[j].t1)
                res->cut_grants[r->cuts[j].majority]++;
    for (int j = 0; j < r->n_cuts; j++)
        res->cuts[r->cuts[j].majority]++;
    /* Tokens and the clients' clocks (fenced): a grant made while its
     * client's clock was off by over a minute, a token that is not the
     * client's clock reading (a proposal that lost to the fences: round
     * two, or the largest fence seen + 1), and a token read off a clock
     * that was ahead. */
    if (r->fencing)
        for (size_t i = 0; i < h->ng; i++) {
            const struct grant *g = &h->g[i];
            if (g->wall_us == 0 || g->token == 0)
                continue;
            long long skew = (long long)g->wall_us - (g->t1 * 1000 + r->real_off_us);
            /* The proposal was made between the attempt's start and the
             * grant, by this clock (a fencelock process reads the same
             * offset file). */
            long long slack = (g->t1 - g->t0) * 1000 + 1000000;
            int own = llabs((long long)g->token - (long long)g->wall_us) <= slack;
            if (llabs(skew) > 60000000) {
                res->clock_grants++;
                if (own && skew > 0)
                    res->ahead_tokens++;
            }
            if (!own && g->token > g->wall_us)
                res->fence_tokens++;
        }
    res->ka_runs = h->ka_runs;
    res->ka_lost = h->ka_lost;
    res->jumps_fwd = r->jumps_fwd;
    res->jumps_back = r->jumps_back;
    /* Liveness: increments per minute, and the longest time without one. */
    long long *ta = calloc(h->na + 2, sizeof(*ta));
    if (ta != NULL) {
        size_t m = 0;
        ta[m++] = r->start_ms;
        for (size_t i = 0; i < h->na; i++)
            ta[m++] = h->a[i].ta;
        ta[m++] = r->end_ms;
        qsort(ta, m, sizeof(*ta), cmp_ll);
        for (size_t i = 1; i < m; i++)
            if (ta[i] - ta[i - 1] > res->longest_gap_ms)
                res->longest_gap_ms = ta[i] - ta[i - 1];
        free(ta);
    }
    res->acks = (long)h->na;
    res->grants = (long)h->ng;
    res->refused = h->refused;
    res->unknown = h->unknown;
    res->stale_reads = h->stale_reads;
    res->per_min = (double)h->na * 60000.0 / (double)(r->end_ms - r->start_ms);
}

static long violations(const struct result *res)
{
    return res->stale_accepted + res->lost + res->bad_rmw + res->acks_lost + res->dup_tokens + res->order;
}

static void run_free(struct run *r)
{
    for (int k = 0; k < CLIENTS_MAX; k++) {
        if (r->pid[k] > 0)
            hp_signal(r->pid[k], SIGKILL, 0);
        fp_free(r->sg_proxy[k]);
    }
    tk_sg_free(r->sg);
    for (int k = 0; k < CLIENTS_MAX; k++)
        for (int i = 0; i < NODES; i++) {
            fp_free(r->node_proxy[k][i]);
            free(r->urls[k][i]);
        }
    rh_cluster_free(r->cluster);
    if (r->dir[0] != '\0' && !O->keep)
        rh_rmtree(r->dir);
    else if (r->dir[0] != '\0')
        fprintf(stderr, "campaign: kept %s\n", r->dir);
}

static int run_one(enum fault fault, int fencing, unsigned long long seed, struct result *res)
{
    struct run r;
    memset(&r, 0, sizeof(r));
    memset(res, 0, sizeof(*res));
    r.fault = fault;
    r.fencing = fencing;
    r.clients = O->clients;
    r.ttl_ms = O->ttl_ms ? O->ttl_ms : faults[fault].ttl_ms;
    rng_state = seed;
    int rc = rh_mkdtemp("campaign", r.dir, sizeof(r.dir));
    if (rc != 0)
        goto out;
    struct rh_options ro;
    rh_options_init(&ro);
    ro.faketime = fault == F_CLOCK_JUMP;
    if ((rc = rh_cluster_start(NODES, &ro, &r.cluster)) != 0)
        goto out;
    for (int k = 0; k < r.clients; k++)
        for (int i = 0; i < NODES; i++) {
            if ((rc = fp_new(rh_port(r.cluster, i), &r.node_proxy[k][i])) != 0)
                goto out;
            char url[64];
            snprintf(url, sizeof(url), "redis://127.0.0.1:%d", fp_port(r.node_proxy[k][i]));
            if ((r.urls[k][i] = strdup(url)) == NULL) {
                rc = -ENOMEM;
                goto out;
            }
        }
    r.client_faketime = fault == F_CLIENT_CLOCK || fault == F_MIXED;
    if (r.client_faketime) {
        if (access(FAKETIME_LIB, R_OK) != 0) {
            fprintf(stderr, "campaign: %s needs %s (package libfaketime)\n", faults[fault].name,
                    FAKETIME_LIB);
            rc = -ENOENT;
            goto out;
        }
        for (int k = 0; k < r.clients; k++)
            if ((rc = set_client_clock(&r, k, 0)) != 0)
                goto out;
    }
    struct tk_sg_options so;
    tk_sg_options_init(&so);
    so.exe = O->sg_exe;
    so.unfenced = !fencing;
    if ((rc = tk_sg_start(&so, &r.sg)) != 0)
        goto out;
    for (int k = 0; k < r.clients; k++)
        if ((rc = fp_new(tk_sg_port(r.sg), &r.sg_proxy[k])) != 0)
            goto out;
    r.start_ms = hp_now_ms();
    r.end_ms = r.start_ms + (long long)O->duration_s * 1000;
    struct timespec wall;
    clock_gettime(CLOCK_REALTIME, &wall);
    r.real_off_us = (long long)wall.tv_sec * 1000000 + wall.tv_nsec / 1000 - hp_now_ms() * 1000;
    for (int k = 0; k < r.clients; k++)
        if ((rc = spawn_client(&r, k)) != 0)
            goto out;
    say("%s, %s, seed %llu, TTL %" PRIu64 " ms\n", faults[fault].name, fencing ? "fenced" : "unfenced", seed,
        r.ttl_ms);

    /* The schedule: a fault, a pause of 0.3..1.5 s, the next, until there
     * is no longer time for one to play out before the clients stop. */
    long long last_start = r.end_ms - 2 * (long long)r.ttl_ms - 1000;
    hp_sleep_ms(rnd_between(300, 1500));
    while (hp_now_ms() < last_start) {
        enum fault f = fault;
        if (fault == F_MIXED)
            f = (enum fault)rnd_between(0, F_COUNT - 2);
        if (f == F_CLOCK_JUMP)
            f = F_NODE_RESTART; /* needs libfaketime nodes and a long TTL */
        inject(&r, f);
        hp_sleep_ms(rnd_between(300, 1500));
    }

    /* Let the clients finish, each within a bounded time. */
    for (int k = 0; k < r.clients; k++) {
        if (r.pid[k] <= 0)
            continue;
        resume(&r, k);
        long long left = r.end_ms - hp_now_ms() + 20000;
        int st = 0;
        if (hp_wait(r.pid[k], left > 0 ? (int)left : 0, &st) != 0) {
            fprintf(stderr, "campaign: client %d did not end in time\n", k);
            res->client_failures++;
        } else {
            r.pid[k] = 0;
            if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) {
                /* A client that crashed (or a sanitizer that stopped it)
                 * is a failure of the run, not a fault. */
                fprintf(stderr, "campaign: client %d ended with status %d (see %s/client-%d.log)\n", k, st,
                        r.dir, k);
                res->client_failures++;
            }
        }
    }
    res->injected = r.injected;
    res->missed = r.missed;
    memcpy(res->kind_injected, r.kind_injected, sizeof(res->kind_injected));
    if (tk_sg_pid(r.sg) == 0)
        tk_sg_restart(r.sg);

    struct history h;
    memset(&h, 0, sizeof(h));
    for (int k = 0; k < r.clients; k++) {
        char path[400];
        snprintf(path, sizeof(path), "%s/history-%d", r.dir, k);
        if ((rc = read_history(path, &h)) != 0)
            break;
    }
    if (rc == 0)
        check(&r, &h, res);
    free(h.g);
    free(h.a);
out:
    if (rc != 0)
        fprintf(stderr, "campaign: %s/%s: set-up failed: %s\n", faults[fault].name,
                fencing ? "fenced" : "unfenced", strerror(-rc));
    run_free(&r);
    return rc;
}

/* ---- the table --------------------------------------------------------- */

/* What --short runs (CI): every fault that bites, the delayed restart,
 * storage-guard's kill and pause, fewer and longer-TTL ones with --cli. */
#define SHORT_FAULTS                                                                                         \
    "client-pause,write-delay,node-restart,sg-kill9,partition-minority,partition-majority,client-clock,"     \
    "sg-pause,node-restart-delayed"
#define SHORT_CLI_FAULTS "partition-majority,client-clock"
#define SHORT_SECONDS 12

struct row {
    int runs, setup_failed;
    struct result sum;
    long long gap_max;
    double per_min_sum;
    char first[512];
};

static void add(struct row *w, const struct result *x)
{
    w->runs++;
    w->sum.injected += x->injected;
    w->sum.missed += x->missed;
    w->sum.acks += x->acks;
    w->sum.refused += x->refused;
    w->sum.unknown += x->unknown;
    w->sum.stale_reads += x->stale_reads;
    w->sum.double_grants += x->double_grants;
    w->sum.double_ms += x->double_ms;
    w->sum.stale_accepted += x->stale_accepted;
    w->sum.lost += x->lost;
    w->sum.bad_rmw += x->bad_rmw;
    w->sum.acks_lost += x->acks_lost;
    w->sum.dup_tokens += x->dup_tokens;
    w->sum.order += x->order;
    w->sum.bit += x->bit;
    w->sum.late_writes += x->late_writes;
    w->sum.ka_runs += x->ka_runs;
    w->sum.ka_lost += x->ka_lost;
    for (int m = 0; m < 2; m++) {
        w->sum.cuts[m] += x->cuts[m];
        w->sum.cut_grants[m] += x->cut_grants[m];
    }
    w->sum.jumps_fwd += x->jumps_fwd;
    w->sum.jumps_back += x->jumps_back;
    w->sum.clock_grants += x->clock_grants;
    w->sum.fence_tokens += x->fence_tokens;
    w->sum.ahead_tokens += x->ahead_tokens;
    w->sum.client_failures += x->client_failures;
    for (int f = 0; f < F_COUNT; f++) {
        w->sum.kind_injected[f] += x->kind_injected[f];
        w->sum.kind_bit[f] += x->kind_bit[f];
    }
    w->per_min_sum += x->per_min;
    if (x->longest_gap_ms > w->gap_max)
        w->gap_max = x->longest_gap_ms;
    if (w->first[0] == '\0' && x->first[0] != '\0')
        snprintf(w->first, sizeof(w->first), "%s", x->first);
}

/* Does fault f catch a holder (and so count as bitten or not)? */
static int catches(int f)
{
    return f != F_SG_KILL && f != F_CLIENT_KILL && f != F_NODE_PAUSE && f != F_SLOW_NODE;
}

/* What a run's own log shows of its faults, beyond the columns: the
 * keep-alives of the work phases, the grants of a client cut from a
 * minority, the client clock jumps and what they did to the tokens, and
 * for a mixed run which faults landed and bit. */
static void evidence(const struct result *x, char *buf, size_t cap)
{
    size_t n = 0;
    buf[0] = '\0';
#define ADD(...)                                                                                             \
    do {                                                                                                     \
        if (n < cap)                                                                                         \
            n += (size_t)snprintf(buf + n, cap - n, "%s", n ? "; " : "");                                    \
        if (n < cap)                                                                                         \
            n += (size_t)snprintf(buf + n, cap - n, __VA_ARGS__);                                            \
    } while (0)
    if (x->ka_runs > 0)
        ADD("keep-alive lost %ld of %ld", x->ka_lost, x->ka_runs);
    if (x->cuts[0] > 0)
        ADD("cut from a minority %ld times, granted %ld times meanwhile", x->cuts[0], x->cut_grants[0]);
    if (x->cuts[1] > 0)
        ADD("cut from a majority %ld times, granted %ld times meanwhile", x->cuts[1], x->cut_grants[1]);
    if (x->jumps_fwd + x->jumps_back > 0)
        ADD("clock jumps %d forward %d back", x->jumps_fwd, x->jumps_back);
    if (x->clock_grants > 0)
        ADD("grants on a moved clock %ld (tokens read off a clock ahead %ld)", x->clock_grants,
            x->ahead_tokens);
    if (x->fence_tokens > 0)
        ADD("tokens above their client's clock %ld", x->fence_tokens);
    int kinds = 0;
    for (int f = 0; f < F_COUNT; f++)
        kinds += x->kind_injected[f] > 0;
    for (int f = 0; f < F_COUNT && kinds > 1; f++) {
        if (x->kind_injected[f] > 0 && catches(f))
            ADD("%s bit %d of %d", faults[f].name, x->kind_bit[f], x->kind_injected[f]);
        else if (x->kind_injected[f] > 0)
            ADD("%s %d", faults[f].name, x->kind_injected[f]);
    }
#undef ADD
}

static void usage(FILE *f)
{
    fprintf(f, "usage: fencelock-campaign [options]\n"
               "  --faults LIST     comma-separated, or \"all\" (default):");
    for (int i = 0; i < F_COUNT; i++)
        fprintf(f, " %s", faults[i].name);
    fprintf(f,
            "\n"
            "  --modes LIST      fenced,unfenced (default both)\n"
            "  --runs N          runs per fault and mode (default 1)\n"
            "  --duration S      seconds per run (default 30)\n"
            "  --clients K       clients (default 3, at most 16)\n"
            "  --seed N          schedule seed (default: the time)\n"
            "  --ttl-ms MS       lock TTL (default: each fault's own)\n"
            "  --short           CI: " SHORT_FAULTS ", %d s, --require-loss\n"
            "  --require-loss    fail unless every unfenced run of a fault that bites loses updates\n"
            "  --storage-guard P the storage-guard binary\n"
            "  --keep            keep each run's directory (histories, logs)\n"
            "  --cli[=PATH]      clients take and release the lock with the fencelock command\n"
            "                    (with --short: " SHORT_CLI_FAULTS ")\n"
            "  --restart-delay-ms MS  how long node-restart-delayed keeps the node down (default TTL + 200)\n"
            "  -v, --verbose     say what is injected when\n",
            SHORT_SECONDS);
}

static int parse_faults(struct opts *o, const char *list)
{
    memset(o->fault_on, 0, sizeof(o->fault_on));
    char *copy = strdup(list), *save = NULL;
    if (copy == NULL)
        return -1;
    for (char *t = strtok_r(copy, ",", &save); t != NULL; t = strtok_r(NULL, ",", &save)) {
        int found = 0;
        for (int i = 0; i < F_COUNT; i++)
            if (strcmp(t, "all") == 0 || strcmp(t, faults[i].name) == 0) {
                o->fault_on[i] = 1;
                found = 1;
            }
        if (!found) {
            fprintf(stderr, "fencelock-campaign: unknown fault \"%s\"\n", t);
            free(copy);
            return -1;
        }
    }
    free(copy);
    return 0;
}

static int client_mode(int argc, char **argv)
{
    struct cc_client_args a;
    memset(&a, 0, sizeof(a));
    char *nodes = NULL;
    for (int i = 2; i + 1 < argc; i += 2) {
        const char *k = argv[i];
        char *v = argv[i + 1];
        if (strcmp(k, "--id") == 0)
            a.id = atoi(v);
        else if (strcmp(k, "--sg-port") == 0)
            a.sg_port = (uint16_t)atoi(v);
        else if (strcmp(k, "--ttl-ms") == 0)
            a.ttl_ms = strtoull(v, NULL, 10);
        else if (strcmp(k, "--until") == 0)
            a.until_ms = strtoll(v, NULL, 10);
        else if (strcmp(k, "--fencing") == 0)
            a.fencing = atoi(v);
        else if (strcmp(k, "--history") == 0)
            a.history = v;
        else if (strcmp(k, "--run-dir") == 0)
            a.run_dir = v;
        else if (strcmp(k, "--nodes") == 0)
            nodes = v;
        else if (strcmp(k, "--cli") == 0)
            a.cli = v;
    }
    char *list[NODES] = {0};
    char *save = NULL;
    for (char *t = nodes ? strtok_r(nodes, ",", &save) : NULL; t != NULL && a.n_nodes < NODES;
         t = strtok_r(NULL, ",", &save))
        list[a.n_nodes++] = t;
    a.nodes = list;
    if (a.n_nodes != NODES || a.history == NULL || a.run_dir == NULL || a.sg_port == 0 || a.ttl_ms == 0)
        return 64;
    return cc_client_main(&a);
}

int main(int argc, char **argv)
{
    if (argc > 1 && strcmp(argv[1], "--client") == 0)
        return client_mode(argc, argv);
    struct opts o;
    memset(&o, 0, sizeof(o));
    o.seed = (unsigned long long)time(NULL);
    o.clients = 3;
    o.duration_s = 30;
    o.runs = 1;
    o.modes = 3;
    o.restart_delay_ms = -1;
    int is_short = 0, faults_given = 0;
    for (int i = 0; i < F_COUNT; i++)
        o.fault_on[i] = 1;
    o.sg_exe = getenv("SG_EXE");
#ifdef CAMPAIGN_SG_EXE
    if (o.sg_exe == NULL && access(CAMPAIGN_SG_EXE, X_OK) == 0)
        o.sg_exe = CAMPAIGN_SG_EXE;
#endif
    enum {
        O_FAULTS = 256,
        O_MODES,
        O_RUNS,
        O_DURATION,
        O_CLIENTS,
        O_SEED,
        O_TTL,
        O_SHORT,
        O_REQUIRE,
        O_SG,
        O_KEEP,
        O_CLI,
        O_RESTART_DELAY,
    };
    static const struct option longopts[] = {
        {"faults", required_argument, NULL, O_FAULTS},
        {"modes", required_argument, NULL, O_MODES},
        {"runs", required_argument, NULL, O_RUNS},
        {"duration", required_argument, NULL, O_DURATION},
        {"clients", required_argument, NULL, O_CLIENTS},
        {"seed", required_argument, NULL, O_SEED},
        {"ttl-ms", required_argument, NULL, O_TTL},
        {"short", no_argument, NULL, O_SHORT},
        {"require-loss", no_argument, NULL, O_REQUIRE},
        {"storage-guard", required_argument, NULL, O_SG},
        {"keep", no_argument, NULL, O_KEEP},
        {"cli", optional_argument, NULL, O_CLI},
        {"restart-delay-ms", required_argument, NULL, O_RESTART_DELAY},
        {"verbose", no_argument, NULL, 'v'},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    int c;
    while ((c = getopt_long(argc, argv, "vh", longopts, NULL)) != -1) {
        switch (c) {
        case O_FAULTS:
            if (parse_faults(&o, optarg) != 0)
                return 64;
            faults_given = 1;
            break;
        case O_MODES:
            o.modes =
                (strstr(optarg, "unfenced") ? 2 : 0) |
                (strstr(optarg, "fenced") && (strncmp(optarg, "fenced", 6) == 0 || strstr(optarg, ",fenced"))
                     ? 1
                     : 0);
            if (o.modes == 0) {
                fprintf(stderr, "fencelock-campaign: --modes takes fenced, unfenced or both\n");
                return 64;
            }
            break;
        case O_RUNS:
            o.runs = atoi(optarg);
            break;
        case O_DURATION:
            o.duration_s = atoi(optarg);
            break;
        case O_CLIENTS:
            o.clients = atoi(optarg);
            break;
        case O_SEED:
            o.seed = strtoull(optarg, NULL, 10);
            break;
        case O_TTL:
            o.ttl_ms = strtoull(optarg, NULL, 10);
            break;
        case O_SHORT:
            is_short = 1;
            o.duration_s = SHORT_SECONDS;
            o.require_loss = 1;
            break;
        case O_RESTART_DELAY:
            o.restart_delay_ms = atol(optarg);
            break;
        case O_REQUIRE:
            o.require_loss = 1;
            break;
        case O_SG:
            o.sg_exe = optarg;
            break;
        case O_KEEP:
            o.keep = 1;
            break;
        case O_CLI:
            o.cli = optarg ? optarg : getenv("FENCELOCK");
#ifdef CAMPAIGN_FENCELOCK_EXE
            if (o.cli == NULL)
                o.cli = CAMPAIGN_FENCELOCK_EXE;
#endif
            if (o.cli == NULL)
                o.cli = "fencelock";
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
    if (o.runs < 1 || o.duration_s < 5 || o.clients < 2 || o.clients > CLIENTS_MAX || optind != argc) {
        usage(stderr);
        return 64;
    }
    /* --short picks its faults unless --faults did, in either order. */
    if (is_short && !faults_given)
        parse_faults(&o, o.cli ? SHORT_CLI_FAULTS : SHORT_FAULTS);
    O = &o;
    printf("fencelock-campaign: seed %llu, %d clients%s, %d s per run, %d run(s) per fault and mode\n",
           o.seed, o.clients, o.cli ? " through the fencelock command" : "", o.duration_s, o.runs);
    fflush(stdout);

    static struct row rows[F_COUNT][2];
    int passed = 0, failed = 0;
    for (int f = 0; f < F_COUNT; f++) {
        if (!o.fault_on[f])
            continue;
        for (int run = 0; run < o.runs; run++) {
            /* The same seed for both modes: the same schedule. */
            unsigned long long seed = o.seed + (unsigned long long)f * 1000003ull + (unsigned long long)run;
            for (int m = 0; m < 2; m++) {
                if (!(o.modes & (1 << m)))
                    continue;
                int fencing = m == 0;
                struct result res;
                struct row *w = &rows[f][m];
                if (run_one((enum fault)f, fencing, seed, &res) != 0) {
                    w->setup_failed++;
                    failed++;
                    continue;
                }
                add(w, &res);
                long v = violations(&res);
                char ev[600];
                evidence(&res, ev, sizeof(ev));
                printf("%-20s %-9s seed %-12llu faults %2d (missed %d, bit %d)  acks %5ld  %7.0f/min  gap "
                       "%6lld ms  "
                       "late writes %3ld  refused %3ld  double grants %3ld  violations %ld%s%s\n",
                       faults[f].name, fencing ? "fenced" : "unfenced", seed, res.injected, res.missed,
                       res.bit, res.acks, res.per_min, res.longest_gap_ms, res.late_writes, res.refused,
                       res.double_grants, v, v ? ": " : "", v ? res.first : "");
                if (ev[0] != '\0')
                    printf("  %s\n", ev);
                fflush(stdout);
                if (res.client_failures > 0) {
                    failed++;
                    printf("  %d client(s) did not end well\n", res.client_failures);
                } else if (res.injected == 0) {
                    /* A run without a fault proves nothing either way. */
                    failed++;
                    printf("  no fault landed in this run: make it longer\n");
                } else if (faults[f].no_double && res.double_grants + res.lost + res.bad_rmw > 0) {
                    /* The delayed restart must not let anyone in while the
                     * holder's lease runs, fenced or not. */
                    failed++;
                    printf("  %s gave %ld double grant(s) and %ld lost update(s): it must give none\n",
                           faults[f].name, res.double_grants, res.lost + res.bad_rmw);
                } else if (fencing && res.ahead_tokens > 0) {
                    /* A client's clock an hour fast must not push its
                     * tokens, and every later one, an hour ahead: its
                     * proposals count nowhere (proposal_ahead_max_ms), and
                     * its tokens come from the fences. */
                    failed++;
                    printf("  %ld token(s) read off a clock an hour ahead: the proposal bound did not hold\n",
                           res.ahead_tokens);
                } else if (fencing || faults[f].no_double) {
                    /* With fencing, no fault may cost safety. */
                    if (v == 0)
                        passed++;
                    else
                        failed++;
                } else if (o.require_loss && faults[f].bites) {
                    /* Without fencing, the faults that bite must show. */
                    if (res.lost + res.bad_rmw > 0) {
                        passed++;
                    } else {
                        failed++;
                        printf("  the unfenced run of %s lost no update: the campaign is too weak to count\n",
                               faults[f].name);
                    }
                }
            }
        }
    }

    printf(
        "\n| fault | mode | runs | faults injected (missed) | bit | late writes | increments | per minute | "
        "longest gap ms | refused "
        "| unknown | double grants (ms) | stale accepted | lost updates | read-write gaps | acks lost | "
        "tokens "
        "twice | order | violations |\n"
        "| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | "
        "---: "
        "| ---: | ---: "
        "| ---: | ---: |\n");
    for (int f = 0; f < F_COUNT; f++)
        for (int m = 0; m < 2; m++) {
            struct row *w = &rows[f][m];
            if (w->runs == 0)
                continue;
            const struct result *s = &w->sum;
            printf("| %s | %s | %d | %d (%d) | %d | %ld | %ld | %.0f | %lld | %ld | %ld | %ld (%lld) | %ld | "
                   "%ld "
                   "| %ld "
                   "| %ld "
                   "| %ld | %ld | %ld |\n",
                   faults[f].name, m == 0 ? "fenced" : "unfenced", w->runs, s->injected, s->missed, s->bit,
                   s->late_writes, s->acks, w->per_min_sum / w->runs, w->gap_max, s->refused, s->unknown,
                   s->double_grants, s->double_ms, s->stale_accepted, s->lost, s->bad_rmw, s->acks_lost,
                   s->dup_tokens, s->order, violations(s));
        }
    /* What the table's columns do not show. */
    int header = 0;
    for (int f = 0; f < F_COUNT; f++)
        for (int m = 0; m < 2; m++) {
            char ev[600];
            if (rows[f][m].runs == 0)
                continue;
            evidence(&rows[f][m].sum, ev, sizeof(ev));
            if (ev[0] == '\0')
                continue;
            if (!header++)
                printf("\n");
            printf("%s, %s: %s\n", faults[f].name, m == 0 ? "fenced" : "unfenced", ev);
        }
    printf("\n%d passed, %d failed\n", passed, failed);
    return failed ? 1 : 0;
}
