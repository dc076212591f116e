/**
 * Seeing and breaking locks on etcd (docs/backends/etcd.md, "Listing" and "Breaking a lock"):
 * the state of one lock from its keys, one bounded page of every lock under the backend's
 * prefix, and a forced release in one guarded transaction.
 */
import { InvalidArgumentError, type Backend, type HolderState, type LockState } from '../kit.js';
import type { IRequestOp } from 'etcd3';
import { createdAt, entriesOf, rangeOp, type EtcdClient, type Entry } from './client.js';
import { encodeLockId, fenceKey, lockIdOf, lockPrefix, rangeEnd } from './layout.js';
import { holders, holding, type Holder } from './recipe.js';
import { delayPrefix } from './delay.js';

/** At most this many distinct leases are asked for their remaining ttl per page. */
// The kit re-exports the seam's older types only; these are read off the seam itself.
export type ListRequest = Parameters<NonNullable<Backend['list']>>[0];
export type ListPage = Awaited<ReturnType<NonNullable<Backend['list']>>>;
type WaiterState = NonNullable<LockState['queue']>[number];

const MAX_TTL_LOOKUPS = 16;
/** Holder keys deleted per transaction (with the fence put, within etcd's 128 operations). */
const MAX_TXN_DELETES = 120;
/** Rounds of ending the holds a forced release's listing missed (each ends up to 120 or finds them gone). */
const MAX_BREAK_ROUNDS = 64;
const CURSOR_TAG = 'e1.';

/** Remaining ttl (ms) of some leases, by lease id, as the server reports it. */
export type LeaseTtls = ReadonlyMap<string, number>;

/** The state of `lockId` from its keys (any order); `fence` is the revision of its last forced release. */
export function lockState(lockId: string, entries: readonly Entry[], fence: bigint | undefined, ttls: LeaseTtls): LockState {
  const keys = holders(entries).sort((a, b) => (a.createRevision < b.createRevision ? -1 : 1));
  const hold = new Set(holding(keys));
  const last = keys.reduce<bigint | undefined>((m, k) => (m === undefined || k.createRevision > m ? k.createRevision : m), fence);
  const queue = keys.filter((k) => !hold.has(k)).map(waiterOf);
  return {
    lockId,
    holders: [...hold].map((k) => holderOf(k, ttls)),
    waiters: queue.length,
    queue,
    ...(last !== undefined ? { lastToken: last } : {}),
  };
}

const ownerOf = (k: Holder): string => k.owner ?? `lease:${BigInt(k.lease).toString(16)}`;

function holderOf(k: Holder, ttls: LeaseTtls): HolderState {
  const left = ttls.get(k.lease);
  // No acquiredAt: etcd keeps no time, and the writer's clock at the put dates the queue
  // entry, not the grant (docs/backends/etcd.md, "Listing").
  return {
    ownerId: ownerOf(k),
    kind: k.kind,
    token: k.createRevision,
    count: 1,
    ...(k.weight > 1 ? { weight: k.weight } : {}),
    ...(k.identity !== undefined ? { identity: k.identity } : {}),
    ...(left !== undefined ? { expiresInMs: left } : {}),
  };
}

function waiterOf(k: Holder): WaiterState {
  return {
    ownerId: ownerOf(k),
    kind: k.kind,
    fair: true,
    ...(k.identity !== undefined ? { identity: k.identity } : {}),
    ...(k.at !== undefined ? { since: k.at } : {}),
  };
}

/** The remaining ttl of the holders' leases (one request per distinct lease, at most a few). */
export async function leaseTtls(client: EtcdClient, states: readonly Entry[][], signal?: AbortSignal): Promise<LeaseTtls> {
  const leases = new Set<string>();
  for (const entries of states) {
    for (const k of holding(holders(entries))) if (k.lease !== '0' && leases.size < MAX_TTL_LOOKUPS) leases.add(k.lease);
  }
  const out = new Map<string, number>();
  await Promise.all(
    [...leases].map(async (id) => {
      const res = await client.call('lease ttl', () => client.raw.leaseClient.leaseTimeToLive({ ID: id }), signal);
      const ttl = Number(res.TTL);
      if (ttl >= 0) out.set(id, ttl * 1_000);
    }),
  );
  return out;
}

