/*
 * fencelock elect NAME -- COMMAND: campaign to lead NAME (waiting in line),
 * run COMMAND only while leading, with the epoch (the fencing token) in
 * its environment, keep the leadership alive, stop COMMAND the moment it
 * is lost, and resign when COMMAND ends so that the next candidate is
 * elected at once. COMMAND's supervision is job.c's, as for run. See
 * docs/cli.md, "elect", and docs/election.md.
 */
#include <errno.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include <lockcore/lockcore.h>

#include "cli.h"

static const char *prog = "fencelock";

const char cmd_elect_usage[] =
    "usage: fencelock [options] elect NAME [--value V] [--again] [--] COMMAND [ARG...]\n"
    "\n"
    "Campaign to lead the election NAME: wait in line (fair: candidates are\n"
    "elected in the order they asked; --wait D bounds the wait), then run COMMAND\n"
    "in a process group of its own while this process leads, with FENCELOCK_EPOCH\n"
    "(the leader's epoch, which is its fencing token) and run's variables\n"
    "(FENCELOCK_TOKEN, the same number, FENCELOCK_RESOURCE=NAME, FENCELOCK_LOCK_ID,\n"
    "FENCELOCK_LOCK_KIND=leader, FENCELOCK_VALIDITY_MS, FENCELOCK_GRANTED_MONO_MS,\n"
    "FENCELOCK_GRANTED_WALL_MS, FENCELOCK_VALID_UNTIL_MONO_MS) in its environment.\n"
    "--value V is what the leader proclaims (fencelock leader NAME shows it).\n"
    "Leadership is kept alive as run keeps its lock (--ttl, --extend-at). The\n"
    "moment it is lost (an extension cannot keep a majority, or the validity ran\n"
    "out, as when fencelock was stopped), COMMAND's group gets SIGTERM, then\n"
    "SIGKILL after --kill-after, and fencelock exits with 79; with --again it\n"
    "campaigns again instead and runs COMMAND anew once elected. When COMMAND\n"
    "exits, fencelock resigns (the next candidate in line is elected at once) and\n"
    "exits with COMMAND's status. SIGINT, SIGTERM and SIGHUP are passed on to\n"
    "COMMAND's group; while waiting in line they end the campaign (out of line).\n"
    "Exit: COMMAND's own status (128+N if killed by signal N); 75 not elected\n"
    "  within --wait; 79 leadership lost; 128+N a signal N while in line; 69 no\n"
    "  majority in time; 64 usage; 70 error; 126/127 COMMAND could not be run /\n"
    "  not found.\n";

struct campaign {
    int done, rc;
    struct lockcore_lock lock;
};

static void on_elected(lockcore_client *c, int rc, const struct lockcore_lock *lock, void *arg)
{
    (void)c;
    struct campaign *g = arg;
    g->done = 1;
    g->rc = rc;
    g->lock = *lock;
}

/* "led by epoch 1795385089221403, value '10.0.0.7:8080', 8.2 s left"
 * for the leader of name, from one reading; "nobody leads yet", "changing
 * hands" or "no majority answered" else. */
static void describe_leader(lockcore_client *c, const char *name, char *buf, size_t cap)
{
    struct lockcore_leader l;
    int rc = lockcore_leader(c, name, &l);
    char value[128] = "";
    if (rc == 1 && l.value[0] != '\0')
        snprintf(value, sizeof(value), ", value '%.100s'", l.value);
    if (rc == 1)
        snprintf(buf, cap, "led by epoch %" PRIu64 "%s, %.1f s left", l.epoch, value,
                 (double)l.ttl_ms_left / 1000);
    else if (rc == 0)
        snprintf(buf, cap, "nobody leads yet");
    else if (rc == -EAGAIN)
        snprintf(buf, cap, "changing hands");
    else
        snprintf(buf, cap, "no majority answered");
}

#define WAIT_NOTICE_MS 300
#define WAIT_REPEAT_MS 5000

/*
 * Wait in line until elected (0, *lead the leader's lock), for up to
 * --wait; a caught signal ends the campaign (out of line, a grant not yet
 * proclaimed given back) and returns -EINTR. While waiting, say so on
 * stderr as acquire does (at a terminal or with --verbose).
 */
