/** The whole matrix in one call, and its text form (what `locksmith bench` prints). */
import * as matrix from './matrix.js';
import { contenderOf, type BenchSource, type Contender } from './client.js';
import type { HotResult, KeysResult } from './matrix.js';
import {
  benchLatencies,
  type HandoffOptions,
  type HandoffResult,
  type LatencyResult,
  type RoundTripResult,
  type UncontendedResult,
} from './latency.js';
import type { ServerProbe, WaitersResult } from './waiters.js';

/** What to run. Every field has a default sized for a few seconds per row. */
export interface MatrixOptions {
  /** Uncontended lock + release cycles per library per round. @default 200 */
  readonly iterations?: number;
  /** Measured rounds of the uncontended row (after one warm-up round). @default 10 */
  readonly rounds?: number;
  /** Hand-off samples (one per round). @default 60 */
  readonly handoffRounds?: number;
  /** Contender counts of the hot-lock rows. @default [1, 2, 8, 32, 64] */
  readonly contenders?: readonly number[];
  /** Length of each hot-lock row (ms). @default 3000 */
  readonly durationMs?: number;
  /** Critical section in the hot-lock rows (ms). @default 2 */
  readonly criticalMs?: number;
  /**
   * When several libraries are compared: each hot-lock row is cut into this many slices per
   * library, run in alternating rounds (`benchHotRounds`). @default 4
   */
  readonly hotRounds?: number;
  /** Fair mode, when the source is a `LockerFactory` (a `Contender` decides for itself). @default false */
  readonly fair?: boolean;
  /** Distinct keys of the keys row (0: skip). @default 10000 */
  readonly keys?: number;
  /** Waiters of the waiters row (0: skip). @default 1000 */
  readonly waiters?: number;
  /** Idle window of the waiters row (ms). @default 3000 */
  readonly idleMs?: number;
  /** Give up draining the waiters after this long (ms). @default 60000 */
  readonly drainBudgetMs?: number;
  /** For a contender that cannot report queueing: all waiters are assumed queued after this (ms). @default 2000 */
  readonly waitersSettleMs?: number;
  /** Counts server operations, for the idle cost of waiters. */
  readonly probe?: ServerProbe;
  /** Idle range of the waiter and time budget of the hand-off row. */
  readonly handoff?: HandoffOptions;
  /** Called with each row's label as it starts (progress). */
  readonly onRow?: (label: string) => void;
}

/** Everything the matrix measured. */
export interface MatrixResult {
  /** The contender's name. */
  readonly name: string;
  /** True for a peer library (see `Contender.peer`). */
  readonly peer: boolean;
  readonly fair: boolean;
  readonly uncontended: UncontendedResult;
  /** Holder and waiter in one process. */
  readonly handoff: HandoffResult;
  /** The waiter in a second process (contenders with `remote`). */
  readonly handoffRemote: HandoffResult | undefined;
  /** One plain round trip from the hand-off's holder after the same idle (clients with `roundTrip`). */
  readonly roundTrip: RoundTripResult | undefined;
  readonly hot: readonly HotResult[];
  readonly keys: KeysResult | undefined;
  readonly waiters: WaitersResult | undefined;
}

/** The uncontended and hand-off rows of `contenders`, in alternating rounds (latency.ts). */
export function runLatencies(contenders: readonly Contender[], o: MatrixOptions = {}): Promise<Map<string, LatencyResult>> {
  return benchLatencies(
    contenders,
    {
      cycles: o.iterations ?? 200,
      rounds: o.rounds ?? 10,
      handoffRounds: o.handoffRounds ?? 60,
      ...(o.handoff ? { handoff: o.handoff } : {}),
    },
    o.onRow,
  );
}

/** The contender counts of the hot-lock rows that `c` can run. */
export function hotSizes(c: Contender, o: MatrixOptions): number[] {
  const max = c.limits?.maxContenders;
  return (o.contenders ?? [1, 2, 8, 32, 64]).filter((n) => n > 0 && (max === undefined || n <= max));
}

/** The hot-lock rows of `contenders`, each row in alternating rounds (`benchHotRounds`), by name. */
export async function runHotRounds(contenders: readonly Contender[], o: MatrixOptions = {}): Promise<Map<string, HotResult[]>> {
  const out = new Map<string, HotResult[]>(contenders.map((c) => [c.name, []]));
  const sizes = [...new Set(contenders.flatMap((c) => hotSizes(c, o)))].sort((a, b) => a - b);
  for (const k of sizes) {
    const able = contenders.filter((c) => hotSizes(c, o).includes(k));
    o.onRow?.(`hot lock x${k}, ${o.hotRounds ?? 4} alternating rounds`);
    const row = await matrix.benchHotRounds(able, k, o.durationMs ?? 3_000, o.criticalMs ?? 2, o.hotRounds ?? 4);
    for (const [name, r] of row) out.get(name)?.push(r);
  }
  return out;
}

/**
 * Run the matrix against one contender (or locksmith over a `LockerFactory`); `latency` and
 * `hot`, when given, are rows already measured (in alternating rounds with other libraries).
 */
