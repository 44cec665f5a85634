/*
 * lockcore: the Redlock algorithm over N independent Redis masters, with a
 * fencing token on every grant.
 *
 * A lockcore_client holds one connection per node and runs every lock
 * operation as a small state machine: the commands of one step go to all
 * nodes at once (one round trip), and the step is decided as soon as its
 * outcome is known. The blocking calls (lockcore_acquire, ...) and the
 * non-blocking ones (lockcore_acquire_async + lockcore_run) share that core,
 * so one thread can keep hundreds of operations in flight, pipelined over
 * the same N connections.
 *
 * Thread safety: a client must be used by one thread at a time (like a
 * hiredis context). Use one client per thread, or serialize access.
 *
 * Errors: functions returning int give 0 on success, a negative errno
 * (-EINVAL, -ENOMEM, ...) for system and argument failures, or one of the
 * LOCKCORE_E* codes below. lockcore_strerror() names any of them;
 * lockcore_errmsg() gives the detail of the client's last failure (which
 * node said what).
 */
#ifndef LOCKCORE_LOCKCORE_H
#define LOCKCORE_LOCKCORE_H

#include <poll.h>
#include <stddef.h>
#include <stdint.h>

#if defined(LOCKCORE_BUILD) && defined(__GNUC__)
#define LOCKCORE_API __attribute__((visibility("default")))
#else
#define LOCKCORE_API
#endif

