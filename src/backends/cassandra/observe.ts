/**
 * Seeing the fair lock's state: `inspect` of one lock, `list` over the index of lock ids
 * that the queue writes keep alive, and `forceRelease`. See docs/backends/cassandra.md,
 * "Seeing the locks" (what each field means, what a page costs) and "Breaking a lock".
 */
import { setMaxListeners } from 'node:events';
import type { ListPage, ListRequest, WaiterState } from '../../backend.js';
import { InvalidArgumentError, type HolderState, type LockState } from '../kit.js';
import type { Shards } from './shards.js';
import { entryOwner, INDEX_BUCKETS, type HoldCell, type LockTables, type QueueCell } from './tables.js';
import type { TimeService } from './time-service.js';

/** Main cells read per shard by `inspect`: holders and candidates, with room for racers. */
const INSPECT_MAIN_LIMIT = 16;
/** Queue entries read per shard by `inspect`. */
const INSPECT_QUEUE_LIMIT = 1000;
/** Locks of one page inspected at once: enough to hide round trips, few enough not to flood a node. */
const INSPECT_CONCURRENCY = 16;
/**
 * How far ahead of now a break's tombstones are dated: a broken holder's renewal already
 * under way (its check read done, its write not yet applied) lands before that time and is
 * shadowed. Longer than any statement's timeout; the clocks must agree within it.
 */
const BREAK_AHEAD_MICROS = 60_000_000n;
/** Attempts of the break's counter bump against racing grants. */
const BUMP_ATTEMPTS = 10;

/** Where the next page starts: a bucket, and the last lock id seen in it (none: its start). */
interface Position {
  readonly bucket: number;
  readonly after: string | undefined;
}

/** The cursor: `<bucket>` or `<bucket>.<base64url of the last lock id seen>`. */
export function encodeCursor(p: Position): string {
  return p.after === undefined ? String(p.bucket) : `${p.bucket}.${Buffer.from(p.after, 'utf8').toString('base64url')}`;
}

/** Read a cursor of {@link encodeCursor}; anything else is an `InvalidArgumentError`. */
export function decodeCursor(cursor: string): Position {
  const m = /^(\d{1,3})(?:\.([A-Za-z0-9_-]+))?$/.exec(cursor);
  const bucket = Number(m?.[1]);
  const b64 = m?.[2];
  if (!m || bucket >= INDEX_BUCKETS || (b64 !== undefined && Buffer.from(b64, 'base64url').toString('base64url') !== b64)) {
    throw new InvalidArgumentError('cursor', 'not a cursor of the cassandra backend');
  }
  return { bucket, after: b64 === undefined ? undefined : Buffer.from(b64, 'base64url').toString('utf8') };
}

/** Map `items` through `fn`, at most `width` at a time, keeping their order. */
async function pooled<T, R>(items: readonly T[], width: number, fn: (item: T) => Promise<R>): Promise<R[]> {
  const out: R[] = new Array<R>(items.length);
  let next = 0;
  const worker = async (): Promise<void> => {
    for (let i = next++; i < items.length; i = next++) out[i] = await fn(items[i] as T);
  };
  await Promise.all(Array.from({ length: Math.min(width, items.length) }, worker));
  return out;
}

/** The views of one backend's fair lock. */
export class LockViews {
  readonly #t: LockTables;
  readonly #rows: Shards;
  readonly #time: TimeService;

  constructor(tables: LockTables, rows: Shards, time: TimeService) {
    this.#t = tables;
    this.#rows = rows;
    this.#time = time;
  }

