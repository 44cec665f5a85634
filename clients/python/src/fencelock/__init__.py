"""fencelock: fenced distributed locks through fencelockd, and fenced writes to
storage-guard, from Python's standard library alone.

    import fencelock

    client = fencelock.Client("http://127.0.0.1:7600")
    with client.lock("invoice:42", wait_ms=5000) as lock:
        store.put("invoice-42", {"paid": True}, lock=lock)

A lock is kept alive from this process (every third of its TTL) until it is
released; :meth:`Lock.check` raises :class:`Lost` the moment it is no longer
certainly held, by the monotonic clock, even if this process was stopped and
its keep-alive could not run.

    with client.campaign("scheduler", "10.0.0.7:8080", wait_ms=60000) as leader:
        store.put("schedule", plan, lock=leader)      # leader.epoch is the token

A leader is a lock too (kept alive, checked the same way); its epoch is its
fencing token. ``client.watch(name)`` yields who leads at each change. See
README.md.
"""
from ._core import lock_ref
from .aio import AsyncClient, AsyncLeader, AsyncLock
from .client import Client, Leader, Lock, Reading, Status
from .errors import (BadRequest, Busy, Canceled, FencelockError, Forbidden, Locked, Lost, MissingToken, NodeError,
                     NoQuorum, NotElected, NotFound, NoToken, ProtocolError, ServerError, ShuttingDown, StaleToken,
                     Timeout, TooSlow, Unauthorized, Unreachable, VersionMismatch, from_answer)
from .storage import AsyncStorageGuard, StorageGuard, check_op, delete_op, put_op

__version__ = "0.1.0"

__all__ = [
    "Client", "Lock", "Status", "Leader", "Reading", "AsyncClient", "AsyncLock", "AsyncLeader", "StorageGuard",
    "AsyncStorageGuard", "put_op", "delete_op", "check_op", "lock_ref", "from_answer",
    "FencelockError", "BadRequest", "Unauthorized", "Forbidden", "NotFound", "Locked", "NotElected", "Lost",
    "StaleToken", "VersionMismatch", "MissingToken", "NodeError", "NoQuorum", "TooSlow", "NoToken", "ShuttingDown", "Busy",
    "ServerError", "Unreachable", "Timeout", "Canceled", "ProtocolError",
]
