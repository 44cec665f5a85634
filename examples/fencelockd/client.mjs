#!/usr/bin/env node
// Take a fencelock lock through fencelockd, keep it alive while working,
// write to storage-guard with its fencing token, and release it.
//
// Node.js 18 or later, built-in fetch only: copy the Lock class into your
// program.
//
//   FENCELOCKD_URL=http://127.0.0.1:7600 STORAGE_GUARD_URL=http://127.0.0.1:8080 \
//     node client.mjs invoice:42 "paid by card"
//
// FENCELOCKD_TOKEN, if set, is sent as a bearer token (fencelockd --auth-file).
// Prints one line "ok: <resource> written with token <token>" and exits 0;
// exits 1 if the lock could not be taken, or was lost before the write.

async function call(method, url, body, headers = {}, bearer) {
  const h = { ...headers };
  if (body !== undefined) h['Content-Type'] = 'application/json';
  if (bearer) h.Authorization = `Bearer ${bearer}`;
  const r = await fetch(url, { method, headers: h, body: body === undefined ? undefined : JSON.stringify(body) });
  return { status: r.status, json: await r.json() };
}

// A lock held through fencelockd, extended in the background. fencelockd
// never extends a lock for you: if this process stops calling (a pause, a
// crash), the lock runs out and a late write with its token is refused.
class Lock {
  static async acquire(base, resource, { ttlMs = 10000, waitMs = 30000, bearer } = {}) {
    const lock = new Lock();
    lock.base = base.replace(/\/$/, '');
    lock.ttlMs = ttlMs;
    lock.bearer = bearer;
    lock.lost = false;
    const r = await call('POST', `${lock.base}/v1/locks/${encodeURIComponent(resource)}`,
      { ttl_ms: ttlMs, wait_ms: waitMs }, {}, bearer);
    if (r.status !== 200) throw new Error(`not acquired: ${r.status} ${JSON.stringify(r.json)}`);
    lock.grant = r.json;
    lock.token = r.json.token;
    lock.timer = setInterval(() => lock.extend(), ttlMs / 3);
    return lock;
  }

  async extend() {
    const r = await call('POST', this.base + this.grant.links.extend, { ttl_ms: this.ttlMs }, {}, this.bearer);
    if (r.status === 409) {
      this.lost = true;
      clearInterval(this.timer);
    }
  }

  async release() {
    clearInterval(this.timer);
    await call('DELETE', this.base + this.grant.links.release, undefined, {}, this.bearer);
  }
}

const resource = process.argv[2] ?? 'invoice:42';
const value = process.argv[3] ?? 'written from Node.js';
const locks = process.env.FENCELOCKD_URL ?? 'http://127.0.0.1:7600';
const store = (process.env.STORAGE_GUARD_URL ?? 'http://127.0.0.1:8080').replace(/\/$/, '');
const ttlMs = Number(process.env.LOCK_TTL_MS ?? 2000);
const workMs = Number(process.env.WORK_SECONDS ?? 1.5) * 1000;

let lock;
try {
  lock = await Lock.acquire(locks, resource, { ttlMs, bearer: process.env.FENCELOCKD_TOKEN });
} catch (e) {
  console.log(`failed: ${e.message}`);
  process.exit(1);
}
let code = 0;
try {
  // The work, longer than the TTL: the keep-alive carries it.
  await new Promise((resolve) => setTimeout(resolve, workMs));
  if (lock.lost) throw new Error('lock lost while working');
  const r = await call('PUT', `${store}/v1/records/${encodeURIComponent(resource)}`, { value },
    { 'Fencing-Token': String(lock.token) });
  if (r.status !== 200) throw new Error(`storage-guard answered ${r.status} ${JSON.stringify(r.json)}`);
  console.log(`ok: ${resource} written with token ${lock.token}`);
} catch (e) {
  console.log(`failed: ${e.message}`);
  code = 1;
} finally {
  await lock.release();
}
process.exit(code);
