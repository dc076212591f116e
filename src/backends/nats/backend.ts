/**
 * The NATS JetStream key-value backend: one key per lock holding the whole lock (state.ts),
 * every step a read and a write guarded by the revision read (compare-and-set), fencing
 * tokens from the bucket's revisions, leases as stored expiry times, waiters woken by one
 * shared watch of the bucket (store.ts). See docs/backends/nats.md.
 */
import { randomBytes } from 'node:crypto';
import {
  backendLog,
  BackendUnavailableError,
  logRoundTrips,
  logWake,
  wakeClock,
  InvalidArgumentError,
  LockLostError,
  PermitsMismatchError,
  sleep,
  withDeadline,
  type AcquireRequest,
  type AcquireResult,
  type Backend,
  type Capabilities,
  type Extension,
  type Grant,
  type ListPage,
  type ListRequest,
  type LockState,
} from '../kit.js';
import type { Abandonable } from '../kit.js';
import { keyOf } from './keys.js';
import { listPage, readLock } from './observe.js';
import { decodeRec, encodeRec, isIdle, mayHold, nextExpiry, nextToken, otherSize, prune, type Ask, type LockRec } from './state.js';
import { Store, type StoreOptions } from './store.js';

const log = backendLog('nats');

/** Longest wait without a notification before the next attempt (the watch's safety net). */
export const FALLBACK_POLL_MS = 2_000;
/** How long a waiter's queue entry lives without a retry (retries come at least every fallback poll). */
export const WAITER_TTL_MS = 10_000;
/** Compare-and-set rounds before an attempt gives up on a hot key. */
const MAX_ROUNDS = 32;

/** Options of the NATS backend (from the URL or given directly). */
export interface NatsBackendOptions extends StoreOptions {
  /** Prepended to every lock's key: '' or dot-terminated tokens (default ''). */
  readonly prefix: string;
  /** How far the lockers' wall clocks may disagree: a lease counts as ended that much later. */
  readonly clockSkewMs: number;
}

/** Counters exposed for tests and benchmarks. */
export interface NatsStats {
  /** Waits ended by the watch (not by the fallback poll or an expiry). */
  waiterNotifications: number;
  /** Compare-and-set writes lost to another writer (each one re-read and retried). */
  conflicts: number;
}

/** What the NATS backend can do. */
export const NATS_CAPABILITIES: Capabilities = Object.freeze({
  fair: true,
  shared: true,
  permits: true,
  notify: true,
  lockDelay: true,
  reentrant: false,
});

/** A queue place: the key, our entry's nonce, the revision we decided at, when a lease ends. */
export interface NatsTicket {
  readonly key: string;
  readonly nonce: string;
  revision: number;
  wakeAt: number;
}

/** What a grant carries to extend and release it. */
export interface NatsGrantData {
  readonly key: string;
  readonly nonce: string;
}

/** Every compare-and-set round of a step lost to another writer (a crowd on one lock). */
class HotKeyError extends BackendUnavailableError {}

/** What an attempt's step decided: granted with a token, or when the first lease in the way ends. */
interface Outcome {
  /** The grant's token; undefined when not granted. */
  readonly token: bigint | undefined;
  readonly wakeAt: number;
}

/** What one step decided: its result and whether the record must be written. */
interface Step<T> {
  readonly write: boolean;
  readonly result: T;
}

/** NATS JetStream KV through `@nats-io/kv`. */
export class NatsBackend implements Backend<NatsTicket, NatsGrantData>, Abandonable {
  readonly name = 'nats';
  readonly capabilities: Capabilities = NATS_CAPABILITIES;
  readonly stats: NatsStats = { waiterNotifications: 0, conflicts: 0 };
  readonly prefix: string;
  readonly #opts: NatsBackendOptions;
  readonly #skewMs: number;
  #store: Store | undefined;
  #opening: Promise<Store> | undefined;
  #closed = false;
  /** Locks one of our watching waiters is making an attempt on now. */
  readonly #racing = new Set<string>();

