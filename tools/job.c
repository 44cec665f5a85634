/*
 * A command run under a held lock, and its supervision: its process group,
 * the guardian that outlives fencelock, the terminal, signals, a lost lock.
 * `run` runs its command (and --undo's) so, and `elect` its command while
 * it leads. See docs/cli.md, "run" and "elect".
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <lockcore/lockcore.h>

#include "cli.h"

static const char *prog = "fencelock";

/*
 * How `run` and `elect` keep their command (the job) under the lock:
 *
 * - The job runs in its own process group (its pid is the group id), so a
 *   lost lock, a signal to fencelock, or the job's end reaches the job's
 *   children too: fencelock signals the whole group.
 * - A guardian process stops the group if fencelock dies, however it dies
 *   (SIGKILL included). It holds the only read end of a pipe whose only
 *   write end is fencelock's (close-on-exec, so the job never holds it):
 *   when fencelock's last descriptor closes, the guardian reads EOF and
 *   sends the group SIGTERM, then SIGKILL after --kill-after. On a normal
 *   end fencelock writes one byte first, and the guardian leaves quietly.
 *   PR_SET_PDEATHSIG would only reach the job's own process, not its
 *   children; the pipe needs no help from the job.
 * - What escapes: a process that leaves the group (setsid, setpgid, a
 *   daemon that double-forks into a new session), and everything if the
 *   guardian itself is SIGKILLed. Such a process runs on without the lock.
 * - The job waits for a go byte before it execs, so that the guardian
 *   exists (and the terminal is handed over) before any job code runs; if
 *   fencelock dies before that, the job never starts.
 * - When fencelock is in the foreground of a terminal, the job's group gets
 *   the terminal (tcsetpgrp): Ctrl-C and Ctrl-Z reach the job as they would
 *   without fencelock, and the job can read the keyboard. A job stopped by
 *   Ctrl-Z takes fencelock with it (fencelock gives the terminal back and
 *   stops itself, so the shell sees a stopped job); while stopped,
 *   fencelock cannot extend the lock, which may then be lost.
 */

/* A signal not yet passed on to the job (0: none), and the last one that
 * arrived at all (elect: no new campaign after it). */
static volatile sig_atomic_t pending_signal, received_signal;

/* The supervisor learns of a signal, SIGCHLD included (the job ended or
 * stopped), at once: the handler writes a byte into this pipe, whose read
 * end is polled with the nodes' connections. */
static int wake_fds[2] = {-1, -1};

static void on_signal(int sig)
{
    int saved = errno;
    if (sig != SIGCHLD)
        pending_signal = received_signal = sig;
    if (wake_fds[1] >= 0 && write(wake_fds[1], "s", 1) < 0) {
        /* full: a wake-up is already pending */
    }
    errno = saved;
}

int fencelock_catch_signals(void)
{
    if (wake_fds[0] < 0 && pipe2(wake_fds, O_CLOEXEC | O_NONBLOCK) < 0)
        return -errno;
    /* A signal ignored when fencelock started (a background job of a
     * script, nohup) stays ignored, for fencelock and the job alike. */
    static const int passed_on[] = {SIGINT, SIGTERM, SIGHUP, SIGCHLD};
    for (size_t i = 0; i < sizeof(passed_on) / sizeof(passed_on[0]); i++) {
        struct sigaction sa, old;
        memset(&sa, 0, sizeof(sa));
        sa.sa_handler = on_signal;
        /* SIGCHLD only wakes the loop: let it interrupt nothing else. */
        sa.sa_flags = passed_on[i] == SIGCHLD ? SA_RESTART : 0;
        if (sigaction(passed_on[i], NULL, &old) == 0 &&
            (old.sa_handler != SIG_IGN || passed_on[i] == SIGCHLD))
            sigaction(passed_on[i], &sa, NULL);
    }
    return 0;
}

int fencelock_signal_pending(void)
{
    int sig = pending_signal;
    pending_signal = 0;
    return sig;
}

