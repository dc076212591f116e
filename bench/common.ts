/**
 * What every per-engine benchmark script shares: the environment knobs, and running
 * locksmith and the peers through the one matrix (src/bench-matrix/) with printed tables, ratios
 * against the best peer and one JSON line per library. A script only starts its engine and
 * lists its contenders; see bench/README.md.
 *
 * Knobs (all optional; BENCH_QUICK=1 first sets smoke-run values, the others override it):
 *   BENCH_ITERATIONS     uncontended cycles per library per round               (200; quick 30)
 *   BENCH_ROUNDS         measured uncontended rounds, after one warm-up round   (10; quick 3)
 *   BENCH_HANDOFF_ROUNDS hand-off samples per library, one per round            (60; quick 15)
 *   BENCH_CONTENDERS     contender counts of the hot-lock rows                  (1,2,8,32,64; quick 1,8)
 *   BENCH_SECONDS        length of each hot-lock row                            (3; quick 1)
 *   BENCH_CRITICAL_MS    critical section of the hot-lock rows                  (script's default, 2)
 *   BENCH_KEYS           distinct keys of the keys row, 0 skips it              (10000; quick 500)
 *   BENCH_WAITERS        waiters of the waiters row, 0 skips it                 (1000; quick 100)
 *   BENCH_IDLE_SECONDS   idle window of the waiters row                         (3; quick 1)
 *   BENCH_DRAIN_SECONDS  give up draining the waiters after this long           (60; quick 10)
 *   BENCH_HANDOFF_SECONDS  time budget of the hand-off rows                     (60; quick 10)
 *   BENCH_ONLY           comma-separated substrings: run only contenders whose name has one
 */
import {
  forkedContender,
  forkedUrl,
  serveForked,
  formatComparison,
  jsonLines,
  machineInfo,
  runComparison,
  type Contender,
  type MatrixOptions,
  type ServerProbe,
} from '../src/bench-matrix/index.js';

const env = (name: string): string | undefined => {
  const v = process.env[name];
  return v === undefined || v === '' ? undefined : v;
};

const num = (name: string, fallback: number): number => {
  const v = env(name);
  if (v === undefined) return fallback;
  const n = Number(v);
  if (!Number.isFinite(n) || n < 0) throw new Error(`${name} must be a number ≥ 0 (got ${v})`);
  return n;
};

/** The matrix options the environment asks for; `defaults` are the script's own. */
export function optionsFromEnv(defaults: MatrixOptions = {}): MatrixOptions {
  const quick = env('BENCH_QUICK') !== undefined;
  const base: MatrixOptions = quick
    ? {
        iterations: 30,
        rounds: 3,
        handoffRounds: 15,
        contenders: [1, 8],
        durationMs: 1_000,
        keys: 500,
        waiters: 100,
        idleMs: 1_000,
        drainBudgetMs: 10_000,
      }
    : {};
  const o = { ...defaults, ...base };
  const list = env('BENCH_CONTENDERS');
  return {
    ...o,
    iterations: num('BENCH_ITERATIONS', o.iterations ?? 200),
    rounds: num('BENCH_ROUNDS', o.rounds ?? 10),
    handoffRounds: num('BENCH_HANDOFF_ROUNDS', o.handoffRounds ?? 60),
    contenders: list ? list.split(',').map(Number) : (o.contenders ?? [1, 2, 8, 32, 64]),
    durationMs: num('BENCH_SECONDS', (o.durationMs ?? 3_000) / 1000) * 1000,
    criticalMs: num('BENCH_CRITICAL_MS', o.criticalMs ?? 2),
    hotRounds: num('BENCH_HOT_ROUNDS', o.hotRounds ?? (quick ? 2 : 4)),
    keys: num('BENCH_KEYS', o.keys ?? 10_000),
    waiters: num('BENCH_WAITERS', o.waiters ?? 1_000),
    idleMs: num('BENCH_IDLE_SECONDS', (o.idleMs ?? 3_000) / 1000) * 1000,
    drainBudgetMs: num('BENCH_DRAIN_SECONDS', (o.drainBudgetMs ?? 60_000) / 1000) * 1000,
    handoff: { ...o.handoff, budgetMs: num('BENCH_HANDOFF_SECONDS', quick ? 10 : 60) * 1000 },
  };
}

