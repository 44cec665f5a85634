"""The blocking client: :class:`Client` and :class:`Lock`."""
import heapq
import threading
import time
from typing import Any, Callable, Dict, Iterator, List, Optional, Sequence, TypeVar

from . import _core
from ._http import Transport
from .errors import Canceled, FencelockError, Lost, ProtocolError, from_answer

__all__ = ["Client", "Lock", "Status", "Leader", "Reading"]

T = TypeVar("T")
USER_AGENT = "fencelock-python/0.1.0"


class Status(dict):
    """A status answer (``GET /v1/locks/{resource}``), as the server sent it, with
    the holder fields read defensively: an absent field reads as None."""

    @property
    def held(self) -> bool:
        return bool(self.get("held"))

    @property
    def holder_client(self) -> Optional[str]:
        return self.get("holder_client")

    @property
    def holder_ref(self) -> Optional[str]:
        return self.get("holder_ref")

    def held_by(self, lock: "Lock") -> bool:
        """Whether this status names ``lock`` as the holder (by ``holder_ref``, or
        by the ``holder`` id of servers from before ``holder_ref``)."""
        return _core.status_held_by(self, [lock.lock_id] + ([lock.owner_id] if lock.owner_id else []))


class Reading(dict):
    """Who leads an election (``GET /v1/elections/{name}``), as the server sent it,
    read defensively: an absent field reads as None.

    ``leader`` says whether someone leads; ``epoch`` (its fencing token),
    ``value``, ``ttl_ms_left``, ``leader_client`` (the bearer-token client
    that campaigned, None without an auth file) and ``leader_ref`` (its
    :attr:`Leader.ref`) are None when nobody does. ``changed``: whether it
    differs from the reading an observer gave (False when its wait ran out)."""

    @property
    def name(self) -> Optional[str]:
        return self.get("name")

    @property
    def leader(self) -> bool:
        return bool(self.get("leader"))

    @property
    def changed(self) -> bool:
        return bool(self.get("changed"))

    @property
    def epoch(self) -> Optional[int]:
        return self.get("epoch") if self.leader else None

    @property
    def value(self) -> Optional[str]:
        return self.get("value") if self.leader else None

    @property
    def ttl_ms_left(self) -> Optional[int]:
        return self.get("ttl_ms_left") if self.leader else None

    @property
    def leader_client(self) -> Optional[str]:
        return self.get("leader_client")

    @property
    def leader_ref(self) -> Optional[str]:
        return self.get("leader_ref")

    def led_by(self, leader: "Leader") -> bool:
        """Whether this reading names ``leader`` (by its ref and epoch)."""
        return self.leader and self.leader_ref == leader.ref and self.epoch == leader.epoch

    def __repr__(self) -> str:
        if not self.leader:
            return "<fencelock.Reading %r: no leader>" % self.name
        return "<fencelock.Reading %r: epoch=%s value=%r>" % (self.name, self.epoch, self.value)


