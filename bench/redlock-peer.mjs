// node-redlock (npm "redlock" 5.0.0-beta.2 over ioredis) running the same
// workloads as fencelock-bench, against the same redis-server masters, and
// printing the same JSON line. One workload per process, so that waiters
// still retrying when a run ends cannot disturb the next one.
//
//   node redlock-peer.mjs --nodes host:port,... --workload w1|w2|w3|w5
//                         [--mode single|shared|threads] [--quick] [--round N]
//
// It must run from a folder whose node_modules holds redlock and ioredis
// (bench/compare.sh installs them into a temporary folder and copies this
// file there). Modes as in fencelock-bench: "shared" is one Redlock over one
// connection per node for every worker; "threads" is one Redlock (with its
// own connections) per worker, all in this one Node.js process, since Node
// runs JavaScript on one thread.
import Redis from "ioredis";
import Redlock from "redlock";

const args = process.argv.slice(2);
const opt = (name, def) => {
  const i = args.indexOf(name);
  return i >= 0 ? args[i + 1] : def;
};
const flag = (name) => args.includes(name);

const nodes = opt("--nodes", "").split(",").filter(Boolean);
const workload = opt("--workload", "w1");
const mode = opt("--mode", workload === "w1" ? "single" : "shared");
const quick = flag("--quick");
const round = Number(opt("--round", "1"));
if (nodes.length === 0) {
  console.error("usage: node redlock-peer.mjs --nodes host:port,... --workload w1|w2|w3|w5 [--mode M]");
  process.exit(2);
}

const W1_WARMUP = quick ? 50 : 200;
const W1_CYCLES = quick ? 300 : 2000;
const WARMUP_NS = BigInt(Math.round((quick ? 0.3 : 1.0) * 1e9));
const MEASURE_S = quick ? 1.0 : 5.0;
const MEASURE_NS = BigInt(Math.round(MEASURE_S * 1e9));
const TTL = 10000;

const now = () => process.hrtime.bigint(); // monotonic, ns

function pct(sorted, p) {
  if (sorted.length === 0) return 0;
  let rank = Math.ceil((p / 100) * sorted.length);
  rank = Math.min(Math.max(rank, 1), sorted.length);
  return Number(sorted[rank - 1]) / 1000;
}

function pcts(name, samples) {
  const s = BigInt64Array.from(samples).sort();
  const r = {};
  for (const p of [50, 90, 99]) r[`${name}_p${p}_us`] = Math.round(pct(s, p) * 10) / 10;
  return r;
}

// CPU per operation since the workload began (after FLUSHALL): this
// process's, and the redis-server nodes' together (INFO cpu), as
// fencelock-bench reports it. ops counts every completed operation,
// warm-up included.
let ops = 0, markSelf = 0, markServers = 0, infoClients = [];
const selfCpu = () => {
  const u = process.cpuUsage();
  return (u.user + u.system) / 1e6;
};
async function serversCpu() {
  let total = 0;
  for (const c of infoClients) {
    const info = await c.info("cpu");
    for (const k of ["used_cpu_sys", "used_cpu_user"]) {
      const m = info.match(new RegExp(`${k}:([0-9.]+)`));
      if (m) total += Number(m[1]);
    }
  }
  return total;
}

async function emit(obj) {
  const client = selfCpu() - markSelf, servers = (await serversCpu()) - markServers;
  const per = (x) => (ops > 0 ? Math.round((x / ops) * 1e7) / 10 : 0);
  console.log(JSON.stringify({ bench: "node-redlock", round, workload, mode, fencing: 0,
    client_cpu_us_per_op: per(client), servers_cpu_us_per_op: per(servers), ...obj }));
}

const allClients = [];
async function connect() {
  const cs = nodes.map((a) => {
    const [host, port] = [a.slice(0, a.lastIndexOf(":")), Number(a.slice(a.lastIndexOf(":") + 1))];
    return new Redis({ host, port, maxRetriesPerRequest: 0, enableOfflineQueue: true });
  });
  await Promise.all(cs.map((c) => new Promise((res, rej) => {
    c.once("ready", res);
    c.once("error", rej);
  })));
  allClients.push(...cs);
  return cs;
}

function redlock(clients, contention) {
  const r = new Redlock(clients, contention
    ? { driftFactor: 0.01, retryCount: -1, retryDelay: 5, retryJitter: 5, automaticExtensionThreshold: 500 }
    : { driftFactor: 0.01, retryCount: 0, retryDelay: 200, retryJitter: 100 });
  // node-redlock emits "error" for every vote against; without a listener
  // Node would throw.
  r.on("error", () => {});
  return r;
}

async function flushall() {
  const cs = await connect();
  await Promise.all(cs.map((c) => c.flushall()));
  infoClients = cs;
}

