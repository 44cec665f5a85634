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
/** Base class of every error this package throws. */
export class FencelockError extends Error {
    /** The HTTP status, or 0 when no answer came. */
    status;
    /** The server's `error` code, or the client's own. */
    code;
    /** The answer's JSON object, or null. */
    body;
    constructor(message, status = 0, code = '', body = null, options) {
        super(message, options);
        this.name = new.target.name;
        this.status = status;
        this.code = code;
        this.body = body;
    }
    field(name) {
        const v = this.body?.[name];
        return v === undefined ? null : v;
    }
}
/** The server refused the request as malformed (any 400, 405, 413, 414, 431, 501). */
export class BadRequestError extends FencelockError {
}
/** 401: the bearer token is missing or unknown. */
export class UnauthorizedError extends FencelockError {
}
/** 403: known token, not allowed this (another client's lock, a route its rules do not allow, a fence reset). */
export class ForbiddenError extends FencelockError {
}
/** 404: no such route, or no such record. */
export class NotFoundError extends FencelockError {
}
/** 409 `locked`: held by another client once the wait ran out. */
export class LockedError extends FencelockError {
    /** The holder's bearer-token client name, or null when the server does not say. */
    get holderClient() { return this.field('holder_client'); }
    /** A non-secret form of the holder's lock id (see {@link lockRef}), or null. */
    get holderRef() { return this.field('holder_ref'); }
    get ttlMsLeft() { return this.field('ttl_ms_left'); }
    get waiters() { return this.field('waiters'); }
}
/**
 * 409 `not_elected`: a campaign whose wait ran out before it was elected
 * (someone else leads, or candidates ahead of it are still in line). A
 * LockedError, as the election is its name's lock.
 */
export class NotElectedError extends LockedError {
}
/**
 * The lock is no longer held: an extension answered `lost` (409), or its
 * monotonic validity ran out before an extension pushed it out (code
 * `expired`). Stop working: the token may be stale already.
 */
export class LostError extends FencelockError {
}
/** 409 `stale_token` from storage-guard: a larger token was admitted. */
export class StaleTokenError extends FencelockError {
    /** The resource's last token, which refused this one. */
    get lastToken() { return this.field('last_token'); }
}
/** 412 `version_mismatch`: a precondition (ifVersion, If-Match) did not hold. */
export class VersionMismatchError extends FencelockError {
    get expected() { return this.field('expected'); }
    get version() { return this.field('version'); }
}
/** 428 `missing_token`: a fenced operation without a token. */
export class MissingTokenError extends FencelockError {
}
/** 502 `node_error`: a Redis node answered with an error (AUTH or ACL refused). */
export class NodeError extends FencelockError {
}
/** 503 `no_quorum`: a majority of the nodes is unreachable or too slow. */
export class NoQuorumError extends FencelockError {
}
/** 503 `too_slow`: granted so slowly that no validity was left. */
export class TooSlowError extends FencelockError {
}
/** 503 `no_token`: no fencing token could be agreed. */
export class NoTokenError extends FencelockError {
}
/** 503 `shutting_down`: the server is stopping; try again (another instance). */
export class ShuttingDownError extends FencelockError {
}
/** 503 `busy` (fencelockd) or `store_busy` (storage-guard). Retry. */
export class BusyError extends FencelockError {
}
/** 500 `internal` or `store_error`, or another 5xx without a known code. */
export class ServerError extends FencelockError {
}
/** No answer could be had: connection refused or reset, or TLS refused. */
export class UnreachableError extends FencelockError {
}
/** No answer within the client's timeout. */
export class TimeoutError extends FencelockError {
}
/** The caller canceled the operation (its AbortSignal fired). */
export class CanceledError extends FencelockError {
}
/** The answer was not what the API documents (not JSON, a field missing). */
export class ProtocolError extends FencelockError {
}
/** Every documented code and the class it maps to. */
export const CODES = Object.freeze({
    // fencelockd
    bad_json: BadRequestError, bad_body: BadRequestError, bad_kind: BadRequestError, bad_permits: BadRequestError,
    bad_parameter: BadRequestError, bad_resource: BadRequestError, bad_lock_id: BadRequestError,
    bad_request_head: BadRequestError, bad_framing: BadRequestError, bad_host: BadRequestError,
    bad_request: BadRequestError, unauthorized: UnauthorizedError, forbidden: ForbiddenError,
    not_found: NotFoundError, method_not_allowed: BadRequestError, locked: LockedError, lost: LostError,
    not_elected: NotElectedError,
    body_too_large: BadRequestError, uri_too_long: BadRequestError, headers_too_large: BadRequestError,
    unsupported_transfer_encoding: BadRequestError, node_error: NodeError, no_quorum: NoQuorumError,
    too_slow: TooSlowError, no_token: NoTokenError, shutting_down: ShuttingDownError, busy: BusyError,
    internal: ServerError,
    // storage-guard
    stale_token: StaleTokenError, missing_token: MissingTokenError, bad_token: BadRequestError,
    token_out_of_range: BadRequestError, version_mismatch: VersionMismatchError, bad_precondition: BadRequestError,
    token_mismatch: BadRequestError, token_too_far_ahead: BadRequestError, malformed_json: BadRequestError,
    missing_value: BadRequestError, unknown_field: BadRequestError, unknown_parameter: BadRequestError,
    bad_key: BadRequestError, bad_batch: BadRequestError, too_many_ops: BadRequestError, store_busy: BusyError,
    store_error: ServerError,
});
const BY_STATUS = {
    400: BadRequestError, 401: UnauthorizedError, 403: ForbiddenError, 404: NotFoundError, 405: BadRequestError,
    409: FencelockError, 412: VersionMismatchError, 413: BadRequestError, 414: BadRequestError,
    428: MissingTokenError, 431: BadRequestError, 501: BadRequestError, 502: NodeError, 503: BusyError,
};
/** The typed error for an HTTP answer that is not a success. Pure: no I/O. */
export function fromAnswer(status, body, what = '') {
    const obj = body !== null && typeof body === 'object' && !Array.isArray(body) ? body : null;
    const code = typeof obj?.error === 'string' ? obj.error : '';
    const message = typeof obj?.message === 'string' ? obj.message : '';
    let cls = Object.prototype.hasOwnProperty.call(CODES, code) ? CODES[code] : undefined;
    cls ??= BY_STATUS[status];
    cls ??= status >= 500 ? ServerError : status >= 400 ? BadRequestError : ProtocolError;
    const text = message || `HTTP ${status}`;
    return new cls(what ? `${what}: ${text}` : text, status, code, obj);
}
