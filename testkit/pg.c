/* A throwaway PostgreSQL cluster for tests: initdb in a temporary
 * directory, the postmaster on a free loopback port, stopped by its PID. */
#include <errno.h>
#include <pwd.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <libpq-fe.h>

#include "proc.h"

#define SETTINGS_MAX 32
#define STOP_TIMEOUT_MS 30000
#define DEBIAN_BINDIR "/usr/lib/postgresql/15/bin"

struct tk_pg {
    char bindir[256];
    char **settings; /* NULL-terminated copy */
    int start_timeout_ms;
    struct hp__as as; /* who initdb and postgres run as */
    pid_t pid;
    uint16_t port;
    char dir[256];
    char data[320];
    char log[320];
    char url[128];
};

void tk_pg_options_init(struct tk_pg_options *o)
{
    if (o == NULL)
        return;
    memset(o, 0, sizeof(*o));
    o->start_timeout_ms = 30000;
}

static void dump_log(const struct tk_pg *p)
{
    FILE *f = fopen(p->log, "r");
    if (f == NULL)
        return;
    char line[1024];
    fprintf(stderr, "---- %s ----\n", p->log);
    while (fgets(line, sizeof(line), f))
        fputs(line, stderr);
    fclose(f);
}

/* initdb and postgres refuse to run as root: as root, run them as another
 * user, who gets the cluster's directory. */
static int pick_user(struct tk_pg *p, const char *name)
{
    if (geteuid() != 0)
        return 0;
    struct passwd *pw = NULL;
    if (name != NULL)
        pw = getpwnam(name);
    else if ((pw = getpwnam("postgres")) == NULL)
        pw = getpwnam("nobody");
    if (pw == NULL || pw->pw_uid == 0) {
        fprintf(stderr, "testkit: running as root, and %s%s%s is not a user to run PostgreSQL as\n",
                name ? "'" : "", name ? name : "neither postgres nor nobody", name ? "'" : "");
        return -ENOENT;
    }
    p->as.switch_user = 1;
    p->as.uid = pw->pw_uid;
    p->as.gid = pw->pw_gid;
    return 0;
}

static void program(const struct tk_pg *p, const char *name, char *buf, size_t cap)
{
    if (p->bindir[0] != '\0')
        snprintf(buf, cap, "%s/%s", p->bindir, name);
    else
        snprintf(buf, cap, "%s", name); /* searched in PATH */
}

/* Run a program of the cluster's bindir to its end, as the cluster's user. */
static int run_tool(struct tk_pg *p, char *const argv[], int timeout_ms)
{
    pid_t pid = hp__spawn_as(argv, NULL, p->log, NULL, NULL, &p->as);
    if (pid < 0)
        return (int)pid;
    int st = 0;
    if (hp_wait(pid, timeout_ms, &st) != 0) {
        hp_signal(pid, SIGKILL, 0);
        fprintf(stderr, "testkit: %s did not finish within %d ms\n", argv[0], timeout_ms);
        return -ETIMEDOUT;
    }
    if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) {
        fprintf(stderr, "testkit: %s failed (status %d)\n", argv[0], st);
        dump_log(p);
        return -ECHILD;
    }
    return 0;
}

static int initdb(struct tk_pg *p)
{
    char exe[300];
    program(p, "initdb", exe, sizeof(exe));
    /* --no-sync: a test cluster need not survive a power loss of its
     * creation; the server itself still fsyncs every commit. */
    char *argv[] = {exe,  "-D",   p->data,      "-U",        "fencelock",         "--auth=trust",
                    "-E", "UTF8", "--locale=C", "--no-sync", "--no-instructions", NULL};
    return run_tool(p, argv, 60000);
}

/* Start the postmaster on p->port and wait until it accepts connections.
 * -ECHILD: it exited (a port taken, among others). */
