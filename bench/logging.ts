/**
 * `npm run bench:logging [URL]`: what the debug logging costs per uncontended lock + release
 * cycle, in alternating rounds of three variants on one locker (default `memory://`, where
 * nothing hides a cost behind I/O):
 *
 * - `none`: the backend's round trips without the logging wrappers (`logRoundTrips` removed
 *   from the instance: the code as it was before the engines logged);
 * - `off`:  the wrappers in place, `DEBUG` unset (what every user runs);
 * - `on`:   `locksmith:*` enabled, every line formatted and handed to a sink that drops it.
 *
 * CPU time per cycle (steadier than wall time on a loaded machine); medians over the rounds.
 * docs/benchmarks.md, "Debug logging's cost".
 */
import debug from 'debug';
import { createLocker } from '../src/index.js';
import type { Backend } from '../src/backend.js';

const url = process.argv[2] ?? 'memory://bench-logging';
const N = Number(process.env.BENCH_ITERATIONS ?? 10_000);
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 10);
const locker = createLocker(url);
const backend: Backend = await locker.backend();
const methods = ['tryAcquire', 'extend', 'release'] as const;
if (!methods.every((m) => Object.hasOwn(backend, m))) throw new Error(`${backend.name}: no logging wrappers to remove`);
const wrapped = Object.fromEntries(methods.map((m) => [m, backend[m]])) as Record<string, unknown>;

type Variant = 'none' | 'off' | 'on';
function use(v: Variant): void {
  // Without its own properties the instance falls back on the class's unwrapped methods.
  for (const m of methods) {
    if (v === 'none') Reflect.deleteProperty(backend, m);
    else Reflect.set(backend, m, wrapped[m]);
  }
  debug.log = () => undefined;
  if (v === 'on') debug.enable('locksmith:*');
  else debug.disable();
}

async function round(v: Variant): Promise<number> {
  use(v);
  const c0 = process.cpuUsage();
  for (let i = 0; i < N; i++) await (await locker.lock('bench:logging')).release();
  const c = process.cpuUsage(c0);
  return (c.user + c.system) / N;
}

const median = (xs: number[]): number => {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.floor(s.length / 2)] ?? NaN;
};
const results: Record<Variant, number[]> = { none: [], off: [], on: [] };
for (let i = 0; i < 200; i++) await (await locker.lock('bench:logging')).release();
for (let r = 0; r < ROUNDS; r++) {
  // Rotate the order so that no variant always runs first (warm caches, GC debt).
  const order: Variant[] = r % 3 === 0 ? ['none', 'off', 'on'] : r % 3 === 1 ? ['off', 'on', 'none'] : ['on', 'none', 'off'];
  for (const v of order) results[v].push(await round(v));
}
use('off');
await locker.close();
const m = { none: median(results.none), off: median(results.off), on: median(results.on) };
const pct = (a: number, b: number): string => `${(((a - b) / b) * 100).toFixed(1)} %`;
// Paired per round: the same round's off against none, so that load drift cancels.
const paired = results.off.map((x, i) => x - (results.none[i] ?? NaN)).sort((a, b) => a - b);
console.log(`${backend.name}: ${ROUNDS} rounds × ${N} lock+release, CPU µs per cycle (median; range)`);
for (const v of ['none', 'off', 'on'] as const) {
  console.log(`  ${v.padEnd(4)} ${m[v].toFixed(2)} (${Math.min(...results[v]).toFixed(2)}–${Math.max(...results[v]).toFixed(2)})`);
}
console.log(`  off vs none: ${pct(m.off, m.none)}; paired difference per round ${paired.map((d) => d.toFixed(2)).join(' ')} µs`);
console.log(`  on (null sink) vs none: ${pct(m.on, m.none)}`);
