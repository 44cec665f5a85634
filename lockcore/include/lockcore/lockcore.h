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
 * Node sockets are close-on-exec, so a program that forks and execs does
 * not hand them to its children.
 *
 * Errors: functions returning int give 0 on success or a negative code, one
 * of this table, and no other. lockcore_strerror() names each;
 * lockcore_errmsg() gives the detail of the client's last failure (which
 * node said what, who holds the lock).
 *
 *   code                 meaning                                  fencelock
 * exit 0                    success                                  0 -EINVAL
 * a bad argument or option (errmsg: which)  64 LOCKCORE_ELOCKED     not
 * acquired: held by another client;     75 also when wait_ms or the retries ran
 * out while it was held LOCKCORE_ENOQUORUM   a majority of nodes unreachable,
 * or not   69 answering within request_timeout_ms -ETIMEDOUT           a
 * majority granted, but so slowly that    69 no validity was left (slow nodes,
 * or a client paused while acquiring); retried like a refusal LOCKCORE_ELOST
 * the lock is not held (any more): its       79 validity ran out, or a majority
 * no longer holds its id LOCKCORE_EPROTO      a server error or a bad reply
 * (AUTH or     70 ACL refused, a hostile or broken node) LOCKCORE_EFENCE no
 * fencing token could be agreed           70 LOCKCORE_ECANCELED   the client
 * was freed with the operation    70 in flight, or is being freed -EDEADLK a
 * call the callback contract forbids       70 (below), made from a callback
 *   -ENOMEM, -ENOSPC     out of memory; an array too small          70
 *   other -errno         a system call failed (poll)                70
 *
 * Callbacks (the callback contract). Operation callbacks and on_lost run
 * from lockcore_run() / lockcore_process() and from inside the blocking
 * calls, never from the call that started the operation. A callback may:
 *   - start operations on the same client (the _async calls, and
 *     lockcore_keepalive_start), and cancel acquisitions (lockcore_cancel);
 *   - stop any keep-alive of the client, its own included;
 *   - read lockcore_errmsg() (it describes the operation that ended);
 *   - free the client: the free is deferred until the lockcore call that
 *     ran the callback returns; that call then returns and the client must
 *     not be used again (operations still in flight end with
 *     LOCKCORE_ECANCELED first, their callbacks run).
 * A callback must not call the blocking functions, lockcore_run(),
 * lockcore_process() or lockcore_pollfds(): they return -EDEADLK.
 * The lock a callback gets is borrowed: it dies when the callback returns.
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
/* Longest holder info (see lockcore_options.holder_info), in bytes. */
#define LOCKCORE_INFO_MAX 512
/* Most descriptors a client watches: a command connection per node, and a
 * subscriber connection per node while notified waiters wait. */
#define LOCKCORE_POLLFDS_MAX (2 * LOCKCORE_NODES_MAX)

/* How an acquisition that was refused waits before it tries again
 * (lockcore_options.wait_mode). See docs/lockcore.md, "Waiting". */
enum lockcore_wait_mode {
    /* Retry after the backoff delay, as plain Redlock does (the most
     * grants per second when one resource is taken over and over by
     * threads that do not care who gets it: docs/fairness.md, "Which
     * mode"). */
    LOCKCORE_WAIT_POLL = 0,
    /* Default. A release tells waiters: each node keeps the lock for the
     * first waiter in its queue and PUBLISHes its name, and it tries again
     * at once; others sleep until the holder's TTL would run out (a
     * crashed holder sends nothing). A lock nobody waits for costs what it
     * costs polling. Not fair: a newcomer may take a lock nobody waits
     * for. Every kind waits so (a re-entry of a given hold polls). */
    LOCKCORE_WAIT_NOTIFY = 1,
    /* Fair: waiters of every client are granted in the order of their
     * tickets (arrival time on the waiter's clock); nobody may take the
     * lock ahead of a live waiter with a smaller ticket. Notified too. */
    LOCKCORE_WAIT_FAIR = 2,
};

/* The delay between attempts when no notice comes (lockcore_options.backoff). */
enum lockcore_backoff {
    LOCKCORE_BACKOFF_FIXED = 0,       /* retry_delay_ms + uniform[0, retry_jitter_ms] */
    LOCKCORE_BACKOFF_EXPONENTIAL = 1, /* uniform[0, min(retry_delay_max_ms,
                                         retry_delay_ms * 2^(attempt-1))]: full jitter */
};

enum {
    LOCKCORE_ELOCKED = -10001,   /* not acquired: held by another client */
    LOCKCORE_ENOQUORUM = -10002, /* a majority of nodes unreachable or failing */
    LOCKCORE_ELOST = -10003,     /* the lock is no longer held (expired or taken) */
    LOCKCORE_EPROTO = -10004,    /* protocol or server error (bad reply, AUTH refused) */
    LOCKCORE_EFENCE = -10005,    /* no token could be agreed (tokens exhausted) */
    LOCKCORE_ECANCELED = -10006, /* operation canceled: the client was freed */
};
/* -ETIMEDOUT, -EINVAL, -EDEADLK and the other errno values: see the table
 * above. */

/*
 * Client options. lockcore_options_init() fills the defaults given here;
 * lockcore_client_new() validates and copies everything, so the struct and
 * the strings it points to may be freed once the client exists.
 */
struct lockcore_options {
    /* Node addresses: "redis://[user:password@]host:port[/db]" or "host:port";
     * "rediss://..." for TLS (see the tls_* options).
     * Required; 1..LOCKCORE_NODES_MAX entries. Host names are resolved once,
     * by lockcore_client_new() (IPv4 first, as hiredis does), so that no
     * later call blocks on DNS; a node that moves needs a new client.
     * Passwords never appear in messages ("***" stands for them). */
    const char *const *nodes;
    size_t n_nodes;