int fencelock_signal_received(void)
{
    return received_signal;
}

/*
 * Wait up to timeout_ms for a node's answer, a keep-alive's timer or a
 * signal, and run what is due (extensions, their callbacks). Unlike
 * lockcore_run, a job that ends wakes it at once.
 */
void fencelock_wait_events(lockcore_client *c, int timeout_ms)
{
    struct pollfd fds[LOCKCORE_POLLFDS_MAX + 1];
    int t = timeout_ms;
    int n = lockcore_pollfds(c, fds, LOCKCORE_POLLFDS_MAX, &t);
    if (n < 0)
        n = 0;
    if (t < 0 || t > timeout_ms)
        t = timeout_ms;
    fds[n].fd = wake_fds[0];
    fds[n].events = POLLIN;
    fds[n].revents = 0;
    if (poll(fds, (nfds_t)n + 1, t) < 0)
        for (int k = 0; k <= n; k++)
            fds[k].revents = 0;
    if (fds[n].revents != 0) {
        char buf[64];
        while (read(wake_fds[0], buf, sizeof(buf)) > 0)
            ;
    }
    lockcore_process(c, fds, (size_t)n);
}

/* The reason a keep-alive gave up, said once: "lock on 'x' lost: WHY"
 * ("leadership of 'x' lost: WHY" for elect).
 * lockcore_errmsg() already reads "lock on 'x' lost: WHY" when the
 * keep-alive said why, and only WHY is taken from it; it is the detail
 * only if it says more than the code's own name (a loss seen after the job
 * ended may find an older message there). When the validity ran out, the
 * likely causes are named: fencelock was stopped, or the nodes were too
 * slow to extend in time. */
static void set_lost(lockcore_client *c, int rc, const struct lockcore_lock *l, struct job_report *s)
{
    s->lost_rc = rc ? rc : LOCKCORE_ELOST;
    const char *detail = lockcore_errmsg(c);
    char prefix[LOCKCORE_RESOURCE_MAX + 32];
    snprintf(prefix, sizeof(prefix), "lock on '%s' lost: ", l->resource);
    if (strncmp(detail, prefix, strlen(prefix)) == 0)
        detail += strlen(prefix);
    if (rc == 0 || *detail == '\0' || strcmp(detail, lockcore_strerror(0)) == 0 ||
        strcmp(detail, lockcore_strerror(s->lost_rc)) == 0)
        detail = NULL;
    int ran_out = lockcore_remaining_ms(l) == 0;
    if (detail == NULL)
        detail = ran_out ? "its validity ran out before an extension reached a majority"
                         : lockcore_strerror(s->lost_rc);
    /* A set's names are joined by newlines: one line names them by commas. */
    char name[LOCKCORE_RESOURCE_MAX + 1];
    snprintf(name, sizeof(name), "%s", l->resource);
    for (char *p = strchr(name, '\n'); p != NULL; p = strchr(p, '\n'))
        *p = ',';
    snprintf(s->why, sizeof(s->why), "%s '%.512s' lost: %.600s%s", s->leader ? "leadership of" : "lock on",
             name, detail, ran_out ? " (was fencelock paused, or are the nodes slow?)" : "");
}

void fencelock_job_lost(lockcore_client *c, int rc, const struct lockcore_lock *l, void *arg)
{
    set_lost(c, rc, l, arg);
}

void fencelock_describe_status(int status, char *buf, size_t cap)
{
    if (WIFEXITED(status))
        snprintf(buf, cap, "exited with status %d", WEXITSTATUS(status));
    else if (WIFSIGNALED(status))
        snprintf(buf, cap, "was killed by signal %d (%s)", WTERMSIG(status), strsignal(WTERMSIG(status)));
    else
        snprintf(buf, cap, "ended with wait status %d", status);
}

static void sleep_ms(long ms)
{
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
    while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
        ;
}

/* A process of the group is still there. Zombies count (kill reaches
 * them), so reap those that are fencelock's: a job's orphans are
 * (fencelock is a child subreaper), once the job's leader is reaped. */