export async function runMatrix(
  source: BenchSource,
  o: MatrixOptions = {},
  latency?: LatencyResult,
  measuredHot?: readonly HotResult[],
): Promise<MatrixResult> {
  const fair = o.fair ?? false;
  const c = contenderOf(source, fair);
  const row = o.onRow ?? (() => undefined);
  const lat = latency ?? (await runLatencies([c], o)).get(c.name);
  if (!lat) throw new Error(`no latency rows for ${c.name}`);
  const hot: HotResult[] = measuredHot ? [...measuredHot] : [];
  const limits = c.limits ?? {};
  for (const k of measuredHot ? [] : hotSizes(c, o)) {
    row(`hot lock x${k}`);
    hot.push(await matrix.benchHot(c, k, o.durationMs ?? 3_000, o.criticalMs ?? 2));
  }
  const keyCount = limits.keys === false ? 0 : (o.keys ?? 10_000);
  if (keyCount > 0) row(`${keyCount} keys`);
  const keys = keyCount > 0 ? await matrix.benchKeys(c, keyCount) : undefined;
  const waiterCount = limits.waiters === false ? 0 : (o.waiters ?? 1_000);
  if (waiterCount > 0) row(`${waiterCount} waiters`);
  const waiters =
    waiterCount > 0
      ? await matrix.benchWaiters(c, waiterCount, {
          idleMs: o.idleMs ?? 3_000,
          ...(o.probe ? { probe: o.probe } : {}),
          ...(o.drainBudgetMs === undefined ? {} : { drainBudgetMs: o.drainBudgetMs }),
          ...(o.waitersSettleMs === undefined ? {} : { unreportedSettleMs: o.waitersSettleMs }),
        })
      : undefined;
  const { uncontended, handoff, handoffRemote, roundTrip } = lat;
  return { name: c.name, peer: c.peer ?? false, fair: c.fair ?? fair, uncontended, handoff, handoffRemote, roundTrip, hot, keys, waiters };
}

const ms = (x: number): string => `${x.toFixed(3)} ms`;

/** How the hand-off row was measured, for the output. */
export function handoffNote(h: HandoffResult): string {
  const where = h.processes === 1 ? 'holder and waiter in one process' : 'the waiter in a second process';
  return `${where}, waiter idle ${h.idleMs[0]}–${h.idleMs[1]} ms, release() took p50 ${ms(h.release.p50)} / p99 ${ms(h.release.p99)}`;
}

/** `release()` with a waiter against one round trip after the same idle, as one line. */
export function roundTripLine(r: MatrixResult): string {
  const t = r.roundTrip;
  if (!t) return `${r.name}: no round trip measured`;
  const ratio = (x: number): string => `${(x / t.idle.p50).toFixed(2)}×`;
  const two = r.handoffRemote
    ? `, waiter in a second process ${ms(r.handoffRemote.release.p50)} = ${ratio(r.handoffRemote.release.p50)}`
    : '';
  return (
    `release() with a waiter p50 / idle round trip p50: ${ms(r.handoff.release.p50)} = ${ratio(r.handoff.release.p50)}${two} ` +
    `(idle round trip p50 ${ms(t.idle.p50)} / p99 ${ms(t.idle.p99)}, n ${t.idle.n}; warm, at once after it, p50 ${ms(t.warm.p50)})`
  );
}

/** The waiters row as one line. */
export function waitersLine(w: WaitersResult): string {
  const idle = w.idleOpsPerSec === undefined ? 'server ops n/a' : `${w.idleOpsPerSec.toFixed(1)} server ops/s idle`;
  const drained =
    w.drained === w.waiters ? `drained in ${w.drainMs.toFixed(0)} ms` : `${w.drained} drained in ${w.drainMs.toFixed(0)} ms (budget)`;
  const assumed = w.queuedBy === 'delay' ? ' (queued assumed after a delay)' : '';
  return `${w.waiters} waiters${assumed}: ${idle}, ${(w.heapPerWaiterBytes / 1024).toFixed(1)} KiB heap each, ${drained}`;
}

/** The matrix as text lines. */
export function formatMatrix(r: MatrixResult): string[] {
  const u = r.uncontended;
  const lines = [
    `uncontended lock+release: p50 ${ms(u.p50)}, p99 ${ms(u.p99)} (n ${u.n}; release() alone p50 ${ms(u.release.p50)})`,
    `hand-off${r.fair ? ' (fair)' : ''}: p50 ${ms(r.handoff.p50)}, p99 ${ms(r.handoff.p99)} (n ${r.handoff.n}; ${handoffNote(r.handoff)})`,
  ];
  const h2 = r.handoffRemote;
  if (h2) lines.push(`hand-off, two processes: p50 ${ms(h2.p50)}, p99 ${ms(h2.p99)} (n ${h2.n}; ${handoffNote(h2)})`);
  if (r.roundTrip) lines.push(roundTripLine(r));
  for (const h of r.hot) {
    const overlaps = h.overlaps > 0 ? `, ${h.overlaps} OVERLAPPING GRANTS` : '';
    lines.push(
      `hot lock x${h.contenders}: ${h.opsPerSec.toFixed(1)} ops/s, Jain ${h.jain.toFixed(3)}, longest streak ${h.longestStreak}, longest wait ${h.longestWaitMs.toFixed(0)} ms${overlaps}`,
    );
  }
  if (r.keys) {
    lines.push(`${r.keys.keys} keys: ${r.keys.acquiresPerSec.toFixed(0)} acquires/s, ${r.keys.releasesPerSec.toFixed(0)} releases/s`);
  }
  if (r.waiters) lines.push(waitersLine(r.waiters));
  return lines;
}
