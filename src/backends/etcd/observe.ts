/**
 * Seeing and breaking locks on etcd (docs/backends/etcd.md, "Listing" and "Breaking a lock"):
 * the state of one lock from its keys, one bounded page of every lock under the backend's
 * prefix, and a forced release in one guarded transaction.
 */
import { BackendUnavailableError, InvalidArgumentError, type Backend, type HolderState, type LockState } from '../kit.js';
import { entriesOf, rangeOp, type EtcdClient, type Entry } from './client.js';
import { encodeLockId, fenceKey, lockIdOf, lockPrefix, rangeEnd } from './layout.js';
import { holders, holding, type Holder } from './recipe.js';

/** At most this many distinct leases are asked for their remaining ttl per page. */
// The kit re-exports the seam's older types only; these are read off the seam itself.
export type ListRequest = Parameters<NonNullable<Backend['list']>>[0];
export type ListPage = Awaited<ReturnType<NonNullable<Backend['list']>>>;
type WaiterState = NonNullable<LockState['queue']>[number];

const MAX_TTL_LOOKUPS = 16;
/** Up to this many keys, a forced release guards every key it listed (etcd takes 128 compares). */
const MAX_GUARDED_KEYS = 100;
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
 * End every hold of `lockId` in one transaction guarded by the listing it decided from: the
 * holders' keys are deleted and the lock's fence key is written. Any write raises etcd's
 * revision, so the next key created (the next grant's token) is above the broken tokens by
 * at least two; the fence keeps that revision as the lock's `lastToken`.
 */
export async function forceRelease(client: EtcdClient, prefix: string, lockId: string): Promise<number> {
  const keyPrefix = lockPrefix(prefix, lockId);
  for (let round = 0; round < 8; round++) {
    const { entries, revision } = await client.list(keyPrefix);
    const keys = holders(entries);
    const hold = holding(keys);
    if (hold.length === 0) return 0;
    const guarded = keys.length <= MAX_GUARDED_KEYS ? keys : hold;
    const from = Buffer.from(keyPrefix);
    const res = await client.txn('force release', {
      compare: [
        ...guarded.map((k) => ({
          key: Buffer.from(k.key),
          target: 'Create' as const,
          result: 'Equal' as const,
          create_revision: k.createRevision.toString(),
        })),
        // No key created since the listing (a racing acquisition): decide again.
        {
          key: from,
          range_end: rangeEnd(from),
          target: 'Create' as const,
          result: 'Less' as const,
          create_revision: (revision + 1n).toString(),
        },
      ],
      success: [
        ...hold.map((k) => ({ request_delete_range: { key: Buffer.from(k.key) } })),
        {
          request_put: {
            key: Buffer.from(fenceKey(prefix, lockId)),
            value: Buffer.from(JSON.stringify({ broken: hold.map((k) => k.createRevision.toString()) })),
          },
        },
      ],
      failure: [],
    });
    if (res.succeeded) return hold.length;
  }
  throw new BackendUnavailableError('etcd', `etcd: the keys of '${lockId}' kept changing during a forced release`, { context: { lockId } });
}
