#!/usr/bin/env python3
"""Lock + release cycles/s of the Python client against one fencelockd, or of
the plainest keep-alive HTTP loop in Python (http.client, one connection per
worker thread), for bench/clients-bench.py. One JSON line on stdout.

    bench.py client|raw WORKERS SECONDS URL
"""
import http.client
import json
import sys
import threading
import time


def raw_worker(host, port, resource, stop, counts, w):
    c = http.client.HTTPConnection(host, port, timeout=10)
    body = json.dumps({"ttl_ms": 10000}).encode()
    h = {"Content-Type": "application/json"}
    n = 0
    while not stop.is_set():
        c.request("POST", "/v1/locks/" + resource, body=body, headers=h)
        r = c.getresponse()
        g = json.loads(r.read())
        if r.status != 200:
            raise SystemExit("raw: %d %s" % (r.status, g))
        c.request("DELETE", g["links"]["release"])
        r = c.getresponse()
        r.read()
        n += 1
    counts[w] = n


def client_worker(client, resource, stop, counts, w):
    n = 0
    while not stop.is_set():
        with client.lock(resource, ttl_ms=10000):
            pass
        n += 1
    counts[w] = n


def main():
    mode, workers, seconds, url = sys.argv[1], int(sys.argv[2]), float(sys.argv[3]), sys.argv[4]
    host, port = url.split("://", 1)[1].rsplit(":", 1)
    stop = threading.Event()
    counts = [0] * workers
    if mode == "client":
        sys.path.insert(0, sys.argv[5]) if len(sys.argv) > 5 else None
        import fencelock
        client = fencelock.Client(url, pool_size=max(64, workers))
        targets = [(client_worker, (client, "bench%3Apy%3A" + str(w), stop, counts, w)) for w in range(workers)]
    else:
        targets = [(raw_worker, (host, int(port), "bench%3Apy%3A" + str(w), stop, counts, w)) for w in range(workers)]
    ts = [threading.Thread(target=f, args=a) for f, a in targets]
    t0 = time.monotonic()
    for t in ts:
        t.start()
    time.sleep(seconds)
    stop.set()
    for t in ts:
        t.join()
    took = time.monotonic() - t0
    print(json.dumps({"lang": "python", "mode": mode, "workers": workers, "cycles": sum(counts), "seconds": took,
                      "per_s": sum(counts) / took}))


if __name__ == "__main__":
    main()