    uint64_t ttl_ms;             /* lock time to live; default 10000 */
    uint64_t request_timeout_ms; /* per-node reply deadline of one step; default 50 */
    uint64_t connect_timeout_ms; /* per-node connect deadline; default 200 */
    double drift_factor;         /* clock drift, fraction of the TTL; default 0.01 */
    uint64_t drift_ms;           /* clock drift added to it; default 2 */
    int retry_count;             /* retries after the first attempt; -1 = no limit;
                                    default 3. A waiter's attempt that only takes
                                    its place in the queue, or closes the race of
                                    its subscription, is not counted */
    uint64_t retry_delay_ms;     /* least wait before a retry; default 200 */
    uint64_t retry_jitter_ms;    /* random extra wait, uniform in [0, jitter];
                                    default 100 */
    int wait_mode;               /* enum lockcore_wait_mode; default NOTIFY */
    int backoff;                 /* enum lockcore_backoff; default FIXED */
    uint64_t retry_delay_max_ms; /* cap of the exponential backoff; default 2000 */
    uint64_t queue_ttl_ms;       /* a waiter's place in a queue lasts this long
                                    unless refreshed (a crashed waiter blocks a
                                    fair queue no longer); default 3000 */
    uint64_t wait_ms;            /* give up acquiring after this long, all retries
                                    included; 0 = no deadline; default 0 */
    const char *key_prefix;      /* prepended to every resource; default "". Clients of one fenced lock
                                    must use the same prefix and resource, not another split of the key:
                                    the fence's bucket is named by the one and chosen by the other */
    int fencing;                 /* 1: issue fencing tokens (default); 0: plain
                                    Redlock, no fence keys, token 0 */
    uint64_t fence_idle_ms;      /* transition mode only (fence_transition):
                                    expiry of a resource's own fence key, the
                                    old layout's; 0 = never; default 7 days;
                                    at least 2 * ttl_ms. Every grant and
                                    extension pushes it out again. Fences of
                                    the bucket layout never expire */
    uint64_t reconnect_min_ms;   /* first backoff after a node failed; default 10 */
    uint64_t reconnect_max_ms;   /* backoff cap; default 1000. The backoff
                                    ends only after a node answers well, so a
                                    node that accepts and then refuses (AUTH,
                                    maxclients) is not hammered */

    /* Who holds the lock, for people: stored beside every lock this client
     * acquires, in the key "{" key "}:holder", with the lock's TTL; pushed
     * out by extensions and deleted by releases. The lock key's own value
     * stays the lock id (other Redlock clients interoperate). At most
     * LOCKCORE_INFO_MAX bytes, copied; NULL or "" for none (default). */
    const char *holder_info;

    /* The AUTH password of every node whose address carries none (with the
     * address's user, if any): a password kept out of addresses is kept out
     * of command lines and of everything that prints an address. Copied;
     * NULL for none (default). At most 255 bytes. */
    const char *password;

    /* TLS to rediss:// nodes (OpenSSL; TLS 1.2 or later). Paths and names
     * are copied. */
    const char *tls_ca_file;     /* PEM CAs to verify nodes with; NULL: the
                                    system's default CA paths */
    const char *tls_cert_file;   /* client certificate chain (PEM), for nodes
                                    that require one; with tls_key_file */
    const char *tls_key_file;    /* its private key (PEM) */
    const char *tls_server_name; /* the name to verify (and send as SNI);
                                    NULL: each node's host as given */
    int tls_verify;              /* 1 (default): verify each node's certificate
                                    and name; 0: do not (encryption without
                                    authentication: testing only) */

    /* Wall clock for first-round token proposals, in microseconds since the
     * epoch. NULL uses CLOCK_REALTIME. Tests inject a clock that is behind. */
    uint64_t (*clock_us)(void *arg);
    void *clock_arg;

    /* A first-round proposal more than this far ahead of a node's own clock
     * is not accepted there: a client whose clock runs fast gets its token
     * from the nodes' fences in a second round instead of pushing every
     * later token that far ahead (docs/fencing.md, "Clocks"). 0 = no bound;
     * default 5000; at most one day. */
    uint64_t proposal_ahead_max_ms;

    /* Fences live in buckets shared by resources (docs/fencing.md, "Where
     * fences live"); every client also reads each resource's own fence key
     * "{" key "}:fence", the only fence of the layout before buckets. 0
     * (default): that key is deleted where a grant's bucket takes over from
     * it. 1, transition mode: it is written too (expiring after
     * fence_idle_ms), as clients of the old layout need while they share
     * resources with this one, at the old layout's cost in memory. */
    int fence_transition;

    /* 1: run the scripts as functions of one library that lockcore loads
     * on every node (Redis 7 FUNCTION LOAD, then FCALL; the ACL needs
     * +fcall +function|load), which costs the nodes less per call than
     * EVALSHA (docs/lockcore.md, "Connections"). Only where every user of
     * the nodes allowed FUNCTION LOAD is trusted with the locks: a library
     * is called by its name, and a user who loads one under lockcore's
     * name decides what every lock client runs (docs/security.md). A node
     * that refuses the library, or its FCALL, gets EVALSHA. 0 (default):
     * EVALSHA, whose scripts are named by their content's hash. */
    int redis_functions;
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
    unsigned flags;                           /* LOCKCORE_LOCK_* below */
    uint64_t ticket;                          /* the acquisition's place among waiters
                                                 (wall µs at its start) */
    unsigned rounds;                          /* fencing rounds of the grant: 1 when the
                                                 first proposal was accepted with the lock,
                                                 more after second rounds; 0 with fencing off */
};

/* lockcore_lock.flags: built by lockcore_lock_from_id, validity unknown
 * until an extension succeeds. */
#define LOCKCORE_LOCK_FROM_ID 1u
/* The lock kinds (see "Lock kinds" below): a permit of a semaphore (an
 * ordinary lock of the permit's resource; the flag only says so), a
 * multi-resource lock, a reentrant lock, the read and the write side of a
 * read-write lock. Extend, release and keep-alive read all but the first,
 * so keep the flags when you copy a lock. */
#define LOCKCORE_LOCK_PERMIT 2u
#define LOCKCORE_LOCK_MULTI 4u
#define LOCKCORE_LOCK_REENTRANT 8u
#define LOCKCORE_LOCK_READ 16u
#define LOCKCORE_LOCK_WRITE 32u
/* A leader's lock (lockcore_campaign): a plain lock of the election's
 * name; extend, keep alive and release it as any lock, resign with
 * lockcore_resign. */
#define LOCKCORE_LOCK_LEADER 64u

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

/*
 * A lock record for a lock held under a known id, e.g. one another process
 * acquired and printed: resource and id are copied, token is 0 and the
 * validity is unknown, so lockcore_extend() and lockcore_release() of it go
 * to the nodes, which decide (only keys that still hold the id are
 * touched). Returns 0, or -EINVAL (see lockcore_errmsg) for a bad resource
 * or an id that is not LOCKCORE_ID_LEN lowercase hex digits.
 */