static int campaign(lockcore_client *c, const struct args *a, const char *name, struct lockcore_lock *lead)
{
    struct lockcore_call call;
    lockcore_call_init(c, &call);
    call.wait_ms = a->wait_ms;
    /* Without --wait, until elected; --wait 0: one attempt. */
    call.retry_count = a->retry_set ? a->retry_count : a->wait_set && a->wait_ms == 0 ? 0 : -1;
    /* Static: a campaign still in flight when this returns ends when the
     * client is freed, after it. */
    static struct campaign g;
    memset(&g, 0, sizeof(g));
    int rc = lockcore_campaign_async(c, name, a->value, &call, on_elected, &g);
    if (rc < 0)
        return rc;
    int show = !a->quiet && (a->verbose || isatty(STDERR_FILENO));
    uint64_t start = lockcore_now_ms(), next = start + WAIT_NOTICE_MS;
    int told = 0;
    while (!g.done) {
        if (fencelock_signal_pending() != 0) {
            lockcore_cancel(c, on_elected, &g);
            /* Let the rollback reach the nodes before the client goes. */
            for (uint64_t t0 = lockcore_now_ms(); lockcore_inflight(c) > 0 && lockcore_now_ms() - t0 < 500;)
                fencelock_wait_events(c, 10);
            return -EINTR;
        }
        fencelock_wait_events(c, 100);
        uint64_t now = lockcore_now_ms();
        if (g.done || !show || now < next)
            continue;
        char who[256];
        describe_leader(c, name, who, sizeof(who));
        if (g.done)
            break;
        char limit[64] = "until elected";
        if (a->wait_set)
            snprintf(limit, sizeof(limit), "up to %.1f s", (double)a->wait_ms / 1000);
        if (!told)
            fprintf(stderr, "%s: waiting in line to lead '%s' (%s; %s)\n", prog, name, who, limit);
        else
            fprintf(stderr, "%s: still waiting in line to lead '%s' after %.0f s (%s)\n", prog, name,
                    (double)(now - start) / 1000, who);
        told = 1;
        next = now + WAIT_REPEAT_MS;
    }
    if (g.rc == 0 && told)
        fprintf(stderr, "%s: elected to lead '%s', epoch %" PRIu64 "\n", prog, name, g.lock.token);
    *lead = g.lock;
    return g.rc;
}

/*
 * Lead once: keep the leadership alive and run COMMAND under it until it
 * ends, then resign. Returns the exit code: COMMAND's, or 79 when the
 * leadership was lost; *again is 1 when the caller is to campaign again
 * (--again, a loss that stopped COMMAND or came before it started, and no
 * signal caught).
 */
static int lead_once(lockcore_client *c, const struct args *a, struct lockcore_lock *lead, char **cmd,
                     int *again)
{
    const char *name = lead->resource;
    struct job_report st = {.leader = 1};
    lockcore_keepalive *k = NULL;
    *again = 0;
    int rc = lockcore_keepalive_start(c, lead, lead->ttl_ms, a->extend_at_ms, fencelock_job_lost, &st, &k);
    if (rc == LOCKCORE_ELOST) {
        /* Elected with no validity left (a slow proclamation, a pause):
         * lost before COMMAND could start. */
        fprintf(stderr, "%s: leadership of '%s' lost before %s could start: %s\n", prog, name, cmd[0],
                fencelock_errtext(c, rc));
        lockcore_resign(c, lead);
        *again = a->again && fencelock_signal_received() == 0;
        return EXIT_LOST;
    }
    if (rc < 0) {
        int code = fencelock_fail(c, "keepalive", rc);
        lockcore_resign(c, lead);
        return code;
    }
    int status;
    if (fencelock_job_run(c, a, k, lead, cmd, NULL, 0, 0, &st, &status) < 0) {
        lockcore_keepalive_stop(k);
        lockcore_resign(c, lead);
        return EXIT_ERROR;
    }
    int code = fencelock_job_outcome(c, k, lead, cmd[0], status, &st);
    lockcore_keepalive_get(k, lead);
    lockcore_keepalive_stop(k);
    /* Lost or not, resign: where our keys are still there, the next
     * candidate is named and elected at once, not after a TTL. */
    rc = lockcore_resign(c, lead);
    if (st.lost_rc == 0) {
        if (rc < 0)
            fprintf(stderr, "%s: resign: %s\n", prog, fencelock_errtext(c, rc));
        return code;
    }
    /* Again only after a loss that stopped COMMAND: one that had already
     * ended did so on its own, and a signal asked for the end. */
    *again = a->again && st.announced && fencelock_signal_received() == 0;
    return EXIT_LOST;
}

int cmd_elect(lockcore_client *c, const struct cmdline *cl)
{
    const struct args *a = &cl->a;
    const char *name = cl->t.names[0];
    /* Caught from the start: a signal while in line ends the campaign,
     * one while COMMAND runs is passed on to it. */
    int rc = fencelock_catch_signals();
    if (rc < 0)
        return fencelock_fail(c, "pipe", rc);
    for (;;) {
        struct lockcore_lock lead;
        rc = campaign(c, a, name, &lead);
        if (rc == -EINTR) {
            int sig = fencelock_signal_received();
            fprintf(stderr, "%s: elect: %s while waiting in line to lead '%s'; left the line\n", prog,
                    strsignal(sig), name);
            return 128 + sig;
        }
        if (rc < 0)
            return fencelock_fail(c, rc == LOCKCORE_ELOCKED ? "elect: not elected in time" : "elect", rc);
        int again;
        int code = lead_once(c, a, &lead, cl->cmd, &again);
        if (!again)
            return code;
        fprintf(stderr, "%s: campaigning again to lead '%s' (--again)\n", prog, name);
    }
}
