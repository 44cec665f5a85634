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
 *   2. the Lua scripts the issuing protocol runs on each node;
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

/* ---- 2. The Lua scripts run on each node ----------------------------- */

/*
 * Acquire with a proposal, atomically on one node.
 * KEYS[1] lock key, KEYS[2] fence key; ARGV[1] lock id, ARGV[2] ttl ms,
 * ARGV[3] proposal, ARGV[4] fence idle expiry ms (0 = none).
 * Returns an array: granted (0/1), accepted (0/1), and the node's fence
 * value after the call, as a decimal string; when not granted, two more
 * elements say who holds the lock: the lock key's value and its PTTL.
 */
FENCING_API extern const char fencing_script_acquire[];

/*
 * Store a proposal if it is greater than the fence value ("set if greater").
 * KEYS[1] fence key; ARGV[1] proposal, ARGV[2] fence idle expiry ms.
 * Returns a 2-element array: accepted (0/1), fence value after the call as
 * a decimal string.
 */
FENCING_API extern const char fencing_script_raise[];

/*
 * Build the fence key of a lock key: "{" lock_key "}:fence", which hashes to
 * the same cluster slot as the lock key when the lock key has no braces.
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
