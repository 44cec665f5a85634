/**
 * The parts without I/O: argument checks, request paths and bodies, lock
 * references, and the monotonic validity of a lock.
 *
 * The validity rule, the same in every fencelock client: the client reads
 * the monotonic clock just before it sends an acquisition; the lock is valid
 * until that instant plus the server's `validity_ms` (counted from the
 * request), and only a successful extension moves it, to its own send time
 * plus its `validity_ms`. A process that was stopped past its validity finds
 * the lock invalid the moment it runs again, whether its keep-alive ran or not.
 *
 * @module
 */
import { createHash } from 'node:crypto';

export const RESOURCE_MAX = 512;
export const VALUE_MAX = 256;
export const MULTI_MAX = 16;
export const PERMITS_MAX = 1024;
export const TOKEN_MAX = Number.MAX_SAFE_INTEGER; // 2^53 - 1, as storage-guard and fencing.h

/** The monotonic clock (CLOCK_MONOTONIC on Linux, as process.hrtime), in ms. */
export function nowMs(): number {
  return Number(process.hrtime.bigint()) / 1e6;
}

const LOCK_ID = /^[0-9a-f]{40}$/;

export function checkLockId(id: unknown): string {
  if (typeof id !== 'string' || !LOCK_ID.test(id)) {
    throw new TypeError(`a lock id is 40 lowercase hex digits, not ${JSON.stringify(id)}`);
  }
  return id;
}

/**
 * The non-secret reference of a lock id that fencelockd reports as
 * `holder_ref`: the first 16 lowercase hex digits of SHA-256 of the
 * acquisition's id (the 40-character id, in ASCII, with its last six
 * digits, the attempt's number, as "0"), so that every attempt of an
 * acquisition and a reentrant lock's first hold share it.
 */
export function lockRef(lockId: string): string {
  checkLockId(lockId);
  return createHash('sha256').update(lockId.slice(0, 34) + '000000', 'ascii').digest('hex').slice(0, 16);
}

/** A reentrant hold's owner: the first hold's id with its last six digits zeroed. */
export function ownerId(lockId: string): string {
  checkLockId(lockId);
  return lockId.slice(0, 34) + '000000';
}

export function checkResource(r: unknown, name = 'resource'): string {
  if (typeof r !== 'string') throw new TypeError(`${name} must be a string, not ${typeof r}`);
  const n = Buffer.byteLength(r, 'utf8');
  if (n === 0 || n > RESOURCE_MAX || r.includes('\0')) {
    throw new RangeError(`${name} must be 1..${RESOURCE_MAX} bytes without NUL, not ${n} bytes`);
  }
  return r;
}

export function checkResources(rs: unknown): string[] {
  if (!Array.isArray(rs)) throw new TypeError('resources must be an array of strings');
  if (rs.length < 1 || rs.length > MULTI_MAX) {
    throw new RangeError(`resources must hold 1..${MULTI_MAX} names, not ${rs.length}`);
  }
  for (const r of rs) {
    checkResource(r, 'each resource');
    if ((r as string).includes('\n')) throw new RangeError('a resource of a multi-resource lock holds no newline');
  }
  if (Buffer.byteLength(rs.join('\n'), 'utf8') > RESOURCE_MAX) {
    throw new RangeError(`resources must be ${RESOURCE_MAX} bytes in all at most`);
  }
  return [...(rs as string[])];
}

export function checkInt(v: unknown, name: string, lo: number, hi = Number.MAX_SAFE_INTEGER): number {
  if (typeof v !== 'number' || !Number.isInteger(v)) throw new TypeError(`${name} must be an integer, not ${String(v)}`);
  if (v < lo || v > hi) throw new RangeError(`${name} must be in ${lo}..${hi}, not ${v}`);
  return v;
}

export type WaitMode = 'notify' | 'fair' | 'poll';

export function checkWaitMode(w: unknown): WaitMode {
  if (w !== 'notify' && w !== 'fair' && w !== 'poll') {
    throw new RangeError(`wait must be "notify", "fair" or "poll", not ${JSON.stringify(w)}`);
  }
  return w;
}