class Client:
    """A client of one fencelockd (``url`` like ``http://127.0.0.1:7600``).

    ``token``: the bearer token (fencelockd ``--auth-file``). ``ca_file``: the
    PEM file of the certificate authority an ``https://`` server is checked
    against (default: the system's). ``timeout``: seconds to wait for an
    answer, on top of an acquisition's own wait. ``pool_size``: connections
    kept open. One client is shared by any number of threads; close it (or use
    ``with Client(...) as client``) to close its connections.
    """

    def __init__(self, url: str, *, token: Optional[str] = None, ca_file: Optional[str] = None,
                 timeout: float = 10.0, pool_size: int = 64):
        self._t = Transport(url, token, ca_file, timeout, pool_size, USER_AGENT)
        self._keeper = _Keeper(self)

    def __enter__(self) -> "Client":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def close(self) -> None:
        """Close the pooled connections. Locks still held stay held until released
        or until their TTL runs out; their keep-alive stops."""
        self._keeper.stop()
        self._t.close()

    # ---- acquisitions ----

    def lock(self, resource: str, *, ttl_ms: int = 10000, wait_ms: int = 0, wait: str = "notify",
             keepalive: bool = True, cancel: Optional[threading.Event] = None,
             on_lost: Optional[Callable[["Lock", FencelockError], None]] = None) -> "Lock":
        """Take a plain lock of ``resource``, waiting up to ``wait_ms`` while it is
        held (0: one try). Returns the :class:`Lock`, a context manager that
        releases it. Raises :class:`~fencelock.Locked` once the wait ran out,
        :class:`~fencelock.Canceled` when ``cancel`` is set, or another
        :class:`~fencelock.FencelockError`.

        ``keepalive``: extend every third of ``ttl_ms`` from this process until
        released. ``on_lost(lock, error)`` is called (from the keep-alive's
        thread) the moment the lock is known lost."""
        _core.check_resource(resource)
        return self._acquire("plain", resource, None, ttl_ms, wait_ms, wait, None, None, keepalive, cancel,
                             on_lost)

    def lock_many(self, resources: Sequence[str], **kw: Any) -> "Lock":
        """Take several resources at once, all or none, under one token. Options as
        :meth:`lock`."""
        names = _core.check_resources(resources)
        return self._acquire("multi", None, names, *self._opts(**kw))

    def read_lock(self, resource: str, **kw: Any) -> "Lock":
        """A read lock: any number of readers, no writer. Its token is the largest
        token of the resource's writes, to check reads with (it is not new)."""
        _core.check_resource(resource)
        return self._acquire("read", resource, None, *self._opts(**kw))

    def write_lock(self, resource: str, **kw: Any) -> "Lock":
        """A write lock: one writer, no reader."""
        _core.check_resource(resource)
        return self._acquire("write", resource, None, *self._opts(**kw))

    def semaphore(self, resource: str, permits: int, **kw: Any) -> "Lock":
        """One of ``permits`` permits of ``resource`` (every client of it must name
        the same number). The lock's ``resource`` is the permit held."""
        _core.check_resource(resource)
        _core.check_int(permits, "permits", 1, _core.PERMITS_MAX)
        ttl_ms, wait_ms, wait, _, _, keepalive, cancel, on_lost = self._opts(**kw)
        return self._acquire("semaphore", resource, None, ttl_ms, wait_ms, wait, permits, None, keepalive,
                             cancel, on_lost)

    def reentrant(self, resource: str, **kw: Any) -> "Lock":
        """A first hold of a reentrant lock; :meth:`Lock.reenter` takes more holds."""
        _core.check_resource(resource)
        return self._acquire("reentrant", resource, None, *self._opts(**kw))

    @staticmethod
    def _opts(ttl_ms: int = 10000, wait_ms: int = 0, wait: str = "notify", keepalive: bool = True,
              cancel: Optional[threading.Event] = None,
              on_lost: Optional[Callable[["Lock", FencelockError], None]] = None):
        return ttl_ms, wait_ms, wait, None, None, keepalive, cancel, on_lost

    def _acquire(self, kind: str, resource: Optional[str], resources: Optional[List[str]], ttl_ms: int,
                 wait_ms: int, wait: str, permits: Optional[int], reenter: Optional["Lock"], keepalive: bool,
                 cancel: Optional[threading.Event], on_lost: Any) -> "Lock":
        _core.check_int(ttl_ms, "ttl_ms", 1)
        _core.check_int(wait_ms, "wait_ms", 0)
        _core.check_wait_mode(wait)
        if cancel is not None and not hasattr(cancel, "is_set"):
            raise TypeError("cancel must be a threading.Event")
        if on_lost is not None and not callable(on_lost):
            raise TypeError("on_lost must be callable")
        path, body = _core.acquire_request(kind, resource, resources, ttl_ms, wait_ms, wait, permits,
                                           reenter.lock_id if reenter is not None else None)
        what = "acquire %r" % (resource if resource is not None else resources)
        answer, sent = self._grant(path, body, wait_ms, cancel, what)
        grant = _core.grant_fields(answer, what)
        if not isinstance(grant.get("token"), int):
            raise ProtocolError("%s: the grant has no token" % what, code="protocol", body=grant)
        lock = Lock(self, grant, sent, ttl_ms, kind, on_lost, reenter.owner_id if reenter is not None else None)
        if _core.needs_confirm(sent, _core.now_ms(), grant["validity_ms"]):
            lock._confirm()
        if keepalive:
            self._keeper.add(lock)
        return lock

    def _grant(self, path: str, body: Dict[str, Any], wait_ms: int, cancel: Optional[threading.Event],
               what: str):
        """POST an acquisition or a campaign, retrying what may pass (a restart,
        a node back) while its wait lasts; returns (answer, the monotonic ms it
        was sent at)."""
        deadline = _core.now_ms() + wait_ms
        attempt = 0
        while True:
            left = wait_ms if attempt == 0 else _core.retry_wait_ms(deadline - _core.now_ms())
            body["wait_ms"] = left
            sent = _core.now_ms()
            try:
                status, answer, _ = self._t.request("POST", path, body, timeout_s=self._t.timeout_s + left / 1000.0,
                                                    cancel=cancel, what=what)
                if status == 200:
                    return answer, sent
                err = from_answer(status, answer, what)
            except FencelockError as e:
                err = e
            if err.code not in _core.ACQUIRE_RETRY_CODES or _core.now_ms() >= deadline:
                raise err
            pause = min(_core.acquire_backoff_ms(attempt), deadline - _core.now_ms())
            attempt += 1
            if cancel is not None:
                if cancel.wait(max(0.0, pause) / 1000.0):
                    raise Canceled("%s: canceled" % what, code="canceled")
            else:
                time.sleep(max(0.0, pause) / 1000.0)

    # ---- elections ----

    def campaign(self, name: str, value: str, *, ttl_ms: int = 10000, wait_ms: int = 0, keepalive: bool = True,
                 cancel: Optional[threading.Event] = None,
                 on_lost: Optional[Callable[["Leader", FencelockError], None]] = None) -> "Leader":
        """Campaign to lead the election ``name``, proclaiming ``value`` (at most
        256 bytes: an address, say), waiting in line up to ``wait_ms`` (0: one
        attempt; candidates are elected in the order they asked). Returns the
        :class:`Leader`, a context manager that resigns on leaving. Raises
        :class:`~fencelock.NotElected` once the wait ran out,
        :class:`~fencelock.Canceled` when ``cancel`` is set (the campaign
        leaves the line), or another :class:`~fencelock.FencelockError`.

        The leader is kept alive as a lock is (``keepalive``, ``on_lost``);
        its ``epoch`` is its fencing token."""
        _core.check_resource(name, "name")
        _core.check_value(value)
        _core.check_int(ttl_ms, "ttl_ms", 1)
        _core.check_int(wait_ms, "wait_ms", 0)
        if cancel is not None and not hasattr(cancel, "is_set"):
            raise TypeError("cancel must be a threading.Event")
        if on_lost is not None and not callable(on_lost):
            raise TypeError("on_lost must be callable")
        what = "campaign %r" % name
        body: Dict[str, Any] = {"value": value, "ttl_ms": ttl_ms, "wait_ms": wait_ms}
        answer, sent = self._grant(_core.election_path(name), body, wait_ms, cancel, what)
        leader = Leader(self, _core.election_grant_fields(answer, what), sent, ttl_ms, on_lost)
        if _core.needs_confirm(sent, _core.now_ms(), answer["validity_ms"]):
            leader._confirm()
        if keepalive:
            self._keeper.add(leader)
        return leader

    def leader(self, name: str) -> "Reading":
        """Who leads ``name`` now (one request; anyone may ask). Raises
        :class:`~fencelock.NoQuorum` when no majority agreed on a reading (as
        while it changes hands) within fencelockd's 2 s."""
        _core.check_resource(name, "name")
        return Reading(self._call("GET", _core.leader_path(name), None, what="leader %r" % name))

    def observe(self, name: str, after: Optional["Reading"] = None, *, wait_ms: int = 30000,
                cancel: Optional[threading.Event] = None) -> "Reading":
        """The next reading of ``name`` that differs from ``after`` (a new leader,
        a new value, or none; ``after=None``: the first leader), waiting up to
        ``wait_ms`` (a long poll: fencelockd answers at the change, told by the
        nodes). If the wait ran out, the reading now with ``changed`` False."""
        _core.check_resource(name, "name")
        _core.check_int(wait_ms, "wait_ms", 0)
        if after is not None and not isinstance(after, dict):
            raise TypeError("after must be a Reading (or None)")
        ref = after if after is not None else Reading({"leader": False})
        what = "observe %r" % name
        path = _core.leader_path(name, ref.epoch or 0, ref.value if ref.leader else None, wait_ms)
        status, answer, _ = self._t.request("GET", path, None, timeout_s=self._t.timeout_s + wait_ms / 1000.0,
                                            cancel=cancel, what=what)
        if status != 200:
            raise from_answer(status, answer, what)
        if not isinstance(answer, dict):
            raise ProtocolError("%s: the answer is not a JSON object" % what, code="protocol")
        return Reading(answer)

    def watch(self, name: str, *, wait_ms: int = 30000,
              cancel: Optional[threading.Event] = None) -> Iterator["Reading"]:
        """Who leads ``name``, then each change: an iterator of readings, the first
        the current one, each next one the next change (long polls of
        ``wait_ms`` each, never a poll on a period). A failure that may pass (no
        quorum, a restart, no answer) is retried with a back-off of 50 ms to 1 s;
        another is raised. Setting ``cancel`` (or closing the iterator) ends it.
        An epoch never goes back: a reading of an older leader than one already
        yielded is not yielded."""
        _core.check_resource(name, "name")
        _core.check_int(wait_ms, "wait_ms", 1)
        return self._watch(name, wait_ms, cancel)

    def _watch(self, name: str, wait_ms: int, cancel: Optional[threading.Event]) -> Iterator["Reading"]:
        last: Optional[Reading] = None
        floor = 0
        failures = 0
        while cancel is None or not cancel.is_set():
            try:
                r = self.leader(name) if last is None else self.observe(name, last, wait_ms=wait_ms, cancel=cancel)
                failures = 0
            except Canceled:
                return
            except FencelockError as e:
                if e.code not in _core.ACQUIRE_RETRY_CODES and e.code != "timeout":
                    raise
                pause = _core.acquire_backoff_ms(failures) / 1000.0
                failures += 1
                if cancel is not None:
                    if cancel.wait(pause):
                        return
                else:
                    time.sleep(pause)
                continue
            if last is not None and not r.changed:
                continue
            stale = r.leader and (r.epoch or 0) < floor
            last = r
            if stale:
                continue  # an older leader's keys, read late: wait for the next change from them
            if r.leader:
                floor = r.epoch or 0
            yield r

    def proclaim(self, name: str, lock_id: str, value: str, *, ttl_ms: int = 10000) -> Dict[str, Any]:
        """Proclaim a new value for the leader of ``name`` known by its id (the
        epoch stays; the lease is extended to ``ttl_ms``). Raises
        :class:`~fencelock.Lost` once it was deposed."""
        _core.check_resource(name, "name")
        _core.check_lock_id(lock_id)
        _core.check_value(value)
        _core.check_int(ttl_ms, "ttl_ms", 1)
        return self._call("POST", _core.proclaim_path(name, lock_id), {"value": value, "ttl_ms": ttl_ms},
                          what="proclaim %r" % name)

    def resign(self, name: str, lock_id: str) -> Dict[str, Any]:
        """Resign the leader of ``name`` known by its id: the next candidate in
        line is elected at once."""
        return self.release(name, lock_id, kind="leader")

    # ---- by id: any process may extend or release a lock it knows the id of ----

    def extend(self, resource: str, lock_id: str, *, ttl_ms: int = 10000, kind: str = "plain") -> Dict[str, Any]:
        """Extend a lock by its id (the answer's fields; no token). Raises
        :class:`~fencelock.Lost` if it is no longer held. ``kind`` as the grant
        named it; ``"leader"`` for an election's leader (``resource`` its name)."""
        _core.check_resource(resource)
        _core.check_lock_id(lock_id)
        _core.check_int(ttl_ms, "ttl_ms", 1)
        _check_lock_kind(kind)
        return self._call("POST", _core.extend_path(resource, lock_id, kind), {"ttl_ms": ttl_ms},
                          what="extend %r" % resource)

    def release(self, resource: str, lock_id: str, *, kind: str = "plain") -> Dict[str, Any]:
        """Release a lock by its id; ``nodes_released`` below a majority means it had
        run out already."""
        _core.check_resource(resource)
        _core.check_lock_id(lock_id)
        _check_lock_kind(kind)
        return self._call("DELETE", _core.lock_path(resource, lock_id, kind), None, what="release %r" % resource)

    def status(self, resource: str, *, kind: str = "plain", permits: Optional[int] = None) -> Status:
        """What the nodes say of a lock (``kind``: plain, rw, reentrant or
        semaphore with ``permits``)."""
        _core.check_resource(resource)
        if kind not in ("plain", "rw", "read", "write", "reentrant", "semaphore"):
            raise ValueError("kind must be plain, rw, reentrant or semaphore for a status")
        if (kind == "semaphore") != (permits is not None):
            raise ValueError("a semaphore's status needs permits, and only a semaphore's")
        if permits is not None:
            _core.check_int(permits, "permits", 1, _core.PERMITS_MAX)
        return Status(self._call("GET", _core.status_path(resource, kind, permits), None,
                                 what="status %r" % resource))

    def health(self) -> Dict[str, Any]:
        """``GET /healthz``: ``status`` ok, degraded or no_quorum (the last raises
        :class:`~fencelock.NoQuorum`)."""
        return self._call("GET", "/healthz", None, what="health")

    def _call(self, method: str, path: str, body: Any, what: str, timeout_s: Optional[float] = None) -> Any:
        status, answer, _ = self._t.request(method, path, body, timeout_s=timeout_s, what=what)
        if status != 200:
            raise from_answer(status, answer, what)
        if not isinstance(answer, dict):
            raise ProtocolError("%s: the answer is not a JSON object" % what, code="protocol")
        return answer


