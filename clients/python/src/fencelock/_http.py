"""A small pool of keep-alive HTTP/1.1 connections over http.client, shared
by the threads of one client. Thread-safe."""
import http.client
import json
import socket
import ssl
import threading
import time
from typing import Any, Callable, Dict, List, Optional, Tuple

from . import _core
from .errors import Canceled, ProtocolError, Timeout, Unreachable

# fencelockd and storage-guard close a connection idle for 30 s; a pooled
# connection idle for longer than this is not reused.
_IDLE_MAX_S = 20.0


class _Conn:
    __slots__ = ("c", "idle_since")

    def __init__(self, c: http.client.HTTPConnection):
        self.c = c
        self.idle_since = 0.0


class Transport:
    """Requests to one server, on connections kept open between requests."""

    def __init__(self, url: str, token: Optional[str], ca_file: Optional[str], timeout_s: float,
                 pool_size: int, user_agent: str):
        u = _core.check_url(url)
        if token is not None and (not isinstance(token, str) or not token or any(c.isspace() for c in token)):
            raise ValueError("token must be a non-empty str without whitespace")
        if ca_file is not None and not isinstance(ca_file, str):
            raise TypeError("ca_file must be a path (str)")
        if isinstance(timeout_s, bool) or not isinstance(timeout_s, (int, float)) or timeout_s <= 0:
            raise ValueError("timeout must be a positive number of seconds")
        _core.check_int(pool_size, "pool_size", 1, 4096)
        self.https = u.scheme == "https"
        if ca_file is not None and not self.https:
            raise ValueError("ca_file is for an https:// url")
        self.host = u.hostname
        self.port = u.port or (443 if self.https else 80)
        self.base = "%s://%s:%d" % (u.scheme, self.host, self.port)
        self.timeout_s = float(timeout_s)
        self.pool_size = pool_size
        self.headers = {"User-Agent": user_agent}
        if token:
            self.headers["Authorization"] = "Bearer " + token
        self._ssl = ssl.create_default_context(cafile=ca_file) if self.https else None
        self._idle: List[_Conn] = []
        self._mu = threading.Lock()
        self._closed = False

    def _new(self, timeout_s: float) -> _Conn:
        if self.https:
            c = http.client.HTTPSConnection(self.host, self.port, timeout=timeout_s, context=self._ssl)
        else:
            c = http.client.HTTPConnection(self.host, self.port, timeout=timeout_s)
        return _Conn(c)

    def _take(self) -> Tuple[Optional[_Conn], bool]:
        now = time.monotonic()
        with self._mu:
            while self._idle:
                conn = self._idle.pop()
                if now - conn.idle_since < _IDLE_MAX_S:
                    return conn, True
                conn.c.close()
        return None, False

    def _give(self, conn: _Conn) -> None:
        conn.idle_since = time.monotonic()
        with self._mu:
            if not self._closed and len(self._idle) < self.pool_size:
                self._idle.append(conn)
                return
        conn.c.close()

    def close(self) -> None:
        with self._mu:
            self._closed = True
            idle, self._idle = self._idle, []
        for conn in idle:
            conn.c.close()

    def request(self, method: str, path: str, body: Any = None, headers: Optional[Dict[str, str]] = None,
                timeout_s: Optional[float] = None, cancel: Optional[threading.Event] = None,
                what: str = "") -> Tuple[int, Any, Dict[str, str]]:
        """Send one request; returns (status, parsed JSON or None, headers with
        lower-case names). Raises Unreachable, Timeout, Canceled or ProtocolError;
        never for an HTTP status (the caller maps those)."""
        data = json.dumps(body, separators=(",", ":")).encode() if body is not None else None
        h = dict(self.headers)
        if data is not None:
            h["Content-Type"] = "application/json"
        if headers:
            h.update(headers)
        t = self.timeout_s if timeout_s is None else max(0.001, timeout_s)
        label = what or "%s %s" % (method, path)
        if cancel is not None and cancel.is_set():
            raise Canceled("%s: canceled" % label, code="canceled")
        # A pooled connection the server closed while idle fails at once: try
        # once more on a new one. A fresh connection's failure is the answer.
        for attempt in (0, 1):
            conn, reused = self._take()
            if conn is None:
                conn = self._new(t)
            watcher = _CancelWatcher(conn, cancel) if cancel is not None else None
            try:
                if reused:
                    conn.c.timeout = t
                    if conn.c.sock is not None:
                        conn.c.sock.settimeout(t)
                conn.c.request(method, path, body=data, headers=h)
                r = conn.c.getresponse()
                raw = r.read()
                status = r.status
                # Only the headers the clients read (a dict of all of them costs
                # as much as the rest of the answer).
                rh = {"content-type": r.getheader("Content-Type", ""), "etag": r.getheader("ETag", "")}
                keep = not r.will_close
            except (http.client.RemoteDisconnected, BrokenPipeError, ConnectionResetError) as e:
                conn.c.close()
                if watcher is not None and watcher.fired():
                    raise Canceled("%s: canceled" % label, code="canceled") from None
                if reused and attempt == 0:
                    continue
                raise Unreachable("%s: %s: %s" % (label, self.base, e or type(e).__name__),
                                  code="unreachable") from None
            except socket.timeout:
                conn.c.close()
                if watcher is not None and watcher.fired():
                    raise Canceled("%s: canceled" % label, code="canceled") from None
                raise Timeout("%s: no answer from %s within %.3f s" % (label, self.base, t),
                              code="timeout") from None
            except ssl.SSLError as e:
                conn.c.close()
                raise Unreachable("%s: TLS with %s failed: %s" % (label, self.base, e),
                                  code="unreachable") from None
            except (OSError, http.client.HTTPException) as e:
                conn.c.close()
                if watcher is not None and watcher.fired():
                    raise Canceled("%s: canceled" % label, code="canceled") from None
                raise Unreachable("%s: %s: %s" % (label, self.base, e), code="unreachable") from None
            finally:
                if watcher is not None:
                    watcher.done()
            if watcher is not None and watcher.fired():
                conn.c.close()
                raise Canceled("%s: canceled" % label, code="canceled")
            if keep:
                self._give(conn)
            else:
                conn.c.close()
            return status, _parse(raw, status, rh, label), rh
        raise AssertionError("unreachable")


