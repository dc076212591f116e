/**
 * The etcd backend: etcd's Go `concurrency.Mutex` recipe, key-compatible with it, over one
 * lease per backend. The lease and its keep-alive are in lease.ts, the decision of who
 * holds in recipe.ts, placing our key and listing the lock in place.ts, waiting in wait.ts, the
 * holds and their own ttl in lease-holds.ts, the keys in layout.ts. See docs/backends/etcd.md.
 */
import { performance } from 'node:perf_hooks';
import {
  backendLog,
  BackendUnavailableError,
  logRoundTrips,
  logWake,
  wakeClock,
  InvalidArgumentError,
  PermitsMismatchError,
  LockLostError,
  withDeadline,
  type AcquireRequest,
  type AcquireResult,
  type Backend,
  type Capabilities,
  type Extension,
  type Grant,
  type HostPort,
  type LockState,
} from '../kit.js';
import type { Abandonable } from '../kit.js';
import { createdAt, EtcdClient } from './client.js';
import { LeaseHolds } from './lease-holds.js';
import { lockPrefix, parseValue } from './layout.js';
import { watchChanges, type ChangesRequest } from './changes.js';
import { forceRelease, listPage, readLock, type ListPage, type ListRequest } from './observe.js';
import { decide, holders, holding, type EtcdGrantData, type EtcdTicket, type Holder } from './recipe.js';
import { createAndList, lastBlocker, listIfOurs, unnamedTicket, type Listing } from './place.js';
import { KeptAliveLease, type LeaseEnd } from './lease.js';
import { waitForChange } from './wait.js';
import { DelayLeases, delayKey, deleteWithMarker, markerValue, phantoms, writeMarker } from './delay.js';

const log = backendLog('etcd');

const now = (): number => performance.now();

/** Options of the etcd backend (from the URL or given directly). */
export interface EtcdBackendOptions {
  readonly hosts: readonly HostPort[];
  /** Prepended to every lock's keys (default '': `etcdctl lock NAME` is lock `NAME`). */
  readonly prefix?: string;
  /** The backend's lease ttl (ms, rounded up to whole seconds by etcd). Default 10 000. */
  readonly leaseTtlMs?: number;
  /** Bound on one request before `BackendUnavailableError`. Default a third of the lease ttl, at least 2 000. */
  readonly operationTimeoutMs?: number;
  readonly username?: string;
  readonly password?: string;
}

/** Counters exposed for tests and benchmarks. */
export interface EtcdStats {
  /** Watch notifications delivered to waiters (the herd-effect measure). */
  waiterNotifications: number;
  /** Leases granted so far. */
  leases: number;
}

/** What the etcd backend can do. */
export const ETCD_CAPABILITIES: Capabilities = Object.freeze({
  fair: true,
  shared: true,
  permits: true,
  notify: true,
  lockDelay: true,
  reentrant: false,
  weightedPermits: true,
});

