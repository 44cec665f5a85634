/*
 * fencelock leader NAME: who leads the election NAME (its epoch, the value
 * it proclaimed), as a majority of the nodes says; --wait for a leader,
 * --watch for every change. See docs/cli.md, "leader", and
 * docs/election.md.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include <jansson.h>

#include <lockcore/lockcore.h>

#include "cli.h"

static const char *prog = "fencelock";

const char cmd_leader_usage[] =
    "usage: fencelock [options] leader NAME [--wait D] [--watch]\n"
    "\n"
    "Print who leads the election NAME, as a majority of the nodes says:\n"
    "  {\"name\",\"leader\",\"epoch\",\"value\",\"lock_id\",\"ttl_ms_left\",\"reachable\",\"quorum\"}\n"
    "leader: true or false (epoch, value, lock_id and ttl_ms_left are then null);\n"
    "epoch: the leader's fencing token; ttl_ms_left: how long its lock lasts unless\n"
    "extended. A handover under way is read again until it settles.\n"
    "--wait D: if nobody leads, wait up to D for a leader.\n"
    "--watch: print the reading, then one line per change (a new leader, a new\n"
    "value, nobody), until SIGINT or SIGTERM, or until --wait D runs out.\n"
    "Exit: 0 a leader (--watch: the watch ended); 79 nobody leads; 69 no majority\n"
    "  answered (nothing printed); 64 usage; 70 error.\n";

/* How long a reading changing hands is read again before it counts as
 * nobody: a handover takes a round trip, a handoff's reservation two
 * request timeouts. */
#define SETTLE_MS 1000

/* A value as a JSON string: as it is if it is UTF-8, else its printable
 * ASCII with '?' for the other bytes. */
static json_t *value_json(const char *v)
{
    json_t *j = json_string(v);
    if (j != NULL)
        return j;
    char safe[LOCKCORE_VALUE_MAX + 1];
    size_t i = 0;
    for (; v[i] != '\0' && i < LOCKCORE_VALUE_MAX; i++)
        safe[i] = v[i] >= 0x20 && v[i] < 0x7f ? v[i] : '?';
    safe[i] = '\0';
    return json_string(safe);
}

static void print_reading(lockcore_client *c, const char *name, const struct lockcore_leader *l)
{
    int quorum = (int)lockcore_quorum(c), reachable = (int)l->reachable;
    if (l->held)
        fencelock_print_json(json_pack("{s:s, s:b, s:I, s:o, s:s, s:I, s:i, s:i}", "name", name, "leader", 1,
                                       "epoch", (json_int_t)l->epoch, "value", value_json(l->value),
                                       "lock_id", l->id, "ttl_ms_left", (json_int_t)l->ttl_ms_left,
                                       "reachable", reachable, "quorum", quorum));
    else
        fencelock_print_json(json_pack("{s:s, s:b, s:n, s:n, s:n, s:n, s:i, s:i}", "name", name, "leader", 0,
                                       "epoch", "value", "lock_id", "ttl_ms_left", "reachable", reachable,
                                       "quorum", quorum));
}

static int no_majority(lockcore_client *c, const struct lockcore_leader *l)
{
    fprintf(stderr, "%s: leader: %u of %u nodes answered (quorum %u)\n", prog, l->reachable,
            lockcore_nodes(c), lockcore_quorum(c));
    return EXIT_UNREACHABLE;
}

/* One reading: 1 a leader, 0 nobody, LOCKCORE_ENOQUORUM, or an error. A
 * reading changing hands (a resignation handing over, a proclamation
 * under way) is read again until it settles, up to SETTLE_MS; one that
 * does not is nobody's leadership (a lock of the name that no candidate
 * proclaimed), and said so. */
static int read_leader(lockcore_client *c, const char *name, struct lockcore_leader *l)
{
    int rc = lockcore_leader(c, name, l);
    if (rc != -EAGAIN)
        return rc;
    struct lockcore_leader settled;
    rc = lockcore_observe(c, name, NULL, SETTLE_MS, &settled);
    if (rc == 0) {
        *l = settled;
        return l->held;
    }
    if (rc != -ETIMEDOUT)
        return rc;
    fprintf(stderr,
            "%s: leader: '%s' did not settle within %d ms: a majority holds a lock of the name that no "
            "leader proclaimed (taken by other means than an election?)\n",
            prog, name, SETTLE_MS);
    l->held = 0;
    return 0;
}