LOCKCORE_API int lockcore_lock_from_id(lockcore_client *c, const char *resource, const char *id,
                                       struct lockcore_lock *out);

/* The client's number of nodes, and its majority (nodes / 2 + 1); 0 for NULL.
 */
LOCKCORE_API unsigned lockcore_nodes(const lockcore_client *c);
LOCKCORE_API unsigned lockcore_quorum(const lockcore_client *c);

/* Why notified waiting is off (a node refused SUBSCRIBE, e.g. for lack of
 * ACL channel rights: waiters then use timers), or NULL while it works or
 * was never needed. Valid until the client is freed. */
LOCKCORE_API const char *lockcore_notify_error(const lockcore_client *c);

/* A static name for any error code returned by lockcore. */
LOCKCORE_API const char *lockcore_strerror(int err);

/* CLOCK_MONOTONIC in milliseconds, the clock of valid_until_ms. */
LOCKCORE_API uint64_t lockcore_now_ms(void);

/* Milliseconds of validity a lock has left; 0 once expired or for NULL. */
LOCKCORE_API uint64_t lockcore_remaining_ms(const struct lockcore_lock *lock);

/* ---- Blocking API -------------------------------------------------------- */

/*
 * Acquire `resource` (NUL-terminated, 1..LOCKCORE_RESOURCE_MAX bytes) on a
 * majority of nodes, retrying as the options say (retry_count, wait_ms).
 * On success fills *lock. On failure *lock gets the last attempt's counts
 * (resource, nodes, nodes_ok = nodes that granted, attempts), an empty id,
 * token 0 and no validity. Returns 0, -EINVAL, LOCKCORE_ELOCKED,
 * LOCKCORE_ENOQUORUM, -ETIMEDOUT, LOCKCORE_EPROTO, LOCKCORE_EFENCE,
 * -ENOMEM, -EDEADLK, or a poll failure: the code of the last attempt when
 * the retries or wait_ms ran out.
 */
LOCKCORE_API int lockcore_acquire(lockcore_client *c, const char *resource, struct lockcore_lock *lock);

/*
 * Extend a held lock to ttl_ms from now (0 = the client's TTL) on a majority,
 * keeping its id and token, and push out its fence key's idle expiry and
 * its holder info. Refused with LOCKCORE_ELOST once the lock's validity has
 * run out (a lock from lockcore_lock_from_id has no known validity: the
 * nodes decide). On success updates validity_ms, valid_until_ms, ttl_ms
 * and nodes_ok; on failure only nodes_ok (the nodes that extended).
 * Returns 0, -EINVAL, LOCKCORE_ELOST, LOCKCORE_ENOQUORUM, LOCKCORE_EPROTO,
 * -EDEADLK.
 */
LOCKCORE_API int lockcore_extend(lockcore_client *c, struct lockcore_lock *lock, uint64_t ttl_ms);

/*
 * Release a lock on every node (only where the key still holds our id).
 * Sets lock->nodes_ok to the nodes that deleted it and validity to 0, on
 * failure too. Returns 0 when a majority answered, LOCKCORE_ENOQUORUM or
 * LOCKCORE_EPROTO otherwise (the keys then expire by their TTL), -EINVAL,
 * -EDEADLK.
 */
LOCKCORE_API int lockcore_release(lockcore_client *c, struct lockcore_lock *lock);

/* Waiters lockcore_status reports per node, at most (the first in line). */
#define LOCKCORE_STATUS_WAITERS 8

/* A waiter in a node's queue (notified and fair waiting). */
struct lockcore_waiter {
    char id[LOCKCORE_ID_LEN + 1]; /* its lock id */
    uint64_t ticket;              /* its place: wall µs when it asked */
};

/* Readers lockcore_rw_status reports per node, at most (the soonest to
 * expire first). */
#define LOCKCORE_STATUS_READERS 8

/* A live reader registered on a node (lockcore_rw_status). */
struct lockcore_reader {
    char id[LOCKCORE_ID_LEN + 1]; /* its lock id ("" past the last reader; cut at LOCKCORE_ID_LEN bytes) */
    int64_t pttl_ms;              /* ms until it expires on this node */
};

/* One node's view of a resource, for diagnostics. */
struct lockcore_node_status {
    char node[64];                                         /* host:port (never the credentials) */
    int reachable;                                         /* 1 if the node answered */
    char holder[LOCKCORE_ID_LEN + 1];                      /* the lock key's value ("" if none; cut
                                                             at LOCKCORE_ID_LEN bytes) */
    int64_t pttl_ms;                                       /* remaining ms of the key, -2 if none */
    uint64_t fence;                                        /* the node's fence value, 0 if none */
    char info[LOCKCORE_INFO_MAX + 1];                      /* the holder's info ("" if none) */
    unsigned waiters;                                      /* in this node's queue (some may have lapsed) */
    struct lockcore_waiter queue[LOCKCORE_STATUS_WAITERS]; /* the first of them, in order */
    char error[128];                                       /* why not reachable, "" otherwise */
    unsigned holds;                                        /* lockcore_reentrant_status: the hold
                                                             count on this node; lockcore_rw_status:
                                                             its live readers; 0 otherwise */
    /* lockcore_rw_status: the first of those readers, and the id of the
     * writer that declared it waits ("{key}:wintent"), "" if none. */
    struct lockcore_reader readers[LOCKCORE_STATUS_READERS];
    char writer_waits[LOCKCORE_ID_LEN + 1];
    /* The node's own clock when it answered, µs since the epoch: a fence
     * value far ahead of it came from a client whose clock ran fast
     * (docs/fencing.md, "Clocks"). 0 if not reachable. */
    uint64_t node_time_us;
};

/*
 * Read each node's view of a resource into out[0..n_nodes-1] (cap entries
 * available). Returns the number of nodes (even if some were unreachable),
 * -EINVAL, -ENOSPC, -EDEADLK.
 */
LOCKCORE_API int lockcore_status(lockcore_client *c, const char *resource, struct lockcore_node_status *out,
                                 size_t cap);