static int group_alive(pid_t pgid, int reap)
{
    while (reap && waitpid(-pgid, NULL, WNOHANG) > 0)
        ;
    return kill(-pgid, 0) == 0;
}

/* The guardian (see above). Runs in a child of fencelock; never returns. */
static void guardian(int rfd, pid_t pgid, uint64_t kill_after_ms)
{
    /* Keep nothing of fencelock's: not the node connections, not the
     * caller's stdout (a pipe someone reads to its end). */
    if (rfd != 3) {
        dup2(rfd, 3);
        rfd = 3;
    }
    close_range(4, ~0U, 0);
    int null = open("/dev/null", O_RDWR);
    if (null >= 0) {
        dup2(null, 0);
        dup2(null, 1);
        if (null > 3)
            close(null);
    }
    /* Signals meant for fencelock's job (Ctrl-C at a terminal, a kill of
     * fencelock's process group) must not take the guardian with them. */
    static const int ignored[] = {SIGINT, SIGQUIT, SIGHUP, SIGTERM, SIGTSTP, SIGTTIN, SIGTTOU, SIGPIPE};
    for (size_t i = 0; i < sizeof(ignored) / sizeof(ignored[0]); i++)
        signal(ignored[i], SIG_IGN);
    signal(SIGCHLD, SIG_DFL); /* fencelock's handler writes to a pipe the guardian closed */
    char b;
    ssize_t n;
    do
        n = read(rfd, &b, 1);
    while (n < 0 && errno == EINTR);
    if (n == 1 || !group_alive(pgid, 0))
        _exit(0);
    fprintf(stderr,
            "%s: fencelock (the supervisor) died; sending SIGTERM to its command's process group %d\n", prog,
            (int)pgid);
    kill(-pgid, SIGTERM);
    kill(-pgid, SIGCONT);
    for (uint64_t waited = 0; waited < kill_after_ms && group_alive(pgid, 0); waited += 20)
        sleep_ms(20);
    if (group_alive(pgid, 0)) {
        fprintf(stderr, "%s: process group %d still running %" PRIu64 " ms after SIGTERM; sending SIGKILL\n",
                prog, (int)pgid, kill_after_ms);
        kill(-pgid, SIGKILL);
    }
    _exit(0);
}

/* The terminal fencelock is in the foreground of, or -1. */
static int foreground_tty(void)
{
    for (int fd = 0; fd <= 2; fd++)
        if (isatty(fd) && tcgetpgrp(fd) == getpgrp())
            return fd;
    return -1;
}

/* Give the terminal to group pgid. A background process that calls
 * tcsetpgrp gets SIGTTOU: fencelock is one once it handed the terminal
 * over, when it takes it back. */
static void give_tty(int tty, pid_t pgid)
{
    if (tty < 0)
        return;
    sigset_t block, old;
    sigemptyset(&block);
    sigaddset(&block, SIGTTOU);
    sigprocmask(SIG_BLOCK, &block, &old);
    tcsetpgrp(tty, pgid);
    sigprocmask(SIG_SETMASK, &old, NULL);
}

/* The job and what fencelock knows of it. */
struct job {
    pid_t pid; /* and process group */
    pid_t guardian;
    int guard_fd; /* write end of the guardian's pipe */
    int tty;      /* the terminal handed to the job, or -1 */
    int status;   /* waitpid status once ended */
    int ended;
};

struct job_env {
    char token[24], validity[24], granted_mono[24], granted_wall[24], valid_until[24];
    const char *undo_reason; /* --undo's command: failed or lost; NULL for the job */
    char job_status[16];     /* --undo's command: the job's exit code */
};

