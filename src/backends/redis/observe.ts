/**
 * Seeing and breaking the locks of one Redis: the INSPECT reply read into a `LockState`,
 * `list` by SCAN over the key layout (one INSPECT per lock found, all sent at once on the
 * one connection, so they go out pipelined), and FORCE. See docs/backends/redis.md, "Listing".
 */
import type { ListPage, ListRequest, WaiterState } from '../../backend.js';
import { UnsupportedError } from '../../errors.js';
import type { HolderState, LockKind, LockState } from '../kit.js';
import type { RedisCommands } from '../redis-wire/commands.js';
import { keysAt, lockIdAt, readWho } from '../redis-wire/keys.js';
import { lockPattern, readCursor, scanPage, writeCursor, type Scan } from '../redis-wire/scan.js';
import { INSPECT } from './scripts.js';

const LETTER_KIND: Readonly<Record<string, LockKind>> = { m: 'mutex', r: 'read', w: 'write', s: 'semaphore' };

/** A hold record: `kind|count|token|expiresAt|lockDelay|mark[|acquiredAt|who]` (scripts.ts). */
const HOLD = /^([a-z])\|(\d+)\|(\d+)\|(\d+)\|\d+\|[^|]*(?:\|(\d+)\|([\s\S]*))?$/;
/** A queue entry: `<kind letter><fair>|ttl|lockDelay|secret|ownerId`. */
const ENTRY = /^([a-z])([01])\d*\|\d+\|\d+\|[^|]*\|([\s\S]*)$/;
/** The end of a semaphore hold's field: `\0<permits>\0<weight>` (absent in older holds). */
const SIZED = /\0(\d+)\0(\d+)$/;

/** An INSPECT reply read: the state, whether the hold hash exists, and the lockId the records carry. */
export interface Inspected {
  readonly state: LockState;
  readonly held: boolean;
  readonly storedId: string | undefined;
}

/** Read INSPECT's reply `{last, now, hashExists, n, (field, value)×n, (entry, record)…}`. */
export function readInspect(lockId: string, reply: unknown): Inspected {
  const r = Array.isArray(reply) ? (reply as unknown[]).map((v) => String(v ?? '')) : [];
  const [last = '', nowText = '0', exists = '0', n = '0'] = r;
  const now = Number(nowText);
  let storedId: string | undefined;
  const holders: HolderState[] = [];
  const end = 4 + 2 * Number(n);
  for (let i = 4; i + 1 < end; i += 2) {
    const field = r[i] ?? '';
    const m = HOLD.exec(r[i + 1] ?? '');
    if (!m) continue;
    const leaseEndsAt = Number(m[4]);
    const who = m[6] === undefined ? undefined : readWho(m[6]);
    storedId ??= who?.lockId;
    const nul = field.indexOf('\0');
    const weight = Number(SIZED.exec(field)?.[2] ?? '1');
    holders.push({
      ownerId: nul >= 0 ? field.slice(0, nul) : field,
      kind: LETTER_KIND[m[1] ?? 'm'] ?? 'mutex',
      token: BigInt(m[3] ?? '0'),
      expiresInMs: Math.max(0, leaseEndsAt - now),
      count: Number(m[2]),
      ...(weight > 1 ? { weight } : {}),
      leaseEndsAt,
      ...(m[5] === undefined ? {} : { acquiredAt: Number(m[5]) }),
      ...(who ? { identity: who.identity } : {}),
    });
  }
  const queue: WaiterState[] = [];
  for (let i = end; i + 1 < r.length; i += 2) {
    const m = ENTRY.exec(r[i] ?? '');
    if (!m) continue;
    const rec = /^(\d+)\|([\s\S]*)$/.exec(r[i + 1] ?? '');
    const who = rec?.[2] === undefined ? undefined : readWho(rec[2]);
    storedId ??= who?.lockId;
    queue.push({
      ownerId: m[3] ?? '',
      kind: LETTER_KIND[m[1] ?? 'm'] ?? 'mutex',
      fair: m[2] === '1',
      ...(who ? { identity: who.identity } : {}),
      ...(rec?.[1] === undefined ? {} : { since: Number(rec[1]) }),
    });
  }
  const state: LockState = {
    lockId,
    holders,
    waiters: queue.length,
    queue,
    ...(last === '' ? {} : { lastToken: BigInt(last) }),
  };
  return { state, held: exists === '1', storedId };
}

/** What {@link listPage} needs of the backend. */
export interface ListContext {
  readonly commands: RedisCommands;
  /** The backend's key prefix. */
  readonly prefix: string;
  /** The client's SCAN, when it has one a listing can use (not a Cluster). */
  readonly scan: Scan | undefined;
}

/**
 * One page of the locks that have a holder or a waiter. SCAN matches the hold hash (`:h`) and
 * the queue (`:q`) of every lock whose id may start with the prefix (its first character, or
 * a SHA-1 tag); a lock is listed from its hold hash while that exists and from its queue only
 * when it does not, so a lock held throughout the paging is listed once.
 */
export async function listPage(ctx: ListContext, req: ListRequest): Promise<ListPage> {
  if (!ctx.scan) throw new UnsupportedError('redis', 'list() on a Redis Cluster client (it pages by SCAN on one node)');
  const from = readCursor(req.cursor, 1, req.limit);
  const pattern = lockPattern(ctx.prefix, req.prefix, ':[hq]');
  const take = async (_node: number, keys: readonly string[]): Promise<LockState[]> => {
    const found = await Promise.all(keys.map((key) => inspectAt(ctx, key)));
    return found.filter((s): s is LockState => s !== undefined && s.lockId.startsWith(req.prefix));
  };
  const { items, next } = await scanPage([ctx.scan], from, pattern, req.limit, take, req.signal);
  return { locks: items, cursor: next && writeCursor(next) };
}

/** The state of the lock whose `:h` or `:q` key SCAN found, when it is listed from that key. */
async function inspectAt(ctx: ListContext, key: string): Promise<LockState | undefined> {
  const base = key.slice(0, -2);
  const [h, x, t, q, qx, qw] = keysAt(base);
  const reply = await ctx.commands.eval(INSPECT, [h, x, t, q, qx, qw], []);
  const known = lockIdAt(ctx.prefix, base);
  const got = readInspect(known ?? '', reply);
  const lockId = known ?? got.storedId;
  if (lockId === undefined) return undefined;
  if (key.endsWith(':q') && got.held) return undefined;
  if (got.state.holders.length === 0 && got.state.waiters === 0) return undefined;
  return { ...got.state, lockId };
}
