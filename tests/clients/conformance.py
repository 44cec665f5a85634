#!/usr/bin/env python3
"""The client conformance suite: one set of scenarios that the Python,
Node.js and Go clients must all pass, against real redis-server nodes, a real
fencelockd and a real storage-guard (the built binaries: $FLD_EXE, $SG_EXE).

Each language has a driver (driver.py, driver.mjs, driver-go/) that reads one
JSON command a line on stdin and answers one JSON line on stdout, through
its client package as a user installs it: the harness installs each package
from the tree first (a fresh venv and pip, npm from the folder, a Go module
with a replace), offline.

    conformance.py --work DIR --lang python [--lang node ...]   # each language's scenarios
    conformance.py --work DIR --cross                           # all three at once on one resource

Prints one line per scenario (ok, FAIL or SKIP with its reason) and ends with
"N passed, N failed, N skipped". A missing prerequisite (a toolchain, a
binary) fails; the only skips are the checks of fencelockd's per-client
holder fields against a server that does not report them yet, and each says
so.
"""
import argparse
import hashlib
import json
import os
import select
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
import traceback

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, HERE)
sys.dont_write_bytecode = True  # nothing written into the source tree
import servers  # noqa: E402
from servers import http_json  # noqa: E402

LANGS = ("python", "node", "go")


class Failure(Exception):
    pass


class Skip(Exception):
    pass


def expect(cond, what, *detail):
    if not cond:
        raise Failure(what + ("" if not detail else ": " + " ".join(repr(d) for d in detail)))


def ref_of(lock_id):
    """fencelockd's holder_ref of a lock id: of its acquisition's id (the
    last six digits, the attempt's, as 0)."""
    return hashlib.sha256((lock_id[:34] + "000000").encode("ascii")).hexdigest()[:16]


def mono_ms():
    return time.monotonic() * 1000.0


# ---- installing the packages as a user would, offline ----

def run_quiet(argv, cwd=None, env=None, timeout=300):
    r = subprocess.run(argv, cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=timeout)
    if r.returncode != 0:
        raise RuntimeError("%s failed (%d):\n%s" % (" ".join(argv), r.returncode,
                                                     r.stdout.decode("utf-8", "replace")[-4000:]))
    return r.stdout.decode("utf-8", "replace")


def install(lang, work):
    """Install lang's package from the tree into work; returns the driver's argv."""
    d = os.path.join(work, lang)
    shutil.rmtree(d, ignore_errors=True)
    os.makedirs(d)
    if lang == "python":
        # A fresh venv (Debian's pip refuses system installs), the package
        # from its folder without an index: what a user does offline.
        py = shutil.which("python3") or sys.executable
        run_quiet([py, "-m", "venv", os.path.join(d, "venv")])
        vpy = os.path.join(d, "venv", "bin", "python")
        run_quiet([vpy, "-m", "pip", "install", "--quiet", "--no-index",
                   os.path.join(ROOT, "clients", "python")])
        return [vpy, os.path.join(HERE, "driver.py")]
    if lang == "node":
        for tool in ("node", "npm"):
            if shutil.which(tool) is None:
                raise RuntimeError("%s is not installed (scripts/install-deps.sh installs it)" % tool)
        with open(os.path.join(d, "package.json"), "w") as f:
            json.dump({"name": "fencelock-conformance", "private": True, "type": "module"}, f)
        run_quiet(["npm", "install", "--offline", "--no-audit", "--no-fund", "--loglevel=error",
                   os.path.join(ROOT, "clients", "node")], cwd=d)
        shutil.copy(os.path.join(HERE, "driver.mjs"), d)
        return ["node", os.path.join(d, "driver.mjs")]
    if lang == "go":
        if shutil.which("go") is None:
            raise RuntimeError("go is not installed (scripts/install-deps.sh installs golang-go)")
        env = dict(os.environ, GOFLAGS="-mod=mod", GOPROXY="off", GOCACHE=os.path.join(work, "gocache"),
                   GOPATH=os.path.join(work, "gopath"), CGO_ENABLED="0")
        exe = os.path.join(d, "driver")
        run_quiet(["go", "build", "-o", exe, "."], cwd=os.path.join(HERE, "driver-go"), env=env)
        return [exe]
    raise ValueError(lang)


# ---- a driver process ----

class Driver:
    """One driver process: commands out, answers in, each wait bounded."""

    def __init__(self, lang, argv, log_dir):
        self.lang = lang
        self.log = open(os.path.join(log_dir, "driver-%s.log" % lang), "ab")
        self.p = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self.log,
                                  preexec_fn=servers._die_with_parent)
        self.buf = b""
        self.next_id = 0
        self.pending = {}

    def send(self, cmd, **args):
        self.next_id += 1
        line = json.dumps({"id": self.next_id, "cmd": cmd, "args": args}) + "\n"
        self.p.stdin.write(line.encode())
        self.p.stdin.flush()
        return self.next_id

    def _line(self, deadline):
        while b"\n" not in self.buf:
            left = deadline - time.monotonic()
            if left <= 0:
                raise Failure("%s driver: no answer in time" % self.lang)
            r, _, _ = select.select([self.p.stdout], [], [], left)
            if not r:
                continue
            chunk = os.read(self.p.stdout.fileno(), 65536)
            if not chunk:
                raise Failure("%s driver exited (status %s)" % (self.lang, self.p.poll()))
            self.buf += chunk
        line, self.buf = self.buf.split(b"\n", 1)
        return json.loads(line)

    def wait(self, cid, timeout=20.0, event=None):
        """The answer to command cid, or its intermediate event if one is named;
        other lines are kept for their own waits."""
        deadline = time.monotonic() + timeout
        key = (cid, event)
        while key not in self.pending:
            msg = self._line(deadline)
            self.pending[(msg.get("id"), msg.get("event"))] = msg
        return self.pending.pop(key)

    def answered(self, cid):
        """Whether command cid has been answered yet (without waiting)."""
        while (cid, None) not in self.pending:
            r, _, _ = select.select([self.p.stdout], [], [], 0)
            if not r and b"\n" not in self.buf:
                return False
            msg = self._line(time.monotonic() + 1.0)
            self.pending[(msg.get("id"), msg.get("event"))] = msg
        return True

    def call(self, cmd, timeout=20.0, **args):
        """Run cmd; return its result, raise Failure if it failed."""
        msg = self.wait(self.send(cmd, **args), timeout)
        if not msg["ok"]:
            raise Failure("%s %s failed: %s" % (self.lang, cmd, msg["error"]))
        return msg["result"]

    def fails(self, cmd, want_type, timeout=20.0, **args):
        """Run cmd; it must fail with the canonical error type want_type."""
        msg = self.wait(self.send(cmd, **args), timeout)
        if msg["ok"]:
            raise Failure("%s %s: want %s, it succeeded: %s" % (self.lang, cmd, want_type, msg["result"]))
        e = msg["error"]
        if e["type"] != want_type:
            raise Failure("%s %s: want %s, got %s" % (self.lang, cmd, want_type, e))
        return e

    def stop(self):
        if self.p.poll() is None:
            try:
                os.kill(self.p.pid, signal.SIGCONT)
                self.p.stdin.write(b'{"id":0,"cmd":"quit"}\n')
                self.p.stdin.flush()
                self.p.wait(5)
            except Exception:
                self.p.kill()
                self.p.wait(5)
        self.log.close()