def _check_lock_kind(kind: str) -> None:
    if kind not in ("plain", "permit", "multi", "reentrant", "read", "write", "leader"):
        raise ValueError("kind must be plain, permit, multi, reentrant, read, write or leader (as the grant said)")


class Lock:
    """A held lock. Use it as a context manager (``with client.lock(...) as lock:``),
    which releases it on leaving, or call :meth:`release`.

    Attributes: ``resource`` (the resource held: a permit's own name for a
    semaphore), ``resources`` (a multi-resource lock's names), ``kind`` (as
    the server named it: plain, permit, multi, reentrant, read, write),
    ``lock_id``, ``ref`` (see :func:`fencelock.lock_ref`), ``token`` (the
    fencing token: send it with every write the lock protects), ``ttl_ms``.

    Thread-safe. ``valid()`` and ``check()`` read the monotonic clock: they
    never call a lock valid past the validity the server granted, whether
    or not the keep-alive ran.
    """

    def __init__(self, client: Client, grant: Dict[str, Any], sent_ms: float, ttl_ms: int, requested_kind: str,
                 on_lost: Any, owner: Optional[str] = None):
        self._client = client
        self.grant = grant
        self.resource: str = grant["resource"]
        self.resources: List[str] = list(grant.get("resources") or [self.resource])
        self.kind: str = grant["kind"]
        self.lock_id: str = _core.check_lock_id(grant["lock_id"])
        self.ref: str = _core.lock_ref(self.lock_id)
        self.owner_id: Optional[str] = None
        """A reentrant lock's owner: the first hold's id with its last six digits
        zeroed, what a status names as the holder (None for other kinds)."""
        if self.kind == "reentrant":
            self.owner_id = owner or _core.owner_id(self.lock_id)
        self.token: int = grant["token"]
        self.ttl_ms = ttl_ms
        self.semaphore: Optional[str] = grant.get("semaphore")
        self._requested_kind = requested_kind
        self._validity = _core.Validity(sent_ms, grant["validity_ms"])
        self._sent_ms = sent_ms
        self._mu = threading.Lock()
        self._lost: Optional[FencelockError] = None
        self._released = False
        self._on_lost = on_lost
        self.lost_event = threading.Event()
        """Set the moment the lock is known lost (by the keep-alive, an extension or
        a check that found its validity over)."""
        self.extensions = 0
        """Extensions that succeeded."""

    def __repr__(self) -> str:
        return "<fencelock.Lock %s %r token=%d %s>" % (self.kind, self.resource, self.token,
                                                      "valid" if self.valid() else "not valid")

    def __enter__(self) -> "Lock":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.release()

    # ---- validity ----

    @property
    def valid_until_ms(self) -> float:
        """The end of the validity, on the monotonic clock (time.monotonic() * 1000)."""
        with self._mu:
            return self._validity.valid_until_ms

    @property
    def acquired_ms(self) -> float:
        """When the acquisition was sent, on the monotonic clock in ms."""
        return self._sent_ms

    def remaining_ms(self) -> float:
        """Milliseconds the lock is still certainly held (0 once it is not)."""
        with self._mu:
            if self._lost is not None or self._released:
                return 0.0
            return self._validity.remaining_ms()

    def valid(self) -> bool:
        """Whether the lock is still certainly held (see :meth:`check`)."""
        try:
            self.check()
            return True
        except FencelockError:
            return False

    def check(self) -> None:
        """Raise :class:`~fencelock.Lost` unless the lock is still certainly held:
        not released, not reported lost, and within its monotonic validity. Call it
        before each step of the work; it makes no request."""
        with self._mu:
            err = self._lost
            if err is None and self._released:
                err = Lost("the lock of %r was released" % self.resource, code="released")
            if err is None and not self._validity.valid():
                err = self._mark_lost_locked(Lost("the lock of %r ran past its validity without an extension"
                                                  % self.resource, code="expired"))
        if err is not None:
            self._notify()
            raise err

    @property
    def lost(self) -> Optional[FencelockError]:
        """Why the lock was lost, or None (checks the validity too)."""
        try:
            self.check()
        except FencelockError as e:
            return None if e.code == "released" else e
        return None

    def _mark_lost_locked(self, err: FencelockError) -> FencelockError:
        if self._lost is None:
            self._lost = err
        return self._lost

    def _mark_lost(self, err: FencelockError) -> None:
        with self._mu:
            if self._lost is not None or self._released:
                return
            self._lost = err
        self._notify()

    def _notify(self) -> None:
        if self.lost_event.is_set():
            return
        self.lost_event.set()
        if self._on_lost is not None:
            try:
                self._on_lost(self, self._lost)
            except Exception:  # a user's callback must not stop the keep-alive
                pass

    # ---- operations ----

    def extend(self, ttl_ms: Optional[int] = None) -> None:
        """Extend the lock now to ``ttl_ms`` (default: its TTL) from now. Raises
        :class:`~fencelock.Lost` if it is gone (and marks it lost). The keep-alive
        calls this itself."""
        ttl = self.ttl_ms if ttl_ms is None else _core.check_int(ttl_ms, "ttl_ms", 1)
        self._extend_by(_core.extend_path(self.resource, self.lock_id, self.kind), {"ttl_ms": ttl}, ttl,
                        "extend %r" % self.resource)

    def _extend_by(self, path: str, body: Dict[str, Any], ttl: int, what: str) -> Dict[str, Any]:
        """An extension (or a leader's proclamation, which extends too): the
        validity is pushed out from its send."""
        self.check()
        remaining = self.remaining_ms()
        sent = _core.now_ms()
        # No answer is worth waiting for past the validity: it could not save the lock.
        timeout = min(self._client._t.timeout_s, max(remaining, 1.0) / 1000.0)
        try:
            answer = self._client._call("POST", path, body, what=what, timeout_s=timeout)
        except FencelockError as e:
            if e.code in _core.KEEPALIVE_FATAL_CODES:
                self._mark_lost(Lost("the lock of %r is lost: %s" % (self.resource, e.message),
                                     status=e.status, code=e.code or "lost", body=e.body))
                self.check()
            raise
        v = answer.get("validity_ms")
        if not isinstance(v, int):
            raise ProtocolError("%s: the answer has no validity_ms" % what, code="protocol", body=answer)
        with self._mu:
            # An answer that came back after the validity ran out saves nothing:
            # someone else may have held the lock in between.
            if self._lost is None and self._validity.valid():
                self._validity.extended(sent, v)
                self.extensions += 1
                self.ttl_ms = ttl
        self.check()
        return answer

    def _confirm(self) -> None:
        """After a grant that waited: extend at once, and count the validity from
        this extension's own send (see _core.needs_confirm)."""
        sent = _core.now_ms()
        try:
            answer = self._client._call("POST", _core.extend_path(self.resource, self.lock_id, self.kind),
                                        {"ttl_ms": self.ttl_ms}, what="extend %r" % self.resource)
        except FencelockError as e:
            try:
                self.release()
            except FencelockError:
                pass
            if e.code in _core.KEEPALIVE_FATAL_CODES:
                raise Lost("the lock of %r was lost before its grant arrived: %s" % (self.resource, e.message),
                           status=e.status, code=e.code, body=e.body) from None
            raise
        v = answer.get("validity_ms")
        if not isinstance(v, int):
            raise ProtocolError("extend: the answer has no validity_ms", code="protocol", body=answer)
        with self._mu:
            self._validity = _core.Validity(sent, v)
            self._validity.acquired_ms = self._sent_ms
        self.extensions += 1

    def release(self) -> None:
        """Release the lock (once; later calls do nothing) and stop its keep-alive.
        A lock that was lost is released too, in case a majority still holds it.
        Errors of the release itself are raised (the lock then runs out by its TTL)."""
        with self._mu:
            if self._released:
                return
            self._released = True
        self._client._keeper.remove(self)
        self._client._call("DELETE", _core.lock_path(self.resource, self.lock_id, self.kind), None,
                           what="release %r" % self.resource)

    def reenter(self, **kw: Any) -> "Lock":
        """One more hold of a reentrant lock, under the same owner and token
        (``ttl_ms``, ``wait_ms``, ``keepalive``, ... as :meth:`Client.lock`)."""
        if self.kind != "reentrant":
            raise ValueError("only a reentrant lock is re-entered")
        self.check()
        ttl_ms, wait_ms, wait, _, _, keepalive, cancel, on_lost = Client._opts(**{"ttl_ms": self.ttl_ms, **kw})
        return self._client._acquire("reentrant", self.resource, None, ttl_ms, wait_ms, wait, None, self, keepalive,
                                     cancel, on_lost)

    def fenced(self, fn: Callable[[int], T]) -> T:
        """Check the lock, then call ``fn(token)``: hand the token to your own
        database's fenced write (docs/guarding-your-database.md), which must refuse
        it if a larger token was seen. Returns what ``fn`` returns."""
        if not callable(fn):
            raise TypeError("fn must be callable")
        self.check()
        return fn(self.token)

    def status(self) -> Status:
        """The resource's status now (one request)."""
        kinds = {"plain": "plain", "multi": "plain", "reentrant": "reentrant", "read": "rw", "write": "rw",
                 "leader": "plain"}
        if self.kind == "permit":
            raise ValueError("ask the semaphore's status with client.status(name, kind='semaphore', permits=N)")
        return self._client.status(self.resources[0] if self.kind == "multi" else self.resource,
                                   kind=kinds[self.kind])


