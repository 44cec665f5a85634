/* Starting and stopping a storage-guard process for the tests, through the
 * test kit. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include <fencelock-testkit/testkit.h>

#include "sg_daemon.h"

static struct tk_pg *backend_pg;

int sgd_backend_start(void **state)
{
    (void)state;
    const char *b = getenv("SG_TEST_DB");
    if (b == NULL || strcmp(b, "sqlite") == 0)
        return 0;
    if (strcmp(b, "postgresql") != 0)
        fail_msg("SG_TEST_DB is '%s', not sqlite or postgresql", b);
    int rc = tk_pg_start(NULL, &backend_pg);
    if (rc != 0)
        fail_msg("PostgreSQL did not start: %s (its log is above)", strerror(-rc));
    return 0;
}

int sgd_backend_stop(void **state)
{
    (void)state;
    tk_pg_free(backend_pg);
    backend_pg = NULL;
    return 0;
}

const char *sgd_backend_url(void)
{
    return backend_pg ? tk_pg_url(backend_pg) : NULL;
}

void sgd_backend_reset(void)
{
    if (backend_pg == NULL)
        return;
    /* The tables exist once a storage-guard has started on the database. */
    int rc = tk_pg_exec(backend_pg, "DO $$ BEGIN IF to_regclass('storage_guard.sg_log') IS NOT NULL THEN"
                                    " TRUNCATE storage_guard.sg_records, storage_guard.sg_log, "
                                    "storage_guard.sg_deleted, fencelock.last_token RESTART IDENTITY;"
                                    " END IF; END $$");
    if (rc != 0)
        fail_msg("could not empty the tables: %s", strerror(-rc));
}

void sgd_init(struct sgd *d)
{
    memset(d, 0, sizeof(*d));
    assert_int_equal(rh_mkdtemp("sg-test", d->dir, sizeof(d->dir)), 0);
    sgd_backend_reset();
    /* The names the kit gives them in its directory. */
    snprintf(d->db, sizeof(d->db), "%s/records.db", d->dir);
    if (sgd_backend_url() != NULL)
        snprintf(d->db, sizeof(d->db), "%s", sgd_backend_url());
    snprintf(d->port_file, sizeof(d->port_file), "%s/port", d->dir);
    snprintf(d->log, sizeof(d->log), "%s/storage-guard.log", d->dir);
}

void sgd_start(struct sgd *d, const char *const *extra_args)
{
    if (getenv("SG_EXE") == NULL)
        fail_msg("SG_EXE is not set (run the tests with meson test)");
    tk_sg_free(d->sg); /* a previous run, stopped: the directory stays */
    d->sg = NULL;
    struct tk_sg_options o;
    tk_sg_options_init(&o);
    o.dir = d->dir;
    o.db = d->db;
    o.log_level = "debug";
    o.extra_args = extra_args;
    int rc = tk_sg_start(&o, &d->sg);
    if (rc != 0)
        fail_msg("storage-guard did not start: %s (its log is above)", strerror(-rc));
    d->pid = tk_sg_pid(d->sg);
    d->port = tk_sg_port(d->sg);
}

int sgd_stop(struct sgd *d)
{
    if (d->sg == NULL || d->pid <= 0)
        return -1;
    int rc = tk_sg_stop(d->sg);
    d->pid = 0;
    if (rc == -ETIMEDOUT)
        fail_msg("storage-guard did not stop within 20 s of SIGTERM");
    return rc; /* 0: it exited with status 0 */
}

void sgd_kill9(struct sgd *d)
{
    if (d->sg == NULL || d->pid <= 0)
        return;
    assert_int_equal(tk_sg_kill(d->sg), 0);
    d->pid = 0;
}

int sgd_wait(struct sgd *d, int timeout_ms)
{
    int st = 0;
    int rc = tk_sg_wait(d->sg, timeout_ms, &st);
    if (rc != 0)
        fail_msg("storage-guard did not exit within %d ms: %s", timeout_ms, strerror(-rc));
    d->pid = 0;
    return st;
}

void sgd_destroy(struct sgd *d)
{
    tk_sg_free(d->sg); /* kills it if it runs */
    d->sg = NULL;
    d->pid = 0;
    if (d->dir[0] != '\0' && getenv("SG_KEEP_TMP") == NULL)
        rh_rmtree(d->dir);
    d->dir[0] = '\0';
}
