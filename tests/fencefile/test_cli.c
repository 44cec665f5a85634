/* fencelock write / append / fence: their JSON and exit codes, and the
 * nightly report of the issue "Fencing beyond one record" against real
 * redis-server nodes: a job under `fencelock run` frozen past its TTL while
 * a second job takes the lock and writes the report. With `fencelock
 * write` the frozen job's late write is refused every time; with a plain
 * temporary file and mv (the control) it overwrites the second job's
 * report. The binary is $FENCELOCK_BIN. */
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <dirent.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <sys/xattr.h>
#include <unistd.h>

#include <cmocka.h>
#include <jansson.h>

#include "proc.h"
#include "redis_harness.h"

#define X_USAGE 64
#define X_STALE 65
#define X_BUSY 75

struct fixture {
    struct rh_cluster *rc; /* NULL for tests that need no node */
    char dir[256];
    char nodes[1024];
    pid_t frozen_sh; /* a job shell that stopped itself, to kill on failure */
};

static const char *fencelock_bin(void)
{
    const char *b = getenv("FENCELOCK_BIN");
    if (b == NULL || *b == '\0')
        fail_msg("FENCELOCK_BIN is not set: run this test through meson");
    return b;
}

static int setup_n(void **state, int n)
{
    struct fixture *f = calloc(1, sizeof(*f));
    assert_non_null(f);
    assert_int_equal(rh_mkdtemp("filecli", f->dir, sizeof(f->dir)), 0);
    /* The tests expect fences in xattrs where the file system keeps them. */
    if (setxattr(f->dir, "user.fencelock.probe", "1", 1, 0) < 0)
        fail_msg(
            "%s: no user xattrs (%s): run the tests with TMPDIR on ext4, XFS, btrfs or tmpfs (Linux 6.6+)",
            f->dir, strerror(errno));
    if (n > 0) {
        assert_int_equal(rh_cluster_start(n, NULL, &f->rc), 0);
        size_t len = 0;
        for (int i = 0; i < n; i++)
            len += (size_t)snprintf(f->nodes + len, sizeof(f->nodes) - len, "%s%s", i ? "," : "",
                                    rh_url(f->rc, i));
    }
    *state = f;
    return 0;
}

static int setup0(void **state)
{
    return setup_n(state, 0);
}

static int setup3(void **state)
{
    return setup_n(state, 3);
}

static char proc_state(pid_t pid)
{
    char path[64], buf[512];
    snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
    FILE *fp = fopen(path, "r");
    if (fp == NULL)
        return 0;
    size_t n = fread(buf, 1, sizeof(buf) - 1, fp);
    fclose(fp);
    buf[n] = '\0';
    const char *p = strrchr(buf, ')');
    return p != NULL && p[1] == ' ' ? p[2] : 0;
}

static int teardown(void **state)
{
    struct fixture *f = *state;
    /* A job shell left stopped by a failed trial: it is ours (its PID came
     * from its own pid file and it is still stopped). */
    if (f->frozen_sh > 0 && proc_state(f->frozen_sh) == 'T')
        kill(f->frozen_sh, SIGKILL);
    rh_cluster_free(f->rc);
    rh_rmtree(f->dir);
    free(f);
    return 0;
}

static void slurp(const char *path, char *buf, size_t cap)
{
    buf[0] = '\0';
    FILE *fp = fopen(path, "r");
    if (fp == NULL)
        return;
    size_t n = fread(buf, 1, cap - 1, fp);
    buf[n] = '\0';
    fclose(fp);
}

static void in_dir(struct fixture *f, const char *name, char *buf, size_t cap)
{
    snprintf(buf, cap, "%s/%s", f->dir, name);
}

struct res {
    int code;
    char out[4096];
    char err[4096];
};

/* Start a shell script with $FL (the binary), $D (the test directory) and
 * the preload shims $NOXATTR and $FSFAULT; its stdout and stderr go to
 * $D/TAG.out and $D/TAG.err. With in_fd, its stdin is a pipe whose write
 * end is stored there. */
static pid_t sh_start(struct fixture *f, const char *script, const char *tag, int *in_fd)
{
    char wrapped[4096], fl[600], d[300], nodes[1100], nx[600], fsf[600];
    /* Braces, not a subshell: an exec in script keeps the PID. */
    snprintf(wrapped, sizeof(wrapped), "{ %s\n} >\"$D/%s.out\" 2>\"$D/%s.err\"", script, tag, tag);
    snprintf(fl, sizeof(fl), "FL=%s", fencelock_bin());
    snprintf(d, sizeof(d), "D=%s", f->dir);
    snprintf(nodes, sizeof(nodes), "FENCELOCK_NODES=%s", f->nodes);
    char *argv[] = {"sh", "-c", wrapped, NULL};
    const char *so = getenv("NOXATTR_SO");
    snprintf(nx, sizeof(nx), "NOXATTR=%s", so != NULL ? so : "");
    so = getenv("FSFAULT_SO");
    snprintf(fsf, sizeof(fsf), "FSFAULT=%s", so != NULL ? so : "");
    char *env[] = {fl, d, nodes, nx, fsf, NULL};
    pid_t pid = hp_spawn_io(argv, env, NULL, in_fd, NULL);
    assert_true(pid > 0);
    return pid;
}