export function checkToken(t: unknown, name = 'token'): number {
  return checkInt(t, name, 1, TOKEN_MAX);
}

/** Percent-encode a path segment: every byte but the unreserved ones. */
export function quote(s: string): string {
  return encodeURIComponent(s).replace(/[!'()*]/g, (c) => '%' + c.charCodeAt(0).toString(16).toUpperCase());
}

export type AcquireKind = 'plain' | 'multi' | 'read' | 'write' | 'semaphore' | 'reentrant';
/**
 * A lock's kind as the server names it in a grant (and as extend and release
 * need it); 'leader' is an election's leader, extended and resigned on its
 * election's routes.
 */
export type LockKind = 'plain' | 'permit' | 'multi' | 'reentrant' | 'read' | 'write' | 'leader';

export function acquireRequest(kind: AcquireKind, resource: string | null, resources: string[] | null, ttlMs: number,
  waitMs: number, wait: WaitMode, permits: number | null, reenterId: string | null): [string, Record<string, unknown>] {
  const body: Record<string, unknown> = { ttl_ms: ttlMs, wait_ms: waitMs, wait };
  if (kind !== 'plain' && kind !== 'multi') body.kind = kind;
  if (permits !== null) body.permits = permits;
  if (reenterId !== null) body.lock_id = reenterId;
  if (kind === 'multi') {
    body.resources = resources ?? [];
    return ['/v1/locks', body];
  }
  return ['/v1/locks/' + quote(resource ?? ''), body];
}

export function lockPath(resource: string, lockId: string, kind: string): string {
  if (kind === 'leader') return `/v1/elections/${quote(resource)}/${lockId}`;
  return `/v1/locks/${quote(resource)}/${lockId}${kind === 'plain' ? '' : '?kind=' + kind}`;
}

export function extendPath(resource: string, lockId: string, kind: string): string {
  if (kind === 'leader') return `/v1/elections/${quote(resource)}/${lockId}/extend`;
  return `/v1/locks/${quote(resource)}/${lockId}/extend${kind === 'plain' ? '' : '?kind=' + kind}`;
}

// ---- elections ----

/** What a leader proclaims: a string of at most 256 bytes of UTF-8, without NUL. */
export function checkValue(v: unknown, name = 'value'): string {
  if (typeof v !== 'string') throw new TypeError(`${name} must be a string, not ${typeof v}`);
  const n = Buffer.byteLength(v, 'utf8');
  if (n > VALUE_MAX || v.includes('\0')) throw new RangeError(`${name} must be at most ${VALUE_MAX} bytes without NUL, not ${n} bytes`);
  return v;
}

export function electionPath(name: string): string {
  return '/v1/elections/' + quote(name);
}

export function proclaimPath(name: string, lockId: string): string {
  return `/v1/elections/${quote(name)}/${lockId}/proclaim`;
}

/** A query value's encoding: every byte but the unreserved ones and those a query may carry as they are. */
export function quoteValue(s: string): string {
  return encodeURIComponent(s).replace(/%(24|2C|2F|3A|3B|3F|40)/g, (m) => decodeURIComponent(m));
}

/**
 * A reading (afterEpoch null), or the next one that differs from afterEpoch
 * (0: no leader) and afterValue, waiting up to waitMs. A value whose
 * encoding is over 256 bytes is left out (fencelockd would refuse it).
 */
export function leaderPath(name: string, afterEpoch: number | null = null, afterValue: string | null = null, waitMs = 0): string {
  const path = electionPath(name);
  if (afterEpoch === null) return path;
  let q = `?after=${afterEpoch}`;
  if (afterValue !== null) q += '&value=' + quoteValue(afterValue); // decoded by fencelockd
  if (waitMs) q += `&wait_ms=${waitMs}`;
  return path + q;
}

/** Whether two readings name the same leader, epoch and value (or both none). */
export function sameReading(a: Record<string, unknown>, b: Record<string, unknown>): boolean {
  if (Boolean(a.leader) !== Boolean(b.leader)) return false;
  return !a.leader || (a.epoch === b.epoch && a.value === b.value);
}

export type StatusKind = 'plain' | 'rw' | 'reentrant' | 'semaphore';

export function statusPath(resource: string, kind: StatusKind = 'plain', permits?: number): string {
  const r = quote(resource);
  if (kind === 'semaphore') return `/v1/locks/${r}?kind=semaphore&permits=${permits ?? 0}`;
  if (kind === 'rw') return `/v1/locks/${r}?kind=rw`;
  if (kind === 'reentrant') return `/v1/locks/${r}?kind=reentrant`;
  return `/v1/locks/${r}`;
}

/** The monotonic validity of one lock (see the module's comment). */
export class Validity {
  acquiredMs: number;
  validUntilMs: number;

  constructor(sentMs: number, validityMs: number) {
    this.acquiredMs = sentMs;
    this.validUntilMs = sentMs + validityMs;
  }

  /** An extension sent at sentMs answered validityMs; never moved back. */
  extended(sentMs: number, validityMs: number): void {
    this.validUntilMs = Math.max(this.validUntilMs, sentMs + validityMs);
  }

  remainingMs(now = nowMs()): number {
    return Math.max(0, this.validUntilMs - now);
  }

  valid(now = nowMs()): boolean {
    return now < this.validUntilMs;
  }
}

/**
 * Whether a grant must be confirmed by an extension before it is used.
 * fencelockd counts a grant's validity_ms from the start of the attempt
 * that won it, which after a wait is later than the request, and the client
 * cannot know when. Counting from the request's send is safe but leaves
 * little after a wait; counting from the answer's arrival is not safe. So a
 * grant that took more than a tenth of its validity to arrive is extended
 * at once, its validity counted from that extension's send. A grant without
 * a wait costs nothing more.
 */
export function needsConfirm(sentMs: number, receivedMs: number, validityMs: number): boolean {
  return receivedMs - sentMs > validityMs / 10;
}

/** The keep-alive extends every third of the TTL. */
export function extendIntervalMs(ttlMs: number): number {
  return ttlMs / 3;
}

/** After an extension that failed in a way that may pass: a tenth of the TTL (at least 20 ms), growing to a third. */
export function retryDelayMs(ttlMs: number, attempt: number): number {
  const base = Math.max(20, ttlMs / 10);
  return Math.min(base * 2 ** Math.min(attempt, 4), Math.max(base, ttlMs / 3));
}

/** Between acquisitions retried while the wait bound lasts: 50 ms doubling to 1 s. */
export function acquireBackoffMs(attempt: number): number {
  return Math.min(50 * 2 ** Math.min(attempt, 5), 1000);
}

/**
 * The wait_ms of a retried acquisition: what is left, rounded down to a
 * whole second (100 ms below one). fencelockd keeps one lockcore client per
 * distinct (ttl_ms, wait_ms, wait) and answers busy past --max-clients: a
 * client must not send a new wait_ms with every try.
 */
export function retryWaitMs(leftMs: number): number {
  const left = Math.max(0, Math.floor(leftMs));
  return left >= 1000 ? left - (left % 1000) : left - (left % 100);
}

/** Failures an acquisition retries while its wait lasts: nothing was granted. */
export const ACQUIRE_RETRY_CODES: ReadonlySet<string> = new Set(['shutting_down', 'busy', 'no_quorum', 'unreachable']);
/** Answers to an extension after which the keep-alive gives the lock up at once. */
export const KEEPALIVE_FATAL_CODES: ReadonlySet<string> = new Set(['lost', 'forbidden', 'unauthorized']);

/** Whether a status names one of ids as the holder: by holder_ref, else by the older servers' holder. */
export function statusHeldBy(status: Record<string, unknown>, ids: string[]): boolean {
  const refs = ids.map(lockRef);
  const entries = Array.isArray(status.permit) ? (status.permit as Record<string, unknown>[]) : [status];
  for (const e of entries) {
    if (e === null || typeof e !== 'object') continue;
    if (typeof e.holder_ref === 'string' && refs.includes(e.holder_ref)) return true;
    if (typeof e.holder === 'string' && ids.includes(e.holder)) return true;
  }
  return false;
}
