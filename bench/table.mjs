// The comparison table of bench/compare.sh: medians over the rounds of the
// JSON lines written by fencelock-bench, redlock-peer.mjs and the
// redis-benchmark ceiling, as Markdown.
//
//   node bench/table.mjs results.jsonl
import { readFileSync } from "node:fs";

const lines = readFileSync(process.argv[2], "utf8").split("\n").filter(Boolean).map((l) => JSON.parse(l));
const meta = lines.find((l) => l.bench === "meta") ?? {};

const median = (xs) => {
  if (xs.length === 0) return NaN;
  const s = [...xs].sort((a, b) => a - b);
  return s.length % 2 ? s[(s.length - 1) / 2] : (s[s.length / 2 - 1] + s[s.length / 2]) / 2;
};
const values = (bench, workload, mode, fencing, field) =>
  lines.filter((l) => l.bench === bench && l.workload === workload && l.mode === mode &&
    (fencing === undefined || l.fencing === fencing)).map((l) => l[field]);
const med = (...a) => median(values(...a));
const range = (...a) => {
  const v = values(...a);
  return v.length ? [Math.min(...v), Math.max(...v)] : [NaN, NaN];
};

const fmt = (x) => {
  if (!Number.isFinite(x)) return "–";
  if (Math.abs(x) >= 1000) return Math.round(x).toString();
  if (Math.abs(x) >= 10) return x.toFixed(1);
  return x.toFixed(2);
};
const fmtR = (r) => (Number.isFinite(r) ? `${r.toFixed(2)}×` : r === Infinity ? "∞ (peer: 0)" : "–");
const cell = (bench, w, m, f, field) => {
  const [lo, hi] = range(bench, w, m, f, field);
  return `${fmt(med(bench, w, m, f, field))} <sub>${fmt(lo)}–${fmt(hi)}</sub>`;
};

// Ceiling, in cycles/s: a cycle is one SET NX and one compare-and-delete on
// each of the 5 nodes; one node measured alone does X SET NX/s and Y
// compare-and-deletes/s, so the machine's Redis capacity spread over the
// 10 commands of a cycle is 1 / (5/X + 5/Y).
const ceiling = (p) => {
  const per = lines.filter((l) => l.bench === "redis-benchmark" && l.mode === `P${p}`)
    .map((l) => 1 / (5 / l.set_nx_per_s + 5 / l.cad_per_s));
  return median(per);
};
const C1 = ceiling(1), C16 = ceiling(16);

const out = [];
const p = (s = "") => out.push(s);

p(`Medians of ${meta.rounds ?? "?"} interleaved rounds (smallest–largest in small print); ` +
  `node-redlock ${meta.redlock ?? "?"} on ioredis ${meta.ioredis ?? "?"}; fencing off unless said. ` +
  `Load average before: ${meta.load_before ?? "?"}; after: ${meta.load_after ?? "?"}.`);