/* Wait (up to 20 s) for a script sh_start started, and collect it. */
static void sh_wait(struct fixture *f, struct res *r, pid_t pid, const char *tag, const char *script)
{
    int st = 0;
    if (hp_wait(pid, 20000, &st) != 0) {
        hp_signal(pid, SIGKILL, 0);
        fail_msg("script still running after 20 s: %s", script);
    }
    char path[400];
    r->code = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
    snprintf(path, sizeof(path), "%s/%s.out", f->dir, tag);
    slurp(path, r->out, sizeof(r->out));
    snprintf(path, sizeof(path), "%s/%s.err", f->dir, tag);
    slurp(path, r->err, sizeof(r->err));
}

/* Run a shell script as sh_start does, to its end. */
static void sh(struct fixture *f, struct res *r, const char *script)
{
    sh_wait(f, r, sh_start(f, script, "sh", NULL), "sh", script);
}

static json_t *one_json_line(const struct res *r)
{
    const char *nl = strchr(r->out, '\n');
    if (nl == NULL || nl[1] != '\0')
        fail_msg("stdout is not one line: '%s' (stderr: %s)", r->out, r->err);
    json_error_t e;
    json_t *j = json_loads(r->out, 0, &e);
    if (j == NULL || !json_is_object(j))
        fail_msg("stdout is not a JSON object: %s", r->out);
    return j;
}

/* The object is exactly {k1: v1, ...}, the values given as JSON text. */
static void json_is(const struct res *r, const char *expect)
{
    json_t *j = one_json_line(r);
    json_error_t e;
    json_t *x = json_loads(expect, 0, &e);
    assert_non_null(x);
    if (!json_equal(j, x))
        fail_msg("got %s, expected %s", r->out, expect);
    json_decref(j);
    json_decref(x);
}

/* One line on stderr. */
static void one_err_line(const struct res *r, const char *needle)
{
    const char *nl = strchr(r->err, '\n');
    if (nl == NULL || nl[1] != '\0')
        fail_msg("stderr is not one line: '%s'", r->err);
    if (strstr(r->err, needle) == NULL)
        fail_msg("stderr '%s' does not say '%s'", r->err, needle);
}