async function mark() {
  ops = 0;
  markServers = await serversCpu();
  markSelf = selfCpu();
}

async function w1() {
  const rl = redlock(await connect(), false);
  await mark();
  const acq = [], rel = [];
  let t0 = 0n;
  for (let i = 0; i < W1_WARMUP + W1_CYCLES; i++) {
    if (i === W1_WARMUP) t0 = now();
    const a = now();
    const lock = await rl.acquire([`w1:${i}`], TTL);
    const b = now();
    await rl.release(lock);
    const e = now();
    ops++;
    if (i >= W1_WARMUP) {
      acq.push(b - a);
      rel.push(e - b);
    }
  }
  const secs = Number(now() - t0) / 1e9;
  await emit({ cycles: W1_CYCLES, cycles_per_s: Math.round((W1_CYCLES / secs) * 10) / 10,
    ...pcts("acquire", acq), ...pcts("release", rel) });
}

async function w2() {
  const INFLIGHT = 64;
  const shared = mode === "shared" ? redlock(await connect(), false) : null;
  const locks = [];
  for (let i = 0; i < INFLIGHT; i++) locks.push(shared ?? redlock(await connect(), false));
  await mark();
  const warmEnd = now() + WARMUP_NS, end = warmEnd + MEASURE_NS;
  const lat = [];
  let cycles = 0, errors = 0;
  // Slot i always locks "w2:i": 64 distinct resources, one per cycle in flight.
  await Promise.all(locks.map(async (rl, slot) => {
    while (now() < end) {
      const a = now();
      try {
        const lock = await rl.acquire([`w2:${slot}`], TTL);
        await rl.release(lock);
      } catch {
        errors++;
        continue;
      }
      const e = now();
      ops++;
      if (e >= warmEnd && e < end) {
        cycles++;
        lat.push(e - a);
      }
    }
  }));
  await emit({ inflight: INFLIGHT, cycles, cycles_per_s: Math.round((cycles / MEASURE_S) * 10) / 10, errors,
    ...pcts("cycle", lat) });
}

async function w3() {
  const WORKERS = 16;
  const shared = mode === "shared" ? redlock(await connect(), true) : null;
  const locks = [];
  for (let i = 0; i < WORKERS; i++) locks.push(shared ?? redlock(await connect(), true));
  await mark();
  const warmEnd = now() + WARMUP_NS, end = warmEnd + MEASURE_NS;
  const grants = new Array(WORKERS).fill(0);
  const wait = [];
  let attempts = 0, errors = 0, lastGrant = 0n, maxGap = 0n;
  const note = (id, started, t, n) => {
    ops++;
    if (t < warmEnd || t >= end) return;
    wait.push(t - started);
    grants[id]++;
    attempts += n;
    const since = t - (lastGrant > warmEnd ? lastGrant : warmEnd);
    if (since > maxGap) maxGap = since;
    lastGrant = t;
  };
  // Workers stop starting new cycles at `end`; one still waiting then is
  // left behind (the process exits after reporting).
  const done = locks.map(async (rl, id) => {
    while (now() < end) {
      const a = now();
      let lock;
      try {
        lock = await rl.acquire(["w3"], TTL);
      } catch {
        errors++;
        continue;
      }
      note(id, a, now(), lock.attempts.length);
      try {
        await rl.release(lock);
      } catch {
        errors++;
      }
    }
  });
  await new Promise((res) => setTimeout(res, Number((end - now()) / 1000000n) + 1));
  void done;
  const tail = end - (lastGrant > warmEnd ? lastGrant : warmEnd);
  if (tail > maxGap) maxGap = tail;
  const total = grants.reduce((x, y) => x + y, 0);
  const mn = Math.min(...grants), mx = Math.max(...grants);
  await emit({ workers: WORKERS, handoffs: total, handoffs_per_s: Math.round((total / MEASURE_S) * 10) / 10,
    worker_min: mn, worker_max: mx, min_max_ratio: mx ? Math.round((mn / mx) * 1000) / 1000 : 0,
    attempts_per_grant: total ? Math.round((attempts / total) * 100) / 100 : 0,
    max_gap_ms: Math.round(Number(maxGap) / 1e5) / 10, errors, ...pcts("wait", wait) });
}

// W5: 16 processes, a Redlock each with node-redlock's default retry
// settings but retrying without limit (what a user who waits writes), one
// resource, each holding it 1 ms per grant. The children time their grants
// on the monotonic clock, which all processes of the machine share, and
// send them back; the parent counts the nodes' commands in the window.
const W5_PROCS = 16;
async function commandsTotal() {
  let total = 0;
  for (const c of infoClients) {
    const info = await c.info("commandstats");
    for (const m of info.matchAll(/:calls=([0-9]+)/g)) total += Number(m[1]);
  }
  return total - infoClients.length; // the INFO commands themselves
}

