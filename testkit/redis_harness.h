/*
 * A test harness that runs real redis-server processes on free 127.0.0.1
 * ports, each in its own temporary directory, and lets a test stop, kill,
 * restart (with or without data), pause and resume them, or move one
 * node's wall clock (libfaketime).
 *
 * Processes are only ever signalled by the PID the harness started. They
 * are also killed when the test process exits (atexit) or dies (the
 * children ask the kernel for SIGKILL when their parent thread ends), so a
 * failed or crashed test leaves nothing behind.
 *
 * Errors: functions returning int give 0 or a negative errno, and print
 * why on stderr (this is test code: the message is for the person reading
 * the test log).
 */
#ifndef FENCELOCK_REDIS_HARNESS_H
#define FENCELOCK_REDIS_HARNESS_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include <hiredis/hiredis.h>

struct rh_options {
    const char *user;     /* ACL user (needs password); NULL: default user */
    const char *password; /* NULL: no authentication */
    int persistent;       /* 1: appendonly yes, appendfsync always */
    int faketime;         /* 1: run under libfaketime; see rh_clock_offset() */
    const char *server;   /* redis-server binary; default $REDIS_SERVER or "redis-server" */
    /* TLS: with tls_cert, each node also listens with TLS on a port of its
     * own, and rh_url() names that port as rediss://. The plain port stays
     * open for the harness's own connection (rh_command). PEM paths, copied. */
    const char *tls_cert;
    const char *tls_key;
    const char *tls_ca;   /* CA the nodes verify client certificates with */
    int tls_auth_clients; /* 1: nodes require a client certificate */
};

void rh_options_init(struct rh_options *o);

struct rh_cluster;

/* Start n (1..16) nodes. o may be NULL for the defaults. */
int rh_cluster_start(int n, const struct rh_options *o, struct rh_cluster **out);

/* Kill every node (by PID), remove their directories, free. Accepts NULL. */
void rh_cluster_free(struct rh_cluster *c);

int rh_size(const struct rh_cluster *c);
int rh_port(const struct rh_cluster *c, int i);
int rh_tls_port(const struct rh_cluster *c, int i); /* 0 without TLS */
pid_t rh_pid(const struct rh_cluster *c, int i);    /* 0 while the node is down */
const char *rh_dir(const struct rh_cluster *c, int i);

/* "redis://[user:password@]127.0.0.1:port", valid until rh_cluster_free. */
const char *rh_url(const struct rh_cluster *c, int i);

/* Run a command on node i over the harness's own connection (authenticated,
 * db 0), reconnecting if needed. Returns the reply (free it with
 * freeReplyObject) or NULL if the node cannot be reached. */
redisReply *rh_command(struct rh_cluster *c, int i, const char *fmt, ...);

/* Shorthands for tests that look at one key on the nodes. A node that is
 * down reads as "" / -2. */
void rh_get(struct rh_cluster *c, int i, const char *key, char *out, size_t cap); /* "" if none */
long long rh_pttl(struct rh_cluster *c, int i, const char *key);                  /* -2 if none */
int rh_set(struct rh_cluster *c, int i, const char *key, const char *val);        /* SET ... PX 60000 */
unsigned rh_holders(struct rh_cluster *c, const char *key, const char *val);      /* nodes where key == val */

/* FLUSHALL on every running node. */
int rh_flushall(struct rh_cluster *c);

/* SIGKILL node i and reap it. */
int rh_kill(struct rh_cluster *c, int i);

/* Start node i again on its port; keep_data 0 wipes its directory first
 * (a node restarted without its data). Kills it first if it runs. */
int rh_restart(struct rh_cluster *c, int i, int keep_data);

/* SIGSTOP / SIGCONT node i. */
int rh_pause(struct rh_cluster *c, int i);
int rh_resume(struct rh_cluster *c, int i);

/* Move node i's wall clock by offset_s seconds from real time (needs
 * faketime in the options). Redis reads the change within about 2 s; this
 * call waits until the node's TIME shows it, up to 10 s. */
int rh_clock_offset(struct rh_cluster *c, int i, long offset_s);

/* A free TCP port on 127.0.0.1 (bound and released: another process may
 * take it before the caller does, so callers retry on EADDRINUSE). */
int rh_free_port(void);

/* Make a fresh temporary directory "/tmp/fencelock-<tag>-XXXXXX" into buf;
 * rh_rmtree removes a directory tree. */
int rh_mkdtemp(const char *tag, char *buf, size_t cap);
int rh_rmtree(const char *dir);

#endif
