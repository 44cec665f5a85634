#!/usr/bin/env python3
"""Take a fencelock lock through fencelockd, keep it alive while working,
write to storage-guard with its fencing token, and release it.

Python's standard library only: copy the Lock class into your program.

    FENCELOCKD_URL=http://127.0.0.1:7600 STORAGE_GUARD_URL=http://127.0.0.1:8080 \\
        python3 client.py invoice:42 "paid by card"

FENCELOCKD_TOKEN, if set, is sent as a bearer token (fencelockd --auth-file).
Prints one line "ok: <resource> written with token <token>" and exits 0;
exits 1 if the lock could not be taken, or was lost before the write (the
write is then refused by storage-guard anyway: the token is stale).
"""
import json
import os
import sys
import threading
import urllib.error
import urllib.parse
import urllib.request


def call(method, url, body=None, headers=None, token=None):
    """One HTTP request with a JSON body; returns (status, parsed JSON)."""
    data = json.dumps(body).encode() if body is not None else None
    h = {"Content-Type": "application/json"} if data is not None else {}
    if token:
        h["Authorization"] = "Bearer " + token
    h.update(headers or {})
    req = urllib.request.Request(url, data=data, method=method, headers=h)
    try:
        with urllib.request.urlopen(req, timeout=90) as r:
            return r.status, json.load(r)
    except urllib.error.HTTPError as e:
        return e.code, json.load(e)


class Lock:
    """A lock held through fencelockd, extended in the background.

    fencelockd never extends a lock for you: if this process stops calling
    (a pause, a crash), the lock runs out and the next holder's token is
    larger, so a late write with ours is refused by the resource.
    """

    def __init__(self, base, resource, ttl_ms=10000, wait_ms=30000, bearer=None):
        self.base, self.ttl_ms, self.bearer = base.rstrip("/"), ttl_ms, bearer
        path = "/v1/locks/" + urllib.parse.quote(resource, safe="")
        status, self.grant = call("POST", self.base + path,
                                  {"ttl_ms": ttl_ms, "wait_ms": wait_ms}, token=bearer)
        if status != 200:
            raise RuntimeError("not acquired: %d %s" % (status, self.grant))
        self.token = self.grant["token"]
        self.lost = threading.Event()
        self._stop = threading.Event()
        self._keeper = threading.Thread(target=self._keep_alive, daemon=True)
        self._keeper.start()

    def _keep_alive(self):
        # Extend when a third of the TTL has passed; stop on the first
        # answer that says the lock is gone.
        while not self._stop.wait(self.ttl_ms / 3000.0):
            status, _ = call("POST", self.base + self.grant["links"]["extend"],
                             {"ttl_ms": self.ttl_ms}, token=self.bearer)
            if status == 409:
                self.lost.set()
                return

    def release(self):
        self._stop.set()
        self._keeper.join()
        call("DELETE", self.base + self.grant["links"]["release"], token=self.bearer)


def main():
    resource = sys.argv[1] if len(sys.argv) > 1 else "invoice:42"
    value = sys.argv[2] if len(sys.argv) > 2 else "written from Python"
    locks = os.environ.get("FENCELOCKD_URL", "http://127.0.0.1:7600")
    store = os.environ.get("STORAGE_GUARD_URL", "http://127.0.0.1:8080").rstrip("/")
    ttl_ms = int(os.environ.get("LOCK_TTL_MS", "2000"))
    work_s = float(os.environ.get("WORK_SECONDS", "1.5"))
    try:
        lock = Lock(locks, resource, ttl_ms=ttl_ms, bearer=os.environ.get("FENCELOCKD_TOKEN"))
    except RuntimeError as e:
        print("failed: %s" % e)
        return 1
    try:
        # The work, longer than the TTL: the keep-alive carries it.
        if lock.lost.wait(work_s):
            print("failed: lock lost while working")
            return 1
        status, answer = call("PUT", store + "/v1/records/" + urllib.parse.quote(resource, safe=""),
                              {"value": value}, headers={"Fencing-Token": str(lock.token)})
        if status != 200:
            print("failed: storage-guard answered %d %s" % (status, answer))
            return 1
        print("ok: %s written with token %d" % (resource, lock.token))
        return 0
    finally:
        lock.release()


if __name__ == "__main__":
    sys.exit(main())
