#!/usr/bin/env node
// The Node.js driver of the client conformance suite (tests/clients/README.md):
// one JSON command a line on stdin, one JSON answer a line on stdout, through
// the fencelock package as installed (the harness copies this file next to
// its node_modules).
import { createInterface } from 'node:readline';
import * as fl from 'fencelock';

const LANG = 'node';
const clients = new Map();
const stores = new Map();
const locks = new Map();

const emit = (o) => process.stdout.write(JSON.stringify(o) + '\n');
const monoMs = () => Number(process.hrtime.bigint()) / 1e6; // CLOCK_MONOTONIC
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

// The canonical names of the suite are the Python client's class names.
function canonical(e) {
  if (!(e instanceof fl.FencelockError)) return null;
  const n = e.constructor.name;
  if (n === 'FencelockError' || n === 'NodeError' || n === 'ServerError' || n === 'ProtocolError') return n;
  if (n === 'CanceledError') return 'Canceled';
  if (n === 'TimeoutError') return 'Timeout';
  return n.replace(/Error$/, '');
}

function errorJson(e) {
  const t = canonical(e);
  if (t) {
    const b = e.body ?? {};
    return { type: t, code: e.code, status: e.status, message: e.message, holder_ref: b.holder_ref ?? null,
      holder_client: b.holder_client ?? null, last_token: b.last_token ?? null, is_locked: e instanceof fl.LockedError };
  }
  if (e instanceof TypeError || e instanceof RangeError) return { type: 'InvalidArgument', code: '', status: 0, message: e.message };
  return { type: 'Unexpected', code: '', status: 0, message: String(e?.stack ?? e) };
}

const lockJson = (h, l) => ({ handle: h, lock_id: l.lockId, ref: l.ref, token: l.token, resource: l.resource,
  resources: l.resources, kind: l.kind, acquired_mono_ms: l.acquiredMs, valid_until_mono_ms: l.validUntilMs });

const leaderJson = (h, l) => ({ ...lockJson(h, l), name: l.name, epoch: l.epoch, value: l.value });

const readingJson = (r) => ({ name: r.name, leader: r.leader, epoch: r.epoch, value: r.value, ttl_ms_left: r.ttlMsLeft,
  leader_client: r.leaderClient, leader_ref: r.leaderRef, changed: r.changed, at_mono_ms: monoMs() });

// A reading the harness hands back (after) as the client's own type.
const readingOf = (j) => (j ? new fl.Reading({ leader: j.leader, epoch: j.epoch, value: j.value }) : null);

function campaign(a, cl = clients.get(a.client ?? 'default')) {
  const o = {};
  if ('ttl_ms' in a) o.ttlMs = a.ttl_ms;
  if ('wait_ms' in a) o.waitMs = a.wait_ms;
  if ('keepalive' in a) o.keepalive = a.keepalive;
  if ('cancel_after_ms' in a) {
    const ac = new AbortController();
    setTimeout(() => ac.abort(), a.cancel_after_ms);
    o.signal = ac.signal;
  }
  return cl.campaign(a.name, a.value ?? '', o);
}

function opts(a) {
  const o = {};
  if ('ttl_ms' in a) o.ttlMs = a.ttl_ms;
  if ('wait_ms' in a) o.waitMs = a.wait_ms;
  if ('wait' in a) o.wait = a.wait;
  if ('keepalive' in a) o.keepalive = a.keepalive;
  return o;
}

function acquire(a, cl = clients.get(a.client ?? 'default')) {
  const o = opts(a);
  if ('cancel_after_ms' in a) {
    const ac = new AbortController();
    setTimeout(() => ac.abort(), a.cancel_after_ms);
    o.signal = ac.signal;
  }
  switch (a.kind ?? 'plain') {
    case 'leader': return campaign({ ...a, name: a.resource }, cl);
    case 'plain': return cl.lock(a.resource, o);
    case 'multi': return cl.lockMany(a.resources, o);
    case 'read': return cl.readLock(a.resource, o);
    case 'write': return cl.writeLock(a.resource, o);
    case 'semaphore': return cl.semaphore(a.resource, a.permits, o);
    case 'reentrant': return cl.reentrant(a.resource, o);
    default: throw new TypeError(`unknown kind ${a.kind}`);
  }
}

function storeOpts(a) {
  const o = {};
  if ('handle' in a) o.lock = locks.get(a.handle);
  if ('token' in a) o.token = a.token;
  if ('resource' in a) o.resource = a.resource;
  if ('if_version' in a) o.ifVersion = a.if_version;
  if ('if_exists' in a) o.ifExists = a.if_exists;
  return o;
}

