"""Clients of storage-guard (docs/storage-guard.md): records, conditional writes,
batches, deletes, fences and the audit log, each fenced write sent with a
lock's token in the ``Fencing-Token`` header."""
from typing import Any, Dict, List, Optional, Sequence

from . import _core
from ._ahttp import AsyncTransport
from ._http import Transport
from .errors import FencelockError, ProtocolError, from_answer

__all__ = ["StorageGuard", "AsyncStorageGuard", "put_op", "delete_op", "check_op"]

USER_AGENT = "fencelock-python/0.1.0"
KEY_MAX = 1024


def _check_key(key: Any, name: str = "key") -> str:
    if not isinstance(key, str):
        raise TypeError("%s must be a str" % name)
    n = len(key.encode("utf-8"))
    if n == 0 or n > KEY_MAX or "\0" in key:
        raise ValueError("%s must be 1..%d bytes without NUL" % (name, KEY_MAX))
    return key


def _token_of(lock: Any, token: Optional[int], required: bool = True) -> Optional[int]:
    """The token to send: the lock's (checked valid first) or the one given."""
    if lock is not None and token is not None:
        raise ValueError("give lock or token, not both")
    if lock is not None:
        if not hasattr(lock, "check") or not hasattr(lock, "token"):
            raise TypeError("lock must be a fencelock Lock")
        lock.check()
        return _core.check_token(lock.token)
    if token is not None:
        return _core.check_token(token)
    if required:
        raise ValueError("a fenced operation needs lock= or token=")
    return None


def _precondition(if_version: Optional[int], if_exists: bool) -> Dict[str, str]:
    if if_version is not None and if_exists:
        raise ValueError("give if_version or if_exists, not both")
    if if_version is not None:
        _core.check_int(if_version, "if_version", 0)
        return {"If-None-Match": "*"} if if_version == 0 else {"If-Match": '"%d"' % if_version}
    return {"If-Match": "*"} if if_exists else {}


def put_op(key: str, value: Any, *, resource: Optional[str] = None, if_version: Optional[int] = None) -> Dict[str, Any]:
    """A put of a batch."""
    op: Dict[str, Any] = {"op": "put", "key": _check_key(key), "value": value}
    if resource is not None:
        op["resource"] = _check_key(resource, "resource")
    if if_version is not None:
        op["if_version"] = _core.check_int(if_version, "if_version", 0)
    return op


def delete_op(key: str, *, resource: Optional[str] = None, if_version: Optional[int] = None) -> Dict[str, Any]:
    """A delete of a batch."""
    op: Dict[str, Any] = {"op": "delete", "key": _check_key(key)}
    if resource is not None:
        op["resource"] = _check_key(resource, "resource")
    if if_version is not None:
        op["if_version"] = _core.check_int(if_version, "if_version", 0)
    return op


def check_op(key: str, version: int, *, resource: Optional[str] = None) -> Dict[str, Any]:
    """A version check of a batch (0: the record must not exist)."""
    op: Dict[str, Any] = {"op": "check", "key": _check_key(key), "version": _core.check_int(version, "version", 0)}
    if resource is not None:
        op["resource"] = _check_key(resource, "resource")
    return op


