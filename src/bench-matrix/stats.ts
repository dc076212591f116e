/** Statistics the benchmarks report: percentiles, Jain's fairness index, the longest streak. */

/** p50/p99 etc. of a sample, in ms. */
export interface Percentiles {
  readonly n: number;
  readonly p50: number;
  readonly p99: number;
  readonly mean: number;
}

/** Percentiles of `samples` (ms). */
export function percentiles(samples: readonly number[]): Percentiles {
  const s = [...samples].sort((a, b) => a - b);
  const at = (q: number): number => s[Math.min(s.length - 1, Math.max(0, Math.ceil(q * s.length) - 1))] ?? Number.NaN;
  const mean = s.reduce((a, b) => a + b, 0) / (s.length || 1);
  return { n: s.length, p50: at(0.5), p99: at(0.99), mean };
}

/** Jain's fairness index of per-contender counts: 1 = perfectly even, 1/n = one took all. */
export function jainIndex(counts: readonly number[]): number {
  const sum = counts.reduce((a, b) => a + b, 0);
  const sq = counts.reduce((a, b) => a + b * b, 0);
  return sq === 0 ? 1 : (sum * sum) / (counts.length * sq);
}

/** Longest run of consecutive grants to the same contender in a grant sequence. */
export function longestStreak(sequence: readonly number[]): number {
  let best = 0;
  let run = 0;
  let prev: number | undefined;
  for (const who of sequence) {
    run = who === prev ? run + 1 : 1;
    prev = who;
    best = Math.max(best, run);
  }
  return best;
}
