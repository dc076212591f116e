/**
 * `locksmith-dlm/bench`: the benchmark matrix and its statistics, for `locksmith bench` and for
 * scripts that measure locksmith next to other libraries in one run. See docs/benchmarks.md.
 */
export { jainIndex, longestStreak, percentiles, type Percentiles } from './stats.js';
export {
  contenderOf,
  lockerContender,
  type BenchAcquireOptions,
  type BenchClient,
  type BenchHold,
  type BenchSource,
  type Contender,
  type LockerFactory,
  type LockerRoundTrip,
} from './client.js';
export {
  benchHandoff,
  benchHot,
  benchHotRounds,
  benchKeys,
  benchUncontended,
  benchWaiters,
  type HandoffOptions,
  type HandoffResult,
  type HotResult,
  type KeysResult,
  type ServerProbe,
  type WaitersOptions,
  type WaitersResult,
} from './matrix.js';
export {
  benchLatencies,
  monoMs,
  type LatencyOptions,
  type LatencyResult,
  type RoundTripResult,
  type UncontendedResult,
} from './latency.js';
export { forkedContender, forkedUrl, serveForked } from './remote.js';
export {
  formatMatrix,
  handoffNote,
  runHotRounds,
  runLatencies,
  runMatrix,
  waitersLine,
  type MatrixOptions,
  type MatrixResult,
} from './run.js';
export {
  formatComparison,
  formatRatios,
  formatRoundTripRatios,
  jsonLines,
  machineInfo,
  runComparison,
  type ComparisonOptions,
  type MachineInfo,
} from './compare.js';