# ---- the harness's own lock calls (not through a client under test) ----

class Direct:
    def __init__(self, url, token=None, ca=None):
        self.url, self.token, self.ca = url, token, ca

    def h(self):
        return {"Authorization": "Bearer " + self.token} if self.token else {}

    def acquire(self, resource, **body):
        return http_json(self.url, "POST", "/v1/locks/" + servers_quote(resource), body, self.h(), self.ca, timeout=30)

    def release(self, grant):
        return http_json(self.url, "DELETE", grant["links"]["release"], None, self.h(), self.ca)


def servers_quote(s):
    import urllib.parse
    return urllib.parse.quote(s, safe="")


def after(ms, fn):
    t = threading.Timer(ms / 1000.0, fn)
    t.daemon = True
    t.start()
    return t


# ---- scenarios: each takes (env, driver); env has the cluster ----

class Env:
    def __init__(self, lang, cluster, work):
        self.lang, self.c, self.work = lang, cluster, work
        self.direct = Direct(cluster.fld.url)
        self.new_server = None
        self.tls = None
        self.argv = self.log_dir = None
        self.d2 = None

    def second(self):
        """A second driver process of the same language: another candidate."""
        if self.d2 is None or self.d2.p.poll() is not None:
            self.d2 = Driver(self.lang, self.argv, self.log_dir)
        return self.d2

    def waiters(self, name):
        """The waiters fencelockd reports for the lock of name. An election is a
        fair lock, and a fair lock's holder is counted among them while it
        holds: compare with the count under the leader alone."""
        code, st = http_json(self.c.fld.url, "GET", "/v1/locks/" + servers_quote(name))
        return st.get("waiters", 0) if code == 200 else 0

    def wait_waiters(self, name, want, what, timeout_s=3.0):
        deadline = time.monotonic() + timeout_s
        while True:
            n = self.waiters(name)
            if n == want:
                return
            expect(time.monotonic() < deadline, what, name, n, want)
            time.sleep(0.02)

    def res(self, name):
        return "%s:%s" % (self.lang, name)

    def configure(self, d, name="default", **kw):
        args = dict(url=self.c.fld.url, sg_url=self.c.sg.url, name=name, timeout_ms=5000)
        args.update(kw)
        d.call("config", **args)


def sc_basics(env, d):
    hello = d.call("hello")
    expect(hello["lang"] == env.lang, "the driver names its language", hello)
    env.configure(d)
    r = env.res("basics")
    g = d.call("acquire", handle="a", resource=r, ttl_ms=5000)
    expect(g["token"] > 0 and len(g["lock_id"]) == 40 and g["kind"] == "plain", "a plain grant", g)
    expect(g["ref"] == ref_of(g["lock_id"]), "lock.ref is the first 16 hex digits of SHA-256 of the acquisition's id", g)
    expect(g["valid_until_mono_ms"] - g["acquired_mono_ms"] <= 5000, "validity within the TTL from the send", g)
    expect(d.call("ref", lock_id="0" * 40)["ref"] == ref_of("0" * 40), "lock_ref of a fixed id")
    s = d.call("status", resource=r, held_by=["a"])
    expect(s["status"]["held"] and s["held_by"]["a"], "the status names the lock as holder", s)
    # A refusal carries the holder fields (the new server's; absent reads as null).
    code, body = env.direct.acquire(r)
    expect(code == 409 and body["error"] == "locked", "held: 409 locked", code, body)
    d.call("release", handle="a")
    d.call("release", handle="a")  # a second release does nothing
    s = d.call("status", resource=r)
    expect(not s["status"]["held"], "released: not held", s)
    e = d.fails("check", "Lost", handle="a")
    expect(e["code"] == "released", "check after release says released", e)


def sc_holder_fields(env, d):
    """fencelockd's holder_ref and holder_client (the API that lands with per-client locks)."""
    env.configure(d)
    r = env.res("holder")
    g = d.call("acquire", handle="h", resource=r, ttl_ms=5000)
    s = d.call("status", resource=r, held_by=["h"])["status"]
    if "holder_ref" not in s:
        d.call("release", handle="h")
        raise Skip("this fencelockd reports no holder_ref/holder_client yet (it reports 'holder'): "
                   "the holder-field checks need the server with per-client locks")
    expect(s["holder_ref"] == g["ref"], "status holder_ref is lock.ref", s, g)
    expect("holder_client" in s and s["holder_client"] is None, "holder_client null without an auth file", s)
    expect("holder" not in s, "no holder lock id in a status", s)
    e = d.fails("acquire", "Locked", handle="x", resource=r, client="default")
    expect(e["holder_ref"] == g["ref"], "a refusal's holder_ref is the holder's lock.ref", e)
    d.call("release", handle="h")


def sc_wait_and_cancel(env, d):
    env.configure(d)
    r = env.res("wait")
    code, g = env.direct.acquire(r, ttl_ms=5000)
    expect(code == 200, "the harness takes the lock", code, g)
    t0 = mono_ms()
    e = d.fails("acquire", "Locked", handle="w", resource=r, ttl_ms=2000, wait_ms=400)
    took = mono_ms() - t0
    expect(350 <= took < 2500, "a wait bound of 400 ms is kept", took)
    expect(e["status"] == 409 and e["code"] == "locked", "Locked is 409 locked", e)
    # Cancel a wait: the client gives up at once, the server withdraws it.
    t0 = mono_ms()
    e = d.fails("acquire", "Canceled", handle="w", resource=r, ttl_ms=2000, wait_ms=5000, cancel_after_ms=200)
    took = mono_ms() - t0
    expect(150 <= took < 1500, "a canceled wait returns at once", took)
    deadline = time.monotonic() + 3
    while True:
        code, st = http_json(env.c.fld.url, "GET", "/v1/locks/" + servers_quote(r))
        if st.get("waiters") == 0:
            break
        expect(time.monotonic() < deadline, "the canceled waiter left the queue", st)
        time.sleep(0.05)
    # A wait that the release ends, longer than the waiter's TTL: granted
    # within the bound, and valid for about its TTL from then (fencelockd
    # counts a waited grant's validity from its last attempt, not from the
    # request: the client confirms it by an extension).
    after(900, lambda: env.direct.release(g))
    t0 = mono_ms()
    w = d.call("acquire", handle="w", resource=r, ttl_ms=600, wait_ms=5000)
    took = mono_ms() - t0
    expect(850 <= took < 3000, "granted soon after the release", took)
    expect(w["token"] > g["token"], "the next holder's token is larger", w, g)
    v = d.call("valid", handle="w")
    expect(v["valid"] and v["remaining_ms"] > 300, "a grant after a wait past its TTL is valid for its TTL", v)
    d.call("release", handle="w")