static void job_env_fill(struct job_env *e, const struct lockcore_lock *l)
{
    struct lock_times t;
    fencelock_lock_times(l, &t);
    snprintf(e->token, sizeof(e->token), "%" PRIu64, l->token);
    snprintf(e->validity, sizeof(e->validity), "%" PRIu64, l->validity_ms);
    snprintf(e->granted_mono, sizeof(e->granted_mono), "%" PRIu64, t.granted_mono_ms);
    snprintf(e->granted_wall, sizeof(e->granted_wall), "%" PRIu64, t.granted_wall_ms);
    snprintf(e->valid_until, sizeof(e->valid_until), "%" PRIu64, l->valid_until_ms);
}

/* In the job's process, after fork: its own group, wait for the go byte,
 * then exec (which resets fencelock's handlers to the default). */
static void job_child(int go_fd, const struct lockcore_lock *l, const struct job_env *e, char **cmd)
{
    setpgid(0, 0);
    char b;
    ssize_t n;
    do
        n = read(go_fd, &b, 1);
    while (n < 0 && errno == EINTR);
    if (n != 1)
        _exit(EXIT_ERROR); /* fencelock died before the job could start */
    close(go_fd);
    setenv("FENCELOCK_TOKEN", e->token, 1);
    setenv("FENCELOCK_RESOURCE", l->resource, 1);
    setenv("FENCELOCK_LOCK_ID", l->id, 1);
    /* A nested run joins only a reentrant lock (fencelock_acquire). */
    setenv("FENCELOCK_LOCK_KIND", fencelock_kind(l), 1);
    setenv("FENCELOCK_VALIDITY_MS", e->validity, 1);
    setenv("FENCELOCK_GRANTED_MONO_MS", e->granted_mono, 1);
    setenv("FENCELOCK_GRANTED_WALL_MS", e->granted_wall, 1);
    setenv("FENCELOCK_VALID_UNTIL_MONO_MS", e->valid_until, 1);
    /* A leader's token is its epoch (elect). */
    if (l->flags & LOCKCORE_LOCK_LEADER)
        setenv("FENCELOCK_EPOCH", e->token, 1);
    if (e->undo_reason != NULL) {
        setenv("FENCELOCK_UNDO_REASON", e->undo_reason, 1);
        setenv("FENCELOCK_JOB_STATUS", e->job_status, 1);
    }
    execvp(cmd[0], cmd);
    int err = errno;
    fprintf(stderr, "%s: %s: %s\n", prog, cmd[0], strerror(err));
    _exit(err == ENOENT ? 127 : 126);
}

/* Start the job (or --undo's command: undo_reason not NULL) and its
 * guardian. Returns 0, or -1 after saying why. */
static int job_start(struct job *j, const struct args *a, const struct lockcore_lock *l, char **cmd,
                     const char *undo_reason, int job_code)
{
    struct job_env e;
    job_env_fill(&e, l);
    e.undo_reason = undo_reason;
    snprintf(e.job_status, sizeof(e.job_status), "%d", job_code);
    int go[2], guard[2];
    if (pipe2(go, O_CLOEXEC) < 0) {
        fprintf(stderr, "%s: pipe: %s\n", prog, strerror(errno));
        return -1;
    }
    fflush(stdout);
    fflush(stderr);
    j->pid = fork();
    if (j->pid < 0) {
        fprintf(stderr, "%s: fork: %s\n", prog, strerror(errno));
        close(go[0]);
        close(go[1]);
        return -1;
    }
    if (j->pid == 0) {
        close(go[1]);
        job_child(go[0], l, &e, cmd);
    }
    close(go[0]);
    setpgid(j->pid, j->pid); /* also here: no race with the child's own call */

    /* The guardian's pipe only now: the job must not hold its write end. */
    if (pipe2(guard, O_CLOEXEC) < 0 || (j->guardian = fork()) < 0) {
        fprintf(stderr, "%s: cannot start the guardian: %s\n", prog, strerror(errno));
        close(go[1]); /* the job reads EOF and exits without running */
        waitpid(j->pid, NULL, 0);
        return -1;
    }
    if (j->guardian == 0) {
        close(guard[1]);
        close(go[1]);
        guardian(guard[0], j->pid, a->kill_after_ms);
    }
    close(guard[0]);
    j->guard_fd = guard[1];
    j->tty = foreground_tty();
    give_tty(j->tty, j->pid);
    ssize_t w;
    do
        w = write(go[1], "g", 1);
    while (w < 0 && errno == EINTR);
    close(go[1]);
    return 0;
}

