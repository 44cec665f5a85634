"""The parts of the clients without I/O: argument checks, request paths and
bodies, lock references, and the monotonic validity of a lock.

The validity rule, the same in every fencelock client: the client reads the
monotonic clock just before it sends an acquisition; the lock is valid until
that instant plus the server's ``validity_ms`` (which the server counts from
the request), and only a successful extension moves that instant, to its own
send time plus its ``validity_ms``. Nothing else does: a process that was
stopped past its validity finds the lock invalid the moment it runs again,
whether or not its keep-alive ran.
"""
import hashlib
import re
import time
import urllib.parse
from typing import Any, Dict, List, Optional, Sequence

from .errors import ProtocolError

KINDS = ("plain", "read", "write", "reentrant", "semaphore", "multi")
WAIT_MODES = ("notify", "fair", "poll")
_LOCK_ID = re.compile(r"^[0-9a-f]{40}$")
RESOURCE_MAX = 512
VALUE_MAX = 256
MULTI_MAX = 16
PERMITS_MAX = 1024
TOKEN_MAX = (1 << 53) - 1


def now_ms() -> float:
    """The monotonic clock (CLOCK_MONOTONIC on Linux), in milliseconds."""
    return time.monotonic() * 1000.0


def lock_ref(lock_id: str) -> str:
    """The non-secret reference of a lock id that fencelockd reports as
    ``holder_ref``: the first 16 lowercase hex digits of SHA-256 of the
    acquisition's id (the 40-character id with its last six digits, the
    attempt's number, as "0"), shared by every attempt of an acquisition
    and by a reentrant lock's first hold. Comparing it with a status tells whether the
    holder is this lock, without anyone seeing the id itself."""
    check_lock_id(lock_id)
    return hashlib.sha256((lock_id[:34] + "000000").encode("ascii")).hexdigest()[:16]


def owner_id(lock_id: str) -> str:
    """The owner of a reentrant hold: its id with the last six hex digits zeroed
    (the value of the lock key, which a status reports for a reentrant lock)."""
    check_lock_id(lock_id)
    return lock_id[:34] + "000000"


# ---- argument checks: every public call validates before any I/O ----

def check_resource(resource: Any, name: str = "resource") -> str:
    if not isinstance(resource, str):
        raise TypeError("%s must be a str, not %s" % (name, type(resource).__name__))
    n = len(resource.encode("utf-8"))
    if n == 0 or n > RESOURCE_MAX or "\0" in resource:
        raise ValueError("%s must be 1..%d bytes without NUL, not %d bytes" % (name, RESOURCE_MAX, n))
    return resource


def check_resources(resources: Any) -> List[str]:
    if isinstance(resources, (str, bytes)) or not isinstance(resources, (list, tuple)):
        raise TypeError("resources must be a list of str")
    if not 1 <= len(resources) <= MULTI_MAX:
        raise ValueError("resources must hold 1..%d names, not %d" % (MULTI_MAX, len(resources)))
    out = []
    for r in resources:
        check_resource(r, "each resource")
        if "\n" in r:
            raise ValueError("a resource of a multi-resource lock holds no newline")
        out.append(r)
    if len("\n".join(out).encode("utf-8")) > RESOURCE_MAX:
        raise ValueError("resources must be %d bytes in all at most" % RESOURCE_MAX)
    return out


def check_lock_id(lock_id: Any) -> str:
    if not isinstance(lock_id, str) or not _LOCK_ID.match(lock_id):
        raise ValueError("a lock id is 40 lowercase hex digits, not %r" % (lock_id,))
    return lock_id


def check_int(value: Any, name: str, lo: int, hi: Optional[int] = None) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError("%s must be an int, not %s" % (name, type(value).__name__))
    if value < lo or (hi is not None and value > hi):
        raise ValueError("%s must be in %d..%s, not %d" % (name, lo, hi if hi is not None else "", value))
    return value


def check_opt_int(value: Any, name: str, lo: int, hi: Optional[int] = None) -> Optional[int]:
    return None if value is None else check_int(value, name, lo, hi)


def check_wait_mode(wait: Any) -> str:
    if wait not in WAIT_MODES:
        raise ValueError("wait must be one of %s, not %r" % (", ".join(WAIT_MODES), wait))
    return wait


def check_token(token: Any, name: str = "token") -> int:
    return check_int(token, name, 1, TOKEN_MAX)


def check_url(url: Any, name: str = "url") -> urllib.parse.SplitResult:
    if not isinstance(url, str):
        raise TypeError("%s must be a str" % name)
    u = urllib.parse.urlsplit(url)
    if u.scheme not in ("http", "https") or not u.hostname:
        raise ValueError("%s must be http://HOST[:PORT] or https://HOST[:PORT], not %r" % (name, url))
    if u.path not in ("", "/") or u.query or u.fragment:
        raise ValueError("%s takes no path, query or fragment: %r" % (name, url))
    return u