def sc_kinds(env, d):
    env.configure(d)
    env.configure(d, name="b")
    a, b = env.res("ka"), env.res("kb")
    # Several resources: all or none, and a plain lock of a member is refused.
    m = d.call("acquire", handle="m", kind="multi", resources=[a, b], ttl_ms=3000)
    expect(m["kind"] == "multi" and sorted(m["resources"]) == sorted([a, b]), "a multi grant", m)
    d.fails("acquire", "Locked", client="b", handle="x", resource=b, ttl_ms=3000)
    d.call("release", handle="m")
    p = d.call("acquire", client="b", handle="p", resource=b, ttl_ms=3000)
    expect(p["token"] > m["token"], "tokens grow across kinds", p, m)
    d.call("release", handle="p")
    # Read-write: readers share, a writer waits for them, readers wait for it.
    rw = env.res("rw")
    r1 = d.call("acquire", handle="r1", kind="read", resource=rw, ttl_ms=3000)
    d.call("acquire", client="b", handle="r2", kind="read", resource=rw, ttl_ms=3000)
    expect(r1["kind"] == "read", "a read grant", r1)
    d.fails("acquire", "Locked", client="b", handle="x", kind="write", resource=rw, ttl_ms=3000)
    s = d.call("status", resource=rw, kind="rw")["status"]
    expect(s.get("readers") == 2, "two readers", s)
    d.call("release", handle="r1")
    d.call("release", handle="r2")
    wr = d.call("acquire", handle="wr", kind="write", resource=rw, ttl_ms=3000)
    d.fails("acquire", "Locked", client="b", handle="x", kind="read", resource=rw, ttl_ms=3000)
    d.call("release", handle="wr")
    r3 = d.call("acquire", handle="r3", kind="read", resource=rw, ttl_ms=3000)
    expect(r3["token"] == wr["token"], "a reader's token is the largest write token", r3, wr)
    d.call("release", handle="r3")
    # A semaphore: at most N holders, each of its own permit.
    sem = env.res("sem")
    s1 = d.call("acquire", handle="s1", kind="semaphore", resource=sem, permits=2, ttl_ms=3000)
    s2 = d.call("acquire", client="b", handle="s2", kind="semaphore", resource=sem, permits=2, ttl_ms=3000)
    expect(s1["resource"] != s2["resource"] and s1["kind"] == "permit", "two permits", s1, s2)
    d.fails("acquire", "Locked", handle="x", kind="semaphore", resource=sem, permits=2, ttl_ms=3000)
    d.call("release", handle="s1")
    s3 = d.call("acquire", handle="s3", kind="semaphore", resource=sem, permits=2, ttl_ms=3000)
    expect(s3["resource"] == s1["resource"], "the freed permit is taken", s3, s1)
    d.call("release", handle="s2")
    d.call("release", handle="s3")
    # Reentrant: more holds of one owner share its token; the last release frees it.
    re_ = env.res("re")
    o = d.call("acquire", handle="o", kind="reentrant", resource=re_, ttl_ms=3000)
    i = d.call("reenter", handle="o", new_handle="i")
    expect(i["token"] == o["token"] and i["lock_id"] != o["lock_id"], "a re-entry: same token, own id", o, i)
    d.fails("acquire", "Locked", client="b", handle="x", kind="reentrant", resource=re_, ttl_ms=3000)
    s = d.call("status", resource=re_, kind="reentrant", held_by=["o", "i"])
    expect(s["status"].get("holds") == 2 and s["held_by"]["o"] and s["held_by"]["i"], "two holds of the owner", s)
    d.call("release", handle="i")
    d.fails("acquire", "Locked", client="b", handle="x", kind="reentrant", resource=re_, ttl_ms=3000)
    d.call("release", handle="o")
    n = d.call("acquire", client="b", handle="n", kind="reentrant", resource=re_, ttl_ms=3000)
    expect(n["token"] > o["token"], "a new owner's token is larger", n, o)
    d.call("release", handle="n")


def sc_keepalive(env, d):
    env.configure(d)
    r = env.res("keep")
    d.call("acquire", handle="k", resource=r, ttl_ms=600)
    d.call("sleep", ms=1500)
    v = d.call("valid", handle="k")
    expect(v["valid"] and v["extensions"] >= 3, "kept alive past its TTL by extensions every third of it", v)
    code, _ = env.direct.acquire(r, ttl_ms=1000)
    expect(code == 409, "still held by the kept lock", code)
    d.call("release", handle="k")
    # Without a keep-alive, the lock is invalid past its validity, and says so
    # without a request.
    g = d.call("acquire", handle="n", resource=r, ttl_ms=500, keepalive=False)
    d.call("sleep", ms=max(0, int(g["valid_until_mono_ms"] - mono_ms()) + 30))
    v = d.call("valid", handle="n")
    expect(not v["valid"] and v["remaining_ms"] == 0, "not valid past its validity", v)
    e = d.fails("check", "Lost", handle="n")
    expect(e["code"] == "expired", "check: expired", e)
    lost = d.call("lost", handle="n", wait_ms=0)
    expect(lost["lost"], "the loss is signalled", lost)
    d.call("release", handle="n")


def sc_sigstop(env, d):
    env.configure(d)
    r = env.res("pause")
    key = env.res("pause-record")
    g = d.call("acquire", handle="p", resource=r, ttl_ms=800)
    # The driver checks its lock, then is stopped before its write goes out.
    cid = d.send("put", handle="p", key=key, value="late", pause_after_check_ms=400)
    d.wait(cid, 10, event="checked")
    os.kill(d.p.pid, signal.SIGSTOP)
    try:
        time.sleep(0.2)
        # Past its TTL the lock is free; the next holder writes with a larger token.
        deadline = time.monotonic() + 5
        while True:
            code, nxt = env.direct.acquire(r, ttl_ms=3000)
            if code == 200:
                break
            expect(time.monotonic() < deadline, "the stopped holder's lock runs out", code, nxt)
            time.sleep(0.05)
        expect(nxt["token"] > g["token"], "the next token is larger", nxt, g)
        code, w = http_json(env.c.sg.url, "PUT", "/v1/records/" + servers_quote(key), {"value": "next"},
                            {"Fencing-Token": str(nxt["token"])})
        expect(code == 200, "the next holder writes", code, w)
    finally:
        os.kill(d.p.pid, signal.SIGCONT)
    msg = d.wait(cid, 10)
    expect(not msg["ok"] and msg["error"]["type"] == "StaleToken", "the late write is refused as StaleToken", msg)
    expect(msg["error"]["status"] == 409 and msg["error"]["last_token"] == nxt["token"],
           "409 stale_token naming the next token", msg)
    lost = d.call("lost", handle="p", wait_ms=1000)
    expect(lost["lost"], "the woken holder's client reports the loss", lost)
    d.fails("check", "Lost", handle="p")
    code, rec = http_json(env.c.sg.url, "GET", "/v1/records/" + servers_quote(key))
    expect(rec["value"] == "next", "the record holds the next holder's write", rec)
    env.direct.release(nxt)
    # Stopped with no keep-alive at all: valid() is false the moment it wakes.
    g = d.call("acquire", handle="q", resource=r, ttl_ms=500, keepalive=False)
    os.kill(d.p.pid, signal.SIGSTOP)
    time.sleep(0.7)
    os.kill(d.p.pid, signal.SIGCONT)
    v = d.call("valid", handle="q")
    expect(not v["valid"], "not valid on waking past its validity", v)
    d.fails("check", "Lost", handle="q")
    d.call("release", handle="q")


