/*
 * fencelock run: acquire, run the job (the command) under the lock kept
 * alive, release; --undo after a failed job or a lost lock. The job's
 * supervision (its process group, the guardian, the terminal, signals, a
 * lost lock) is job.c's, which elect shares. See docs/cli.md, "run".
 */
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>

#include <lockcore/lockcore.h>

#include "cli.h"

static const char *prog = "fencelock";

const char cmd_run_usage[] =
    "usage: fencelock [options] run RESOURCE [--] COMMAND [ARG...]\n"
    "       fencelock [options] run RESOURCE... -- COMMAND [ARG...]\n"
    "\n"
    "The resources end at the first '--'; without one, the first operand is the\n"
    "resource and the rest is COMMAND.\n"
    "Acquire RESOURCE (waiting up to --wait), run COMMAND in a process group of its\n"
    "own with FENCELOCK_TOKEN, FENCELOCK_RESOURCE, FENCELOCK_LOCK_ID,\n"
    "FENCELOCK_VALIDITY_MS, FENCELOCK_GRANTED_MONO_MS, FENCELOCK_GRANTED_WALL_MS and\n"
    "FENCELOCK_VALID_UNTIL_MONO_MS in its environment, extend the lock whenever\n"
    "--extend-at of validity is left, and release it when COMMAND ends. If the lock\n"
    "is lost (an extension cannot keep a majority), COMMAND's group gets SIGTERM,\n"
    "then SIGKILL after --kill-after, and fencelock exits with 79; so it is, with\n"
    "--max-hold D, once COMMAND has held the lock for D. SIGINT, SIGTERM\n"
    "and SIGHUP are passed on to the group. If fencelock dies, a guardian process\n"
    "stops the group the same way (a process that leaves the group escapes).\n"
    "A run nested in a run of RESOURCE joins its lock (the same token); with\n"
    "--permits N it holds one of N permits, RESOURCE:permit:<i>; several\n"
    "resources are held all or nothing under one token; --read, --write take a\n"
    "side of a read-write lock. FENCELOCK_LOCK_KIND names the kind.\n"
    "Exit: COMMAND's own status (128+N if killed by signal N); 75 not acquired;\n"
    "  79 lock lost (or --max-hold ran out); 69 no majority in time; 64 usage; 70 error;\n"
    "  126/127 COMMAND could not be run / not found.\n";

/*
 * --undo: after the job failed (non-zero status) or the lock was lost, run
 * `sh -c UNDO` like the job (own process group, guardian, the lock's
 * variables) plus FENCELOCK_UNDO_REASON and FENCELOCK_JOB_STATUS. After a
 * failure the lock is still held and kept alive while the undo runs (and
 * a loss then stops the undo like a job); after a loss it runs without the
 * lock, and only the token protects what it writes.
 */
static void run_undo(lockcore_client *c, const struct args *a, lockcore_keepalive *k,
                     const struct lockcore_lock *l, const char *reason, int job_code, struct job_report *st)
{
    char *argv[] = {"sh", "-c", (char *)a->undo, NULL};
    struct job_report none = {0};
    int lost = strcmp(reason, "lost") == 0;
    fprintf(stderr, "%s: running the --undo command (%s)\n", prog, reason);
    int status;
    if (fencelock_job_run(c, a, lost ? NULL : k, l, argv, reason, job_code, 0, lost ? &none : st, &status) <
        0)
        return;
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
        char how[128];
        fencelock_describe_status(status, how, sizeof(how));
        fprintf(stderr, "%s: the --undo command %s\n", prog, how);
    }
}

/* Acquire the target, run cmd under it; returns the exit code. */
static int run(lockcore_client *c, const struct args *a, const struct target *t, char **cmd)
{
    struct lockcore_lock l;
    int rc = fencelock_acquire(c, a, t, &l);
    if (rc < 0)
        return fencelock_acquire_failed(c, a, t, rc);

    struct job_report st = {0};
    lockcore_keepalive *k = NULL;
    rc = lockcore_keepalive_start(c, &l, l.ttl_ms, a->extend_at_ms, fencelock_job_lost, &st, &k);
    if (rc < 0) {
        int code = fencelock_fail(c, "keepalive", rc);
        lockcore_release(c, &l);
        return code;
    }
    /* Handlers before fork: a signal that arrives while the job starts is
     * passed on, not lost (exec resets them to the default in the job). */
    int status;
    if ((rc = fencelock_catch_signals()) < 0) {
        int code = fencelock_fail(c, "pipe", rc);
        lockcore_keepalive_stop(k);
        lockcore_release(c, &l);
        return code;
    }
    /* --max-hold counts from the grant, as the lock's validity does. */
    uint64_t stop_at = a->max_hold_ms != 0 ? l.valid_until_ms - l.validity_ms + a->max_hold_ms : 0;
    if (fencelock_job_run(c, a, k, &l, cmd, NULL, 0, stop_at, &st, &status) < 0) {
        lockcore_keepalive_stop(k);
        lockcore_release(c, &l);
        return EXIT_ERROR;
    }
    int code = fencelock_job_outcome(c, k, &l, cmd[0], status, &st);
    if (a->undo != NULL && (st.lost_rc != 0 || st.max_hold || code != 0))
        run_undo(c, a, k, &l, st.lost_rc != 0 ? "lost" : st.max_hold ? "max-hold" : "failed", code, &st);
    lockcore_keepalive_get(k, &l);
    lockcore_keepalive_stop(k);
    /* Lost or not, delete our keys where they still hold our id: what a
     * minority still holds would otherwise block others until it expires. */
    rc = lockcore_release(c, &l);
    if (st.lost_rc != 0 || st.max_hold)
        return EXIT_LOST;
    if (rc < 0)
        fprintf(stderr, "%s: release: %s\n", prog, fencelock_errtext(c, rc));
    return code;
}

int cmd_run(lockcore_client *c, const struct cmdline *cl)
{
    struct args a = cl->a;
    /* One resource, no other kind: a reentrant lock that a nested run of
     * the resource joins; a first hold waits in the nodes' queue (in line
     * from its first attempt on with --fair), a re-entry joins at once. */
    a.reentrant = a.permits == 0 && a.rw == RW_NONE && cl->t.n == 1;
    return run(c, &a, &cl->t, cl->cmd);
}
