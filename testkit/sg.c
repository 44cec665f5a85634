/* A storage-guard process for tests: temporary directory, port file, PID. */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fencelock-testkit/testkit.h>

#include "proc.h"

#define ARGS_MAX 64
#define STOP_TIMEOUT_MS 20000

struct tk_sg {
    char *exe;
    char *log_level;
    char **extra; /* NULL-terminated copy */
    int unfenced;
    int start_timeout_ms;
    pid_t pid;
    uint16_t port;
    int own_dir; /* made by tk_sg_start: removed by tk_sg_free */
    char dir[256];
    char db[320];
    char port_file[320];
    char log[320];
};

void tk_sg_options_init(struct tk_sg_options *o)
{
    if (o == NULL)
        return;
    memset(o, 0, sizeof(*o));
    o->log_level = "info";
    o->start_timeout_ms = 15000;
}

static void dump_log(const struct tk_sg *s)
{
    FILE *f = fopen(s->log, "r");
    if (f == NULL)
        return;
    char line[1024];
    fprintf(stderr, "---- %s ----\n", s->log);
    while (fgets(line, sizeof(line), f))
        fputs(line, stderr);
    fclose(f);
}

/* Spawn on s->port (0: any) and wait for the port file. */
static int launch(struct tk_sg *s)
{
    char listen[64];
    snprintf(listen, sizeof(listen), "127.0.0.1:%u", (unsigned)s->port);
    char *argv[ARGS_MAX + 12];
    int n = 0;
    argv[n++] = s->exe;
    argv[n++] = "--db";
    argv[n++] = s->db;
    argv[n++] = "--listen";
    argv[n++] = listen;
    argv[n++] = "--port-file";
    argv[n++] = s->port_file;
    argv[n++] = "--log-level";
    argv[n++] = s->log_level;
    if (s->unfenced)
        argv[n++] = "--unfenced";
    for (int i = 0; s->extra[i] != NULL; i++)
        argv[n++] = s->extra[i];
    argv[n] = NULL;
    unlink(s->port_file);
    pid_t pid = hp_spawn(argv, NULL, s->log);
    if (pid < 0)
        return (int)pid;
    s->pid = pid;
    long long deadline = hp_now_ms() + s->start_timeout_ms;
    while (hp_now_ms() < deadline) {
        FILE *f = fopen(s->port_file, "r");
        unsigned port = 0;
        if (f != NULL) {
            int ok = fscanf(f, "%u", &port) == 1;
            fclose(f);
            if (ok && port > 0 && port < 65536) {
                s->port = (uint16_t)port;
                return 0;
            }
        }
        int st;
        if (hp_wait(s->pid, 0, &st) == 0) {
            s->pid = 0;
            fprintf(stderr, "testkit: storage-guard exited at start-up (status %d)\n", st);
            dump_log(s);
            return -ECHILD;
        }
        hp_sleep_ms(10);
    }
    fprintf(stderr, "testkit: storage-guard wrote no port within %d ms\n", s->start_timeout_ms);
    dump_log(s);
    hp_signal(s->pid, SIGKILL, 0);
    s->pid = 0;
    return -ETIMEDOUT;
}

int tk_sg_start(const struct tk_sg_options *o, struct tk_sg **out)
{
    if (out == NULL)
        return -EINVAL;
    struct tk_sg_options def;
    if (o == NULL) {
        tk_sg_options_init(&def);
        o = &def;
    }
    if (o->start_timeout_ms < 0)
        return -EINVAL;
    const char *exe = o->exe;
    if (exe == NULL)
        exe = getenv("SG_EXE");
    if (exe == NULL || exe[0] == '\0')
        exe = "storage-guard";
    int rc = -ENOMEM;
    struct tk_sg *s = calloc(1, sizeof(*s));
    if (s == NULL)
        return -ENOMEM;
    size_t n_extra = 0;
    while (o->extra_args != NULL && o->extra_args[n_extra] != NULL)
        n_extra++;
    if (n_extra > ARGS_MAX) {
        rc = -EINVAL;
        goto out;
    }
    s->extra = calloc(n_extra + 1, sizeof(char *));
    s->exe = strdup(exe);
    s->log_level = strdup(o->log_level ? o->log_level : "info");
    if (s->extra == NULL || s->exe == NULL || s->log_level == NULL)
        goto out;
    for (size_t i = 0; i < n_extra; i++)
        if ((s->extra[i] = strdup(o->extra_args[i])) == NULL)
            goto out;
    s->unfenced = o->unfenced;
    s->start_timeout_ms = o->start_timeout_ms > 0 ? o->start_timeout_ms : 15000;
    if (o->dir != NULL) {
        if (strlen(o->dir) >= sizeof(s->dir) - 32) {
            rc = -ENAMETOOLONG;
            goto out;
        }
        snprintf(s->dir, sizeof(s->dir), "%s", o->dir);
    } else if ((rc = rh_mkdtemp("sg", s->dir, sizeof(s->dir))) != 0) {
        s->dir[0] = '\0';
        goto out;
    } else {
        s->own_dir = 1;
    }
    snprintf(s->db, sizeof(s->db), "%s/records.db", s->dir);
    snprintf(s->port_file, sizeof(s->port_file), "%s/port", s->dir);
    snprintf(s->log, sizeof(s->log), "%s/storage-guard.log", s->dir);
    if (o->db != NULL) {
        if (strlen(o->db) >= sizeof(s->db)) {
            rc = -ENAMETOOLONG;
            goto out;
        }
        snprintf(s->db, sizeof(s->db), "%s", o->db);
    }
    if ((rc = launch(s)) != 0)
        goto out;
    *out = s;
    return 0;
out:
    tk_sg_free(s);
    return rc;
}