static int launch(struct tk_pg *p)
{
    char exe[300], port[16];
    program(p, "postgres", exe, sizeof(exe));
    snprintf(port, sizeof(port), "%u", (unsigned)p->port);
    char *argv[16 + 2 * SETTINGS_MAX];
    int n = 0;
    argv[n++] = exe;
    argv[n++] = "-D";
    argv[n++] = p->data;
    argv[n++] = "-p";
    argv[n++] = port;
    /* Loopback only, and no Unix socket (whose path could be too long). */
    argv[n++] = "-c";
    argv[n++] = "listen_addresses=127.0.0.1";
    argv[n++] = "-c";
    argv[n++] = "unix_socket_directories=";
    argv[n++] = "-c";
    argv[n++] = "max_connections=200";
    for (int i = 0; p->settings[i] != NULL; i++) {
        argv[n++] = "-c";
        argv[n++] = p->settings[i];
    }
    argv[n] = NULL;
    pid_t pid = hp__spawn_as(argv, NULL, p->log, NULL, NULL, &p->as);
    if (pid < 0)
        return (int)pid;
    p->pid = pid;
    char conninfo[160];
    snprintf(conninfo, sizeof(conninfo),
             "host=127.0.0.1 port=%u user=fencelock dbname=postgres connect_timeout=2", (unsigned)p->port);
    long long deadline = hp_now_ms() + p->start_timeout_ms;
    while (hp_now_ms() < deadline) {
        int st;
        if (hp_wait(p->pid, 0, &st) == 0) {
            p->pid = 0;
            return -ECHILD;
        }
        if (PQping(conninfo) == PQPING_OK)
            return 0;
        hp_sleep_ms(20);
    }
    fprintf(stderr, "testkit: postgres did not accept connections within %d ms\n", p->start_timeout_ms);
    dump_log(p);
    hp_signal(p->pid, SIGKILL, 0);
    p->pid = 0;
    return -ETIMEDOUT;
}

int tk_pg_start(const struct tk_pg_options *o, struct tk_pg **out)
{
    if (out == NULL)
        return -EINVAL;
    struct tk_pg_options def;
    if (o == NULL) {
        tk_pg_options_init(&def);
        o = &def;
    }
    size_t n_set = 0;
    while (o->settings != NULL && o->settings[n_set] != NULL)
        n_set++;
    if (o->start_timeout_ms < 0 || n_set > SETTINGS_MAX)
        return -EINVAL;
    struct tk_pg *p = calloc(1, sizeof(*p));
    if (p == NULL)
        return -ENOMEM;
    int rc = -ENOMEM;
    p->start_timeout_ms = o->start_timeout_ms > 0 ? o->start_timeout_ms : 30000;
    if ((p->settings = calloc(n_set + 1, sizeof(char *))) == NULL)
        goto out;
    for (size_t i = 0; i < n_set; i++)
        if ((p->settings[i] = strdup(o->settings[i])) == NULL)
            goto out;
    const char *bindir = o->bindir;
    if (bindir == NULL)
        bindir = getenv("PG_BINDIR");
    if ((bindir == NULL || bindir[0] == '\0') && access(DEBIAN_BINDIR "/initdb", X_OK) == 0)
        bindir = DEBIAN_BINDIR;
    snprintf(p->bindir, sizeof(p->bindir), "%s", bindir ? bindir : "");
    if ((rc = pick_user(p, o->os_user)) != 0)
        goto out;
    if ((rc = rh_mkdtemp("pg", p->dir, sizeof(p->dir))) != 0) {
        p->dir[0] = '\0';
        goto out;
    }
    if (p->as.switch_user && chown(p->dir, p->as.uid, p->as.gid) < 0) {
        rc = -errno;
        fprintf(stderr, "testkit: chown %s: %s\n", p->dir, strerror(errno));
        goto out;
    }
    p->as.dir = p->dir;
    snprintf(p->data, sizeof(p->data), "%s/data", p->dir);
    snprintf(p->log, sizeof(p->log), "%s/postgres.log", p->dir);
    if ((rc = initdb(p)) != 0)
        goto out;
    /* A port found free may be taken before the postmaster binds it. */
    for (int attempt = 0; attempt < 8; attempt++) {
        int port = rh_free_port();
        if (port < 0) {
            rc = port;
            break;
        }
        p->port = (uint16_t)port;
        rc = launch(p);
        if (rc != -ECHILD)
            break;
    }
    if (rc != 0) {
        fprintf(stderr, "testkit: postgres did not start (%s)\n", strerror(-rc));
        dump_log(p);
        goto out;
    }
    snprintf(p->url, sizeof(p->url), "postgresql://fencelock@127.0.0.1:%u/postgres", (unsigned)p->port);
    *out = p;
    return 0;
out:
    tk_pg_free(p);
    return rc;
}