/* The job's leader stopped (Ctrl-Z): give the terminal back and stop
 * fencelock too, so that the shell sees a stopped job; when continued,
 * hand the terminal over again and continue the job. */
static void job_stopped(struct job *j)
{
    if (j->tty < 0)
        return; /* stopped by someone else's signal: theirs to continue */
    give_tty(j->tty, getpgrp());
    raise(SIGTSTP);
    give_tty(j->tty, j->pid);
    kill(-j->pid, SIGCONT);
}

/* Tell the guardian fencelock ended on its own, and reap it. */
static void job_finish(struct job *j)
{
    give_tty(j->tty, getpgrp());
    ssize_t w;
    do
        w = write(j->guard_fd, "x", 1);
    while (w < 0 && errno == EINTR);
    close(j->guard_fd);
    waitpid(j->guardian, NULL, 0);
}

/* SIGTERM to the job's group, SIGKILL after --kill-after, while the keep-alive
 * runs; until the group is gone (bounded by --kill-after). For processes
 * the job left behind in its group after its leader ended. */
static void reap_group(lockcore_client *c, const struct job *j, const struct args *a, const char *name)
{
    if (!group_alive(j->pid, 1))
        return;
    fprintf(stderr, "%s: %s left processes in its group %d; sending them SIGTERM\n", prog, name, (int)j->pid);
    kill(-j->pid, SIGTERM);
    kill(-j->pid, SIGCONT);
    uint64_t start = lockcore_now_ms();
    while (group_alive(j->pid, 1) && lockcore_now_ms() - start < a->kill_after_ms)
        fencelock_wait_events(c, 20);
    if (group_alive(j->pid, 1)) {
        fprintf(stderr, "%s: still running %" PRIu64 " ms after SIGTERM; sending SIGKILL\n", prog,
                a->kill_after_ms);
        kill(-j->pid, SIGKILL);
        for (int i = 0; i < 100 && group_alive(j->pid, 1); i++)
            sleep_ms(10);
    }
}

/* Wait for the job to end: pass signals on, extend the lock (from
 * fencelock_wait_events), and on a lost lock, or at stop_at
 * (lockcore_now_ms(); 0: never) for --max-hold, stop the job's group. The
 * lock is lost when k's loss callback says so, or as soon as its validity
 * ran out on the monotonic clock, whether or not the keep-alive has run
 * since (fencelock was stopped past it, say); k NULL: no lock to watch.
 * Wakes at once when the job ends (SIGCHLD). Bounded by the job itself,
 * and on a lost lock or at stop_at by --kill-after. */