class Leader(Lock):
    """An elected leader: the lock of its election, whose token is its epoch. Use it
    as a context manager (``with client.campaign(...) as leader:``), which
    resigns on leaving, or call :meth:`resign`.

    Attributes: ``name`` (the election), ``epoch`` (== ``token``: send it with
    every write as the fencing token; a later leader's is larger), ``value``
    (what it proclaimed last), ``lock_id``, ``ref`` (what a reading names as
    ``leader_ref``), ``ttl_ms``; and those of a :class:`Lock`: ``check()``,
    ``valid()``, ``remaining_ms()``, ``lost_event``, ``fenced(fn)``, on the
    same monotonic validity and keep-alive. ``check()`` raises
    :class:`~fencelock.Lost` the moment it is deposed (an extension answered
    ``lost``, or its validity ran out, also in a process that was stopped).
    """

    def __init__(self, client: Client, answer: Dict[str, Any], sent_ms: float, ttl_ms: int, on_lost: Any):
        g = dict(answer, resource=answer["name"], kind="leader", token=answer["epoch"])
        super().__init__(client, g, sent_ms, ttl_ms, "leader", on_lost)
        self.grant = answer
        self.name: str = answer["name"]
        self.epoch: int = answer["epoch"]
        self.value: str = answer.get("value") if isinstance(answer.get("value"), str) else ""

    def __repr__(self) -> str:
        return "<fencelock.Leader %r epoch=%d value=%r %s>" % (self.name, self.epoch, self.value,
                                                             "valid" if self.valid() else "not valid")

    def proclaim(self, value: str, ttl_ms: Optional[int] = None) -> None:
        """Proclaim a new value under the same epoch (observers are told); it
        extends the lease too. Raises :class:`~fencelock.Lost` (and marks the
        leader lost) once deposed."""
        _core.check_value(value)
        ttl = self.ttl_ms if ttl_ms is None else _core.check_int(ttl_ms, "ttl_ms", 1)
        self._extend_by(_core.proclaim_path(self.name, self.lock_id), {"value": value, "ttl_ms": ttl}, ttl,
                        "proclaim %r" % self.name)
        self.value = value

    def resign(self) -> None:
        """Resign (once; later calls do nothing) and stop the keep-alive: the next
        candidate in line is elected at once, and observers are told."""
        self.release()

    def reading(self) -> Reading:
        """Who leads this election now (one request)."""
        return self._client.leader(self.name)


