#!/usr/bin/env python3
"""Take a fencelock lock through fencelockd, keep it alive while working,
write to storage-guard with its fencing token, and release it: with the
fencelock package (clients/python; ``pip install ./clients/python``).

    FENCELOCKD_URL=http://127.0.0.1:7600 STORAGE_GUARD_URL=http://127.0.0.1:8080 \\
        python3 client.py invoice:42 "paid by card"

FENCELOCKD_TOKEN, if set, is sent as a bearer token (fencelockd --auth-file).
Prints one line "ok: <resource> written with token <token>" and exits 0;
exits 1 if the lock could not be taken, or was lost before the write (the
write is then refused by storage-guard anyway: the token is stale).
Run from a clone without installing, it finds the package in clients/python.
"""
import os
import sys

try:
    import fencelock
except ImportError:  # not installed: the package in this tree
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "clients", "python", "src"))
    import fencelock


def main():
    resource = sys.argv[1] if len(sys.argv) > 1 else "invoice:42"
    value = sys.argv[2] if len(sys.argv) > 2 else "written from Python"
    ttl_ms = int(os.environ.get("LOCK_TTL_MS", "2000"))
    work_s = float(os.environ.get("WORK_SECONDS", "1.5"))
    client = fencelock.Client(os.environ.get("FENCELOCKD_URL", "http://127.0.0.1:7600"),
                              token=os.environ.get("FENCELOCKD_TOKEN") or None)
    store = fencelock.StorageGuard(os.environ.get("STORAGE_GUARD_URL", "http://127.0.0.1:8080"))
    try:
        with client.lock(resource, ttl_ms=ttl_ms, wait_ms=30000) as lock:
            # The work, longer than the TTL: the keep-alive carries it, and
            # lost_event is set the moment the lock is lost.
            if lock.lost_event.wait(work_s):
                print("failed: lock lost while working")
                return 1
            store.put(resource, value, lock=lock)  # checks the lock, sends its token
            print("ok: %s written with token %d" % (resource, lock.token))
            return 0
    except fencelock.FencelockError as e:
        print("failed: %s" % e)
        return 1
    finally:
        client.close()
        store.close()


if __name__ == "__main__":
    sys.exit(main())
