/* Child processes for tests, tracked by PID and never left behind. */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <dirent.h>
#include <grp.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "proc.h"

extern char **environ;

#define TRACK_MAX 256

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static pid_t tracked[TRACK_MAX];
static int atexit_done;

static void kill_all(void)
{
    pthread_mutex_lock(&lock);
    for (int i = 0; i < TRACK_MAX; i++) {
        if (tracked[i] > 0) {
            kill(tracked[i], SIGKILL);
            waitpid(tracked[i], NULL, 0);
            tracked[i] = 0;
        }
    }
    pthread_mutex_unlock(&lock);
}

static void track(pid_t pid, int on)
{
    pthread_mutex_lock(&lock);
    if (!atexit_done) {
        atexit(kill_all);
        atexit_done = 1;
    }
    for (int i = 0; i < TRACK_MAX; i++) {
        if (on && tracked[i] == 0) {
            tracked[i] = pid;
            break;
        }
        if (!on && tracked[i] == pid) {
            tracked[i] = 0;
            break;
        }
    }
    pthread_mutex_unlock(&lock);
}

long long hp_now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

void hp_sleep_ms(long ms)
{
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
    while (nanosleep(&ts, &ts) < 0 && errno == EINTR) {
    }
}

int hp_log_line(int fd, const char *fmt, ...)
{
    char line[1024];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(line, sizeof(line) - 1, fmt, ap);
    va_end(ap);
    if (n < 0)
        return -1;
    if ((size_t)n > sizeof(line) - 2)
        n = (int)sizeof(line) - 2;
    line[n++] = '\n';
    return write(fd, line, (size_t)n) == n ? 0 : -1;
}

pid_t hp_spawn_io(char *const argv[], char *const env_extra[], const char *log_path, int *in_fd, int *out_fd)
{
    return hp__spawn_as(argv, env_extra, log_path, in_fd, out_fd, NULL);
}

