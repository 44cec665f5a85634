#!/usr/bin/env python3
"""A client of fencelock-replay in Python, standard library only.

docs/testing.md ("The replay client protocol") is the contract. It takes
the lock with the fencelock command ($FENCELOCK, else from PATH), writes to
storage-guard with urllib, and reports each step on stdout as one JSON line
stamped with CLOCK_MONOTONIC (time.monotonic), the clock the replay reads.

    fencelock-replay --client examples/replay-clients/client.py gc-pause

With --storage postgresql://... it writes to your own table instead, the
row of --key in records (key text PRIMARY KEY, value text), guarded by
fencelock.admit() in the same transaction (fencelock.sql, see
docs/guarding-your-database.md), through psql ($PSQL, else from PATH): the
standard library has no PostgreSQL driver. It reports 200 when the write
committed and 409 when the token was stale.

Not supported: --no-validity-check (fencelock always checks), and so the
first two runs of acquire-pause; its third run stops this process while the
fencelock child it waits for goes on, which is not the story that run tells.
"""
import argparse
import json
import os
import subprocess
import sys
import time
import urllib.error
import urllib.request

FENCELOCK = os.environ.get("FENCELOCK", "fencelock")
PSQL = os.environ.get("PSQL", "psql")


def now_ms():
    return int(time.monotonic() * 1000)


def emit(**event):
    event["t"] = now_ms()
    print(json.dumps(event), flush=True)


def stop_at(args, point):
    """Wait for the replay's line at a stop; stdin closed ends the client."""
    if args.go == point and sys.stdin.readline() == "":
        sys.exit(4)


class Usage(argparse.ArgumentParser):
    def error(self, message):
        self.print_usage(sys.stderr)
        print(f"{self.prog}: {message}", file=sys.stderr)
        sys.exit(64)


def parse():
    p = Usage(prog="client.py")
    p.add_argument("--name", default="A")
    p.add_argument("--nodes", required=True)
    p.add_argument("--storage", required=True)
    p.add_argument("--resource", default="ledger")
    p.add_argument("--key", default="ledger")
    p.add_argument("--value", required=True)
    p.add_argument("--ttl", type=int, default=10000)
    p.add_argument("--wait", type=int, default=0)
    p.add_argument("--no-fencing", dest="fencing", action="store_false")
    p.add_argument("--go", choices=["before-check", "before-write"])
    return p.parse_args()


def put(args, token):
    body = {"value": args.value, "resource": args.resource}
    if args.fencing:
        body["token"] = token
    req = urllib.request.Request(
        f"http://{args.storage}/v1/records/{args.key}",
        data=json.dumps(body).encode(),
        method="PUT",
        headers={"Content-Type": "application/json"},
    )
    # Straight to loopback, never through an http_proxy from the environment.
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    try:
        with opener.open(req, timeout=60) as resp:
            return resp.status, None
    except urllib.error.HTTPError as e:
        return e.code, None
    except OSError as e:
        return 0, str(e)


def put_pg(args, token):
    """The fencing check and the write in one transaction. psql stops at
    the first error (FL409 for a stale token) and the transaction is
    rolled back. Values travel as psql variables, quoted by psql."""
    admit = "SELECT fencelock.admit(:'resource', :token) \\gset\n" if args.fencing else ""
    sql = ("BEGIN;\n" + admit +
           "INSERT INTO records (key, value) VALUES (:'key', :'value')\n"
           "    ON CONFLICT (key) DO UPDATE SET value = excluded.value;\n"
           "COMMIT;\n")
    got = subprocess.run([PSQL, "-X", "-q", "-v", "ON_ERROR_STOP=1", "-v", "VERBOSITY=sqlstate",
                          "-d", args.storage, "-v", f"resource={args.resource}", "-v", f"token={token}",
                          "-v", f"key={args.key}", "-v", f"value={args.value}"],
                         input=sql, capture_output=True, text=True)
    if got.returncode == 0:
        return 200, None
    if "FL409" in got.stderr:
        return 409, None
    return 0, got.stderr.strip()


def main():
    args = parse()
    opts = ["--nodes", args.nodes, "--ttl", f"{args.ttl}ms", "--wait", f"{args.wait}ms", "--retry-delay", "50ms"]
    if not args.fencing:
        opts.append("--no-fencing")

    got = subprocess.run([FENCELOCK, *opts, "acquire", args.resource], capture_output=True, text=True)
    if got.returncode != 0:
        sys.stderr.write(got.stderr)
        lines = got.stderr.strip().splitlines()
        emit(ev="acquire_failed", error=lines[-1] if lines else f"fencelock exited {got.returncode}")
        return 3
    lock = json.loads(got.stdout)
    # The lease as fencelock counted it, from the start of the round that
    # granted it (after any wait for another holder), on CLOCK_MONOTONIC:
    # the clock of time.monotonic.
    valid_until = lock["valid_until_mono_ms"]
    emit(ev="acquired", token=lock["token"], validity_ms=lock["validity_ms"], valid_until=valid_until,
         nodes_ok=lock["nodes_granted"], attempts=1)

    stop_at(args, "before-check")
    left = max(0, valid_until - now_ms())
    emit(ev="checked", remaining_ms=left)
    if left > 0:
        stop_at(args, "before-write")
        emit(ev="writing", value=args.value, token=lock["token"])
        to_pg = args.storage.startswith(("postgresql://", "postgres://"))
        status, error = (put_pg if to_pg else put)(args, lock["token"])
        if error:
            emit(ev="written", status=0, error=error)
        else:
            emit(ev="written", status=status)

    rel = subprocess.run([FENCELOCK, "--nodes", args.nodes, "release", args.resource, lock["lock_id"]],
                         capture_output=True, text=True)
    sys.stderr.write(rel.stderr)
    released = json.loads(rel.stdout) if rel.stdout.strip() else {}
    emit(ev="released", rc=rel.returncode, nodes_ok=released.get("nodes_released", 0))
    return 0


if __name__ == "__main__":
    sys.exit(main())
