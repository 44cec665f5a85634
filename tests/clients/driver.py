#!/usr/bin/env python3
"""The Python driver of the client conformance suite (tests/clients/README.md):
reads one JSON command a line on stdin, runs it through the fencelock package
as installed, answers one JSON line on stdout. The same commands drive the
Node.js and Go drivers."""
import asyncio
import json
import sys
import threading
import time

import fencelock

LANG = "python"
clients = {}
stores = {}
locks = {}
out_mu = threading.Lock()


def emit(obj):
    with out_mu:
        sys.stdout.write(json.dumps(obj) + "\n")
        sys.stdout.flush()


def mono_ms():
    return time.monotonic() * 1000.0  # CLOCK_MONOTONIC, as the other drivers report


def error_json(e):
    if isinstance(e, fencelock.FencelockError):
        t = type(e).__name__
        body = e.body if isinstance(e.body, dict) else {}
        return {"type": t, "code": e.code, "status": e.status, "message": str(e),
                "holder_ref": body.get("holder_ref"), "holder_client": body.get("holder_client"),
                "last_token": body.get("last_token"), "is_locked": isinstance(e, fencelock.Locked)}
    if isinstance(e, (ValueError, TypeError)):
        return {"type": "InvalidArgument", "code": "", "status": 0, "message": str(e)}
    return {"type": "Unexpected", "code": "", "status": 0, "message": "%s: %s" % (type(e).__name__, e)}


def lock_json(h, lock):
    return {"handle": h, "lock_id": lock.lock_id, "ref": lock.ref, "token": lock.token, "resource": lock.resource,
            "resources": lock.resources, "kind": lock.kind, "acquired_mono_ms": lock.acquired_ms,
            "valid_until_mono_ms": lock.valid_until_ms}


def leader_json(h, leader):
    return {**lock_json(h, leader), "name": leader.name, "epoch": leader.epoch, "value": leader.value}


def reading_json(r):
    return {"name": r.name, "leader": r.leader, "epoch": r.epoch, "value": r.value, "ttl_ms_left": r.ttl_ms_left,
            "leader_client": r.leader_client, "leader_ref": r.leader_ref, "changed": r.changed,
            "at_mono_ms": mono_ms()}


def reading_of(j):
    """A reading the harness hands back (after=) as the client's own type."""
    if j is None:
        return None
    return fencelock.Reading({"leader": j["leader"], "epoch": j.get("epoch"), "value": j.get("value")})


def cancel_event(a):
    if "cancel_after_ms" not in a:
        return None
    cancel = threading.Event()
    threading.Timer(a["cancel_after_ms"] / 1000.0, cancel.set).start()
    return cancel


def do_campaign(a, cl=None):
    cl = cl or clients[a.get("client", "default")]
    o = {k: a[k] for k in ("ttl_ms", "wait_ms", "keepalive") if k in a}
    cancel = cancel_event(a)
    if cancel is not None:
        o["cancel"] = cancel
    return cl.campaign(a["name"], a.get("value", ""), **o)


def opts(a):
    o = {}
    for k in ("ttl_ms", "wait_ms", "wait", "keepalive"):
        if k in a:
            o[k] = a[k]
    return o


def do_acquire(a, cl=None):
    cl = cl or clients[a.get("client", "default")]
    o = opts(a)
    cancel = None
    if "cancel_after_ms" in a:
        cancel = threading.Event()
        threading.Timer(a["cancel_after_ms"] / 1000.0, cancel.set).start()
        o["cancel"] = cancel
    kind = a.get("kind", "plain")
    if kind == "leader":
        return do_campaign({**a, "name": a["resource"], "value": a.get("value", "")}, cl)
    if kind == "plain":
        return cl.lock(a["resource"], **o)
    if kind == "multi":
        return cl.lock_many(a["resources"], **o)
    if kind == "read":
        return cl.read_lock(a["resource"], **o)
    if kind == "write":
        return cl.write_lock(a["resource"], **o)
    if kind == "semaphore":
        return cl.semaphore(a["resource"], a["permits"], **o)
    if kind == "reentrant":
        return cl.reentrant(a["resource"], **o)
    raise ValueError("unknown kind %r" % kind)