/* --wait without --watch: until somebody leads, up to deadline
 * (lockcore_now_ms). rc and *l: the reading so far; returns the last. */
static int wait_for_leader(lockcore_client *c, const char *name, int rc, struct lockcore_leader *l,
                           uint64_t deadline)
{
    for (;;) {
        uint64_t now = lockcore_now_ms();
        if (rc == 1 || now >= deadline)
            return rc;
        struct lockcore_leader next;
        int r = lockcore_observe(c, name, rc == 0 ? l : NULL, deadline - now, &next);
        if (r == -ETIMEDOUT)
            return rc;
        if (r < 0)
            return r;
        *l = next;
        rc = l->held;
    }
}

struct observed {
    int done, rc;
    struct lockcore_leader l;
};

static void on_reading(lockcore_client *c, int rc, const struct lockcore_leader *l, void *arg)
{
    (void)c;
    struct observed *w = arg;
    w->done = 1;
    w->rc = rc;
    w->l = *l;
}

/* --watch: the reading *l, then each one that differs from the one
 * before, until a caught signal or deadline (0: none). Observers are told
 * by the nodes (every proclamation and resignation), and read again when
 * what they read runs out: nothing is polled. lockcore never reports an
 * epoch below that of the reading it is given; after a reading of nobody
 * it has no epoch to hold a leader's against, so the largest epoch printed
 * is kept here, and a leader below it (an old leader's stale keys on a
 * majority, docs/election.md, E4) is not printed: the watch goes on from
 * it and prints what comes after it, if that differs from the last line. */
static int watch(lockcore_client *c, const char *name, struct lockcore_leader *l, uint64_t deadline)
{
    int rc = fencelock_catch_signals();
    if (rc < 0)
        return fencelock_fail(c, "pipe", rc);
    print_reading(c, name, l);
    struct lockcore_leader printed = *l;
    uint64_t top = l->held ? l->epoch : 0;
    /* Static: an observer still in flight when this returns ends when the
     * client is freed, after it. */
    static struct observed w;
    for (;;) {
        uint64_t now = lockcore_now_ms();
        if (deadline != 0 && now >= deadline)
            return EXIT_OK;
        memset(&w, 0, sizeof(w));
        rc = lockcore_observe_async(c, name, l, deadline != 0 ? deadline - now : 0, on_reading, &w);
        if (rc < 0)
            return fencelock_fail(c, "leader", rc);
        while (!w.done) {
            if (fencelock_signal_pending() != 0) {
                lockcore_observe_cancel(c, on_reading, &w);
                return EXIT_OK;
            }
            fencelock_wait_events(c, 1000);
        }
        if (w.rc == -ETIMEDOUT)
            return EXIT_OK;
        if (w.rc < 0)
            return fencelock_fail(c, "leader", w.rc);
        *l = w.l;
        if (l->held && l->epoch < top)
            continue; /* stale: the epoch never goes back */
        if (l->held == printed.held &&
            (!l->held || (l->epoch == printed.epoch && strcmp(l->id, printed.id) == 0 &&
                          strcmp(l->value, printed.value) == 0)))
            continue; /* what the last line said already */
        print_reading(c, name, l);
        printed = *l;
        if (l->held && l->epoch > top)
            top = l->epoch;
    }
}

int cmd_leader(lockcore_client *c, const struct cmdline *cl)
{
    const struct args *a = &cl->a;
    const char *name = cl->t.names[0];
    uint64_t deadline = a->wait_set ? lockcore_now_ms() + a->wait_ms : 0;
    struct lockcore_leader l;
    int rc = read_leader(c, name, &l);
    if (rc < 0 && rc != LOCKCORE_ENOQUORUM)
        return fencelock_fail(c, "leader", rc);
    if (a->watch)
        return rc == LOCKCORE_ENOQUORUM ? no_majority(c, &l) : watch(c, name, &l, deadline);
    if (deadline != 0)
        rc = wait_for_leader(c, name, rc, &l, deadline);
    if (rc == LOCKCORE_ENOQUORUM)
        return no_majority(c, &l);
    if (rc < 0)
        return fencelock_fail(c, "leader", rc);
    print_reading(c, name, &l);
    return rc == 1 ? EXIT_OK : EXIT_LOST;
}
