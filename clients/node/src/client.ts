/**
 * The lock client: {@link Client} and {@link Lock}.
 *
 * @module
 */
import * as core from './core.js';
import type { AcquireKind, LockKind, StatusKind, WaitMode } from './core.js';
import { CanceledError, FencelockError, LostError, ProtocolError, fromAnswer } from './errors.js';
import type { Json } from './errors.js';
import { Transport } from './http.js';
import type { TransportOptions } from './http.js';

// `await using` needs Symbol.asyncDispose; Node.js 18 before 18.18 lacks it.
const symbols = Symbol as unknown as { asyncDispose?: symbol; dispose?: symbol };
symbols.asyncDispose ??= Symbol.for('Symbol.asyncDispose');
symbols.dispose ??= Symbol.for('Symbol.dispose');


/** Options of every acquisition. */
export interface LockOptions {
  /** The lease in ms (default 10000); the keep-alive extends it every third of it. */
  ttlMs?: number;
  /** How long to wait while it is held (default 0: one try); at most the server's --max-wait. */
  waitMs?: number;
  /** How to wait: 'notify' (default), 'fair' (in arrival order) or 'poll'. */
  wait?: WaitMode;
  /** Keep the lock alive from this process until released (default true). */
  keepalive?: boolean;
  /** Cancels the acquisition (rejects with CanceledError); the server withdraws the wait. */
  signal?: AbortSignal;
  /** Called the moment the lock is known lost. */
  onLost?: (lock: Lock, error: FencelockError) => void;
}

/** A status answer (GET /v1/locks/{resource}), with the holder fields read defensively. */
export class Status {
  /** The answer as the server sent it. */
  readonly raw: Json;
  constructor(raw: Json) { this.raw = raw; }
  get held(): boolean { return Boolean(this.raw.held); }
  /** The holder's bearer-token client name, or null (absent: null). */
  get holderClient(): string | null { return (this.raw.holder_client as string | undefined) ?? null; }
  /** A non-secret form of the holder's lock id, or null (absent: null). */
  get holderRef(): string | null { return (this.raw.holder_ref as string | undefined) ?? null; }
  /** Whether this status names `lock` as the holder. */
  heldBy(lock: Lock): boolean {
    return core.statusHeldBy(this.raw, lock.ownerId ? [lock.lockId, lock.ownerId] : [lock.lockId]);
  }
}

/** Options of a campaign. */
export interface CampaignOptions {
  /** The lease in ms (default 10000); the keep-alive extends it every third of it. */
  ttlMs?: number;
  /** How long to wait in line (default 0: one attempt); at most the server's --max-wait. */
  waitMs?: number;
  /** Keep leading (extend) from this process until resigned (default true). */
  keepalive?: boolean;
  /** Cancels the campaign (rejects with CanceledError); it leaves the line. */
  signal?: AbortSignal;
  /** Called the moment the leader is known deposed. */
  onLost?: (leader: Leader, error: FencelockError) => void;
}

/** Options of an observer. */
export interface ObserveOptions {
  /** The reading the caller has (default none: wait for a leader). */
  after?: Reading | null;
  /** How long to wait for a change (default 30000). */
  waitMs?: number;
  /** Cancels the wait (rejects with CanceledError). */
  signal?: AbortSignal;
}

/**
 * Who leads an election (GET /v1/elections/{name}), read defensively: the
 * leader's fields are null when nobody leads (or the server does not say).
 */
export class Reading {
  /** The answer as the server sent it. */
  readonly raw: Json;
  constructor(raw: Json) { this.raw = raw; }
  get name(): string | null { return (this.raw.name as string | undefined) ?? null; }
  /** Whether someone leads. */
  get leader(): boolean { return Boolean(this.raw.leader); }
  /** Whether it differs from the reading an observer gave (false when its wait ran out). */
  get changed(): boolean { return Boolean(this.raw.changed); }
  /** The leader's epoch (its fencing token), or null. */
  get epoch(): number | null { return this.leader ? (this.raw.epoch as number | undefined) ?? null : null; }
  /** What the leader proclaimed last, or null. */
  get value(): string | null { return this.leader ? (this.raw.value as string | undefined) ?? null : null; }
  get ttlMsLeft(): number | null { return this.leader ? (this.raw.ttl_ms_left as number | undefined) ?? null : null; }
  /** The bearer-token client that campaigned, or null (without an auth file). */
  get leaderClient(): string | null { return (this.raw.leader_client as string | undefined) ?? null; }
  /** The leader's ref (its lock id's non-secret form), or null. */
  get leaderRef(): string | null { return (this.raw.leader_ref as string | undefined) ?? null; }
  /** Whether this reading names `leader` (by its ref and epoch). */
  ledBy(leader: Leader): boolean {
    return this.leader && this.leaderRef === leader.ref && this.epoch === leader.epoch;
  }
}

