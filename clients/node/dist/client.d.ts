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
    private readonly client;
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
