"""The asyncio client: :class:`AsyncClient` and :class:`AsyncLock`.

    async with fencelock.AsyncClient("http://127.0.0.1:7600") as client:
        async with client.lock("invoice:42", wait_ms=5000) as lock:
            await store.put("invoice-42", {"paid": True}, lock=lock)

The same rules as the blocking client (``fencelock.Client``): the same
options, errors, validity and keep-alive, on one event loop; the keep-alive
is a task per lock.
"""
import asyncio
from typing import Any, AsyncIterator, Awaitable, Callable, Dict, List, Optional, Sequence, TypeVar

from . import _core
from ._ahttp import AsyncTransport
from .client import USER_AGENT, Reading, Status, _check_lock_kind
from .errors import Canceled, FencelockError, Lost, ProtocolError, from_answer

__all__ = ["AsyncClient", "AsyncLock", "AsyncLeader"]

T = TypeVar("T")


async def _with_cancel(coro: Awaitable[T], cancel: Optional[asyncio.Event], what: str) -> T:
    if cancel is None:
        return await coro
    if cancel.is_set():
        if asyncio.iscoroutine(coro):
            coro.close()
        raise Canceled("%s: canceled" % what, code="canceled")
    task = asyncio.ensure_future(coro)
    stop = asyncio.ensure_future(cancel.wait())
    try:
        await asyncio.wait({task, stop}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        if not stop.done():
            stop.cancel()
    if task.done():
        return task.result()
    task.cancel()
    try:
        await task
    except (asyncio.CancelledError, FencelockError):
        pass
    raise Canceled("%s: canceled" % what, code="canceled")


class _Pending:
    """An acquisition: ``await`` it for the lock, or ``async with`` it to release
    the lock on leaving."""

    def __init__(self, coro: Awaitable["AsyncLock"]):
        self._coro = coro
        self._lock: Optional[AsyncLock] = None

    def __await__(self):
        return self._coro.__await__()

    async def __aenter__(self) -> "AsyncLock":
        self._lock = await self._coro
        return self._lock

    async def __aexit__(self, *exc: Any) -> None:
        if self._lock is not None:
            await self._lock.release()


class AsyncClient:
    """The asyncio form of :class:`fencelock.Client`, with the same arguments. Its
    methods are coroutines; the acquisitions return an awaitable that is also an
    async context manager."""

    def __init__(self, url: str, *, token: Optional[str] = None, ca_file: Optional[str] = None,
                 timeout: float = 10.0, pool_size: int = 64):
        self._t = AsyncTransport(url, token, ca_file, timeout, pool_size, USER_AGENT)
        self._locks: Dict[int, "AsyncLock"] = {}

    async def __aenter__(self) -> "AsyncClient":
        return self

    async def __aexit__(self, *exc: Any) -> None:
        await self.close()

    async def close(self) -> None:
        """Stop every keep-alive and close the pooled connections."""
        for lock in list(self._locks.values()):
            lock._stop_keepalive()
        await self._t.close()

    def lock(self, resource: str, **kw: Any) -> _Pending:
        """A plain lock; options as :meth:`fencelock.Client.lock` (``cancel`` is an
        asyncio.Event; cancelling the task cancels too)."""
        _core.check_resource(resource)
        return _Pending(self._acquire("plain", resource, None, None, None, **kw))

    def lock_many(self, resources: Sequence[str], **kw: Any) -> _Pending:
        names = _core.check_resources(resources)
        return _Pending(self._acquire("multi", None, names, None, None, **kw))

    def read_lock(self, resource: str, **kw: Any) -> _Pending:
        _core.check_resource(resource)
        return _Pending(self._acquire("read", resource, None, None, None, **kw))

    def write_lock(self, resource: str, **kw: Any) -> _Pending:
        _core.check_resource(resource)
        return _Pending(self._acquire("write", resource, None, None, None, **kw))

    def semaphore(self, resource: str, permits: int, **kw: Any) -> _Pending:
        _core.check_resource(resource)
        _core.check_int(permits, "permits", 1, _core.PERMITS_MAX)
        return _Pending(self._acquire("semaphore", resource, None, permits, None, **kw))

    def reentrant(self, resource: str, **kw: Any) -> _Pending:
        _core.check_resource(resource)
        return _Pending(self._acquire("reentrant", resource, None, None, None, **kw))

    async def _acquire(self, kind: str, resource: Optional[str], resources: Optional[List[str]],
                       permits: Optional[int], reenter: Optional["AsyncLock"], *, ttl_ms: int = 10000,
                       wait_ms: int = 0, wait: str = "notify", keepalive: bool = True,
                       cancel: Optional[asyncio.Event] = None,
                       on_lost: Optional[Callable[["AsyncLock", FencelockError], None]] = None) -> "AsyncLock":
        _core.check_int(ttl_ms, "ttl_ms", 1)
        _core.check_int(wait_ms, "wait_ms", 0)
        _core.check_wait_mode(wait)
        if cancel is not None and not isinstance(cancel, asyncio.Event):
            raise TypeError("cancel must be an asyncio.Event")
        if on_lost is not None and not callable(on_lost):
            raise TypeError("on_lost must be callable")
        path, body = _core.acquire_request(kind, resource, resources, ttl_ms, wait_ms, wait, permits,
                                           reenter.lock_id if reenter is not None else None)
        what = "acquire %r" % (resource if resource is not None else resources)
        answer, sent = await self._grant(path, body, wait_ms, cancel, what)
        grant = _core.grant_fields(answer, what)
        if not isinstance(grant.get("token"), int):
            raise ProtocolError("%s: the grant has no token" % what, code="protocol", body=grant)
        lock = AsyncLock(self, grant, sent, ttl_ms, on_lost, reenter.owner_id if reenter is not None else None)
        if _core.needs_confirm(sent, _core.now_ms(), grant["validity_ms"]):
            await lock._confirm()
        if keepalive:
            lock._start_keepalive()
        return lock

    async def _grant(self, path: str, body: Dict[str, Any], wait_ms: int, cancel: Optional[asyncio.Event],
                     what: str):
        """As fencelock.Client._grant: POST, retrying what may pass while the wait lasts."""
        deadline = _core.now_ms() + wait_ms
        attempt = 0
        while True:
            left = wait_ms if attempt == 0 else _core.retry_wait_ms(deadline - _core.now_ms())
            body["wait_ms"] = left
            sent = _core.now_ms()
            try:
                status, answer, _ = await _with_cancel(
                    self._t.request("POST", path, body, timeout_s=self._t.timeout_s + left / 1000.0, what=what),
                    cancel, what)
                if status == 200:
                    return answer, sent
                err = from_answer(status, answer, what)
            except Canceled:
                raise
            except FencelockError as e:
                err = e
            if err.code not in _core.ACQUIRE_RETRY_CODES or _core.now_ms() >= deadline:
                raise err
            pause = max(0.0, min(_core.acquire_backoff_ms(attempt), deadline - _core.now_ms()))
            attempt += 1
            await _with_cancel(asyncio.sleep(pause / 1000.0), cancel, what)

    # ---- elections ----

    def campaign(self, name: str, value: str, **kw: Any) -> _Pending:
        """As :meth:`fencelock.Client.campaign`: ``await`` it for the
        :class:`AsyncLeader`, or ``async with`` it to resign on leaving."""
        _core.check_resource(name, "name")
        _core.check_value(value)
        return _Pending(self._campaign(name, value, **kw))

    async def _campaign(self, name: str, value: str, *, ttl_ms: int = 10000, wait_ms: int = 0,
                        keepalive: bool = True, cancel: Optional[asyncio.Event] = None,
                        on_lost: Optional[Callable[["AsyncLeader", FencelockError], None]] = None) -> "AsyncLeader":
        _core.check_int(ttl_ms, "ttl_ms", 1)
        _core.check_int(wait_ms, "wait_ms", 0)
        if cancel is not None and not isinstance(cancel, asyncio.Event):
            raise TypeError("cancel must be an asyncio.Event")
        if on_lost is not None and not callable(on_lost):
            raise TypeError("on_lost must be callable")
        what = "campaign %r" % name
        body: Dict[str, Any] = {"value": value, "ttl_ms": ttl_ms, "wait_ms": wait_ms}
        answer, sent = await self._grant(_core.election_path(name), body, wait_ms, cancel, what)
        leader = AsyncLeader(self, _core.election_grant_fields(answer, what), sent, ttl_ms, on_lost)
        if _core.needs_confirm(sent, _core.now_ms(), answer["validity_ms"]):
            await leader._confirm()
        if keepalive:
            leader._start_keepalive()
        return leader

    async def leader(self, name: str) -> Reading:
        """As :meth:`fencelock.Client.leader`."""
        _core.check_resource(name, "name")
        return Reading(await self._call("GET", _core.leader_path(name), None, "leader %r" % name))

    async def observe(self, name: str, after: Optional[Reading] = None, *, wait_ms: int = 30000,
                      cancel: Optional[asyncio.Event] = None) -> Reading:
        """As :meth:`fencelock.Client.observe` (cancelling the task cancels too)."""
        _core.check_resource(name, "name")
        _core.check_int(wait_ms, "wait_ms", 0)
        if after is not None and not isinstance(after, dict):
            raise TypeError("after must be a Reading (or None)")
        ref = after if after is not None else Reading({"leader": False})
        what = "observe %r" % name
        path = _core.leader_path(name, ref.epoch or 0, ref.value if ref.leader else None, wait_ms)
        status, answer, _ = await _with_cancel(
            self._t.request("GET", path, None, timeout_s=self._t.timeout_s + wait_ms / 1000.0, what=what),
            cancel, what)
        if status != 200:
            raise from_answer(status, answer, what)
        if not isinstance(answer, dict):
            raise ProtocolError("%s: the answer is not a JSON object" % what, code="protocol")
        return Reading(answer)

    def watch(self, name: str, *, wait_ms: int = 30000,
              cancel: Optional[asyncio.Event] = None) -> AsyncIterator[Reading]:
        """As :meth:`fencelock.Client.watch`: ``async for reading in client.watch(name)``."""
        _core.check_resource(name, "name")
        _core.check_int(wait_ms, "wait_ms", 1)
        return self._watch(name, wait_ms, cancel)

    async def _watch(self, name: str, wait_ms: int, cancel: Optional[asyncio.Event]) -> AsyncIterator[Reading]:
        last: Optional[Reading] = None
        floor = 0
        failures = 0
        while cancel is None or not cancel.is_set():
            try:
                r = (await self.leader(name) if last is None
                     else await self.observe(name, last, wait_ms=wait_ms, cancel=cancel))
                failures = 0
            except Canceled:
                return
            except FencelockError as e:
                if e.code not in _core.ACQUIRE_RETRY_CODES and e.code != "timeout":
                    raise
                try:
                    await _with_cancel(asyncio.sleep(_core.acquire_backoff_ms(failures) / 1000.0), cancel, name)
                except Canceled:
                    return
                failures += 1
                continue
            if last is not None and not r.changed:
                continue
            stale = r.leader and (r.epoch or 0) < floor
            last = r
            if stale:
                continue
            if r.leader:
                floor = r.epoch or 0
            yield r

    async def proclaim(self, name: str, lock_id: str, value: str, *, ttl_ms: int = 10000) -> Dict[str, Any]:
        """As :meth:`fencelock.Client.proclaim`."""
        _core.check_resource(name, "name")
        _core.check_lock_id(lock_id)
        _core.check_value(value)
        _core.check_int(ttl_ms, "ttl_ms", 1)
        return await self._call("POST", _core.proclaim_path(name, lock_id), {"value": value, "ttl_ms": ttl_ms},
                                "proclaim %r" % name)

    async def resign(self, name: str, lock_id: str) -> Dict[str, Any]:
        """As :meth:`fencelock.Client.resign`."""
        return await self.release(name, lock_id, kind="leader")

    async def extend(self, resource: str, lock_id: str, *, ttl_ms: int = 10000, kind: str = "plain") -> Dict[str, Any]:
        """As :meth:`fencelock.Client.extend`."""
        _core.check_resource(resource)
        _core.check_lock_id(lock_id)
        _core.check_int(ttl_ms, "ttl_ms", 1)
        _check_lock_kind(kind)
        return await self._call("POST", _core.extend_path(resource, lock_id, kind), {"ttl_ms": ttl_ms},
                                "extend %r" % resource)

    async def release(self, resource: str, lock_id: str, *, kind: str = "plain") -> Dict[str, Any]:
        """As :meth:`fencelock.Client.release`."""
        _core.check_resource(resource)
        _core.check_lock_id(lock_id)
        _check_lock_kind(kind)
        return await self._call("DELETE", _core.lock_path(resource, lock_id, kind), None, "release %r" % resource)

    async def status(self, resource: str, *, kind: str = "plain", permits: Optional[int] = None) -> Status:
        """As :meth:`fencelock.Client.status`."""
        _core.check_resource(resource)
        if kind not in ("plain", "rw", "read", "write", "reentrant", "semaphore"):
            raise ValueError("kind must be plain, rw, reentrant or semaphore for a status")
        if (kind == "semaphore") != (permits is not None):
            raise ValueError("a semaphore's status needs permits, and only a semaphore's")
        if permits is not None:
            _core.check_int(permits, "permits", 1, _core.PERMITS_MAX)
        return Status(await self._call("GET", _core.status_path(resource, kind, permits), None,
                                       "status %r" % resource))

    async def health(self) -> Dict[str, Any]:
        return await self._call("GET", "/healthz", None, "health")

    async def _call(self, method: str, path: str, body: Any, what: str, timeout_s: Optional[float] = None) -> Any:
        status, answer, _ = await self._t.request(method, path, body, timeout_s=timeout_s, what=what)
        if status != 200:
            raise from_answer(status, answer, what)
        if not isinstance(answer, dict):
            raise ProtocolError("%s: the answer is not a JSON object" % what, code="protocol")
        return answer


class AsyncLock:
    """The asyncio form of :class:`fencelock.Lock`: the same attributes,
    ``valid()``, ``check()``, ``remaining_ms()`` and ``lost_event`` (an
    asyncio.Event); :meth:`release`, :meth:`extend`, :meth:`reenter` and
    :meth:`fenced` are coroutines. ``async with`` releases it."""

    def __init__(self, client: AsyncClient, grant: Dict[str, Any], sent_ms: float, ttl_ms: int, on_lost: Any,
                 owner: Optional[str] = None):
        self._client = client
        self.grant = grant
        self.resource: str = grant["resource"]
        self.resources: List[str] = list(grant.get("resources") or [self.resource])
        self.kind: str = grant["kind"]
        self.lock_id: str = _core.check_lock_id(grant["lock_id"])
        self.ref: str = _core.lock_ref(self.lock_id)
        self.owner_id: Optional[str] = (owner or _core.owner_id(self.lock_id)) if self.kind == "reentrant" else None
        self.token: int = grant["token"]
        self.ttl_ms = ttl_ms
        self.semaphore: Optional[str] = grant.get("semaphore")
        self._validity = _core.Validity(sent_ms, grant["validity_ms"])
        self._lost: Optional[FencelockError] = None
        self._released = False
        self._on_lost = on_lost
        self._task: Optional["asyncio.Task[None]"] = None
        self.lost_event = asyncio.Event()
        self.extensions = 0

    def __repr__(self) -> str:
        return "<fencelock.AsyncLock %s %r token=%d>" % (self.kind, self.resource, self.token)

    async def __aenter__(self) -> "AsyncLock":
        return self

    async def __aexit__(self, *exc: Any) -> None:
        await self.release()

    @property
    def valid_until_ms(self) -> float:
        return self._validity.valid_until_ms

    @property
    def acquired_ms(self) -> float:
        return self._validity.acquired_ms

    def remaining_ms(self) -> float:
        if self._lost is not None or self._released:
            return 0.0
        return self._validity.remaining_ms()

    def valid(self) -> bool:
        try:
            self.check()
            return True
        except FencelockError:
            return False

    def check(self) -> None:
        """Raise :class:`~fencelock.Lost` unless still certainly held (no request)."""
        err = self._lost
        if err is None and self._released:
            err = Lost("the lock of %r was released" % self.resource, code="released")
        if err is None and not self._validity.valid():
            err = self._mark_lost(Lost("the lock of %r ran past its validity without an extension"
                                       % self.resource, code="expired"))
        if err is not None:
            raise err

    @property
    def lost(self) -> Optional[FencelockError]:
        try:
            self.check()
        except FencelockError as e:
            return None if e.code == "released" else e
        return None

    def _mark_lost(self, err: FencelockError) -> FencelockError:
        if self._lost is None and not self._released:
            self._lost = err
            self.lost_event.set()
            if self._on_lost is not None:
                try:
                    self._on_lost(self, err)
                except Exception:
                    pass
        return self._lost or err

    async def extend(self, ttl_ms: Optional[int] = None) -> None:
        ttl = self.ttl_ms if ttl_ms is None else _core.check_int(ttl_ms, "ttl_ms", 1)
        await self._extend_by(_core.extend_path(self.resource, self.lock_id, self.kind), {"ttl_ms": ttl}, ttl,
                              "extend %r" % self.resource)

    async def _extend_by(self, path: str, body: Dict[str, Any], ttl: int, what: str) -> Dict[str, Any]:
        self.check()
        sent = _core.now_ms()
        timeout = min(self._client._t.timeout_s, max(self._validity.remaining_ms(), 1.0) / 1000.0)
        try:
            answer = await self._client._call("POST", path, body, what, timeout_s=timeout)
        except FencelockError as e:
            if e.code in _core.KEEPALIVE_FATAL_CODES:
                self._mark_lost(Lost("the lock of %r is lost: %s" % (self.resource, e.message), status=e.status,
                                     code=e.code or "lost", body=e.body))
                self.check()
            raise
        v = answer.get("validity_ms")
        if not isinstance(v, int):
            raise ProtocolError("%s: the answer has no validity_ms" % what, code="protocol", body=answer)
        if self._lost is None and self._validity.valid():
            self._validity.extended(sent, v)
            self.extensions += 1
            self.ttl_ms = ttl
        self.check()
        return answer

    async def _confirm(self) -> None:
        """After a grant that waited: extend at once (see fencelock._core.needs_confirm)."""
        sent = _core.now_ms()
        try:
            answer = await self._client._call("POST", _core.extend_path(self.resource, self.lock_id, self.kind),
                                              {"ttl_ms": self.ttl_ms}, "extend %r" % self.resource)
        except FencelockError as e:
            try:
                await self.release()
            except FencelockError:
                pass
            if e.code in _core.KEEPALIVE_FATAL_CODES:
                raise Lost("the lock of %r was lost before its grant arrived: %s" % (self.resource, e.message),
                           status=e.status, code=e.code, body=e.body) from None
            raise
        v = answer.get("validity_ms")
        if not isinstance(v, int):
            raise ProtocolError("extend: the answer has no validity_ms", code="protocol", body=answer)
        acquired = self._validity.acquired_ms
        self._validity = _core.Validity(sent, v)
        self._validity.acquired_ms = acquired
        self.extensions += 1

    def _start_keepalive(self) -> None:
        self._client._locks[id(self)] = self
        self._task = asyncio.ensure_future(self._keepalive())

    def _stop_keepalive(self) -> None:
        self._client._locks.pop(id(self), None)
        if self._task is not None and self._task is not asyncio.current_task():
            self._task.cancel()
        self._task = None

    async def _keepalive(self) -> None:
        failures = 0
        due = _core.now_ms() + _core.extend_interval_ms(self.ttl_ms)
        while True:
            # Wake for the next extension or the end of the validity, whichever first.
            wake = min(due, self._validity.valid_until_ms)
            await asyncio.sleep(max(0.0, wake - _core.now_ms()) / 1000.0)
            if not self.valid():
                return
            if _core.now_ms() < due:
                continue
            try:
                await self.extend()
                failures = 0
                due = _core.now_ms() + _core.extend_interval_ms(self.ttl_ms)
            except FencelockError as e:
                if self._lost is not None or e.code in _core.KEEPALIVE_FATAL_CODES:
                    return
                due = _core.now_ms() + _core.retry_delay_ms(self.ttl_ms, failures)
                failures += 1

    async def release(self) -> None:
        """Release (once) and stop the keep-alive; as :meth:`fencelock.Lock.release`."""
        if self._released:
            return
        self._released = True
        self._stop_keepalive()
        await self._client._call("DELETE", _core.lock_path(self.resource, self.lock_id, self.kind), None,
                                 "release %r" % self.resource)

    def reenter(self, **kw: Any) -> _Pending:
        """One more hold of a reentrant lock, same owner and token."""
        if self.kind != "reentrant":
            raise ValueError("only a reentrant lock is re-entered")
        self.check()
        kw.setdefault("ttl_ms", self.ttl_ms)
        return _Pending(self._client._acquire("reentrant", self.resource, None, None, self, **kw))

    async def fenced(self, fn: Callable[[int], Awaitable[T]]) -> T:
        """Check the lock, then ``await fn(token)`` (your own database's fenced write)."""
        if not callable(fn):
            raise TypeError("fn must be callable")
        self.check()
        return await fn(self.token)

    async def status(self) -> Status:
        kinds = {"plain": "plain", "multi": "plain", "reentrant": "reentrant", "read": "rw", "write": "rw",
                 "leader": "plain"}
        if self.kind == "permit":
            raise ValueError("ask the semaphore's status with client.status(name, kind='semaphore', permits=N)")
        return await self._client.status(self.resources[0] if self.kind == "multi" else self.resource,
                                         kind=kinds[self.kind])


class AsyncLeader(AsyncLock):
    """The asyncio form of :class:`fencelock.Leader`: ``name``, ``epoch`` (==
    ``token``), ``value``, ``ref``, ``check()``, ``valid()``, ``lost_event``
    (an asyncio.Event); :meth:`proclaim`, :meth:`resign` and :meth:`reading`
    are coroutines. ``async with client.campaign(...) as leader:`` resigns on
    leaving."""

    def __init__(self, client: AsyncClient, answer: Dict[str, Any], sent_ms: float, ttl_ms: int, on_lost: Any):
        g = dict(answer, resource=answer["name"], kind="leader", token=answer["epoch"])
        super().__init__(client, g, sent_ms, ttl_ms, on_lost)
        self.grant = answer
        self.name: str = answer["name"]
        self.epoch: int = answer["epoch"]
        self.value: str = answer.get("value") if isinstance(answer.get("value"), str) else ""

    def __repr__(self) -> str:
        return "<fencelock.AsyncLeader %r epoch=%d value=%r>" % (self.name, self.epoch, self.value)

    async def proclaim(self, value: str, ttl_ms: Optional[int] = None) -> None:
        """As :meth:`fencelock.Leader.proclaim`."""
        _core.check_value(value)
        ttl = self.ttl_ms if ttl_ms is None else _core.check_int(ttl_ms, "ttl_ms", 1)
        await self._extend_by(_core.proclaim_path(self.name, self.lock_id), {"value": value, "ttl_ms": ttl}, ttl,
                              "proclaim %r" % self.name)
        self.value = value

    async def resign(self) -> None:
        """As :meth:`fencelock.Leader.resign`."""
        await self.release()

    async def reading(self) -> Reading:
        return await self._client.leader(self.name)