def _parse(raw: bytes, status: int, headers: Dict[str, str], label: str) -> Any:
    if not raw:
        return None
    ctype = headers.get("content-type", "")
    if "json" not in ctype:
        if status >= 400:
            return None  # an HTML error page from the HTTP layer: the status decides
        raise ProtocolError("%s: the answer is %s, not JSON" % (label, ctype or "untyped"), status=status,
                            code="protocol")
    try:
        return json.loads(raw)
    except ValueError:
        raise ProtocolError("%s: the answer is not valid JSON" % label, status=status, code="protocol") from None


class _CancelWatcher:
    """Shuts a connection's socket down when the cancel event is set, so that a
    request blocked in a long poll returns at once; the server sees the hang-up
    and withdraws the waiting acquisition."""

    def __init__(self, conn: _Conn, cancel: threading.Event):
        self._conn, self._cancel = conn, cancel
        self._end = threading.Event()
        self._fired = False
        self._t = threading.Thread(target=self._run, daemon=True, name="fencelock-cancel")
        self._t.start()

    def _run(self) -> None:
        while not self._end.is_set():
            if self._cancel.wait(0.02):
                if self._end.is_set():
                    return
                self._fired = True
                sock = self._conn.c.sock
                if sock is not None:
                    try:
                        sock.shutdown(socket.SHUT_RDWR)
                    except OSError:
                        pass
                return

    def fired(self) -> bool:
        return self._fired

    def done(self) -> None:
        self._end.set()