int tk_pg_stop(struct tk_pg *p, int immediate)
{
    if (p == NULL || p->pid <= 0)
        return -ESRCH;
    /* SIGINT: fast shutdown (backends ended, a checkpoint). SIGQUIT:
     * immediate shutdown, no checkpoint: the next start recovers from the
     * WAL, as after a crash. */
    kill(p->pid, immediate ? SIGQUIT : SIGINT);
    int st = 0;
    int rc = hp_wait(p->pid, STOP_TIMEOUT_MS, &st);
    if (rc != 0) {
        hp_signal(p->pid, SIGKILL, 0);
        p->pid = 0;
        dump_log(p);
        return -ETIMEDOUT;
    }
    p->pid = 0;
    return 0;
}

int tk_pg_restart(struct tk_pg *p, int immediate)
{
    if (p == NULL)
        return -EINVAL;
    if (p->pid > 0) {
        int rc = tk_pg_stop(p, immediate);
        if (rc != 0)
            return rc;
    }
    /* The same port: the clients keep their URL. Another process may hold
     * it for a moment; retry briefly. */
    int rc = -EADDRINUSE;
    for (int attempt = 0; attempt < 20 && rc != 0; attempt++) {
        rc = launch(p);
        if (rc == -ECHILD)
            hp_sleep_ms(100);
        else if (rc != 0)
            break;
    }
    if (rc != 0) {
        fprintf(stderr, "testkit: postgres did not start again (%s)\n", strerror(-rc));
        dump_log(p);
    }
    return rc;
}

int tk_pg_exec(struct tk_pg *p, const char *sql)
{
    if (p == NULL || sql == NULL || p->pid <= 0)
        return -EINVAL;
    PGconn *c = PQconnectdb(p->url);
    int rc = 0;
    if (PQstatus(c) != CONNECTION_OK) {
        fprintf(stderr, "testkit: connect to %s: %s", p->url, PQerrorMessage(c));
        rc = -ECONNREFUSED;
    } else {
        PGresult *r = PQexec(c, sql);
        ExecStatusType st = PQresultStatus(r);
        if (st != PGRES_COMMAND_OK && st != PGRES_TUPLES_OK) {
            fprintf(stderr, "testkit: %s: %s", sql, PQerrorMessage(c));
            rc = -EIO;
        }
        PQclear(r);
    }
    PQfinish(c);
    return rc;
}

void tk_pg_free(struct tk_pg *p)
{
    if (p == NULL)
        return;
    if (p->pid > 0) {
        kill(p->pid, SIGQUIT); /* fastest clean way out; no checkpoint */
        if (hp_wait(p->pid, STOP_TIMEOUT_MS, NULL) != 0)
            hp_signal(p->pid, SIGKILL, 0);
    }
    if (p->dir[0] != '\0' && getenv("FENCELOCK_KEEP_TMP") == NULL)
        rh_rmtree(p->dir);
    for (size_t i = 0; p->settings != NULL && p->settings[i] != NULL; i++)
        free(p->settings[i]);
    free(p->settings);
    free(p);
}

uint16_t tk_pg_port(const struct tk_pg *p)
{
    return p ? p->port : 0;
}

pid_t tk_pg_pid(const struct tk_pg *p)
{
    return p ? p->pid : 0;
}

const char *tk_pg_url(const struct tk_pg *p)
{
    return p ? p->url : NULL;
}

const char *tk_pg_dir(const struct tk_pg *p)
{
    return p ? p->dir : NULL;
}

const char *tk_pg_log(const struct tk_pg *p)
{
    return p ? p->log : NULL;
}
