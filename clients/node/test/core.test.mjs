// The package's logic without I/O: errors, references, validity, arguments.
// The behaviour against real servers is the conformance suite's
// (tests/clients in the fencelock tree).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';

import * as fl from '../dist/index.js';
import { CODES } from '../dist/errors.js';
import { Validity, nowMs, retryWaitMs, retryDelayMs, extendIntervalMs, leaderPath } from '../dist/core.js';

const grant = (o = {}) => ({ resource: 'invoice:42', kind: 'plain', lock_id: '20cd09bbe0869ae3e1657f553d0798e70c000001',
  token: 1795733762367472, validity_ms: 1000, ttl_ms: 1000, ...o });

function fakeClient() {
  const calls = [];
  return { calls, t: { timeoutMs: 1000 }, live: new Set(), call: async (m, p) => { calls.push([m, p]); return {}; } };
}

test('every documented code maps to its class', () => {
  for (const [code, cls] of Object.entries(CODES)) {
    const e = fl.fromAnswer(400, { error: code, message: 'm' });
    assert.ok(e instanceof cls, code);
    assert.ok(e instanceof fl.FencelockError);
    assert.equal(e.code, code);
  }
  assert.ok(fl.fromAnswer(503, null) instanceof fl.BusyError);
  assert.ok(fl.fromAnswer(500, '<html>') instanceof fl.ServerError);
  assert.ok(fl.fromAnswer(418, {}) instanceof fl.BadRequestError);
  assert.ok(fl.fromAnswer(409, { error: 'new' }).constructor === fl.FencelockError);
});

test('a refusal reads holder fields defensively', () => {
  const e = fl.fromAnswer(409, { error: 'locked', message: 'm', holder_ref: 'ab' });
  assert.ok(e instanceof fl.LockedError);
  assert.equal(e.holderRef, 'ab');
  assert.equal(e.holderClient, null);
  const s = fl.fromAnswer(409, { error: 'stale_token', last_token: 7 });
  assert.equal(s.lastToken, 7);
});

test('lockRef is the first 16 hex digits of SHA-256', () => {
  const id = '20cd09bbe0869ae3e1657f553d0798e70c000001';
  assert.equal(fl.lockRef(id), createHash('sha256').update(id.slice(0, 34) + '000000').digest('hex').slice(0, 16));
  assert.throws(() => fl.lockRef('XYZ'), TypeError);
});

test('validity counts from the send and never moves back', () => {
  const v = new Validity(1000, 500);
  assert.ok(v.valid(1499.9));
  assert.ok(!v.valid(1500));
  v.extended(1300, 480);
  assert.equal(v.validUntilMs, 1780);
  v.extended(1200, 100);
  assert.equal(v.validUntilMs, 1780);
  assert.equal(retryWaitMs(4567.8), 4000);
  assert.equal(retryWaitMs(456.7), 400);
  assert.equal(extendIntervalMs(900), 300);
  assert.ok(retryDelayMs(1000, 10) <= 1000 / 3);
});

test('a lock past its validity is lost without a request, and its signal fires', () => {
  const c = fakeClient();
  const lost = [];
  const lock = new fl.Lock(c, grant({ validity_ms: 5 }), nowMs() - 10, 1000, (l, e) => lost.push(e), null);
  assert.equal(lock.valid, false);
  assert.throws(() => lock.check(), (e) => e instanceof fl.LostError && e.code === 'expired');
  assert.ok(lock.signal.aborted);
  assert.ok(lock.signal.reason instanceof fl.LostError);
  assert.equal(lost.length, 1);
  assert.equal(lock.remainingMs(), 0);
  assert.deepEqual(c.calls, []);
});

test('await using releases: the lock is async-disposable, once', async () => {
  const c = fakeClient();
  const lock = new fl.Lock(c, grant(), nowMs(), 1000, undefined, null);
  assert.equal(typeof lock[Symbol.asyncDispose], 'function');
  await lock[Symbol.asyncDispose]();
  await lock.release();
  assert.equal(c.calls.length, 1);
  assert.equal(c.calls[0][0], 'DELETE');
  assert.ok(lock.signal.aborted);
  assert.equal(lock.signal.reason.code, 'released');
  assert.equal(lock.lost, null);
});

test('status heldBy: by holder_ref, or the holder of older servers; a reentrant lock by its owner', () => {
  const lock = new fl.Lock(fakeClient(), grant(), nowMs(), 1000, undefined, null);
  assert.ok(new fl.Status({ holder_ref: lock.ref }).heldBy(lock));
  assert.ok(new fl.Status({ holder: lock.lockId }).heldBy(lock));
  assert.ok(!new fl.Status({ holder_ref: '0'.repeat(16) }).heldBy(lock));
  const re = new fl.Lock(fakeClient(), grant({ kind: 'reentrant' }), nowMs(), 1000, undefined, null);
  assert.equal(re.ownerId, re.lockId.slice(0, 34) + '000000');
  assert.ok(new fl.Status({ holder_ref: fl.lockRef(re.ownerId) }).heldBy(re));
});

test('fenced checks first', async () => {
  const ok = new fl.Lock(fakeClient(), grant(), nowMs(), 1000, undefined, null);
  assert.equal(await ok.fenced((t) => t + 1), ok.token + 1);
  const gone = new fl.Lock(fakeClient(), grant({ validity_ms: 0 }), nowMs(), 1000, undefined, null);
  await assert.rejects(gone.fenced((t) => t), fl.LostError);
});