def sc_node_down(env, d):
    env.configure(d)
    r = env.res("node")
    d.call("acquire", handle="k", resource=r, ttl_ms=900)
    env.c.redis[0].kill()
    d.call("sleep", ms=1000)
    v = d.call("valid", handle="k")
    expect(v["valid"], "kept alive on 2 of 3 nodes", v)
    code, body = env.direct.acquire(r, ttl_ms=1000)
    # Refused (409), or no majority decided (503: one node refused, one down).
    expect(code in (409, 503), "still excluded with a node down", code, body)
    env.c.redis[0].start()
    d.call("sleep", ms=700)
    v = d.call("valid", handle="k")
    expect(v["valid"], "kept alive once the node is back", v)
    d.call("release", handle="k")
    env.c.redis[0].kill()
    env.c.redis[1].kill()
    try:
        e = d.fails("acquire", "NoQuorum", handle="x", resource=r, ttl_ms=1000)
        expect(e["status"] == 503 and e["code"] == "no_quorum", "503 no_quorum", e)
    finally:
        env.c.redis[0].start()
        env.c.redis[1].start()
    deadline = time.monotonic() + 5
    while True:
        msg = d.wait(d.send("acquire", handle="y", resource=r, ttl_ms=1000), 10)
        if msg["ok"]:
            break
        expect(time.monotonic() < deadline, "locks again once the nodes are back", msg)
        time.sleep(0.1)
    d.call("release", handle="y")


def sc_restart(env, d):
    env.configure(d)
    r = env.res("restart")
    code, g = env.direct.acquire(r, ttl_ms=4000)
    expect(code == 200, "the harness holds the lock", code, g)
    t0 = mono_ms()
    cid = d.send("acquire", handle="w", resource=r, ttl_ms=2000, wait_ms=8000)
    time.sleep(0.4)
    env.c.fld.restart()  # the waiting request is answered shutting_down; the client retries
    time.sleep(0.3)
    env.direct.url = env.c.fld.url
    code, _ = env.direct.release(g)
    released = mono_ms()
    expect(code == 200, "released through the restarted fencelockd", code)
    msg = d.wait(cid, 12)
    expect(msg["ok"], "the waiting client gets the lock after the restart (it retries while its wait lasts)", msg)
    took = mono_ms() - t0
    expect(took < 8000 and mono_ms() - released < 2500, "granted soon after the release", took)
    d.call("release", handle="w")
    # While fencelockd is down, one try (no wait) fails typed.
    env.c.fld.p.stop(10)
    try:
        e = d.fails("acquire", "Unreachable", handle="x", resource=r, ttl_ms=1000)
        expect(e["status"] == 0, "no HTTP status without a server", e)
    finally:
        env.c.fld.start(env.c.fld.port)


def sc_storage(env, d):
    env.configure(d)
    r = env.res("store")
    key = env.res("rec")
    g = d.call("acquire", handle="s", resource=r, ttl_ms=5000)
    w = d.call("put", handle="s", key=key, value={"n": 1}, resource=r)
    expect(w["version"] == 1 and w["token"] == g["token"], "a fenced put", w)
    rec = d.call("get", key=key)["record"]
    expect(rec["value"] == {"n": 1} and rec["version"] == 1, "read back", rec)
    expect(d.call("get", key=env.res("none"))["record"] is None, "a missing record reads as null")
    e = d.fails("put", "VersionMismatch", handle="s", key=key, value=2, resource=r, if_version=7)
    expect(e["status"] == 412, "412 version_mismatch", e)
    d.fails("put", "VersionMismatch", handle="s", key=key, value=2, resource=r, if_version=0)
    w = d.call("put", handle="s", key=key, value=2, resource=r, if_version=1)
    expect(w["version"] == 2, "a conditional put", w)
    b = d.call("batch", handle="s", ops=[{"op": "put", "key": key + "-b", "value": 1, "resource": r},
                                         {"op": "check", "key": key, "version": 2, "resource": r}])
    expect([x["outcome"] for x in b["results"]] == ["accepted", "accepted"], "a batch", b)
    d.fails("batch", "VersionMismatch", handle="s", ops=[{"op": "check", "key": key, "version": 1, "resource": r}])
    expect(d.call("delete", handle="s", key=key + "-b", resource=r, if_version=1)["deleted"], "a conditional delete")
    expect(not d.call("delete", handle="s", key=key + "-b", resource=r)["deleted"], "deleting nothing")
    expect(d.call("fence", resource=r)["last_token"] == g["token"], "the fence is the lock's token")
    expect(d.call("fenced", handle="s")["token"] == g["token"], "fenced() hands the token to the caller's call")
    # An older token is refused for every fenced operation.
    old = g["token"] - 1
    e = d.fails("put", "StaleToken", token=old, key=key, value=3, resource=r)
    expect(e["last_token"] == g["token"], "409 names the last token", e)
    d.fails("get", "StaleToken", token=old, key=key, resource=r)
    d.fails("delete", "StaleToken", token=old, key=key, resource=r)
    d.fails("batch", "StaleToken", token=old, ops=[{"op": "put", "key": key, "value": 4, "resource": r}])
    # A reader's read never raises the fence.
    d.call("get", token=g["token"] + 5, key=key, resource=r, raise_fence=False)
    d.fails("get", "StaleToken", token=old, key=key, resource=r, raise_fence=False)
    expect(d.call("fence", resource=r)["last_token"] == g["token"], "a reader's read moved no fence")
    d.call("release", handle="s")
    # A lock no longer valid sends nothing: the check refuses first.
    d.fails("put", "Lost", handle="s", key=key, value=5, resource=r)