  constructor(opts: NatsBackendOptions) {
    if (opts.hosts.length === 0) throw new InvalidArgumentError('url', 'nats: no servers given');
    this.#opts = opts;
    this.prefix = opts.prefix;
    this.#skewMs = opts.clockSkewMs;
    logRoundTrips(this, log);
  }

  /** Connect and open the bucket (once; concurrent callers share the attempt). */
  async connect(signal?: AbortSignal): Promise<Store> {
    if (this.#closed) throw new BackendUnavailableError(this.name, 'the nats backend is closed');
    if (this.#store) return this.#store;
    this.#opening ??= Store.open(this.#opts, signal)
      .then(async (s) => {
        if (this.#closed) {
          await s.close();
          throw new BackendUnavailableError(this.name, 'the nats backend is closed');
        }
        this.#store = s;
        return s;
      })
      .finally(() => {
        this.#opening = undefined;
      });
    return withDeadline(this.#opening, signal ? { signal } : {});
  }

  /**
   * Read the lock, let `step` change the record, write it back guarded by the revision read
   * (deleting the key when nothing is left), and start over when another writer came first.
   */
  async #mutate<T>(lockId: string, step: (rec: LockRec, revision: number, now: number) => Step<T>): Promise<T> {
    return (await this.#mutateAt(lockId, step)).result;
  }

  /** {@link #mutate}, with the key's revision after the step (the one written, else the one read). */
  async #mutateAt<T>(
    lockId: string,
    step: (rec: LockRec, revision: number, now: number) => Step<T>,
    waiter?: NatsTicket,
  ): Promise<{ result: T; revision: number }> {
    const store = await this.connect();
    const key = keyOf(this.prefix, lockId);
    for (let round = 0; round < MAX_ROUNDS; round++) {
      // A waiter decides on what the watch delivered (no read: a crowd of waiters costs the
      // server nothing while the lock is held) and gives up its turn on a lost race.
      const cached = waiter && round === 0 ? store.cached(key, waiter.revision) : undefined;
      if (waiter && round > 0) throw new HotKeyError(this.name, `nats: lost a race for lock ${lockId}`, { context: { lockId } });
      const read = cached ?? (await store.read(key));
      const rec = decodeRec(read.value);
      const now = Date.now();
      prune(rec, now, this.#skewMs);
      const { write, result } = step(rec, read.revision, now);
      if (!write) return { result, revision: read.revision };
      const written = await this.#store1(store, key, rec, read.value !== undefined, read.revision, now);
      if (written !== undefined) return { result, revision: written };
      this.stats.conflicts += 1;
      // Back off a little so that a crowd of writers on one key spreads out.
      await sleep(Math.floor(Math.random() * Math.min(50, 2 ** round)));
    }
    throw new HotKeyError(this.name, `nats: too many concurrent writes to lock ${lockId}`, { context: { lockId } });
  }

  /** Write the record back (delete the key when the lock is idle); the revision after, undefined on a lost race. */
  async #store1(store: Store, key: string, rec: LockRec, exists: boolean, revision: number, now: number): Promise<number | undefined> {
    if (!isIdle(rec, now)) return store.write(key, encodeRec(rec), revision);
    // Nothing left: no key (its delete marker keeps the revision the next token must pass).
    if (!exists) return revision;
    return (await store.remove(key, revision)) ? revision + 1 : undefined;
  }

  async tryAcquire(req: AcquireRequest<NatsTicket>): Promise<AcquireResult<NatsTicket, NatsGrantData>> {
    if (req.kind === 'semaphore' && (!Number.isInteger(req.permits) || req.permits < 1)) {
      throw new InvalidArgumentError('permits', 'permits must be an integer ≥ 1');
    }
    const ask: Ask = {
      owner: req.ownerId,
      nonce: req.ticket?.nonce ?? randomBytes(8).toString('hex'),
      kind: req.kind,
      permits: req.kind === 'semaphore' ? req.permits : 1,
      fair: req.fair,
    };
    return withDeadline(this.#attempt(req, ask), {
      signal: req.signal,
      onLate: (r) => {
        if (r.granted) void this.release(r.grant).catch(() => undefined);
        else if (r.contended.ticket) void this.#dropEntry(req.lockId, r.contended.ticket.nonce, undefined).catch(() => undefined);
      },
    });
  }

  async #attempt(req: AcquireRequest<NatsTicket>, ask: Ask): Promise<AcquireResult<NatsTicket, NatsGrantData>> {
    const t = req.ticket;
    // Waiters that keep no queue entry take turns within this backend: one of them races the
    // other lockers for the lock; the others wait for the write that race makes.
    if (!req.wait || !t || ask.fair || ask.kind === 'write') return this.#attemptOnce(req, ask);
    if (this.#racing.has(req.lockId)) {
      const latest = this.#store?.cached(t.key, t.revision)?.revision ?? t.revision;
      return { granted: false, contended: { ticket: { ...t, revision: latest } } };
    }
    this.#racing.add(req.lockId);
    try {
      return await this.#attemptOnce(req, ask);
    } finally {
      this.#racing.delete(req.lockId);
    }
  }