test('bad arguments are refused before any request', async () => {
  const c = new fl.Client('http://127.0.0.1:9');
  const bad = [() => c.lock(''), () => c.lock(5), () => c.lock('x'.repeat(513)), () => c.lock('r', { ttlMs: 0 }),
    () => c.lock('r', { waitMs: -1 }), () => c.lock('r', { wait: 'later' }), () => c.lockMany([]),
    () => c.lockMany(['a\nb']), () => c.semaphore('r', 0), () => c.release('r', 'abc'),
    () => c.status('r', { kind: 'semaphore' }), () => c.lock('r', { signal: {} })];
  for (const [i, f] of bad.entries()) {
    await assert.rejects(async () => f(), (e) => e instanceof TypeError || e instanceof RangeError, String(i));
  }
  for (const url of ['127.0.0.1:7600', 'ftp://x', 'http://h/path']) assert.throws(() => new fl.Client(url), TypeError);
  assert.throws(() => new fl.Client('http://h', { token: 'two words' }), TypeError);
  assert.throws(() => new fl.Client('http://h', { ca: '/ca.pem' }), TypeError);
  const sg = new fl.StorageGuard('http://127.0.0.1:9');
  for (const f of [() => sg.put('k', 1, {}), () => sg.put('', 1, { token: 5 }), () => sg.put('k', 1, { token: 0 }),
    () => sg.put('k', 1, { token: 2 ** 53 }), () => sg.get('k', { raise: false }), () => sg.batch([], { token: 5 }),
    () => sg.batch([{ op: 'rename', key: 'k' }], { token: 5 }), () => sg.put('k', 1, { token: 5, ifVersion: -1 })]) {
    await assert.rejects(async () => f(), (e) => e instanceof TypeError || e instanceof RangeError);
  }
  c.close();
  sg.close();
});

const electionGrant = (o = {}) => ({ name: 'scheduler', lock_id: '20cd09bbe0869ae3e1657f553d0798e70c000001',
  epoch: 1795733762367472, token: 1795733762367472, validity_ms: 1000, ttl_ms: 1000, value: '10.0.0.7:8080', ...o });

test('not_elected is a NotElectedError, a LockedError', () => {
  const e = fl.fromAnswer(409, { error: 'not_elected', message: 'm' });
  assert.ok(e instanceof fl.NotElectedError && e instanceof fl.LockedError);
});

test('a leader is a lock of its election, resigned there, once', async () => {
  const c = fakeClient();
  const l = new fl.Leader(c, electionGrant(), nowMs(), 1000, undefined);
  assert.equal(l.name, 'scheduler');
  assert.equal(l.kind, 'leader');
  assert.equal(l.token, l.epoch);
  assert.equal(l.value, '10.0.0.7:8080');
  assert.equal(l.ref, fl.lockRef(l.lockId));
  await l[Symbol.asyncDispose]();
  await l.resign();
  assert.deepEqual(c.calls, [['DELETE', `/v1/elections/scheduler/${l.lockId}`]]);
  assert.throws(() => l.check(), fl.LostError);
  const gone = new fl.Leader(fakeClient(), electionGrant({ validity_ms: 5 }), nowMs() - 10, 1000, undefined);
  assert.equal(gone.valid, false);
  assert.ok(gone.signal.aborted);
});

test('readings are read defensively, and name their leader', () => {
  const none = new fl.Reading({ name: 's', leader: false, epoch: 9 });
  assert.deepEqual([none.leader, none.epoch, none.value, none.leaderClient, none.leaderRef], [false, null, null, null, null]);
  const l = new fl.Leader(fakeClient(), electionGrant(), nowMs(), 1000, undefined);
  assert.ok(new fl.Reading({ leader: true, epoch: l.epoch, leader_ref: l.ref }).ledBy(l));
  assert.ok(!new fl.Reading({ leader: true, epoch: l.epoch + 1, leader_ref: l.ref }).ledBy(l));
});

test('observer queries', () => {
  assert.equal(leaderPath('s'), '/v1/elections/s');
  assert.equal(leaderPath('s', 0, null, 500), '/v1/elections/s?after=0&wait_ms=500');
  assert.equal(leaderPath('s', 7, '10.0.0.7:8080', 500), '/v1/elections/s?after=7&value=10.0.0.7:8080&wait_ms=500');
  assert.equal(leaderPath('s', 7, 'a b&c'), '/v1/elections/s?after=7&value=a%20b%26c');
  assert.equal(leaderPath('s', 7, 'é+%'), '/v1/elections/s?after=7&value=%C3%A9%2B%25');
});

test('bad election arguments are refused before any request', async () => {
  const c = new fl.Client('http://127.0.0.1:9');
  const bad = [() => c.campaign('', 'v'), () => c.campaign('s', 5), () => c.campaign('s', 'x'.repeat(257)),
    () => c.campaign('s', 'a\0b'), () => c.campaign('s', 'v', { ttlMs: 0 }), () => c.campaign('s', 'v', { waitMs: -1 }),
    () => c.observe('s', { after: 5 }), () => c.watch('s', { waitMs: 0 }).next(), () => c.proclaim('s', 'xyz', 'v'),
    () => c.resign('s', 'xyz')];
  for (const [i, f] of bad.entries()) {
    await assert.rejects(async () => f(), (e) => e instanceof TypeError || e instanceof RangeError, String(i));
  }
  c.close();
});