class _Requests:
    """The requests of every call, without I/O (shared by both clients)."""

    @staticmethod
    def put(key, value, lock, token, resource, if_version, if_exists):
        _check_key(key)
        t = _token_of(lock, token)
        body: Dict[str, Any] = {"value": value}
        if resource is not None:
            body["resource"] = _check_key(resource, "resource")
        h = {"Fencing-Token": str(t)}
        h.update(_precondition(if_version, if_exists))
        return "PUT", "/v1/records/" + _core.quote(key), body, h, (200,)

    @staticmethod
    def get(key, lock, token, resource, raise_fence):
        _check_key(key)
        t = _token_of(lock, token, required=False)
        q = []
        h = {}
        if t is not None:
            h["Fencing-Token"] = str(t)
            if not raise_fence:
                q.append("raise=0")
        elif not raise_fence:
            raise ValueError("raise_fence=False is for a reader's read: it needs lock= or token=")
        if resource is not None:
            if t is None:
                raise ValueError("resource= is for a fenced read: give lock= or token=")
            q.append("resource=" + _core.quote(_check_key(resource, "resource")))
        path = "/v1/records/" + _core.quote(key) + ("?" + "&".join(q) if q else "")
        return "GET", path, None, h, (200, 404)

    @staticmethod
    def delete(key, lock, token, resource, if_version, if_exists):
        _check_key(key)
        t = _token_of(lock, token)
        h = {"Fencing-Token": str(t)}
        h.update(_precondition(if_version, if_exists))
        q = "?resource=" + _core.quote(_check_key(resource, "resource")) if resource is not None else ""
        return "DELETE", "/v1/records/" + _core.quote(key) + q, None, h, (200, 404)

    @staticmethod
    def batch(ops, lock, token):
        if not isinstance(ops, (list, tuple)) or not 1 <= len(ops) <= 100:
            raise ValueError("ops must be a list of 1..100 operations (put_op, delete_op, check_op)")
        for op in ops:
            if not isinstance(op, dict) or op.get("op") not in ("put", "delete", "check"):
                raise ValueError("each op is a dict made by put_op, delete_op or check_op")
        t = _token_of(lock, token)
        return "POST", "/v1/batch", {"ops": list(ops)}, {"Fencing-Token": str(t)}, (200,)

    @staticmethod
    def log(resource, key, after, limit):
        q = []
        if resource is not None:
            q.append("resource=" + _core.quote(_check_key(resource, "resource")))
        if key is not None:
            q.append("key=" + _core.quote(_check_key(key)))
        if after is not None:
            q.append("after=%d" % _core.check_int(after, "after", 0))
        if limit is not None:
            q.append("limit=%d" % _core.check_int(limit, "limit", 1, 1000))
        return "GET", "/v1/log" + ("?" + "&".join(q) if q else ""), None, {}, (200,)


def _result(status: int, answer: Any, ok: Sequence[int], what: str, etag: Optional[str] = None) -> Any:
    if status not in ok:
        raise from_answer(status, answer, what)
    if status == 404:
        return None
    if not isinstance(answer, dict):
        raise ProtocolError("%s: the answer is not a JSON object" % what, status=status, code="protocol")
    return answer


class StorageGuard:
    """A client of one storage-guard (``url`` like ``http://127.0.0.1:8080``), with
    the same ``token`` (bearer), ``ca_file``, ``timeout`` and ``pool_size`` as
    :class:`fencelock.Client`. Thread-safe.

    Every fenced call takes ``lock=`` (a held lock: checked valid, then its token
    is sent) or ``token=`` (a token as a number, sent as it is)."""

    def __init__(self, url: str, *, token: Optional[str] = None, ca_file: Optional[str] = None,
                 timeout: float = 10.0, pool_size: int = 64):
        self._t = Transport(url, token, ca_file, timeout, pool_size, USER_AGENT)

    def __enter__(self) -> "StorageGuard":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def close(self) -> None:
        self._t.close()

    def _do(self, req, what: str) -> Any:
        method, path, body, headers, ok = req
        status, answer, _ = self._t.request(method, path, body, headers, what=what)
        return _result(status, answer, ok, what)

    def put(self, key: str, value: Any, *, lock: Any = None, token: Optional[int] = None,
            resource: Optional[str] = None, if_version: Optional[int] = None, if_exists: bool = False) -> Dict[str, Any]:
        """Write ``value`` (any JSON value) under ``key``. ``resource``: the lock's
        name when it is not the key. ``if_version``: only if the record is at this
        version (0: only if there is none); ``if_exists``: only if it exists.
        Returns ``{"key", "version", "token", "resource", "previous_token"}``.
        Raises StaleToken (409), VersionMismatch (412), Lost (the lock is no
        longer valid: nothing sent), ..."""
        return self._do(_Requests.put(key, value, lock, token, resource, if_version, if_exists), "put %r" % key)

    def get(self, key: str, *, lock: Any = None, token: Optional[int] = None, resource: Optional[str] = None,
            raise_fence: bool = True) -> Optional[Dict[str, Any]]:
        """Read a record, or None if there is none. With ``lock``/``token`` the read
        is fenced (the token is admitted like a write's); ``raise_fence=False`` is a
        read lock holder's read, which never moves the fence."""
        return self._do(_Requests.get(key, lock, token, resource, raise_fence), "get %r" % key)

    def delete(self, key: str, *, lock: Any = None, token: Optional[int] = None, resource: Optional[str] = None,
               if_version: Optional[int] = None, if_exists: bool = False) -> bool:
        """Delete a record (fenced like a write). True if there was one."""
        return self._do(_Requests.delete(key, lock, token, resource, if_version, if_exists),
                        "delete %r" % key) is not None

    def batch(self, ops: Sequence[Dict[str, Any]], *, lock: Any = None, token: Optional[int] = None) -> Dict[str, Any]:
        """Several puts, deletes and checks under one token, all or nothing (ops from
        :func:`put_op`, :func:`delete_op`, :func:`check_op`)."""
        return self._do(_Requests.batch(ops, lock, token), "batch")

    def fence(self, resource: str) -> int:
        """The last token admitted for ``resource`` (0: none yet)."""
        a = self._do(("GET", "/v1/fences/" + _core.quote(_check_key(resource, "resource")), None, {}, (200,)),
                     "fence %r" % resource)
        return int(a.get("last_token") or 0)

    def reset_fence(self, resource: str, token: int) -> Dict[str, Any]:
        """An operator's reset of a fence (an ``admin`` client only; Forbidden
        otherwise). Breaks the fencing guarantee: read storage-guard.md first."""
        _check_key(resource, "resource")
        _core.check_int(token, "token", 0, _core.TOKEN_MAX)
        return self._do(("POST", "/v1/fences/%s/reset" % _core.quote(resource), {"token": token}, {}, (200,)),
                        "reset fence %r" % resource)

    def log(self, *, resource: Optional[str] = None, key: Optional[str] = None, after: Optional[int] = None,
            limit: Optional[int] = None) -> Dict[str, Any]:
        """A page of the audit log: ``{"entries": [...], "next_after": N}``."""
        return self._do(_Requests.log(resource, key, after, limit), "log")

    def health(self) -> Dict[str, Any]:
        return self._do(("GET", "/healthz", None, {}, (200,)), "health")