/** Read one lock's keys and its fence in one transaction (inspect). */
export async function readLock(client: EtcdClient, prefix: string, lockId: string): Promise<LockState> {
  const res = await client.txn('inspect', {
    compare: [],
    success: [rangeOp(lockPrefix(prefix, lockId)), { request_range: { key: Buffer.from(fenceKey(prefix, lockId)) } }],
    failure: [],
  });
  const entries = entriesOf(res.responses[0]?.response_range);
  const fence = entriesOf(res.responses[1]?.response_range)[0];
  const ttls = await leaseTtls(client, [entries]);
  return lockState(lockId, entries, fence ? fence.modRevision : undefined, ttls);
}

/** One lock's keys as a page found them (adjacent: they share the prefix `<segment>/`). */
interface Group {
  readonly segment: string;
  readonly lockId: string;
  entries: Entry[];
}

/** The lock segment of a key under `prefix`, when the key has a lock key's shape. */
function segmentOf(prefix: string, e: Entry): string | undefined {
  const rest = e.key.slice(prefix.length);
  const slash = rest.indexOf('/');
  if (slash <= 0) return undefined;
  const name = rest.slice(slash + 1);
  // Every holder's key is on a lease and is one level deep; anything else is not a lock's.
  if (name === '' || name.includes('/') || e.lease === '0') return undefined;
  return rest.slice(0, slash);
}

function groupsOf(prefix: string, entries: readonly Entry[]): Group[] {
  const groups: Group[] = [];
  for (const e of entries) {
    const segment = segmentOf(prefix, e);
    const lockId = segment === undefined ? undefined : lockIdOf(segment);
    if (segment === undefined || lockId === undefined) continue;
    const last = groups[groups.length - 1];
    if (last?.segment === segment) last.entries.push(e);
    else groups.push({ segment, lockId, entries: [e] });
  }
  return groups;
}

const after = (prefix: string, segment: string): Buffer => rangeEnd(Buffer.from(`${prefix}${segment}/`));
const encodeCursor = (start: Buffer): string => `${CURSOR_TAG}${start.toString('base64url')}`;

/** The start key a cursor names; it must lie inside the listing's range. */
function decodeCursor(cursor: string, base: Buffer): Buffer {
  const start = cursor.startsWith(CURSOR_TAG) ? Buffer.from(cursor.slice(CURSOR_TAG.length), 'base64url') : undefined;
  if (!start || start.toString('base64url') !== cursor.slice(CURSOR_TAG.length) || !start.subarray(0, base.length).equals(base)) {
    throw new InvalidArgumentError('cursor', 'not a cursor of this etcd listing');
  }
  return start;
}

/**
 * One page: a range from the cursor key with a limit of `limit + 1` keys, cut at a lock
 * boundary. A lock whose keys run past the range's end is left for the next page, unless it
 * is the only one (then its keys are read in full, as inspect does).
 */
export async function listPage(client: EtcdClient, prefix: string, req: ListRequest): Promise<ListPage> {
  const base = Buffer.from(`${prefix}${encodeLockId(req.prefix)}`);
  const start = req.cursor === undefined ? base : decodeCursor(req.cursor, base);
  const res = await client.call(
    'list',
    () =>
      client.raw.kv.range({
        key: start.length === 0 ? Buffer.from([0]) : start,
        range_end: rangeEnd(base),
        limit: req.limit + 1,
      }),
    req.signal,
  );
  const raw = entriesOf(res);
  let groups = groupsOf(prefix, raw);
  let cursor: Buffer | undefined;
  if (groups.length > req.limit) {
    groups = groups.slice(0, req.limit);
    cursor = after(prefix, groups[groups.length - 1]?.segment ?? '');
  } else if (res.more) {
    const lastKey = raw[raw.length - 1]?.key ?? '';
    const tail = groups[groups.length - 1];
    if (tail && lastKey.startsWith(`${prefix}${tail.segment}/`)) {
      // The last lock may go on past this range.
      if (groups.length > 1) groups = groups.slice(0, -1);
      else
        tail.entries = (await client.list(`${prefix}${tail.segment}/`, req.signal)).entries.filter(
          (e) => segmentOf(prefix, e) === tail.segment,
        );
    }
    const end = groups[groups.length - 1];
    cursor = end ? after(prefix, end.segment) : Buffer.concat([Buffer.from(lastKey), Buffer.from([0])]);
  }
  const ttls = await leaseTtls(
    client,
    groups.map((g) => g.entries),
    req.signal,
  );
  return {
    locks: groups.map((g) => lockState(g.lockId, g.entries, undefined, ttls)),
    cursor: cursor === undefined ? undefined : encodeCursor(cursor),
  };
}

