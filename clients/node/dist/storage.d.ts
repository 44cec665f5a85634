import type { Json } from './errors.js';
import type { TransportOptions } from './http.js';
/** What a fenced call sends: a held lock (checked valid first, then its token), or a token. */
export interface Fenced {
    /** A held lock: checked, then its token is sent (LostError, and nothing sent, if it is not valid). */
    lock?: {
        token: number;
        check(): void;
    };
    /** A token as a number, sent as it is. */
    token?: number;
}
/** Preconditions of a put or delete. */
export interface Conditions {
    /** Only if the record is at this version (0: only if there is none). */
    ifVersion?: number;
    /** Only if the record exists. */
    ifExists?: boolean;
    /** The lock's name when it is not the key. */
    resource?: string;
}
/** One operation of a batch. */
export type BatchOp = {
    op: 'put';
    key: string;
    value: unknown;
    resource?: string;
    if_version?: number;
} | {
    op: 'delete';
    key: string;
    resource?: string;
    if_version?: number;
} | {
    op: 'check';
    key: string;
    version: number;
    resource?: string;
};
/**
 * A client of one storage-guard (`url` like `http://127.0.0.1:8080`), with
 * the same options as {@link Client} (token, ca, timeoutMs, maxSockets).
 */
export declare class StorageGuard {
    private readonly t;
    constructor(url: string, options?: TransportOptions);
    close(): void;
    private call;
    /**
     * Write `value` (any JSON value) under `key`, fenced. Resolves with
     * `{key, version, token, resource, previous_token}`; rejects with
     * StaleTokenError (409), VersionMismatchError (412), LostError (the lock
     * is no longer valid: nothing sent), ...
     */
    put(key: string, value: unknown, options: Fenced & Conditions): Promise<Json>;
    /**
     * Read a record, or null if there is none. With a lock or token the read
     * is fenced (admitted like a write); `raise: false` is a read lock
     * holder's read, which never moves the fence.
     */
    get(key: string, options?: Fenced & {
        resource?: string;
        raise?: boolean;
    }): Promise<Json | null>;
    /** Delete a record, fenced like a write. Resolves true if there was one. */
    delete(key: string, options: Fenced & Conditions): Promise<boolean>;
    /** Several puts, deletes and checks under one token, all or nothing. */
    batch(ops: BatchOp[], options: Fenced): Promise<Json>;
    /** The last token admitted for `resource` (0: none yet). */
    fence(resource: string): Promise<number>;
    /** An operator's reset of a fence (admin clients only; ForbiddenError otherwise). Breaks fencing: see storage-guard.md. */
    resetFence(resource: string, token: number): Promise<Json>;
    /** A page of the audit log: `{entries, next_after}`. */
    log(options?: {
        resource?: string;
        key?: string;
        after?: number;
        limit?: number;
    }): Promise<Json>;
    health(): Promise<Json | null>;
}
