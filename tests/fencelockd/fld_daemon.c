/* fencelockd processes and HTTP calls for the tests. */
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

#include "fld_daemon.h"

void fld_nodes(struct rh_cluster *rc, char *buf, size_t cap)
{
    size_t n = 0;
    buf[0] = '\0';
    for (int i = 0; i < rh_size(rc) && n < cap; i++)
        n += (size_t)snprintf(buf + n, cap - n, "%s127.0.0.1:%d", i ? "," : "", rh_port(rc, i));
}

void fld_start(struct fld *d, const char *nodes, const char *const *extra_args)
{
    memset(d, 0, sizeof(*d));
    assert_int_equal(rh_mkdtemp("fld", d->dir, sizeof(d->dir)), 0);
    snprintf(d->log, sizeof(d->log), "%s/fencelockd.log", d->dir);
    char port_file[320];
    snprintf(port_file, sizeof(port_file), "%s/port", d->dir);
    const char *exe = getenv("FLD_EXE") ? getenv("FLD_EXE") : "fencelockd";
    /* A node's answer may take more than the default 50 ms on a loaded
     * machine; a test that wants another timeout gives its own (the last
     * one given counts). */
    const char *argv[48] = {exe,           "--nodes", nodes,       "--listen", "127.0.0.1:0",
                            "--port-file", port_file, "--timeout", "150ms"};
    size_t n = 9;
    for (size_t i = 0; extra_args != NULL && extra_args[i] != NULL && n < 47; i++)
        argv[n++] = extra_args[i];
    argv[n] = NULL;
    d->pid = hp_spawn((char *const *)argv, NULL, d->log);
    assert_true(d->pid > 0);
    long long deadline = hp_now_ms() + 10000;
    while (hp_now_ms() < deadline) {
        FILE *f = fopen(port_file, "r");
        unsigned p = 0;
        if (f != NULL) {
            int ok = fscanf(f, "%u", &p) == 1;
            fclose(f);
            if (ok && p > 0) {
                d->port = (uint16_t)p;
                return;
            }
        }
        int st;
        if (hp_wait(d->pid, 0, &st) == 0) {
            d->pid = 0;
            fail_msg("fencelockd exited at start-up; see %s", d->log);
        }
        hp_sleep_ms(10);
    }
    fail_msg("fencelockd wrote no port within 10 s; see %s", d->log);
}

int fld_stop(struct fld *d, int timeout_ms)
{
    if (d->pid <= 0)
        return 0;
    int st = 0;
    kill(d->pid, SIGTERM);
    if (hp_wait(d->pid, timeout_ms, &st) != 0) {
        hp_signal(d->pid, SIGKILL, 1000);
        d->pid = 0;
        fail_msg("fencelockd did not exit within %d ms of SIGTERM", timeout_ms);
    }
    d->pid = 0;
    return st;
}

void fld_destroy(struct fld *d)
{
    if (d->pid > 0)
        hp_signal(d->pid, SIGKILL, 1000);
    d->pid = 0;
    if (d->dir[0] && getenv("FLD_KEEP") == NULL)
        rh_rmtree(d->dir);
    d->dir[0] = '\0';
}

void fld_call(const struct fld *d, const char *method, const char *path, const char *body,
              const char *headers, struct hc_response *r)
{
    char h[1024];
    snprintf(h, sizeof(h), "%s%s", body ? "Content-Type: application/json\r\n" : "", headers ? headers : "");
    int rc = hc_request(d->port, method, path, h, body, body ? strlen(body) : 0, r);
    if (rc != 0)
        fail_msg("%s %s: no answer (%s)", method, path, strerror(-rc));
}

const char *fld_expect(const struct fld *d, const char *method, const char *path, const char *body, int want,
                       const char *field, char *buf, size_t cap)
{
    struct hc_response r = {0};
    fld_call(d, method, path, body, NULL, &r);
    if (r.status != want) {
        fprintf(stderr, "%s %s -> %d %s\n", method, path, r.status, r.body ? r.body : "");
        hc_response_clear(&r);
        fail_msg("%s %s: want %d", method, path, want);
    }
    if (buf != NULL) {
        buf[0] = '\0';
        const char *s = r.json ? json_string_value(json_object_get(r.json, field)) : NULL;
        snprintf(buf, cap, "%s", s ? s : "");
    }
    hc_response_clear(&r);
    return buf;
}

long long fld_int(const struct hc_response *r, const char *field)
{
    json_t *v = r->json ? json_object_get(r->json, field) : NULL;
    return json_is_integer(v) ? (long long)json_integer_value(v) : -1;
}

int fld_acquire(const struct fld *d, const char *resource, const char *body, char *id, size_t cap,
                unsigned long long *token)
{
    char path[1024];
    char *enc = hc_escape(resource, strlen(resource));
    snprintf(path, sizeof(path), "/v1/locks/%s", enc);
    free(enc);
    struct hc_response r = {0};
    fld_call(d, "POST", path, body, NULL, &r);
    int st = r.status;
    if (st == 200) {
        const char *s = json_string_value(json_object_get(r.json, "lock_id"));
        snprintf(id, cap, "%s", s ? s : "");
        if (token)
            *token = (unsigned long long)fld_int(&r, "token");
    }
    hc_response_clear(&r);
    return st;
}

int fld_fx_setup(void **state)
{
    struct fld_fx *f = calloc(1, sizeof(*f));
    assert_non_null(f);
    assert_int_equal(rh_cluster_start(3, NULL, &f->rc), 0);
    fld_nodes(f->rc, f->nodes, sizeof(f->nodes));
    *state = f;
    return 0;
}

int fld_fx_setup_started(void **state)
{
    fld_fx_setup(state);
    struct fld_fx *f = *state;
    fld_start(&f->d, f->nodes, NULL);
    return 0;
}

int fld_fx_teardown(void **state)
{
    struct fld_fx *f = *state;
    fld_destroy(&f->d);
    rh_cluster_free(f->rc);
    free(f);
    return 0;
}