/**
 * A client of one fencelockd (`url` like `http://127.0.0.1:7600`). Share one
 * client in a process; `close()` it to close its connections.
 */
export class Client {
  /** @internal */ readonly t: Transport;
  /** @internal */ readonly live = new Set<Lock>();

  constructor(url: string, options: TransportOptions = {}) {
    this.t = new Transport(url, options);
  }

  /** Stop every keep-alive and close the connections (held locks run out by their TTL). */
  close(): void {
    for (const l of this.live) l.stopKeepalive();
    this.t.close();
  }

  /**
   * Take a plain lock, waiting up to `waitMs` while it is held. Rejects with
   * LockedError once the wait ran out, CanceledError when `signal` fires, or
   * another FencelockError.
   *
   * ```ts
   * await using lock = await client.lock('invoice:42', { waitMs: 5000 });
   * await store.put('invoice-42', { paid: true }, { lock });
   * ```
   */
  lock(resource: string, options: LockOptions = {}): Promise<Lock> {
    core.checkResource(resource);
    return this.acquire('plain', resource, null, null, null, options);
  }

  /** Several resources at once, all or none, under one token. */
  lockMany(resources: string[], options: LockOptions = {}): Promise<Lock> {
    const names = core.checkResources(resources);
    return this.acquire('multi', null, names, null, null, options);
  }

  /** A read lock: many readers, no writer. Its token is the largest of the writes' (not new). */
  readLock(resource: string, options: LockOptions = {}): Promise<Lock> {
    core.checkResource(resource);
    return this.acquire('read', resource, null, null, null, options);
  }

  /** A write lock: one writer, no reader. */
  writeLock(resource: string, options: LockOptions = {}): Promise<Lock> {
    core.checkResource(resource);
    return this.acquire('write', resource, null, null, null, options);
  }

  /** One of `permits` permits (every client of it names the same number); `lock.resource` is the permit. */
  semaphore(resource: string, permits: number, options: LockOptions = {}): Promise<Lock> {
    core.checkResource(resource);
    core.checkInt(permits, 'permits', 1, core.PERMITS_MAX);
    return this.acquire('semaphore', resource, null, permits, null, options);
  }

  /** A first hold of a reentrant lock; {@link Lock.reenter} takes more. */
  reentrant(resource: string, options: LockOptions = {}): Promise<Lock> {
    core.checkResource(resource);
    return this.acquire('reentrant', resource, null, null, null, options);
  }

  /** @internal */
  async acquire(kind: AcquireKind, resource: string | null, resources: string[] | null, permits: number | null,
    reenter: Lock | null, o: LockOptions): Promise<Lock> {
    if (o === null || typeof o !== 'object') throw new TypeError('options must be an object');
    const ttlMs = core.checkInt(o.ttlMs ?? 10000, 'ttlMs', 1);
    const waitMs = core.checkInt(o.waitMs ?? 0, 'waitMs', 0);
    const wait = core.checkWaitMode(o.wait ?? 'notify');
    if (o.signal !== undefined && !(o.signal instanceof AbortSignal)) throw new TypeError('signal must be an AbortSignal');
    if (o.onLost !== undefined && typeof o.onLost !== 'function') throw new TypeError('onLost must be a function');
    const [path, body] = core.acquireRequest(kind, resource, resources, ttlMs, waitMs, wait, permits,
      reenter ? reenter.lockId : null);
    const what = `acquire ${JSON.stringify(resource ?? resources)}`;
    const [answer, sent] = await this.grant(path, body, waitMs, o.signal, what);
    const g = grantFields(answer, what);
    const lock = new Lock(this, g, sent, ttlMs, o.onLost, reenter?.ownerId ?? null);
    if (core.needsConfirm(sent, core.nowMs(), g.validity_ms as number)) await lock.confirm();
    if (o.keepalive ?? true) lock.startKeepalive();
    return lock;
  }

