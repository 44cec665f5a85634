import type { LockKind, StatusKind, WaitMode } from './core.js';
import { FencelockError } from './errors.js';
import type { Json } from './errors.js';
import type { TransportOptions } from './http.js';
/** Options of every acquisition. */
export interface LockOptions {
    /** The lease in ms (default 10000); the keep-alive extends it every third of it. */
    ttlMs?: number;
    /** How long to wait while it is held (default 0: one try); at most the server's --max-wait. */
    waitMs?: number;
    /** How to wait: 'notify' (default), 'fair' (in arrival order) or 'poll'. */
    wait?: WaitMode;
    /** Keep the lock alive from this process until released (default true). */
    keepalive?: boolean;
    /** Cancels the acquisition (rejects with CanceledError); the server withdraws the wait. */
    signal?: AbortSignal;
    /** Called the moment the lock is known lost. */
    onLost?: (lock: Lock, error: FencelockError) => void;
}
/** A status answer (GET /v1/locks/{resource}), with the holder fields read defensively. */
export declare class Status {
    /** The answer as the server sent it. */
    readonly raw: Json;
    constructor(raw: Json);
    get held(): boolean;
    /** The holder's bearer-token client name, or null (absent: null). */
    get holderClient(): string | null;
    /** A non-secret form of the holder's lock id, or null (absent: null). */
    get holderRef(): string | null;
    /** Whether this status names `lock` as the holder. */
    heldBy(lock: Lock): boolean;
}
/** Options of a campaign. */
export interface CampaignOptions {
    /** The lease in ms (default 10000); the keep-alive extends it every third of it. */
    ttlMs?: number;
    /** How long to wait in line (default 0: one attempt); at most the server's --max-wait. */
    waitMs?: number;
    /** Keep leading (extend) from this process until resigned (default true). */
    keepalive?: boolean;
    /** Cancels the campaign (rejects with CanceledError); it leaves the line. */
    signal?: AbortSignal;
    /** Called the moment the leader is known deposed. */
    onLost?: (leader: Leader, error: FencelockError) => void;
}
/** Options of an observer. */
export interface ObserveOptions {
    /** The reading the caller has (default none: wait for a leader). */
    after?: Reading | null;
    /** How long to wait for a change (default 30000). */
    waitMs?: number;
    /** Cancels the wait (rejects with CanceledError). */
    signal?: AbortSignal;
}
/**
 * Who leads an election (GET /v1/elections/{name}), read defensively: the
 * leader's fields are null when nobody leads (or the server does not say).
 */
export declare class Reading {
    /** The answer as the server sent it. */
    readonly raw: Json;
    constructor(raw: Json);
    get name(): string | null;
    /** Whether someone leads. */
    get leader(): boolean;
    /** Whether it differs from the reading an observer gave (false when its wait ran out). */
    get changed(): boolean;
    /** The leader's epoch (its fencing token), or null. */
    get epoch(): number | null;
    /** What the leader proclaimed last, or null. */
    get value(): string | null;
    get ttlMsLeft(): number | null;
    /** The bearer-token client that campaigned, or null (without an auth file). */
    get leaderClient(): string | null;
    /** The leader's ref (its lock id's non-secret form), or null. */
    get leaderRef(): string | null;
    /** Whether this reading names `leader` (by its ref and epoch). */
    ledBy(leader: Leader): boolean;
}
/**
 * A client of one fencelockd (`url` like `http://127.0.0.1:7600`). Share one
 * client in a process; `close()` it to close its connections.
 */