def store_kw(a):
    kw = {}
    if "handle" in a:
        kw["lock"] = locks[a["handle"]]
    if "token" in a:
        kw["token"] = a["token"]
    for k in ("resource", "if_version", "if_exists"):
        if k in a:
            kw[k] = a[k]
    return kw


def contend(a):
    """Workers that take the lock in turn; each section is [granted, end] on
    CLOCK_MONOTONIC, its end the release or the validity's end, whichever first."""
    cl = clients[a.get("client", "default")]
    st = stores.get(a.get("client", "default"))
    sections, errors = [], []
    mu = threading.Lock()

    def worker(w):
        for i in range(a["iterations"]):
            try:
                lock = do_acquire({**a, "kind": a.get("kind", "plain")}, cl)
            except fencelock.Locked:  # NotElected too
                continue
            except Exception as e:  # noqa: BLE001 - reported to the harness
                with mu:
                    errors.append(error_json(e))
                continue
            granted = mono_ms()
            try:
                time.sleep(a.get("hold_ms", 10) / 1000.0)
                if a.get("write_key") and st is not None:
                    st.put(a["write_key"], "%s-%d-%d" % (LANG, w, i), lock=lock)
                end = min(mono_ms(), lock.valid_until_ms)
                valid = lock.valid()
            except Exception as e:  # noqa: BLE001
                end = min(mono_ms(), lock.valid_until_ms)
                valid = False
                with mu:
                    errors.append(error_json(e))
            finally:
                try:
                    lock.release()
                except Exception as e:  # noqa: BLE001
                    with mu:
                        errors.append(error_json(e))
            with mu:
                sections.append({"lang": LANG, "worker": w, "granted": granted, "end": end, "token": lock.token,
                                 "acquired": lock.acquired_ms, "valid_at_end": valid})

    ts = [threading.Thread(target=worker, args=(w,)) for w in range(a.get("workers", 1))]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    return {"sections": sections, "errors": errors}


async def async_roundtrip(a):
    """The asyncio client through one whole cycle, for the suite's async scenario."""
    async with fencelock.AsyncClient(a["url"], token=a.get("token"), ca_file=a.get("ca_file")) as cl:
        async with fencelock.AsyncStorageGuard(a["sg_url"], token=a.get("sg_token"),
                                               ca_file=a.get("sg_ca_file")) as st:
            async with cl.lock(a["resource"], ttl_ms=a.get("ttl_ms", 600), wait_ms=a.get("wait_ms", 0)) as lock:
                await asyncio.sleep(a.get("hold_ms", 0) / 1000.0)
                lock.check()
                w = await st.put(a["key"], "async", lock=lock)
                return {"token": lock.token, "version": w["version"], "extensions": lock.extensions,
                        "ref": lock.ref}


