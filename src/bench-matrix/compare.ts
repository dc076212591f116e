/**
 * Several libraries through the same matrix in one run, and the comparison the per-engine
 * scripts print: two tables, ratios of each locksmith variant against the best peer per
 * row, and one JSON line per library. See docs/benchmarks.md.
 */
import { cpus, loadavg } from 'node:os';
import type { Contender } from './client.js';
import { handoffNote, roundTripLine, runHotRounds, runLatencies, runMatrix, type MatrixOptions, type MatrixResult } from './run.js';

/** The machine a run happened on (figures compare only within one run). */
export interface MachineInfo {
  readonly cpus: number;
  readonly cpu: string;
  readonly node: string;
  /** 1-minute load average when the run started: a loaded machine is worth knowing about. */
  readonly load: number;
}

/** Describe this machine. */
export function machineInfo(): MachineInfo {
  return { cpus: cpus().length, cpu: cpus()[0]?.model ?? '?', node: process.version, load: loadavg()[0] ?? 0 };
}

/** Options of {@link runComparison}. */
export interface ComparisonOptions extends MatrixOptions {
  /** Progress lines (`name: row`). */
  readonly progress?: (line: string) => void;
}

/**
 * Run the matrix for every contender with the same options: the latency rows and then the
 * hot-lock rows of all of them in alternating rounds (so that load hits each alike), then the
 * other rows of each.
 */
export async function runComparison(contenders: readonly Contender[], o: ComparisonOptions = {}): Promise<MatrixResult[]> {
  const progress = o.progress;
  const latency = await runLatencies(contenders, { ...o, ...(progress ? { onRow: progress } : {}) });
  const hot = await runHotRounds(contenders, { ...o, ...(progress ? { onRow: progress } : {}) });
  const results: MatrixResult[] = [];
  for (const c of contenders) {
    const rowOptions = { ...o, ...(progress ? { onRow: (row: string) => progress(`${c.name}: ${row}`) } : {}) };
    results.push(await runMatrix(c, rowOptions, latency.get(c.name), hot.get(c.name)));
  }
  return results;
}

const f = (x: number | undefined, digits: number): string => (x === undefined || !Number.isFinite(x) ? 'n/a' : x.toFixed(digits));

function latencyTable(results: readonly MatrixResult[]): string[] {
  const w = results.find((r) => r.waiters)?.waiters?.waiters;
  const k = results.find((r) => r.keys)?.keys?.keys;
  const lines = [
    `| library | uncontended p50 / p99 (ms) | release() alone p50 | hand-off p50 / p99 (ms) | release() with a waiter p50 | idle round trip p50 | hand-off, 2 processes p50 / p99 | ${k ?? 0} keys: acquires/s | ${w ?? 0} waiters: server ops/s idle | KiB heap per waiter | drain (ms) |`,
    '|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|',
  ];
  for (const r of results) {
    const ws = r.waiters;
    const drain = ws ? `${f(ws.drainMs, 0)}${ws.drained < ws.waiters ? ` (${ws.drained} of ${ws.waiters})` : ''}` : 'n/a';
    const h2 = r.handoffRemote;
    lines.push(
      `| ${r.name} | ${f(r.uncontended.p50, 3)} / ${f(r.uncontended.p99, 3)} | ${f(r.uncontended.release.p50, 3)} | ${f(r.handoff.p50, 3)} / ${f(r.handoff.p99, 3)} | ${f(r.handoff.release.p50, 3)} | ${f(r.roundTrip?.idle.p50, 3)} | ${h2 ? `${f(h2.p50, 3)} / ${f(h2.p99, 3)}` : 'n/a'} | ${f(r.keys?.acquiresPerSec, 0)} | ${f(ws?.idleOpsPerSec, 1)} | ${f(ws ? ws.heapPerWaiterBytes / 1024 : undefined, 1)} | ${drain} |`,
    );
  }
  return lines;
}

function hotTable(results: readonly MatrixResult[], criticalMs: number | undefined): string[] {
  const lines = [
    `| library | contenders | ops/s (critical section ${criticalMs ?? 2} ms) | Jain | longest streak | longest wait (ms) | overlapping grants |`,
    '|---|---:|---:|---:|---:|---:|---:|',
  ];
  for (const r of results) {
    for (const h of r.hot) {
      lines.push(
        `| ${r.name} | ${h.contenders} | ${f(h.opsPerSec, 1)} | ${f(h.jain, 3)} | ${h.longestStreak} | ${f(h.longestWaitMs, 0)} | ${h.overlaps} |`,
      );
    }
  }
  return lines;
}