/** etcd through the `etcd3` package's gRPC pool (see client.ts for why only its raw RPCs). */
export class EtcdBackend implements Backend<EtcdTicket, EtcdGrantData>, Abandonable {
  readonly name = 'etcd';
  readonly capabilities: Capabilities = ETCD_CAPABILITIES;
  readonly stats: EtcdStats = { waiterNotifications: 0, leases: 0 };
  /** The key prefix every lock starts with. */
  readonly prefix: string;
  readonly client: EtcdClient;
  readonly #leaseTtlMs: number;
  #session: KeptAliveLease | undefined;
  #granting: Promise<KeptAliveLease> | undefined;
  #closed = false;
  /** Aborted by `close()` and `abandon()`: ends every `changes()` iteration and its watches. */
  readonly #closing = new AbortController();
  /** Keys our tickets and holds use, so two acquisitions of one lease never share a key. */
  readonly #keys = new Set<string>();
  readonly #delays: DelayLeases;
  readonly #held = new LeaseHolds((d) => {
    this.#keys.delete(d.key);
    void this.client.deleteIf(d.key, d.rev).catch(() => false);
    // A hold that lapsed vanished without a release: its marker keeps the lock-delay.
    if (d.marker) this.#delays.lapsed(d.marker.key, d.marker.rev, d.marker.delayMs);
  });

  constructor(opts: EtcdBackendOptions) {
    if (opts.hosts.length === 0) throw new InvalidArgumentError('url', 'etcd: no servers given');
    this.prefix = opts.prefix ?? '';
    this.#leaseTtlMs = opts.leaseTtlMs ?? 10_000;
    this.client = new EtcdClient({
      hosts: opts.hosts,
      // A request stuck on a silent member must end in time to retry elsewhere within the lease.
      operationTimeoutMs: opts.operationTimeoutMs ?? Math.max(2_000, Math.ceil(this.#leaseTtlMs / 3)),
      ...(opts.username !== undefined ? { username: opts.username, password: opts.password ?? '' } : {}),
    });
    this.#delays = new DelayLeases(this.client);
    logRoundTrips(this, log);
  }

  /** The current lease, if one is alive (tests look at it). */
  get lease(): KeptAliveLease | undefined {
    return this.#session?.alive ? this.#session : undefined;
  }

  // ---- the lease -------------------------------------------------------------------------

  /** The live lease, granting a new one when there is none or the last one ended. */
  async connect(signal?: AbortSignal): Promise<KeptAliveLease> {
    if (this.#closed) throw new BackendUnavailableError(this.name, 'the etcd backend is closed');
    const s = this.#session;
    if (s?.alive) return s;
    this.#granting ??= KeptAliveLease.grant(this.client, this.#leaseTtlMs)
      .then((fresh) => {
        if (this.#closed) {
          void fresh.close(true);
          throw new BackendUnavailableError(this.name, 'the etcd backend is closed');
        }
        this.#session = fresh;
        this.stats.leases += 1;
        if (log.enabled) log('lease %s granted (ttl %dms)', fresh.hex, this.#leaseTtlMs);
        fresh.onEnd((why) => this.#leaseEnded(fresh, why));
        return fresh;
      })
      .finally(() => {
        this.#granting = undefined;
      });
    return withDeadline(this.#granting, signal ? { signal } : {});
  }

  #leaseEnded(s: KeptAliveLease, why: LeaseEnd): void {
    if (this.#session === s) this.#session = undefined;
    if (this.#closed) return;
    if (log.enabled) log('lease %s ended (%s): its holds are lost', s.hex, why);
    this.#held.sessionEnded(s, why);
    this.#delays.end();
    // The server may still keep the lease (we stop short of its expiry): free its keys.
    if (why === 'expired') s.revokeLost();
  }

  // ---- acquisition -----------------------------------------------------------------------

  async tryAcquire(req: AcquireRequest<EtcdTicket>): Promise<AcquireResult<EtcdTicket, EtcdGrantData>> {
    if (req.kind === 'semaphore' && (!Number.isInteger(req.permits) || req.permits < 1)) {
      throw new InvalidArgumentError('permits', 'permits must be an integer ≥ 1');
    }
    const start = now();
    // An abort answers at once; the attempt goes on, and what it gets is handed back then.
    return withDeadline(this.#attempt(req, start), {
      signal: req.signal,
      onLate: (r) => {
        if (r.granted) void this.release(r.grant).catch(() => undefined);
        else if (r.contended.ticket) void this.#dropTicket(r.contended.ticket);
      },
    });
  }

  async #attempt(req: AcquireRequest<EtcdTicket>, start: number): Promise<AcquireResult<EtcdTicket, EtcdGrantData>> {
    const session = await this.connect(req.signal);
    let t = req.ticket;
    if (t && t.session !== session) {
      // Our place was on a lease that ended: its key is gone (or going); queue again.
      void this.#dropTicket(t);
      t = undefined;
    }
    t ??= this.#newTicket(req, session);
    if (t.heldAt !== undefined) {
      // The wait saw the last key before ours deleted while ours stood: we hold at that
      // revision, no listing needed (docs/backends/etcd.md, "The recipe").
      const at = t.heldAt;
      t.heldAt = undefined;
      return this.#decide(req, t, { entries: [], markers: [], revision: at, complete: true }, start);
    }
    for (let round = 0; round < 8; round++) {
      const listing =
        t.rev === undefined
          ? await createAndList(this.client, this.prefix, t, (x) => this.#rename(x))
          : await listIfOurs(this.client, this.prefix, t);
      if (listing) return this.#decide(req, t, listing, start);
    }
    throw new BackendUnavailableError(this.name, `etcd: could not place a key under ${t.prefix}`, { context: { lockId: req.lockId } });
  }

  #newTicket(req: AcquireRequest<EtcdTicket>, session: KeptAliveLease): EtcdTicket {
    const t = unnamedTicket(req, session, this.prefix);
    this.#rename(t);
    return t;
  }

  /** Give the ticket a key no other acquisition of ours uses: Go's `prefix/leaseHex`, then `-1`, `-2`… */
  #rename(t: EtcdTicket): void {
    if (t.key !== '') this.#keys.delete(t.key);
    const base = `${t.prefix}${t.session.hex}`;
    let key = base;
    for (let n = 1; this.#keys.has(key) || key === t.key; n++) key = `${base}-${n}`;
    t.key = key;
    this.#keys.add(key);
  }

  async #decide(
    req: AcquireRequest<EtcdTicket>,
    t: EtcdTicket,
    listing: Listing,
    start: number,
  ): Promise<AcquireResult<EtcdTicket, EtcdGrantData>> {
    const rev = t.rev ?? 0n;
    // A holder that vanished without releasing still holds for its lock-delay (delay.ts).
    const keys = [...holders(listing.entries), ...phantoms(listing.markers, listing.entries)];
    if (req.kind === 'semaphore') await this.#checkSize(req, t, keys);
    const d = decide(req.kind, req.permits, rev, keys, t.prefix, req.weight);
    if (d.held) {
      const marker = req.lockDelayMs > 0 ? await this.#mark(req, t, rev) : undefined;
      if (marker !== null) return { granted: true, grant: this.#grant(req, t, rev, start, listing.revision, marker) };
      // Our key went while we marked it: queue again.
      if (!req.wait) await this.#dropTicket(t);
      t.rev = undefined;
      return { granted: false, contended: { ticket: req.wait ? t : undefined } };
    }
    if (!req.wait) {
      await this.#dropTicket(t);
      return { granted: false, contended: { ticket: undefined } };
    }
    t.watch = lastBlocker(t, rev, keys, listing) ?? d.watch;
    t.seenAt = listing.revision;
    return { granted: false, contended: { ticket: t } };
  }

  /** A semaphore whose holders use another size refuses the attempt; our key is deleted first. */
  async #checkSize(req: AcquireRequest<EtcdTicket>, t: EtcdTicket, keys: readonly Holder[]): Promise<void> {
    const other = holding(keys).find((k) => k.kind === 'semaphore' && k.key !== t.key && k.permits !== req.permits);
    if (!other) return;
    await this.#dropTicket(t);
    throw new PermitsMismatchError(req.lockId, req.permits, other.permits);
  }

  /** Turn the ticket's key into a hold: it vouches only for time the lease is sure to last. */
  #grant(
    req: AcquireRequest<EtcdTicket>,
    t: EtcdTicket,
    rev: bigint,
    start: number,
    seenAt: bigint,
    marker: EtcdGrantData['marker'],
  ): Grant<EtcdGrantData> {
    const ttlMs = Math.min(req.ttlMs, t.session.deadline - start);
    const grant: Grant<EtcdGrantData> = {
      lockId: req.lockId,
      kind: req.kind,
      ownerId: req.ownerId,
      token: rev,
      ttlMs,
      reentered: false,
      data: { session: t.session, key: t.key, rev, marker },
    };
    const held = this.#held.add(grant, req.onLost, Math.max(0, ttlMs));
    held.unwatch = this.#watchHeld(grant.data, seenAt);
    // The ticket no longer owns the key: a late cancel must not delete a held lock.
    t.rev = undefined;
    t.watch = undefined;
    return grant;
  }

  /**
   * Write the delay marker of the key we are about to hold, on a delay lease, while the key
   * is still ours. Null when the key went in between (nothing was written).
   */
  async #mark(req: AcquireRequest<EtcdTicket>, t: EtcdTicket, rev: bigint): Promise<EtcdGrantData['marker'] | null> {
    const lease = await withDeadline(this.#delays.lease(t.session.ttlMs, req.lockDelayMs), { signal: req.signal });
    const key = delayKey(this.prefix, req.lockId, t.key);
    const value = markerValue(t.key, rev, req.kind, req.kind === 'semaphore' ? req.permits : 1, req.weight ?? 1);
    const at = await writeMarker(this.client, { key: t.key, rev }, key, value, lease.id);
    return at === undefined ? null : { key, rev: at, delayMs: req.lockDelayMs };
  }

  /**
   * Watch our held key from the revision after the listing that granted it: a deletion by
   * anyone but us (an operator's `etcdctl del`) is a loss, told at once rather than at the
   * next extend. Our own deletions drop the hold first, so they are not reported.
   */
  #watchHeld(data: EtcdGrantData, seenAt: bigint): () => void {
    // Placed after the grant is handed over (the hand-off waits for no stream write); from
    // the listing's next revision, so nothing that happens in between is missed.
    let watcher: ReturnType<ReturnType<EtcdClient['watch']>['watcher']> | undefined;
    let stopped = false;
    setImmediate(() => {
      if (stopped || this.#closed) return;
      watcher = this.client
        .watch()
        .key(data.key)
        .startRevision((seenAt + 1n).toString())
        .only('delete')
        .watcher();
      watcher.on('error', () => undefined);
      watcher.on('delete', () => this.#held.gone(data));
    });
    // Cancelled after the release's delete is sent: the hold is dropped first, so the watch's
    // report of our own deletion finds nothing to lose.
    return () => {
      stopped = true;
      setImmediate(() => void watcher?.cancel().catch(() => undefined));
    };
  }

  /** Delete the ticket's key: by revision when known, else only if it still has our value. */
  async #dropTicket(t: EtcdTicket): Promise<void> {
    const { key, rev } = t;
    t.rev = undefined;
    t.watch = undefined;
    t.heldAt = undefined;
    if (this.#closed) return;
    const compare =
      rev !== undefined
        ? createdAt(key, rev)
        : { key: Buffer.from(key), target: 'Value' as const, result: 'Equal' as const, value: t.value };
    try {
      await this.client.txn('delete', { compare: [compare], success: [{ request_delete_range: { key: Buffer.from(key) } }], failure: [] });
    } catch {
      /* our lease takes it away */
    } finally {
      this.#keys.delete(key);
    }
  }

  async waitForChange(lockId: string, ticket: EtcdTicket | undefined, signal: AbortSignal): Promise<void> {
    const since = wakeClock(log);
    let notified = false;
    await waitForChange(this.client, ticket, signal, () => {
      this.stats.waiterNotifications += 1;
      notified = true;
    });
    logWake(log, lockId, notified ? 'notification' : 'poll', since);
  }

  /**
   * Remove the queue position `ticket`. Without one, an attempt whose reply never came may
   * have left a key of this owner on our lease: for a fresh owner, find and delete it.
   */
  async cancel(req: AcquireRequest<EtcdTicket>, ticket: EtcdTicket | undefined): Promise<void> {
    if (ticket) {
      await this.#dropTicket(ticket);
      return;
    }
    const lease = this.#session;
    if (!req.freshOwner || !lease || this.#closed) return;
    const { entries } = await this.client.list(lockPrefix(this.prefix, req.lockId));
    const mine = entries.filter((e) => e.lease === lease.id && parseValue(e.value).owner === req.ownerId);
    await Promise.all(mine.map((e) => this.client.deleteIf(e.key, e.createRevision).catch(() => false)));
  }

  // ---- holding ---------------------------------------------------------------------------

  async extend(grant: Grant<EtcdGrantData>, ttlMs: number): Promise<Extension> {
    const { session: s, key, rev } = grant.data;
    const context = { backend: this.name, key, lease: s.hex };
    const held = this.#held.get(grant.data);
    if (!held) throw new LockLostError(grant.lockId, s.alive ? 'not-held' : 'session', { context });
    if (!s.alive) {
      this.#held.drop(grant.data);
      throw new LockLostError(grant.lockId, 'session', { context });
    }
    const start = now();
    const res = await this.client.txnVia(s.member, 'extend', { compare: [createdAt(key, rev)], success: [], failure: [] });
    if (!res.succeeded) {
      this.#held.drop(grant.data);
      this.#keys.delete(key);
      throw new LockLostError(grant.lockId, s.alive ? 'not-held' : 'session', { context });
    }
    if (!s.alive) throw new LockLostError(grant.lockId, 'session', { context });
    const vouched = Math.min(ttlMs, s.deadline - start);
    if (vouched <= 0)
      throw new BackendUnavailableError(this.name, 'etcd: the lease was not renewed in time to vouch for an extension', { context });
    this.#held.arm(held, vouched);
    return { ttlMs: vouched };
  }

  async release(grant: Grant<EtcdGrantData>): Promise<boolean> {
    const { key, rev } = grant.data;
    const wasHeld = this.#held.drop(grant.data);
    this.#keys.delete(key);
    if (this.#closed) return false;
    // Guarded by the create revision: a retried or stale release never deletes a newer holder.
    // The marker goes in the same transaction: a clean release imposes no lock-delay.
    const marker = grant.data.marker;
    const deleted = marker ? await deleteWithMarker(this.client, key, rev, marker.key) : await this.client.deleteIf(key, rev);
    return wasHeld && deleted;
  }

  inspect(lockId: string): Promise<LockState> {
    return readLock(this.client, this.prefix, lockId);
  }

  /** One page of the locks under our prefix: a key range with a limit (docs/backends/etcd.md, "Listing"). */
  list(req: ListRequest): Promise<ListPage> {
    return listPage(this.client, this.prefix, req);
  }

  /** Delete every holder's key and write the lock's fence, in one guarded transaction. */
  forceRelease(lockId: string): Promise<number> {
    return forceRelease(this.client, this.prefix, lockId);
  }

  /**
   * The lock ids under `req.prefix` whose keys etcd reports written or deleted (expiries
   * included), `null` once the watches are in place (docs/backends/etcd.md, "Watching").
   */
  changes(req: ChangesRequest): AsyncIterable<string | null> {
    const signal = AbortSignal.any([req.signal, this.#closing.signal]);
    return watchChanges(this.client, this.prefix, { prefix: req.prefix, signal });
  }

  /** Revoke our lease (every key of ours goes at once) and close the connections. */
  async close(): Promise<void> {
    if (this.#closed) return;
    this.#closed = true;
    this.#closing.abort();
    this.#held.clear();
    this.#keys.clear();
    this.#delays.end();
    const s = this.#session;
    this.#session = undefined;
    await s?.close(true);
    this.client.close();
  }

  /**
   * Testing only (`abandon()` in `locksmith-dlm/testing`): stop keeping the lease alive without
   * revoking it, so its keys go only when etcd expires it (a crash).
   */
  async abandon(): Promise<void> {
    this.#closed = true;
    this.#closing.abort();
    this.#delays.end();
    this.#held.clear();
    this.#keys.clear();
    await this.#session?.close(false);
    this.#session = undefined;
    this.client.close();
  }
}