  /**
   * @internal POST an acquisition or a campaign, retrying what may pass (a
   * restart, a node back) while its wait lasts; resolves with the answer and
   * the monotonic ms it was sent at.
   */
  async grant(path: string, body: Record<string, unknown>, waitMs: number, signal: AbortSignal | undefined,
    what: string): Promise<[unknown, number]> {
    const deadline = core.nowMs() + waitMs;
    for (let attempt = 0; ; attempt++) {
      const left = attempt === 0 ? waitMs : core.retryWaitMs(deadline - core.nowMs());
      body.wait_ms = left;
      const sent = core.nowMs();
      let err: FencelockError;
      try {
        const a = await this.t.request('POST', path, body, undefined, { timeoutMs: this.t.timeoutMs + left, signal, what });
        if (a.status === 200) return [a.body, sent];
        err = fromAnswer(a.status, a.body, what);
      } catch (e) {
        if (!(e instanceof FencelockError) || e instanceof CanceledError) throw e;
        err = e;
      }
      if (!core.ACQUIRE_RETRY_CODES.has(err.code) || core.nowMs() >= deadline) throw err;
      await sleep(Math.max(0, Math.min(core.acquireBackoffMs(attempt), deadline - core.nowMs())), signal, what);
    }
  }

  // ---- elections ----

  /**
   * Campaign to lead the election `name`, proclaiming `value` (at most 256
   * bytes: an address, say), waiting in line up to `waitMs` (0: one attempt;
   * candidates are elected in the order they asked). Rejects with
   * NotElectedError once the wait ran out, CanceledError when `signal` fires
   * (the campaign leaves the line), or another FencelockError. The leader is
   * kept alive as a lock; its `epoch` is its fencing token.
   *
   * ```ts
   * await using leader = await client.campaign('scheduler', '10.0.0.7:8080', { waitMs: 60000 });
   * await store.put('schedule', plan, { lock: leader });   // sent with leader.epoch
   * ```
   */
  async campaign(name: string, value: string, o: CampaignOptions = {}): Promise<Leader> {
    core.checkResource(name, 'name');
    core.checkValue(value);
    if (o === null || typeof o !== 'object') throw new TypeError('options must be an object');
    const ttlMs = core.checkInt(o.ttlMs ?? 10000, 'ttlMs', 1);
    const waitMs = core.checkInt(o.waitMs ?? 0, 'waitMs', 0);
    if (o.signal !== undefined && !(o.signal instanceof AbortSignal)) throw new TypeError('signal must be an AbortSignal');
    if (o.onLost !== undefined && typeof o.onLost !== 'function') throw new TypeError('onLost must be a function');
    const what = `campaign ${JSON.stringify(name)}`;
    const [answer, sent] = await this.grant(core.electionPath(name), { value, ttl_ms: ttlMs, wait_ms: waitMs }, waitMs,
      o.signal, what);
    const g = electionGrantFields(answer, what);
    const leader = new Leader(this, g, sent, ttlMs, o.onLost as LockOptions['onLost']);
    if (core.needsConfirm(sent, core.nowMs(), g.validity_ms as number)) await leader.confirm();
    if (o.keepalive ?? true) leader.startKeepalive();
    return leader;
  }

  /**
   * Who leads `name` now (one request; anyone may ask). Rejects with
   * NoQuorumError when no majority agreed on a reading (as while it changes
   * hands) within fencelockd's 2 s.
   */
  async leader(name: string): Promise<Reading> {
    core.checkResource(name, 'name');
    return new Reading(await this.call('GET', core.leaderPath(name), undefined, `leader ${JSON.stringify(name)}`));
  }