static void test_cli_file_commands_print_json_and_exit_codes(void **state)
{
    struct fixture *f = *state;
    struct res r;
    char got[256], p[300];
    in_dir(f, "rep", p, sizeof(p));

    sh(f, &r, "cd \"$D\" && printf 'v1' | FENCELOCK_TOKEN=100 \"$FL\" write rep");
    assert_int_equal(r.code, 0);
    json_is(&r, "{\"path\":\"rep\",\"fence\":\"file\",\"token\":100,\"previous\":0}");
    assert_string_equal(r.err, "");
    slurp(p, got, sizeof(got));
    assert_string_equal(got, "v1");

    /* Stale: exit 65, one line on stderr, nothing on stdout, file intact. */
    sh(f, &r, "cd \"$D\" && printf 'old' | FENCELOCK_TOKEN=100 \"$FL\" write --token 99 rep");
    assert_int_equal(r.code, X_STALE);
    assert_string_equal(r.out, "");
    one_err_line(&r, "token 99 is older than 100");
    slurp(p, got, sizeof(got));
    assert_string_equal(got, "v1");

    /* Equal admitted; append; fence. */
    sh(f, &r, "cd \"$D\" && printf '+a' | \"$FL\" append --token 100 rep");
    assert_int_equal(r.code, 0);
    json_is(&r, "{\"path\":\"rep\",\"fence\":\"file\",\"token\":100,\"previous\":100}");
    sh(f, &r, "cd \"$D\" && printf '+b' | \"$FL\" append --token 101 rep");
    assert_int_equal(r.code, 0);
    sh(f, &r, "cd \"$D\" && printf '+c' | \"$FL\" append --token 100 rep");
    assert_int_equal(r.code, X_STALE);
    one_err_line(&r, "refused");
    slurp(p, got, sizeof(got));
    assert_string_equal(got, "v1+a+b");
    sh(f, &r, "cd \"$D\" && \"$FL\" fence rep");
    assert_int_equal(r.code, 0);
    json_is(&r, "{\"path\":\"rep\",\"fence\":\"file\",\"token\":101,\"store\":\"xattr\"}");
    sh(f, &r, "cd \"$D\" && \"$FL\" fence none");
    json_is(&r, "{\"path\":\"none\",\"fence\":\"file\",\"token\":0,\"store\":null}");

    /* A directory fence, and the sidecar. */
    sh(f, &r, "cd \"$D\" && mkdir -p site/sub && printf x | \"$FL\" write --dir site --token 7 site/sub/a");
    assert_int_equal(r.code, 0);
    json_is(&r, "{\"path\":\"site/sub/a\",\"fence\":\"directory\",\"token\":7,\"previous\":0}");
    sh(f, &r, "cd \"$D\" && printf y | \"$FL\" write --dir site --token 6 site/b");
    assert_int_equal(r.code, X_STALE);
    sh(f, &r, "cd \"$D\" && \"$FL\" fence site");
    json_is(&r, "{\"path\":\"site\",\"fence\":\"directory\",\"token\":7,\"store\":\"xattr\"}");
    sh(f, &r, "cd \"$D\" && printf s | \"$FL\" write --sidecar --token 5 side && \"$FL\" fence side");
    assert_int_equal(r.code, 0);
    assert_non_null(strstr(r.out, "\"store\":\"sidecar\""));

    /* Usage: no token, token 0, not a token, a lock option, two files, a
     * file outside --dir, a missing --dir. */
    const char *usage[] = {
        "printf x | env -u FENCELOCK_TOKEN \"$FL\" write \"$D/u\"",
        "printf x | FENCELOCK_TOKEN=0 \"$FL\" write \"$D/u\"",
        "printf x | \"$FL\" write --token 12abc \"$D/u\"",
        "printf x | \"$FL\" --ttl 1s write --token 1 \"$D/u\"",
        "printf x | \"$FL\" write --token 1 \"$D/u\" \"$D/v\"",
        "printf x | \"$FL\" write --token 1 --dir \"$D/site\" \"$D/u\"",
        "printf x | \"$FL\" write --token 1 --dir \"$D/nodir\" \"$D/u\"",
        "\"$FL\" fence",
    };
    for (size_t i = 0; i < sizeof(usage) / sizeof(usage[0]); i++) {
        sh(f, &r, usage[i]);
        if (r.code != X_USAGE)
            fail_msg("'%s' exited %d, not 64 (%s)", usage[i], r.code, r.err);
        assert_string_equal(r.out, "");
        assert_true(r.err[0] != '\0');
    }
    assert_int_equal(access("u", F_OK), -1);

    /* Another writer holds the fence past --wait: 75. */
    char lock[300];
    in_dir(f, ".rep.fencelock", lock, sizeof(lock));
    int lfd = open(lock, O_RDWR);
    assert_true(lfd >= 0);
    struct flock fl = {.l_type = F_WRLCK, .l_whence = SEEK_SET};
    assert_int_equal(fcntl(lfd, F_OFD_SETLK, &fl), 0);
    sh(f, &r, "printf z | \"$FL\" write --token 200 --wait 100ms \"$D/rep\"");
    close(lfd);
    assert_int_equal(r.code, X_BUSY);
    one_err_line(&r, "locked");
    sh(f, &r, "\"$FL\" write --help");
    assert_int_equal(r.code, 0);
    assert_non_null(strstr(r.out, "65 refused"));
}

/* On a file system without user xattrs (simulated by a preloaded shim that
 * makes fgetxattr/fsetxattr answer ENOTSUP), the fence goes to the sidecar
 * by itself, and holds. */