def sc_errors(env, d):
    env.configure(d)
    with open(os.path.join(HERE, "errors.json")) as f:
        table = json.load(f)
    wrong = []
    for row in table:
        got = d.call("map_error", status=row["status"], body={"error": row["code"], "message": "m"})
        if got["type"] != row["type"] or got["code"] != row["code"]:
            wrong.append((row, got))
    for status, body, want in ((503, None, "Busy"), (500, "<html>", "ServerError"), (418, {}, "BadRequest"),
                               (401, None, "Unauthorized"), (409, {"error": "new_code"}, "FencelockError")):
        got = d.call("map_error", status=status, body=body)
        if got["type"] != want:
            wrong.append(({"status": status, "body": body, "type": want}, got))
    expect(not wrong, "every documented code maps to its type", wrong)
    # Real answers of a real server, typed.
    e = d.fails("acquire", "BadRequest", handle="x", resource=env.res("e"), ttl_ms=3600001)
    expect(e["status"] == 400 and e["code"] == "bad_body", "400 bad_body", e)
    e = d.fails("extend_id", "Lost", resource=env.res("e"), lock_id="ab" * 20)
    expect(e["status"] == 409 and e["code"] == "lost", "409 lost for an unknown id", e)
    # A TTL the nodes cannot meet (not above the request timeout): a
    # request error, not one worth retrying.
    e = d.fails("acquire", "BadRequest", handle="x", resource=env.res("short"), ttl_ms=20)
    expect(e["status"] == 400 and e["code"] == "bad_request", "400 bad_request for a TTL under the timeout", e)
    # node_error: a node that wants a password fencelockd does not have.
    locked_node = servers.Redis(env.c.root, 9)
    locked_node.p = servers.Process(["redis-server", "--port", str(locked_node.port), "--bind", "127.0.0.1",
                                     "--dir", locked_node.dir, "--save", "", "--appendonly", "no",
                                     "--requirepass", "sesame-sesame"],
                                    os.path.join(locked_node.dir, "redis.log")).start()
    servers.wait_port(locked_node.port, 10)
    bad = servers.Fencelockd(env.c.root, "127.0.0.1:%d" % locked_node.port, name="fld-noauth").start()
    try:
        env.configure(d, name="noauth", url=bad.url)
        e = d.fails("acquire", "NodeError", client="noauth", handle="x", resource=env.res("n"), ttl_ms=1000)
        expect(e["status"] == 502 and e["code"] == "node_error", "502 node_error", e)
    finally:
        bad.stop()
        locked_node.kill()
    # A server that takes the connection and never answers: Timeout, within
    # the client's timeout.
    silent = socket.socket()
    silent.bind(("127.0.0.1", 0))
    silent.listen(8)
    try:
        env.configure(d, name="silent", url="http://127.0.0.1:%d" % silent.getsockname()[1], timeout_ms=300)
        t0 = mono_ms()
        e = d.fails("acquire", "Timeout", client="silent", handle="x", resource=env.res("t"))
        took = mono_ms() - t0
        expect(e["status"] == 0 and 250 <= took < 2000, "no answer within 300 ms: Timeout", e, took)
    finally:
        silent.close()
    # Arguments are refused before any request.
    for case in ("lock_empty", "lock_ttl0", "lock_wait_neg", "lock_wait_mode", "many_empty", "semaphore_0",
                 "release_bad_id", "put_no_token", "resource_too_long", "campaign_empty_name",
                 "campaign_value_too_long", "proclaim_bad_id"):
        d.fails("validate", "InvalidArgument", case=case)


def sc_tls_auth(env, d):
    t = env.tls
    env.configure(d, name="alice", url=t["fld"].url, ca_file=t["ca"], token=t["alice"], sg_url=t["sg"].url,
                  sg_ca_file=t["ca"], sg_token=t["sg_alice"])
    env.configure(d, name="bob", url=t["fld"].url, ca_file=t["ca"], token=t["bob"], sg_url=t["sg"].url,
                  sg_ca_file=t["ca"], sg_token=t["sg_alice"])
    env.configure(d, name="anon", url=t["fld"].url, ca_file=t["ca"], sg_url=t["sg"].url, sg_ca_file=t["ca"])
    env.configure(d, name="wrong", url=t["fld"].url, ca_file=t["ca"], token="not-a-token-of-anyone",
                  sg_url=t["sg"].url, sg_ca_file=t["ca"], sg_token="not-a-token-of-anyone")
    env.configure(d, name="noca", url=t["fld"].url, token=t["alice"], sg_url=t["sg"].url, sg_token=t["sg_alice"])
    r = env.res("tls")
    g = d.call("acquire", client="alice", handle="t", resource=r, ttl_ms=3000)
    w = d.call("put", client="alice", handle="t", key=r, value="over https")
    expect(w["token"] == g["token"], "a fenced write over HTTPS with a bearer token", w)
    e = d.fails("acquire", "Unauthorized", client="anon", handle="x", resource=r)
    expect(e["status"] == 401 and e["code"] == "unauthorized", "401 without a token", e)
    d.fails("acquire", "Unauthorized", client="wrong", handle="x", resource=r)
    d.fails("put", "Unauthorized", client="anon", token=g["token"], key=r, value=1)
    d.fails("acquire", "Unreachable", client="noca", handle="x", resource=r)
    d.fails("put", "Unreachable", client="noca", token=g["token"], key=r, value=1)
    e = d.fails("reset_fence", "Forbidden", client="alice", resource=r, token=1)
    expect(e["status"] == 403 and e["code"] == "forbidden", "403 forbidden for a fence reset by a non-admin", e)
    d.call("release", handle="t")


def sc_per_client(env, d):
    """A lock belongs to the bearer-token client that took it (the API that lands
    with per-client locks)."""
    t = env.tls
    for name, tok in (("alice", t["alice"]), ("bob", t["bob"])):
        env.configure(d, name=name, url=t["fld"].url, ca_file=t["ca"], token=tok, sg_url=t["sg"].url,
                      sg_ca_file=t["ca"], sg_token=t["sg_alice"])
    r = env.res("owned")
    g = d.call("acquire", client="alice", handle="t", resource=r, ttl_ms=3000)
    s = d.call("status", client="alice", resource=r)["status"]
    if "holder_client" not in s:
        d.call("release", handle="t")
        raise Skip("this fencelockd reports no holder_client and lets any client release any lock: the "
                   "per-client checks (holder_client, 403 for another client's lock) need the new server")
    expect(s["holder_client"] == "alice", "holder_client names the bearer-token client", s)
    e = d.fails("release_id", "Forbidden", client="bob", resource=r, lock_id=g["lock_id"])
    expect(e["status"] == 403, "403 releasing another client's lock", e)
    d.fails("extend_id", "Forbidden", client="bob", resource=r, lock_id=g["lock_id"])
    v = d.call("valid", handle="t")
    expect(v["valid"], "still held by alice", v)
    d.call("release", handle="t")


# ---- elections: a leader's epoch is its fencing token ----

