/**
 * The lock client: {@link Client} and {@link Lock}.
 *
 * @module
 */
import * as core from './core.js';
import { CanceledError, FencelockError, LostError, ProtocolError, fromAnswer } from './errors.js';
import { Transport } from './http.js';
// `await using` needs Symbol.asyncDispose; Node.js 18 before 18.18 lacks it.
const symbols = Symbol;
symbols.asyncDispose ??= Symbol.for('Symbol.asyncDispose');
symbols.dispose ??= Symbol.for('Symbol.dispose');
/** A status answer (GET /v1/locks/{resource}), with the holder fields read defensively. */
export class Status {
    /** The answer as the server sent it. */
    raw;
    constructor(raw) { this.raw = raw; }
    get held() { return Boolean(this.raw.held); }
    /** The holder's bearer-token client name, or null (absent: null). */
    get holderClient() { return this.raw.holder_client ?? null; }
    /** A non-secret form of the holder's lock id, or null (absent: null). */
    get holderRef() { return this.raw.holder_ref ?? null; }
    /** Whether this status names `lock` as the holder. */
    heldBy(lock) {
        return core.statusHeldBy(this.raw, lock.ownerId ? [lock.lockId, lock.ownerId] : [lock.lockId]);
    }
}
/**
 * Who leads an election (GET /v1/elections/{name}), read defensively: the
 * leader's fields are null when nobody leads (or the server does not say).
 */
export class Reading {
    /** The answer as the server sent it. */
    raw;
    constructor(raw) { this.raw = raw; }
    get name() { return this.raw.name ?? null; }
    /** Whether someone leads. */
    get leader() { return Boolean(this.raw.leader); }
    /** Whether it differs from the reading an observer gave (false when its wait ran out). */
    get changed() { return Boolean(this.raw.changed); }
    /** The leader's epoch (its fencing token), or null. */
    get epoch() { return this.leader ? this.raw.epoch ?? null : null; }
    /** What the leader proclaimed last, or null. */
    get value() { return this.leader ? this.raw.value ?? null : null; }
    get ttlMsLeft() { return this.leader ? this.raw.ttl_ms_left ?? null : null; }
    /** The bearer-token client that campaigned, or null (without an auth file). */
    get leaderClient() { return this.raw.leader_client ?? null; }
    /** The leader's ref (its lock id's non-secret form), or null. */
    get leaderRef() { return this.raw.leader_ref ?? null; }
    /** Whether this reading names `leader` (by its ref and epoch). */
    ledBy(leader) {
        return this.leader && this.leaderRef === leader.ref && this.epoch === leader.epoch;
    }
}
/**
 * A client of one fencelockd (`url` like `http://127.0.0.1:7600`). Share one
 * client in a process; `close()` it to close its connections.
 */