/**
 * End every hold of `lockId`: one transaction deletes the holders' keys and writes the
 * lock's fence key (revision R). Any write raises etcd's revision, so the next key created
 * (the next grant's token) is above the broken tokens by at least two; the fence keeps R as
 * the lock's `lastToken`. Holds that began between the listing and R (a racing acquisition,
 * a waiter granted as a holder left) are read from revision R − 1 and ended too, guarded by
 * their create revision, so every hold that existed at the break ends; waiters stay.
 */
export async function forceRelease(client: EtcdClient, prefix: string, lockId: string): Promise<number> {
  const keyPrefix = lockPrefix(prefix, lockId);
  const hold = holding(holders((await client.list(keyPrefix)).entries));
  if (hold.length === 0) {
    // Only a lock-delay may stand (a holder that vanished): a break ends it too.
    await client.txn('force release', { compare: [], success: [dropMarkersOp(prefix, lockId)], failure: [] });
    return 0;
  }
  const first = hold.slice(0, MAX_TXN_DELETES);
  const res = await client.txn('force release', {
    compare: [],
    // The delay markers go too: a break frees the lock at once (docs/backends/etcd.md, "Lock-delay").
    success: [...first.map(deleteOp), fenceOp(prefix, lockId, hold), dropMarkersOp(prefix, lockId)],
    failure: [],
  });
  let ended = res.responses.slice(0, first.length).filter((r) => (r.response_delete_range?.deleted ?? '0') !== '0').length;
  const at = BigInt(res.header.revision);
  const range = rangeOp(keyPrefix).request_range ?? {};
  const before = await client.call('force release', () => client.raw.kv.range({ ...range, revision: (at - 1n).toString() }));
  let rest = holding(holders(entriesOf(before))).filter((k) => !first.some((f) => same(f, k)));
  for (let round = 0; rest.length > 0 && round < MAX_BREAK_ROUNDS; round++) {
    const now = (await client.list(keyPrefix)).entries;
    rest = rest.filter((k) => now.some((e) => same(e, k)));
    const chunk = rest.slice(0, MAX_TXN_DELETES);
    if (chunk.length === 0) break;
    const swept = await client.txn('force release', {
      compare: chunk.map((k) => createdAt(k.key, k.createRevision)),
      success: chunk.map(deleteOp),
      failure: [],
    });
    if (!swept.succeeded) continue;
    ended += chunk.length;
    rest = rest.slice(chunk.length);
  }
  return ended;
}

function dropMarkersOp(prefix: string, lockId: string): IRequestOp {
  const key = Buffer.from(delayPrefix(prefix, lockId));
  return { request_delete_range: { key, range_end: rangeEnd(key) } };
}

const same = (a: Entry, b: Entry): boolean => a.key === b.key && a.createRevision === b.createRevision;
const deleteOp = (k: Entry): IRequestOp => ({ request_delete_range: { key: Buffer.from(k.key) } });

function fenceOp(prefix: string, lockId: string, broken: readonly Holder[]): IRequestOp {
  const value = JSON.stringify({ broken: broken.slice(0, 16).map((k) => k.createRevision.toString()) });
  return { request_put: { key: Buffer.from(fenceKey(prefix, lockId)), value: Buffer.from(value) } };
}