def sc_election(env, d):
    """Campaign and read back; a second candidate in line elected at the first's
    resign; a proclamation keeps the epoch and an observer is told."""
    env.configure(d)
    d2 = env.second()
    env.configure(d2)
    name = env.res("elect")
    a = d.call("campaign", handle="a", name=name, value="10.0.0.7:8080", ttl_ms=4000)
    expect(a["epoch"] == a["token"] and a["epoch"] > 0 and a["kind"] == "leader", "the epoch is the token", a)
    expect(a["name"] == name and a["value"] == "10.0.0.7:8080", "the leader's name and value", a)
    expect(a["ref"] == ref_of(a["lock_id"]), "leader.ref is its id's ref", a)
    r = d2.call("leader", name=name)
    expect(r["leader"] and r["epoch"] == a["epoch"] and r["value"] == a["value"], "a reading names the leader", r)
    expect(r["leader_ref"] == a["ref"] and r["leader_client"] is None, "leader_ref, and no leader_client", r, a)
    # A second candidate waits in line; the first's resign elects it at once,
    # long before the first's TTL would have run out.
    alone = env.waiters(name)
    cid = d2.send("campaign", handle="b", name=name, value="10.0.0.8:8080", ttl_ms=4000, wait_ms=5000)
    env.wait_waiters(name, alone + 1, "the second candidate takes its place in line")
    expect(not d2.answered(cid), "the second candidate waits while the first leads")
    t0 = mono_ms()
    d.call("resign", handle="a")
    msg = d2.wait(cid, 6)
    took = mono_ms() - t0
    expect(msg["ok"], "the candidate in line is elected", msg)
    b = msg["result"]
    expect(took < 1500, "elected at the resign, long before the first's 4 s TTL", took)
    expect(b["epoch"] > a["epoch"], "the next epoch is larger", a, b)
    e = d.fails("check", "Lost", handle="a")
    expect(e["code"] == "released", "a resigned leader's check says released", e)
    # A proclamation: a new value, the same epoch, and an observer is told. The
    # value needs escapes in a query, which fencelockd decodes before it
    # compares.
    cid = d.send("watch", name=name, count=2, timeout_ms=4000, wait_ms=3000)
    first = d.wait(cid, 5, event="reading")["reading"]
    expect(first["leader"] and first["epoch"] == b["epoch"] and first["value"] == b["value"],
           "a watch starts with who leads", first, b)
    value = "10.0.0.8:9090 ready & serving"
    p = d2.call("proclaim", handle="b", value=value)
    expect(p["epoch"] == b["epoch"] and p["value"] == value, "a proclamation keeps the epoch", p, b)
    w = d.wait(cid, 5)
    expect(w["ok"] and not w["result"]["timed_out"], "the watch is told of the proclamation", w)
    nxt = w["result"]["readings"][1]
    expect(nxt["epoch"] == b["epoch"] and nxt["value"] == value and nxt["changed"], "the new value, same epoch", nxt)
    # Nothing new: an observer of the latest reading waits its bound out.
    t0 = mono_ms()
    o = d.call("observe", name=name, after=nxt, wait_ms=300)
    took = mono_ms() - t0
    expect(not o["changed"] and o["value"] == value and 250 <= took < 2000, "no change: the wait runs out", o, took)
    d2.call("resign", handle="b")
    r = d.call("leader", name=name)
    expect(not r["leader"] and r["epoch"] is None and r["leader_ref"] is None, "resigned: nobody leads", r)


def sc_election_sigstop(env, d):
    """A leader stopped (SIGSTOP) past its TTL is replaced; the new leader writes
    with its epoch; the old leader's late write is refused as stale, and its
    client reports the loss as it wakes."""
    env.configure(d)
    d2 = env.second()
    env.configure(d2)
    name, key = env.res("paused-leader"), env.res("paused-leader-record")
    a = d.call("campaign", handle="a", name=name, value="old", ttl_ms=600)
    alone = env.waiters(name)
    cid_b = d2.send("campaign", handle="b", name=name, value="new", ttl_ms=3000, wait_ms=8000)
    env.wait_waiters(name, alone + 1, "the candidate takes its place in line")
    time.sleep(0.7)
    v = d.call("valid", handle="a")
    expect(v["valid"] and v["extensions"] >= 2, "the leader is kept alive past its TTL", v)
    expect(not d2.answered(cid_b), "the candidate in line still waits", cid_b)
    cid = d.send("put", handle="a", key=key, value="late", pause_after_check_ms=400)
    d.wait(cid, 10, event="checked")
    os.kill(d.p.pid, signal.SIGSTOP)
    try:
        msg = d2.wait(cid_b, 5)
        expect(msg["ok"], "the candidate in line is elected once the stopped leader's lease runs out", msg)
        b = msg["result"]
        expect(b["epoch"] > a["epoch"], "the new epoch is larger", a, b)
        w = d2.call("put", handle="b", key=key, value="new")
        expect(w["token"] == b["epoch"], "the new leader writes with its epoch", w, b)
    finally:
        os.kill(d.p.pid, signal.SIGCONT)
    msg = d.wait(cid, 10)
    expect(not msg["ok"] and msg["error"]["type"] == "StaleToken", "the old leader's late write is refused", msg)
    expect(msg["error"]["status"] == 409 and msg["error"]["last_token"] == b["epoch"],
           "409 stale_token naming the new epoch", msg)
    lost = d.call("lost", handle="a", wait_ms=1000)
    expect(lost["lost"], "the woken leader's client reports the loss", lost)
    d.fails("check", "Lost", handle="a")
    d.fails("proclaim", "Lost", handle="a", value="still me")
    code, rec = http_json(env.c.sg.url, "GET", "/v1/records/" + servers_quote(key))
    expect(rec["value"] == "new", "the record holds the new leader's write", rec)
    # The deposed leader's resign changes nothing.
    d.call("resign", handle="a")
    r = d.call("leader", name=name)
    expect(r["leader"] and r["epoch"] == b["epoch"] and r["leader_ref"] == b["ref"], "the new leader still leads", r)
    expect(d2.call("valid", handle="b")["valid"], "and is valid")
    d2.call("resign", handle="b")


def sc_election_wait(env, d):
    """A campaign's wait bound (not_elected), and cancel of a waiting campaign."""
    env.configure(d)
    name = env.res("line")
    code, g = http_json(env.c.fld.url, "POST", "/v1/elections/" + servers_quote(name),
                        {"value": "harness", "ttl_ms": 5000})
    expect(code == 200, "the harness leads", code, g)
    alone = env.waiters(name)
    e = d.fails("campaign", "NotElected", handle="x", name=name, value="v", ttl_ms=2000)
    expect(e["status"] == 409 and e["code"] == "not_elected" and e["is_locked"], "409 not_elected, a Locked", e)
    t0 = mono_ms()
    d.fails("campaign", "NotElected", handle="x", name=name, value="v", ttl_ms=2000, wait_ms=400)
    took = mono_ms() - t0
    expect(350 <= took < 2500, "a wait bound of 400 ms is kept", took)
    env.wait_waiters(name, alone, "a candidate whose wait ran out left the line")
    t0 = mono_ms()
    d.fails("campaign", "Canceled", handle="x", name=name, value="v", ttl_ms=2000, wait_ms=5000, cancel_after_ms=200)
    took = mono_ms() - t0
    expect(150 <= took < 1500, "a canceled campaign returns at once", took)
    env.wait_waiters(name, alone, "the canceled candidate left the line")
    http_json(env.c.fld.url, "DELETE", g["links"]["resign"])