  /**
   * The next reading of `name` that differs from `after` (a new leader, a new
   * value, or none; no `after`: the first leader), waiting up to `waitMs`
   * (default 30000; a long poll answered at the change). If the wait ran
   * out, the reading now with `changed` false.
   */
  async observe(name: string, o: ObserveOptions = {}): Promise<Reading> {
    core.checkResource(name, 'name');
    if (o === null || typeof o !== 'object') throw new TypeError('options must be an object');
    const waitMs = core.checkInt(o.waitMs ?? 30000, 'waitMs', 0);
    if (o.after !== undefined && o.after !== null && !(o.after instanceof Reading)) throw new TypeError('after must be a Reading');
    if (o.signal !== undefined && !(o.signal instanceof AbortSignal)) throw new TypeError('signal must be an AbortSignal');
    const ref = o.after ?? null;
    const what = `observe ${JSON.stringify(name)}`;
    const path = core.leaderPath(name, ref?.epoch ?? 0, ref?.leader ? ref.value : null, waitMs);
    const a = await this.t.request('GET', path, undefined, undefined, { timeoutMs: this.t.timeoutMs + waitMs, signal: o.signal, what });
    if (a.status !== 200) throw fromAnswer(a.status, a.body, what);
    if (a.body === null || typeof a.body !== 'object') throw new ProtocolError(`${what}: the answer is not a JSON object`, a.status, 'protocol');
    return new Reading(a.body as Json);
  }

  /**
   * Who leads `name`, then each change: `for await (const r of
   * client.watch(name, { signal }))`. The first reading is the current one,
   * each next one the next change (long polls of `waitMs` each, never a
   * poll on a period). A failure that may pass (no quorum, a restart, no
   * answer) is retried with a back-off of 50 ms to 1 s; another is thrown.
   * Aborting `signal` (or leaving the loop) ends it. An epoch never goes
   * back: a reading of an older leader than one already given is skipped.
   */
  async *watch(name: string, o: { waitMs?: number; signal?: AbortSignal } = {}): AsyncGenerator<Reading, void, undefined> {
    core.checkResource(name, 'name');
    const waitMs = core.checkInt(o.waitMs ?? 30000, 'waitMs', 1);
    if (o.signal !== undefined && !(o.signal instanceof AbortSignal)) throw new TypeError('signal must be an AbortSignal');
    let last: Reading | null = null;
    let floor = 0;
    let failures = 0;
    while (!o.signal?.aborted) {
      let r: Reading;
      try {
        r = last === null ? await this.leader(name) : await this.observe(name, { after: last, waitMs, signal: o.signal });
        failures = 0;
      } catch (e) {
        if (e instanceof CanceledError) return;
        if (!(e instanceof FencelockError) || !(core.ACQUIRE_RETRY_CODES.has(e.code) || e.code === 'timeout')) throw e;
        try {
          await sleep(core.acquireBackoffMs(failures++), o.signal, name);
        } catch {
          return;
        }
        continue;
      }
      if (last !== null && !r.changed) continue;
      const stale = r.leader && (r.epoch ?? 0) < floor;
      last = r;
      if (stale) continue; // an older leader's keys, read late: wait for the next change from them
      if (r.leader) floor = r.epoch ?? 0;
      yield r;
    }
  }

  /** Proclaim a new value for the leader of `name` known by its id (epoch kept, lease extended). */
  proclaim(name: string, lockId: string, value: string, options: { ttlMs?: number } = {}): Promise<Json> {
    core.checkResource(name, 'name');
    core.checkLockId(lockId);
    core.checkValue(value);
    const ttlMs = core.checkInt(options.ttlMs ?? 10000, 'ttlMs', 1);
    return this.call('POST', core.proclaimPath(name, lockId), { value, ttl_ms: ttlMs }, `proclaim ${JSON.stringify(name)}`);
  }

  /** Resign the leader of `name` known by its id: the next candidate in line is elected at once. */
  resign(name: string, lockId: string): Promise<Json> {
    return this.release(name, lockId, { kind: 'leader' });
  }

  /** Extend a lock by its id (no token in the answer). Rejects with LostError if gone. */
  extend(resource: string, lockId: string, options: { ttlMs?: number; kind?: LockKind } = {}): Promise<Json> {
    core.checkResource(resource);
    core.checkLockId(lockId);
    const ttlMs = core.checkInt(options.ttlMs ?? 10000, 'ttlMs', 1);
    const kind = checkLockKind(options.kind ?? 'plain');
    return this.call('POST', core.extendPath(resource, lockId, kind), { ttl_ms: ttlMs }, `extend ${JSON.stringify(resource)}`);
  }