class _Keeper:
    """One thread per client that keeps its locks alive: it extends each every
    third of its TTL, runs each extension on a short-lived thread of its own (so
    a slow answer for one lock delays no other), and marks a lock lost the
    moment its validity ends without an extension."""

    def __init__(self, client: Client):
        self._client = client
        self._heap: List[Any] = []
        self._cv = threading.Condition()
        self._thread: Optional[threading.Thread] = None
        self._stopped = False
        self._seq = 0
        self._live: Dict[int, "Lock"] = {}

    def add(self, lock: Lock) -> None:
        with self._cv:
            if self._stopped:
                return
            self._live[id(lock)] = lock
            due = _core.now_ms() + _core.extend_interval_ms(lock.ttl_ms)
            # Wake the keeper only if it must wake earlier than it would: a lock
            # taken and released quickly then costs no thread switch.
            wake = self._heap[0][0] if self._heap else None
            self._push(lock, due, 0)
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, daemon=True, name="fencelock-keepalive")
                self._thread.start()
            if wake is None or min(due, lock.valid_until_ms) < wake:
                self._cv.notify()

    def remove(self, lock: Lock) -> None:
        with self._cv:
            self._live.pop(id(lock), None)

    def stop(self) -> None:
        with self._cv:
            self._stopped = True
            self._live.clear()
            self._cv.notify()

    def _push(self, lock: Lock, due_ms: float, failures: int) -> None:
        self._seq += 1
        heapq.heappush(self._heap, (due_ms, self._seq, lock, failures))

    def _run(self) -> None:
        while True:
            with self._cv:
                while not self._stopped:
                    # Drop entries of released locks.
                    while self._heap and id(self._heap[0][2]) not in self._live:
                        heapq.heappop(self._heap)
                    if not self._heap:
                        self._cv.wait()
                        continue
                    due, _, lock, failures = self._heap[0]
                    # Wake for the next extension, or for the end of the lock's
                    # validity, whichever comes first.
                    wake = min(due, lock.valid_until_ms)
                    delay = wake - _core.now_ms()
                    if delay <= 0:
                        heapq.heappop(self._heap)
                        break
                    self._cv.wait(delay / 1000.0)
                else:
                    return
            if not lock.valid():  # its validity ended first: lost (check() marked it)
                self.remove(lock)
                continue
            threading.Thread(target=self._extend, args=(lock, failures), daemon=True,
                             name="fencelock-extend").start()

    def _extend(self, lock: Lock, failures: int) -> None:
        try:
            lock.extend()
            nxt, failures = _core.now_ms() + _core.extend_interval_ms(lock.ttl_ms), 0
        except FencelockError as e:
            if lock.lost_event.is_set() or e.code in _core.KEEPALIVE_FATAL_CODES:
                self.remove(lock)
                return
            # It may pass (no quorum, a restart): again soon, while still valid.
            nxt, failures = _core.now_ms() + _core.retry_delay_ms(lock.ttl_ms, failures), failures + 1
        except Exception as e:  # never let the keep-alive die silently
            lock._mark_lost(Lost("the keep-alive of %r failed: %r" % (lock.resource, e), code="expired"))
            self.remove(lock)
            return
        with self._cv:
            if id(lock) in self._live and not self._stopped:
                self._push(lock, nxt, failures)
                self._cv.notify()
