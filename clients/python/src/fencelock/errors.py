"""Typed errors for every code fencelockd and storage-guard document.

Every error is a :class:`FencelockError` with ``status`` (the HTTP status,
0 when no answer came), ``code`` (the server's stable ``error`` code, or the
client's own: ``"canceled"``, ``"timeout"``, ``"unreachable"``,
``"protocol"``, ``"expired"``), ``message`` and ``body`` (the whole JSON
answer, or None). Test the class or ``code``, never ``message``.
"""
from typing import Any, Dict, Optional


class FencelockError(Exception):
    """Base class of every error this package raises."""

    def __init__(self, message: str, status: int = 0, code: str = "", body: Optional[Dict[str, Any]] = None):
        super().__init__(message)
        self.message = message
        self.status = status
        self.code = code
        self.body = body

    def __str__(self) -> str:
        if self.status:
            return "%s (%d %s)" % (self.message, self.status, self.code)
        return "%s (%s)" % (self.message, self.code) if self.code else self.message


class BadRequest(FencelockError):
    """The server refused the request as malformed (any 400, 405, 413, 414, 431, 501)."""


class Unauthorized(FencelockError):
    """401: the bearer token is missing or unknown."""


class Forbidden(FencelockError):
    """403: the token is known but not allowed this (another client's lock, a route its rules
    do not allow, a fence reset by a client that is not admin)."""


class NotFound(FencelockError):
    """404: no such route, or no such record."""


class Locked(FencelockError):
    """409 ``locked``: held by another client once the wait ran out.

    ``holder_client`` (the holder's bearer-token client name) and ``holder_ref``
    (a non-secret form of its lock id, see :func:`fencelock.lock_ref`) are None
    when the server does not say; ``ttl_ms_left`` and ``waiters`` as the server
    reported them."""

    @property
    def holder_client(self) -> Optional[str]:
        return _field(self.body, "holder_client")

    @property
    def holder_ref(self) -> Optional[str]:
        return _field(self.body, "holder_ref")

    @property
    def ttl_ms_left(self) -> Optional[int]:
        return _field(self.body, "ttl_ms_left")

    @property
    def waiters(self) -> Optional[int]:
        return _field(self.body, "waiters")


class NotElected(Locked):
    """409 ``not_elected``: a campaign whose wait ran out before it was elected
    (someone else leads, or candidates ahead of it are still in line). A
    :class:`Locked`, as the election is its name's lock."""


class Lost(FencelockError):
    """The lock is no longer held: an extension answered ``lost`` (409), or its
    monotonic validity ran out before an extension could push it out (code
    ``expired``). Stop working: the token may be stale already."""


class StaleToken(FencelockError):
    """409 ``stale_token`` from storage-guard: a larger token was admitted for the
    resource. ``last_token`` is that token."""

    @property
    def last_token(self) -> Optional[int]:
        return _field(self.body, "last_token")


class VersionMismatch(FencelockError):
    """412 ``version_mismatch``: a precondition (if_version, If-Match) did not hold.
    ``expected`` and ``version`` as the server reported them."""

    @property
    def expected(self) -> Any:
        return _field(self.body, "expected")

    @property
    def version(self) -> Optional[int]:
        return _field(self.body, "version")


class MissingToken(FencelockError):
    """428 ``missing_token``: a fenced operation without a token."""


class NodeError(FencelockError):
    """502 ``node_error``: a Redis node answered with an error (AUTH or ACL refused)."""


class NoQuorum(FencelockError):
    """503 ``no_quorum``: a majority of the nodes is unreachable or too slow."""


class TooSlow(FencelockError):
    """503 ``too_slow``: granted so slowly that no validity was left."""


class NoToken(FencelockError):
    """503 ``no_token``: no fencing token could be agreed."""


class ShuttingDown(FencelockError):
    """503 ``shutting_down``: the server is stopping; try again (another instance)."""


class Busy(FencelockError):
    """503 ``busy`` (fencelockd: too many option combinations at once) or
    ``store_busy`` (storage-guard: the database stayed locked). Retry."""


class ServerError(FencelockError):
    """500 ``internal`` or ``store_error``, or any other 5xx without a known code."""


class Unreachable(FencelockError):
    """No answer could be had: connection refused or reset, or TLS refused
    (an unknown certificate authority, say)."""


class Timeout(FencelockError):
    """No answer within the client's timeout."""


class Canceled(FencelockError):
    """The caller canceled the operation (the cancel event was set, the task was
    canceled)."""


class ProtocolError(FencelockError):
    """The answer was not what the API documents (not JSON, a field missing)."""


def _field(body: Optional[Dict[str, Any]], name: str) -> Any:
    return body.get(name) if isinstance(body, dict) else None


# Every documented code, and the class it maps to. The status decides for a
# code not listed here.
CODES = {
    # fencelockd
    "bad_json": BadRequest, "bad_body": BadRequest, "bad_kind": BadRequest, "bad_permits": BadRequest,
    "bad_parameter": BadRequest, "bad_resource": BadRequest, "bad_lock_id": BadRequest,
    "bad_request_head": BadRequest, "bad_framing": BadRequest, "bad_host": BadRequest,
    "bad_request": BadRequest, "unauthorized": Unauthorized, "forbidden": Forbidden,
    "not_found": NotFound, "method_not_allowed": BadRequest, "locked": Locked, "lost": Lost,
    "not_elected": NotElected,
    "body_too_large": BadRequest, "uri_too_long": BadRequest, "headers_too_large": BadRequest,
    "unsupported_transfer_encoding": BadRequest, "node_error": NodeError, "no_quorum": NoQuorum,
    "too_slow": TooSlow, "no_token": NoToken, "shutting_down": ShuttingDown, "busy": Busy,
    "internal": ServerError,
    # storage-guard
    "stale_token": StaleToken, "missing_token": MissingToken, "bad_token": BadRequest,
    "token_out_of_range": BadRequest, "version_mismatch": VersionMismatch, "bad_precondition": BadRequest,
    "token_mismatch": BadRequest, "token_too_far_ahead": BadRequest, "malformed_json": BadRequest,
    "missing_value": BadRequest, "unknown_field": BadRequest, "unknown_parameter": BadRequest,
    "bad_key": BadRequest, "bad_batch": BadRequest, "too_many_ops": BadRequest, "store_busy": Busy,
    "store_error": ServerError,
}

_BY_STATUS = {400: BadRequest, 401: Unauthorized, 403: Forbidden, 404: NotFound, 405: BadRequest,
              409: FencelockError, 412: VersionMismatch, 413: BadRequest, 414: BadRequest,
              428: MissingToken, 431: BadRequest, 501: BadRequest, 502: NodeError, 503: Busy}


def from_answer(status: int, body: Any, what: str = "") -> FencelockError:
    """The typed error for an HTTP answer that is not a success. Pure: no I/O."""
    obj = body if isinstance(body, dict) else None
    code = obj.get("error") if obj is not None and isinstance(obj.get("error"), str) else ""
    message = obj.get("message") if obj is not None and isinstance(obj.get("message"), str) else ""
    cls = CODES.get(code)
    if cls is None:
        cls = _BY_STATUS.get(status)
    if cls is None:
        cls = ServerError if status >= 500 else BadRequest if status >= 400 else ProtocolError
    text = message or ("HTTP %d" % status)
    return cls("%s: %s" % (what, text) if what else text, status=status, code=code, body=obj)
