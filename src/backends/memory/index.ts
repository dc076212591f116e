/**
 * `memory://[name]` — the embedded default backend and the reference every other backend
 * is read against. It has every capability: fair queues, read-write locks, semaphores,
 * notification, lockDelay and server-side reentrancy.
 *
 * Lockers created with the same `memory://name` URL in one process share one lock table,
 * so several lockers model several clients of one server. `memory://` alone is the table
 * named `default`.
 *
 * Expiry is evaluated lazily on every access against the monotonic clock; a waiter is
 * woken on release/cancel/grant and, at the latest, when the earliest lease could have run
 * out, so no store-wide timer is needed.
 */
import { performance } from 'node:perf_hooks';
import type {
  AcquireRequest,
  AcquireResult,
  Backend,
  Capabilities,
  Extension,
  Grant,
  HolderState,
  LockKind,
  LockState,
} from '../../backend.js';
import { InvalidArgumentError, LockLostError } from '../../errors.js';
import type { ConnectOptions } from '../../connect.js';

/** A bounded fallback poll, so a missed wake-up costs at most this long. */
const FALLBACK_POLL_MS = 250;
/** A queued waiter that has not re-attempted for this long past its ttl is presumed dead. */
const WAITER_GRACE_MS = 1_000;

interface Holder {
  readonly ownerId: string;
  readonly kind: LockKind;
  readonly token: bigint;
  count: number;
  /** After this the lease is over: extend fails. */
  expiresAt: number;
  /** Until this the holder still blocks others (expiresAt + lockDelay); release clears it. */
  blocksUntil: number;
  lockDelayMs: number;
}

interface Waiter {
  readonly id: number;
  readonly ownerId: string;
  readonly kind: LockKind;
  expiresAt: number;
}

interface Entry {
  holders: Holder[];
  queue: Waiter[];
  lastToken: bigint;
  readonly listeners: Set<() => void>;
}

/** The ticket a contended attempt leaves behind: the waiter's id in the entry's queue. */
interface MemoryTicket {
  readonly waiterId: number;
}

/** The lock table shared by every memory backend opened with the same name. */
class MemoryStore {
  readonly entries = new Map<string, Entry>();
  nextWaiterId = 1;

  entry(lockId: string): Entry {
    let e = this.entries.get(lockId);
    if (!e) {
      e = { holders: [], queue: [], lastToken: 0n, listeners: new Set() };
      this.entries.set(lockId, e);
    }
    return e;
  }

  /** Drop holders past their blocking time and waiters that stopped re-attempting. */
  purge(e: Entry, now: number): void {
    const before = e.holders.length + e.queue.length;
    e.holders = e.holders.filter((h) => h.blocksUntil > now);
    e.queue = e.queue.filter((w) => w.expiresAt > now);
    if (e.holders.length + e.queue.length !== before) this.notify(e);
  }

  notify(e: Entry): void {
    for (const wake of [...e.listeners]) wake();
  }
}

const stores = new Map<string, MemoryStore>();

function isTicket(t: unknown): t is MemoryTicket {
  return typeof t === 'object' && t !== null && typeof (t as { waiterId?: unknown }).waiterId === 'number';
}

const exclusive = (k: LockKind): boolean => k === 'mutex' || k === 'write';

/** The in-process reference backend. */
export class MemoryBackend implements Backend {
  readonly name = 'memory';
  readonly capabilities: Capabilities = {
    fair: true,
    shared: true,
    permits: true,
    notify: true,
    lockDelay: true,
    reentrant: true,
  };
  readonly #store: MemoryStore;
  #closed = false;

  /** Open (or create) the lock table called `tableName`. */
  constructor(tableName = 'default') {
    let store = stores.get(tableName);
    if (!store) {
      store = new MemoryStore();
      stores.set(tableName, store);
    }
    this.#store = store;
  }

  async tryAcquire(req: AcquireRequest): Promise<AcquireResult> {
    const now = performance.now();
    const e = this.#store.entry(req.lockId);
    this.#store.purge(e, now);

    // Server-side reentrancy: the same owner holding the same kind re-enters with a count.
    if (req.kind !== 'semaphore') {
      const mine = e.holders.find((h) => h.ownerId === req.ownerId && h.kind === req.kind && h.expiresAt > now);
      if (mine) {
        mine.count += 1;
        this.#dequeue(e, req.ticket);
        return { granted: true, grant: this.#grant(req, mine.token, true) };
      }
    }

    let position = -1;
    if (isTicket(req.ticket)) {
      const ticket = req.ticket;
      position = e.queue.findIndex((w) => w.id === ticket.waiterId);
    }
    const ahead = position >= 0 ? e.queue.slice(0, position) : e.queue;

    if (this.#compatible(e, req) && this.#queueAllows(req, ahead, e)) {
      if (position >= 0) e.queue.splice(position, 1);
      e.lastToken += 1n;
      e.holders.push({
        ownerId: req.ownerId,
        kind: req.kind,
        token: e.lastToken,
        count: 1,
        expiresAt: now + req.ttlMs,
        blocksUntil: now + req.ttlMs + req.lockDelayMs,
        lockDelayMs: req.lockDelayMs,
      });
      // A grant changes the queue (and may let other readers / permits through).
      this.#store.notify(e);
      return { granted: true, grant: this.#grant(req, e.lastToken, false) };
    }

    if (!req.wait) return { granted: false, contended: {} };
    const waiterTtl = req.ttlMs + WAITER_GRACE_MS + FALLBACK_POLL_MS;
    if (position >= 0) {
      const w = e.queue[position];
      if (w) w.expiresAt = now + waiterTtl;
      return { granted: false, contended: { ticket: req.ticket } };
    }
    const waiter: Waiter = { id: this.#store.nextWaiterId++, ownerId: req.ownerId, kind: req.kind, expiresAt: now + waiterTtl };
    e.queue.push(waiter);
    const ticket: MemoryTicket = { waiterId: waiter.id };
    return { granted: false, contended: { ticket } };
  }

  #grant(req: AcquireRequest, token: bigint, reentered: boolean): Grant {
    return { lockId: req.lockId, kind: req.kind, ownerId: req.ownerId, token, ttlMs: req.ttlMs, reentered };
  }

  /** Can `req` hold together with the current holders? */
  #compatible(e: Entry, req: AcquireRequest): boolean {
    const hs = e.holders;
    switch (req.kind) {
      case 'mutex':
      case 'write':
        return hs.length === 0;
      case 'read':
        return hs.every((h) => h.kind === 'read');
      case 'semaphore':
        return hs.every((h) => h.kind === 'semaphore') && hs.length < req.permits;
    }
  }

  /** Does the queue let `req` through, given the waiters ahead of it? */
  #queueAllows(req: AcquireRequest, ahead: readonly Waiter[], e: Entry): boolean {
    // Readers never pass a waiting writer, fair or not: a stream of readers must not starve it.
    if (req.kind === 'read') return !ahead.some((w) => exclusive(w.kind));
    if (!req.fair) return true;
    if (req.kind === 'semaphore') return ahead.length < req.permits - e.holders.length;
    return ahead.length === 0;
  }