static void test_cli_file_fence_falls_back_to_the_sidecar_without_xattrs(void **state)
{
    struct fixture *f = *state;
    struct res r;
    char got[256], p[300], lock[300];
    const char *so = getenv("NOXATTR_SO");
    if (so == NULL || *so == '\0')
        fail_msg("NOXATTR_SO is not set: run this test through meson");
    /* The shim comes before an ASan runtime in the load order. */
    const char *nx =
        "LD_PRELOAD=\"$NOXATTR\" ASAN_OPTIONS=\"${ASAN_OPTIONS:+$ASAN_OPTIONS:}verify_asan_link_order=0\"";
    char script[1024];
    in_dir(f, "nx", p, sizeof(p));
    in_dir(f, ".nx.fencelock", lock, sizeof(lock));

    snprintf(script, sizeof(script), "printf one | %s \"$FL\" write --token 5 \"$D/nx\"", nx);
    sh(f, &r, script);
    assert_int_equal(r.code, 0);
    slurp(lock, got, sizeof(got));
    assert_string_equal(got, "00000000000000000005\n");
    char x[32];
    assert_int_equal(getxattr(p, "user.fencelock.token", x, sizeof(x)), -1);
    snprintf(script, sizeof(script), "printf two | %s \"$FL\" write --token 4 \"$D/nx\"", nx);
    sh(f, &r, script);
    assert_int_equal(r.code, X_STALE);
    snprintf(script, sizeof(script), "printf +3 | %s \"$FL\" append --token 6 \"$D/nx\"", nx);
    sh(f, &r, script);
    assert_int_equal(r.code, 0);
    slurp(p, got, sizeof(got));
    assert_string_equal(got, "one+3");
    snprintf(script, sizeof(script), "%s \"$FL\" fence \"$D/nx\"", nx);
    sh(f, &r, script);
    assert_int_equal(r.code, 0);
    assert_non_null(strstr(r.out, "\"token\":6,\"store\":\"sidecar\""));
    /* Without the shim (xattrs work) the fence is still 6: the larger of
     * the two places counts. */
    sh(f, &r, "printf four | \"$FL\" write --token 5 \"$D/nx\"");
    assert_int_equal(r.code, X_STALE);

    /* A directory fence falls back the same way. */
    snprintf(script, sizeof(script),
             "mkdir \"$D/nxd\" && printf a | %s \"$FL\" write --dir \"$D/nxd\" --token 9 \"$D/nxd/a\"", nx);
    sh(f, &r, script);
    assert_int_equal(r.code, 0);
    in_dir(f, "nxd/.fencelock", lock, sizeof(lock));
    slurp(lock, got, sizeof(got));
    assert_string_equal(got, "00000000000000000009\n");

    /* One file seen by a writer with xattrs and by one without (two NFS
     * clients): the fence the first raised is in the sidecar too, so the
     * second does not read 0 and admit a lower token. */
    sh(f, &r, "printf x50 | \"$FL\" write --token 50 \"$D/both\"");
    assert_int_equal(r.code, 0);
    snprintf(script, sizeof(script), "printf x40 | %s \"$FL\" write --token 40 \"$D/both\"", nx);
    sh(f, &r, script);
    assert_int_equal(r.code, X_STALE);
    one_err_line(&r, "older than 50");
    snprintf(script, sizeof(script), "printf +40 | %s \"$FL\" append --token 40 \"$D/both\"", nx);
    sh(f, &r, script);
    assert_int_equal(r.code, X_STALE);
    in_dir(f, "both", p, sizeof(p));
    slurp(p, got, sizeof(got));
    assert_string_equal(got, "x50");
    sh(f, &r, "mkdir \"$D/bothd\" && printf a | \"$FL\" write --dir \"$D/bothd\" --token 50 \"$D/bothd/a\"");
    assert_int_equal(r.code, 0);
    snprintf(script, sizeof(script),
             "printf b | %s \"$FL\" write --dir \"$D/bothd\" --token 40 \"$D/bothd/b\"", nx);
    sh(f, &r, script);
    assert_int_equal(r.code, X_STALE);
}

/* The fsfault shim before an ASan runtime in the load order. */
#define FSF "LD_PRELOAD=\"$FSFAULT\" ASAN_OPTIONS=\"${ASAN_OPTIONS:+$ASAN_OPTIONS:}verify_asan_link_order=0\""

/* The fence of path as `fencelock fence` reads it. */
static uint64_t cli_fence(struct fixture *f, const char *name)
{
    struct res r;
    char script[512];
    snprintf(script, sizeof(script), "\"$FL\" fence \"$D/%s\"", name);
    sh(f, &r, script);
    if (r.code != 0)
        fail_msg("fence %s: exit %d: %s", name, r.code, r.err);
    json_t *j = one_json_line(&r);
    uint64_t t = (uint64_t)json_integer_value(json_object_get(j, "token"));
    json_decref(j);
    return t;
}

/* The invariant of a file of records "T<token>...\n": the tokens never go
 * down from one record to the next, and the fence is not below the last. */
static void records_under_fence(struct fixture *f, const char *name)
{
    char path[400], buf[1024];
    in_dir(f, name, path, sizeof(path));
    slurp(path, buf, sizeof(buf));
    uint64_t prev = 0;
    for (char *line = buf; *line == 'T'; line = strchr(line, '\n') + 1) {
        uint64_t t = strtoull(line + 1, NULL, 10);
        if (t < prev)
            fail_msg("%s: token %llu appended after %llu:\n%s", name, (unsigned long long)t,
                     (unsigned long long)prev, buf);
        prev = t;
        if (strchr(line, '\n') == NULL)
            break;
    }
    uint64_t fence = cli_fence(f, name);
    if (fence < prev)
        fail_msg("%s: the fence %llu is below the last record's token %llu:\n%s", name,
                 (unsigned long long)fence, (unsigned long long)prev, buf);
}

/* Wait until a file exists or pid has exited (bounded). */
static void wait_file_or_exit(const char *path, pid_t pid, long ms)
{
    long long end = hp_now_ms() + ms;
    while (access(path, F_OK) != 0) {
        if (kill(pid, 0) != 0 || proc_state(pid) == 'Z' || hp_now_ms() > end)
            return;
        hp_sleep_ms(2);
    }
}