  /** Release a lock by its id; `nodes_released` below a majority means it had run out. */
  release(resource: string, lockId: string, options: { kind?: LockKind } = {}): Promise<Json> {
    core.checkResource(resource);
    core.checkLockId(lockId);
    const kind = checkLockKind(options.kind ?? 'plain');
    return this.call('DELETE', core.lockPath(resource, lockId, kind), undefined, `release ${JSON.stringify(resource)}`);
  }

  /** What the nodes say of a lock: kind plain, rw, reentrant, or semaphore with permits. */
  async status(resource: string, options: { kind?: StatusKind; permits?: number } = {}): Promise<Status> {
    core.checkResource(resource);
    const kind = options.kind ?? 'plain';
    if (!['plain', 'rw', 'reentrant', 'semaphore'].includes(kind)) throw new RangeError('kind must be plain, rw, reentrant or semaphore');
    if ((kind === 'semaphore') !== (options.permits !== undefined)) {
      throw new TypeError("a semaphore's status needs permits, and only a semaphore's");
    }
    if (options.permits !== undefined) core.checkInt(options.permits, 'permits', 1, core.PERMITS_MAX);
    return new Status(await this.call('GET', core.statusPath(resource, kind, options.permits), undefined,
      `status ${JSON.stringify(resource)}`));
  }

  /** GET /healthz. */
  health(): Promise<Json> {
    return this.call('GET', '/healthz', undefined, 'health');
  }

  /** @internal */
  async call(method: string, path: string, body: unknown, what: string, timeoutMs?: number): Promise<Json> {
    const a = await this.t.request(method, path, body, undefined, { timeoutMs, what });
    if (a.status !== 200) throw fromAnswer(a.status, a.body, what);
    if (a.body === null || typeof a.body !== 'object') throw new ProtocolError(`${what}: the answer is not a JSON object`, a.status, 'protocol');
    return a.body as Json;
  }
}

function checkLockKind(k: unknown): LockKind {
  if (!['plain', 'permit', 'multi', 'reentrant', 'read', 'write', 'leader'].includes(k as string)) {
    throw new RangeError('kind must be plain, permit, multi, reentrant, read, write or leader (as the grant said)');
  }
  return k as LockKind;
}

function grantFields(body: unknown, what: string): Json {
  const g = body as Json;
  if (g === null || typeof g !== 'object' || typeof g.resource !== 'string' || typeof g.kind !== 'string' ||
      typeof g.lock_id !== 'string' || typeof g.validity_ms !== 'number' || typeof g.token !== 'number') {
    throw new ProtocolError(`${what}: the grant lacks a field the API documents`, 200, 'protocol', g ?? null);
  }
  return g;
}

function electionGrantFields(body: unknown, what: string): Json {
  const g = body as Json;
  if (g === null || typeof g !== 'object' || typeof g.name !== 'string' || typeof g.lock_id !== 'string' ||
      typeof g.validity_ms !== 'number' || typeof g.epoch !== 'number') {
    throw new ProtocolError(`${what}: the answer lacks a field the API documents`, 200, 'protocol', g ?? null);
  }
  return g;
}

function sleep(ms: number, signal: AbortSignal | undefined, what: string): Promise<void> {
  return new Promise((resolve, reject) => {
    if (signal?.aborted) {
      reject(new CanceledError(`${what}: canceled`, 0, 'canceled', null, { cause: signal.reason }));
      return;
    }
    const onAbort = () => {
      clearTimeout(t);
      reject(new CanceledError(`${what}: canceled`, 0, 'canceled', null, { cause: signal?.reason }));
    };
    const t = setTimeout(() => {
      signal?.removeEventListener('abort', onAbort);
      resolve();
    }, ms);
    signal?.addEventListener('abort', onAbort, { once: true });
  });
}

/**
 * A held lock. `await using lock = await client.lock(...)` releases it on
 * leaving the block; or call {@link Lock.release}.
 *
 * {@link Lock.signal} is aborted the moment the lock is lost (its reason the
 * LostError) or released. {@link Lock.valid} and {@link Lock.check} read the
 * monotonic clock: a lock is never reported valid past the validity the
 * server granted, whether or not the keep-alive ran.
 */