async function w5child() {
  const rl = new Redlock(await connect(), { retryCount: -1 });
  rl.on("error", () => {});
  const start = BigInt(opt("--start", "0")), end = BigInt(opt("--end", "0"));
  while (now() < start) await new Promise((r) => setTimeout(r, 1));
  while (now() < end) {
    const ask = now();
    let lock;
    try {
      lock = await rl.acquire(["w5"], TTL);
    } catch {
      continue;
    }
    const grant = now();
    while (now() < grant + 1000000n) await new Promise((r) => setImmediate(r));
    const release = now();
    try {
      await rl.release(lock);
    } catch {}
    // A line per grant, at once: a child still waiting at the end is killed.
    process.stdout.write(`${ask} ${grant} ${release}\n`);
  }
}

async function w5() {
  const { spawn } = await import("node:child_process");
  const solo = new Redlock(await connect(), { retryCount: 0 });
  solo.on("error", () => {});
  await solo.release(await solo.acquire(["w5-solo-warm"], TTL));
  const c0 = await commandsTotal();
  for (let i = 0; i < 20; i++) await solo.release(await solo.acquire(["w5-solo"], TTL));
  const soloCmds = ((await commandsTotal()) - c0) / 20;
  const start = now() + 3000000000n, warmEnd = start + WARMUP_NS, end = warmEnd + MEASURE_NS;
  const kids = [], procs = [];
  for (let p = 0; p < W5_PROCS; p++) {
    const k = spawn(process.execPath, [process.argv[1], "--nodes", nodes.join(","), "--workload", "w5",
      "--child", "--start", String(start), "--end", String(end)], { stdio: ["ignore", "pipe", "inherit"] });
    let out = "";
    k.stdout.on("data", (d) => (out += d));
    kids.push(new Promise((res) => k.on("close", () => res(out))));
    procs.push(k);
  }
  while (now() < warmEnd) await new Promise((r) => setTimeout(r, 1));
  await mark(); // CPU from here: the nodes' (the children's own is not counted)
  const cmds0 = await commandsTotal();
  while (now() < end) await new Promise((r) => setTimeout(r, 1));
  const cmds = (await commandsTotal()) - cmds0;
  // Children still waiting for the lock (node-redlock's waiters can wait a
  // whole TTL) are left behind, as in W3.
  const reaper = setTimeout(() => procs.forEach((k) => k.kill("SIGKILL")), 1000);
  const outs = await Promise.all(kids);
  clearTimeout(reaper);
  const g = [], per = new Array(W5_PROCS).fill(0);
  outs.forEach((o, p) => {
    for (const line of o.split("\n")) {
      const [ask, grant, release] = line.split(" ");
      if (release === undefined) continue;
      const gr = BigInt(grant);
      if (gr < warmEnd || gr >= end) continue;
      g.push({ grant: gr, release: BigInt(release), wait: gr - BigInt(ask), p });
      per[p]++;
    }
  });
  g.sort((a, b) => (a.grant < b.grant ? -1 : a.grant > b.grant ? 1 : 0));
  const gap = [], wait = [];
  let handoffs = 0, longest = 0n;
  for (let i = 0; i < g.length; i++) {
    if (i > 0 && g[i].p !== g[i - 1].p) {
      handoffs++;
      if (g[i].grant > g[i - 1].release) gap.push(g[i].grant - g[i - 1].release);
    }
    wait.push(g[i].wait);
    if (g[i].wait > longest) longest = g[i].wait;
  }
  const mn = Math.min(...per), mx = Math.max(...per);
  ops = g.length;
  await emit({ procs: W5_PROCS, grants: g.length, grants_per_s: Math.round((g.length / MEASURE_S) * 10) / 10,
    handoffs_per_s: Math.round((handoffs / MEASURE_S) * 10) / 10, proc_min: mn, proc_max: mx,
    min_max_ratio: mx ? Math.round((mn / mx) * 1000) / 1000 : 0,
    longest_wait_ms: Math.round(Number(longest) / 1e5) / 10,
    commands_per_grant: g.length ? Math.round((cmds / g.length) * 10) / 10 : 0,
    solo_commands_per_cycle: soloCmds, ...pcts("gap", gap), ...pcts("wait", wait) });
}

if (flag("--child")) {
  await w5child();
  for (const c of allClients) c.disconnect();
  process.exit(0);
}
await flushall();
if (workload === "w1") await w1();
else if (workload === "w2") await w2();
else if (workload === "w3") await w3();
else if (workload === "w5") await w5();
else {
  console.error(`unknown workload ${workload}`);
  process.exit(2);
}
for (const c of allClients) c.disconnect();
process.exit(0);
