/**
 * What `GET /v1/events?mode=state` streams of one prefix share on a replica (docs/serve.md,
 * "Events"): the ids of the locks that changed, and per tick (at most every `stateEveryMs`)
 * one read of each, sent as one Buffer to every stream. Where the engine notifies changes by
 * lock id (`backend.changes`, e.g. Redis pub/sub) nothing else is read: a hundred views of a
 * lock handed on a thousand times a second cost a few reads a second, not the watch's read
 * of every change (docs/benchmarks.md, "The lock service"); a lease that ends without a
 * change is read again when it ends. Elsewhere the feed lists the prefix every `everyMs`, as
 * a polled watch would, and sends the locks whose state differs from the last listing.
 */
import { setTimeout as sleep } from 'node:timers/promises';
import type { Locker } from '../locker.js';
import type { LockInfo } from '../observe/list.js';
import { MAX_TIMER_MS } from '../util/time.js';
import { RESERVED_PREFIX } from './records.js';
import { lockJson } from './routes.js';

/** Locks read at once in one tick. */
const READS_AT_ONCE = 32;
/** Read a lock this long after its earliest lease end (ms), so that the end has passed. */
const LEASE_SLACK_MS = 50;
/** Least time between two resyncs of a feed (ms). */
const RESYNC_GAP_MS = 1_000;

/** One open stream, as a feed sees it. */
export interface Listener {
  deliver(frames: Buffer): void;
  fail(err: unknown): void;
}

/** One lock's state as an SSE frame. */
/** The frame of a lock gone from the listing: free, nobody waiting. */
const freedFrame = (info: LockInfo): string => stateFrame({ ...info, holders: [], waiters: 0, queue: [] });

export function stateFrame(info: LockInfo): string {
  return `event: state\ndata: ${JSON.stringify(lockJson(info))}\n\n`;
}

/** The state of every lock under `prefix` now (every page of the listing), the service's own records left out. */
export async function listStates(locker: Locker, prefix: string, signal: AbortSignal): Promise<LockInfo[]> {
  const out: LockInfo[] = [];
  let cursor: string | undefined;
  do {
    const page = await locker.list({ prefix, limit: 1000, signal, ...(cursor === undefined ? {} : { cursor }) });
    for (const l of page.locks) if (!l.lockId.startsWith(RESERVED_PREFIX)) out.push(l);
    cursor = page.cursor;
  } while (cursor !== undefined && !signal.aborted);
  return out;
}