pid_t hp__spawn_as(char *const argv[], char *const env_extra[], const char *log_path, int *in_fd, int *out_fd,
                   const struct hp__as *as)
{
    if (argv == NULL || argv[0] == NULL)
        return -EINVAL;
    /* Build the environment before fork: the child only calls
     * async-signal-safe functions. */
    size_t n_env = 0, n_extra = 0;
    while (environ[n_env])
        n_env++;
    while (env_extra && env_extra[n_extra])
        n_extra++;
    char **envp = calloc(n_env + n_extra + 1, sizeof(*envp));
    if (envp == NULL)
        return -ENOMEM;
    size_t k = 0;
    for (size_t i = 0; i < n_env; i++) {
        /* An extra NAME=... replaces the inherited one. */
        int replaced = 0;
        const char *eq = strchr(environ[i], '=');
        size_t nlen = eq ? (size_t)(eq - environ[i]) : strlen(environ[i]);
        for (size_t j = 0; j < n_extra; j++)
            if (strncmp(env_extra[j], environ[i], nlen) == 0 && env_extra[j][nlen] == '=')
                replaced = 1;
        if (!replaced)
            envp[k++] = environ[i];
    }
    for (size_t j = 0; j < n_extra; j++)
        envp[k++] = env_extra[j];

    int logfd = -1;
    if (log_path != NULL) {
        logfd = open(log_path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
        if (logfd < 0) {
            int e = errno;
            fprintf(stderr, "harness: open %s: %s\n", log_path, strerror(e));
            free(envp);
            return -e;
        }
    }
    int errpipe[2] = {-1, -1}, inp[2] = {-1, -1}, outp[2] = {-1, -1};
    pid_t parent = getpid(), pid = -1;
    if (pipe2(errpipe, O_CLOEXEC) < 0 || (in_fd && pipe2(inp, O_CLOEXEC) < 0) ||
        (out_fd && pipe2(outp, O_CLOEXEC) < 0) || (pid = fork()) < 0) {
        int e = errno;
        free(envp);
        int fds[] = {logfd, errpipe[0], errpipe[1], inp[0], inp[1], outp[0], outp[1]};
        for (size_t i = 0; i < sizeof(fds) / sizeof(fds[0]); i++)
            if (fds[i] >= 0)
                close(fds[i]);
        return -e;
    }
    if (pid == 0) {
        /* Another user first: a change of credentials clears the death
         * signal, so it is asked for after it. */
        if (as != NULL &&
            ((as->dir != NULL && chdir(as->dir) < 0) ||
             (as->switch_user && (setgroups(0, NULL) < 0 || setgid(as->gid) < 0 || setuid(as->uid) < 0)))) {
            int e = errno;
            ssize_t w = write(errpipe[1], &e, sizeof(e));
            (void)w;
            _exit(127);
        }
        /* Die with the thread that started us, even on a crash. */
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        if (getppid() != parent)
            _exit(127);
        int devnull = open("/dev/null", O_RDONLY);
        if (in_fd)
            dup2(inp[0], 0);
        else if (devnull >= 0)
            dup2(devnull, 0);
        if (logfd >= 0) {
            dup2(logfd, 1);
            dup2(logfd, 2);
        }
        if (out_fd)
            dup2(outp[1], 1);
        signal(SIGPIPE, SIG_DFL);
        execvpe(argv[0], argv, envp);
        int e = errno;
        ssize_t w = write(errpipe[1], &e, sizeof(e));
        (void)w;
        _exit(127);
    }
    close(errpipe[1]);
    free(envp);
    if (logfd >= 0)
        close(logfd);
    if (in_fd) {
        close(inp[0]);
        *in_fd = inp[1];
    }
    if (out_fd) {
        close(outp[1]);
        *out_fd = outp[0];
    }
    int e = 0;
    ssize_t r;
    do
        r = read(errpipe[0], &e, sizeof(e));
    while (r < 0 && errno == EINTR);
    close(errpipe[0]);
    if (r == (ssize_t)sizeof(e)) {
        waitpid(pid, NULL, 0);
        fprintf(stderr, "harness: cannot run %s: %s\n", argv[0], strerror(e));
        if (in_fd)
            close(*in_fd);
        if (out_fd)
            close(*out_fd);
        return -e;
    }
    track(pid, 1);
    return pid;
}

pid_t hp_spawn(char *const argv[], char *const env_extra[], const char *log_path)
{
    return hp_spawn_io(argv, env_extra, log_path, NULL, NULL);
}

int hp_wait(pid_t pid, int timeout_ms, int *status)
{
    if (pid <= 0)
        return -EINVAL;
    long long deadline = hp_now_ms() + timeout_ms;
    for (;;) {
        int st = 0;
        pid_t r = waitpid(pid, &st, WNOHANG);
        if (r == pid) {
            track(pid, 0);
            if (status)
                *status = st;
            return 0;
        }
        if (r < 0 && errno != EINTR)
            return -errno;
        if (hp_now_ms() >= deadline)
            return -ETIMEDOUT;
        hp_sleep_ms(5);
    }
}

int hp_signal(pid_t pid, int sig, int timeout_ms)
{
    if (pid <= 0)
        return -EINVAL;
    if (kill(pid, sig) < 0)
        return -errno;
    if (sig == SIGKILL)
        return hp_wait(pid, 10000, NULL);
    if (sig == SIGTERM) {
        kill(pid, SIGCONT); /* a stopped process cannot act on SIGTERM */
        if (hp_wait(pid, timeout_ms, NULL) == 0)
            return 0;
        kill(pid, SIGKILL);
        return hp_wait(pid, 10000, NULL);
    }
    return 0;
}

/* The state letter of /proc/<pid>/task/<tid>/stat, or 0. */
static char thread_state(pid_t pid, const char *tid)
{
    char path[384], buf[512];
    snprintf(path, sizeof(path), "/proc/%d/task/%s/stat", (int)pid, tid);
    FILE *f = fopen(path, "r");
    if (f == NULL)
        return 0;
    size_t n = fread(buf, 1, sizeof(buf) - 1, f);
    fclose(f);
    buf[n] = '\0';
    char *rp = strrchr(buf, ')'); /* the name may hold spaces and parentheses */
    return rp != NULL && rp[1] == ' ' ? rp[2] : 0;
}

int hp__wait_stopped(pid_t pid, int timeout_ms)
{
    char dir[64];
    snprintf(dir, sizeof(dir), "/proc/%d/task", (int)pid);
    long long deadline = hp_now_ms() + timeout_ms;
    for (;;) {
        DIR *d = opendir(dir);
        if (d == NULL)
            return -errno;
        int running = 0;
        struct dirent *e;
        while ((e = readdir(d)) != NULL) {
            if (e->d_name[0] == '.')
                continue;
            char st = thread_state(pid, e->d_name);
            running |= st != 'T' && st != 't' && st != 0;
        }
        closedir(d);
        if (!running)
            return 0;
        if (hp_now_ms() >= deadline)
            return -ETIMEDOUT;
        hp_sleep_ms(1);
    }
}

int hp_run(char *const argv[], const char *log_path, int timeout_ms)
{
    pid_t pid = hp_spawn(argv, NULL, log_path);
    if (pid < 0)
        return -1;
    int st = 0;
    if (hp_wait(pid, timeout_ms, &st) != 0) {
        hp_signal(pid, SIGKILL, 1000);
        return -1;
    }
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

int hp_self_signed(const char *dir, const char *name, char *cert, char *key, size_t cap)
{
    char log[4096];
    if (dir == NULL || name == NULL || cert == NULL || key == NULL ||
        snprintf(cert, cap, "%s/%s-cert.pem", dir, name) >= (int)cap ||
        snprintf(key, cap, "%s/%s-key.pem", dir, name) >= (int)cap ||
        snprintf(log, sizeof(log), "%s/openssl.log", dir) >= (int)sizeof(log))
        return -1;
    char *argv[] = {"openssl",
                    "req",
                    "-x509",
                    "-newkey",
                    "ec",
                    "-pkeyopt",
                    "ec_paramgen_curve:P-256",
                    "-nodes",
                    "-keyout",
                    key,
                    "-out",
                    cert,
                    "-days",
                    "2",
                    "-subj",
                    "/CN=127.0.0.1",
                    "-addext",
                    "subjectAltName=IP:127.0.0.1",
                    NULL};
    if (hp_run(argv, log, 20000) != 0)
        return -1;
    return chmod(key, 0600) == 0 ? 0 : -1;
}