export declare class Client {
    constructor(url: string, options?: TransportOptions);
    /** Stop every keep-alive and close the connections (held locks run out by their TTL). */
    close(): void;
    /**
     * Take a plain lock, waiting up to `waitMs` while it is held. Rejects with
     * LockedError once the wait ran out, CanceledError when `signal` fires, or
     * another FencelockError.
     *
     * ```ts
     * await using lock = await client.lock('invoice:42', { waitMs: 5000 });
     * await store.put('invoice-42', { paid: true }, { lock });
     * ```
     */
    lock(resource: string, options?: LockOptions): Promise<Lock>;
    /** Several resources at once, all or none, under one token. */
    lockMany(resources: string[], options?: LockOptions): Promise<Lock>;
    /** A read lock: many readers, no writer. Its token is the largest of the writes' (not new). */
    readLock(resource: string, options?: LockOptions): Promise<Lock>;
    /** A write lock: one writer, no reader. */
    writeLock(resource: string, options?: LockOptions): Promise<Lock>;
    /** One of `permits` permits (every client of it names the same number); `lock.resource` is the permit. */
    semaphore(resource: string, permits: number, options?: LockOptions): Promise<Lock>;
    /** A first hold of a reentrant lock; {@link Lock.reenter} takes more. */
    reentrant(resource: string, options?: LockOptions): Promise<Lock>;
    /**
     * Campaign to lead the election `name`, proclaiming `value` (at most 256
     * bytes: an address, say), waiting in line up to `waitMs` (0: one attempt;
     * candidates are elected in the order they asked). Rejects with
     * NotElectedError once the wait ran out, CanceledError when `signal` fires
     * (the campaign leaves the line), or another FencelockError. The leader is
     * kept alive as a lock; its `epoch` is its fencing token.
     *
     * ```ts
     * await using leader = await client.campaign('scheduler', '10.0.0.7:8080', { waitMs: 60000 });
     * await store.put('schedule', plan, { lock: leader });   // sent with leader.epoch
     * ```
     */
    campaign(name: string, value: string, o?: CampaignOptions): Promise<Leader>;
    /**
     * Who leads `name` now (one request; anyone may ask). Rejects with
     * NoQuorumError when no majority agreed on a reading (as while it changes
     * hands) within fencelockd's 2 s.
     */
    leader(name: string): Promise<Reading>;
    /**
     * The next reading of `name` that differs from `after` (a new leader, a new
     * value, or none; no `after`: the first leader), waiting up to `waitMs`
     * (default 30000; a long poll answered at the change). If the wait ran
     * out, the reading now with `changed` false.
     */
    observe(name: string, o?: ObserveOptions): Promise<Reading>;
    /**
     * Who leads `name`, then each change: `for await (const r of
     * client.watch(name, { signal }))`. The first reading is the current one,
     * each next one the next change (long polls of `waitMs` each, never a
     * poll on a period). A failure that may pass (no quorum, a restart, no
     * answer) is retried with a back-off of 50 ms to 1 s; another is thrown.
     * Aborting `signal` (or leaving the loop) ends it. An epoch never goes
     * back: a reading of an older leader than one already given is skipped.
     */
    watch(name: string, o?: {
        waitMs?: number;
        signal?: AbortSignal;
    }): AsyncGenerator<Reading, void, undefined>;
    /** Proclaim a new value for the leader of `name` known by its id (epoch kept, lease extended). */
    proclaim(name: string, lockId: string, value: string, options?: {
        ttlMs?: number;
    }): Promise<Json>;
    /** Resign the leader of `name` known by its id: the next candidate in line is elected at once. */
    resign(name: string, lockId: string): Promise<Json>;
    /** Extend a lock by its id (no token in the answer). Rejects with LostError if gone. */
    extend(resource: string, lockId: string, options?: {
        ttlMs?: number;
        kind?: LockKind;
    }): Promise<Json>;
    /** Release a lock by its id; `nodes_released` below a majority means it had run out. */
    release(resource: string, lockId: string, options?: {
        kind?: LockKind;
    }): Promise<Json>;
    /** What the nodes say of a lock: kind plain, rw, reentrant, or semaphore with permits. */
    status(resource: string, options?: {
        kind?: StatusKind;
        permits?: number;
    }): Promise<Status>;
    /** GET /healthz. */
    health(): Promise<Json>;
}
/**
 * A held lock. `await using lock = await client.lock(...)` releases it on
 * leaving the block; or call {@link Lock.release}.
 *
 * {@link Lock.signal} is aborted the moment the lock is lost (its reason the
 * LostError) or released. {@link Lock.valid} and {@link Lock.check} read the
 * monotonic clock: a lock is never reported valid past the validity the
 * server granted, whether or not the keep-alive ran.
 */
