/*
 * fencelock-explore: many clients of every lock kind and wait mode in
 * their own processes, each reaching each redis-server node through a
 * fault proxy of its own, faults on a seeded schedule, and a checker over
 * what every client believed it held. See docs/reliability.md, "The
 * explorer".
 *
 * The shared log. Every process appends whole lines to one file opened
 * O_APPEND (one write() per line, so lines never interleave). Times are
 * CLOCK_MONOTONIC microseconds, which every process on the machine shares:
 *
 *   G t client kind res owner hold token a0 until permits
 *        a belief begins: the acquisition that started at a0 returned at t
 *        with a lock valid until `until`. kind: plain, reentrant, multi
 *        (res: the members joined by ','), read, write, permit (res: the
 *        permit's resource, permits: the semaphore's N), leader (res: the
 *        election's name, token: the leader's epoch). owner: the lock
 *        id (holds of one reentrant owner share it); hold: "client.seq"
 *        (an election client's seq starts at 1000 times its life).
 *   X t client hold until      an extension returned at t: valid until `until`
 *   E t client hold why        the belief ends at t: release (its start),
 *                              lost (the client learned it), died
 *   R t client name held epoch id value   an observer was told a reading
 *        of election `name` (held 0: nobody leads; id, value: "-" if empty)
 *   O t client kind mode op rc dur   one operation and its result
 *   C t client kind mode ttl ttl2 pid   a client (a process) started: an
 *        election client's process is started again after it died
 *   S t seed nodes clients seconds   the run starts (written first)
 *   W t node res holder holds pttl   a resource's lock key on a node changed
 *        (read by the explorer every 10 ms: holder or reentrant hold
 *        count, or a time left that jumped)
 *   F t sort client nodes unsafe detail...   a fault the explorer injected
 *        (client -1: none; nodes: a list like 0,2 or -); unsafe 1: a
 *        schedule outside Redlock's assumptions (--unsafe only)
 */
#ifndef FENCELOCK_EXPLORE_H
#define FENCELOCK_EXPLORE_H

#include <stdint.h>
#include <stdio.h>

/* The client kinds, and the names --kinds takes. */
enum ex_kind { EK_PLAIN, EK_REENTRANT, EK_MULTI, EK_RW, EK_SEM, EK_ELECT, EK_OBSERVE, EK_COUNT };
extern const char *const ex_kind_names[EK_COUNT];

/* The wait modes, in lockcore_wait_mode order, and their names. */
#define EX_MODES 3
extern const char *const ex_mode_names[EX_MODES];

/* The resources each kind uses. Plain locks and sets share theirs
 * ("p0".."p2"); the reentrant owners contend for "re0" and "re1"; readers
 * and writers for one; the semaphore has EX_PERMITS permits. */
#define EX_PLAIN_RES 3
#define EX_REENTRANT_RES 2
#define EX_RW_RES "rw0"
#define EX_SEM_RES "sem0"
#define EX_PERMITS 2
/* The election candidates campaign for and observers watch. */
#define EX_ELECT_RES "el0"

/* The longest TTL any client asks for, at an acquisition or an
 * extension: a node restarted without its data stays down longer. */
#define EX_MAX_TTL_MS 2500

/* A seeded generator (splitmix64): the schedule and each client's choices
 * follow from the seed. */
struct ex_rng {
    uint64_t s;
};
uint64_t ex_rnd(struct ex_rng *r);
/* Uniform in [lo, hi]. */
long ex_between(struct ex_rng *r, long lo, long hi);
/* 1 with probability p. */
int ex_chance(struct ex_rng *r, double p);

/* CLOCK_MONOTONIC in microseconds. */
uint64_t ex_now_us(void);

/* One client process (run as `fencelock-explore --client ...`). */
struct ex_client_args {
    int id;
    enum ex_kind kind;
    int mode;
    char **nodes; /* its proxies' addresses; borrowed */
    int n_nodes;
    uint64_t ttl_ms;       /* its TTL (a reentrant owner's outer hold) */
    uint64_t short_ttl_ms; /* a reentrant owner's inner holds; 0: as ttl_ms */
    double step_p;         /* chance of a partition around one step */
    uint64_t seed;
    int life;           /* an election client: how many times its process died before */
    long long until_ms; /* CLOCK_MONOTONIC ms: start no operation after it */
    const char *log;    /* the shared log */
    const char *ctl;    /* the explorer's control socket */
};
int ex_client_main(const struct ex_client_args *a);

/* ---- the checker ---- */

struct ex_log;

/* Read a shared log. Returns 0, -ENOMEM or -errno of fopen. */
int ex_log_read(const char *path, struct ex_log **out);
void ex_log_free(struct ex_log *l);

/* What a log shows, and what the checks found. */
enum ex_violation {
    EV_OVERLAP,       /* two beliefs of an exclusive kind, different owners */
    EV_PERMITS,       /* more than N permits believed held at once */
    EV_READ_WRITE,    /* a reader's belief beside a writer's */
    EV_TOKEN_ORDER,   /* a grant after another's, with a token not larger */
    EV_TOKEN_TWICE,   /* one token for two owners of one resource */
    EV_READ_TOKEN,    /* a read token below a write granted before it began */
    EV_LEADERS,       /* two leaders' beliefs overlap on one election (E1) */
    EV_EPOCH_ORDER,   /* a leader's epoch not above one whose belief began earlier (E2) */
    EV_OBSERVED_BACK, /* an observer told an epoch below one it was told before (E4) */
    EV_COUNT,
};
extern const char *const ex_violation_names[EV_COUNT];

struct ex_verdict {
    long violations[EV_COUNT]; /* counted: fencelock's */
    long unsafe;               /* explained by a schedule outside Redlock's assumptions */
    long fences_lost;          /* a read token below a write whose fence a node then lost
                                  with its data (docs/lockcore.md, read tokens): not counted */
    /* The counted violations, [0] without and [1] with a reentrant hold
     * in them, by the sign the first holder showed on the nodes: [1] a node
     * let go of its key while it had time left and the holder believed
     * (for a reentrant owner: hold counts drifted apart), [2] the key's
     * time left cut below a hold's validity (an extension of one hold
     * shortened another's), [0] neither (or not an overlap). */
    long signs[2][3];
    long beliefs[7];       /* per belief kind: plain reentrant multi read write permit leader */
    long readings;         /* observers' readings that named a leader */
    long ops[EK_COUNT][2]; /* per client kind: operations, and those that succeeded */
    long faults;           /* F lines */
    long lines, bad_lines;
};
extern const char *const ex_belief_names[7];

struct ex_check_opts {
    FILE *out;           /* details of the first violations; NULL: none */
    int details;         /* how many to describe */
    uint64_t max_ttl_ms; /* how far back a fault outside Redlock's assumptions explains a violation */
};

/* Run every check over the log. Returns the number of counted violations. */
long ex_check(const struct ex_log *l, const struct ex_check_opts *o, struct ex_verdict *v);

/* Feed the checker logs it must fail (and one it must pass). Returns 0 if
 * it judged each as it should. */
int ex_self_test(FILE *out);

#endif
