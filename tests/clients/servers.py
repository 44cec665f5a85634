"""Real servers for the client conformance suite: redis-server nodes,
fencelockd and storage-guard on free 127.0.0.1 ports, each in a temporary
directory of its own, started from the built binaries and stopped, killed,
paused and resumed only by the PID this module started.

Every child asks the kernel for SIGKILL when the harness dies
(PR_SET_PDEATHSIG), so a crashed run leaves nothing behind.
"""
import ctypes
import json
import os
import shutil
import signal
import socket
import ssl
import subprocess
import tempfile
import time
import http.client

_libc = ctypes.CDLL(None, use_errno=True)
_PR_SET_PDEATHSIG = 1


def _die_with_parent():
    _libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)


def free_port():
    """A free port on 127.0.0.1 (bound and released: a caller retries on a clash)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_port(port, timeout_s, proc=None, what="server"):
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if proc is not None and proc.poll() is not None:
            raise RuntimeError("%s exited at start-up (status %s)" % (what, proc.returncode))
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                return
        except OSError:
            time.sleep(0.02)
    raise RuntimeError("%s did not listen on %d within %.0f s" % (what, port, timeout_s))


class Process:
    """A child process with its output in a log file, signalled by its PID only."""

    def __init__(self, argv, log_path, env=None):
        self.argv, self.log_path = list(argv), log_path
        self.env = env
        self.proc = None

    def start(self):
        log = open(self.log_path, "ab")
        try:
            self.proc = subprocess.Popen(self.argv, stdin=subprocess.DEVNULL, stdout=log, stderr=log,
                                         env=self.env, preexec_fn=_die_with_parent)
        finally:
            log.close()
        return self

    @property
    def pid(self):
        return self.proc.pid if self.proc is not None and self.proc.poll() is None else 0

    def running(self):
        return self.proc is not None and self.proc.poll() is None

    def signal(self, sig):
        if self.running():
            os.kill(self.proc.pid, sig)

    def stop(self, timeout_s=10.0):
        """SIGTERM, then SIGKILL after timeout_s; returns the exit status."""
        if self.proc is None:
            return None
        if self.proc.poll() is None:
            os.kill(self.proc.pid, signal.SIGCONT)
            os.kill(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(timeout_s)
            except subprocess.TimeoutExpired:
                os.kill(self.proc.pid, signal.SIGKILL)
                self.proc.wait(5)
        return self.proc.returncode

    def kill(self):
        if self.proc is not None and self.proc.poll() is None:
            os.kill(self.proc.pid, signal.SIGKILL)
            self.proc.wait(5)

    def log_tail(self, n=2000):
        try:
            with open(self.log_path, "rb") as f:
                return f.read()[-n:].decode("utf-8", "replace")
        except OSError:
            return ""


class Redis:
    """One redis-server node, without persistence, on a port it keeps across restarts."""

    def __init__(self, root, index):
        self.dir = os.path.join(root, "redis%d" % index)
        os.makedirs(self.dir)
        self.port = free_port()
        self.p = None

    def start(self):
        exe = os.environ.get("REDIS_SERVER", "redis-server")
        self.p = Process([exe, "--port", str(self.port), "--bind", "127.0.0.1", "--dir", self.dir,
                          "--daemonize", "no", "--save", "", "--appendonly", "no"],
                         os.path.join(self.dir, "redis.log")).start()
        wait_port(self.port, 10, self.p.proc, "redis-server")
        return self

    def kill(self):
        if self.p:
            self.p.kill()

    def restart(self):
        """Start again on the same port, without the data (it had none on disk)."""
        self.kill()
        self.start()

    def stop(self):
        if self.p:
            self.p.stop(5)


class Fencelockd:
    """fencelockd on a free port (--port-file), against the given nodes."""

    def __init__(self, root, nodes, extra=(), name="fencelockd"):
        self.dir = os.path.join(root, name)
        os.makedirs(self.dir, exist_ok=True)
        self.nodes, self.extra = nodes, list(extra)
        self.port = None
        self.p = None
        self.tls_ca = None

    def start(self, port=None):
        exe = os.environ.get("FLD_EXE", "fencelockd")
        port_file = os.path.join(self.dir, "port")
        if os.path.exists(port_file):
            os.unlink(port_file)
        listen = "127.0.0.1:%d" % (port or 0)
        self.p = Process([exe, "--nodes", self.nodes, "--listen", listen, "--port-file", port_file,
                          "--timeout", "150ms", "--log-level", "warn"] + self.extra,
                         os.path.join(self.dir, "fencelockd.log")).start()
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            if not self.p.running():
                raise RuntimeError("fencelockd exited at start-up: " + self.p.log_tail())
            try:
                with open(port_file) as f:
                    text = f.read().strip()
                if text:
                    self.port = int(text)
                    return self
            except (OSError, ValueError):
                pass
            time.sleep(0.01)
        raise RuntimeError("fencelockd wrote no port within 10 s: " + self.p.log_tail())

    def restart(self):
        """Stop (SIGTERM) and start again on the same port."""
        port = self.port
        self.p.stop(10)
        for _ in range(50):
            try:
                return self.start(port)
            except RuntimeError:
                time.sleep(0.1)  # the port is still in TIME_WAIT's hands, or taken
        raise RuntimeError("fencelockd did not come back on port %d" % port)

    @property
    def url(self):
        return "%s://127.0.0.1:%d" % ("https" if self.tls_ca else "http", self.port)

    def stop(self):
        if self.p:
            return self.p.stop(10)
        return None


class StorageGuard:
    def __init__(self, root, extra=(), name="storage-guard"):
        self.dir = os.path.join(root, name)
        os.makedirs(self.dir, exist_ok=True)
        self.extra = list(extra)
        self.port = None
        self.p = None
        self.tls_ca = None

    def start(self):
        exe = os.environ.get("SG_EXE", "storage-guard")
        port_file = os.path.join(self.dir, "port")
        self.p = Process([exe, "--db", os.path.join(self.dir, "records.db"), "--listen", "127.0.0.1:0",
                          "--port-file", port_file, "--log-level", "warn", "--threads", "2"] + self.extra,
                         os.path.join(self.dir, "storage-guard.log")).start()
        deadline = time.monotonic() + 15
        while time.monotonic() < deadline:
            if not self.p.running():
                raise RuntimeError("storage-guard exited at start-up: " + self.p.log_tail())
            try:
                with open(port_file) as f:
                    text = f.read().strip()
                if text:
                    self.port = int(text)
                    return self
            except (OSError, ValueError):
                pass
            time.sleep(0.01)
        raise RuntimeError("storage-guard wrote no port within 15 s")

    @property
    def url(self):
        return "%s://127.0.0.1:%d" % ("https" if self.tls_ca else "http", self.port)

    def stop(self):
        if self.p:
            return self.p.stop(10)
        return None


def http_json(url, method, path, body=None, headers=None, ca=None, timeout=10):
    """One request from the harness itself (not through a client under test)."""
    host_port = url.split("://", 1)[1]
    host, port = host_port.rsplit(":", 1)
    if url.startswith("https"):
        ctx = ssl.create_default_context(cafile=ca)
        c = http.client.HTTPSConnection(host, int(port), timeout=timeout, context=ctx)
    else:
        c = http.client.HTTPConnection(host, int(port), timeout=timeout)
    try:
        data = json.dumps(body).encode() if body is not None else None
        h = {"Content-Type": "application/json"} if data is not None else {}
        h.update(headers or {})
        c.request(method, path, body=data, headers=h)
        r = c.getresponse()
        raw = r.read()
        try:
            return r.status, json.loads(raw) if raw else None
        except ValueError:
            return r.status, raw.decode("utf-8", "replace")
    finally:
        c.close()


def make_cert(directory, cn="127.0.0.1"):
    """A throwaway self-signed certificate for 127.0.0.1 (it is its own CA)."""
    cert, key = os.path.join(directory, "cert.pem"), os.path.join(directory, "key.pem")
    subprocess.run(["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256",
                    "-nodes", "-days", "2", "-keyout", key, "-out", cert, "-subj", "/CN=" + cn,
                    "-addext", "subjectAltName=IP:127.0.0.1,DNS:localhost"],
                   check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=30)
    os.chmod(key, 0o600)
    return cert, key


class Cluster:
    """Three nodes, a fencelockd on them and a storage-guard, in one temporary directory."""

    def __init__(self, n_nodes=3, fld_extra=(), sg_extra=()):
        self.root = tempfile.mkdtemp(prefix="fencelock-clients-")
        self.redis = [Redis(self.root, i) for i in range(n_nodes)]
        self.fld_extra, self.sg_extra = list(fld_extra), list(sg_extra)
        self.fld = None
        self.sg = None

    def start(self):
        for r in self.redis:
            r.start()
        self.fld = Fencelockd(self.root, self.nodes, self.fld_extra).start()
        self.sg = StorageGuard(self.root, self.sg_extra).start()
        return self

    @property
    def nodes(self):
        return ",".join("127.0.0.1:%d" % r.port for r in self.redis)

    def close(self, keep=False):
        for s in (self.fld, self.sg):
            if s is not None:
                try:
                    s.stop()
                except Exception:
                    pass
        for r in self.redis:
            try:
                r.kill()
            except Exception:
                pass
        if not keep and not os.environ.get("CLIENTS_KEEP"):
            shutil.rmtree(self.root, ignore_errors=True)