async function contend(a) {
  const cl = clients.get(a.client ?? 'default');
  const st = stores.get(a.client ?? 'default');
  const sections = [];
  const errors = [];
  async function worker(w) {
    for (let i = 0; i < a.iterations; i++) {
      let lock;
      try {
        lock = await acquire(a, cl);
      } catch (e) {
        if (!(e instanceof fl.LockedError)) errors.push(errorJson(e)); // NotElectedError is one too
        continue;
      }
      const granted = monoMs();
      let end;
      let valid = false;
      try {
        await sleep(a.hold_ms ?? 10);
        if (a.write_key && st) await st.put(a.write_key, `${LANG}-${w}-${i}`, { lock });
        end = Math.min(monoMs(), lock.validUntilMs);
        valid = lock.valid;
      } catch (e) {
        end = Math.min(monoMs(), lock.validUntilMs);
        errors.push(errorJson(e));
      } finally {
        try {
          await lock.release();
        } catch (e) {
          errors.push(errorJson(e));
        }
      }
      sections.push({ lang: LANG, worker: w, granted, end, token: lock.token, acquired: lock.acquiredMs, valid_at_end: valid });
    }
  }
  await Promise.all(Array.from({ length: a.workers ?? 1 }, (_, w) => worker(w)));
  return { sections, errors };
}