  /** Holders are the marked main cells, the queue the other entries, in queue order. */
  async inspect(lockId: string, signal?: AbortSignal): Promise<LockState> {
    const counter = await this.#t.counter(lockId, signal);
    const s = this.#rows.shardOf(counter);
    const shards = s > 0n ? [s - 1n, s] : [s];
    const [cells, entries] = await Promise.all([
      Promise.all(shards.map((x) => this.#t.holdCells(lockId, this.#rows.stored(x), INSPECT_MAIN_LIMIT, signal))),
      Promise.all(shards.map((x) => this.#t.queueCells(lockId, this.#rows.stored(x), INSPECT_QUEUE_LIMIT, signal))),
    ]);
    const nowMs = Number(this.#time.now() / 1000n);
    const holders = cells.flat().filter((c) => c.fence !== undefined);
    const holding = new Set(holders.map((h) => h.owner));
    const queue = entries
      .flat()
      .filter((e) => !holding.has(entryOwner(e.entry)))
      .sort((a, b) => (a.entry < b.entry ? -1 : a.entry > b.entry ? 1 : 0))
      .map(waiterOf);
    return { lockId, holders: holders.map((h) => holderOf(h, nowMs)), waiters: queue.length, queue, lastToken: counter };
  }

  /**
   * One page: index slices of the buckets from the cursor on, at most `limit` lock ids in
   * all, each inspected; ids whose lock has neither holder nor waiter any more (an index
   * cell outlives its lock by up to its TTL) are skipped, so a page may be short.
   */
  async list(req: ListRequest): Promise<ListPage> {
    const { prefix, signal } = req;
    let pos: Position = req.cursor === undefined ? { bucket: 0, after: undefined } : decodeCursor(req.cursor);
    let budget = req.limit;
    const ids: string[] = [];
    while (pos.bucket < INDEX_BUCKETS && budget > 0) {
      const from = pos.after ?? prefix;
      const asked = budget;
      const slice = await this.#t.indexSlice(pos.bucket, from, pos.after === undefined, asked, signal);
      const matching = slice.filter((id) => id.startsWith(prefix));
      // Ids with the prefix are one contiguous run from the prefix on: the first that lacks it ends the bucket.
      const run =
        matching.length === slice.length
          ? slice
          : slice.slice(
              0,
              slice.findIndex((id) => !id.startsWith(prefix)),
            );
      ids.push(...run);
      budget -= slice.length;
      const last = run[run.length - 1];
      const done = run.length < slice.length || slice.length < asked;
      pos = done || last === undefined ? { bucket: pos.bucket + 1, after: undefined } : { bucket: pos.bucket, after: last };
    }
    const states = await this.#inspectAll(ids, signal);
    const locks = states.filter((st) => st.holders.length > 0 || st.waiters > 0);
    return { locks, cursor: pos.bucket < INDEX_BUCKETS ? encodeCursor(pos) : undefined };
  }

  /**
   * Inspect a page's locks a few at a time. Their statements listen on one signal of our
   * own (each statement adds a listener), linked once to the caller's.
   */
  async #inspectAll(ids: readonly string[], signal: AbortSignal): Promise<LockState[]> {
    const own = new AbortController();
    setMaxListeners(INSPECT_CONCURRENCY * 8, own.signal);
    const abort = (): void => own.abort(signal.reason);
    signal.throwIfAborted();
    signal.addEventListener('abort', abort, { once: true });
    try {
      return await pooled(ids, INSPECT_CONCURRENCY, (id) => this.inspect(id, own.signal));
    } finally {
      signal.removeEventListener('abort', abort);
    }
  }

  /**
   * Break the lock: bump the counter first (a token taken from now on is above every broken
   * holder's), then delete every holder's main cell and queue entry with tombstones dated
   * ahead (see {@link BREAK_AHEAD_MICROS}) and every candidate's main cell (its token,
   * taken before the bump, is dropped with it). Resolves the broken holders' owner ids.
   */
  async forceRelease(lockId: string): Promise<string[]> {
    const before = await this.#t.counter(lockId);
    await this.#bump(lockId, before);
    const s = this.#rows.shardOf(before);
    const shards = [s - 1n, s, s + 1n].filter((x) => x >= 0n).map((x) => this.#rows.stored(x));
    const [cells, entries] = await Promise.all([
      Promise.all(shards.map(async (x) => (await this.#t.holdCells(lockId, x, INSPECT_MAIN_LIMIT)).map((c) => ({ ...c, shard: x })))),
      Promise.all(shards.map(async (x) => (await this.#t.queueCells(lockId, x, INSPECT_QUEUE_LIMIT)).map((e) => ({ ...e, shard: x })))),
    ]);
    const at = this.#time.now() + BREAK_AHEAD_MICROS;
    const queue = entries.flat();
    const broken: string[] = [];
    await Promise.all(
      cells.flat().map((c) => {
        if (c.fence === undefined) return this.#t.deleteMain(lockId, c.shard, c.owner);
        broken.push(c.owner);
        const own = queue.filter((e) => entryOwner(e.entry) === c.owner);
        return this.#t.breakHold(lockId, c.shard, c.owner, own, at);
      }),
    );
    return broken;
  }

  /** Move the counter up by one from wherever it is (a racing grant moves it too: go on from its value). */
  async #bump(lockId: string, from: bigint): Promise<void> {
    let expected = from;
    for (let i = 0; i < BUMP_ATTEMPTS; i++) {
      const r = await this.#t.cas(lockId, expected);
      if (r.applied) return;
      expected = r.current ?? 0n;
    }
    throw new Error(`the fencing counter of '${lockId}' kept moving: ${BUMP_ATTEMPTS} bumps refused`);
  }
}

function holderOf(h: HoldCell, nowMs: number): HolderState {
  const leaseEndsAt = h.writtenMicros !== undefined && h.leaseMs !== undefined ? Number(h.writtenMicros / 1000n) + h.leaseMs : undefined;
  return {
    ownerId: h.owner,
    kind: 'mutex',
    token: h.fence ?? 0n,
    count: 1,
    ...(h.identity !== undefined ? { identity: h.identity } : {}),
    ...(h.acquiredMs !== undefined ? { acquiredAt: Number(h.acquiredMs) } : {}),
    ...(leaseEndsAt !== undefined ? { leaseEndsAt, expiresInMs: Math.max(0, leaseEndsAt - nowMs) } : {}),
  };
}

function waiterOf(e: QueueCell): WaiterState {
  return {
    ownerId: entryOwner(e.entry),
    kind: 'mutex',
    fair: true,
    ...(e.identity !== undefined ? { identity: e.identity } : {}),
    since: Number(BigInt(e.entry.slice(0, 20)) / 1000n),
  };
}
