/**
 * The storage-guard client (docs/storage-guard.md): records, conditional
 * writes, batches, deletes, fences and the audit log; each fenced call sends
 * a lock's token in the `Fencing-Token` header.
 *
 * @module
 */
import * as core from './core.js';
import { ProtocolError, fromAnswer } from './errors.js';
import type { Json } from './errors.js';
import { Transport } from './http.js';
import type { TransportOptions } from './http.js';

const KEY_MAX = 1024;

/** What a fenced call sends: a held lock (checked valid first, then its token), or a token. */
export interface Fenced {
  /** A held lock: checked, then its token is sent (LostError, and nothing sent, if it is not valid). */
  lock?: { token: number; check(): void };
  /** A token as a number, sent as it is. */
  token?: number;
}

/** Preconditions of a put or delete. */
export interface Conditions {
  /** Only if the record is at this version (0: only if there is none). */
  ifVersion?: number;
  /** Only if the record exists. */
  ifExists?: boolean;
  /** The lock's name when it is not the key. */
  resource?: string;
}

/** One operation of a batch. */
export type BatchOp =
  | { op: 'put'; key: string; value: unknown; resource?: string; if_version?: number }
  | { op: 'delete'; key: string; resource?: string; if_version?: number }
  | { op: 'check'; key: string; version: number; resource?: string };

function checkKey(k: unknown, name = 'key'): string {
  if (typeof k !== 'string') throw new TypeError(`${name} must be a string`);
  const n = Buffer.byteLength(k, 'utf8');
  if (n === 0 || n > KEY_MAX || k.includes('\0')) throw new RangeError(`${name} must be 1..${KEY_MAX} bytes without NUL`);
  return k;
}

function tokenOf(f: Fenced, required = true): number | null {
  if (f.lock !== undefined && f.token !== undefined) throw new TypeError('give lock or token, not both');
  if (f.lock !== undefined) {
    if (f.lock === null || typeof f.lock.check !== 'function') throw new TypeError('lock must be a fencelock Lock');
    f.lock.check();
    return core.checkToken(f.lock.token);
  }
  if (f.token !== undefined) return core.checkToken(f.token);
  if (required) throw new TypeError('a fenced operation needs lock or token');
  return null;
}

function precondition(c: Conditions): Record<string, string> {
  if (c.ifVersion !== undefined && c.ifExists) throw new TypeError('give ifVersion or ifExists, not both');
  if (c.ifVersion !== undefined) {
    core.checkInt(c.ifVersion, 'ifVersion', 0);
    return c.ifVersion === 0 ? { 'If-None-Match': '*' } : { 'If-Match': `"${c.ifVersion}"` };
  }
  return c.ifExists ? { 'If-Match': '*' } : {};
}

/**
 * A client of one storage-guard (`url` like `http://127.0.0.1:8080`), with
 * the same options as {@link Client} (token, ca, timeoutMs, maxSockets).
 */
export class StorageGuard {
  private readonly t: Transport;

  constructor(url: string, options: TransportOptions = {}) {
    this.t = new Transport(url, options);
  }

  close(): void {
    this.t.close();
  }

  private async call(method: string, path: string, body: unknown, headers: Record<string, string>, ok: number[],
    what: string): Promise<Json | null> {
    const a = await this.t.request(method, path, body, headers, { what });
    if (!ok.includes(a.status)) throw fromAnswer(a.status, a.body, what);
    if (a.status === 404) return null;
    if (a.body === null || typeof a.body !== 'object') throw new ProtocolError(`${what}: the answer is not a JSON object`, a.status, 'protocol');
    return a.body as Json;
  }

  /**
   * Write `value` (any JSON value) under `key`, fenced. Resolves with
   * `{key, version, token, resource, previous_token}`; rejects with
   * StaleTokenError (409), VersionMismatchError (412), LostError (the lock
   * is no longer valid: nothing sent), ...
   */
  async put(key: string, value: unknown, options: Fenced & Conditions): Promise<Json> {
    checkKey(key);
    const token = tokenOf(options ?? {});
    const body: Record<string, unknown> = { value };
    if (options.resource !== undefined) body.resource = checkKey(options.resource, 'resource');
    const h = { 'Fencing-Token': String(token), ...precondition(options) };
    return (await this.call('PUT', '/v1/records/' + core.quote(key), body, h, [200], `put ${JSON.stringify(key)}`))!;
  }