#ifdef __cplusplus
extern "C" {
#endif

/* Longest resource name in bytes (key prefix not included). */
#define LOCKCORE_RESOURCE_MAX 512
/* Longest key prefix in bytes. */
#define LOCKCORE_PREFIX_MAX 128
/* A lock id: 20 bytes from the OS random source, as 40 hex digits. */
#define LOCKCORE_ID_LEN 40
/* Most nodes a client may have. */
#define LOCKCORE_NODES_MAX 64

enum {
    LOCKCORE_ELOCKED = -10001,   /* not acquired: held by another client */
    LOCKCORE_ENOQUORUM = -10002, /* a majority of nodes unreachable or failing */
    LOCKCORE_ELOST = -10003,     /* the lock is no longer held (expired or taken) */
    LOCKCORE_EPROTO = -10004,    /* protocol or server error (bad reply, AUTH refused) */
    LOCKCORE_EFENCE = -10005,    /* no token could be agreed (tokens exhausted) */
    LOCKCORE_ECANCELED = -10006, /* operation canceled: the client was freed */
};

/*
 * Client options. lockcore_options_init() fills the defaults given here;
 * lockcore_client_new() validates and copies everything, so the struct and
 * the strings it points to may be freed once the client exists.
 */
struct lockcore_options {
    /* Node addresses: "redis://[user:password@]host:port[/db]" or "host:port".
     * Required; 1..LOCKCORE_NODES_MAX entries. */
    const char *const *nodes;
    size_t n_nodes;

    uint64_t ttl_ms;             /* lock time to live; default 10000 */
    uint64_t request_timeout_ms; /* per-node reply deadline of one step; default 50 */
    uint64_t connect_timeout_ms; /* per-node connect deadline; default 200 */
    double drift_factor;         /* clock drift, fraction of the TTL; default 0.01 */
    uint64_t drift_ms;           /* clock drift added to it; default 2 */
    int retry_count;             /* retries after the first attempt; -1 = no limit;
                                    default 3 */
    uint64_t retry_delay_ms;     /* least wait before a retry; default 200 */
    uint64_t retry_jitter_ms;    /* random extra wait, uniform in [0, jitter];
                                    default 100 */
    uint64_t wait_ms;            /* give up acquiring after this long, all retries
                                    included; 0 = no deadline; default 0 */
    const char *key_prefix;      /* prepended to every resource; default "" */
    int fencing;                 /* 1: issue fencing tokens (default); 0: plain
                                    Redlock, no fence keys, token 0 */
    uint64_t fence_idle_ms;      /* expiry of an idle fence key; 0 = never;
                                    default 7 days */
    uint64_t reconnect_min_ms;   /* first backoff after a node failed; default 10 */
    uint64_t reconnect_max_ms;   /* backoff cap; default 1000 */

    /* Wall clock for first-round token proposals, in microseconds since the
     * epoch. NULL uses CLOCK_REALTIME. Tests inject a clock that is behind. */
    uint64_t (*clock_us)(void *arg);
    void *clock_arg;
};

/* A held lock. Plain data: copy it, store it, pass it back. */
struct lockcore_lock {
    char resource[LOCKCORE_RESOURCE_MAX + 1]; /* NUL-terminated */
    char id[LOCKCORE_ID_LEN + 1];             /* NUL-terminated hex */
    uint64_t token;                           /* fencing token; 0 in plain mode */
    uint64_t ttl_ms;                          /* TTL asked for at the last grant or extension */
    uint64_t validity_ms;                     /* TTL - elapsed - drift at that time */
    uint64_t valid_until_ms;                  /* CLOCK_MONOTONIC ms (see lockcore_now_ms) */
    unsigned nodes;                           /* nodes in the client */
    unsigned nodes_ok;                        /* nodes that granted / extended / released */
    unsigned attempts;                        /* attempts the acquisition took */
};

/* Fill *o with the defaults. Returns 0 or -EINVAL for o == NULL. */
LOCKCORE_API int lockcore_options_init(struct lockcore_options *o);

typedef struct lockcore_client lockcore_client;

/*
 * Create a client. Connections are opened lazily, without blocking, when the
 * first operation needs them. Writes *out only on success. On failure, a
 * message is written to errbuf (if not NULL, errcap > 0).
 * Returns 0, -EINVAL (bad option or address; see errbuf) or -ENOMEM.
 */
LOCKCORE_API int lockcore_client_new(const struct lockcore_options *o, lockcore_client **out, char *errbuf,
                                     size_t errcap);

/*
 * Free a client, closing its connections. Operations still in flight end
 * with LOCKCORE_ECANCELED (their callbacks run). Accepts NULL.
 */
LOCKCORE_API void lockcore_client_free(lockcore_client *c);

/* The detail of the client's last failure; valid until its next call. */
LOCKCORE_API const char *lockcore_errmsg(const lockcore_client *c);

/* A static name for any error code returned by lockcore. */
LOCKCORE_API const char *lockcore_strerror(int err);

/* CLOCK_MONOTONIC in milliseconds, the clock of valid_until_ms. */
LOCKCORE_API uint64_t lockcore_now_ms(void);

/* Milliseconds of validity a lock has left; 0 once expired or for NULL. */
LOCKCORE_API uint64_t lockcore_remaining_ms(const struct lockcore_lock *lock);

/* ---- Blocking API -------------------------------------------------------- */

/*
 * Acquire `resource` (NUL-terminated, 1..LOCKCORE_RESOURCE_MAX bytes) on a
 * majority of nodes, retrying as the options say. On success fills *lock.
 * Returns 0, -EINVAL, LOCKCORE_ELOCKED, LOCKCORE_ENOQUORUM, LOCKCORE_EPROTO,
 * LOCKCORE_EFENCE, -ETIMEDOUT (wait_ms ran out), -ENOMEM.
 */
LOCKCORE_API int lockcore_acquire(lockcore_client *c, const char *resource, struct lockcore_lock *lock);

/*
 * Extend a held lock to ttl_ms from now (0 = the client's TTL) on a majority,
 * keeping its id and token. Refused with LOCKCORE_ELOST once the lock's
 * validity has run out. On success updates validity_ms, valid_until_ms,
 * ttl_ms and nodes_ok. Returns 0, -EINVAL, LOCKCORE_ELOST,
 * LOCKCORE_ENOQUORUM, LOCKCORE_EPROTO.
 */
LOCKCORE_API int lockcore_extend(lockcore_client *c, struct lockcore_lock *lock, uint64_t ttl_ms);

/*
 * Release a lock on every node (only where the key still holds our id).
 * Sets lock->nodes_ok to the nodes that deleted it and validity to 0.
 * Returns 0 when a majority answered, LOCKCORE_ENOQUORUM otherwise (the
 * keys then expire by their TTL), -EINVAL.
 */
LOCKCORE_API int lockcore_release(lockcore_client *c, struct lockcore_lock *lock);

/* One node's view of a resource, for diagnostics. */
struct lockcore_node_status {
    char node[64];                    /* host:port (never the credentials) */
    int reachable;                    /* 1 if the node answered */
    char holder[LOCKCORE_ID_LEN + 1]; /* the lock key's value ("" if none; cut
                                        at LOCKCORE_ID_LEN bytes) */
    int64_t pttl_ms;                  /* remaining ms of the key, -2 if none */
    uint64_t fence;                   /* the node's fence value, 0 if none */
    char error[128];                  /* why not reachable, "" otherwise */
};

/*
 * Read each node's view of a resource into out[0..n_nodes-1] (cap entries
 * available). Returns the number of nodes (even if some were unreachable),
 * -EINVAL or -ENOSPC.
 */
LOCKCORE_API int lockcore_status(lockcore_client *c, const char *resource, struct lockcore_node_status *out,
                                 size_t cap);

/* ---- Non-blocking API ---------------------------------------------------- */

/*
 * Called once when an operation ends. rc is what the blocking call would
 * return; lock is the result (for acquire, valid only if rc == 0), borrowed
 * for the duration of the call: copy it to keep it. The callback may start
 * new operations on the same client; it must not free the client.
 */
typedef void (*lockcore_cb)(lockcore_client *c, int rc, const struct lockcore_lock *lock, void *arg);

/*
 * Start an operation; its callback runs from a later lockcore_run() or
 * lockcore_process(), never from inside these calls. The lock (for extend
 * and release) is copied. Returns 0 if started, -EINVAL (callback missing,
 * bad resource or lock), -ENOMEM.
 */
LOCKCORE_API int lockcore_acquire_async(lockcore_client *c, const char *resource, lockcore_cb cb, void *arg);
LOCKCORE_API int lockcore_extend_async(lockcore_client *c, const struct lockcore_lock *lock, uint64_t ttl_ms,
                                       lockcore_cb cb, void *arg);
LOCKCORE_API int lockcore_release_async(lockcore_client *c, const struct lockcore_lock *lock, lockcore_cb cb,
                                        void *arg);

/* Operations started and not yet ended. */
LOCKCORE_API size_t lockcore_inflight(const lockcore_client *c);

/*
 * Wait up to timeout_ms (-1: until something happens; 0: do not wait) for
 * network events and timers, then run every callback that is due. Returns
 * the number of operations that ended, or a negative errno if poll failed.
 */
LOCKCORE_API int lockcore_run(lockcore_client *c, int timeout_ms);

/*
 * Event-loop embedding: fill fds[0..] with the descriptors to watch (at most
 * cap; LOCKCORE_NODES_MAX always suffices) and *timeout_ms with the longest
 * the caller may wait. Returns the number of entries, or -EINVAL/-ENOSPC.
 * After polling, hand the same array to lockcore_process().
 */
LOCKCORE_API int lockcore_pollfds(lockcore_client *c, struct pollfd *fds, size_t cap, int *timeout_ms);
LOCKCORE_API int lockcore_process(lockcore_client *c, const struct pollfd *fds, size_t n);

/* ---- Keeping a lock alive ------------------------------------------------ */

/*
 * A keep-alive extends a held lock in the background of lockcore_run() /
 * lockcore_process(): whenever only renew_before_ms of validity is left, it
 * extends the lock to ttl_ms again. If an extension fails with the lock no
 * longer held on a majority, or the validity runs out before an extension
 * succeeds (a majority unreachable), the lock is lost: on_lost runs once
 * with the reason, and the keep-alive stops. Transient failures are retried
 * while validity remains.
 */
typedef struct lockcore_keepalive lockcore_keepalive;

/*
 * Start keeping `lock` (copied) alive. ttl_ms 0 = the lock's TTL;
 * renew_before_ms 0 = a third of it (must be below the TTL). on_lost may be
 * NULL (poll lockcore_keepalive_get instead); it runs from lockcore_run, and
 * the lock it gets is borrowed for the call. Writes *out on success.
 * Returns 0, -EINVAL, LOCKCORE_ELOST (validity already ran out) or -ENOMEM.
 * A keep-alive belongs to its client: stop it before freeing the client, or
 * lockcore_client_free() frees it.
 */
LOCKCORE_API int lockcore_keepalive_start(lockcore_client *c, const struct lockcore_lock *lock,
                                          uint64_t ttl_ms, uint64_t renew_before_ms, lockcore_cb on_lost,
                                          void *arg, lockcore_keepalive **out);

/*
 * Copy the lock as last extended into *out (if not NULL). Returns 0 while it
 * is held, or the code it was lost with (LOCKCORE_ELOST, LOCKCORE_ENOQUORUM,
 * ...), or -EINVAL.
 */
LOCKCORE_API int lockcore_keepalive_get(const lockcore_keepalive *k, struct lockcore_lock *out);

/* Extensions done so far. */
LOCKCORE_API unsigned lockcore_keepalive_extensions(const lockcore_keepalive *k);

/*
 * Stop extending and free the keep-alive. The lock itself is not released
 * (call lockcore_release with the lock from lockcore_keepalive_get first).
 * Accepts NULL.
 */
LOCKCORE_API void lockcore_keepalive_stop(lockcore_keepalive *k);

#ifdef __cplusplus
}
#endif

#endif
