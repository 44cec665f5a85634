export declare const RESOURCE_MAX = 512;
export declare const VALUE_MAX = 256;
export declare const MULTI_MAX = 16;
export declare const PERMITS_MAX = 1024;
export declare const TOKEN_MAX: number;
/** The monotonic clock (CLOCK_MONOTONIC on Linux, as process.hrtime), in ms. */
export declare function nowMs(): number;
export declare function checkLockId(id: unknown): string;
/**
 * The non-secret reference of a lock id that fencelockd reports as
 * `holder_ref`: the first 16 lowercase hex digits of SHA-256 of the
 * acquisition's id (the 40-character id, in ASCII, with its last six
 * digits, the attempt's number, as "0"), so that every attempt of an
 * acquisition and a reentrant lock's first hold share it.
 */
export declare function lockRef(lockId: string): string;
/** A reentrant hold's owner: the first hold's id with its last six digits zeroed. */
export declare function ownerId(lockId: string): string;
export declare function checkResource(r: unknown, name?: string): string;
export declare function checkResources(rs: unknown): string[];
export declare function checkInt(v: unknown, name: string, lo: number, hi?: number): number;
export type WaitMode = 'notify' | 'fair' | 'poll';
export declare function checkWaitMode(w: unknown): WaitMode;
export declare function checkToken(t: unknown, name?: string): number;
/** Percent-encode a path segment: every byte but the unreserved ones. */
export declare function quote(s: string): string;
export type AcquireKind = 'plain' | 'multi' | 'read' | 'write' | 'semaphore' | 'reentrant';
/**
 * A lock's kind as the server names it in a grant (and as extend and release
 * need it); 'leader' is an election's leader, extended and resigned on its
 * election's routes.
 */
export type LockKind = 'plain' | 'permit' | 'multi' | 'reentrant' | 'read' | 'write' | 'leader';
export declare function acquireRequest(kind: AcquireKind, resource: string | null, resources: string[] | null, ttlMs: number, waitMs: number, wait: WaitMode, permits: number | null, reenterId: string | null): [string, Record<string, unknown>];
export declare function lockPath(resource: string, lockId: string, kind: string): string;
export declare function extendPath(resource: string, lockId: string, kind: string): string;
/** What a leader proclaims: a string of at most 256 bytes of UTF-8, without NUL. */
export declare function checkValue(v: unknown, name?: string): string;
export declare function electionPath(name: string): string;
export declare function proclaimPath(name: string, lockId: string): string;
/** A query value's encoding: every byte but the unreserved ones and those a query may carry as they are. */
export declare function quoteValue(s: string): string;
/**
 * A reading (afterEpoch null), or the next one that differs from afterEpoch
 * (0: no leader) and afterValue, waiting up to waitMs. A value whose
 * encoding is over 256 bytes is left out (fencelockd would refuse it).
 */
export declare function leaderPath(name: string, afterEpoch?: number | null, afterValue?: string | null, waitMs?: number): string;
/** Whether two readings name the same leader, epoch and value (or both none). */
export declare function sameReading(a: Record<string, unknown>, b: Record<string, unknown>): boolean;
export type StatusKind = 'plain' | 'rw' | 'reentrant' | 'semaphore';
export declare function statusPath(resource: string, kind?: StatusKind, permits?: number): string;
/** The monotonic validity of one lock (see the module's comment). */
export declare class Validity {
    acquiredMs: number;
    validUntilMs: number;
    constructor(sentMs: number, validityMs: number);
    /** An extension sent at sentMs answered validityMs; never moved back. */
    extended(sentMs: number, validityMs: number): void;
    remainingMs(now?: number): number;
    valid(now?: number): boolean;
}
/**
 * Whether a grant must be confirmed by an extension before it is used.
 * fencelockd counts a grant's validity_ms from the start of the attempt
 * that won it, which after a wait is later than the request, and the client
 * cannot know when. Counting from the request's send is safe but leaves
 * little after a wait; counting from the answer's arrival is not safe. So a
 * grant that took more than a tenth of its validity to arrive is extended
 * at once, its validity counted from that extension's send. A grant without
 * a wait costs nothing more.
 */
export declare function needsConfirm(sentMs: number, receivedMs: number, validityMs: number): boolean;
/** The keep-alive extends every third of the TTL. */
export declare function extendIntervalMs(ttlMs: number): number;
/** After an extension that failed in a way that may pass: a tenth of the TTL (at least 20 ms), growing to a third. */
export declare function retryDelayMs(ttlMs: number, attempt: number): number;
/** Between acquisitions retried while the wait bound lasts: 50 ms doubling to 1 s. */
export declare function acquireBackoffMs(attempt: number): number;
/**
 * The wait_ms of a retried acquisition: what is left, rounded down to a
 * whole second (100 ms below one). fencelockd keeps one lockcore client per
 * distinct (ttl_ms, wait_ms, wait) and answers busy past --max-clients: a
 * client must not send a new wait_ms with every try.
 */
export declare function retryWaitMs(leftMs: number): number;
/** Failures an acquisition retries while its wait lasts: nothing was granted. */
export declare const ACQUIRE_RETRY_CODES: ReadonlySet<string>;
/** Answers to an extension after which the keep-alive gives the lock up at once. */
export declare const KEEPALIVE_FATAL_CODES: ReadonlySet<string>;
/** Whether a status names one of ids as the holder: by holder_ref, else by the older servers' holder. */
export declare function statusHeldBy(status: Record<string, unknown>, ids: string[]): boolean;