/*
 * Repair a resource's fence: lower its fence value to `to` (0: each node's
 * own clock, in µs) on every node where no lock of the resource is held and
 * the fence is above that, e.g. after a client whose clock ran hours fast
 * pushed it ahead with no bound (proposal_ahead_max_ms 0). The resource's
 * fence bucket, which other resources share, is lowered only where it is
 * more than proposal_ahead_max_ms ahead of the node's clock. DANGEROUS: it
 * is the one step that lets tokens go back. Use it only knowing that no
 * token above `to` ever granted for the resource (or, where its bucket was
 * that far ahead, for any resource of the bucket) will be used again at
 * any resource (its holders are gone, and no resource will admit it); read
 * docs/fencing.md, "Repairing a fence", first. Fills out[0..n_nodes-1]
 * (fence: the value after; holder: the id that kept a node from it;
 * node_time_us). Returns the number of nodes lowered (0..n), -EINVAL
 * (fencing off, to >= 2^53, bad resource), -ENOSPC, -EDEADLK.
 */
LOCKCORE_API int lockcore_fence_repair(lockcore_client *c, const char *resource, uint64_t to,
                                       struct lockcore_node_status *out, size_t cap);

/* ---- Non-blocking API ---------------------------------------------------- */

/*
 * Called once when an operation ends. rc is what the blocking call would
 * return; lock is the result (for acquire, a held lock only if rc == 0,
 * else the counts as lockcore_acquire gives them), borrowed for the
 * duration of the call: copy it to keep it. See the callback contract at
 * the top of this file for what a callback may call.
 */
typedef void (*lockcore_cb)(lockcore_client *c, int rc, const struct lockcore_lock *lock, void *arg);

/*
 * Start an operation; its callback runs from a later lockcore_run() or
 * lockcore_process(), never from inside these calls. The lock (for extend
 * and release) is copied. Returns 0 if started, -EINVAL (callback missing,
 * bad resource, lock or TTL), -ENOMEM, or LOCKCORE_ECANCELED while the
 * client is being freed (the callback then never runs).
 */
LOCKCORE_API int lockcore_acquire_async(lockcore_client *c, const char *resource, lockcore_cb cb, void *arg);
LOCKCORE_API int lockcore_extend_async(lockcore_client *c, const struct lockcore_lock *lock, uint64_t ttl_ms,
                                       lockcore_cb cb, void *arg);
LOCKCORE_API int lockcore_release_async(lockcore_client *c, const struct lockcore_lock *lock, lockcore_cb cb,
                                        void *arg);
/*
 * lockcore_status without blocking: kind 0 (the plain lock's view),
 * LOCKCORE_LOCK_REENTRANT (lockcore_reentrant_status's) or
 * LOCKCORE_LOCK_READ / _WRITE (lockcore_rw_status's). out (cap entries,
 * at least the client's nodes) must stay valid until cb runs; cb's rc is
 * what the blocking call returns (the number of nodes, or an error), and
 * its lock names the resource. Returns 0, -EINVAL, -ENOSPC, -ENOMEM or
 * LOCKCORE_ECANCELED.
 */
LOCKCORE_API int lockcore_status_async(lockcore_client *c, const char *resource, unsigned kind,
                                       struct lockcore_node_status *out, size_t cap, lockcore_cb cb,
                                       void *arg);

/*
 * End the acquisitions in flight that were started with this callback and
 * argument (an _async acquire of any kind), as if they had given up: what
 * they set is rolled back and their places in the nodes' queues are left,
 * so the next waiter does not wait behind them (a request whose caller
 * went away). Their callbacks run with LOCKCORE_ECANCELED before this call
 * returns (called from a callback: before the lockcore call that ran it
 * returns), with any other callback already due; after that, arg is no
 * longer used. Extensions and releases are not canceled. Returns the
 * number of acquisitions canceled (0 if none matched), or -EINVAL.
 */
LOCKCORE_API int lockcore_cancel(lockcore_client *c, lockcore_cb cb, void *arg);

/* Operations started and not yet ended. */
LOCKCORE_API size_t lockcore_inflight(const lockcore_client *c);

/*
 * Wait up to timeout_ms (-1: until something happens; 0: do not wait) for
 * network events and timers, then run every callback that is due. Returns
 * the number of operations that ended, a negative errno if poll failed (no
 * operation is affected), or -EDEADLK from a callback.
 */
LOCKCORE_API int lockcore_run(lockcore_client *c, int timeout_ms);

/*
 * Event-loop embedding: fill fds[0..] with the descriptors to watch (at most
 * cap; LOCKCORE_POLLFDS_MAX always suffices) and *timeout_ms with the longest
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
 * succeeds (a majority unreachable or slow), the lock is lost: on_lost runs
 * once, at valid_until_ms at the latest whatever is in flight, with the
 * reason (lockcore_errmsg() inside on_lost says more), and the keep-alive
 * stops. Transient failures are retried while validity remains.
 */
typedef struct lockcore_keepalive lockcore_keepalive;

/*
 * Start keeping `lock` (copied) alive. ttl_ms 0 = the lock's TTL (above the
 * client's request_timeout_ms, at most 24 h); renew_before_ms 0 = a third of
 * it (must be below the TTL). on_lost may be NULL (poll
 * lockcore_keepalive_get instead); it runs from lockcore_run, and the lock
 * it gets is borrowed for the call. Writes *out on success. Returns 0,
 * -EINVAL (bad lock, TTL or renew_before_ms; see lockcore_errmsg),
 * LOCKCORE_ELOST (validity already ran out or unknown), -ENOMEM or
 * LOCKCORE_ECANCELED. A keep-alive belongs to its client: stop it before
 * freeing the client, or lockcore_client_free() frees it.
 */
LOCKCORE_API int lockcore_keepalive_start(lockcore_client *c, const struct lockcore_lock *lock,
                                          uint64_t ttl_ms, uint64_t renew_before_ms, lockcore_cb on_lost,
                                          void *arg, lockcore_keepalive **out);

/*
 * Copy the lock as last extended into *out (if not NULL). Returns 0 while it
 * is held (its validity has not run out), or the code it was lost with
 * (LOCKCORE_ELOST, LOCKCORE_ENOQUORUM, ...), or -EINVAL.
 */
LOCKCORE_API int lockcore_keepalive_get(const lockcore_keepalive *k, struct lockcore_lock *out);

/* Extensions done so far. */
LOCKCORE_API unsigned lockcore_keepalive_extensions(const lockcore_keepalive *k);

