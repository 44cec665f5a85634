#!/usr/bin/env node
// Lock + release cycles/s of the Node.js client against one fencelockd, or of
// the plainest keep-alive HTTP loop in Node.js (node:http with a keep-alive
// Agent), for bench/clients-bench.py. One JSON line on stdout.
//
//   bench.mjs client|raw WORKERS SECONDS URL [PATH-OF-dist/index.js]
import * as http from 'node:http';
import { pathToFileURL } from 'node:url';

const [mode, workersS, secondsS, url, dist] = process.argv.slice(2);
const workers = Number(workersS);
const seconds = Number(secondsS);
const u = new URL(url);
let stop = false;
const counts = new Array(workers).fill(0);

const agent = new http.Agent({ keepAlive: true, maxSockets: Math.max(64, workers) });
function raw(method, path, body) {
  return new Promise((resolve, reject) => {
    const data = body ? Buffer.from(JSON.stringify(body)) : undefined;
    const req = http.request({ host: u.hostname, port: u.port, method, path, agent,
      headers: data ? { 'Content-Type': 'application/json', 'Content-Length': data.length } : {} }, (res) => {
      const chunks = [];
      res.on('data', (c) => chunks.push(c));
      res.on('end', () => resolve({ status: res.statusCode, body: JSON.parse(Buffer.concat(chunks).toString()) }));
    });
    req.on('error', reject);
    req.end(data);
  });
}

async function rawWorker(w) {
  const resource = `bench%3Anode%3A${w}`;
  while (!stop) {
    const g = await raw('POST', `/v1/locks/${resource}`, { ttl_ms: 10000 });
    if (g.status !== 200) throw new Error(`raw: ${g.status}`);
    await raw('DELETE', g.body.links.release);
    counts[w]++;
  }
}

let client;
async function clientWorker(w) {
  const resource = `bench:node:${w}`;
  while (!stop) {
    const lock = await client.lock(resource, { ttlMs: 10000 });
    await lock.release();
    counts[w]++;
  }
}

if (mode === 'client') {
  const fl = await import(dist ? pathToFileURL(dist).href : 'fencelock');
  client = new fl.Client(url, { maxSockets: Math.max(64, workers) });
}
const t0 = performance.now();
setTimeout(() => { stop = true; }, seconds * 1000);
await Promise.all(counts.map((_, w) => (mode === 'client' ? clientWorker(w) : rawWorker(w))));
const took = (performance.now() - t0) / 1000;
const cycles = counts.reduce((a, b) => a + b, 0);
console.log(JSON.stringify({ lang: 'node', mode, workers, cycles, seconds: took, per_s: cycles / took }));
client?.close();
agent.destroy();