  /**
   * Read a record, or null if there is none. With a lock or token the read
   * is fenced (admitted like a write); `raise: false` is a read lock
   * holder's read, which never moves the fence.
   */
  get(key: string, options: Fenced & { resource?: string; raise?: boolean } = {}): Promise<Json | null> {
    checkKey(key);
    const token = tokenOf(options, false);
    const q: string[] = [];
    const h: Record<string, string> = {};
    if (token !== null) {
      h['Fencing-Token'] = String(token);
      if (options.raise === false) q.push('raise=0');
    } else if (options.raise === false) {
      throw new TypeError("raise: false is a reader's read: it needs lock or token");
    }
    if (options.resource !== undefined) {
      if (token === null) throw new TypeError('resource is for a fenced read: give lock or token');
      q.push('resource=' + core.quote(checkKey(options.resource, 'resource')));
    }
    return this.call('GET', '/v1/records/' + core.quote(key) + (q.length ? '?' + q.join('&') : ''), undefined, h,
      [200, 404], `get ${JSON.stringify(key)}`);
  }

  /** Delete a record, fenced like a write. Resolves true if there was one. */
  async delete(key: string, options: Fenced & Conditions): Promise<boolean> {
    checkKey(key);
    const token = tokenOf(options ?? {});
    const h = { 'Fencing-Token': String(token), ...precondition(options) };
    const q = options.resource !== undefined ? '?resource=' + core.quote(checkKey(options.resource, 'resource')) : '';
    return (await this.call('DELETE', '/v1/records/' + core.quote(key) + q, undefined, h, [200, 404],
      `delete ${JSON.stringify(key)}`)) !== null;
  }

  /** Several puts, deletes and checks under one token, all or nothing. */
  async batch(ops: BatchOp[], options: Fenced): Promise<Json> {
    if (!Array.isArray(ops) || ops.length < 1 || ops.length > 100) throw new RangeError('ops must be an array of 1..100 operations');
    for (const op of ops) {
      if (op === null || typeof op !== 'object' || !['put', 'delete', 'check'].includes(op.op)) {
        throw new TypeError('each op is {op: "put" | "delete" | "check", key, ...}');
      }
      checkKey(op.key);
      if (op.op === 'check') core.checkInt(op.version, 'version', 0);
    }
    const token = tokenOf(options ?? {});
    return (await this.call('POST', '/v1/batch', { ops }, { 'Fencing-Token': String(token) }, [200], 'batch'))!;
  }

  /** The last token admitted for `resource` (0: none yet). */
  async fence(resource: string): Promise<number> {
    const a = await this.call('GET', '/v1/fences/' + core.quote(checkKey(resource, 'resource')), undefined, {}, [200],
      `fence ${JSON.stringify(resource)}`);
    return Number(a?.last_token ?? 0);
  }

  /** An operator's reset of a fence (admin clients only; ForbiddenError otherwise). Breaks fencing: see storage-guard.md. */
  async resetFence(resource: string, token: number): Promise<Json> {
    checkKey(resource, 'resource');
    core.checkInt(token, 'token', 0, core.TOKEN_MAX);
    return (await this.call('POST', `/v1/fences/${core.quote(resource)}/reset`, { token }, {}, [200],
      `reset fence ${JSON.stringify(resource)}`))!;
  }

  /** A page of the audit log: `{entries, next_after}`. */
  async log(options: { resource?: string; key?: string; after?: number; limit?: number } = {}): Promise<Json> {
    const q: string[] = [];
    if (options.resource !== undefined) q.push('resource=' + core.quote(checkKey(options.resource, 'resource')));
    if (options.key !== undefined) q.push('key=' + core.quote(checkKey(options.key)));
    if (options.after !== undefined) q.push('after=' + core.checkInt(options.after, 'after', 0));
    if (options.limit !== undefined) q.push('limit=' + core.checkInt(options.limit, 'limit', 1, 1000));
    return (await this.call('GET', '/v1/log' + (q.length ? '?' + q.join('&') : ''), undefined, {}, [200], 'log'))!;
  }

  health(): Promise<Json | null> {
    return this.call('GET', '/healthz', undefined, {}, [200], 'health');
  }
}