/*
 * Stop extending and free the keep-alive (from a callback, the memory goes
 * when it is safe; k must not be used again either way). The lock itself
 * is not released (call lockcore_release with the lock from
 * lockcore_keepalive_get first). Accepts NULL.
 */
LOCKCORE_API void lockcore_keepalive_stop(lockcore_keepalive *k);

/*
 * A keep-alive in a thread of its own, for a program whose critical section
 * blocks (a long computation, a slow write, sleep): the keep-alive above
 * runs only while the caller turns lockcore_run, and a client may be used
 * by one thread at a time. The keeper opens a client of its own with the
 * options o (copied, as lockcore_client_new copies them; the caller's
 * client is left alone), and its thread extends `lock` to ttl_ms whenever
 * only renew_before_ms is left (as lockcore_keepalive_start: 0 = the
 * lock's TTL, a third of it). Check lockcore_keeper_get right before each
 * write: it says 0 while the lock is held, or the code it was lost with,
 * and holds the lock's validity against the monotonic clock itself, so a
 * loss is seen at valid_until_ms at the latest even if the thread could
 * not run. Returns 0 (*out set), -EINVAL (bad options or lock; errbuf says
 * why), LOCKCORE_ELOST (no validity left), -ENOMEM, or a pthread error.
 */
typedef struct lockcore_keeper lockcore_keeper;
LOCKCORE_API int lockcore_keeper_start(const struct lockcore_options *o, const struct lockcore_lock *lock,
                                       uint64_t ttl_ms, uint64_t renew_before_ms, lockcore_keeper **out,
                                       char *errbuf, size_t errcap);
/* 0 while held, else the loss (LOCKCORE_ELOST, LOCKCORE_ENOQUORUM, ...);
 * *out (may be NULL) gets the lock as last extended. Thread-safe. */
LOCKCORE_API int lockcore_keeper_get(lockcore_keeper *k, struct lockcore_lock *out);
/* Why it was lost; valid until lockcore_keeper_stop. */
LOCKCORE_API const char *lockcore_keeper_errmsg(lockcore_keeper *k);
/* Stop extending, end the thread, free (NULL accepted). *out (may be NULL)
 * gets the lock as last extended, to release it with the caller's client.
 * Returns what lockcore_keeper_get would. */
LOCKCORE_API int lockcore_keeper_stop(lockcore_keeper *k, struct lockcore_lock *out);

/* ---- Lock kinds ----------------------------------------------------------
 * Three kinds beside the plain lock, all with fencing tokens, the error
 * codes above and the callback contract. Each returns a struct lockcore_lock
 * whose flags name its kind: lockcore_extend, lockcore_release,
 * lockcore_keepalive_start and their _async forms work on it unchanged.
 * The options of the client apply (ttl_ms, retry_count, wait_ms, ...).
 * docs/lockcore.md ("Lock kinds") gives the safety argument of each.
 * A lock of a kind held under a known id (another process's) is built
 * with lockcore_lock_from_id and the kind's flag added to its flags: the
 * resource is the permit's name, the set's names joined by '\n', or the
 * resource of a reentrant or read-write lock. */

/* Most permits of a semaphore; most resources of a multi-resource lock. */
#define LOCKCORE_PERMITS_MAX 1024
#define LOCKCORE_MULTI_MAX 16

/*
 * Counting semaphore: at most `permits` holders of `resource` at once.
 * Permit i is an ordinary lock of the resource "<resource>:permit:<i>"
 * (i = 0 .. permits-1), so at most one client holds each permit, by the
 * lock's own majority argument, and so at most `permits` hold at once.
 * An attempt tries the permits one at a time in a random order and takes
 * the first one granted; when all were refused it waits retry_delay_ms +
 * jitter and tries them all again (retry_count rounds, or until wait_ms).
 * On success *lock is that permit (flags LOCKCORE_LOCK_PERMIT, resource
 * the permit's name, its own token and TTL): extend, release and keep it
 * alive like any lock. resource is at most LOCKCORE_RESOURCE_MAX - 16
 * bytes; permits 1..LOCKCORE_PERMITS_MAX, and every client of a semaphore
 * must use the same number. Returns what lockcore_acquire returns;
 * LOCKCORE_ELOCKED when every permit was held in the last round.
 */
LOCKCORE_API int lockcore_sem_acquire(lockcore_client *c, const char *resource, unsigned permits,
                                      struct lockcore_lock *lock);
/* The same, non-blocking: cb runs once, as for lockcore_acquire_async. */
LOCKCORE_API int lockcore_sem_acquire_async(lockcore_client *c, const char *resource, unsigned permits,
                                            lockcore_cb cb, void *arg);

/* One permit of a semaphore as the nodes see it. */
struct lockcore_permit_status {
    unsigned permit;                  /* i of "<resource>:permit:<i>" */
    int held;                         /* 1 if a majority holds it for holder */
    char holder[LOCKCORE_ID_LEN + 1]; /* the id most nodes hold, "" if none */
    unsigned nodes;                   /* nodes holding that id */
    int64_t pttl_ms;                  /* the longest time it has left on them */
    uint64_t fence;                   /* the largest fence value of the permit */
    unsigned reachable;               /* nodes that answered */
};

/*
 * Read every permit of a semaphore into out[0..permits-1] (cap entries).
 * Returns the number of permits held by a majority (0..permits), -EINVAL,
 * -ENOSPC, LOCKCORE_ENOQUORUM (a majority did not answer), -EDEADLK.
 */
LOCKCORE_API int lockcore_sem_status(lockcore_client *c, const char *resource, unsigned permits,
                                     struct lockcore_permit_status *out, size_t cap);
/* The same, non-blocking: every permit read at once; cb runs once, with
 * what lockcore_sem_status returns as its rc. out must stay valid until
 * then. */
LOCKCORE_API int lockcore_sem_status_async(lockcore_client *c, const char *resource, unsigned permits,
                                           struct lockcore_permit_status *out, size_t cap, lockcore_cb cb,
                                           void *arg);

