/*
 * fencing: monotonic 64-bit fencing tokens for locks held on N independent
 * Redis nodes, and the check a resource uses to refuse stale writes.
 *
 * A token is a plain uint64_t. 0 means "no token". Tokens issued by
 * lockcore start near the current time in microseconds (about 1.7e15) and
 * stay below FENCING_TOKEN_MAX (2^53), so they survive a trip through Lua
 * numbers and JSON doubles unchanged.
 *
 * This header has three parts:
 *   1. token arithmetic and the pure decision logic of the issuing protocol
 *      (no I/O; lockcore drives it over Redis);
 *   2. where fences live (buckets), and the Lua scripts the issuing
 *      protocol runs on each node;
 *   3. the resource-side check, pure (the SQLite-backed store of last
 *      tokens is a library of its own, fencestore, so that a lock client
 *      links hiredis only).
 *
 * Thread safety: every function here is reentrant.
 */
#ifndef FENCING_FENCING_H
#define FENCING_FENCING_H

#include <stddef.h>
#include <stdint.h>

#if defined(FENCING_BUILD) && defined(__GNUC__)
#define FENCING_API __attribute__((visibility("default")))
#else
#define FENCING_API
#endif

#ifdef __cplusplus
extern "C" {
#endif

/* Largest token ever proposed, exclusive: Lua numbers are doubles. */
#define FENCING_TOKEN_MAX ((uint64_t)1 << 53)

/* Error codes: 0 on success, -errno for system failures, these for domain
 * failures. */
enum {
    FENCING_ESTALE = -11001,     /* token is older than the last one admitted */
    FENCING_EEXHAUSTED = -11002, /* a proposal would reach FENCING_TOKEN_MAX */
    FENCING_ESTORE = -11003,     /* the SQLite store failed; see errmsg */
    FENCING_ENOTOKEN = -11004,   /* token 0 given where a token is required */
};

/* A static message for any error code this library returns. */
FENCING_API const char *fencing_strerror(int err);

/* ---- 1. Token arithmetic and the issuing protocol's decisions -------- */

/* Compare two tokens: negative, 0 or positive like memcmp. */
FENCING_API int fencing_token_cmp(uint64_t a, uint64_t b);

/* The majority of n nodes: n/2 + 1. Returns 0 for n == 0. */
FENCING_API unsigned fencing_quorum(unsigned n);

/*
 * Choose the first-round proposal: max(now_us, last_seen + 1).
 * now_us is the proposer's clock in microseconds since the epoch;
 * last_seen the largest fence value the proposer has seen for the resource
 * (0 if none). Writes *out on success. Returns -EINVAL for out == NULL,
 * FENCING_EEXHAUSTED if the proposal would be >= FENCING_TOKEN_MAX.
 */
FENCING_API int fencing_propose(uint64_t now_us, uint64_t last_seen, uint64_t *out);

/*
 * Choose a second-round proposal: max_seen + 1, where max_seen is the
 * largest fence value any node reported. Same errors as fencing_propose.
 */
FENCING_API int fencing_propose_next(uint64_t max_seen, uint64_t *out);

/* What a round of replies tells the proposer to do next. */
enum fencing_verdict {
    FENCING_WAIT = 0, /* not decided yet: more replies are needed */
    FENCING_GRANTED,  /* lock granted by a majority, token accepted */
    FENCING_ROUND2,   /* lock granted by a majority, token not accepted:
                         run a second round with fencing_propose_next() */
    FENCING_FAILED,   /* a majority can no longer grant: release, retry */
};

/*
 * Tally of one round over n nodes. granted: nodes that set the lock key;
 * accepted: nodes that stored the proposal (a subset of the granted ones in
 * round one; any node in round two); answered: nodes that replied at all or
 * failed for good (timeout, error, unreachable). In round two set
 * granted = n, since the lock is already held.
 */
struct fencing_tally {
    unsigned n;
    unsigned granted;
    unsigned accepted;
    unsigned answered;
};

/*
 * Decide a round. fenced == 0 gives plain Redlock: GRANTED as soon as a
 * majority granted, FAILED as soon as a majority can no longer grant.
 * With fencing, GRANTED needs a majority to accept the proposal too, and
 * ROUND2 comes once a majority granted but acceptance by a majority has
 * become impossible. Returns FENCING_FAILED for a malformed tally.
 */
FENCING_API enum fencing_verdict fencing_decide(const struct fencing_tally *t, int fenced);

/* ---- 2. Where fences live, and the Lua scripts run on each node ------ */

/*
 * A resource's fence on a node is shared with the other resources of its
 * bucket (docs/fencing.md, "Where fences live"): each key prefix has
 * FENCING_BUCKETS buckets, kept FENCING_BUCKET_FIELDS to a hash, so that
 * the memory of a node's fences is fixed whatever the number of resources,
 * and no fence needs an expiry. A token larger than the bucket's fence is
 * larger than every token of every resource of the bucket, so T1 and T2
 * hold per resource as before. The bucket of a resource is part of the
 * layout: every client sharing resources must compute the same one.
 */
#define FENCING_BUCKETS 16384u
#define FENCING_BUCKET_FIELDS 64u

/*
 * The bucket of a resource (its name without the key prefix), in
 * [0, FENCING_BUCKETS): the 64-bit FNV-1a hash of its bytes, its upper
 * and lower halves xored, modulo FENCING_BUCKETS. Returns 0 for NULL.
 */
FENCING_API unsigned fencing_bucket(const char *resource, size_t len);

/*
 * The hash that holds bucket b under key prefix `prefix` (prefix_len bytes,
 * may be 0): prefix, a NUL byte, "fence:" and b / FENCING_BUCKET_FIELDS in
 * decimal. The NUL is on purpose: no resource name or key prefix contains
 * one, so no lock key or other key of any resource can ever be this name,
 * and the name still starts with the prefix (an ACL's ~prefix* covers it).
 * Writes the name and a terminating NUL (cap bytes at most); returns the
 * name's length (use it: strlen stops at the inner NUL), -EINVAL for bad
 * arguments or -ENOSPC when cap is too small. The bucket's field in that
 * hash is b % FENCING_BUCKET_FIELDS in decimal (fencing_bucket_field).
 */
FENCING_API int fencing_bucket_key(const char *prefix, size_t prefix_len, unsigned bucket, char *buf,
                                   size_t cap);

/*
 * The field of bucket b in its hash: b % FENCING_BUCKET_FIELDS in decimal,
 * NUL-terminated (cap >= 3). Returns its length, or -EINVAL.
 */
FENCING_API int fencing_bucket_field(unsigned bucket, char *buf, size_t cap);

/*
 * Acquire with a proposal, atomically on one node.
 * KEYS[1] lock key, KEYS[2] the bucket's hash (fencing_bucket_key), KEYS[3]
 * the resource's own fence key of the layout before buckets
 * (fencing_fence_key of the lock key: read, so that a token never goes
 * back for a resource last locked by a client of that layout);
 * ARGV[1] lock id, ARGV[2] ttl ms, ARGV[3] proposal, ARGV[4] "-" (the
 * bucket only; the old fence key is deleted where the bucket takes over)
 * or, in transition mode, the old fence key's idle expiry in ms ("0":
 * none), ARGV[5] how far ahead of the node's clock a proposal may be, µs
 * ("0": no bound), ARGV[6] the bucket's field (fencing_bucket_field).
 * Returns an array: granted (0/1), accepted (0/1), and the resource's fence
 * value on the node after the call, as a decimal string; when not granted,
 * two more elements say who holds the lock: the lock key's value and its
 * PTTL.
 */
FENCING_API extern const char fencing_script_acquire[];

/*
 * Store a proposal if it is greater than the resource's fence value ("set
 * if greater"). KEYS[1] the bucket's hash, KEYS[2] the old fence key;
 * ARGV[1] proposal, ARGV[2] as the acquire's ARGV[4], ARGV[3] the bucket's
 * field, ARGV[4] as the acquire's ARGV[5] (a proposal further ahead of the
 * node's clock is stored in the old fence key, without expiry, not in the
 * bucket). Returns a 2-element array: accepted (0/1), fence value after
 * the call as a decimal string.
 */
FENCING_API extern const char fencing_script_raise[];

/*
 * Build the fence key of a lock key in the layout before buckets:
 * "{" lock_key "}:fence". Clients of that layout read and write only this
 * key; this version reads it, and writes it in transition mode.
 * Writes at most cap bytes including the NUL. Returns the length written
 * (without NUL), -EINVAL for bad arguments or -ENOSPC when cap is too small.
 */
FENCING_API int fencing_fence_key(const char *lock_key, size_t lock_key_len, char *buf, size_t cap);

/*
 * Parse a decimal token as Redis returns it ("1731234567890123"). Accepts
 * only digits, no sign, no spaces, value < FENCING_TOKEN_MAX, or "" / NULL
 * for 0 (a missing key). Returns 0 or -EINVAL.
 */
FENCING_API int fencing_token_parse(const char *s, size_t len, uint64_t *out);

/* ---- 3. The resource-side check --------------------------------------- */

/*
 * The check itself, with no storage: may a write carrying `token` proceed
 * when the largest token admitted so far for the resource is `last`?
 * Equal is admitted (the same holder writing again); smaller is refused.
 * Returns 0 to admit, FENCING_ENOTOKEN for token 0, FENCING_ESTALE to refuse.
 */
FENCING_API int fencing_check(uint64_t last, uint64_t token);

/* Longest resource name a resource-side store accepts, in bytes. */
#define FENCING_RESOURCE_MAX 1024

#ifdef __cplusplus
}
#endif

#endif