export declare class Lock {
    /** The resource held (a permit's own name for a semaphore). */
    readonly resource: string;
    /** A multi-resource lock's names (else [resource]). */
    readonly resources: string[];
    /** As the server named it: plain, permit, multi, reentrant, read or write. */
    readonly kind: LockKind;
    readonly lockId: string;
    private refCache;
    /** A reentrant lock's owner id (what a status names as holder), else null. */
    readonly ownerId: string | null;
    /** The fencing token: send it with every write the lock protects. */
    readonly token: number;
    /** The semaphore's name, for a permit. */
    readonly semaphore: string | null;
    /** The grant as the server sent it. */
    readonly grant: Json;
    ttlMs: number;
    /** Extensions that succeeded. */
    extensions: number;
    protected readonly client: Client;
    private validity;
    private controller;
    private lostError;
    private released;
    private timer;
    private readonly onLost?;
    /** The non-secret reference of lockId that a status reports as holder_ref. */
    get ref(): string;
    /** Aborted when the lock is lost (reason: the LostError) or released. */
    get signal(): AbortSignal;
    private releasedError;
    /** When the acquisition was sent, on the monotonic clock (process.hrtime) in ms. */
    get acquiredMs(): number;
    /** The end of the validity, on the same clock. */
    get validUntilMs(): number;
    /** Milliseconds the lock is still certainly held (0 once not). */
    remainingMs(): number;
    /** Whether the lock is still certainly held (no request). */
    get valid(): boolean;
    /** Why the lock was lost, or null. */
    get lost(): FencelockError | null;
    /** Throw LostError unless still certainly held: not released, not lost, within its validity. */
    check(): void;
    /** Extend now (the keep-alive does it itself). Rejects with LostError if gone. */
    extend(ttlMs?: number): Promise<void>;
    private schedule;
    private tick;
    /**
     * Release (once; later calls do nothing) and stop the keep-alive; the
     * signal is aborted. A lost lock is released too, in case a majority still
     * holds it.
     */
    release(): Promise<void>;
    /** `await using` releases the lock. */
    [Symbol.asyncDispose](): Promise<void>;
    /** One more hold of a reentrant lock: same owner and token. */
    reenter(options?: LockOptions): Promise<Lock>;
    /**
     * Check the lock, then call `fn(token, signal)`: hand the token to your own
     * database's fenced write (docs/guarding-your-database.md), which must
     * refuse it if a larger token was seen.
     */
    fenced<T>(fn: (token: number, signal: AbortSignal) => T | Promise<T>): Promise<T>;
    /** The resource's status now. */
    status(): Promise<Status>;
}
/**
 * An elected leader: the lock of its election, whose token is its epoch.
 * `await using leader = await client.campaign(...)` resigns on leaving the
 * block; or call {@link Leader.resign}.
 *
 * It is a {@link Lock}: `check()`, `valid`, `remainingMs()`, `signal`
 * (aborted the moment it is deposed), `fenced(fn)`, on the same monotonic
 * validity and keep-alive; pass it as `{ lock: leader }` to storage-guard
 * and its epoch is sent as the token.
 */
export declare class Leader extends Lock {
    /** The election's name. */
    readonly name: string;
    /** The epoch: this leader's fencing token (== token); a later leader's is larger. */
    readonly epoch: number;
    private current;
    /** What it proclaimed last. */
    get value(): string;
    /**
     * Proclaim a new value under the same epoch (observers are told); it
     * extends the lease too. Rejects with LostError (and aborts the signal)
     * once deposed.
     */
    proclaim(value: string, ttlMs?: number): Promise<void>;
    /** Resign (once) and stop the keep-alive: the next candidate in line is elected at once. */
    resign(): Promise<void>;
    /** Who leads this election now (one request). */
    reading(): Promise<Reading>;
}