p();
p("| workload | metric | fencelock | node-redlock | fencelock / node-redlock | target | met |");
p("| --- | --- | --- | --- | --- | --- | --- |");
const rows = [
  // [workload, mode, field, label, better: "low"|"high", target ratio or null]
  ["w1", "single", "acquire_p50_us", "acquire p50 µs", "low", 0.5],
  ["w1", "single", "acquire_p90_us", "acquire p90 µs", "low", null],
  ["w1", "single", "acquire_p99_us", "acquire p99 µs", "low", null],
  ["w1", "single", "release_p50_us", "release p50 µs", "low", null],
  ["w1", "single", "release_p99_us", "release p99 µs", "low", null],
  ["w1", "single", "cycles_per_s", "cycles/s", "high", 2],
  ["w2", "shared", "cycles_per_s", "shared client: cycles/s", "high", 5],
  ["w2", "shared", "cycle_p50_us", "shared client: cycle p50 µs", "low", null],
  ["w2", "shared", "cycle_p99_us", "shared client: cycle p99 µs", "low", null],
  ["w2", "threads", "cycles_per_s", "client per worker: cycles/s", "high", null],
  ["w2", "threads", "cycle_p99_us", "client per worker: cycle p99 µs", "low", null],
  ["w3", "shared", "handoffs_per_s", "shared client: handoffs/s", "high", 2],
  ["w3", "shared", "min_max_ratio", "shared client: worker min/max", "high", null],
  ["w3", "shared", "wait_p50_us", "shared client: wait p50 µs", "low", null],
  ["w3", "shared", "wait_p99_us", "shared client: wait p99 µs", "low", null],
  ["w3", "shared", "attempts_per_grant", "shared client: attempts per grant", "low", null],
  ["w3", "shared", "max_gap_ms", "shared client: longest gap without a grant, ms", "low", null],
  ["w3", "threads", "handoffs_per_s", "client per worker: handoffs/s", "high", 2],
  ["w3", "threads", "min_max_ratio", "client per worker: worker min/max", "high", null],
  ["w3", "threads", "wait_p50_us", "client per worker: wait p50 µs", "low", null],
  ["w3", "threads", "wait_p99_us", "client per worker: wait p99 µs", "low", null],
  ["w3", "threads", "attempts_per_grant", "client per worker: attempts per grant", "low", null],
  ["w3", "threads", "max_gap_ms", "client per worker: longest gap without a grant, ms", "low", null],
];
for (const [w, m, f, label, better, target] of rows) {
  const a = med("fencelock", w, m, 0, f), b = med("node-redlock", w, m, 0, f);
  const r = a / b;
  let t = "", met = "";
  if (target !== null) {
    t = better === "low" ? `≤ ${target}×` : `≥ ${target}×`;
    met = (better === "low" ? r <= target : r >= target) ? "yes" : "**no**";
  }
  p(`| ${w.toUpperCase()} | ${label} | ${cell("fencelock", w, m, 0, f)} | ${cell("node-redlock", w, m, 0, f)} | ` +
    `${fmtR(r)} | ${t} | ${met} |`);
}
// Absolute W3 targets: fairness and no stall.
for (const m of ["shared", "threads"]) {
  const r = med("fencelock", "w3", m, 0, "min_max_ratio");
  p(`| W3 | ${m === "shared" ? "shared client" : "client per worker"}: fencelock worker min/max | ` +
    `${fmt(r)} | | | ≥ 0.5 | ${r >= 0.5 ? "yes" : "**no**"} |`);
}

p();
p("Against the Redis ceiling (redis-benchmark, one node, 50 clients; a cycle = SET NX + " +
  "compare-and-delete on each of 5 nodes, so ceiling cycles/s = 1 / (5/SET + 5/CAD)):");
p();
p("| ceiling | SET NX/s | compare-and-delete/s | ceiling cycles/s |");
p("| --- | --- | --- | --- |");
for (const pp of [1, 16]) {
  p(`| pipeline ${pp} | ${cell("redis-benchmark", "ceiling", `P${pp}`, undefined, "set_nx_per_s")} | ` +
    `${cell("redis-benchmark", "ceiling", `P${pp}`, undefined, "cad_per_s")} | ${fmt(ceiling(pp))} |`);
}
p(`| one client, pipeline 1 (round trip) | ${cell("redis-benchmark", "ceiling", "rtt", undefined, "set_nx_per_s")} ` +
  `(p50 ${fmt(med("redis-benchmark", "ceiling", "rtt", undefined, "set_nx_p50_us"))} µs) | | |`);
p();
p("| workload | fencelock / ceiling | node-redlock / ceiling | target | met |");
p("| --- | --- | --- | --- | --- |");
const vsC = [
  ["w1", "single", "W1 cycles/s vs pipeline-1 ceiling", C1, null],
  ["w2", "threads", "W2 client per worker vs pipeline-1 ceiling", C1, null],
  ["w2", "shared", "W2 shared client vs pipeline-16 ceiling", C16, 0.6],
];
{
  const rtt = med("redis-benchmark", "ceiling", "rtt", undefined, "set_nx_p50_us");
  const a = med("fencelock", "w1", "single", 0, "acquire_p50_us") / rtt;
  const b = med("node-redlock", "w1", "single", 0, "acquire_p50_us") / rtt;
  p(`| W1 acquire p50 vs one node's round trip p50 (lower is better) | ${fmtR(a)} | ${fmtR(b)} | | |`);
}
for (const [w, m, label, c, target] of vsC) {
  const a = med("fencelock", w, m, 0, "cycles_per_s") / c, b = med("node-redlock", w, m, 0, "cycles_per_s") / c;
  p(`| ${label} | ${fmtR(a)} | ${fmtR(b)} | ${target ? `≥ ${target}×` : ""} | ` +
    `${target ? (a >= target ? "yes" : "**no**") : ""} |`);
}