/*
 * Multi-resource lock: resources[0..n-1] (1..LOCKCORE_MULTI_MAX distinct
 * names without '\n') all or nothing. Each node grants the whole set in
 * one atomic script or none of it; the set is granted when a majority
 * granted it whole, and a failed attempt is rolled back on every node like
 * a plain one, so no partial hold survives it. The token is greater than
 * every resource's fence value on a majority and is stored in every
 * resource's fence key: one token fences a write that spans the set, and
 * each resource's tokens stay unique and monotonic across single and
 * multi grants. The lock keys are the plain ones (each holds the id), so
 * plain clients of any resource of the set are excluded. On success
 * lock->resource holds the names joined by '\n' (at most
 * LOCKCORE_RESOURCE_MAX bytes in all) and flags LOCKCORE_LOCK_MULTI.
 * Returns what lockcore_acquire returns.
 */
LOCKCORE_API int lockcore_multi_acquire(lockcore_client *c, const char *const *resources, size_t n,
                                        struct lockcore_lock *lock);
LOCKCORE_API int lockcore_multi_acquire_async(lockcore_client *c, const char *const *resources, size_t n,
                                              lockcore_cb cb, void *arg);

/*
 * Reentrant lock. With id NULL, a fresh id, as lockcore_acquire. With the
 * id of a reentrant lock the caller (the same owner, e.g. a parent process
 * that passed FENCELOCK_LOCK_ID down) holds on `resource`: a new hold, with
 * an id of its own in lock->id and the same token; the key's TTL is pushed
 * out to at least ttl_ms, never shortened. If id names no live hold, the
 * lock is acquired afresh, with a new token. lockcore_release of a hold
 * ends that hold only; the last one frees the resource. The key's value
 * stays the owner (the first hold's acquisition), so other Redlock clients
 * see an ordinary lock; the holds are members of "{" key "}:holds", each
 * named by its id and scored by its own expiry. id: LOCKCORE_ID_LEN
 * lowercase hex digits, copied. Returns what lockcore_acquire returns.
 */
LOCKCORE_API int lockcore_reentrant_acquire(lockcore_client *c, const char *resource, const char *id,
                                            struct lockcore_lock *lock);
LOCKCORE_API int lockcore_reentrant_acquire_async(lockcore_client *c, const char *resource, const char *id,
                                                  lockcore_cb cb, void *arg);

/* lockcore_status, and each node's number of live holds in out[i].holds. */
LOCKCORE_API int lockcore_reentrant_status(lockcore_client *c, const char *resource,
                                           struct lockcore_node_status *out, size_t cap);

/*
 * Read-write lock: many readers or one writer of `resource`. write 0
 * acquires a read lease, 1 the write lease. The writer holds the plain key
 * (so it excludes and is excluded by plain locks of the resource, and
 * other writers); readers are members of "{key}:readers", each with its
 * own expiry. A node grants a reader only while no writer holds the key
 * and no writer has declared it waits ("{key}:wintent": set by a writer
 * that readers refused, for its TTL); it grants a writer only when no
 * live reader is registered. So a stream of readers cannot starve a
 * writer. A reader's token is not a new token: it is a fence value a
 * majority of the nodes hold (written back to a majority first where
 * fewer answered with it), at least the token of every write granted
 * before the read began and below that of every write granted after;
 * check reads with it, never raise a resource's last token with it
 * (docs/lockcore.md). flags LOCKCORE_LOCK_READ or
 * LOCKCORE_LOCK_WRITE; extend, release and keep-alive as any lock.
 * Returns what lockcore_acquire returns.
 */
LOCKCORE_API int lockcore_rw_acquire(lockcore_client *c, const char *resource, int write,
                                     struct lockcore_lock *lock);
LOCKCORE_API int lockcore_rw_acquire_async(lockcore_client *c, const char *resource, int write,
                                           lockcore_cb cb, void *arg);

/*
 * lockcore_status (holder: the writer), and per node: the number of live
 * readers in out[i].holds, the first LOCKCORE_STATUS_READERS of them (id
 * and time left, the soonest to expire first) in out[i].readers, and the
 * writer that waits for them to leave, if any, in out[i].writer_waits.
 * Returns what lockcore_status returns.
 */
LOCKCORE_API int lockcore_rw_status(lockcore_client *c, const char *resource,
                                    struct lockcore_node_status *out, size_t cap);

/* ---- Acquisitions with options of their own ------------------------------
 * One client serves acquisitions with different TTLs, waits and owners:
 * struct lockcore_call holds what the client's options would otherwise
 * decide for one acquisition, and struct lockcore_request what to acquire,
 * of any kind. The calls above are these with the client's options. */

/* Longest owner name (lockcore_call.owner), in bytes. */
#define LOCKCORE_OWNER_MAX 64
/* Hex digits of an owner's tag in a lock id (digits 16..23). */
#define LOCKCORE_OWNER_TAG_LEN 8

/* One acquisition's options; lockcore_call_init copies the client's. */
struct lockcore_call {
    uint64_t ttl_ms;  /* as lockcore_options.ttl_ms */
    uint64_t wait_ms; /* as lockcore_options.wait_ms: 0 = no deadline */
    int retry_count;  /* as lockcore_options.retry_count: 0 = one attempt, -1 = no limit */
    int wait_mode;    /* enum lockcore_wait_mode */
    /*
     * Whom the acquisition is for (1..LOCKCORE_OWNER_MAX bytes, copied), or
     * NULL (default). Its lock ids then carry the owner's tag
     * (lockcore_owner_tag) in digits 16..23, in place of random ones, so
     * that whoever is shown an id can tell which owner took it with no
     * other state: a service that holds locks for several users refuses
     * one user's release of another's lock by the id alone, on any
     * instance (fencelockd does). The id keeps its layout, and 40 random
     * bits of its own beside the client's 64.
     */
    const char *owner;
};

/* Fill *call with c's options (owner NULL). Returns 0 or -EINVAL. */
LOCKCORE_API int lockcore_call_init(const lockcore_client *c, struct lockcore_call *call);

/* What to acquire. Zero it, then set the kind and its fields. */
struct lockcore_request {
    /* 0 (a plain lock), or one of LOCKCORE_LOCK_PERMIT (a semaphore's
     * permit), _MULTI, _REENTRANT, _READ, _WRITE. */
    unsigned kind;
    const char *resource;         /* every kind but MULTI */
    const char *const *resources; /* MULTI: n_resources names */
    size_t n_resources;
    unsigned permits; /* PERMIT: the semaphore's permits */
    const char *join; /* REENTRANT: a hold's id to re-enter, or NULL */
};

