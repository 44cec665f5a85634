/* What the examples share; see example.h. */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "example.h"
#include "http.h"
#include "proc.h"

long long ex_now_ms(void)
{
    return hp_now_ms();
}

void ex_sleep_ms(long ms)
{
    hp_sleep_ms(ms);
}

const char *ex_program(const char *env, const char *rel, const char *name)
{
    static char path[8][4096];
    static int next;
    const char *v = getenv(env);
    if (v != NULL && *v != '\0')
        return v;
    char self[4000];
    ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);
    if (n > 0) {
        self[n] = '\0';
        char *slash = strrchr(self, '/');
        if (slash != NULL) {
            *slash = '\0';
            char *p = path[next++ % 8];
            snprintf(p, sizeof(path[0]), "%s/../../%s", self, rel);
            if (access(p, X_OK) == 0)
                return p;
        }
    }
    return name;
}

int ex_store_start(struct ex_store *s, const char *tag, int unfenced)
{
    (void)tag;
    memset(s, 0, sizeof(*s));
    static const char *const threads[] = {"--threads", "8", NULL};
    struct tk_sg_options o;
    tk_sg_options_init(&o);
    o.exe = ex_program("FENCELOCK_STORAGE_GUARD", "storage-guard/storage-guard", "storage-guard");
    o.unfenced = unfenced;
    o.log_level = "warn";
    o.extra_args = threads;
    int rc = tk_sg_start(&o, &s->sg);
    if (rc < 0) {
        fprintf(stderr, "cannot start %s: %s\n", o.exe, strerror(-rc));
        return -1;
    }
    s->port = tk_sg_port(s->sg);
    snprintf(s->dir, sizeof(s->dir), "%s", tk_sg_dir(s->sg));
    return 0;
}

void ex_store_stop(struct ex_store *s)
{
    if (s->sg == NULL)
        return;
    tk_sg_stop(s->sg);
    if (getenv("FENCELOCK_EXAMPLE_KEEP") != NULL)
        setenv("SG_KEEP_TMP", "1", 1);
    tk_sg_free(s->sg);
    s->sg = NULL;
    s->dir[0] = '\0';
}

int ex_redis_start(int n, struct rh_cluster **out, const char **urls)
{
    if (rh_cluster_start(n, NULL, out) != 0) {
        fprintf(stderr, "cannot start %d redis-server nodes (is redis-server in PATH?)\n", n);
        return -1;
    }
    for (int i = 0; i < n; i++)
        urls[i] = rh_url(*out, i);
    return 0;
}

int ex_http(uint16_t port, const char *method, const char *path, json_t *body, json_t **out,
            uint64_t *version)
{
    char *text = body ? json_dumps(body, JSON_COMPACT) : NULL;
    struct hc_response r;
    memset(&r, 0, sizeof(r));
    int rc = hc_request(port, method, path, NULL, text, text ? strlen(text) : 0, &r);
    free(text);
    if (out != NULL)
        *out = NULL;
    if (rc != 0)
        return 0;
    int status = r.status;
    if (version != NULL) {
        char etag[64];
        *version = 0;
        if (hc_header(&r, "ETag", etag, sizeof(etag)) != NULL)
            *version = strtoull(etag[0] == '"' ? etag + 1 : etag, NULL, 10);
    }
    if (out != NULL && r.json != NULL)
        *out = json_incref(r.json);
    hc_response_clear(&r);
    return status;
}

int ex_barrier_init(struct ex_barrier *b)
{
    return pipe2(b->fd, O_CLOEXEC);
}

void ex_barrier_wait(struct ex_barrier *b, int timeout_ms)
{
    struct pollfd p = {.fd = b->fd[0], .events = POLLIN};
    poll(&p, 1, timeout_ms);
}

void ex_barrier_open(struct ex_barrier *b)
{
    if (b->fd[1] >= 0)
        close(b->fd[1]);
    b->fd[1] = -1;
}

pid_t ex_fork(int (*fn)(void *), void *arg, struct ex_barrier *close_in_child)
{
    fflush(stdout);
    fflush(stderr);
    pid_t pid = fork();
    if (pid == 0) {
        prctl(PR_SET_PDEATHSIG, SIGKILL); /* no client outlives the example */
        if (close_in_child != NULL && close_in_child->fd[1] >= 0)
            close(close_in_child->fd[1]); /* else the barrier never opens */
        int rc = fn(arg);
        fflush(stdout);
        fflush(stderr);
        _exit(rc);
    }
    return pid;
}

int ex_wait_stopped(pid_t pid, int timeout_ms)
{
    long long deadline = ex_now_ms() + timeout_ms;
    while (ex_now_ms() < deadline) {
        int st;
        pid_t r = waitpid(pid, &st, WUNTRACED | WNOHANG);
        if (r == pid && WIFSTOPPED(st))
            return 0;
        if (r == pid)
            return -1; /* it ended instead */
        ex_sleep_ms(5);
    }
    return -1;
}

int ex_wait_all(const pid_t *pids, int *status, int n, long long deadline_ms)
{
    int ended = 0;
    for (int i = 0; i < n; i++)
        status[i] = -2; /* not yet */
    while (ended < n && ex_now_ms() < deadline_ms) {
        int progress = 0;
        for (int i = 0; i < n; i++) {
            if (status[i] != -2)
                continue;
            int st;
            pid_t r = waitpid(pids[i], &st, WNOHANG);
            if (r == pids[i]) {
                status[i] = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
                ended++;
                progress = 1;
            }
        }
        if (!progress)
            ex_sleep_ms(10);
    }
    for (int i = 0; i < n; i++) {
        if (status[i] == -2) {
            kill(pids[i], SIGKILL);
            waitpid(pids[i], NULL, 0);
            status[i] = -1;
        }
    }
    return ended;
}