p();
p("Fencing on against fencing off (fencelock only):");
p();
p("| workload | metric | fencing off | fencing on | on / off | target | met |");
p("| --- | --- | --- | --- | --- | --- | --- |");
const fence = [
  ["w1", "single", "acquire_p50_us", "acquire p50 µs", "low", true],
  ["w1", "single", "acquire_p99_us", "acquire p99 µs", "low", false],
  ["w1", "single", "cycles_per_s", "cycles/s", "high", true],
  ["w2", "shared", "cycles_per_s", "shared client: cycles/s", "high", true],
  ["w2", "threads", "cycles_per_s", "client per worker: cycles/s", "high", true],
  ["w3", "shared", "handoffs_per_s", "shared client: handoffs/s", "high", false],
  ["w3", "threads", "handoffs_per_s", "client per worker: handoffs/s", "high", false],
];
for (const [w, m, f, label, better, targeted] of fence) {
  const off = med("fencelock", w, m, 0, f), on = med("fencelock", w, m, 1, f);
  const r = on / off;
  const ok = better === "low" ? r <= 1.1 : r >= 0.9;
  p(`| ${w.toUpperCase()} | ${label} | ${cell("fencelock", w, m, 0, f)} | ${cell("fencelock", w, m, 1, f)} | ` +
    `${fmtR(r)} | ${targeted ? (better === "low" ? "≤ 1.10×" : "≥ 0.90×") : ""} | ` +
    `${targeted ? (ok ? "yes" : "**no**") : ""} |`);
}
p();
p("CPU per operation (cycle, handoff), µs, warm-up included: the client process, and the 5 " +
  "redis-server nodes together (INFO cpu):");
p();
p("| workload | fencelock client | fencelock servers | fencelock servers, fencing on | node-redlock client | node-redlock servers |");
p("| --- | --- | --- | --- | --- | --- |");
for (const [w, m] of [["w1", "single"], ["w2", "shared"], ["w2", "threads"], ["w3", "shared"], ["w3", "threads"]]) {
  p(`| ${w.toUpperCase()} ${m} | ${fmt(med("fencelock", w, m, 0, "client_cpu_us_per_op"))} | ` +
    `${fmt(med("fencelock", w, m, 0, "servers_cpu_us_per_op"))} | ${fmt(med("fencelock", w, m, 1, "servers_cpu_us_per_op"))} | ` +
    `${fmt(med("node-redlock", w, m, 0, "client_cpu_us_per_op"))} | ${fmt(med("node-redlock", w, m, 0, "servers_cpu_us_per_op"))} |`);
}

