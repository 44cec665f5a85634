/* Running the fencelock command in tests (cli_harness.h). */
#include <errno.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "cli_harness.h"
#include "proc.h"

const char *fencelock_bin(void)
{
    const char *b = getenv("FENCELOCK_BIN");
    if (b == NULL || *b == '\0')
        fail_msg("FENCELOCK_BIN is not set: run this test through meson");
    return b;
}

struct fixture *fx_new(int n, const char *tag)
{
    struct fixture *f = calloc(1, sizeof(*f));
    assert_non_null(f);
    f->run_timeout_ms = 20000;
    assert_int_equal(rh_mkdtemp(tag, f->dir, sizeof(f->dir)), 0);
    if (n == 0) {
        snprintf(f->nodes, sizeof(f->nodes), "127.0.0.1:1");
        return f;
    }
    assert_int_equal(rh_cluster_start(n, NULL, &f->rc), 0);
    size_t len = 0;
    for (int i = 0; i < n; i++)
        len +=
            (size_t)snprintf(f->nodes + len, sizeof(f->nodes) - len, "%s%s", i ? "," : "", rh_url(f->rc, i));
    return f;
}

int fx_teardown(void **state)
{
    struct fixture *f = *state;
    rh_cluster_free(f->rc);
    rh_rmtree(f->dir);
    free(f);
    return 0;
}

void path_in(struct fixture *f, const char *name, char *buf, size_t cap)
{
    snprintf(buf, cap, "%s/%s", f->dir, name);
}

/* The shell only redirects stderr and then execs fencelock, so the PID is
 * fencelock's. */
void spawn(struct fixture *f, struct child *ch, char *const *env, const char *const *args)
{
    char *argv[64];
    int k = 0;
    argv[k++] = "sh";
    argv[k++] = "-c";
    argv[k++] = "exec \"$0\" \"$@\" 2>\"$FL_TEST_ERR\"";
    argv[k++] = (char *)fencelock_bin();
    if (f->timeout != NULL) {
        argv[k++] = "--timeout";
        argv[k++] = (char *)f->timeout;
    }
    for (int i = 0; args[i] != NULL; i++) {
        assert_true(k < 63);
        argv[k++] = (char *)args[i];
    }
    argv[k] = NULL;
    int seq = f->seq++;
    snprintf(ch->out_path, sizeof(ch->out_path), "%s/fl%d.out", f->dir, seq);
    snprintf(ch->err_path, sizeof(ch->err_path), "%s/fl%d.err", f->dir, seq);
    char nodes_env[1100], err_env[400];
    char *envp[16];
    int e = 0;
    snprintf(nodes_env, sizeof(nodes_env), "FENCELOCK_NODES=%s", f->nodes);
    snprintf(err_env, sizeof(err_env), "FL_TEST_ERR=%s", ch->err_path);
    envp[e++] = nodes_env;
    envp[e++] = err_env;
    for (int i = 0; env != NULL && env[i] != NULL; i++) {
        assert_true(e < 15);
        envp[e++] = env[i];
    }
    envp[e] = NULL;
    /* hp_spawn replaces inherited variables with extras but keeps every
     * extra: drop our FENCELOCK_NODES if the caller gives one. */
    for (int i = 2; i < e; i++)
        if (strncmp(envp[i], "FENCELOCK_NODES=", 16) == 0)
            envp[0] = "FL_TEST_UNUSED=1";
    ch->started_ms = hp_now_ms();
    ch->pid = hp_spawn(argv, envp, ch->out_path);
    assert_true(ch->pid > 0);
}

void read_file(const char *path, char *buf, size_t cap)
{
    buf[0] = '\0';
    FILE *fp = fopen(path, "r");
    if (fp == NULL)
        return;
    size_t n = fread(buf, 1, cap - 1, fp);
    buf[n] = '\0';
    fclose(fp);
}

void collect(struct child *ch, int timeout_ms, struct res *r)
{
    int status = 0;
    int rc = hp_wait(ch->pid, timeout_ms, &status);
    if (rc == -ETIMEDOUT) {
        hp_signal(ch->pid, SIGKILL, 0);
        fail_msg("fencelock still running after %d ms", timeout_ms);
    }
    assert_int_equal(rc, 0);
    r->ms = hp_now_ms() - ch->started_ms;
    r->code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    read_file(ch->out_path, r->out, sizeof(r->out));
    read_file(ch->err_path, r->err, sizeof(r->err));
}

void run_args(struct fixture *f, struct res *r, char *const *env, const char *const *args)
{
    struct child ch;
    spawn(f, &ch, env, args);
    collect(&ch, f->run_timeout_ms, r);
}

void vfl(struct fixture *f, struct res *r, char *const *env, va_list ap)
{
    const char *args[60];
    int n = 0;
    for (const char *a = va_arg(ap, const char *); a != NULL; a = va_arg(ap, const char *)) {
        assert_true(n < 59);
        args[n++] = a;
    }
    args[n] = NULL;
    run_args(f, r, env, args);
}

void fl(struct fixture *f, struct res *r, ...)
{
    va_list ap;
    va_start(ap, r);
    vfl(f, r, NULL, ap);
    va_end(ap);
}

void fl_env(struct fixture *f, struct res *r, char *const *env, ...)
{
    va_list ap;
    va_start(ap, env);
    vfl(f, r, env, ap);
    va_end(ap);
}

json_t *one_json_line(const struct res *r)
{
    const char *nl = strchr(r->out, '\n');
    if (nl == NULL || nl[1] != '\0')
        fail_msg("stdout is not one line: '%s' (stderr: %s)", r->out, r->err);
    json_error_t e;
    json_t *j = json_loads(r->out, 0, &e);
    if (j == NULL || !json_is_object(j))
        fail_msg("stdout is not a JSON object: %s (%s)", r->out, e.text);
    return j;
}

const char *jstr(json_t *j, const char *key)
{
    json_t *v = json_object_get(j, key);
    if (!json_is_string(v))
        fail_msg("'%s' is not a string", key);
    return json_string_value(v);
}

long long jint(json_t *j, const char *key)
{
    json_t *v = json_object_get(j, key);
    if (!json_is_integer(v))
        fail_msg("'%s' is not an integer", key);
    return json_integer_value(v);
}

int jbool(json_t *j, const char *key)
{
    json_t *v = json_object_get(j, key);
    if (!json_is_boolean(v))
        fail_msg("'%s' is not a boolean", key);
    return json_is_true(v);
}

void has_keys(json_t *j, ...)
{
    va_list ap;
    va_start(ap, j);
    size_t n = 0;
    for (const char *k = va_arg(ap, const char *); k != NULL; k = va_arg(ap, const char *)) {
        if (json_object_get(j, k) == NULL)
            fail_msg("key '%s' missing", k);
        n++;
    }
    va_end(ap);
    assert_int_equal(json_object_size(j), n);
}

void acq_of(const char *id, char out[41])
{
    memmove(out, id, 34); /* out may be id */
    memset(out + 34, '0', 6);
    out[40] = '\0';
}