int tk_sg_stop(struct tk_sg *s)
{
    if (s == NULL || s->pid <= 0)
        return -ESRCH;
    int st = 0;
    kill(s->pid, SIGTERM);
    if (hp_wait(s->pid, STOP_TIMEOUT_MS, &st) != 0) {
        hp_signal(s->pid, SIGKILL, 0);
        s->pid = 0;
        dump_log(s);
        return -ETIMEDOUT;
    }
    s->pid = 0;
    if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) {
        dump_log(s);
        return -ECHILD;
    }
    return 0;
}

int tk_sg_wait(struct tk_sg *s, int timeout_ms, int *status)
{
    if (s == NULL || s->pid <= 0)
        return -ESRCH;
    int st = 0;
    int rc = hp_wait(s->pid, timeout_ms < 0 ? 0 : timeout_ms, &st);
    if (rc != 0)
        return rc == -ETIMEDOUT ? -ETIMEDOUT : rc;
    s->pid = 0;
    if (status != NULL)
        *status = st;
    return 0;
}

int tk_sg_kill(struct tk_sg *s)
{
    if (s == NULL || s->pid <= 0)
        return -ESRCH;
    int rc = hp_signal(s->pid, SIGKILL, 0);
    s->pid = 0;
    return rc;
}

int tk_sg_pause(struct tk_sg *s)
{
    if (s == NULL || s->pid <= 0)
        return -ESRCH;
    int rc = hp_signal(s->pid, SIGSTOP, 0);
    /* kill() returns before the threads have stopped: on a busy machine
     * one may still answer a request sent right after. */
    return rc == 0 ? hp__wait_stopped(s->pid, 5000) : rc;
}

int tk_sg_resume(struct tk_sg *s)
{
    if (s == NULL || s->pid <= 0)
        return -ESRCH;
    return hp_signal(s->pid, SIGCONT, 0);
}

int tk_sg_restart(struct tk_sg *s)
{
    if (s == NULL)
        return -EINVAL;
    if (s->pid > 0)
        tk_sg_kill(s);
    /* The port was ours a moment ago; a client may still hold a connection
     * in TIME_WAIT or another process may grab it: retry briefly. */
    int rc = -EADDRINUSE;
    for (int attempt = 0; attempt < 20 && rc != 0; attempt++) {
        rc = launch(s);
        if (rc != 0)
            hp_sleep_ms(100);
    }
    return rc;
}

void tk_sg_free(struct tk_sg *s)
{
    if (s == NULL)
        return;
    if (s->pid > 0)
        hp_signal(s->pid, SIGKILL, 0);
    if (s->own_dir && getenv("SG_KEEP_TMP") == NULL)
        rh_rmtree(s->dir);
    for (size_t i = 0; s->extra != NULL && s->extra[i] != NULL; i++)
        free(s->extra[i]);
    free(s->extra);
    free(s->exe);
    free(s->log_level);
    free(s);
}

uint16_t tk_sg_port(const struct tk_sg *s)
{
    return s ? s->port : 0;
}

pid_t tk_sg_pid(const struct tk_sg *s)
{
    return s ? s->pid : 0;
}

const char *tk_sg_dir(const struct tk_sg *s)
{
    return s ? s->dir : NULL;
}

const char *tk_sg_db(const struct tk_sg *s)
{
    return s ? s->db : NULL;
}

const char *tk_sg_log(const struct tk_sg *s)
{
    return s ? s->log : NULL;
}