class AsyncStorageGuard:
    """The asyncio form of :class:`StorageGuard`: the same methods, as coroutines."""

    def __init__(self, url: str, *, token: Optional[str] = None, ca_file: Optional[str] = None,
                 timeout: float = 10.0, pool_size: int = 64):
        self._t = AsyncTransport(url, token, ca_file, timeout, pool_size, USER_AGENT)

    async def __aenter__(self) -> "AsyncStorageGuard":
        return self

    async def __aexit__(self, *exc: Any) -> None:
        await self.close()

    async def close(self) -> None:
        await self._t.close()

    async def _do(self, req, what: str) -> Any:
        method, path, body, headers, ok = req
        status, answer, _ = await self._t.request(method, path, body, headers, what=what)
        return _result(status, answer, ok, what)

    async def put(self, key: str, value: Any, *, lock: Any = None, token: Optional[int] = None,
                  resource: Optional[str] = None, if_version: Optional[int] = None,
                  if_exists: bool = False) -> Dict[str, Any]:
        return await self._do(_Requests.put(key, value, lock, token, resource, if_version, if_exists), "put %r" % key)

    async def get(self, key: str, *, lock: Any = None, token: Optional[int] = None, resource: Optional[str] = None,
                  raise_fence: bool = True) -> Optional[Dict[str, Any]]:
        return await self._do(_Requests.get(key, lock, token, resource, raise_fence), "get %r" % key)

    async def delete(self, key: str, *, lock: Any = None, token: Optional[int] = None,
                     resource: Optional[str] = None, if_version: Optional[int] = None,
                     if_exists: bool = False) -> bool:
        return await self._do(_Requests.delete(key, lock, token, resource, if_version, if_exists),
                              "delete %r" % key) is not None

    async def batch(self, ops: Sequence[Dict[str, Any]], *, lock: Any = None,
                    token: Optional[int] = None) -> Dict[str, Any]:
        return await self._do(_Requests.batch(ops, lock, token), "batch")

    async def fence(self, resource: str) -> int:
        a = await self._do(("GET", "/v1/fences/" + _core.quote(_check_key(resource, "resource")), None, {}, (200,)),
                           "fence %r" % resource)
        return int(a.get("last_token") or 0)

    async def log(self, *, resource: Optional[str] = None, key: Optional[str] = None, after: Optional[int] = None,
                  limit: Optional[int] = None) -> Dict[str, Any]:
        return await self._do(_Requests.log(resource, key, after, limit), "log")
