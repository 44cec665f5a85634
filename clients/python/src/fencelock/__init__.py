"""fencelock: fenced distributed locks through fencelockd, and fenced writes to
storage-guard, from Python's standard library alone.

    import fencelock

    client = fencelock.Client("http://127.0.0.1:7600")
    with client.lock("invoice:42", wait_ms=5000) as lock:
        store.put("invoice-42", {"paid": True}, lock=lock)

A lock is kept alive from this process (every third of its TTL) until it is
released; :meth:`Lock.check` raises :class:`Lost` the moment it is no longer
certainly held, by the monotonic clock, even if this process was stopped and
its keep-alive could not run. See README.md.
"""
from ._core import lock_ref
from .aio import AsyncClient, AsyncLock
from .client import Client, Lock, Status
from .errors import (BadRequest, Busy, Canceled, FencelockError, Forbidden, Locked, Lost, MissingToken, NodeError,
                     NoQuorum, NotFound, NoToken, ProtocolError, ServerError, ShuttingDown, StaleToken, Timeout,
                     TooSlow, Unauthorized, Unreachable, VersionMismatch, from_answer)
from .storage import AsyncStorageGuard, StorageGuard, check_op, delete_op, put_op

__version__ = "0.1.0"

__all__ = [
    "Client", "Lock", "Status", "AsyncClient", "AsyncLock", "StorageGuard", "AsyncStorageGuard",
    "put_op", "delete_op", "check_op", "lock_ref", "from_answer",
    "FencelockError", "BadRequest", "Unauthorized", "Forbidden", "NotFound", "Locked", "Lost", "StaleToken",
    "VersionMismatch", "MissingToken", "NodeError", "NoQuorum", "TooSlow", "NoToken", "ShuttingDown", "Busy",
    "ServerError", "Unreachable", "Timeout", "Canceled", "ProtocolError",
]
