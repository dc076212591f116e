/**
 * The waiters row of the benchmark matrix: many acquisitions queued on one held lock. What
 * they cost while nothing changes (server operations per second, through a probe the
 * per-engine script passes; client heap), then how long they take to pass the lock along.
 * See docs/benchmarks.md.
 */
import { setTimeout as sleep } from 'node:timers/promises';
import { performance } from 'node:perf_hooks';
import { setMaxListeners } from 'node:events';
import { contenderOf, type BenchSource } from './client.js';

/** Counts something on the server (commands processed, queries, packets): the per-engine scripts pass one. */
export type ServerProbe = () => Promise<number>;

/** Waiters-row settings. */
export interface WaitersOptions {
  /** The idle window the probe counts over (ms). @default 3000 */
  readonly idleMs?: number;
  /** Counts server operations; without it the idle cost is not measured. */
  readonly probe?: ServerProbe;
  /** Waiters per client (each client its own connections). @default 100 */
  readonly perClient?: number;
  /** For a contender that cannot report queueing: everybody is assumed queued after this (ms). @default 2000 */
  readonly unreportedSettleMs?: number;
  /** Give up draining after this long and abort the rest (ms). @default 60000 */
  readonly drainBudgetMs?: number;
}

/** Result of {@link benchWaiters}. */
export interface WaitersResult {
  readonly waiters: number;
  /** Server operations per second while everybody waits and nothing changes (when a probe was given). */
  readonly idleOpsPerSec: number | undefined;
  /** Client heap per waiter (bytes), measured after the waiters settled (after a full GC under `node --expose-gc`). */
  readonly heapPerWaiterBytes: number;
  /** `event`: every waiter reported it queued; `delay`: assumed after a settle delay. */
  readonly queuedBy: 'event' | 'delay';
  /** Waiters that got the lock within the drain budget (the rest were aborted). */
  readonly drained: number;
  /** Time for them to get the lock once each, one after the other (ms). */
  readonly drainMs: number;
}

/** A full GC when node runs with --expose-gc, so the heap figure is not GC timing noise. */
function collectGarbage(): void {
  const gc: unknown = Reflect.get(globalThis, 'gc');
  if (typeof gc === 'function') gc();
}

/** Resolve when `n` calls of the returned callback happened. */
function countdown(n: number): { tick: () => void; done: Promise<void> } {
  let left = n;
  let resolve: () => void = () => undefined;
  const done = new Promise<void>((r) => (resolve = r));
  if (left <= 0) resolve();
  return { tick: () => void (--left === 0 && resolve()), done };
}

/** `waiters` queued on one held lock (100 per client): idle cost, then the drain. */
export async function benchWaiters(source: BenchSource, waiters: number, o: WaitersOptions = {}, fair = false): Promise<WaitersResult> {
  const c = contenderOf(source, fair);
  const idleMs = o.idleMs ?? 3_000;
  const perClient = o.perClient ?? 100;
  const holder = await c.client();
  const clients = await Promise.all(Array.from({ length: Math.ceil(waiters / perClient) }, () => c.client()));
  const lockId = `bench:waiters:${Date.now().toString(36)}:${Math.random().toString(36).slice(2, 8)}`;
  const stop = new AbortController();
  setMaxListeners(waiters + 10, stop.signal);
  try {
    const held = await holder.acquire(lockId);
    collectGarbage();
    const heapBefore = process.memoryUsage().heapUsed;
    const queued = countdown(waiters);
    const drain = countdown(waiters);
    let drained = 0;
    for (let i = 0; i < waiters; i++) {
      const client = clients[i % clients.length];
      // Once per waiter: queued, or settled without having said so (never hang on a miscount).
      let counted = false;
      const onQueued = (): void => void (!counted && ((counted = true), queued.tick()));
      const options = c.reportsQueued ? { signal: stop.signal, onQueued } : { signal: stop.signal };
      void client?.acquire(lockId, options).then(
        async (h) => {
          onQueued();
          drained += 1;
          drain.tick();
          await h.release().catch(() => undefined);
        },
        () => {
          onQueued();
          drain.tick();
        },
      );
    }
    if (c.reportsQueued) await queued.done;
    else await sleep(o.unreportedSettleMs ?? 2_000);
    // Let the waiters settle into their steady state (subscribed, watching, polling).
    await sleep(Math.min(1_000, idleMs));
    collectGarbage();
    const heapPerWaiterBytes = Math.max(0, (process.memoryUsage().heapUsed - heapBefore) / waiters);
    const before = o.probe ? await o.probe() : 0;
    const t0 = performance.now();
    await sleep(idleMs);
    const idleOpsPerSec = o.probe ? ((await o.probe()) - before) / ((performance.now() - t0) / 1000) : undefined;
    const drainStart = performance.now();
    await held.release();
    const budget = o.drainBudgetMs ?? 60_000;
    const timer = new AbortController();
    const ended = await Promise.race([drain.done.then(() => true), sleep(budget, false, { signal: timer.signal }).catch(() => false)]);
    timer.abort();
    const drainMs = performance.now() - drainStart;
    if (!ended) stop.abort(new Error('drain budget over'));
    return { waiters, idleOpsPerSec, heapPerWaiterBytes, queuedBy: c.reportsQueued ? 'event' : 'delay', drained, drainMs };
  } finally {
    stop.abort(new Error('row over'));
    await Promise.allSettled([holder, ...clients].map((l) => l.close()));
  }
}