/** The shared state ticks of one prefix. */
export class StateFeed {
  readonly listeners = new Set<Listener>();
  readonly #stop = new AbortController();
  readonly #dirty = new Set<string>();
  readonly #leases = new Map<string, NodeJS.Timeout>();
  #timer: NodeJS.Timeout | undefined;
  #reading = false;
  /** Following by listing (no notifications): leases need no timers. */
  #polled = false;
  #lastAt = -Infinity;
  #lastResync = -Infinity;
  /**
   * Polled: the locks streams were sent by their own first listing since the feed's last
   * one, which may be newer than it: sent again after the next listing whatever its diff,
   * else a lock taken and released between the feed's listings stays held in such a stream.
   */
  readonly #shown = new Map<string, LockInfo>();
  #ready: () => void = () => undefined;
  /** Resolves once changes are followed: a listing read after it misses no change. */
  readonly ready = new Promise<void>((resolve) => (this.#ready = resolve));

  constructor(
    private readonly locker: Locker,
    private readonly prefix: string,
    private readonly everyMs: number,
    private readonly stateEveryMs: number,
  ) {}

  /** Follow the changes until {@link close}; `ended` is called when following fails. */
  start(ended: () => void): void {
    void this.#follow().catch((err: unknown) => {
      ended();
      this.#ready();
      if (this.#stop.signal.aborted) return;
      this.close();
      for (const l of this.listeners) l.fail(err);
    });
  }

  close(): void {
    this.#stop.abort();
    this.#ready();
    clearTimeout(this.#timer);
    for (const t of this.#leases.values()) clearTimeout(t);
    this.#leases.clear();
  }

  /** Locks a stream was sent by its listing: their leases' ends are followed too. */
  seen(infos: readonly LockInfo[]): void {
    if (this.#polled) for (const info of infos) this.#shown.set(info.lockId, info);
    else for (const info of infos) this.#followLease(info);
  }

  async #follow(): Promise<void> {
    const signal = this.#stop.signal;
    const backend = await this.locker.backend();
    if (!backend.changes) return this.#poll(signal);
    let subscribed = false;
    for await (const id of backend.changes({ prefix: this.prefix, signal })) {
      if (id !== null) this.#mark(id);
      else if (!subscribed) {
        subscribed = true;
        this.#ready();
      } else await this.#resync(); // changes may have been missed (a subscription re-established, a change not named)
    }
  }

  /**
   * Without notifications: list every `everyMs` (as a polled watch would) and send the locks
   * whose state differs from the last listing; the listing is the read, nothing is inspected.
   */
  async #poll(signal: AbortSignal): Promise<void> {
    this.#polled = true;
    let before = new Map<string, { info: LockInfo; frame: string }>();
    for (let first = true; !signal.aborted; first = false) {
      const now = new Map(
        (await listStates(this.locker, this.prefix, signal)).map((info) => [info.lockId, { info, frame: stateFrame(info) }]),
      );
      let text = '';
      const shown = new Map(this.#shown);
      this.#shown.clear();
      for (const [id, s] of now) if (before.get(id)?.frame !== s.frame || shown.has(id)) text += s.frame;
      for (const [id, s] of before) if (!now.has(id)) text += freedFrame(s.info);
      for (const [id, info] of shown) if (!now.has(id) && !before.has(id)) text += freedFrame(info);
      // The first listing is what streams opened before it were sent by their own: ready after it.
      if (first) this.#ready();
      else if (text !== '') this.#send(Buffer.from(text));
      before = now;
      await sleep(this.everyMs, undefined, { signal }).catch(() => undefined);
    }
  }

  #send(frames: Buffer): void {
    if (!this.#stop.signal.aborted) for (const l of this.listeners) l.deliver(frames);
  }

  /** Every stream gets a `resync` and the whole state again (one listing, one Buffer for all). */
  async #resync(): Promise<void> {
    // At most one a second: the notices that come meanwhile wait, and several `null`s are one.
    const wait = this.#lastResync + RESYNC_GAP_MS - performance.now();
    if (wait > 0) await sleep(wait, undefined, { signal: this.#stop.signal });
    this.#lastResync = performance.now();
    const infos = await listStates(this.locker, this.prefix, this.#stop.signal);
    this.seen(infos);
    const text = `event: resync\ndata: {"reason":"the replica may have missed changes"}\n\n${infos.map(stateFrame).join('')}`;
    this.#send(Buffer.from(text));
  }

  #mark(lockId: string): void {
    if (lockId.startsWith(RESERVED_PREFIX)) return;
    this.#dirty.add(lockId);
    if (this.#timer !== undefined || this.#reading || this.#stop.signal.aborted) return;
    // Spaced on the monotonic clock: a step of the wall clock neither stalls nor hurries the ticks.
    this.#timer = setTimeout(() => void this.#tick(), Math.max(0, this.#lastAt + this.stateEveryMs - performance.now()));
    this.#timer.unref();
  }

  /** One tick: read each lock that changed since the last (after its change), send them all at once. */
  async #tick(): Promise<void> {
    this.#timer = undefined;
    this.#reading = true;
    const ids = [...this.#dirty];
    this.#dirty.clear();
    let text = '';
    try {
      for (let i = 0; i < ids.length; i += READS_AT_ONCE) {
        const infos = await Promise.all(ids.slice(i, i + READS_AT_ONCE).map((id) => this.locker.inspect(id)));
        for (const info of infos) {
          this.#followLease(info);
          text += stateFrame(info);
        }
      }
    } catch {
      // The backend did not answer: read them again next tick (following fails the streams if it stays down).
      for (const id of ids) this.#dirty.add(id);
    }
    if (text !== '') this.#send(Buffer.from(text));
    this.#reading = false;
    this.#lastAt = performance.now();
    const again = [...this.#dirty];
    this.#dirty.clear();
    for (const id of again) this.#mark(id);
  }

  /** Read the lock again when its earliest lease ends (an expiry, or a renewal, changes what a view shows). */
  #followLease(info: LockInfo): void {
    clearTimeout(this.#leases.get(info.lockId));
    this.#leases.delete(info.lockId);
    const ends = info.holders.map((h) => h.leaseEndsAt).filter((t): t is number => t !== undefined);
    if (ends.length === 0 || this.#stop.signal.aborted) return;
    const timer = setTimeout(
      () => {
        this.#leases.delete(info.lockId);
        this.#mark(info.lockId);
      },
      Math.min(MAX_TIMER_MS, Math.max(0, Math.min(...ends) - Date.now()) + LEASE_SLACK_MS),
    );
    timer.unref();
    this.#leases.set(info.lockId, timer);
  }
}
