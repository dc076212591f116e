/**
 * The alternating-rounds runner of the per-cycle benches (bench/compat-cycle.ts,
 * bench/redis-floor.ts): every contender runs CYCLES cycles per round, the order rotated every
 * round so that machine load hits every contender alike; printed per contender: wall time p50
 * per cycle and this process's CPU time per cycle (median of the rounds), in µs.
 * `ONLY=<regex>` keeps the contenders it matches.
 */

/** One measured library: a name and one uncontended cycle on `key`. */
export interface CycleContender {
  readonly name: string;
  cycle(key: string): Promise<unknown>;
}

/** How many cycles per round and how many rounds (after one warm-up round). */
export interface CycleRounds {
  readonly cycles: number;
  readonly rounds: number;
  /** Key prefix of the cycles (8 keys per round, reused). */
  readonly keyPrefix: string;
  /** A contender whose p50 the others' are printed against (`1.23×`), when given. */
  readonly reference?: string;
}

function pct(values: readonly number[], p: number): number {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))] ?? NaN;
}

/** Run `list` in alternating rounds and print each contender's wall p50 and CPU per cycle. */
export async function runCycleRounds(list: readonly CycleContender[], o: CycleRounds): Promise<void> {
  const only = process.env.ONLY === undefined ? undefined : new RegExp(process.env.ONLY);
  const run = only ? list.filter((c) => only.test(c.name)) : [...list];
  // This process's CPU per cycle of each round: what the client's own code costs, whatever the load.
  const cpu = new Map<string, number[]>();
  const wall = new Map<string, number[]>(run.map((c) => [c.name, []]));
  const round = async (c: CycleContender, r: number): Promise<void> => {
    const cpu0 = process.cpuUsage();
    for (let i = 0; i < o.cycles; i++) {
      const t0 = performance.now();
      await c.cycle(`${o.keyPrefix}:${r}:${i % 8}`);
      if (r >= 0) wall.get(c.name)?.push((performance.now() - t0) * 1000);
    }
    const used = process.cpuUsage(cpu0);
    if (r >= 0) cpu.set(c.name, [...(cpu.get(c.name) ?? []), (used.user + used.system) / o.cycles]);
  };
  for (const c of run) await round(c, -1);
  for (let r = 0; r < o.rounds; r++) {
    const k = r % run.length;
    for (const c of [...run.slice(k), ...run.slice(0, k)]) await round(c, r);
  }
  const ref = o.reference === undefined ? NaN : pct(wall.get(o.reference) ?? [], 50);
  for (const c of run) {
    const p50 = pct(wall.get(c.name) ?? [], 50);
    const ratio = Number.isFinite(ref) ? `  ${(p50 / ref).toFixed(2)}×` : '';
    const used = pct(cpu.get(c.name) ?? [], 50);
    console.log(`${c.name.padEnd(38)} p50 ${p50.toFixed(1).padStart(6)} µs${ratio}   CPU ${used.toFixed(1).padStart(6)} µs/cycle`);
  }
}