/*
 * The review's race, with the real binary: two appends to one file through
 * two names, token 7 paused 800 ms after reading the fence (the fsfault
 * shim) and token 100 meanwhile. Both landed (T100 then T7-stale) and the
 * fence went from 100 down to 7. Then the same with one name at a time:
 * the file renamed while the writer of token 7 is paused.
 */
static void test_cli_two_names_never_lower_a_fence(void **state)
{
    struct fixture *f = *state;
    struct res r, ra;
    char paused[300];
    in_dir(f, "paused", paused, sizeof(paused));

    /* Two hard links: refused through either name, the file untouched. */
    sh(f, &r, "cd \"$D\" && printf 'T5\\n' | \"$FL\" append --token 5 one && ln one two");
    assert_int_equal(r.code, 0);
    const char *slow =
        "cd \"$D\" && printf 'T7-stale\\n' | FSFAULT_PAUSE_MS=800 FSFAULT_PAUSED=\"$D/paused\" " FSF
        " \"$FL\" append --token 7 two";
    pid_t a = sh_start(f, slow, "a", NULL);
    wait_file_or_exit(paused, a, 5000);
    sh(f, &r, "cd \"$D\" && printf 'T100\\n' | \"$FL\" append --token 100 one");
    sh_wait(f, &ra, a, "a", slow);
    records_under_fence(f, "one");
    if (ra.code != X_USAGE || r.code != X_USAGE)
        fail_msg("appends through two names: exits %d and %d, want 64 and 64 (%s %s)", ra.code, r.code,
                 ra.err, r.err);
    assert_non_null(strstr(r.err, "hard links"));
    char got[256], path[300];
    in_dir(f, "one", path, sizeof(path));
    slurp(path, got, sizeof(got));
    assert_string_equal(got, "T5\n");

    /* A rename while the writer of token 7 is paused: the file itself is
     * locked, so the writer through the new name waits, then appends. */
    unlink(paused);
    sh(f, &r, "cd \"$D\" && printf 'T5\\n' | \"$FL\" append --token 5 r1");
    assert_int_equal(r.code, 0);
    slow = "cd \"$D\" && printf 'T7\\n' | FSFAULT_PAUSE_MS=800 FSFAULT_PAUSED=\"$D/paused\" " FSF
           " \"$FL\" append --token 7 r1";
    a = sh_start(f, slow, "a", NULL);
    wait_file_or_exit(paused, a, 5000);
    if (access(paused, F_OK) != 0)
        fail_msg("the writer of token 7 never read the fence");
    char r1[300], r2[300];
    in_dir(f, "r1", r1, sizeof(r1));
    in_dir(f, "r2", r2, sizeof(r2));
    assert_int_equal(rename(r1, r2), 0);
    sh(f, &r, "cd \"$D\" && printf 'T100\\n' | \"$FL\" append --token 100 --wait 5s r2");
    sh_wait(f, &ra, a, "a", slow);
    records_under_fence(f, "r2");
    assert_int_equal(ra.code, 0);
    assert_int_equal(r.code, 0);
    slurp(r2, got, sizeof(got));
    assert_string_equal(got, "T5\nT7\nT100\n");
    assert_int_equal(cli_fence(f, "r2"), 100);
}

/* Bytes this process has written (/proc/PID/io), -1 if unknown. */
static long long written(pid_t pid)
{
    char path[64], buf[1024];
    snprintf(path, sizeof(path), "/proc/%d/io", (int)pid);
    slurp(path, buf, sizeof(buf));
    const char *w = strstr(buf, "wchar:");
    return w != NULL ? strtoll(w + 6, NULL, 10) : -1;
}

/* Names in the test directory that are temporary files of "secret", with
 * the mode of the last one in *mode. */
static int temps_of_secret(struct fixture *f, unsigned *mode)
{
    DIR *dp = opendir(f->dir);
    assert_non_null(dp);
    struct dirent *e;
    int n = 0;
    while ((e = readdir(dp)) != NULL) {
        if (strncmp(e->d_name, ".secret.", 8) != 0 || strstr(e->d_name, ".fencetmp") == NULL)
            continue;
        char p[600];
        struct stat st;
        snprintf(p, sizeof(p), "%s/%s", f->dir, e->d_name);
        if (stat(p, &st) == 0) {
            *mode = (unsigned)(st.st_mode & 07777);
            n++;
        }
    }
    closedir(dp);
    return n;
}

/*
 * A replace used a 0644 temporary file (umask 022) until the data was in:
 * a 0600 file's new content was readable by anyone meanwhile, and a writer
 * killed before the chmod left it behind. Checked with the real binary,
 * stopped halfway through its input and then killed: with O_TMPFILE no
 * temporary file has a name at all; without (the fsfault shim, as on NFS)
 * it is 0600.
 */
