/**
 * The transactions of an acquisition (docs/backends/etcd.md, "The recipe"): place our key and
 * list the lock in one transaction, list it again while our key stands, and the ticket those
 * work on. Who holds is decided from the listing in recipe.ts; the backend owns the key names.
 */
import { randomBytes } from 'node:crypto';
import { exclusiveKind, type AcquireRequest } from '../kit.js';
import { createdAt, entriesOf, rangeOp, youngestOp, type EtcdClient, type Entry } from './client.js';
import { delayPrefix } from './delay.js';
import { encodeValue, lockPrefix, parseValue } from './layout.js';
import type { KeptAliveLease } from './lease.js';
import type { EtcdTicket, Holder, WatchSpec } from './recipe.js';

/**
 * The keys of a lock, its delay markers (docs/backends/etcd.md, "Lock-delay") and the revision
 * read at; `complete` when every key older than ours is among the entries.
 */
export type Listing = { readonly entries: Entry[]; readonly markers: Entry[]; readonly revision: bigint; readonly complete: boolean };

/**
 * The `last` watch of an exclusive waiter with exactly one key before its own, when that key's
 * deletion alone makes us the holder: the listing is complete, no delay marker stands (no
 * phantom holder), and that key says it writes none when it holds (a foreign key never does; a
 * key of an older locksmith does not say, so it gets the plain watch and a re-listing).
 */
export function lastBlocker(t: EtcdTicket, rev: bigint, keys: readonly Holder[], listing: Listing): WatchSpec | undefined {
  if (!t.exclusive || !listing.complete || listing.markers.length > 0) return undefined;
  const older = keys.filter((k) => k.createRevision < rev);
  const only = older[0];
  if (older.length !== 1 || only?.marks !== false) return undefined;
  return { type: 'last', key: only.key, prefix: t.prefix, own: t.key };
}

/** A ticket for `req` on `session`, its key not yet named (the backend names it). */
export function unnamedTicket(req: AcquireRequest<EtcdTicket>, session: KeptAliveLease, prefix: string): EtcdTicket {
  const nonce = randomBytes(8).toString('hex');
  return {
    session,
    lockId: req.lockId,
    exclusive: exclusiveKind(req.kind),
    prefix: lockPrefix(prefix, req.lockId),
    key: '',
    value: encodeValue({
      kind: req.kind,
      owner: req.ownerId,
      nonce,
      permits: req.kind === 'semaphore' ? req.permits : 1,
      weight: req.weight,
      identity: req.identity,
      at: Date.now(),
      marks: req.lockDelayMs > 0,
    }),
    nonce,
    rev: undefined,
    watch: undefined,
    seenAt: 0n,
    heldAt: undefined,
  };
}

/**
 * Create our key (if its create revision is 0) and list the lock in the same transaction.
 * A create that landed although its reply was lost (the client retries) finds our own
 * key: the nonce tells. A stranger's key of the same name (one of ours whose delete was
 * lost) makes us pick another name (`rename`). Undefined: try again.
 */
export async function createAndList(
  client: EtcdClient,
  prefix: string,
  t: EtcdTicket,
  rename: (t: EtcdTicket) => void,
): Promise<Listing | undefined> {
  const key = Buffer.from(t.key);
  // Our new key is the youngest under the prefix, so the two youngest are ours and the one
  // just older: all an exclusive waiter needs. The other kinds read every key.
  const listing = t.exclusive ? youngestOp(t.prefix, 2) : rangeOp(t.prefix);
  const res = await client.txn('create', {
    compare: [createdAt(t.key, 0n)],
    success: [{ request_put: { key, value: t.value, lease: t.session.id } }, listing, rangeOp(delayPrefix(prefix, t.lockId))],
    failure: [{ request_range: { key } }],
  });
  if (res.succeeded) {
    t.rev = BigInt(res.header.revision);
    const [, keys, markers] = res.responses;
    return {
      entries: entriesOf(keys?.response_range),
      markers: entriesOf(markers?.response_range),
      revision: BigInt(res.header.revision),
      complete: keys?.response_range?.more !== true,
    };
  }
  const existing = entriesOf(res.responses[0]?.response_range)[0];
  // Our own create, retried after a lost reply: the next round lists from its revision.
  if (existing && parseValue(existing.value).nonce === t.nonce) t.rev = existing.createRevision;
  else rename(t);
  return undefined;
}

/** List the lock, if our key is still there (it goes with our lease, or by an operator). */
export async function listIfOurs(client: EtcdClient, prefix: string, t: EtcdTicket): Promise<Listing | undefined> {
  const rev = t.rev ?? 0n;
  const listing = t.exclusive ? youngestOp(t.prefix, 1, rev - 1n) : rangeOp(t.prefix);
  const markers = rangeOp(delayPrefix(prefix, t.lockId));
  const res = await client.txn('list', { compare: [createdAt(t.key, rev)], success: [listing, markers], failure: [] });
  if (res.succeeded) {
    const [keys, marks] = res.responses;
    return {
      entries: entriesOf(keys?.response_range),
      markers: entriesOf(marks?.response_range),
      revision: BigInt(res.header.revision),
      complete: keys?.response_range?.more !== true,
    };
  }
  // Our place is gone: queue again, at the back.
  t.rev = undefined;
  return undefined;
}