def run(cmd, a):
    if cmd == "hello":
        return {"lang": LANG, "version": fencelock.__version__}
    if cmd == "config":
        name = a.get("name", "default")
        if name in clients:
            clients[name].close()
        clients[name] = fencelock.Client(a["url"], token=a.get("token"), ca_file=a.get("ca_file"),
                                         timeout=a.get("timeout_ms", 10000) / 1000.0)
        if a.get("sg_url"):
            stores[name] = fencelock.StorageGuard(a["sg_url"], token=a.get("sg_token"),
                                                  ca_file=a.get("sg_ca_file"),
                                                  timeout=a.get("timeout_ms", 10000) / 1000.0)
        return {}
    if cmd == "acquire":
        t0 = mono_ms()
        lock = do_acquire(a)
        locks[a["handle"]] = lock
        return {**lock_json(a["handle"], lock), "elapsed_ms": mono_ms() - t0}
    if cmd == "campaign":
        t0 = mono_ms()
        leader = do_campaign(a)
        locks[a["handle"]] = leader
        return {**leader_json(a["handle"], leader), "elapsed_ms": mono_ms() - t0, "elected_mono_ms": mono_ms()}
    if cmd == "proclaim":
        leader = locks[a["handle"]]
        leader.proclaim(a["value"])
        return {"value": leader.value, "epoch": leader.epoch, "valid_until_mono_ms": leader.valid_until_ms}
    if cmd == "resign":
        locks[a["handle"]].resign()
        return {}
    if cmd == "leader":
        return reading_json(clients[a.get("client", "default")].leader(a["name"]))
    if cmd == "observe":
        cl = clients[a.get("client", "default")]
        return reading_json(cl.observe(a["name"], reading_of(a.get("after")), wait_ms=a.get("wait_ms", 30000)))
    if cmd == "watch":
        # Readings of client.watch, each told as an event as it comes, until
        # count of them or timeout_ms.
        cl = clients[a.get("client", "default")]
        stop = threading.Event()
        timer = threading.Timer(a.get("timeout_ms", 5000) / 1000.0, stop.set)
        timer.start()
        readings = []
        try:
            for r in cl.watch(a["name"], wait_ms=a.get("wait_ms", 30000), cancel=stop):
                readings.append(reading_json(r))
                emit({"id": a["_id"], "event": "reading", "reading": readings[-1]})
                if len(readings) >= a["count"]:
                    break
        finally:
            timer.cancel()
        return {"readings": readings, "timed_out": stop.is_set()}
    if cmd == "proclaim_id":
        return clients[a.get("client", "default")].proclaim(a["name"], a["lock_id"], a["value"],
                                                           ttl_ms=a.get("ttl_ms", 10000))
    if cmd == "resign_id":
        return clients[a.get("client", "default")].resign(a["name"], a["lock_id"])
    if cmd == "reenter":
        lock = locks[a["handle"]].reenter(**opts(a))
        locks[a["new_handle"]] = lock
        return lock_json(a["new_handle"], lock)
    if cmd == "check":
        lock = locks[a["handle"]]
        lock.check()
        return {"valid": True, "remaining_ms": lock.remaining_ms()}
    if cmd == "valid":
        lock = locks[a["handle"]]
        return {"valid": lock.valid(), "remaining_ms": lock.remaining_ms(), "extensions": lock.extensions}
    if cmd == "lost":
        lock = locks[a["handle"]]
        t0 = mono_ms()
        fired = lock.lost_event.wait(a.get("wait_ms", 0) / 1000.0)
        err = lock._lost
        return {"lost": fired, "after_ms": mono_ms() - t0, "code": err.code if err is not None else None,
                "type": type(err).__name__ if err is not None else None}
    if cmd == "extend":
        locks[a["handle"]].extend()
        return {}
    if cmd == "release":
        locks[a["handle"]].release()
        return {}
    if cmd == "status":
        s = clients[a.get("client", "default")].status(a["resource"], **{k: a[k] for k in ("kind", "permits")
                                                                           if k in a})
        held_by = {h: s.held_by(locks[h]) for h in a.get("held_by", [])}
        return {"status": dict(s), "held_by": held_by, "holder_ref": s.holder_ref,
                "holder_client": s.holder_client}
    if cmd == "release_id":
        return clients[a.get("client", "default")].release(a["resource"], a["lock_id"], kind=a.get("kind", "plain"))
    if cmd == "extend_id":
        return clients[a.get("client", "default")].extend(a["resource"], a["lock_id"], kind=a.get("kind", "plain"),
                                                          ttl_ms=a.get("ttl_ms", 10000))
    if cmd == "put":
        st = stores[a.get("client", "default")]
        kw = store_kw(a)
        if a.get("pause_after_check_ms") is not None:
            # Check the lock, say so, then wait: the harness stops this process
            # here, between the check and the write, as a GC pause would.
            lock = kw.pop("lock")
            lock.check()
            emit({"id": a["_id"], "event": "checked"})
            time.sleep(a["pause_after_check_ms"] / 1000.0)
            kw["token"] = lock.token
        return st.put(a["key"], a.get("value"), **kw)
    if cmd == "get":
        st = stores[a.get("client", "default")]
        kw = store_kw(a)
        kw.pop("if_version", None)
        if "raise_fence" in a:
            kw["raise_fence"] = a["raise_fence"]
        return {"record": st.get(a["key"], **kw)}
    if cmd == "delete":
        return {"deleted": stores[a.get("client", "default")].delete(a["key"], **store_kw(a))}
    if cmd == "batch":
        ops = []
        for op in a["ops"]:
            if op["op"] == "put":
                ops.append(fencelock.put_op(op["key"], op.get("value"), **{k: op[k] for k in ("resource", "if_version")
                                                                            if k in op}))
            elif op["op"] == "delete":
                ops.append(fencelock.delete_op(op["key"], **{k: op[k] for k in ("resource", "if_version") if k in op}))
            else:
                ops.append(fencelock.check_op(op["key"], op["version"], **{k: op[k] for k in ("resource",) if k in op}))
        kw = store_kw(a)
        return stores[a.get("client", "default")].batch(ops, **kw)
    if cmd == "fence":
        return {"last_token": stores[a.get("client", "default")].fence(a["resource"])}
    if cmd == "reset_fence":
        return stores[a.get("client", "default")].reset_fence(a["resource"], a["token"])
    if cmd == "fenced":
        lock = locks[a["handle"]]
        return {"token": lock.fenced(lambda token: token)}
    if cmd == "contend":
        return contend(a)
    if cmd == "map_error":
        e = fencelock.from_answer(a["status"], a.get("body"), "test")
        return {"type": type(e).__name__, "code": e.code}
    if cmd == "ref":
        return {"ref": fencelock.lock_ref(a["lock_id"])}
    if cmd == "async_roundtrip":
        return asyncio.run(async_roundtrip(a))
    if cmd == "validate":
        # Every public call refuses a bad argument before any I/O.
        cl = clients[a.get("client", "default")]
        fn = {"lock_empty": lambda: cl.lock(""), "lock_ttl0": lambda: cl.lock("r", ttl_ms=0),
              "lock_wait_neg": lambda: cl.lock("r", wait_ms=-1), "lock_wait_mode": lambda: cl.lock("r", wait="x"),
              "many_empty": lambda: cl.lock_many([]), "semaphore_0": lambda: cl.semaphore("r", 0),
              "release_bad_id": lambda: cl.release("r", "xyz"),
              "put_no_token": lambda: stores[a.get("client", "default")].put("k", 1),
              "resource_too_long": lambda: cl.lock("x" * 513),
              "campaign_empty_name": lambda: cl.campaign("", "v"),
              "campaign_value_too_long": lambda: cl.campaign("e", "v" * 257),
              "proclaim_bad_id": lambda: cl.proclaim("e", "xyz", "v")}[a["case"]]
        fn()
        return {}
    if cmd == "sleep":
        time.sleep(a["ms"] / 1000.0)
        return {}
    raise ValueError("unknown command %r" % cmd)


def main():
    for line in sys.stdin:
        line = line.strip()
        if not line:
            continue
        msg = json.loads(line)
        cid, cmd, a = msg.get("id"), msg["cmd"], msg.get("args") or {}
        if cmd == "quit":
            emit({"id": cid, "ok": True, "result": {}})
            break
        a["_id"] = cid
        try:
            emit({"id": cid, "ok": True, "result": run(cmd, a)})
        except Exception as e:  # noqa: BLE001 - every failure is an answer
            emit({"id": cid, "ok": False, "error": error_json(e)})
    for c in clients.values():
        c.close()


if __name__ == "__main__":
    main()
