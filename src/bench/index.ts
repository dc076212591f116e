/**
 * `locksmith/bench`: the benchmark matrix and its statistics, for `locksmith bench` and for
 * scripts that measure locksmith next to other libraries in one run. See docs/benchmarks.md.
 */
export { jainIndex, longestStreak, percentiles, type Percentiles } from './stats.js';
export {
  benchHandoff,
  benchHot,
  benchKeys,
  benchUncontended,
  benchWaiters,
  type HotResult,
  type KeysResult,
  type LockerFactory,
  type ServerProbe,
  type WaitersResult,
} from './matrix.js';
export { formatMatrix, runMatrix, type MatrixOptions, type MatrixResult } from './run.js';