def quote(segment: str) -> str:
    """Percent-encode a path segment: every byte but the unreserved ones."""
    return urllib.parse.quote(segment, safe="")


# ---- fencelockd requests ----

def acquire_request(kind: str, resource: Optional[str], resources: Optional[Sequence[str]], ttl_ms: int,
                    wait_ms: int, wait: str, permits: Optional[int], reenter_id: Optional[str]):
    """The path and body of an acquisition."""
    body: Dict[str, Any] = {"ttl_ms": ttl_ms, "wait_ms": wait_ms, "wait": wait}
    if kind != "plain" and kind != "multi":
        body["kind"] = kind
    if permits is not None:
        body["permits"] = permits
    if reenter_id is not None:
        body["lock_id"] = reenter_id
    if kind == "multi":
        body["resources"] = list(resources or [])
        return "/v1/locks", body
    return "/v1/locks/" + quote(resource or ""), body


def lock_path(resource: str, lock_id: str, kind: str) -> str:
    """A lock's own URL (release; extend appends /extend before the query). A
    leader's lock (kind "leader") is its election's: resigned there."""
    if kind == "leader":
        return "/v1/elections/%s/%s" % (quote(resource), lock_id)
    q = "" if kind == "plain" else "?kind=" + kind
    return "/v1/locks/%s/%s%s" % (quote(resource), lock_id, q)


def extend_path(resource: str, lock_id: str, kind: str) -> str:
    if kind == "leader":
        return "/v1/elections/%s/%s/extend" % (quote(resource), lock_id)
    q = "" if kind == "plain" else "?kind=" + kind
    return "/v1/locks/%s/%s/extend%s" % (quote(resource), lock_id, q)


def status_path(resource: str, kind: str = "plain", permits: Optional[int] = None) -> str:
    if kind == "semaphore":
        return "/v1/locks/%s?kind=semaphore&permits=%d" % (quote(resource), permits or 0)
    if kind in ("read", "write", "rw"):
        return "/v1/locks/%s?kind=rw" % quote(resource)
    if kind == "reentrant":
        return "/v1/locks/%s?kind=reentrant" % quote(resource)
    return "/v1/locks/" + quote(resource)


# ---- elections ----

def check_value(value: Any, name: str = "value") -> str:
    """What a leader proclaims: a str of at most 256 bytes of UTF-8, without NUL."""
    if not isinstance(value, str):
        raise TypeError("%s must be a str, not %s" % (name, type(value).__name__))
    n = len(value.encode("utf-8"))
    if n > VALUE_MAX or "\0" in value:
        raise ValueError("%s must be at most %d bytes without NUL, not %d bytes" % (name, VALUE_MAX, n))
    return value


def election_path(name: str) -> str:
    return "/v1/elections/" + quote(name)


def proclaim_path(name: str, lock_id: str) -> str:
    return "/v1/elections/%s/%s/proclaim" % (quote(name), lock_id)


# What a query value may carry without an escape.
_QUERY_SAFE = "-._~!$'()*,;:@/?"


def leader_path(name: str, after_epoch: Optional[int] = None, after_value: Optional[str] = None,
                wait_ms: int = 0) -> str:
    """A reading (no after), or the next reading that differs from after_epoch
    (0: no leader) and after_value (fencelockd decodes it before comparing),
    waiting up to wait_ms."""
    path = election_path(name)
    if after_epoch is None:
        return path
    q = "?after=%d" % after_epoch
    if after_value is not None:
        q += "&value=" + urllib.parse.quote(after_value, safe=_QUERY_SAFE)
    if wait_ms:
        q += "&wait_ms=%d" % wait_ms
    return path + q


def election_grant_fields(answer: Any, what: str) -> Dict[str, Any]:
    """The fields of an election's grant the clients rely on, checked."""
    if not isinstance(answer, dict):
        raise ProtocolError("%s: the answer is not a JSON object" % what, code="protocol")
    for f, t in (("name", str), ("lock_id", str), ("validity_ms", int), ("epoch", int)):
        if not isinstance(answer.get(f), t) or isinstance(answer.get(f), bool):
            raise ProtocolError("%s: the answer has no %s" % (what, f), code="protocol", body=answer)
    return answer


def same_reading(a: Dict[str, Any], b: Dict[str, Any]) -> bool:
    """Whether two readings name the same leader, epoch and value (or both none)."""
    if bool(a.get("leader")) != bool(b.get("leader")):
        return False
    return not a.get("leader") or (a.get("epoch") == b.get("epoch") and a.get("value") == b.get("value"))