/** Keep the contenders BENCH_ONLY names (all when unset). */
export function selected(contenders: readonly Contender[]): Contender[] {
  const only = env('BENCH_ONLY')?.split(',');
  return contenders.filter((c) => !only || only.some((o) => c.name.includes(o.trim())));
}

/** What a script passes to {@link runEngine}. */
export interface EngineRun {
  /** Engine and version, for the header and the JSON lines (`redis 7.0.15`). */
  readonly engine: string;
  /** locksmith variants (peer unset) and peers (peer: true), measured in this order. */
  readonly contenders: readonly Contender[];
  /** Counts server operations for the idle cost of waiters (Redis: MONITOR; ZooKeeper: packets). */
  readonly probe?: ServerProbe;
  /** What the probe counts, for the header. */
  readonly probeCounts?: string;
  /** The script's defaults under the environment knobs. */
  readonly defaults?: MatrixOptions;
  /** Lines printed after the header (peer settings, caveats). */
  readonly notes?: readonly string[];
  /**
   * The script (its `import.meta.filename`) and the engine URL: the hand-off row then also
   * runs its waiter in a second process, the script forked with {@link childOrMain}.
   */
  readonly fork?: {
    readonly script: string;
    readonly url: string;
    /** Only these contenders get the second-process row (default all): a peer in a JVM cannot be forked. */
    readonly only?: readonly string[];
  };
}

/** Run every selected contender through the matrix and print the comparison. */
export async function runEngine(run: EngineRun): Promise<void> {
  const o = optionsFromEnv(run.defaults);
  const machine = machineInfo();
  const fork = run.fork;
  const forked = (c: Contender): boolean => fork !== undefined && (fork.only === undefined || fork.only.includes(c.name));
  const contenders = selected(run.contenders).map((c) => (fork && forked(c) ? forkedContender(c, fork.script, fork.url) : c));
  console.log(`engine: ${run.engine}`);
  console.log(`machine: ${machine.cpus} CPUs, ${machine.cpu}, node ${machine.node}, load average ${machine.load.toFixed(2)} at the start`);
  console.log(
    `matrix: uncontended ${o.iterations} cycles × ${o.rounds} rounds and ${o.handoffRounds} hand-offs, libraries alternating; hot lock at ${o.contenders?.join('/')} contenders × ${(o.durationMs ?? 0) / 1000} s in ${o.hotRounds} alternating rounds, ` +
      `${o.criticalMs} ms critical section; ${o.keys} keys; ${o.waiters} waiters, ${(o.idleMs ?? 0) / 1000} s idle` +
      (run.probeCounts ? ` (server ops = ${run.probeCounts})` : ''),
  );
  for (const n of run.notes ?? []) console.log(n);
  const results = await runComparison(contenders, {
    ...o,
    ...(run.probe ? { probe: run.probe } : {}),
    progress: (line) => process.stderr.write(`${line}\n`),
  });
  console.log('');
  for (const line of formatComparison(results, o)) console.log(line);
  console.log('');
  for (const line of jsonLines(results, { engine: run.engine, machine, options: { ...o, probe: undefined } })) console.log(line);
}

/**
 * Run a script's main and exit: some peers keep retry timers alive after their client is
 * closed (node-redlock's unlimited retries), so the process ends explicitly.
 */
export function main(body: () => Promise<void>): void {
  body().then(
    () => process.exit(0),
    (err: unknown) => {
      console.error(err);
      process.exit(1);
    },
  );
}

/**
 * A script's entry: in a process the hand-off row forked ({@link EngineRun.fork}), serve one
 * client of the contenders `forChild` makes for the parent's URL; otherwise run `body`.
 */
export function childOrMain(forChild: (url: string) => readonly Contender[], body: () => Promise<void>): void {
  const url = forkedUrl();
  if (url === undefined) return main(body);
  serveForked(forChild(url)).catch((err: unknown) => {
    console.error(err);
    process.exit(1);
  });
}
