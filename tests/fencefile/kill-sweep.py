#!/usr/bin/env python3
"""kill -9 before every system call a fenced write makes (strace's fault
injection), for replace and append, xattr, sidecar and directory fences, a
0600 file, and appends below and above the 64 KiB kept in memory. After
each kill: the file holds whole writes (an append may end in a cut one),
none above the fence, the fence is not below the last acknowledged write,
no temporary file left is more open than the file, and the fence is still
readable. Not part of the test suite (it runs for minutes and needs strace):
    python3 tests/fencefile/kill-sweep.py build/tools/fencelock
The temporary directories go to $SWEEP_DIR (default: TMPDIR), which must
keep user xattrs. Exit 1 on a violation."""
import os, re, subprocess, sys, tempfile, json, stat

FL = sys.argv[1]
SYSCALLS = ["openat", "newfstatat", "read", "write", "pread64", "pwrite64", "fdatasync", "fsync", "fcntl",
            "fsetxattr", "fgetxattr", "flistxattr", "fchown", "fchmod", "linkat", "renameat", "unlinkat",
            "close", "lseek", "access", "readlink"]
bad = 0

def rec(token, size):
    head = b"T%020d\n" % token
    body = bytes((token + i) % 26 + 97 for i in range(size - len(head) - 1)) + b"\n"
    return head + body

def fence(path, args):
    r = subprocess.run([FL, "fence"] + args + [path], capture_output=True)
    if r.returncode != 0:
        return None, r.stderr.decode().strip()
    return json.loads(r.stdout)["token"], ""

def run(args, data, inject=None):
    cmd = [FL] + args
    if inject:
        s, n = inject
        cmd = ["strace", "-o", "/dev/null", "-e", "trace=" + s, "-e", "inject=%s:signal=KILL:when=%d" % (s, n)] + cmd
    r = subprocess.run(cmd, input=data, capture_output=True)
    return r.returncode

def counts(args, data):
    out = tempfile.mktemp()
    subprocess.run(["strace", "-c", "-o", out] + [FL] + args, input=data, capture_output=True)
    c = {}
    for line in open(out):
        m = re.match(r"\s*[\d.]+\s+[\d.]+\s+\d+\s+(\d+)\s+(?:\d+\s+)?(\w+)$", line)
        if m:
            c[m.group(2)] = int(m.group(1))
    os.unlink(out)
    return c

def check(d, path, args, append, size, acked, what):
    global bad
    data = open(path, "rb").read() if os.path.exists(path) else b""
    f, err = fence(path, args)
    if f is None:
        print("%s: fence unreadable: %s" % (what, err)); bad = 1; return
    toks = []
    if append:
        # Records follow each other; one killed mid-append may be cut short
        # (the docs allow it), so a record is a prefix of a whole one, and
        # only a cut one may be followed by another record's header.
        starts = [m.start() for m in re.finditer(rb"T\d{20}\n", data)]
        if data and (not starts or starts[0] != 0):
            print("%s: the file does not start with a record" % what); bad = 1; return
        for i, st_ in enumerate(starts):
            chunk = data[st_:(starts[i + 1] if i + 1 < len(starts) else len(data))]
            t = int(chunk[1:21])
            if not rec(t, size).startswith(chunk):
                print("%s: record %d is not a prefix of a whole one" % (what, i)); bad = 1; return
            toks.append(t)
        if toks != sorted(toks):
            print("%s: tokens go down: %s" % (what, toks)); bad = 1
    elif data:
        t = int(data[1:21])
        if data != rec(t, size):
            print("%s: not one whole write (%d bytes)" % (what, len(data))); bad = 1; return
        toks.append(t)
    top = max(toks) if toks else 0
    if top > f:
        print("%s: content token %d above the fence %d" % (what, top, f)); bad = 1
    if f < acked:
        print("%s: fence %d below the acknowledged %d" % (what, f, acked)); bad = 1
    # A temporary file left behind is no more open than the file itself.
    fmode = os.stat(path).st_mode & 0o777 if os.path.exists(path) else 0o600
    for n in os.listdir(os.path.dirname(path)):
        st = os.lstat(os.path.join(os.path.dirname(path), n))
        if stat.S_ISREG(st.st_mode) and n.endswith(".fencetmp") and st.st_mode & 0o777 & ~fmode:
            print("%s: temporary %s is %o, the file %o" % (what, n, st.st_mode & 0o777, fmode)); bad = 1
    return f

modes = [("write private", ["write"], False, 200000, "private"),
         ("write xattr", ["write"], False, 200000, None),
         ("write sidecar", ["write", "--sidecar"], False, 200000, None),
         ("write dir", ["write"], False, 200000, "dir"),
         ("append xattr small", ["append"], True, 4000, None),
         ("append xattr large", ["append"], True, 150000, None),
         ("append sidecar", ["append", "--sidecar"], True, 4000, None),
         ("append dir large", ["append"], True, 150000, "dir")]
kills = 0
for name, base, append, size, dirf in modes:
    d = tempfile.mkdtemp(dir=os.environ.get("SWEEP_DIR"))
    os.chmod(d, 0o755)
    path = os.path.join(d, "sub", "f") if dirf == "dir" else os.path.join(d, "f")
    if dirf == "dir":
        os.mkdir(os.path.join(d, "sub"))
    fargs = ["--dir", d] if dirf == "dir" else []
    args = base + fargs
    token = 1
    assert run(args + ["--token", "1", path], rec(1, size)) == 0
    if dirf == "private":
        os.chmod(path, 0o600)
    acked = 1
    c = counts(args + ["--token", "2", path], rec(2, size))
    token = 2
    acked = 2
    for s in SYSCALLS:
        for n in range(1, c.get(s, 0) + 1):
            token += 1
            rc = run(args + ["--token", str(token), path], rec(token, size), (s, n))
            kills += rc != 0
            if rc == 0:
                acked = token
            check(d, path, fargs, append, size, acked, "%s, kill before %s #%d" % (name, s, n))
            # a stray temporary file is deleted, as the docs say, when no write runs
            for fn in os.listdir(os.path.dirname(path)):
                if fn.endswith(".fencetmp"):
                    os.unlink(os.path.join(os.path.dirname(path), fn))
    print("%-20s %d kill points checked" % (name, sum(c.get(s, 0) for s in SYSCALLS)))
    subprocess.run(["rm", "-rf", d])
print("%d runs killed; %s" % (kills, "VIOLATIONS" if bad else "no violation"))
sys.exit(bad)
