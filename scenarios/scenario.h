/*
 * Kleppmann's critique of Redlock, replayed with real processes: real
 * redis-server nodes, a real storage-guard, and each client its own process
 * that can be paused with SIGSTOP or delayed by a TCP proxy.
 *
 * Every scenario runs in modes: UNFENCED (plain Redlock, a store that
 * checks nothing) shows the lost update; FENCED (tokens, storage-guard
 * checks them) shows the stale write refused. node-restart also runs
 * DELAYED: the crashed node stays down for a TTL before it comes back (the
 * Redlock rule), and no two clients hold the lock at once. In acquire-pause
 * the UNFENCED and FENCED runs use a client that skips Redlock's
 * elapsed-time check; its CHECKED run is fencelock's own client, whose
 * check refuses the late grant. In zombie-leader the clients are
 * candidates of an election (lockcore_campaign) whose epoch is the token:
 * UNFENCED, their writes carry no epoch.
 *
 * Used by the fencelock-replay program and by the scenario tests.
 */
#ifndef FENCELOCK_SCENARIO_H
#define FENCELOCK_SCENARIO_H

#include <stdint.h>
#include <stdio.h>

enum sc_mode { SC_UNFENCED, SC_FENCED, SC_DELAYED, SC_CHECKED };

#define SC_EVENTS_MAX 64

struct sc_event {
    long long t_ms;   /* since the run began */
    long long end_ms; /* end of a span (lease, pause), or -1 for a point */
    char lane[16];    /* "A", "B", "redis 3", "storage", "network" */
    char kind[16];    /* lease, pause, hold, write-ok, write-refused, node, note, step (minor) */
    char text[200];
};

struct sc_result {
    char scenario[24];
    enum sc_mode mode;
    int n_nodes;
    uint64_t ttl_ms;
    struct sc_event ev[SC_EVENTS_MAX];
    int n_ev;
    uint64_t token_a, token_b; /* 0 in UNFENCED mode */
    int status_a, status_b;    /* HTTP status of each client's write; 0: did not write */
    long long a_valid_until;   /* when A's lease ends, run ms */
    long long b_acquired;      /* when B was granted the lock, run ms (-1: never) */
    int double_grant;          /* one client was granted while the other's lease was valid */
    int a_refused;             /* A's acquisition failed (its grant came too late) */
    int lost_update;           /* B's accepted write was overwritten by A */
    char final_value[64];      /* the record as storage-guard holds it at the end */
    char verdict[200];
};

struct sc_config {
    const char *client_bin;        /* fencelock-scenario-client */
    const char *storage_guard_bin; /* storage-guard */
};

/* The scenarios, in the order of the critique; NULL-terminated. */
extern const char *const sc_scenarios[];

/* The modes a scenario runs in, into modes[0..]; returns how many (0 for
 * an unknown scenario). */
int sc_modes(const char *scenario, enum sc_mode modes[3]);

const char *sc_mode_name(enum sc_mode m);

/* Run one scenario in one mode. Returns 0 when the run completed (whatever
 * it showed: see out->verdict), or a negative errno with the reason in err. */
int sc_run(const char *scenario, enum sc_mode mode, const struct sc_config *cfg, struct sc_result *out,
           char *err, size_t errcap);

/* 1 if a completed run shows what the critique predicts for its mode:
 * UNFENCED a lost update, FENCED the stale write refused (and, where the
 * scenario makes two clients hold the lock, that they did), DELAYED no
 * double grant, CHECKED A's late grant refused and B's write kept. */
int sc_as_predicted(const struct sc_result *r);

/* The timeline as text, one event a line, then the verdict. */
void sc_print_timeline(FILE *f, const struct sc_result *r);

/* All runs as one JSON document / one SVG picture (a panel per run). */
int sc_write_json(FILE *f, const struct sc_result *runs, int n);
int sc_write_svg(FILE *f, const struct sc_result *runs, int n);

#endif
