package fencelock

import (
	"errors"
	"fmt"
)

// Sentinel errors, one per kind of failure. Every error this package
// returns for an answer or a failed request is an *Error that matches one
// of them with errors.Is (and ErrCanceled also matches the context's own
// error). Test these or Error.Code, never the message.
var (
	ErrBadRequest      = errors.New("fencelock: bad request")      // any 400, 405, 413, 414, 431, 501
	ErrUnauthorized    = errors.New("fencelock: unauthorized")     // 401: bearer token missing or unknown
	ErrForbidden       = errors.New("fencelock: forbidden")        // 403: another client's lock, a route its rules forbid, a fence reset
	ErrNotFound        = errors.New("fencelock: not found")        // 404
	ErrLocked          = errors.New("fencelock: locked")           // 409 locked: held by another once the wait ran out
	ErrNotElected      = errors.New("fencelock: not elected")      // 409 not_elected: a campaign's wait ran out (matches ErrLocked too)
	ErrLost            = errors.New("fencelock: lock lost")        // 409 lost, or the validity ran out (code "expired")
	ErrStaleToken      = errors.New("fencelock: stale token")      // 409 stale_token from storage-guard
	ErrVersionMismatch = errors.New("fencelock: version mismatch") // 412
	ErrMissingToken    = errors.New("fencelock: missing token")    // 428
	ErrNode            = errors.New("fencelock: node error")       // 502 node_error
	ErrNoQuorum        = errors.New("fencelock: no quorum")        // 503 no_quorum
	ErrTooSlow         = errors.New("fencelock: too slow")         // 503 too_slow
	ErrNoToken         = errors.New("fencelock: no token")         // 503 no_token
	ErrShuttingDown    = errors.New("fencelock: shutting down")    // 503 shutting_down
	ErrBusy            = errors.New("fencelock: busy")             // 503 busy, store_busy
	ErrServer          = errors.New("fencelock: server error")     // 500 internal, store_error, other 5xx
	ErrUnreachable     = errors.New("fencelock: unreachable")      // connection refused or reset, TLS refused
	ErrTimeout         = errors.New("fencelock: timeout")          // no answer within the client's timeout
	ErrCanceled        = errors.New("fencelock: canceled")         // the caller's context ended
	ErrProtocol        = errors.New("fencelock: protocol error")   // an answer the API does not document
	ErrFencelock       = errors.New("fencelock: error")            // a 409 with a code this version does not know
)

// Error is an error answer of fencelockd or storage-guard, or a request
// that got none. Status is the HTTP status (0 when no answer came), Code
// the server's stable error code or the client's own ("canceled",
// "timeout", "unreachable", "protocol", "expired", "released"), Body the
// whole JSON answer (nil if none).
type Error struct {
	Status  int
	Code    string
	Message string
	Body    map[string]any
	Kind    error // the sentinel it matches
	cause   error
}

func (e *Error) Error() string {
	if e.Status != 0 {
		return fmt.Sprintf("%s (%d %s)", e.Message, e.Status, e.Code)
	}
	if e.Code != "" {
		return fmt.Sprintf("%s (%s)", e.Message, e.Code)
	}
	return e.Message
}

// Is matches the sentinel of the error's kind (and ErrNotElected matches
// ErrLocked too: the election is its name's lock).
func (e *Error) Is(target error) bool {
	return target == e.Kind || e.Kind == ErrNotElected && target == ErrLocked
}

// Unwrap gives the underlying cause: the context's error for ErrCanceled,
// the network error for ErrUnreachable.
func (e *Error) Unwrap() error { return e.cause }

func (e *Error) field(name string) any {
	if e.Body == nil {
		return nil
	}
	return e.Body[name]
}

// HolderRef is a refusal's (ErrLocked) holder_ref: a non-secret form of the
// holder's lock id (see LockRef), or "" when the server does not say.
func (e *Error) HolderRef() string { s, _ := e.field("holder_ref").(string); return s }

// HolderClient is a refusal's holder_client (the holder's bearer-token client), or "".
func (e *Error) HolderClient() string { s, _ := e.field("holder_client").(string); return s }

// LastToken is a stale_token answer's last_token (0 if absent).
func (e *Error) LastToken() uint64 { n, _ := toUint(e.field("last_token")); return n }

// codes maps every documented code to its kind.
var codes = map[string]error{
	// fencelockd
	"bad_json": ErrBadRequest, "bad_body": ErrBadRequest, "bad_kind": ErrBadRequest, "bad_permits": ErrBadRequest,
	"bad_parameter": ErrBadRequest, "bad_resource": ErrBadRequest, "bad_lock_id": ErrBadRequest,
	"bad_request_head": ErrBadRequest, "bad_framing": ErrBadRequest, "bad_host": ErrBadRequest,
	"bad_request": ErrBadRequest, "unauthorized": ErrUnauthorized, "forbidden": ErrForbidden,
	"not_found": ErrNotFound, "method_not_allowed": ErrBadRequest, "locked": ErrLocked, "lost": ErrLost,
	"body_too_large": ErrBadRequest, "uri_too_long": ErrBadRequest, "headers_too_large": ErrBadRequest,
	"unsupported_transfer_encoding": ErrBadRequest, "node_error": ErrNode, "no_quorum": ErrNoQuorum,
	"too_slow": ErrTooSlow, "no_token": ErrNoToken, "shutting_down": ErrShuttingDown, "busy": ErrBusy,
	"internal": ErrServer, "not_elected": ErrNotElected,
	// storage-guard
	"stale_token": ErrStaleToken, "missing_token": ErrMissingToken, "bad_token": ErrBadRequest,
	"token_out_of_range": ErrBadRequest, "version_mismatch": ErrVersionMismatch, "bad_precondition": ErrBadRequest,
	"token_mismatch": ErrBadRequest, "token_too_far_ahead": ErrBadRequest, "malformed_json": ErrBadRequest,
	"missing_value": ErrBadRequest, "unknown_field": ErrBadRequest, "unknown_parameter": ErrBadRequest,
	"bad_key": ErrBadRequest, "bad_batch": ErrBadRequest, "too_many_ops": ErrBadRequest, "store_busy": ErrBusy,
	"store_error": ErrServer,
}

var byStatus = map[int]error{
	400: ErrBadRequest, 401: ErrUnauthorized, 403: ErrForbidden, 404: ErrNotFound, 405: ErrBadRequest,
	409: ErrFencelock, 412: ErrVersionMismatch, 413: ErrBadRequest, 414: ErrBadRequest, 428: ErrMissingToken,
	431: ErrBadRequest, 501: ErrBadRequest, 502: ErrNode, 503: ErrBusy,
}

// FromAnswer is the typed error for an HTTP answer that is not a success
// (body: the parsed JSON object, or nil). Pure: no I/O.
func FromAnswer(status int, body map[string]any, what string) *Error {
	code, _ := body["error"].(string)
	msg, _ := body["message"].(string)
	kind, ok := codes[code]
	if !ok {
		kind, ok = byStatus[status]
	}
	if !ok {
		switch {
		case status >= 500:
			kind = ErrServer
		case status >= 400:
			kind = ErrBadRequest
		default:
			kind = ErrProtocol
		}
	}
	if msg == "" {
		msg = fmt.Sprintf("HTTP %d", status)
	}
	if what != "" {
		msg = what + ": " + msg
	}
	return &Error{Status: status, Code: code, Message: msg, Body: body, Kind: kind}
}

func clientError(kind error, code, msg string, cause error) *Error {
	return &Error{Code: code, Message: msg, Kind: kind, cause: cause}
}
