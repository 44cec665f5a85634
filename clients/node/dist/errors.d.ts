/**
 * Typed errors for every code fencelockd and storage-guard document.
 *
 * Every error is a {@link FencelockError} with `status` (the HTTP status, 0
 * when no answer came), `code` (the server's stable `error` code, or the
 * client's own: `canceled`, `timeout`, `unreachable`, `protocol`,
 * `expired`, `released`), `message` and `body` (the whole JSON answer, or
 * null). Test the class or `code`, never `message`.
 *
 * @module
 */
/** The JSON object of an answer. */
export type Json = {
    [key: string]: unknown;
};
/** Base class of every error this package throws. */
export declare class FencelockError extends Error {
    /** The HTTP status, or 0 when no answer came. */
    readonly status: number;
    /** The server's `error` code, or the client's own. */
    readonly code: string;
    /** The answer's JSON object, or null. */
    readonly body: Json | null;
    constructor(message: string, status?: number, code?: string, body?: Json | null, options?: {
        cause?: unknown;
    });
    protected field<T>(name: string): T | null;
}
/** The server refused the request as malformed (any 400, 405, 413, 414, 431, 501). */
export declare class BadRequestError extends FencelockError {
}
/** 401: the bearer token is missing or unknown. */
export declare class UnauthorizedError extends FencelockError {
}
/** 403: known token, not allowed this (another client's lock, a route its rules do not allow, a fence reset). */
export declare class ForbiddenError extends FencelockError {
}
/** 404: no such route, or no such record. */
export declare class NotFoundError extends FencelockError {
}
/** 409 `locked`: held by another client once the wait ran out. */
export declare class LockedError extends FencelockError {
    /** The holder's bearer-token client name, or null when the server does not say. */
    get holderClient(): string | null;
    /** A non-secret form of the holder's lock id (see {@link lockRef}), or null. */
    get holderRef(): string | null;
    get ttlMsLeft(): number | null;
    get waiters(): number | null;
}
/**
 * 409 `not_elected`: a campaign whose wait ran out before it was elected
 * (someone else leads, or candidates ahead of it are still in line). A
 * LockedError, as the election is its name's lock.
 */
export declare class NotElectedError extends LockedError {
}
/**
 * The lock is no longer held: an extension answered `lost` (409), or its
 * monotonic validity ran out before an extension pushed it out (code
 * `expired`). Stop working: the token may be stale already.
 */
export declare class LostError extends FencelockError {
}
/** 409 `stale_token` from storage-guard: a larger token was admitted. */
export declare class StaleTokenError extends FencelockError {
    /** The resource's last token, which refused this one. */
    get lastToken(): number | null;
}
/** 412 `version_mismatch`: a precondition (ifVersion, If-Match) did not hold. */
export declare class VersionMismatchError extends FencelockError {
    get expected(): unknown;
    get version(): number | null;
}
/** 428 `missing_token`: a fenced operation without a token. */
export declare class MissingTokenError extends FencelockError {
}
/** 502 `node_error`: a Redis node answered with an error (AUTH or ACL refused). */
export declare class NodeError extends FencelockError {
}
/** 503 `no_quorum`: a majority of the nodes is unreachable or too slow. */
export declare class NoQuorumError extends FencelockError {
}
/** 503 `too_slow`: granted so slowly that no validity was left. */
export declare class TooSlowError extends FencelockError {
}
/** 503 `no_token`: no fencing token could be agreed. */
export declare class NoTokenError extends FencelockError {
}
/** 503 `shutting_down`: the server is stopping; try again (another instance). */
export declare class ShuttingDownError extends FencelockError {
}
/** 503 `busy` (fencelockd) or `store_busy` (storage-guard). Retry. */
export declare class BusyError extends FencelockError {
}
/** 500 `internal` or `store_error`, or another 5xx without a known code. */
export declare class ServerError extends FencelockError {
}
/** No answer could be had: connection refused or reset, or TLS refused. */
export declare class UnreachableError extends FencelockError {
}
/** No answer within the client's timeout. */
export declare class TimeoutError extends FencelockError {
}
/** The caller canceled the operation (its AbortSignal fired). */
export declare class CanceledError extends FencelockError {
}
/** The answer was not what the API documents (not JSON, a field missing). */
export declare class ProtocolError extends FencelockError {
}
type ErrorClass = new (message: string, status?: number, code?: string, body?: Json | null) => FencelockError;
/** Every documented code and the class it maps to. */
export declare const CODES: Readonly<Record<string, ErrorClass>>;
/** The typed error for an HTTP answer that is not a success. Pure: no I/O. */
export declare function fromAnswer(status: number, body: unknown, what?: string): FencelockError;
export {};
