/*
 * A real storage-guard process for the tests, through the test kit
 * (tk_sg): a temporary directory made first, so that a test can put files
 * there (or read the database's and port file's modes) around its starts;
 * each start may pass other arguments.
 *
 * The database is a file in that directory, or with SG_TEST_DB=postgresql
 * (the "-pg" runs of the tests) a PostgreSQL cluster of the test kit,
 * started once per test program by sgd_backend_start; every sgd_init then
 * starts from empty tables.
 */
#ifndef SG_TEST_DAEMON_H
#define SG_TEST_DAEMON_H

#include <stdint.h>
#include <sys/types.h>

struct tk_sg;

struct sgd {
    struct tk_sg *sg;
    pid_t pid; /* 0 while it is down */
    uint16_t port;
    char dir[256];
    char db[512]; /* a file in dir, or the PostgreSQL URL */
    char port_file[512];
    char log[512];
};

/* The database backend of this test program: nothing for SQLite; for
 * SG_TEST_DB=postgresql, start the cluster (fails the test if it cannot).
 * A cmocka group setup / teardown. */
int sgd_backend_start(void **state);
int sgd_backend_stop(void **state);

/* The PostgreSQL URL of the backend, or NULL on SQLite. */
const char *sgd_backend_url(void);

/* Empty storage-guard's tables in PostgreSQL (no-op on SQLite), with no
 * storage-guard running. */
void sgd_backend_reset(void);

/* Make a fresh temporary directory for d (database, port file, log), and
 * an empty database. */
void sgd_init(struct sgd *d);

/*
 * Start storage-guard on a free loopback port with d's database, plus
 * extra_args (NULL-terminated, may be NULL), and wait (bounded) until it
 * writes its port. Fails the test on error.
 */
void sgd_start(struct sgd *d, const char *const *extra_args);

/* SIGTERM and wait; returns the exit status as waitpid reports it. */
int sgd_stop(struct sgd *d);

/* SIGKILL and reap. */
void sgd_kill9(struct sgd *d);

/* Wait up to timeout_ms for it to exit after a signal the test sent to
 * d->pid; returns waitpid's status. Fails the test if it does not exit. */
int sgd_wait(struct sgd *d, int timeout_ms);

/* Stop if running, then remove the temporary directory. */
void sgd_destroy(struct sgd *d);

#endif