/** A measured figure of a result, and whether less is better. */
interface Metric {
  readonly label: string;
  readonly lowerIsBetter: boolean;
  readonly of: (r: MatrixResult) => number | undefined;
}

function metrics(results: readonly MatrixResult[]): Metric[] {
  const sizes = [...new Set(results.flatMap((r) => r.hot.map((h) => h.contenders)))];
  const hot = (k: number) => (r: MatrixResult) => r.hot.find((h) => h.contenders === k);
  return [
    { label: 'uncontended p50', lowerIsBetter: true, of: (r) => r.uncontended.p50 },
    { label: 'hand-off p50', lowerIsBetter: true, of: (r) => r.handoff.p50 },
    { label: 'hand-off p99', lowerIsBetter: true, of: (r) => r.handoff.p99 },
    { label: 'release() with a waiter p50', lowerIsBetter: true, of: (r) => r.handoff.release.p50 },
    { label: 'hand-off 2 processes p50', lowerIsBetter: true, of: (r) => r.handoffRemote?.p50 },
    ...sizes.flatMap((k): Metric[] => [
      { label: `hot x${k} ops/s`, lowerIsBetter: false, of: (r) => hot(k)(r)?.opsPerSec },
      { label: `hot x${k} longest wait`, lowerIsBetter: true, of: (r) => hot(k)(r)?.longestWaitMs },
    ]),
    { label: 'keys acquires/s', lowerIsBetter: false, of: (r) => r.keys?.acquiresPerSec },
    { label: 'idle server ops/s', lowerIsBetter: true, of: (r) => r.waiters?.idleOpsPerSec },
  ];
}

/** Ratios of each non-peer result against the best peer of the same run, one line per result. */
export function formatRatios(results: readonly MatrixResult[]): string[] {
  const peers = results.filter((r) => r.peer);
  if (peers.length === 0) return [];
  const lines: string[] = [];
  for (const r of results.filter((x) => !x.peer)) {
    const parts: string[] = [];
    for (const m of metrics(results)) {
      const mine = m.of(r);
      let best: { value: number; name: string } | undefined;
      for (const p of peers) {
        const v = m.of(p);
        if (v === undefined || !Number.isFinite(v)) continue;
        if (!best || (m.lowerIsBetter ? v < best.value : v > best.value)) best = { value: v, name: p.name };
      }
      if (mine === undefined || !best || best.value === 0) continue;
      parts.push(`${m.label} ${(mine / best.value).toFixed(2)}× (${best.name})`);
    }
    lines.push(`${r.name} / best peer: ${parts.join('; ')}`);
  }
  return lines;
}

/**
 * `release()` with a waiter divided by one plain round trip of the same client after the same
 * idle, one line per library that can send one (peers too: the ratio is each library's own).
 */
export function formatRoundTripRatios(results: readonly MatrixResult[]): string[] {
  return results.filter((r) => r.roundTrip).map((r) => `${r.name}: ${roundTripLine(r)}`);
}

/** The comparison as text: both tables, hand-off notes, ratios (lower-is-better rows: < 1 is better). */
export function formatComparison(results: readonly MatrixResult[], o: { readonly criticalMs?: number } = {}): string[] {
  const notes = results.flatMap((r) => [
    `- ${r.name}: hand-off ${handoffNote(r.handoff)}`,
    ...(r.handoffRemote ? [`- ${r.name}: hand-off ${handoffNote(r.handoffRemote)}`] : []),
  ]);
  const ratios = formatRatios(results);
  const trips = formatRoundTripRatios(results);
  return [
    ...latencyTable(results),
    '',
    ...hotTable(results, o.criticalMs),
    '',
    ...notes,
    ...(ratios.length > 0 ? ['', 'ratios against the best peer of this run (latencies, waits, idle ops: < 1 is better):', ...ratios] : []),
    ...(trips.length > 0
      ? ['', "release() with a waiter against one round trip of the holder's client to the same server after the same idle:", ...trips]
      : []),
  ];
}

/** One JSON line per library (what the docs' figures are pasted from). */
export function jsonLines(results: readonly MatrixResult[], extra: Record<string, unknown> = {}): string[] {
  return results.map((r) => JSON.stringify({ library: r.name, ...r, ...extra }));
}
