/**
 * The in-process reference backend: every capability of the seam, against the lock table
 * in store.ts. Several lockers on one `memory://name` model several clients of one server.
 */
import { performance } from 'node:perf_hooks';
import {
  backendLog,
  EVERY_CAPABILITY,
  logRoundTrips,
  LockLostError,
  logWake,
  sleep,
  wakeClock,
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
import { entryState } from './observe.js';
import { compatible, MemoryStore, nextToken, queueAllows, WAITER_GRACE_MS, type Entry, type Holder, type Waiter } from './store.js';

/** Without a queue position there is nothing to be woken for: look again after this long. */
const UNQUEUED_RETRY_MS = 25;

/** The ticket a contended attempt leaves behind: the waiter in the entry's queue. */
export interface MemoryTicket {
  readonly waiter: Waiter;
}

const stores = new Map<string, MemoryStore>();
const log = backendLog('memory');

/** What the memory backend can do: everything. */
export const MEMORY_CAPABILITIES: Capabilities = EVERY_CAPABILITY;

/** The in-process reference backend. */
export class MemoryBackend implements Backend<MemoryTicket, undefined> {
  readonly name = 'memory';
  readonly capabilities: Capabilities = MEMORY_CAPABILITIES;
  readonly #store: MemoryStore;
  readonly #tableName: string;
  #closed = false;

  /** Open (or create) the lock table called `tableName`. */
  constructor(tableName = 'default') {
    let store = stores.get(tableName);
    if (!store) {
      store = new MemoryStore();
      stores.set(tableName, store);
    }
    store.users += 1;
    this.#store = store;
    this.#tableName = tableName;
    logRoundTrips(this, log);
  }

  /** Lock ids with state in this table (holders or waiters); idle ids cost nothing. */
  get entries(): number {
    return this.#store.size;
  }

  /** Waiters a change has woken so far in this table (each release wakes only whom it lets in). */
  get wakeups(): number {
    return this.#store.wakeups;
  }

  async tryAcquire(req: AcquireRequest<MemoryTicket>): Promise<AcquireResult<MemoryTicket, undefined>> {
    const now = performance.now();
    const e = this.#store.entry(req.lockId, now);
    const waiter = req.ticket?.waiter;
    const reentered = this.#reenter(e, req, now);
    if (reentered) {
      if (waiter) this.#store.removeWaiter(e, waiter);
      return { granted: true, grant: this.#grant(req, reentered.token, true) };
    }
    const position = waiter ? e.queue.indexOf(waiter) : -1;
    const ahead = position >= 0 ? e.queue.slice(0, position) : e.queue;
    if (compatible(e.holders, req) && queueAllows(req, ahead, e.holders.length)) {
      const token = nextToken();
      e.holders.push({
        ownerId: req.ownerId,
        kind: req.kind,
        token,
        count: 1,
        expiresAt: now + req.ttlMs,
        blocksUntil: now + req.ttlMs + req.lockDelayMs,
        lockDelayMs: req.lockDelayMs,
        identity: req.identity,
        acquiredAt: Date.now(),
      });
      if (waiter && position >= 0) this.#store.removeWaiter(e, waiter);
      // A grant may let other readers or permits through.
      else this.#store.changed(e, now);
      return { granted: true, grant: this.#grant(req, token, false) };
    }
    if (!req.wait) return { granted: false, contended: { ticket: undefined } };
    if (waiter && position >= 0) {
      waiter.signalled = false;
      return { granted: false, contended: { ticket: req.ticket } };
    }
    return { granted: false, contended: { ticket: { waiter: this.#store.addWaiter(e, req, now, req.ttlMs + WAITER_GRACE_MS) } } };
  }

  /**
   * Server-side reentrancy: the same owner holding the same kind re-enters with a count.
   * The hold's lease is stretched to cover the new grant's ttl, so every client that
   * re-entered may rely on its own ttl.
   */
  #reenter(e: Entry, req: AcquireRequest<MemoryTicket>, now: number): Holder | undefined {
    if (req.kind === 'semaphore') return undefined;
    const mine = e.holders.find((h) => h.ownerId === req.ownerId && h.kind === req.kind && h.expiresAt > now);
    if (!mine) return undefined;
    mine.count += 1;
    stretch(mine, now + req.ttlMs);
    return mine;
  }

  #grant(req: AcquireRequest<MemoryTicket>, token: bigint, reentered: boolean): Grant<undefined> {
    return { lockId: req.lockId, kind: req.kind, ownerId: req.ownerId, token, ttlMs: req.ttlMs, reentered, data: undefined };
  }

  async waitForChange(lockId: string, ticket: MemoryTicket | undefined, signal: AbortSignal): Promise<void> {
    signal.throwIfAborted();
    const e = this.#store.peek(lockId);
    const w = ticket?.waiter;
    const since = wakeClock(log);
    if (!e || !w || !e.queue.includes(w)) {
      await sleep(UNQUEUED_RETRY_MS, signal);
      logWake(log, lockId, 'poll', since);
      return;
    }
    if (w.signalled) {
      w.signalled = false;
      logWake(log, lockId, 'notification', since);
      return;
    }
    await new Promise<void>((resolve, reject) => {
      const onAbort = (): void => {
        this.#store.rouse(e, w);
        reject(signal.reason);
      };
      this.#store.sleep(e, w, () => {
        signal.removeEventListener('abort', onAbort);
        this.#store.rouse(e, w);
        logWake(log, lockId, 'notification', since);
        resolve();
      });
      signal.addEventListener('abort', onAbort, { once: true });
    });
  }

  async cancel(req: AcquireRequest<MemoryTicket>, ticket: MemoryTicket | undefined): Promise<void> {
    const e = this.#store.peek(req.lockId);
    if (!e) return;
    if (ticket) this.#store.removeWaiter(e, ticket.waiter);
    else if (req.freshOwner) {
      // An attempt that failed in flight: drop whatever hold or queue entry of this owner it left.
      for (const w of e.queue.filter((q) => q.ownerId === req.ownerId)) this.#store.removeWaiter(e, w);
      const before = e.holders.length;
      e.holders = e.holders.filter((h) => h.ownerId !== req.ownerId);
      if (e.holders.length !== before) this.#store.changed(e);
    }
  }

  async extend(grant: Grant<undefined>, ttlMs: number): Promise<Extension> {
    const now = performance.now();
    const e = this.#store.peek(grant.lockId);
    const h = e ? find(e, grant) : undefined;
    if (!h || h.expiresAt <= now) {
      throw new LockLostError(grant.lockId, 'not-held', { context: { backend: this.name } });
    }
    stretch(h, now + ttlMs);
    return { ttlMs };
  }

  async release(grant: Grant<undefined>): Promise<boolean> {
    const now = performance.now();
    const e = this.#store.peek(grant.lockId);
    const h = e ? find(e, grant) : undefined;
    // A lease that ran out is not ours to release any more, even if lockDelay still keeps it.
    if (!e || !h || h.expiresAt <= now) return false;
    h.count -= 1;
    if (h.count <= 0) e.holders.splice(e.holders.indexOf(h), 1);
    this.#store.changed(e, now);
    return true;
  }

  async inspect(lockId: string): Promise<LockState> {
    return entryState(lockId, this.#store.peek(lockId));
  }

  /** A keyset page in id order: the cursor is the last id of the page. */
  async list(req: ListRequest): Promise<ListPage> {
    req.signal.throwIfAborted();
    const now = performance.now();
    const { entries, more } = this.#store.page(req.prefix, req.cursor, req.limit, now);
    const last = entries[entries.length - 1];
    return { locks: entries.map((e) => entryState(e.lockId, e, now)), cursor: more && last ? last.lockId : undefined };
  }

  /**
   * Every hold ends at once, lockDelay included (a break is meant to free the lock), and
   * the token counter moves on, so the broken holder's token is below any later grant; its
   * next renewal finds the hold gone (`LockLostError`, reason `not-held`).
   */
  async forceRelease(lockId: string): Promise<number> {
    nextToken();
    const e = this.#store.peek(lockId);
    if (!e || e.holders.length === 0) return 0;
    const ended = e.holders.length;
    e.holders = [];
    this.#store.changed(e);
    return ended;
  }

  async close(): Promise<void> {
    if (this.#closed) return;
    this.#closed = true;
    const store = this.#store;
    store.users -= 1;
    store.sweep();
    if (store.users === 0 && store.size === 0 && stores.get(this.#tableName) === store) stores.delete(this.#tableName);
  }

  /** True after `close()`. */
  get closed(): boolean {
    return this.#closed;
  }
}

/** A lease only ever grows: one client's short renewal must not cut another's re-entered hold. */
function stretch(h: Holder, expiresAt: number): void {
  h.expiresAt = Math.max(h.expiresAt, expiresAt);
  h.blocksUntil = h.expiresAt + h.lockDelayMs;
}

function find(e: Entry, grant: Grant<undefined>): Holder | undefined {
  return e.holders.find((h) => h.ownerId === grant.ownerId && h.token === grant.token && h.kind === grant.kind);
}