static void test_cli_replace_temporary_is_private(void **state)
{
    struct fixture *f = *state;
    char p[300], got[64];
    in_dir(f, "secret", p, sizeof(p));
    int fd = open(p, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    assert_true(fd >= 0);
    assert_int_equal(write(fd, "old", 3), 3);
    close(fd);
    static char data[8192];
    memset(data, 's', sizeof(data));
    for (int named = 0; named < 2; named++) {
        const char *script = named ? "FSFAULT_NOTMPFILE=1 " FSF " exec \"$FL\" write --token 5 \"$D/secret\""
                                   : FSF " exec \"$FL\" write --token 5 \"$D/secret\"";
        int in = -1;
        pid_t pid = sh_start(f, script, "w", &in);
        assert_int_equal(write(in, data, 4096), 4096);
        long long end = hp_now_ms() + 5000;
        while (written(pid) < 4096 && hp_now_ms() < end)
            hp_sleep_ms(2);
        if (written(pid) < 4096)
            fail_msg("the writer did not take the first 4096 bytes");
        unsigned mode = 0;
        int n = temps_of_secret(f, &mode);
        if (named && n != 1)
            fail_msg("without O_TMPFILE: %d named temporary files, want 1", n);
        if (!named && n != 0)
            fail_msg("with O_TMPFILE: %d named temporary files while the data goes in, want 0", n);
        if (n > 0 && (mode & 077) != 0)
            fail_msg("the temporary file is %04o while the data goes in", mode);
        /* Killed now: what it leaves is as private. */
        hp_signal(pid, SIGKILL, 0);
        close(in);
        n = temps_of_secret(f, &mode);
        assert_int_equal(n, named);
        if (n > 0 && (mode & 077) != 0)
            fail_msg("the killed writer left a %04o temporary file", mode);
        slurp(p, got, sizeof(got));
        assert_string_equal(got, "old");
    }
    /* A whole write keeps the file's mode. */
    struct res r;
    sh(f, &r, "printf new | \"$FL\" write --token 5 \"$D/secret\"");
    assert_int_equal(r.code, 0);
    struct stat st;
    assert_int_equal(stat(p, &st), 0);
    assert_int_equal(st.st_mode & 07777, 0600);
    slurp(p, got, sizeof(got));
    assert_string_equal(got, "new");
}

/* Run `fencelock append --token token target < input`; its peak resident
 * set in KiB. */
static long append_rss_kib(struct fixture *f, const char *input, const char *target, const char *token)
{
    char log[300];
    in_dir(f, "append.log", log, sizeof(log));
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        int in = open(input, O_RDONLY);
        int out = open(log, O_WRONLY | O_CREAT | O_TRUNC, 0600);
        if (in < 0 || out < 0 || dup2(in, 0) < 0 || dup2(out, 1) < 0 || dup2(out, 2) < 0)
            _exit(120);
        execl(fencelock_bin(), "fencelock", "append", "--token", token, target, (char *)NULL);
        _exit(121);
    }
    struct rusage ru;
    int st = 0;
    long long end = hp_now_ms() + 60000;
    while (wait4(pid, &st, WNOHANG, &ru) == 0) {
        if (hp_now_ms() > end) {
            kill(pid, SIGKILL);
            waitpid(pid, &st, 0);
            fail_msg("fencelock append of %s still running after 60 s", input);
        }
        hp_sleep_ms(10);
    }
    if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) {
        char msg[1024];
        slurp(log, msg, sizeof(msg));
        fail_msg("fencelock append of %s: status %d: %s", input, st, msg);
    }
    return ru.ru_maxrss;
}

/* `fencelock append` read its whole input into memory (256 MiB in, 259
 * MiB resident) where `write` streams it. It streams now: 64 MiB more input
 * costs no more memory. */