static void job_supervise(lockcore_client *c, struct job *j, const struct args *a, lockcore_keepalive *k,
                          struct job_report *st, const char *name, uint64_t stop_at)
{
    uint64_t term_at = 0;
    int killed = 0;
    for (;;) {
        int status;
        pid_t r = waitpid(j->pid, &status, WNOHANG | WUNTRACED);
        if (r == j->pid && WIFSTOPPED(status)) {
            job_stopped(j);
            continue;
        }
        if (r == j->pid) {
            j->status = status;
            j->ended = 1;
            return;
        }
        if (r < 0 && errno != EINTR) {
            fprintf(stderr, "%s: waitpid: %s\n", prog, strerror(errno));
            j->status = EXIT_ERROR << 8;
            j->ended = 1;
            return;
        }
        if (pending_signal) {
            kill(-j->pid, pending_signal);
            pending_signal = 0;
        }
        struct lockcore_lock held;
        if (st->lost_rc == 0 && k != NULL && lockcore_keepalive_get(k, &held) != 0)
            set_lost(c, 0, &held, st); /* the validity ran out: on_lost may not have run yet */
        uint64_t now = lockcore_now_ms();
        if (term_at == 0 && (st->lost_rc != 0 || (stop_at != 0 && now >= stop_at))) {
            if (st->lost_rc != 0)
                fprintf(stderr, "%s: %s; %s was still running: sending SIGTERM to its process group %d\n",
                        prog, st->why, name, (int)j->pid);
            else
                fprintf(stderr,
                        "%s: %s still running after --max-hold %" PRIu64
                        " ms: sending SIGTERM to its process group %d\n",
                        prog, name, a->max_hold_ms, (int)j->pid);
            st->announced = 1;
            st->max_hold = st->lost_rc == 0;
            kill(-j->pid, SIGTERM);
            kill(-j->pid, SIGCONT);
            term_at = now;
        }
        if (term_at != 0 && !killed && now - term_at >= a->kill_after_ms) {
            fprintf(stderr, "%s: %s still running %" PRIu64 " ms after SIGTERM; sending SIGKILL\n", prog,
                    name, a->kill_after_ms);
            kill(-j->pid, SIGKILL);
            killed = 1;
        }
        /* The keep-alive runs from here. The next deadline of our own:
         * --max-hold, or SIGKILL after --kill-after. */
        uint64_t due = term_at != 0 ? (killed ? 0 : term_at + a->kill_after_ms) : stop_at;
        int wait = 1000;
        if (due != 0)
            wait = due <= now ? 0 : due - now < 1000 ? (int)(due - now) : 1000;
        fencelock_wait_events(c, wait);
    }
}

int fencelock_job_run(lockcore_client *c, const struct args *a, lockcore_keepalive *k,
                      const struct lockcore_lock *l, char **cmd, const char *undo_reason, int job_code,
                      uint64_t stop_at, struct job_report *rep, int *status)
{
    const char *name = undo_reason != NULL ? "the --undo command" : cmd[0];
    /* The job's orphans become fencelock's children, so that fencelock can
     * reap them and see its group empty. */
    prctl(PR_SET_CHILD_SUBREAPER, 1);
    struct job j = {0};
    if (job_start(&j, a, l, cmd, undo_reason, job_code) < 0)
        return -1;
    job_supervise(c, &j, a, k, rep, name, stop_at);
    reap_group(c, &j, a, name);
    job_finish(&j);
    *status = j.status;
    return 0;
}

int fencelock_job_outcome(lockcore_client *c, lockcore_keepalive *k, struct lockcore_lock *l,
                          const char *name, int status, struct job_report *rep)
{
    char how[128];
    fencelock_describe_status(status, how, sizeof(how));
    int code = WIFEXITED(status)     ? WEXITSTATUS(status)
               : WIFSIGNALED(status) ? 128 + WTERMSIG(status)
                                     : EXIT_ERROR;
    /* A loss not seen while the job ran: the keep-alive had not noticed
     * yet (its validity ran out while fencelock was stopped, say). */
    int krc = lockcore_keepalive_get(k, l);
    if (rep->lost_rc == 0 && (krc < 0 || lockcore_remaining_ms(l) == 0))
        set_lost(c, krc, l, rep);
    const char *lost = rep->leader ? "leadership was lost" : "the lock was lost";
    if (rep->lost_rc != 0) {
        /* Whether the job was still running tells a caller whether its
         * last writes may have happened without the lock. */
        if (rep->announced)
            fprintf(stderr, "%s: %s %s after %s\n", prog, name, how, lost);
        else
            fprintf(stderr, "%s: %s; %s had already ended (%s) when the loss was seen\n", prog, rep->why,
                    name, how);
    } else if (rep->max_hold) {
        fprintf(stderr, "%s: %s %s after --max-hold\n", prog, name, how);
    } else if (code != 0) {
        fprintf(stderr, "%s: %s %s\n", prog, name, how);
    }
    return code;
}
