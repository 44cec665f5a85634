#!/usr/bin/env python3
"""What each client package costs over the plainest keep-alive HTTP loop in
its language: lock + release cycles/s against one fencelockd (three
redis-server nodes), with 1 and 64 concurrent workers, each worker on a
resource of its own (the cost of the client, not of contention). Rounds are
interleaved (client and plain loop alternate, language by language), so a
slow spell of the machine hits both.

    python3 bench/clients-bench.py [--rounds 3] [--seconds 3] [--out results.jsonl]

Needs a build (FLD_EXE, default build/fencelockd/fencelockd), node and go.
Prints one JSON line per run and a table of medians and ratios; it measures,
it checks nothing.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, os.path.join(ROOT, "tests", "clients"))
sys.dont_write_bytecode = True
import servers  # noqa: E402


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--seconds", type=float, default=3.0)
    ap.add_argument("--workers", default="1,64")
    ap.add_argument("--langs", default="python,node,go")
    ap.add_argument("--out")
    a = ap.parse_args()
    os.environ.setdefault("FLD_EXE", os.path.join(ROOT, "build", "fencelockd", "fencelockd"))
    os.environ.setdefault("SG_EXE", os.path.join(ROOT, "build", "storage-guard", "storage-guard"))
    gobin = os.path.join(ROOT, "build", "bench-clients-go")
    subprocess.run(["go", "build", "-o", gobin, "."], cwd=os.path.join(HERE, "clients", "go"), check=True,
                   env=dict(os.environ, GOFLAGS="-mod=mod", GOPROXY="off", CGO_ENABLED="0"))
    cmd = {
        "python": lambda m, w, url: [sys.executable, os.path.join(HERE, "clients", "bench.py"), m, str(w), str(a.seconds),
                                     url, os.path.join(ROOT, "clients", "python", "src")],
        "node": lambda m, w, url: ["node", os.path.join(HERE, "clients", "bench.mjs"), m, str(w), str(a.seconds), url,
                                   os.path.join(ROOT, "clients", "node", "dist", "index.js")],
        "go": lambda m, w, url: [gobin, m, str(w), str(a.seconds), url],
    }
    c = servers.Cluster()
    for r in c.redis:
        r.start()
    # --max-clients is not in play: every cycle uses the default options.
    c.fld = servers.Fencelockd(c.root, c.nodes, ["--log-level", "error"]).start()
    results = []
    out = open(a.out, "a") if a.out else None
    try:
        for rnd in range(a.rounds):
            for lang in a.langs.split(","):
                for w in [int(x) for x in a.workers.split(",")]:
                    modes = ("raw", "client") if rnd % 2 == 0 else ("client", "raw")
                    for m in modes:
                        p = subprocess.run(cmd[lang](m, w, c.fld.url), stdout=subprocess.PIPE, check=True, timeout=120)
                        r = json.loads(p.stdout.decode().strip().splitlines()[-1])
                        r["round"] = rnd
                        results.append(r)
                        line = json.dumps(r)
                        print(line, flush=True)
                        if out:
                            out.write(line + "\n")
    finally:
        if out:
            out.close()
        c.close()
    print()
    print("| language | workers | plain loop (cycles/s) | client (cycles/s) | client / plain | client's cost |")
    print("| --- | --- | --- | --- | --- | --- |")
    for lang in a.langs.split(","):
        for w in [int(x) for x in a.workers.split(",")]:
            raw = statistics.median(r["per_s"] for r in results if r["lang"] == lang and r["workers"] == w and r["mode"] == "raw")
            cl = statistics.median(r["per_s"] for r in results if r["lang"] == lang and r["workers"] == w and r["mode"] == "client")
            print("| %s | %d | %.0f | %.0f | %.3f | %+.1f %% |" % (lang, w, raw, cl, cl / raw, (raw / cl - 1) * 100))


if __name__ == "__main__":
    main()
