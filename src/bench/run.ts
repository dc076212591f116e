/** The whole matrix in one call, and its text form (what `locksmith bench` prints). */
import * as matrix from './matrix.js';
import type { HotResult, KeysResult, LockerFactory, ServerProbe, WaitersResult } from './matrix.js';
import type { Percentiles } from './stats.js';

/** What to run. Every field has a default sized for a few seconds per row. */
export interface MatrixOptions {
  /** Samples of the uncontended and hand-off latencies. @default 200 (hand-off: at most 100) */
  readonly iterations?: number;
  /** Contender counts of the hot-lock rows. @default [1, 2, 8, 32, 64] */
  readonly contenders?: readonly number[];
  /** Length of each hot-lock row (ms). @default 3000 */
  readonly durationMs?: number;
  /** Critical section in the hot-lock rows (ms). @default 2 */
  readonly criticalMs?: number;
  /** Fair mode everywhere. @default false */
  readonly fair?: boolean;
  /** Distinct keys of the keys row (0: skip). @default 10000 */
  readonly keys?: number;
  /** Waiters of the waiters row (0: skip). @default 1000 */
  readonly waiters?: number;
  /** Idle window of the waiters row (ms). @default 3000 */
  readonly idleMs?: number;
  /** Counts server operations, for the idle cost of waiters. */
  readonly probe?: ServerProbe;
  /** Called with each row's label as it starts (progress). */
  readonly onRow?: (label: string) => void;
}

/** Everything the matrix measured. */
export interface MatrixResult {
  readonly fair: boolean;
  readonly uncontended: Percentiles;
  readonly handoff: Percentiles;
  readonly hot: readonly HotResult[];
  readonly keys: KeysResult | undefined;
  readonly waiters: WaitersResult | undefined;
}

/** Run the matrix against the backend `make` creates clients of. */
export async function runMatrix(make: LockerFactory, o: MatrixOptions = {}): Promise<MatrixResult> {
  const fair = o.fair ?? false;
  const n = o.iterations ?? 200;
  const row = o.onRow ?? (() => undefined);
  row('uncontended');
  const uncontended = await matrix.benchUncontended(make, n, fair);
  row('hand-off');
  const handoff = await matrix.benchHandoff(make, Math.min(n, 100), fair);
  const hot: HotResult[] = [];
  for (const c of o.contenders ?? [1, 2, 8, 32, 64]) {
    row(`hot lock x${c}`);
    hot.push(await matrix.benchHot(make, c, o.durationMs ?? 3_000, o.criticalMs ?? 2, fair));
  }
  const keyCount = o.keys ?? 10_000;
  if (keyCount > 0) row(`${keyCount} keys`);
  const keys = keyCount > 0 ? await matrix.benchKeys(make, keyCount) : undefined;
  const waiterCount = o.waiters ?? 1_000;
  if (waiterCount > 0) row(`${waiterCount} waiters`);
  const waiters = waiterCount > 0 ? await matrix.benchWaiters(make, waiterCount, o.idleMs ?? 3_000, o.probe) : undefined;
  return { fair, uncontended, handoff, hot, keys, waiters };
}

const ms = (x: number): string => `${x.toFixed(3)} ms`;

/** The matrix as text lines. */
export function formatMatrix(r: MatrixResult): string[] {
  const lines = [
    `uncontended acquire+release: p50 ${ms(r.uncontended.p50)}, p99 ${ms(r.uncontended.p99)}`,
    `hand-off${r.fair ? ' (fair)' : ''}: p50 ${ms(r.handoff.p50)}, p99 ${ms(r.handoff.p99)}`,
  ];
  for (const h of r.hot) {
    lines.push(
      `hot lock x${h.contenders}: ${h.opsPerSec.toFixed(1)} ops/s, Jain ${h.jain.toFixed(3)}, longest streak ${h.longestStreak}, longest wait ${h.longestWaitMs.toFixed(0)} ms`,
    );
  }
  if (r.keys) {
    lines.push(`${r.keys.keys} keys: ${r.keys.acquiresPerSec.toFixed(0)} acquires/s, ${r.keys.releasesPerSec.toFixed(0)} releases/s`);
  }
  if (r.waiters) {
    const w = r.waiters;
    const idle = w.idleOpsPerSec === undefined ? 'server ops n/a' : `${w.idleOpsPerSec.toFixed(1)} server ops/s idle`;
    lines.push(
      `${w.waiters} waiters: ${idle}, ${(w.heapPerWaiterBytes / 1024).toFixed(1)} KiB heap each, drained in ${w.drainMs.toFixed(0)} ms`,
    );
  }
  return lines;
}