  #dequeue(e: Entry, ticket: unknown): void {
    if (!isTicket(ticket)) return;
    const i = e.queue.findIndex((w) => w.id === ticket.waiterId);
    if (i >= 0) {
      e.queue.splice(i, 1);
      this.#store.notify(e);
    }
  }

  waitForChange(lockId: string, _ticket: unknown, signal: AbortSignal): Promise<void> {
    const e = this.#store.entry(lockId);
    const now = performance.now();
    // Wake when the earliest holder stops blocking, so an expired lease is noticed at once.
    let delay = FALLBACK_POLL_MS;
    for (const h of e.holders) delay = Math.min(delay, Math.max(1, h.blocksUntil - now));
    return new Promise<void>((resolve, reject) => {
      if (signal.aborted) {
        reject(signal.reason);
        return;
      }
      const done = (): void => {
        clearTimeout(timer);
        e.listeners.delete(done);
        signal.removeEventListener('abort', onAbort);
        resolve();
      };
      const onAbort = (): void => {
        clearTimeout(timer);
        e.listeners.delete(done);
        reject(signal.reason);
      };
      // Ref'd: it belongs to a call the user is awaiting, and is cleared when that wait ends.
      const timer = setTimeout(done, delay);
      e.listeners.add(done);
      signal.addEventListener('abort', onAbort, { once: true });
    });
  }

  async cancel(req: AcquireRequest, ticket: unknown): Promise<void> {
    this.#dequeue(this.#store.entry(req.lockId), ticket);
  }

  async extend(grant: Grant, ttlMs: number): Promise<Extension> {
    const now = performance.now();
    const e = this.#store.entry(grant.lockId);
    this.#store.purge(e, now);
    const h = this.#find(e, grant);
    if (!h || h.expiresAt <= now) {
      throw new LockLostError(grant.lockId, 'not-held', { context: { backend: this.name } });
    }
    h.expiresAt = now + ttlMs;
    h.blocksUntil = h.expiresAt + h.lockDelayMs;
    return { ttlMs };
  }

  async release(grant: Grant): Promise<boolean> {
    const now = performance.now();
    const e = this.#store.entry(grant.lockId);
    const h = this.#find(e, grant);
    // A lease that ran out is not ours to release any more, even if lockDelay still keeps it.
    if (!h || h.expiresAt <= now) {
      this.#store.purge(e, now);
      return false;
    }
    h.count -= 1;
    if (h.count <= 0) e.holders.splice(e.holders.indexOf(h), 1);
    this.#store.notify(e);
    return true;
  }

  #find(e: Entry, grant: Grant): Holder | undefined {
    return e.holders.find((h) => h.ownerId === grant.ownerId && h.token === grant.token && h.kind === grant.kind);
  }

  async inspect(lockId: string): Promise<LockState> {
    const now = performance.now();
    const e = this.#store.entry(lockId);
    this.#store.purge(e, now);
    const holders: HolderState[] = e.holders.map((h) => ({
      ownerId: h.ownerId,
      kind: h.kind,
      token: h.token,
      expiresInMs: Math.max(0, Math.round(h.expiresAt - now)),
      count: h.count,
    }));
    return { lockId, holders, waiters: e.queue.length, lastToken: e.lastToken };
  }

  async close(): Promise<void> {
    this.#closed = true;
  }

  /** True after `close()`. */
  get closed(): boolean {
    return this.#closed;
  }
}

/** Factory used by `createLocker('memory://name')`. */
export function createBackend(url: URL, _options: ConnectOptions = {}): Backend {
  if (url.protocol !== 'memory:') throw new InvalidArgumentError('url', `not a memory URL: ${url.href}`);
  // `memory://name` puts the name in the host; `memory:name` in the pathname.
  const name = decodeURIComponent(url.hostname || url.pathname.replace(/^\/+/, '')) || 'default';
  return new MemoryBackend(name);
}

/** Forget every named memory table (tests use it to start from a clean slate). */
export function resetMemoryTables(): void {
  stores.clear();
}