/*
 * Acquire rq (see each kind's call above for what it does and returns),
 * with call's options, or the client's when call is NULL. Returns what the
 * kind's own call returns; -EINVAL also for a bad kind, TTL, wait mode or
 * owner.
 */
LOCKCORE_API int lockcore_acquire_call(lockcore_client *c, const struct lockcore_request *rq,
                                       const struct lockcore_call *call, struct lockcore_lock *lock);
LOCKCORE_API int lockcore_acquire_call_async(lockcore_client *c, const struct lockcore_request *rq,
                                             const struct lockcore_call *call, lockcore_cb cb, void *arg);

/*
 * An owner's tag: LOCKCORE_OWNER_TAG_LEN lowercase hex digits of the
 * SHA-256 of "lockcore owner\n" and the name, NUL-terminated in tag.
 * Different names may share a tag (one pair in 2^32): a service that
 * names many owners checks its names for that once. Returns 0, or
 * -EINVAL for a name that is NULL, empty or over LOCKCORE_OWNER_MAX bytes.
 */
LOCKCORE_API int lockcore_owner_tag(const char *owner, char tag[LOCKCORE_OWNER_TAG_LEN + 1]);

/* 1 if the lock id carries owner's tag (an acquisition for that owner, or
 * by chance one in 2^32), 0 if not or for a bad id or owner. */
LOCKCORE_API int lockcore_id_owned_by(const char *id, const char *owner);

/* ---- Leader election ----------------------------------------------------
 * An election of a name among candidates, whose leader's epoch is its
 * fencing token: every resource that checks tokens (storage-guard,
 * fencestore, fenced files) refuses a deposed leader's writes as it
 * refuses any stale holder's. Leadership is the fair lock of the
 * resource `name`, so candidates are elected in the order they asked and
 * a candidate that dies while it waits is passed over when its place in
 * line lapses (queue_ttl_ms); the leader's epoch and value are kept beside
 * the lock (its holder info, "<epoch> <value>", with the lock's TTL) and
 * every change is told on the election's channel "{key}:leader", which
 * observers listen to. Do not take other locks of `name`.
 * docs/election.md has the safety argument. Fencing must be on. */

/* Longest value a candidate proclaims, in bytes (no NUL). */
#define LOCKCORE_VALUE_MAX 256

/* Who leads, as a majority of the nodes say. */
struct lockcore_leader {
    int held;                           /* 1: a majority holds one leader's lock and its epoch */
    uint64_t epoch;                     /* its fencing token; 0 if none */
    char value[LOCKCORE_VALUE_MAX + 1]; /* what it proclaimed */
    char id[LOCKCORE_ID_LEN + 1];       /* its lock id */
    uint64_t ttl_ms_left;               /* the least time its lock has left on those nodes */
    unsigned reachable;                 /* nodes that answered */
};

/*
 * Campaign to lead `name` (as a resource: 1..LOCKCORE_RESOURCE_MAX bytes)
 * proclaiming value (NULL: ""): wait in line, fair, until elected, with
 * call's options (NULL: the client's; the wait mode is always fair, and
 * retry_count -1 with wait_ms 0 waits until elected). Once granted, the
 * leader's epoch (lock->token) and value are set beside the lock on a
 * majority and observers are told, before this returns. *lock is the
 * leader's lock (flags LOCKCORE_LOCK_LEADER): keep it alive with
 * lockcore_keepalive_start (its loss callback is the moment leadership is
 * lost) or extend it, and check lockcore_remaining_ms before every write
 * under the epoch. Returns 0, or what lockcore_acquire returns
 * (LOCKCORE_ELOCKED when the wait ran out), -EINVAL for a bad name or
 * value or with fencing off. The _async form's callback runs once;
 * lockcore_cancel(c, cb, arg) ends it (rolled back, out of line; a grant
 * not yet proclaimed is released).
 */
LOCKCORE_API int lockcore_campaign(lockcore_client *c, const char *name, const char *value,
                                   const struct lockcore_call *call, struct lockcore_lock *lock);
LOCKCORE_API int lockcore_campaign_async(lockcore_client *c, const char *name, const char *value,
                                         const struct lockcore_call *call, lockcore_cb cb, void *arg);

/*
 * Proclaim a new value (NULL: "") and extend the leader's lock to ttl_ms
 * (0: its TTL) in one step: the epoch stays. Only where the lock is still
 * the leader's, so a deposed leader's late proclamation changes nothing.
 * A leader's lock known by its id alone (lockcore_lock_from_id with
 * LOCKCORE_LOCK_LEADER added: token 0) keeps the epoch each node has.
 * Updates *lock's validity as lockcore_extend does. Returns what
 * lockcore_extend returns (LOCKCORE_ELOST: no longer the leader), -EINVAL
 * for a lock that is not a leader's or a bad value.
 */
LOCKCORE_API int lockcore_proclaim(lockcore_client *c, struct lockcore_lock *lock, const char *value,
                                   uint64_t ttl_ms);
LOCKCORE_API int lockcore_proclaim_async(lockcore_client *c, const struct lockcore_lock *lock,
                                         const char *value, uint64_t ttl_ms, lockcore_cb cb, void *arg);

/*
 * Resign: release the leader's lock so that the next candidate in line is
 * elected at once (the release names it and keeps the lock for it), and
 * tell observers. Returns what lockcore_release returns. Stop a
 * keep-alive of the lock first.
 */
LOCKCORE_API int lockcore_resign(lockcore_client *c, struct lockcore_lock *lock);
LOCKCORE_API int lockcore_resign_async(lockcore_client *c, const struct lockcore_lock *lock, lockcore_cb cb,
                                       void *arg);

/*
 * Read who leads `name` now into *out (anyone may: candidate or not).
 * Returns 1 (a leader, out->held), 0 (none: a majority answered and holds
 * no lock of the name), -EAGAIN (changing hands: a majority holds a lock
 * of the name but not yet one leader's proclaimed epoch, as between a
 * resignation and the next leader's proclamation), LOCKCORE_ENOQUORUM
 * (fewer than a majority answered), -EINVAL, -EDEADLK.
 */
LOCKCORE_API int lockcore_leader(lockcore_client *c, const char *name, struct lockcore_leader *out);

/* An observer's callback: rc as lockcore_observe returns, l borrowed for
 * the call. */
typedef void (*lockcore_leader_cb)(lockcore_client *c, int rc, const struct lockcore_leader *l, void *arg);