export class Client {
    /** @internal */ t;
    /** @internal */ live = new Set();
    constructor(url, options = {}) {
        this.t = new Transport(url, options);
    }
    /** Stop every keep-alive and close the connections (held locks run out by their TTL). */
    close() {
        for (const l of this.live)
            l.stopKeepalive();
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
    lock(resource, options = {}) {
        core.checkResource(resource);
        return this.acquire('plain', resource, null, null, null, options);
    }
    /** Several resources at once, all or none, under one token. */
    lockMany(resources, options = {}) {
        const names = core.checkResources(resources);
        return this.acquire('multi', null, names, null, null, options);
    }
    /** A read lock: many readers, no writer. Its token is the largest of the writes' (not new). */
    readLock(resource, options = {}) {
        core.checkResource(resource);
        return this.acquire('read', resource, null, null, null, options);
    }
    /** A write lock: one writer, no reader. */
    writeLock(resource, options = {}) {
        core.checkResource(resource);
        return this.acquire('write', resource, null, null, null, options);
    }
    /** One of `permits` permits (every client of it names the same number); `lock.resource` is the permit. */
    semaphore(resource, permits, options = {}) {
        core.checkResource(resource);
        core.checkInt(permits, 'permits', 1, core.PERMITS_MAX);
        return this.acquire('semaphore', resource, null, permits, null, options);
    }
    /** A first hold of a reentrant lock; {@link Lock.reenter} takes more. */
    reentrant(resource, options = {}) {
        core.checkResource(resource);
        return this.acquire('reentrant', resource, null, null, null, options);
    }
    /** @internal */
    async acquire(kind, resource, resources, permits, reenter, o) {
        if (o === null || typeof o !== 'object')
            throw new TypeError('options must be an object');
        const ttlMs = core.checkInt(o.ttlMs ?? 10000, 'ttlMs', 1);
        const waitMs = core.checkInt(o.waitMs ?? 0, 'waitMs', 0);
        const wait = core.checkWaitMode(o.wait ?? 'notify');
        if (o.signal !== undefined && !(o.signal instanceof AbortSignal))
            throw new TypeError('signal must be an AbortSignal');
        if (o.onLost !== undefined && typeof o.onLost !== 'function')
            throw new TypeError('onLost must be a function');
        const [path, body] = core.acquireRequest(kind, resource, resources, ttlMs, waitMs, wait, permits, reenter ? reenter.lockId : null);
        const what = `acquire ${JSON.stringify(resource ?? resources)}`;
        const [answer, sent] = await this.grant(path, body, waitMs, o.signal, what);
        const g = grantFields(answer, what);
        const lock = new Lock(this, g, sent, ttlMs, o.onLost, reenter?.ownerId ?? null);
        if (core.needsConfirm(sent, core.nowMs(), g.validity_ms))
            await lock.confirm();
        if (o.keepalive ?? true)
            lock.startKeepalive();
        return lock;
    }
    /**
     * @internal POST an acquisition or a campaign, retrying what may pass (a
     * restart, a node back) while its wait lasts; resolves with the answer and
     * the monotonic ms it was sent at.
     */
    async grant(path, body, waitMs, signal, what) {
        const deadline = core.nowMs() + waitMs;
        for (let attempt = 0;; attempt++) {
            const left = attempt === 0 ? waitMs : core.retryWaitMs(deadline - core.nowMs());
            body.wait_ms = left;
            const sent = core.nowMs();
            let err;
            try {
                const a = await this.t.request('POST', path, body, undefined, { timeoutMs: this.t.timeoutMs + left, signal, what });
                if (a.status === 200)
                    return [a.body, sent];
                err = fromAnswer(a.status, a.body, what);
            }
            catch (e) {
                if (!(e instanceof FencelockError) || e instanceof CanceledError)
                    throw e;
                err = e;
            }
            if (!core.ACQUIRE_RETRY_CODES.has(err.code) || core.nowMs() >= deadline)
                throw err;
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
    async campaign(name, value, o = {}) {
        core.checkResource(name, 'name');
        core.checkValue(value);
        if (o === null || typeof o !== 'object')
            throw new TypeError('options must be an object');
        const ttlMs = core.checkInt(o.ttlMs ?? 10000, 'ttlMs', 1);
        const waitMs = core.checkInt(o.waitMs ?? 0, 'waitMs', 0);
        if (o.signal !== undefined && !(o.signal instanceof AbortSignal))
            throw new TypeError('signal must be an AbortSignal');
        if (o.onLost !== undefined && typeof o.onLost !== 'function')
            throw new TypeError('onLost must be a function');
        const what = `campaign ${JSON.stringify(name)}`;
        const [answer, sent] = await this.grant(core.electionPath(name), { value, ttl_ms: ttlMs, wait_ms: waitMs }, waitMs, o.signal, what);
        const g = electionGrantFields(answer, what);
        const leader = new Leader(this, g, sent, ttlMs, o.onLost);
        if (core.needsConfirm(sent, core.nowMs(), g.validity_ms))
            await leader.confirm();
        if (o.keepalive ?? true)
            leader.startKeepalive();
        return leader;
    }
    /**
     * Who leads `name` now (one request; anyone may ask). Rejects with
     * NoQuorumError when no majority agreed on a reading (as while it changes
     * hands) within fencelockd's 2 s.
     */
    async leader(name) {
        core.checkResource(name, 'name');
        return new Reading(await this.call('GET', core.leaderPath(name), undefined, `leader ${JSON.stringify(name)}`));
    }
    /**
     * The next reading of `name` that differs from `after` (a new leader, a new
     * value, or none; no `after`: the first leader), waiting up to `waitMs`
     * (default 30000; a long poll answered at the change). If the wait ran
     * out, the reading now with `changed` false.
     */
    async observe(name, o = {}) {
        core.checkResource(name, 'name');
        if (o === null || typeof o !== 'object')
            throw new TypeError('options must be an object');
        const waitMs = core.checkInt(o.waitMs ?? 30000, 'waitMs', 0);
        if (o.after !== undefined && o.after !== null && !(o.after instanceof Reading))
            throw new TypeError('after must be a Reading');
        if (o.signal !== undefined && !(o.signal instanceof AbortSignal))
            throw new TypeError('signal must be an AbortSignal');
        const ref = o.after ?? null;
        const what = `observe ${JSON.stringify(name)}`;
        const path = core.leaderPath(name, ref?.epoch ?? 0, ref?.leader ? ref.value : null, waitMs);
        const a = await this.t.request('GET', path, undefined, undefined, { timeoutMs: this.t.timeoutMs + waitMs, signal: o.signal, what });
        if (a.status !== 200)
            throw fromAnswer(a.status, a.body, what);
        if (a.body === null || typeof a.body !== 'object')
            throw new ProtocolError(`${what}: the answer is not a JSON object`, a.status, 'protocol');
        return new Reading(a.body);
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
    async *watch(name, o = {}) {
        core.checkResource(name, 'name');
        const waitMs = core.checkInt(o.waitMs ?? 30000, 'waitMs', 1);
        if (o.signal !== undefined && !(o.signal instanceof AbortSignal))
            throw new TypeError('signal must be an AbortSignal');
        let last = null;
        let floor = 0;
        let failures = 0;
        while (!o.signal?.aborted) {
            let r;
            try {
                r = last === null ? await this.leader(name) : await this.observe(name, { after: last, waitMs, signal: o.signal });
                failures = 0;
            }
            catch (e) {
                if (e instanceof CanceledError)
                    return;
                if (!(e instanceof FencelockError) || !(core.ACQUIRE_RETRY_CODES.has(e.code) || e.code === 'timeout'))
                    throw e;
                try {
                    await sleep(core.acquireBackoffMs(failures++), o.signal, name);
                }
                catch {
                    return;
                }
                continue;
            }
            if (last !== null && !r.changed)
                continue;
            const stale = r.leader && (r.epoch ?? 0) < floor;
            last = r;
            if (stale)
                continue; // an older leader's keys, read late: wait for the next change from them
            if (r.leader)
                floor = r.epoch ?? 0;
            yield r;
        }
    }
    /** Proclaim a new value for the leader of `name` known by its id (epoch kept, lease extended). */
    proclaim(name, lockId, value, options = {}) {
        core.checkResource(name, 'name');
        core.checkLockId(lockId);
        core.checkValue(value);
        const ttlMs = core.checkInt(options.ttlMs ?? 10000, 'ttlMs', 1);
        return this.call('POST', core.proclaimPath(name, lockId), { value, ttl_ms: ttlMs }, `proclaim ${JSON.stringify(name)}`);
    }
    /** Resign the leader of `name` known by its id: the next candidate in line is elected at once. */
    resign(name, lockId) {
        return this.release(name, lockId, { kind: 'leader' });
    }
    /** Extend a lock by its id (no token in the answer). Rejects with LostError if gone. */
    extend(resource, lockId, options = {}) {
        core.checkResource(resource);
        core.checkLockId(lockId);
        const ttlMs = core.checkInt(options.ttlMs ?? 10000, 'ttlMs', 1);
        const kind = checkLockKind(options.kind ?? 'plain');
        return this.call('POST', core.extendPath(resource, lockId, kind), { ttl_ms: ttlMs }, `extend ${JSON.stringify(resource)}`);
    }
    /** Release a lock by its id; `nodes_released` below a majority means it had run out. */
    release(resource, lockId, options = {}) {
        core.checkResource(resource);
        core.checkLockId(lockId);
        const kind = checkLockKind(options.kind ?? 'plain');
        return this.call('DELETE', core.lockPath(resource, lockId, kind), undefined, `release ${JSON.stringify(resource)}`);
    }
    /** What the nodes say of a lock: kind plain, rw, reentrant, or semaphore with permits. */
    async status(resource, options = {}) {
        core.checkResource(resource);
        const kind = options.kind ?? 'plain';
        if (!['plain', 'rw', 'reentrant', 'semaphore'].includes(kind))
            throw new RangeError('kind must be plain, rw, reentrant or semaphore');
        if ((kind === 'semaphore') !== (options.permits !== undefined)) {
            throw new TypeError("a semaphore's status needs permits, and only a semaphore's");
        }
        if (options.permits !== undefined)
            core.checkInt(options.permits, 'permits', 1, core.PERMITS_MAX);
        return new Status(await this.call('GET', core.statusPath(resource, kind, options.permits), undefined, `status ${JSON.stringify(resource)}`));
    }
    /** GET /healthz. */
    health() {
        return this.call('GET', '/healthz', undefined, 'health');
    }
    /** @internal */
    async call(method, path, body, what, timeoutMs) {
        const a = await this.t.request(method, path, body, undefined, { timeoutMs, what });
        if (a.status !== 200)
            throw fromAnswer(a.status, a.body, what);
        if (a.body === null || typeof a.body !== 'object')
            throw new ProtocolError(`${what}: the answer is not a JSON object`, a.status, 'protocol');
        return a.body;
    }
}
function checkLockKind(k) {
    if (!['plain', 'permit', 'multi', 'reentrant', 'read', 'write', 'leader'].includes(k)) {
        throw new RangeError('kind must be plain, permit, multi, reentrant, read, write or leader (as the grant said)');
    }
    return k;
}
function grantFields(body, what) {
    const g = body;
    if (g === null || typeof g !== 'object' || typeof g.resource !== 'string' || typeof g.kind !== 'string' ||
        typeof g.lock_id !== 'string' || typeof g.validity_ms !== 'number' || typeof g.token !== 'number') {
        throw new ProtocolError(`${what}: the grant lacks a field the API documents`, 200, 'protocol', g ?? null);
    }
    return g;
}
function electionGrantFields(body, what) {
    const g = body;
    if (g === null || typeof g !== 'object' || typeof g.name !== 'string' || typeof g.lock_id !== 'string' ||
        typeof g.validity_ms !== 'number' || typeof g.epoch !== 'number') {
        throw new ProtocolError(`${what}: the answer lacks a field the API documents`, 200, 'protocol', g ?? null);
    }
    return g;
}
function sleep(ms, signal, what) {
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
    resource;
    /** A multi-resource lock's names (else [resource]). */
    resources;
    /** As the server named it: plain, permit, multi, reentrant, read or write. */
    kind;
    lockId;
    refCache = null;
    /** A reentrant lock's owner id (what a status names as holder), else null. */
    ownerId;
    /** The fencing token: send it with every write the lock protects. */
    token;
    /** The semaphore's name, for a permit. */
    semaphore;
    /** The grant as the server sent it. */
    grant;
    ttlMs;
    /** Extensions that succeeded. */
    extensions = 0;
    client;
    validity;
    // Made on first use: most locks are taken and released without anyone
    // looking at their signal, and an AbortController is not free.
    controller = null;
    lostError = null;
    released = false;
    timer = null;
    onLost;
    /** @internal */
    constructor(client, g, sentMs, ttlMs, onLost, owner, leader = false) {
        this.client = client;
        this.grant = g;
        // A leader's grant names its election (name) and its epoch (the token).
        this.resource = (leader ? g.name : g.resource);
        this.resources = Array.isArray(g.resources) ? g.resources : [this.resource];
        this.kind = leader ? 'leader' : g.kind;
        this.lockId = core.checkLockId(g.lock_id);
        this.ownerId = this.kind === 'reentrant' ? owner ?? core.ownerId(this.lockId) : null;
        this.token = (leader ? g.epoch : g.token);
        this.semaphore = typeof g.semaphore === 'string' ? g.semaphore : null;
        this.ttlMs = ttlMs;
        this.validity = new core.Validity(sentMs, g.validity_ms);
        this.onLost = onLost;
    }
    /** The non-secret reference of lockId that a status reports as holder_ref. */
    get ref() {
        this.refCache ??= core.lockRef(this.lockId);
        return this.refCache;
    }
    /** Aborted when the lock is lost (reason: the LostError) or released. */
    get signal() {
        if (!this.controller) {
            this.controller = new AbortController();
            if (this.lostError)
                this.controller.abort(this.lostError);
            else if (this.released)
                this.controller.abort(this.releasedError());
        }
        return this.controller.signal;
    }
    releasedError() {
        return new LostError(`the lock of ${JSON.stringify(this.resource)} was released`, 0, 'released');
    }
    /** When the acquisition was sent, on the monotonic clock (process.hrtime) in ms. */
    get acquiredMs() { return this.validity.acquiredMs; }
    /** The end of the validity, on the same clock. */
    get validUntilMs() { return this.validity.validUntilMs; }
    /** Milliseconds the lock is still certainly held (0 once not). */
    remainingMs() {
        if (this.lostError || this.released)
            return 0;
        return this.validity.remainingMs();
    }
    /** Whether the lock is still certainly held (no request). */
    get valid() {
        try {
            this.check();
            return true;
        }
        catch {
            return false;
        }
    }
    /** Why the lock was lost, or null. */
    get lost() {
        try {
            this.check();
        }
        catch (e) {
            return e.code === 'released' ? null : e;
        }
        return null;
    }
    /** Throw LostError unless still certainly held: not released, not lost, within its validity. */
    check() {
        let err = this.lostError;
        if (!err && this.released)
            err = new LostError(`the lock of ${JSON.stringify(this.resource)} was released`, 0, 'released');
        if (!err && !this.validity.valid()) {
            err = this.markLost(new LostError(`the lock of ${JSON.stringify(this.resource)} ran past its validity without an extension`, 0, 'expired'));
        }
        if (err)
            throw err;
    }
    /** @internal */
    markLost(err) {
        if (!this.lostError && !this.released) {
            this.lostError = err;
            this.stopKeepalive();
            this.controller?.abort(err);
            try {
                this.onLost?.(this, err);
            }
            catch {
                // a user's callback must not break the keep-alive
            }
        }
        return this.lostError ?? err;
    }
    /** Extend now (the keep-alive does it itself). Rejects with LostError if gone. */
    async extend(ttlMs) {
        const ttl = ttlMs === undefined ? this.ttlMs : core.checkInt(ttlMs, 'ttlMs', 1);
        await this.extendBy(core.extendPath(this.resource, this.lockId, this.kind), { ttl_ms: ttl }, ttl, `extend ${JSON.stringify(this.resource)}`);
    }
    /** @internal An extension (or a leader's proclamation, which extends too): the validity is pushed out from its send. */
    async extendBy(path, body, ttl, what) {
        this.check();
        const sent = core.nowMs();
        // No answer is worth waiting for past the validity: it could not save the lock.
        const timeout = Math.min(this.client.t.timeoutMs, Math.max(1, this.validity.remainingMs()));
        let a;
        try {
            a = await this.client.call('POST', path, body, what, timeout);
        }
        catch (e) {
            if (e instanceof FencelockError && core.KEEPALIVE_FATAL_CODES.has(e.code)) {
                this.markLost(new LostError(`the lock of ${JSON.stringify(this.resource)} is lost: ${e.message}`, e.status, e.code, e.body));
                this.check();
            }
            throw e;
        }
        if (typeof a.validity_ms !== 'number')
            throw new ProtocolError(`${what}: the answer has no validity_ms`, 200, 'protocol', a);
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
    async confirm() {
        const sent = core.nowMs();
        let a;
        try {
            a = await this.client.call('POST', core.extendPath(this.resource, this.lockId, this.kind), { ttl_ms: this.ttlMs }, `extend ${JSON.stringify(this.resource)}`);
        }
        catch (e) {
            await this.release().catch(() => { });
            if (e instanceof FencelockError && core.KEEPALIVE_FATAL_CODES.has(e.code)) {
                throw new LostError(`the lock of ${JSON.stringify(this.resource)} was lost before its grant arrived: ${e.message}`, e.status, e.code, e.body);
            }
            throw e;
        }
        if (typeof a.validity_ms !== 'number')
            throw new ProtocolError('extend: the answer has no validity_ms', 200, 'protocol', a);
        const acquired = this.validity.acquiredMs;
        this.validity = new core.Validity(sent, a.validity_ms);
        this.validity.acquiredMs = acquired;
        this.extensions++;
    }
    /** @internal */
    startKeepalive() {
        this.client.live.add(this);
        this.schedule(core.nowMs() + core.extendIntervalMs(this.ttlMs), 0);
    }
    /** @internal */
    stopKeepalive() {
        this.client.live.delete(this);
        if (this.timer)
            clearTimeout(this.timer);
        this.timer = null;
    }
    schedule(due, failures) {
        if (this.released || this.lostError)
            return;
        // Wake for the next extension or the end of the validity, whichever comes first.
        const wake = Math.min(due, this.validity.validUntilMs);
        this.timer = setTimeout(() => this.tick(due, failures), Math.max(0, wake - core.nowMs()));
        this.timer.unref();
    }
    tick(due, failures) {
        this.timer = null;
        if (!this.valid)
            return; // check() marked it lost, and aborted the signal
        if (core.nowMs() < due) {
            this.schedule(due, failures);
            return;
        }
        this.extend().then(() => this.schedule(core.nowMs() + core.extendIntervalMs(this.ttlMs), 0), (e) => {
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
    async release() {
        if (this.released)
            return;
        this.stopKeepalive();
        if (!this.lostError) {
            this.released = true;
            this.controller?.abort(this.releasedError());
        }
        this.released = true;
        await this.client.call('DELETE', core.lockPath(this.resource, this.lockId, this.kind), undefined, `release ${JSON.stringify(this.resource)}`);
    }
    /** `await using` releases the lock. */
    [Symbol.asyncDispose]() {
        return this.release();
    }
    /** One more hold of a reentrant lock: same owner and token. */
    reenter(options = {}) {
        if (this.kind !== 'reentrant')
            return Promise.reject(new TypeError('only a reentrant lock is re-entered'));
        this.check();
        return this.client.acquire('reentrant', this.resource, null, null, this, { ttlMs: this.ttlMs, ...options });
    }
    /**
     * Check the lock, then call `fn(token, signal)`: hand the token to your own
     * database's fenced write (docs/guarding-your-database.md), which must
     * refuse it if a larger token was seen.
     */
    async fenced(fn) {
        if (typeof fn !== 'function')
            throw new TypeError('fn must be a function');
        this.check();
        return fn(this.token, this.signal);
    }
    /** The resource's status now. */
    status() {
        if (this.kind === 'permit') {
            return Promise.reject(new TypeError("ask a semaphore's status with client.status(name, { kind: 'semaphore', permits })"));
        }
        const kind = this.kind === 'reentrant' ? 'reentrant' : this.kind === 'read' || this.kind === 'write' ? 'rw' : 'plain';
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
    name;
    /** The epoch: this leader's fencing token (== token); a later leader's is larger. */
    epoch;
    current;
    /** @internal */
    constructor(client, g, sentMs, ttlMs, onLost) {
        super(client, g, sentMs, ttlMs, onLost, null, true);
        this.name = g.name;
        this.epoch = g.epoch;
        this.current = typeof g.value === 'string' ? g.value : '';
    }
    /** What it proclaimed last. */
    get value() { return this.current; }
    /**
     * Proclaim a new value under the same epoch (observers are told); it
     * extends the lease too. Rejects with LostError (and aborts the signal)
     * once deposed.
     */
    async proclaim(value, ttlMs) {
        core.checkValue(value);
        const ttl = ttlMs === undefined ? this.ttlMs : core.checkInt(ttlMs, 'ttlMs', 1);
        await this.extendBy(core.proclaimPath(this.name, this.lockId), { value, ttl_ms: ttl }, ttl, `proclaim ${JSON.stringify(this.name)}`);
        this.current = value;
    }
    /** Resign (once) and stop the keep-alive: the next candidate in line is elected at once. */
    resign() {
        return this.release();
    }
    /** Who leads this election now (one request). */
    reading() {
        return this.client.leader(this.name);
    }
}