def sc_election_auth(env, d):
    """With an auth file a leader belongs to its client: another's resign,
    proclaim or extend is Forbidden; readings name the leader's client."""
    t = env.tls
    for n, tok in (("alice", t["alice"]), ("bob", t["bob"])):
        env.configure(d, name=n, url=t["fld"].url, ca_file=t["ca"], token=tok, sg_url=t["sg"].url,
                      sg_ca_file=t["ca"], sg_token=t["sg_alice"])
    name = env.res("owned-election")
    a = d.call("campaign", client="alice", handle="a", name=name, value="alice:1", ttl_ms=3000)
    r = d.call("leader", client="bob", name=name)
    expect(r["leader_client"] == "alice" and r["leader_ref"] == a["ref"], "the reading names alice's leader", r)
    e = d.fails("resign_id", "Forbidden", client="bob", name=name, lock_id=a["lock_id"])
    expect(e["status"] == 403 and e["code"] == "forbidden", "403 resigning another client's leader", e)
    d.fails("proclaim_id", "Forbidden", client="bob", name=name, lock_id=a["lock_id"], value="bob")
    d.fails("extend_id", "Forbidden", client="bob", resource=name, lock_id=a["lock_id"], kind="leader")
    d.call("proclaim_id", client="alice", name=name, lock_id=a["lock_id"], value="alice:2", ttl_ms=3000)
    r = d.call("leader", client="bob", name=name)
    expect(r["epoch"] == a["epoch"] and r["value"] == "alice:2", "alice still leads, with her own value", r)
    expect(d.call("valid", handle="a")["valid"], "alice's leader is still valid")
    d.call("resign", handle="a")


class CountingProxy:
    """A TCP proxy that counts the connections it accepts."""

    def __init__(self, target_port):
        self.target = target_port
        self.s = socket.socket()
        self.s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.s.bind(("127.0.0.1", 0))
        self.s.listen(64)
        self.port = self.s.getsockname()[1]
        self.accepted = 0
        self.closed = False
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self):
        while not self.closed:
            try:
                c, _ = self.s.accept()
            except OSError:
                return
            self.accepted += 1
            u = socket.create_connection(("127.0.0.1", self.target))
            for a, b in ((c, u), (u, c)):
                threading.Thread(target=self._pipe, args=(a, b), daemon=True).start()

    @staticmethod
    def _pipe(a, b):
        try:
            while True:
                data = a.recv(65536)
                if not data:
                    break
                b.sendall(data)
        except OSError:
            pass
        finally:
            for x in (a, b):
                try:
                    x.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass

    def close(self):
        self.closed = True
        self.s.close()


def sc_reuse(env, d):
    pf, ps = CountingProxy(env.c.fld.port), CountingProxy(env.c.sg.port)
    try:
        env.configure(d, name="proxied", url="http://127.0.0.1:%d" % pf.port, sg_url="http://127.0.0.1:%d" % ps.port)
        r = env.res("reuse")
        for i in range(20):
            d.call("acquire", client="proxied", handle="u", resource=r, ttl_ms=5000, keepalive=False)
            d.call("put", client="proxied", handle="u", key=r, value=i)
            d.call("release", handle="u")
        expect(pf.accepted <= 2, "20 lock cycles on at most 2 connections to fencelockd", pf.accepted)
        expect(ps.accepted <= 2, "20 writes on at most 2 connections to storage-guard", ps.accepted)
    finally:
        pf.close()
        ps.close()


def sc_async(env, d):
    """Python's asyncio client through a whole cycle, past its TTL."""
    r = env.res("async")
    res = d.call("async_roundtrip", url=env.c.fld.url, sg_url=env.c.sg.url, resource=r, key=r, ttl_ms=450,
                 hold_ms=700)
    expect(res["extensions"] >= 2 and res["version"] == 1, "the asyncio lock was kept alive and wrote", res)


SCENARIOS = [("basics", sc_basics), ("holder-fields", sc_holder_fields), ("wait-and-cancel", sc_wait_and_cancel),
             ("kinds", sc_kinds), ("keepalive", sc_keepalive), ("sigstop", sc_sigstop), ("storage", sc_storage),
             ("errors", sc_errors), ("tls-and-tokens", sc_tls_auth), ("per-client-locks", sc_per_client),
             ("connection-reuse", sc_reuse),
             ("election", sc_election), ("election-sigstop", sc_election_sigstop),
             ("election-wait-and-cancel", sc_election_wait), ("election-per-client", sc_election_auth),
             ("node-down", sc_node_down), ("fencelockd-restart", sc_restart)]
ONLY = {"async": ("python", sc_async)}


def tls_setup(cluster):
    d = os.path.join(cluster.root, "tls")
    os.makedirs(d)
    cert, key = servers.make_cert(d)
    tokens = {n: hashlib.sha256((n + str(time.time())).encode()).hexdigest()[:32] for n in ("alice", "bob", "sg")}
    fauth = os.path.join(d, "fld-tokens")
    with open(fauth, "w") as f:
        f.write("%s alice\n%s bob\n" % (tokens["alice"], tokens["bob"]))
    sauth = os.path.join(d, "sg-tokens")
    with open(sauth, "w") as f:
        f.write("%s alice\n%s ops admin\n" % (tokens["sg"], tokens["sg"][::-1]))
    for p in (fauth, sauth):
        os.chmod(p, 0o600)
    fld = servers.Fencelockd(cluster.root, cluster.nodes, ["--tls-cert", cert, "--tls-key", key, "--auth-file", fauth],
                             name="fld-tls")
    fld.tls_ca = cert
    fld.start()
    sg = servers.StorageGuard(cluster.root, ["--tls-cert", cert, "--tls-key", key, "--auth-file", sauth],
                              name="sg-tls")
    sg.tls_ca = cert
    sg.start()
    return {"fld": fld, "sg": sg, "ca": cert, "alice": tokens["alice"], "bob": tokens["bob"],
            "sg_alice": tokens["sg"]}


class Results:
    def __init__(self):
        self.passed = self.failed = self.skipped = 0
        self.mu = threading.Lock()

    def run(self, name, fn):
        t0 = time.monotonic()
        try:
            fn()
            with self.mu:
                self.passed += 1
            print("ok   %s (%.0f ms)" % (name, (time.monotonic() - t0) * 1000), flush=True)
        except Skip as e:
            with self.mu:
                self.skipped += 1
            print("SKIP %s: %s" % (name, e), flush=True)
        except Exception as e:  # noqa: BLE001
            with self.mu:
                self.failed += 1
            print("FAIL %s (%.0f ms): %s" % (name, (time.monotonic() - t0) * 1000, e), flush=True)
            if not isinstance(e, Failure):
                traceback.print_exc()