export class Lock {
  /** The resource held (a permit's own name for a semaphore). */
  readonly resource: string;
  /** A multi-resource lock's names (else [resource]). */
  readonly resources: string[];
  /** As the server named it: plain, permit, multi, reentrant, read or write. */
  readonly kind: LockKind;
  readonly lockId: string;
  private refCache: string | null = null;
  /** A reentrant lock's owner id (what a status names as holder), else null. */
  readonly ownerId: string | null;
  /** The fencing token: send it with every write the lock protects. */
  readonly token: number;
  /** The semaphore's name, for a permit. */
  readonly semaphore: string | null;
  /** The grant as the server sent it. */
  readonly grant: Json;

  ttlMs: number;
  /** Extensions that succeeded. */
  extensions = 0;

  protected readonly client: Client;
  private validity: core.Validity;
  // Made on first use: most locks are taken and released without anyone
  // looking at their signal, and an AbortController is not free.
  private controller: AbortController | null = null;
  private lostError: FencelockError | null = null;
  private released = false;
  private timer: NodeJS.Timeout | null = null;
  private readonly onLost?: (lock: Lock, error: FencelockError) => void;

  /** @internal */
  constructor(client: Client, g: Json, sentMs: number, ttlMs: number,
    onLost: ((lock: Lock, error: FencelockError) => void) | undefined, owner: string | null, leader = false) {
    this.client = client;
    this.grant = g;
    // A leader's grant names its election (name) and its epoch (the token).
    this.resource = (leader ? g.name : g.resource) as string;
    this.resources = Array.isArray(g.resources) ? (g.resources as string[]) : [this.resource];
    this.kind = leader ? 'leader' : g.kind as LockKind;
    this.lockId = core.checkLockId(g.lock_id);
    this.ownerId = this.kind === 'reentrant' ? owner ?? core.ownerId(this.lockId) : null;
    this.token = (leader ? g.epoch : g.token) as number;
    this.semaphore = typeof g.semaphore === 'string' ? g.semaphore : null;
    this.ttlMs = ttlMs;
    this.validity = new core.Validity(sentMs, g.validity_ms as number);
    this.onLost = onLost;
  }

  /** The non-secret reference of lockId that a status reports as holder_ref. */
  get ref(): string {
    this.refCache ??= core.lockRef(this.lockId);
    return this.refCache;
  }

  /** Aborted when the lock is lost (reason: the LostError) or released. */
  get signal(): AbortSignal {
    if (!this.controller) {
      this.controller = new AbortController();
      if (this.lostError) this.controller.abort(this.lostError);
      else if (this.released) this.controller.abort(this.releasedError());
    }
    return this.controller.signal;
  }

  private releasedError(): LostError {
    return new LostError(`the lock of ${JSON.stringify(this.resource)} was released`, 0, 'released');
  }

  /** When the acquisition was sent, on the monotonic clock (process.hrtime) in ms. */
  get acquiredMs(): number { return this.validity.acquiredMs; }
  /** The end of the validity, on the same clock. */
  get validUntilMs(): number { return this.validity.validUntilMs; }

  /** Milliseconds the lock is still certainly held (0 once not). */
  remainingMs(): number {
    if (this.lostError || this.released) return 0;
    return this.validity.remainingMs();
  }

  /** Whether the lock is still certainly held (no request). */
  get valid(): boolean {
    try {
      this.check();
      return true;
    } catch {
      return false;
    }
  }

  /** Why the lock was lost, or null. */
  get lost(): FencelockError | null {
    try {
      this.check();
    } catch (e) {
      return (e as FencelockError).code === 'released' ? null : (e as FencelockError);
    }
    return null;
  }

  /** Throw LostError unless still certainly held: not released, not lost, within its validity. */
  check(): void {
    let err = this.lostError;
    if (!err && this.released) err = new LostError(`the lock of ${JSON.stringify(this.resource)} was released`, 0, 'released');
    if (!err && !this.validity.valid()) {
      err = this.markLost(new LostError(`the lock of ${JSON.stringify(this.resource)} ran past its validity without an extension`, 0, 'expired'));
    }
    if (err) throw err;
  }

  /** @internal */
  markLost(err: FencelockError): FencelockError {
    if (!this.lostError && !this.released) {
      this.lostError = err;
      this.stopKeepalive();
      this.controller?.abort(err);
      try {
        this.onLost?.(this, err);
      } catch {
        // a user's callback must not break the keep-alive
      }
    }
    return this.lostError ?? err;
  }

