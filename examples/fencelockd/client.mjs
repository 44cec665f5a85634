#!/usr/bin/env node
// Take a fencelock lock through fencelockd, keep it alive while working,
// write to storage-guard with its fencing token, and release it: with the
// fencelock package (clients/node; `npm install ./clients/node`).
//
//   FENCELOCKD_URL=http://127.0.0.1:7600 STORAGE_GUARD_URL=http://127.0.0.1:8080 \
//     node client.mjs invoice:42 "paid by card"
//
// FENCELOCKD_TOKEN, if set, is sent as a bearer token (fencelockd --auth-file).
// Prints one line "ok: <resource> written with token <token>" and exits 0;
// exits 1 if the lock could not be taken, or was lost before the write.
// Run from a clone without installing, it finds the package in clients/node.
// (In TypeScript, or a Node.js with explicit resource management,
// `await using lock = await client.lock(...)` releases it for you.)
import { setTimeout as sleep } from 'node:timers/promises';

let fl;
try {
  fl = await import('fencelock');
} catch {
  fl = await import(new URL('../../clients/node/dist/index.js', import.meta.url)); // not installed: this tree's
}

const resource = process.argv[2] ?? 'invoice:42';
const value = process.argv[3] ?? 'written from Node.js';
const client = new fl.Client(process.env.FENCELOCKD_URL ?? 'http://127.0.0.1:7600',
  process.env.FENCELOCKD_TOKEN ? { token: process.env.FENCELOCKD_TOKEN } : {});
const store = new fl.StorageGuard(process.env.STORAGE_GUARD_URL ?? 'http://127.0.0.1:8080');
const ttlMs = Number(process.env.LOCK_TTL_MS ?? 2000);
const workMs = Number(process.env.WORK_SECONDS ?? 1.5) * 1000;

let code = 0;
try {
  const lock = await client.lock(resource, { ttlMs, waitMs: 30000 });
  try {
    // The work, longer than the TTL: the keep-alive carries it, and
    // lock.signal aborts the work the moment the lock is lost.
    await sleep(workMs, undefined, { signal: lock.signal }).catch(() => {});
    await store.put(resource, value, { lock }); // checks the lock, sends its token
    console.log(`ok: ${resource} written with token ${lock.token}`);
  } finally {
    await lock.release();
  }
} catch (e) {
  console.log(`failed: ${e.message}`);
  code = 1;
} finally {
  client.close();
  store.close();
}
process.exit(code);
