"""A small HTTP/1.1 client over asyncio streams with keep-alive connections:
what the asyncio clients need of HTTP, and no more (JSON bodies with a
Content-Length or chunked answers). One transport belongs to one event loop."""
import asyncio
import json
import ssl
import time
from typing import Any, Dict, List, Optional, Tuple

from . import _core
from ._http import _IDLE_MAX_S, _parse
from .errors import Timeout, Unreachable

_HEAD_MAX = 64 * 1024
_BODY_MAX = 16 * 1024 * 1024


class _AConn:
    __slots__ = ("r", "w", "idle_since")

    def __init__(self, r: asyncio.StreamReader, w: asyncio.StreamWriter):
        self.r, self.w = r, w
        self.idle_since = 0.0

    def close(self) -> None:
        try:
            self.w.close()
        except Exception:
            pass


class _Dropped(Exception):
    """The connection ended before an answer began."""


class AsyncTransport:
    def __init__(self, url: str, token: Optional[str], ca_file: Optional[str], timeout_s: float, pool_size: int,
                 user_agent: str):
        u = _core.check_url(url)
        if token is not None and (not isinstance(token, str) or not token or any(c.isspace() for c in token)):
            raise ValueError("token must be a non-empty str without whitespace")
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
        hostport = self.host if u.port is None else "%s:%d" % (self.host, self.port)
        self._head = "Host: %s\r\nUser-Agent: %s\r\nAccept: application/json\r\n" % (hostport, user_agent)
        if token:
            self._head += "Authorization: Bearer %s\r\n" % token
        self._ssl = ssl.create_default_context(cafile=ca_file) if self.https else None
        self._idle: List[_AConn] = []
        self._closed = False

    async def close(self) -> None:
        self._closed = True
        idle, self._idle = self._idle, []
        for c in idle:
            c.close()

    def _take(self) -> Optional[_AConn]:
        now = time.monotonic()
        while self._idle:
            c = self._idle.pop()
            if now - c.idle_since < _IDLE_MAX_S and not c.r.at_eof():
                return c
            c.close()
        return None

    def _give(self, c: _AConn) -> None:
        if self._closed or len(self._idle) >= self.pool_size:
            c.close()
            return
        c.idle_since = time.monotonic()
        self._idle.append(c)

    async def request(self, method: str, path: str, body: Any = None, headers: Optional[Dict[str, str]] = None,
                      timeout_s: Optional[float] = None, what: str = "") -> Tuple[int, Any, Dict[str, str]]:
        """As the blocking Transport.request. Cancel the task to cancel the
        request: the connection is closed, so the server sees the hang-up."""
        data = json.dumps(body, separators=(",", ":")).encode() if body is not None else b""
        head = "%s %s HTTP/1.1\r\n%s" % (method, path, self._head)
        if body is not None:
            head += "Content-Type: application/json\r\n"
        if body is not None or method in ("POST", "PUT", "DELETE"):
            head += "Content-Length: %d\r\n" % len(data)
        for k, v in (headers or {}).items():
            head += "%s: %s\r\n" % (k, v)
        raw_req = (head + "\r\n").encode("latin-1") + data
        t = self.timeout_s if timeout_s is None else max(0.001, timeout_s)
        label = what or "%s %s" % (method, path)
        for attempt in (0, 1):
            conn = self._take()
            reused = conn is not None
            try:
                if conn is None:
                    try:
                        r, w = await asyncio.wait_for(
                            asyncio.open_connection(self.host, self.port, ssl=self._ssl,
                                                    server_hostname=self.host if self.https else None,
                                                    limit=_HEAD_MAX), t)
                    except asyncio.TimeoutError:
                        raise Timeout("%s: no connection to %s within %.3f s" % (label, self.base, t),
                                      code="timeout") from None
                    except ssl.SSLError as e:
                        raise Unreachable("%s: TLS with %s failed: %s" % (label, self.base, e),
                                          code="unreachable") from None
                    except OSError as e:
                        raise Unreachable("%s: %s: %s" % (label, self.base, e), code="unreachable") from None
                    conn = _AConn(r, w)
                try:
                    status, rh, raw, keep = await asyncio.wait_for(self._exchange(conn, raw_req), t)
                except asyncio.TimeoutError:
                    conn.close()
                    raise Timeout("%s: no answer from %s within %.3f s" % (label, self.base, t),
                                  code="timeout") from None
                except _Dropped as e:
                    conn.close()
                    if reused and attempt == 0:
                        continue
                    raise Unreachable("%s: %s: %s" % (label, self.base, e), code="unreachable") from None
                except (OSError, ssl.SSLError, asyncio.IncompleteReadError, ValueError) as e:
                    conn.close()
                    raise Unreachable("%s: %s: %s" % (label, self.base, e or type(e).__name__),
                                      code="unreachable") from None
            except asyncio.CancelledError:
                if conn is not None:
                    conn.close()
                raise
            if keep:
                self._give(conn)
            else:
                conn.close()
            return status, _parse(raw, status, rh, label), rh
        raise AssertionError("unreachable")

    async def _exchange(self, c: _AConn, raw_req: bytes):
        c.w.write(raw_req)
        try:
            await c.w.drain()
            line = await c.r.readline()
        except (ConnectionResetError, BrokenPipeError) as e:
            raise _Dropped(str(e) or type(e).__name__)
        if not line:
            raise _Dropped("the connection was closed before an answer")
        parts = line.decode("latin-1").rstrip("\r\n").split(" ", 2)
        if len(parts) < 2 or not parts[0].startswith("HTTP/1.") or not parts[1].isdigit():
            raise ValueError("not an HTTP/1.x status line: %r" % line[:80])
        status = int(parts[1])
        headers: Dict[str, str] = {}
        size = 0
        while True:
            h = await c.r.readline()
            size += len(h)
            if size > _HEAD_MAX:
                raise ValueError("answer head over %d bytes" % _HEAD_MAX)
            if h in (b"\r\n", b"\n", b""):
                break
            k, _, v = h.decode("latin-1").partition(":")
            headers[k.strip().lower()] = v.strip()
        keep = parts[0] == "HTTP/1.1" and headers.get("connection", "").lower() != "close"
        if headers.get("transfer-encoding", "").lower() == "chunked":
            body = b""
            while True:
                n = int((await c.r.readline()).split(b";")[0].strip() or b"0", 16)
                if n == 0:
                    while (await c.r.readline()) not in (b"\r\n", b"\n", b""):
                        pass
                    break
                if len(body) + n > _BODY_MAX:
                    raise ValueError("answer body too large")
                body += await c.r.readexactly(n)
                await c.r.readline()
        elif "content-length" in headers:
            n = int(headers["content-length"])
            if n < 0 or n > _BODY_MAX:
                raise ValueError("bad Content-Length")
            body = await c.r.readexactly(n)
        elif status in (204, 304) or 100 <= status < 200:
            body = b""
        else:
            body = await c.r.read(_BODY_MAX)
            keep = False
        return status, headers, body, keep
