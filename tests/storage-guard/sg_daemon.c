/* Starting and stopping a storage-guard process for the tests. */
#define _XOPEN_SOURCE 700
#include <errno.h>
#include <ftw.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "proc.h"
#include "sg_daemon.h"

#define START_TIMEOUT_MS 15000
#define STOP_TIMEOUT_MS 20000

void sgd_init(struct sgd *d)
{
    memset(d, 0, sizeof(*d));
    const char *tmp = getenv("TMPDIR");
    snprintf(d->dir, sizeof(d->dir), "%s/sg-test-XXXXXX", tmp && *tmp ? tmp : "/tmp");
    assert_non_null(mkdtemp(d->dir));
    snprintf(d->db, sizeof(d->db), "%s/records.db", d->dir);
    snprintf(d->port_file, sizeof(d->port_file), "%s/port", d->dir);
    snprintf(d->log, sizeof(d->log), "%s/storage-guard.log", d->dir);
}

static void dump_log(const struct sgd *d)
{
    FILE *f = fopen(d->log, "r");
    if (f == NULL)
        return;
    char line[1024];
    fprintf(stderr, "---- %s ----\n", d->log);
    while (fgets(line, sizeof(line), f))
        fputs(line, stderr);
    fclose(f);
}

void sgd_start(struct sgd *d, const char *const *extra_args)
{
    const char *exe = getenv("SG_EXE");
    if (exe == NULL)
        fail_msg("SG_EXE is not set (run the tests with meson test)");
    char *argv[32];
    int n = 0;
    argv[n++] = (char *)exe;
    argv[n++] = "--db";
    argv[n++] = d->db;
    argv[n++] = "--listen";
    argv[n++] = "127.0.0.1:0";
    argv[n++] = "--port-file";
    argv[n++] = d->port_file;
    argv[n++] = "--log-level";
    argv[n++] = "debug";
    for (int i = 0; extra_args && extra_args[i] && n < 31; i++)
        argv[n++] = (char *)extra_args[i];
    argv[n] = NULL;
    unlink(d->port_file);
    d->pid = hp_spawn(argv, NULL, d->log);
    assert_true(d->pid > 0);
    long long deadline = hp_now_ms() + START_TIMEOUT_MS;
    while (hp_now_ms() < deadline) {
        FILE *f = fopen(d->port_file, "r");
        unsigned port = 0;
        if (f != NULL) {
            int ok = fscanf(f, "%u", &port) == 1;
            fclose(f);
            if (ok && port > 0 && port < 65536) {
                d->port = (uint16_t)port;
                return;
            }
        }
        int st;
        if (hp_wait(d->pid, 0, &st) == 0) {
            d->pid = 0;
            dump_log(d);
            fail_msg("storage-guard exited at start-up (status %d)", st);
        }
        hp_sleep_ms(10);
    }
    dump_log(d);
    fail_msg("storage-guard did not write its port within %d ms", START_TIMEOUT_MS);
}

int sgd_stop(struct sgd *d)
{
    if (d->pid <= 0)
        return -1;
    int st = -1;
    assert_int_equal(kill(d->pid, SIGTERM), 0);
    if (hp_wait(d->pid, STOP_TIMEOUT_MS, &st) != 0) {
        hp_signal(d->pid, SIGKILL, 0);
        d->pid = 0;
        dump_log(d);
        fail_msg("storage-guard did not stop within %d ms of SIGTERM", STOP_TIMEOUT_MS);
    }
    d->pid = 0;
    if (!WIFEXITED(st) || WEXITSTATUS(st) != 0)
        dump_log(d);
    return st;
}

void sgd_kill9(struct sgd *d)
{
    if (d->pid <= 0)
        return;
    assert_int_equal(hp_signal(d->pid, SIGKILL, 0), 0);
    d->pid = 0;
}

static int rm_entry(const char *path, const struct stat *sb, int flag, struct FTW *ftw)
{
    (void)sb;
    (void)flag;
    (void)ftw;
    remove(path);
    return 0;
}

void sgd_destroy(struct sgd *d)
{
    if (d->pid > 0) {
        hp_signal(d->pid, SIGKILL, 0);
        d->pid = 0;
    }
    if (d->dir[0] != '\0' && getenv("SG_KEEP_TMP") == NULL)
        nftw(d->dir, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
    d->dir[0] = '\0';
}