  /** Extend now (the keep-alive does it itself). Rejects with LostError if gone. */
  async extend(ttlMs?: number): Promise<void> {
    const ttl = ttlMs === undefined ? this.ttlMs : core.checkInt(ttlMs, 'ttlMs', 1);
    await this.extendBy(core.extendPath(this.resource, this.lockId, this.kind), { ttl_ms: ttl }, ttl,
      `extend ${JSON.stringify(this.resource)}`);
  }

  /** @internal An extension (or a leader's proclamation, which extends too): the validity is pushed out from its send. */
  async extendBy(path: string, body: Json, ttl: number, what: string): Promise<Json> {
    this.check();
    const sent = core.nowMs();
    // No answer is worth waiting for past the validity: it could not save the lock.
    const timeout = Math.min(this.client.t.timeoutMs, Math.max(1, this.validity.remainingMs()));
    let a: Json;
    try {
      a = await this.client.call('POST', path, body, what, timeout);
    } catch (e) {
      if (e instanceof FencelockError && core.KEEPALIVE_FATAL_CODES.has(e.code)) {
        this.markLost(new LostError(`the lock of ${JSON.stringify(this.resource)} is lost: ${e.message}`, e.status, e.code, e.body));
        this.check();
      }
      throw e;
    }
    if (typeof a.validity_ms !== 'number') throw new ProtocolError(`${what}: the answer has no validity_ms`, 200, 'protocol', a);
    // An answer after the validity ran out saves nothing: someone may have held it between.
    if (!this.lostError && this.validity.valid()) {
      this.validity.extended(sent, a.validity_ms);
      this.extensions++;
      this.ttlMs = ttl;
    }
    this.check();
    return a;
  }

  /** @internal After a grant that waited: extend at once (see needsConfirm in core). */
  async confirm(): Promise<void> {
    const sent = core.nowMs();
    let a: Json;
    try {
      a = await this.client.call('POST', core.extendPath(this.resource, this.lockId, this.kind), { ttl_ms: this.ttlMs },
        `extend ${JSON.stringify(this.resource)}`);
    } catch (e) {
      await this.release().catch(() => {});
      if (e instanceof FencelockError && core.KEEPALIVE_FATAL_CODES.has(e.code)) {
        throw new LostError(`the lock of ${JSON.stringify(this.resource)} was lost before its grant arrived: ${e.message}`,
          e.status, e.code, e.body);
      }
      throw e;
    }
    if (typeof a.validity_ms !== 'number') throw new ProtocolError('extend: the answer has no validity_ms', 200, 'protocol', a);
    const acquired = this.validity.acquiredMs;
    this.validity = new core.Validity(sent, a.validity_ms);
    this.validity.acquiredMs = acquired;
    this.extensions++;
  }

  /** @internal */
  startKeepalive(): void {
    this.client.live.add(this);
    this.schedule(core.nowMs() + core.extendIntervalMs(this.ttlMs), 0);
  }

  /** @internal */
  stopKeepalive(): void {
    this.client.live.delete(this);
    if (this.timer) clearTimeout(this.timer);
    this.timer = null;
  }

  private schedule(due: number, failures: number): void {
    if (this.released || this.lostError) return;
    // Wake for the next extension or the end of the validity, whichever comes first.
    const wake = Math.min(due, this.validity.validUntilMs);
    this.timer = setTimeout(() => this.tick(due, failures), Math.max(0, wake - core.nowMs()));
    this.timer.unref();
  }

  private tick(due: number, failures: number): void {
    this.timer = null;
    if (!this.valid) return; // check() marked it lost, and aborted the signal
    if (core.nowMs() < due) {
      this.schedule(due, failures);
      return;
    }
    this.extend().then(
      () => this.schedule(core.nowMs() + core.extendIntervalMs(this.ttlMs), 0),
      (e: unknown) => {
        if (this.lostError || !(e instanceof FencelockError) || core.KEEPALIVE_FATAL_CODES.has(e.code)) {
          if (!(e instanceof FencelockError)) {
            this.markLost(new LostError(`the keep-alive of ${JSON.stringify(this.resource)} failed: ${String(e)}`, 0, 'expired'));
          }
          return;
        }
        // It may pass (no quorum, a restart): again soon, while still valid.
        this.schedule(core.nowMs() + core.retryDelayMs(this.ttlMs, failures), failures + 1);
      });
  }