def grant_fields(answer: Any, what: str) -> Dict[str, Any]:
    """The fields of a grant the clients rely on, checked."""
    if not isinstance(answer, dict):
        raise ProtocolError("%s: the answer is not a JSON object" % what, code="protocol")
    for f, t in (("resource", str), ("kind", str), ("lock_id", str), ("validity_ms", int)):
        if not isinstance(answer.get(f), t):
            raise ProtocolError("%s: the answer has no %s" % (what, f), code="protocol", body=answer)
    return answer


class Validity:
    """The monotonic validity of one lock; see the module's comment. Not thread-safe
    by itself: the lock that owns it holds its own mutex around it."""

    __slots__ = ("valid_until_ms", "acquired_ms")

    def __init__(self, sent_ms: float, validity_ms: int):
        self.acquired_ms = sent_ms
        self.valid_until_ms = sent_ms + validity_ms

    def extended(self, sent_ms: float, validity_ms: int) -> None:
        """An extension sent at sent_ms answered validity_ms: the lock is valid until
        then (never moved back: an older extension's late answer changes nothing)."""
        until = sent_ms + validity_ms
        if until > self.valid_until_ms:
            self.valid_until_ms = until

    def remaining_ms(self, now: Optional[float] = None) -> float:
        return max(0.0, self.valid_until_ms - (now_ms() if now is None else now))

    def valid(self, now: Optional[float] = None) -> bool:
        return (now_ms() if now is None else now) < self.valid_until_ms


def needs_confirm(sent_ms: float, received_ms: float, validity_ms: int) -> bool:
    """Whether a grant must be confirmed by an extension before it is used.

    fencelockd counts a grant's ``validity_ms`` from the start of the attempt
    that won it, which after a wait is later than the request: the client
    cannot know when. Counting it from the request's send is safe but, after
    a wait, leaves little or nothing; counting it from the answer's arrival is
    not safe. So a grant that took more than a tenth of its validity to
    arrive is extended at once, and its validity counted from that
    extension's send (an extension does not wait, so its validity is counted
    from a moment after its send). A grant without a wait costs nothing more.
    """
    return received_ms - sent_ms > validity_ms / 10.0


def extend_interval_ms(ttl_ms: int) -> float:
    """The keep-alive extends every third of the TTL."""
    return ttl_ms / 3.0


def retry_delay_ms(ttl_ms: int, attempt: int) -> float:
    """After a failed extension that may pass (no quorum, a restart, no answer),
    the keep-alive tries again soon: a tenth of the TTL, at least 20 ms, growing
    with each failure up to a third of the TTL."""
    base = max(20.0, ttl_ms / 10.0)
    return min(base * (1 << min(attempt, 4)), max(base, ttl_ms / 3.0))


def retry_wait_ms(left_ms: float) -> int:
    """The wait_ms of a retried acquisition: what is left of the wait, rounded
    down to a whole second (to 100 ms below one). fencelockd keeps one lockcore
    client per distinct (ttl_ms, wait_ms, wait) in use, and answers ``busy``
    past --max-clients: a client must not send a new wait_ms with every try.
    The first try sends the caller's own wait_ms."""
    left = max(0, int(left_ms))
    return left - left % 1000 if left >= 1000 else left - left % 100


def acquire_backoff_ms(attempt: int) -> float:
    """Between acquisitions retried while the wait bound lasts: 50 ms doubling to 1 s."""
    return min(50.0 * (1 << min(attempt, 5)), 1000.0)


# Failures an acquisition retries while its wait bound lasts: nothing was
# granted, and another try may pass (a restart, a node back).
ACQUIRE_RETRY_CODES = frozenset(("shutting_down", "busy", "no_quorum", "unreachable"))

# Answers to an extension after which the keep-alive gives the lock up at
# once; after any other failure it tries again while the lock is valid.
KEEPALIVE_FATAL_CODES = frozenset(("lost", "forbidden", "unauthorized"))


def status_held_by(status: Dict[str, Any], ids: Sequence[str]) -> bool:
    """Whether a status answer names one of ids (a lock's id, and a reentrant
    lock's owner) as the holder: by ``holder_ref`` when the server reports it,
    else by the ``holder`` id of servers from before ``holder_ref``."""
    if isinstance(status.get("permit"), list):  # a semaphore: any permit
        entries = [p for p in status["permit"] if isinstance(p, dict)]
    else:
        entries = [status]
    for e in entries:
        ref = e.get("holder_ref")
        if isinstance(ref, str) and ref in [lock_ref(i) for i in ids]:
            return True
        holder = e.get("holder")
        if isinstance(holder, str) and holder in ids:
            return True
    return False