def run_lang(lang, work, results, only=None):
    log_dir = os.path.join(work, "logs")
    os.makedirs(log_dir, exist_ok=True)
    t0 = time.monotonic()
    argv = None

    def do_install():
        nonlocal argv
        argv = install(lang, work)

    results.run("%s/install" % lang, do_install)
    print("# %s installed in %.1f s" % (lang, time.monotonic() - t0), flush=True)
    if argv is None:
        return
    cluster = servers.Cluster().start()
    d = None
    try:
        env = Env(lang, cluster, work)
        env.argv, env.log_dir = argv, log_dir
        env.tls = tls_setup(cluster)
        d = Driver(lang, argv, log_dir)
        scen = list(SCENARIOS) + [(n, f) for n, (l, f) in ONLY.items() if l == lang]
        for name, fn in scen:
            if only and name not in only:
                continue
            results.run("%s/%s" % (lang, name), lambda: fn(env, d))
            if d.p.poll() is not None:
                results.run("%s/driver-alive" % lang, lambda: expect(False, "the driver died; see its log"))
                d = Driver(lang, argv, log_dir)
    finally:
        if d is not None:
            d.stop()
        if env.d2 is not None:
            env.d2.stop()
        if env.tls:
            env.tls["fld"].stop()
            env.tls["sg"].stop()
        cluster.close()


def run_cross(work, results, rounds=12):
    """The three clients at once, two workers each, on one resource; the sections
    they report (granted .. released or validity's end, on CLOCK_MONOTONIC) must
    not overlap, and tokens must grow with them."""
    argvs = {}
    for lang in LANGS:
        def do_install(lang=lang):
            argvs[lang] = install(lang, os.path.join(work, "cross"))
        results.run("cross/install-%s" % lang, do_install)
    if len(argvs) != len(LANGS):
        return
    cluster = servers.Cluster().start()
    drivers = []
    try:
        log_dir = os.path.join(work, "cross", "logs")
        os.makedirs(log_dir, exist_ok=True)
        drivers = [Driver(lang, argvs[lang], log_dir) for lang in LANGS]

        def exclusion():
            for d in drivers:
                d.call("config", url=cluster.fld.url, sg_url=cluster.sg.url, timeout_ms=10000)
            r, key = "cross:one", "cross:record"
            cids = [(d, d.send("contend", resource=r, iterations=rounds, workers=2, ttl_ms=2000, wait_ms=15000,
                               hold_ms=5, write_key=key)) for d in drivers]
            sections, errors = [], []
            for d, cid in cids:
                msg = d.wait(cid, 90)
                expect(msg["ok"], "%s contend" % d.lang, msg)
                sections += msg["result"]["sections"]
                errors += [(d.lang, e) for e in msg["result"]["errors"]]
            expect(not errors, "no errors under contention", errors[:5])
            expect(len(sections) == rounds * 2 * len(LANGS), "every worker held the lock each round",
                   len(sections))
            expect(all(s["valid_at_end"] for s in sections), "every section ended within its validity")
            sections.sort(key=lambda s: s["granted"])
            for a, b in zip(sections, sections[1:]):
                expect(a["end"] <= b["granted"], "no two holders at once", a, b)
                expect(a["token"] < b["token"], "tokens grow with the holders", a, b)
            langs = {s["lang"] for s in sections}
            expect(langs == set(LANGS), "all three languages held it", langs)
            code, log = http_json(cluster.sg.url, "GET", "/v1/log?key=" + servers_quote(key) + "&limit=1000")
            outcomes = [e["outcome"] for e in log["entries"]]
            expect(outcomes.count("accepted") == len(sections) and "stale" not in outcomes,
                   "storage-guard admitted every holder's write, none stale", outcomes.count("accepted"))
            print("# cross: %d sections by %s, tokens %d..%d" % (len(sections), ",".join(sorted(langs)),
                                                               sections[0]["token"], sections[-1]["token"]))

        results.run("cross/exclusion", exclusion)

        def election():
            # Candidates of the three languages, two each, campaign on one
            # election, lead for a moment (writing with their epoch) and
            # resign, round after round: the beliefs must not overlap, and the
            # epochs must grow with the order of election.
            name, key = "cross:election", "cross:election-record"
            cids = [(d, d.send("contend", kind="leader", resource=name, value=d.lang, iterations=rounds // 2,
                               workers=2, ttl_ms=2000, wait_ms=15000, hold_ms=5, write_key=key)) for d in drivers]
            sections, errors = [], []
            for d, cid in cids:
                msg = d.wait(cid, 90)
                expect(msg["ok"], "%s candidates" % d.lang, msg)
                sections += msg["result"]["sections"]
                errors += [(d.lang, e) for e in msg["result"]["errors"]]
            expect(not errors, "no errors among the candidates", errors[:5])
            expect(len(sections) == (rounds // 2) * 2 * len(LANGS), "every candidate was elected each round",
                   len(sections))
            expect(all(s["valid_at_end"] for s in sections), "every leader resigned within its validity")
            sections.sort(key=lambda s: s["granted"])
            for a, b in zip(sections, sections[1:]):
                expect(a["end"] <= b["granted"], "no two leaders believed they led at once", a, b)
                expect(a["token"] < b["token"], "epochs grow with the order of election", a, b)
            langs = {s["lang"] for s in sections}
            expect(langs == set(LANGS), "candidates of all three languages led", langs)
            code, log = http_json(cluster.sg.url, "GET", "/v1/log?key=" + servers_quote(key) + "&limit=1000")
            outcomes = [e["outcome"] for e in log["entries"]]
            expect(outcomes.count("accepted") == len(sections) and "stale" not in outcomes,
                   "storage-guard admitted every leader's write with its epoch, none stale", outcomes.count("accepted"))
            print("# cross: %d terms by %s, epochs %d..%d" % (len(sections), ",".join(sorted(langs)),
                                                            sections[0]["token"], sections[-1]["token"]))

        results.run("cross/election", election)
    finally:
        for d in drivers:
            d.stop()
        cluster.close()


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--work", required=True, help="a directory for the installs and logs")
    ap.add_argument("--lang", action="append", choices=LANGS, default=[])
    ap.add_argument("--cross", action="store_true")
    ap.add_argument("--only", action="append", help="run only these scenarios")
    args = ap.parse_args()
    for var in ("FLD_EXE", "SG_EXE"):
        if not os.environ.get(var) or not os.access(os.environ[var], os.X_OK):
            print("FAIL setup: $%s must name the built binary" % var)
            print("0 passed, 1 failed")
            return 1
    for tool in ("redis-server", "openssl"):
        if shutil.which(tool) is None:
            print("FAIL setup: %s is not installed (scripts/install-deps.sh)" % tool)
            print("0 passed, 1 failed")
            return 1
    os.makedirs(args.work, exist_ok=True)
    results = Results()
    t0 = time.monotonic()
    for lang in args.lang:
        run_lang(lang, os.path.join(args.work, lang), results, args.only)
    if args.cross:
        run_cross(args.work, results)
    print("# %.1f s" % (time.monotonic() - t0))
    print("%d passed, %d failed, %d skipped" % (results.passed, results.failed, results.skipped))
    return 1 if results.failed else 0


if __name__ == "__main__":
    sys.exit(main())