  /**
   * Release (once; later calls do nothing) and stop the keep-alive; the
   * signal is aborted. A lost lock is released too, in case a majority still
   * holds it.
   */
  async release(): Promise<void> {
    if (this.released) return;
    this.stopKeepalive();
    if (!this.lostError) {
      this.released = true;
      this.controller?.abort(this.releasedError());
    }
    this.released = true;
    await this.client.call('DELETE', core.lockPath(this.resource, this.lockId, this.kind), undefined,
      `release ${JSON.stringify(this.resource)}`);
  }

  /** `await using` releases the lock. */
  [Symbol.asyncDispose](): Promise<void> {
    return this.release();
  }

  /** One more hold of a reentrant lock: same owner and token. */
  reenter(options: LockOptions = {}): Promise<Lock> {
    if (this.kind !== 'reentrant') return Promise.reject(new TypeError('only a reentrant lock is re-entered'));
    this.check();
    return this.client.acquire('reentrant', this.resource, null, null, this, { ttlMs: this.ttlMs, ...options });
  }

  /**
   * Check the lock, then call `fn(token, signal)`: hand the token to your own
   * database's fenced write (docs/guarding-your-database.md), which must
   * refuse it if a larger token was seen.
   */
  async fenced<T>(fn: (token: number, signal: AbortSignal) => T | Promise<T>): Promise<T> {
    if (typeof fn !== 'function') throw new TypeError('fn must be a function');
    this.check();
    return fn(this.token, this.signal);
  }

  /** The resource's status now. */
  status(): Promise<Status> {
    if (this.kind === 'permit') {
      return Promise.reject(new TypeError("ask a semaphore's status with client.status(name, { kind: 'semaphore', permits })"));
    }
    const kind: StatusKind = this.kind === 'reentrant' ? 'reentrant' : this.kind === 'read' || this.kind === 'write' ? 'rw' : 'plain';
    return this.client.status(this.resources[0], { kind });
  }
}

/**
 * An elected leader: the lock of its election, whose token is its epoch.
 * `await using leader = await client.campaign(...)` resigns on leaving the
 * block; or call {@link Leader.resign}.
 *
 * It is a {@link Lock}: `check()`, `valid`, `remainingMs()`, `signal`
 * (aborted the moment it is deposed), `fenced(fn)`, on the same monotonic
 * validity and keep-alive; pass it as `{ lock: leader }` to storage-guard
 * and its epoch is sent as the token.
 */
export class Leader extends Lock {
  /** The election's name. */
  readonly name: string;
  /** The epoch: this leader's fencing token (== token); a later leader's is larger. */
  readonly epoch: number;
  private current: string;

  /** @internal */
  constructor(client: Client, g: Json, sentMs: number, ttlMs: number,
    onLost: ((lock: Lock, error: FencelockError) => void) | undefined) {
    super(client, g, sentMs, ttlMs, onLost, null, true);
    this.name = g.name as string;
    this.epoch = g.epoch as number;
    this.current = typeof g.value === 'string' ? g.value : '';
  }

  /** What it proclaimed last. */
  get value(): string { return this.current; }

  /**
   * Proclaim a new value under the same epoch (observers are told); it
   * extends the lease too. Rejects with LostError (and aborts the signal)
   * once deposed.
   */
  async proclaim(value: string, ttlMs?: number): Promise<void> {
    core.checkValue(value);
    const ttl = ttlMs === undefined ? this.ttlMs : core.checkInt(ttlMs, 'ttlMs', 1);
    await this.extendBy(core.proclaimPath(this.name, this.lockId), { value, ttl_ms: ttl }, ttl,
      `proclaim ${JSON.stringify(this.name)}`);
    this.current = value;
  }

  /** Resign (once) and stop the keep-alive: the next candidate in line is elected at once. */
  resign(): Promise<void> {
    return this.release();
  }

  /** Who leads this election now (one request). */
  reading(): Promise<Reading> {
    return this.client.leader(this.name);
  }
}