async function run(cmd, a, id) {
  const cl = () => clients.get(a.client ?? 'default');
  const st = () => stores.get(a.client ?? 'default');
  switch (cmd) {
    case 'hello': return { lang: LANG, version: fl.VERSION };
    case 'config': {
      const name = a.name ?? 'default';
      clients.get(name)?.close();
      const t = { timeoutMs: a.timeout_ms ?? 10000 };
      clients.set(name, new fl.Client(a.url, { ...t, ...(a.token ? { token: a.token } : {}), ...(a.ca_file ? { ca: a.ca_file } : {}) }));
      if (a.sg_url) {
        stores.set(name, new fl.StorageGuard(a.sg_url, { ...t, ...(a.sg_token ? { token: a.sg_token } : {}),
          ...(a.sg_ca_file ? { ca: a.sg_ca_file } : {}) }));
      }
      return {};
    }
    case 'acquire': {
      const t0 = monoMs();
      const lock = await acquire(a);
      locks.set(a.handle, lock);
      return { ...lockJson(a.handle, lock), elapsed_ms: monoMs() - t0 };
    }
    case 'campaign': {
      const t0 = monoMs();
      const l = await campaign(a);
      locks.set(a.handle, l);
      return { ...leaderJson(a.handle, l), elapsed_ms: monoMs() - t0, elected_mono_ms: monoMs() };
    }
    case 'proclaim': {
      const l = locks.get(a.handle);
      await l.proclaim(a.value);
      return { value: l.value, epoch: l.epoch, valid_until_mono_ms: l.validUntilMs };
    }
    case 'resign': await locks.get(a.handle).resign(); return {};
    case 'leader': return readingJson(await cl().leader(a.name));
    case 'observe': return readingJson(await cl().observe(a.name, { after: readingOf(a.after), waitMs: a.wait_ms ?? 30000 }));
    case 'watch': {
      // Readings of client.watch, each told as an event as it comes, until count of them or timeout_ms.
      const ac = new AbortController();
      const t = setTimeout(() => ac.abort(), a.timeout_ms ?? 5000);
      const readings = [];
      try {
        for await (const r of cl().watch(a.name, { waitMs: a.wait_ms ?? 30000, signal: ac.signal })) {
          readings.push(readingJson(r));
          emit({ id, event: 'reading', reading: readings[readings.length - 1] });
          if (readings.length >= a.count) break;
        }
      } finally {
        clearTimeout(t);
      }
      return { readings, timed_out: ac.signal.aborted };
    }
    case 'proclaim_id': return cl().proclaim(a.name, a.lock_id, a.value, { ttlMs: a.ttl_ms ?? 10000 });
    case 'resign_id': return cl().resign(a.name, a.lock_id);
    case 'reenter': {
      const lock = await locks.get(a.handle).reenter(opts(a));
      locks.set(a.new_handle, lock);
      return lockJson(a.new_handle, lock);
    }
    case 'check': {
      const l = locks.get(a.handle);
      l.check();
      return { valid: true, remaining_ms: l.remainingMs() };
    }
    case 'valid': {
      const l = locks.get(a.handle);
      return { valid: l.valid, remaining_ms: l.remainingMs(), extensions: l.extensions };
    }
    case 'lost': {
      const l = locks.get(a.handle);
      const t0 = monoMs();
      if (!l.signal.aborted && (a.wait_ms ?? 0) > 0) {
        await new Promise((resolve) => {
          const t = setTimeout(resolve, a.wait_ms);
          l.signal.addEventListener('abort', () => { clearTimeout(t); resolve(); }, { once: true });
        });
      }
      const r = l.signal.aborted ? l.signal.reason : null;
      return { lost: l.signal.aborted && r?.code !== 'released', after_ms: monoMs() - t0, code: r?.code ?? null, type: r ? canonical(r) : null };
    }
    case 'extend': await locks.get(a.handle).extend(); return {};
    case 'release': await locks.get(a.handle).release(); return {};
    case 'status': {
      const o = {};
      if ('kind' in a) o.kind = a.kind;
      if ('permits' in a) o.permits = a.permits;
      const s = await cl().status(a.resource, o);
      const heldBy = {};
      for (const h of a.held_by ?? []) heldBy[h] = s.heldBy(locks.get(h));
      return { status: s.raw, held_by: heldBy, holder_ref: s.holderRef, holder_client: s.holderClient };
    }
    case 'release_id': return cl().release(a.resource, a.lock_id, { kind: a.kind ?? 'plain' });
    case 'extend_id': return cl().extend(a.resource, a.lock_id, { kind: a.kind ?? 'plain', ttlMs: a.ttl_ms ?? 10000 });
    case 'put': {
      const o = storeOpts(a);
      if (a.pause_after_check_ms !== undefined) {
        // Check the lock, say so, then wait: the harness stops this process
        // here, between the check and the write, as a GC pause would.
        const lock = o.lock;
        delete o.lock;
        lock.check();
        emit({ id, event: 'checked' });
        await sleep(a.pause_after_check_ms);
        o.token = lock.token;
      }
      return st().put(a.key, a.value ?? null, o);
    }
    case 'get': {
      const o = storeOpts(a);
      delete o.ifVersion;
      if ('raise_fence' in a) o.raise = a.raise_fence;
      return { record: await st().get(a.key, o) };
    }
    case 'delete': return { deleted: await st().delete(a.key, storeOpts(a)) };
    case 'batch': return st().batch(a.ops, storeOpts(a));
    case 'fence': return { last_token: await st().fence(a.resource) };
    case 'reset_fence': return st().resetFence(a.resource, a.token);
    case 'fenced': return { token: await locks.get(a.handle).fenced((token) => token) };
    case 'contend': return contend(a);
    case 'map_error': {
      const e = fl.fromAnswer(a.status, a.body ?? null, 'test');
      return { type: canonical(e), code: e.code };
    }
    case 'ref': return { ref: fl.lockRef(a.lock_id) };
    case 'validate': {
      const c = cl();
      const cases = {
        lock_empty: () => c.lock(''), lock_ttl0: () => c.lock('r', { ttlMs: 0 }),
        lock_wait_neg: () => c.lock('r', { waitMs: -1 }), lock_wait_mode: () => c.lock('r', { wait: 'x' }),
        many_empty: () => c.lockMany([]), semaphore_0: () => c.semaphore('r', 0),
        release_bad_id: () => c.release('r', 'xyz'), put_no_token: () => st().put('k', 1, {}),
        resource_too_long: () => c.lock('x'.repeat(513)),
        campaign_empty_name: () => c.campaign('', 'v'), campaign_value_too_long: () => c.campaign('e', 'v'.repeat(257)),
        proclaim_bad_id: () => c.proclaim('e', 'xyz', 'v'),
      };
      await cases[a.case]();
      return {};
    }
    case 'sleep': await sleep(a.ms); return {};
    default: throw new TypeError(`unknown command ${cmd}`);
  }
}

const rl = createInterface({ input: process.stdin });
const pending = [];
rl.on('line', (line) => {
  line = line.trim();
  if (!line) return;
  const msg = JSON.parse(line);
  if (msg.cmd === 'quit') {
    emit({ id: msg.id, ok: true, result: {} });
    for (const c of clients.values()) c.close();
    for (const s of stores.values()) s.close();
    process.exit(0);
  }
  // One command at a time, in order, as the other drivers run them.
  pending.push(msg);
  if (pending.length === 1) drain();
});

async function drain() {
  while (pending.length) {
    const msg = pending[0];
    try {
      emit({ id: msg.id, ok: true, result: await run(msg.cmd, msg.args ?? {}, msg.id) });
    } catch (e) {
      emit({ id: msg.id, ok: false, error: errorJson(e) });
    }
    pending.shift();
  }
}