  async #attemptOnce(req: AcquireRequest<NatsTicket>, ask: Ask): Promise<AcquireResult<NatsTicket, NatsGrantData>> {
    const key = keyOf(this.prefix, req.lockId);
    const step = this.#attemptStep(req, ask);
    const stepped = await this.#mutateAt(req.lockId, step, req.wait ? req.ticket : undefined).catch((err: unknown) => {
      // Lost the race to another writer: the winner's write wakes us again (the ticket's
      // revision is behind it), and we decide anew then.
      if (req.wait && err instanceof HotKeyError)
        return { result: { token: undefined, wakeAt: Infinity }, revision: req.ticket?.revision ?? 0 };
      throw err;
    });
    const { result: outcome, revision } = stepped;
    if (outcome.token !== undefined) {
      const grant: Grant<NatsGrantData> = {
        lockId: req.lockId,
        kind: req.kind,
        ownerId: req.ownerId,
        token: outcome.token,
        ttlMs: req.ttlMs,
        reentered: false,
        data: { key, nonce: ask.nonce },
      };
      return { granted: true, grant };
    }
    if (!req.wait) return { granted: false, contended: { ticket: undefined } };
    // Wait for a write after the one we saw (or made).
    const ticket: NatsTicket = { key, nonce: ask.nonce, revision, wakeAt: outcome.wakeAt };
    return { granted: false, contended: { ticket } };
  }

  /** One attempt's decision on the record: grant, queue (or refresh our entry), or wait. */
  #attemptStep(req: AcquireRequest<NatsTicket>, ask: Ask): (rec: LockRec, revision: number, now: number) => Step<Outcome> {
    // Only a fair waiter (its place) and a writer (readers must not pass it) need a queue entry;
    // the others just watch, so a crowd of waiters does not write to the lock.
    const queued = req.wait && (ask.fair || ask.kind === 'write');
    return (rec, revision, now) => {
      const size = ask.kind === 'semaphore' ? otherSize(rec, ask.permits) : undefined;
      if (size !== undefined) throw new PermitsMismatchError(req.lockId, ask.permits, size);
      if (mayHold(rec, ask, now)) {
        const token = nextToken(rec, revision);
        rec.last = token.toString();
        rec.queue = rec.queue.filter((w) => w.n !== ask.nonce);
        const { owner: o, kind: k, nonce: n } = ask;
        const p = k === 'semaphore' ? { p: ask.permits } : {};
        rec.holders.push({ o, k, n, t: rec.last, e: now + req.ttlMs, a: now, d: req.lockDelayMs, i: req.identity, ...p });
        return { write: true, result: { token, wakeAt: 0 } };
      }
      const waiting = { write: false, result: { token: undefined, wakeAt: nextExpiry(rec, this.#skewMs) } };
      if (!queued) return waiting;
      const mine = rec.queue.find((w) => w.n === ask.nonce);
      // A waiter's entry is refreshed only when half its life is gone: fewer writes, fewer wake-ups.
      if (mine && mine.e - now > WAITER_TTL_MS / 2) return waiting;
      if (mine) mine.e = now + WAITER_TTL_MS;
      else {
        const { owner: o, kind: k, nonce: n, permits: p, fair: f } = ask;
        rec.queue.push({ o, k, n, p, f, s: now, e: now + WAITER_TTL_MS, i: req.identity });
      }
      return { ...waiting, write: true };
    };
  }

  async waitForChange(lockId: string, ticket: NatsTicket | undefined, signal: AbortSignal): Promise<void> {
    const since = wakeClock(log);
    if (!ticket) {
      await sleep(FALLBACK_POLL_MS, signal);
      logWake(log, lockId, 'poll', since);
      return;
    }
    const store = await this.connect(signal);
    // A crashed holder writes nothing: wake when its lease (or lock delay) ends, at the latest.
    const untilExpiry = Number.isFinite(ticket.wakeAt) ? Math.max(0, ticket.wakeAt - Date.now()) + 10 : FALLBACK_POLL_MS;
    const woken = await store.waitPast(ticket.key, ticket.revision, Math.min(FALLBACK_POLL_MS, untilExpiry), signal);
    if (woken) this.stats.waiterNotifications += 1;
    logWake(log, lockId, woken ? 'notification' : 'poll', since);
  }

  /** Remove our queue entry; for a fresh owner, anything of that owner an unanswered attempt left. */
  async cancel(req: AcquireRequest<NatsTicket>, ticket: NatsTicket | undefined): Promise<void> {
    if (this.#closed) return;
    await this.#dropEntry(req.lockId, ticket?.nonce, req.freshOwner ? req.ownerId : undefined);
  }

  async #dropEntry(lockId: string, nonce: string | undefined, owner: string | undefined): Promise<void> {
    await this.#mutate(lockId, (rec) => {
      const before = rec.queue.length + rec.holders.length;
      rec.queue = rec.queue.filter((w) => w.n !== nonce && w.o !== owner);
      if (owner !== undefined) rec.holders = rec.holders.filter((h) => h.o !== owner);
      return { write: rec.queue.length + rec.holders.length !== before, result: undefined };
    });
  }

  async extend(grant: Grant<NatsGrantData>, ttlMs: number): Promise<Extension> {
    const token = grant.token.toString();
    await this.#mutate(grant.lockId, (rec, _revision, now) => {
      const h = rec.holders.find((x) => x.n === grant.data.nonce && x.t === token);
      if (!h) throw new LockLostError(grant.lockId, 'not-held', { context: { backend: this.name, key: grant.data.key } });
      h.e = now + ttlMs;
      return { write: true, result: undefined };
    });
    return { ttlMs };
  }

  async release(grant: Grant<NatsGrantData>): Promise<boolean> {
    if (this.#closed) return false;
    const token = grant.token.toString();
    return this.#mutate(grant.lockId, (rec) => {
      const before = rec.holders.length;
      // By nonce and token: a stale or retried release never removes a later holder.
      rec.holders = rec.holders.filter((h) => !(h.n === grant.data.nonce && h.t === token));
      const held = rec.holders.length !== before;
      return { write: held, result: held };
    });
  }

  async inspect(lockId: string): Promise<LockState> {
    return readLock(await this.connect(), this.prefix, lockId, this.#skewMs);
  }

  /** One page of the locks under our prefix (docs/backends/nats.md, "Listing"). */
  async list(req: ListRequest): Promise<ListPage> {
    return listPage(await this.connect(req.signal), this.prefix, req, this.#skewMs);
  }

  /** End every hold of `lockId` and move its token past every issued one. */
  forceRelease(lockId: string): Promise<number> {
    return this.#mutate(lockId, (rec, revision) => {
      const n = rec.holders.length;
      rec.holders = [];
      rec.last = nextToken(rec, revision).toString();
      return { write: true, result: n };
    });
  }

  /** Close the connection. Holds not released end by their stored lease. */
  async close(): Promise<void> {
    if (this.#closed) return;
    this.#closed = true;
    const s = this.#store ?? (await this.#opening?.catch(() => undefined));
    this.#store = undefined;
    await s?.close();
  }

  /** Testing only: drop the connection without releasing (a crash); holds end by their lease. */
  abandon(): Promise<void> {
    return this.close();
  }
}