const w5 = lines.filter((l) => l.bench === "fencelock" && l.workload === "w5");
if (w5.length > 0) {
  p();
  p("W5: 16 processes (a client each) on one resource, holding 1 ms per grant, default options, fencing on " +
    "(node-redlock: its default retry settings with retryCount -1, no fencing). A handoff is a grant to another process than the last holder; the gap is from a " +
    "release to the next process's grant; commands are every Redis command the nodes ran (INFO " +
    "commandstats, inside scripts included), per grant, against one uncontended acquire + release:");
  p();
  p("| W5 | grants/s | handoffs/s | gap p50 µs | gap p99 µs | process min/max | wait p99 µs | longest wait ms | commands per grant | uncontended cycle |");
  p("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |");
  for (const m of ["poll", "notify", "fair"]) {
    p(`| ${m} | ${cell("fencelock", "w5", m, 1, "grants_per_s")} | ${cell("fencelock", "w5", m, 1, "handoffs_per_s")} | ` +
      `${cell("fencelock", "w5", m, 1, "gap_p50_us")} | ${cell("fencelock", "w5", m, 1, "gap_p99_us")} | ` +
      `${cell("fencelock", "w5", m, 1, "min_max_ratio")} | ${cell("fencelock", "w5", m, 1, "wait_p99_us")} | ` +
      `${cell("fencelock", "w5", m, 1, "longest_wait_ms")} | ${cell("fencelock", "w5", m, 1, "commands_per_grant")} | ` +
      `${cell("fencelock", "w5", m, 1, "solo_commands_per_cycle")} |`);
  }
  if (lines.some((l) => l.bench === "node-redlock" && l.workload === "w5")) {
    const c = (f) => cell("node-redlock", "w5", "procs", 0, f);
    p(`| node-redlock (polls) | ${c("grants_per_s")} | ${c("handoffs_per_s")} | ${c("gap_p50_us")} | ${c("gap_p99_us")} | ` +
      `${c("min_max_ratio")} | ${c("wait_p99_us")} | ${c("longest_wait_ms")} | ${c("commands_per_grant")} | ` +
      `${c("solo_commands_per_cycle")} |`);
  }
  const w1p50 = med("fencelock", "w1", "single", 1, "acquire_p50_us");
  const gapN = med("fencelock", "w5", "notify", 1, "gap_p50_us") / w1p50;
  const hoN = med("fencelock", "w5", "notify", 1, "handoffs_per_s") / med("fencelock", "w5", "poll", 1, "handoffs_per_s");
  const cmdN = med("fencelock", "w5", "notify", 1, "commands_per_grant") /
    med("fencelock", "w5", "notify", 1, "solo_commands_per_cycle");
  const fairMM = med("fencelock", "w5", "fair", 1, "min_max_ratio");
  p();
  p("| W5 target | measured | target | met |");
  p("| --- | --- | --- | --- |");
  p(`| notified gap p50 / W1 acquire p50 (fencing on) | ${fmtR(gapN)} | ≤ 2× | ${gapN <= 2 ? "yes" : "**no**"} |`);
  p(`| notified handoffs/s / polling handoffs/s | ${fmtR(hoN)} | ≥ 3× | ${hoN >= 3 ? "yes" : "**no**"} |`);
  p(`| notified commands per grant / uncontended cycle | ${fmtR(cmdN)} | ≤ 2× | ${cmdN <= 2 ? "yes" : "**no**"} |`);
  p(`| fair: process min/max | ${fmt(fairMM)} | ≥ 0.95 | ${fairMM >= 0.95 ? "yes" : "**no**"} |`);
}

const w4 = lines.filter((l) => l.bench === "fencelock" && l.workload === "w4");
if (w4.length > 0) {
  p();
  p("Fenced writes to storage-guard over HTTP (64 writers, synchronous=FULL; fencelock only):");
  p();
  p("| W4 | writes/s | write p50 µs | write p99 µs | refused | errors |");
  p("| --- | --- | --- | --- | --- | --- |");
  for (const m of ["distinct-keys", "shared-resource"]) {
    p(`| ${m} | ${cell("fencelock", "w4", m, 1, "writes_per_s")} | ${cell("fencelock", "w4", m, 1, "write_p50_us")} | ` +
      `${cell("fencelock", "w4", m, 1, "write_p99_us")} | ${fmt(med("fencelock", "w4", m, 1, "refused"))} | ` +
      `${fmt(med("fencelock", "w4", m, 1, "errors"))} |`);
  }
}
const w4pg = w4.filter((l) => l.db === "postgresql");
if (w4pg.length > 0) {
  p();
  p("W4 on PostgreSQL (storage-guard processes, and the same writes as SQL; server CPU from /proc):");
  p();
  p("| W4 | writes/s | write p50 µs | write p99 µs | server CPU µs/write | errors |");
  p("| --- | --- | --- | --- | --- | --- |");
  const modes = [...new Set(w4pg.map((l) => l.mode))];
  for (const m of modes) {
    const c = (field) => cell("fencelock", "w4", m, undefined, field);
    const md = (field) => fmt(med("fencelock", "w4", m, undefined, field));
    p(`| ${m} | ${c("writes_per_s")} | ${c("write_p50_us")} | ${c("write_p99_us")} | ${md("db_cpu_us_per_op")} | ` +
      `${md("errors")} |`);
  }
}
console.log(out.join("\n"));