/*
 * Wait for the leader of `name` to differ from *after (NULL: answer with
 * the first reading), up to wait_ms (0: no bound): a new leader, a new
 * value, or no leader. Observers listen on the election's channel and
 * read the nodes again when told (a proclamation, a resignation), and
 * otherwise only when what they saw runs out (the leader's TTL: a leader
 * that died tells nobody), never polling. A reading changing hands
 * (-EAGAIN above) is not reported: the next leader's proclamation is;
 * nor is a leader with an epoch below after's (stale keys: an observer
 * that passes its last reading as after never sees the epoch go back).
 * Returns 0 with *out the new reading (out->held 0: no leader),
 * -ETIMEDOUT when wait_ms ran out first (*out the last reading), -EINVAL,
 * -EDEADLK. The _async form's callback runs once;
 * lockcore_observe_cancel(c, cb, arg) ends it (callback with
 * LOCKCORE_ECANCELED before it returns).
 */
LOCKCORE_API int lockcore_observe(lockcore_client *c, const char *name, const struct lockcore_leader *after,
                                  uint64_t wait_ms, struct lockcore_leader *out);
LOCKCORE_API int lockcore_observe_async(lockcore_client *c, const char *name,
                                        const struct lockcore_leader *after, uint64_t wait_ms,
                                        lockcore_leader_cb cb, void *arg);
/* Returns the number of observers ended, or -EINVAL. */
LOCKCORE_API int lockcore_observe_cancel(lockcore_client *c, lockcore_leader_cb cb, void *arg);

/* ---- Steps with undo ----------------------------------------------------- */

/*
 * For work under a lock whose effects are outside any one store (a payment,
 * a mail, a file, a call to another service): run steps in order while the
 * lock is held, and if a step fails or the lock is lost, undo the steps
 * already done, last first. Where every effect is a write to one
 * fencing-aware store, prefer one atomic write under the token (a
 * storage-guard batch): it cannot be half done, and a stale holder's write
 * is refused there, while an undo is best effort and comes after the fact.
 * See docs/lockcore.md, "Steps with undo".
 *
 * The lock is checked before the first step and after each step (the last
 * one included): the keep-alive's work that is due is run (its on_lost
 * included), then the lock is extended on a majority (confirm), then its
 * validity is checked. A step that ran past the validity is undone too: it
 * may have acted without the lock. The steps run in the caller's thread,
 * one after the other; a keep-alive cannot extend while a step runs, so a
 * step should take well under the TTL (min_validity_ms keeps a step from
 * starting with less validity than it needs).
 */

/* What a step's run and undo functions are told. Borrowed for the call. */
struct lockcore_step_ctx {
    const struct lockcore_lock *lock; /* the held lock: its token goes with every effect */
    size_t index;                     /* this step's place in the array */
    int reason;                       /* run: 0. undo: why the steps stopped: the failed
                                         step's return value, or the code the lock was lost
                                         with (LOCKCORE_ELOST, LOCKCORE_ENOQUORUM, ...) */
    size_t stopped_at;                /* undo: the step that failed, or the number of steps
                                         done when the lock was found lost */
    int lost;                         /* undo: 1 if the lock was lost, 0 if a step failed */
};

struct lockcore_step {
    const char *name; /* for lockcore_errmsg; may be NULL */
    /* Do the step. Return 0 when done, or a non-zero code of your own
     * (negative, by the convention of this header) when it failed: a failed
     * step must leave nothing to undo, since its own undo is not called. */
    int (*run)(const struct lockcore_step_ctx *ctx, void *arg);
    /* Undo a step that was done; NULL if there is nothing to undo. Return 0
     * when undone, non-zero when not (counted; the other undos still run).
     * It may run after the lock is lost: make it safe to run then (an undo
     * by the token, an idempotent compensation). */
    int (*undo)(const struct lockcore_step_ctx *ctx, void *arg);
    void *arg; /* passed to both; borrowed */
};

struct lockcore_steps_options {
    int confirm;                   /* 1 (default): before the first step and after each,
                                      extend the lock on a majority (lockcore_extend): this
                                      confirms it is still ours (a key expired or overwritten
                                      is found at once) and gives the next step a full TTL.
                                      One round trip per step. 0: rely on the validity and
                                      the keep-alive only */
    uint64_t ttl_ms;               /* TTL of those extensions; 0 (default) = the client's TTL */
    uint64_t min_validity_ms;      /* a step starts only with at least this much validity
                                      left; 0 (default): any */
    lockcore_keepalive *keepalive; /* a keep-alive of the same lock, or NULL (default);
                                      borrowed. Its due work runs between the steps
                                      (lockcore_run with no wait) and its loss stops
                                      them. Its on_lost must not free the client */
};

struct lockcore_steps_report {
    size_t done;        /* steps whose run returned 0 */
    size_t stopped_at;  /* n when every step was done; else as lockcore_step_ctx */
    int lost;           /* 1 if stopped because the lock was lost */
    int reason;         /* what lockcore_steps_run returned */
    size_t undone;      /* undo functions that returned 0 */
    size_t undo_failed; /* undo functions that returned non-zero */
};

/* Fill *o with the defaults above. Returns 0, or -EINVAL for NULL. */
LOCKCORE_API int lockcore_steps_options_init(struct lockcore_steps_options *o);

/*
 * Run steps[0..n-1] under the held lock (see above); opts NULL = defaults.
 * *lock is updated by the extensions (release it with it afterwards: the
 * steps never release it). *report (may be NULL) says what happened.
 * Returns 0 when every step was done and the lock was still held after the
 * last; the failed step's own code, unchanged (report->lost 0); or the code
 * the lock was lost with (report->lost 1): LOCKCORE_ELOST, LOCKCORE_ENOQUORUM,
 * LOCKCORE_EPROTO, or a poll failure. In both failure cases the steps done
 * have been undone, last first, before it returns. -EINVAL for bad
 * arguments (nothing run), -EDEADLK from a callback (a blocking call).
 * lockcore_errmsg() names the step and the reason.
 */
LOCKCORE_API int lockcore_steps_run(lockcore_client *c, struct lockcore_lock *lock,
                                    const struct lockcore_step *steps, size_t n,
                                    const struct lockcore_steps_options *opts,
                                    struct lockcore_steps_report *report);

#ifdef __cplusplus
}
#endif

#endif
