/**
 * fencelock for Node.js: fenced distributed locks through fencelockd, and
 * fenced writes to storage-guard, with nothing but Node's own modules.
 *
 * ```ts
 * import { Client, StorageGuard } from 'fencelock';
 * const client = new Client('http://127.0.0.1:7600');
 * await using lock = await client.lock('invoice:42', { waitMs: 5000 });
 * await store.put('invoice-42', { paid: true }, { lock });
 * ```
 *
 * A lock is kept alive from this process (every third of its TTL) until it
 * is released; `lock.signal` is aborted the moment it is lost, and
 * `lock.check()` throws LostError once it is no longer certainly held, by
 * the monotonic clock, even if the process was stopped and its keep-alive
 * could not run.
 *
 * ```ts
 * await using leader = await client.campaign('scheduler', '10.0.0.7:8080', { waitMs: 60000 });
 * await store.put('schedule', plan, { lock: leader });   // leader.epoch is the token
 * for await (const r of client.watch('scheduler', { signal })) console.log(r.epoch, r.value);
 * ```
 *
 * A leader is a lock too (kept alive, checked the same way, its signal
 * aborted when deposed); its epoch is its fencing token.
 *
 * @module
 */
export { Client, Leader, Lock, Reading, Status } from './client.js';
export type { CampaignOptions, LockOptions, ObserveOptions } from './client.js';
export { StorageGuard } from './storage.js';
export type { BatchOp, Conditions, Fenced } from './storage.js';
export type { TransportOptions } from './http.js';
export { lockRef, ownerId } from './core.js';
export type { AcquireKind, LockKind, StatusKind, WaitMode } from './core.js';
export * from './errors.js';
export declare const VERSION = "0.1.0";