static void test_cli_append_streams_in_bounded_memory(void **state)
{
    struct fixture *f = *state;
    char small[300], big[300], target[300];
    in_dir(f, "in.small", small, sizeof(small));
    in_dir(f, "in.big", big, sizeof(big));
    in_dir(f, "log", target, sizeof(target));
    int fd = open(small, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    assert_true(fd >= 0 && ftruncate(fd, 1 << 20) == 0);
    close(fd);
    fd = open(big, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    assert_true(fd >= 0 && ftruncate(fd, 65 << 20) == 0);
    close(fd);
    long rss_small = append_rss_kib(f, small, target, "5");
    long rss_big = append_rss_kib(f, big, target, "6");
    print_message("fencelock append: %ld KiB resident for 1 MiB, %ld KiB for 65 MiB\n", rss_small, rss_big);
    if (rss_big - rss_small > 16 * 1024)
        fail_msg("65 MiB of input took %ld KiB more memory than 1 MiB", rss_big - rss_small);
    struct stat st;
    assert_int_equal(stat(target, &st), 0);
    assert_int_equal(st.st_size, 66 << 20);
    unlink(big);
    unlink(target);
}

/* A FIFO planted as a lock file hung `fencelock fence`; a lock file that is
 * a hard link to another file got the fence written into that file. */
static void test_cli_planted_lock_files_are_refused(void **state)
{
    struct fixture *f = *state;
    struct res r;
    const char *fifo[] = {
        "cd \"$D\" && mkfifo .q.fencelock && \"$FL\" fence q",
        "cd \"$D\" && printf x | \"$FL\" write --token 5 q",
        "cd \"$D\" && printf x | \"$FL\" append --token 5 q",
        "cd \"$D\" && mkfifo fifo && printf x | \"$FL\" append --token 5 fifo",
        "cd \"$D\" && \"$FL\" fence fifo",
    };
    for (size_t i = 0; i < sizeof(fifo) / sizeof(fifo[0]); i++) {
        long long t0 = hp_now_ms();
        sh(f, &r, fifo[i]);
        if (r.code != X_USAGE || strstr(r.err, "not a regular file") == NULL)
            fail_msg("'%s': exit %d, want 64 and 'not a regular file': %s", fifo[i], r.code, r.err);
        assert_true(hp_now_ms() - t0 < 5000);
    }
    /* The other file is empty, so that it reads as no fence at all. */
    sh(f, &r,
       "cd \"$D\" && : > victim && ln victim .v.fencelock && printf x | \"$FL\" write --sidecar --token 5 v");
    assert_int_equal(r.code, X_USAGE);
    one_err_line(&r, "links");
    char got[64], p[300];
    in_dir(f, "victim", p, sizeof(p));
    slurp(p, got, sizeof(got));
    assert_string_equal(got, "");
}

/* ---- the nightly report ---- */

static int wait_content(const char *path, char *buf, size_t cap, long ms)
{
    long long end = hp_now_ms() + ms;
    do {
        slurp(path, buf, cap);
        if (buf[0] != '\0' && strchr(buf, '\n') != NULL)
            return 0;
        hp_sleep_ms(5);
    } while (hp_now_ms() < end);
    return -1;
}

static int wait_stopped(pid_t pid, long ms)
{
    long long end = hp_now_ms() + ms;
    while (proc_state(pid) != 'T') {
        if (hp_now_ms() >= end)
            return -1;
        hp_sleep_ms(2);
    }
    return 0;
}

/*
 * One night: job A runs under `fencelock run --ttl 400ms`, writes its pid
 * and token, and stops itself right before writing the report. The test
 * freezes A's fencelock as well (SIGSTOP), so nothing extends A's lock;
 * job B, under `fencelock run --wait`, gets the lock once A's TTL is gone
 * and writes the report. Then A's job resumes and writes, before its
 * fencelock (still frozen) can notice the loss: the race of the issue,
 * made certain. fenced: both jobs write with `fencelock write`; else with
 * a temporary file and mv. Returns 1 if A's late report replaced B's.
 */
static int night(struct fixture *f, int trial, int fenced)
{
    char resource[64], dir[400], script_a[1024], script_b[512], env_d[420], env_fl[600], env_nodes[1100];
    char log_a[440], log_b[440], buf[256];
    snprintf(resource, sizeof(resource), "nightly-%s-%d", fenced ? "fenced" : "plain", trial);
    snprintf(dir, sizeof(dir), "%s/%s", f->dir, resource);
    assert_int_equal(mkdir(dir, 0755), 0);
    snprintf(env_d, sizeof(env_d), "N=%s", dir);
    snprintf(env_fl, sizeof(env_fl), "FL=%s", fencelock_bin());
    snprintf(env_nodes, sizeof(env_nodes), "FENCELOCK_NODES=%s", f->nodes);
    snprintf(log_a, sizeof(log_a), "%s/a.log", dir);
    snprintf(log_b, sizeof(log_b), "%s/b.log", dir);
    const char *write_a =
        fenced ? "printf 'report by A\\n' | \"$FL\" write \"$N/report\""
               : "printf 'report by A\\n' > \"$N/.report.$$\" && mv \"$N/.report.$$\" \"$N/report\"";
    const char *write_b =
        fenced ? "printf 'report by B\\n' | \"$FL\" write \"$N/report\""
               : "printf 'report by B\\n' > \"$N/.report.$$\" && mv \"$N/.report.$$\" \"$N/report\"";
    snprintf(script_a, sizeof(script_a),
             "echo \"$FENCELOCK_TOKEN\" > \"$N/a.token\"; echo $$ > \"$N/a.pid\"; kill -STOP $$; "
             "%s; echo $? > \"$N/a.done\"",
             write_a);
    snprintf(script_b, sizeof(script_b), "echo \"$FENCELOCK_TOKEN\" > \"$N/b.token\"; %s", write_b);
    char *env[] = {env_d, env_fl, env_nodes, NULL};

    char *argv_a[] = {
        (char *)fencelock_bin(), "run", "--ttl", "400ms", resource, "--", "sh", "-c", script_a, NULL};
    pid_t run_a = hp_spawn(argv_a, env, log_a);
    assert_true(run_a > 0);
    char path[440];
    snprintf(path, sizeof(path), "%s/a.pid", dir);
    if (wait_content(path, buf, sizeof(buf), 5000) < 0)
        fail_msg("job A did not start (see %s)", log_a);
    pid_t sh_a = (pid_t)atoi(buf);
    f->frozen_sh = sh_a;
    assert_int_equal(wait_stopped(sh_a, 5000), 0);
    assert_int_equal(kill(run_a, SIGSTOP), 0);
    assert_int_equal(wait_stopped(run_a, 5000), 0);

    /* B waits for A's lock to run out, then writes. */
    char *argv_b[] = {(char *)fencelock_bin(),
                      "run",
                      "--ttl",
                      "400ms",
                      "--wait",
                      "5s",
                      "--retry-delay",
                      "20ms",
                      resource,
                      "--",
                      "sh",
                      "-c",
                      script_b,
                      NULL};
    pid_t run_b = hp_spawn(argv_b, env, log_b);
    assert_true(run_b > 0);
    int st = 0;
    assert_int_equal(hp_wait(run_b, 10000, &st), 0);
    if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) {
        slurp(log_b, buf, sizeof(buf));
        fail_msg("job B failed (%d): %s", st, buf);
    }
    snprintf(path, sizeof(path), "%s/report", dir);
    slurp(path, buf, sizeof(buf));
    assert_string_equal(buf, "report by B\n");

    /* A's job wakes up first and writes its report late. */
    assert_int_equal(kill(sh_a, SIGCONT), 0);
    snprintf(path, sizeof(path), "%s/a.done", dir);
    if (wait_content(path, buf, sizeof(buf), 5000) < 0)
        fail_msg("job A did not finish its write");
    f->frozen_sh = 0;
    int a_status = atoi(buf);
    assert_int_equal(kill(run_a, SIGCONT), 0);
    assert_int_equal(hp_wait(run_a, 10000, &st), 0);

    char ta[64], tb[64];
    snprintf(path, sizeof(path), "%s/a.token", dir);
    slurp(path, ta, sizeof(ta));
    snprintf(path, sizeof(path), "%s/b.token", dir);
    slurp(path, tb, sizeof(tb));
    /* B was granted the lock after A (a larger token), so A's had expired:
     * nothing extended it while A's fencelock was frozen. */
    assert_true(strtoull(ta, NULL, 10) > 0);
    assert_true(strtoull(ta, NULL, 10) < strtoull(tb, NULL, 10));
    snprintf(path, sizeof(path), "%s/report", dir);
    slurp(path, buf, sizeof(buf));
    if (fenced) {
        /* Refused with its own exit code; the fence is B's token. */
        assert_int_equal(a_status, X_STALE);
        slurp(log_a, buf, sizeof(buf));
        assert_non_null(strstr(buf, "refused"));
        struct res r;
        char script[512];
        snprintf(script, sizeof(script), "\"$FL\" fence \"$D/%s/report\"", resource);
        sh(f, &r, script);
        json_t *j = one_json_line(&r);
        assert_int_equal((uint64_t)json_integer_value(json_object_get(j, "token")), strtoull(tb, NULL, 10));
        json_decref(j);
        snprintf(path, sizeof(path), "%s/report", dir);
        slurp(path, buf, sizeof(buf));
    } else {
        assert_int_equal(a_status, 0);
    }
    return strcmp(buf, "report by A\n") == 0;
}

static void test_cli_nightly_report_stale_job_is_refused(void **state)
{
    struct fixture *f = *state;
    long long t0 = hp_now_ms();
    int lost = 0;
    for (int i = 0; i < 20; i++)
        lost += night(f, i, 1);
    long long t1 = hp_now_ms();
    int control = 0;
    for (int i = 0; i < 5; i++)
        control += night(f, i, 0);
    print_message("fencelock write: %d of 20 late reports landed (%lld ms); plain mv: %d of 5 (%lld ms)\n",
                  lost, t1 - t0, control, hp_now_ms() - t1);
    assert_int_equal(lost, 0);
    assert_true(control >= 1); /* the control proves the race bites */
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_cli_file_commands_print_json_and_exit_codes, setup0, teardown),
        cmocka_unit_test_setup_teardown(test_cli_file_fence_falls_back_to_the_sidecar_without_xattrs, setup0,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_cli_two_names_never_lower_a_fence, setup0, teardown),
        cmocka_unit_test_setup_teardown(test_cli_replace_temporary_is_private, setup0, teardown),
        cmocka_unit_test_setup_teardown(test_cli_append_streams_in_bounded_memory, setup0, teardown),
        cmocka_unit_test_setup_teardown(test_cli_planted_lock_files_are_refused, setup0, teardown),
        cmocka_unit_test_setup_teardown(test_cli_nightly_report_stale_job_is_refused, setup3, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
