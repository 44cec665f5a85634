// node-redlock (npm "redlock" 5.0.0-beta.2 over ioredis) running the same
// workloads as fencelock-bench, against the same redis-server masters, and
// printing the same JSON line. One workload per process, so that waiters
// still retrying when a run ends cannot disturb the next one.
//
//   node redlock-peer.mjs --nodes host:port,... --workload w1|w2|w3
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
  console.error("usage: node redlock-peer.mjs --nodes host:port,... --workload w1|w2|w3 [--mode M]");
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

await flushall();
if (workload === "w1") await w1();
else if (workload === "w2") await w2();
else if (workload === "w3") await w3();
else {
  console.error(`unknown workload ${workload}`);
  process.exit(2);
}
for (const c of allClients) c.disconnect();
process.exit(0);
