/**
 * Transitional: the statistics moved to `src/bench/` (the public `locksmith/bench` entry).
 * Kept until the per-engine bench scripts import from there.
 */
export { jainIndex, longestStreak, percentiles, type Percentiles } from '../bench/index.js';
