/**
 * Rows (a), (b) and (c) of bench/serve.ts (docs/benchmarks.md, "The lock service"): the
 * library against the service in alternating rounds, the hand-off, and the CPU of keepalives.
 */
import { readFileSync } from 'node:fs';
import { setTimeout as sleep } from 'node:timers/promises';
import { createLocker, type Locker } from '../src/index.js';
import { percentiles, type Percentiles } from '../src/bench-matrix/stats.js';
import { cpuMsOf, type Http, type ServiceProcess } from './serve-client.js';

export const env = (name: string, fallback: number): number => Number(process.env[name] ?? fallback);
const ROUNDS = env('ROUNDS', 10);
const ITERATIONS = env('ITERATIONS', 200);
const HANDOFFS = env('HANDOFFS', 100);
/**
 * Row (a)'s warm-up cycles per contender, dropped: a service runs for hours, and a fresh
 * process's first couple of thousand cycles run 40–60 % slower while V8 optimises them
 * (docs/benchmarks.md, "The lock service"), which is start-up, not what a user waits on.
 */
const WARMUP = env('WARMUP', 1_000);
const SESSIONS = env('SESSIONS', 1_000);
/**
 * The busy window of (c): 30 s holds two whole renewal periods (a replica renews a session
 * that keeps alive every quarter ttl, 15 s here, and answers the keepalives between from
 * memory: docs/serve.md, "Design"), so the window has the steady share of renewals.
 */
const CPU_SECONDS = env('CPU_SECONDS', 30);
const IDLE_SECONDS = env('IDLE_SECONDS', 5);

export const ms = (p: Percentiles): string => `${p.p50.toFixed(3)} / ${p.p99.toFixed(3)} ms`;

/** A service under measure: its name in the output and a client of it. */
export interface Target {
  readonly name: string;
  readonly http: Http;
  readonly base: string;
  /** The service's process id (row (d) reads its CPU time). */
  readonly pid?: number;
}

/**
 * The CPU time (ms) the main thread of process `pid` used so far: its scheduler's own count
 * in nanoseconds (`/proc/<pid>/stat`'s ticks are 10 ms); 0 for no process.
 */
function threadCpuMs(pid: number | undefined): number {
  if (!pid) return 0;
  return Number(readFileSync(`/proc/${pid}/task/${pid}/schedstat`, 'utf8').split(' ')[0]) / 1e6;
}

/**
 * Run `rounds` rounds of every contender, the order rotating each round; the samples of each,
 * and the CPU time (ms) the process `pids[i]` (if any) spent in contender i's rounds.
 */
async function alternate(
  contenders: readonly (() => Promise<number>)[],
  rounds: number,
  perRound: number,
  pids: readonly (number | undefined)[] = [],
): Promise<{ samples: number[][]; cpuMs: number[] }> {
  const samples = contenders.map((): number[] => []);
  const cpuMs = contenders.map(() => 0);
  for (const c of contenders) await c(); // warm-up, dropped
  for (let r = 0; r < rounds; r++) {
    for (let k = 0; k < contenders.length; k++) {
      const i = (r + k) % contenders.length;
      const cpu = threadCpuMs(pids[i]);
      for (let n = 0; n < perRound; n++) samples[i]?.push(await contenders[i]!());
      cpuMs[i] = (cpuMs[i] ?? 0) + threadCpuMs(pids[i]) - cpu;
    }
  }
  return { samples, cpuMs };
}

/** ", − floor p50 = …" for each target's figures but the floor's own (the target named `floor`), or nothing without one. */
function floorNote(targets: readonly Target[], ps: readonly Percentiles[]): (p: Percentiles) => string {
  const floor = ps[targets.findIndex((t) => t.name === 'floor')];
  return (p) => (floor && p !== floor ? `, − floor p50 = ${(p.p50 - floor.p50).toFixed(3)} ms` : '');
}

/**
 * (a) acquire + release: the library and each service, alternating rounds. A target named
 * `floor` is bench/serve-floor.ts (node:http running the library): each service is also
 * given against it.
 */
export async function rowA(locker: Locker, targets: readonly Target[]): Promise<void> {
  const lib = async (): Promise<number> => {
    const t = performance.now();
    const lock = await locker.lock('bench-serve/a-lib');
    await lock.release();
    return performance.now() - t;
  };
  const cycles = await Promise.all(
    targets.map(async ({ http }) => {
      const session = await http.session(120_000);
      return async (): Promise<number> => {
        const t = performance.now();
        const token = await http.acquire('bench-serve/a', session);
        if (token === undefined) throw new Error('uncontended acquire refused');
        await http.release('bench-serve/a', session, token);
        return performance.now() - t;
      };
    }),
  );
  for (const c of [lib, ...cycles]) for (let n = 0; n < WARMUP; n++) await c();
  const { samples, cpuMs } = await alternate([lib, ...cycles], ROUNDS, ITERATIONS, [undefined, ...targets.map((t) => t.pid)]);
  const [l, ...s] = samples.map(percentiles);
  if (!l) return;
  const overFloor = floorNote(targets, s);
  console.log(`(a) acquire+release, library: ${ms(l)} p50 / p99 (${l.n} cycles, after ${WARMUP} dropped)`);
  s.forEach((p, i) => {
    // The service's main thread's CPU per cycle: a change's cost that the p50 (mostly waits) hides.
    const cpu = targets[i]?.pid ? `; main thread ${(((cpuMs[i + 1] ?? 0) * 1000) / p.n).toFixed(0)} µs CPU a cycle` : '';
    console.log(
      `(a) acquire+release, ${targets[i]?.name}: ${ms(p)} p50 / p99 (${p.n} cycles); − library p50 = ${(p.p50 - l.p50).toFixed(3)} ms (target ≤ 0.5)${overFloor(p)}${cpu}`,
    );
  });
}

const idle = (): Promise<unknown> => sleep(20 + Math.random() * 30);

/** (b) one hand-off through the service: waiter long-polls, idle, release sent → waiter's answer. */
async function serviceHandoff(http: Http, holder: string, waiter: string): Promise<number> {
  const token = await http.acquire('bench-serve/b', holder);
  if (token === undefined) throw new Error('holder refused');
  let answered = 0;
  const wait = http.acquire('bench-serve/b', waiter, 30_000).then((t) => {
    answered = performance.now();
    return t;
  });
  await idle();
  const sent = performance.now();
  await http.release('bench-serve/b', holder, token);
  const next = await wait;
  if (next === undefined) throw new Error('waiter timed out');
  await http.release('bench-serve/b', waiter, next);
  return answered - sent;
}

async function libraryHandoff(a: Locker, b: Locker): Promise<number> {
  const held = await a.lock('bench-serve/b-lib');
  let answered = 0;
  const wait = b.lock('bench-serve/b-lib', { timeoutMs: 30_000 }).then((l) => {
    answered = performance.now();
    return l;
  });
  await idle();
  const sent = performance.now();
  await held.release();
  await (await wait).release();
  return answered - sent;
}

/** (b) hand-off p50/p99, each service's (and the floor's, when given) and the library's in alternating rounds. */
export async function rowB(url: string, targets: readonly Target[]): Promise<void> {
  const [a, b] = [createLocker(url), createLocker(url)];
  const services = await Promise.all(
    targets.map(async ({ http }) => {
      const [holder, waiter] = [await http.session(120_000), await http.session(120_000)];
      return () => serviceHandoff(http, holder, waiter);
    }),
  );
  const [lib, ...svc] = (await alternate([() => libraryHandoff(a, b), ...services], HANDOFFS, 1)).samples;
  await Promise.all([a.close(), b.close()]);
  const ps = svc.map(percentiles);
  const overFloor = floorNote(targets, ps);
  ps.forEach((p, i) => {
    console.log(
      `(b) hand-off, release sent → waiter answered, ${targets[i]?.name}: ${ms(p)} p50 / p99 (${p.n}; target p50 ≤ 2 ms)${overFloor(p)}`,
    );
  });
  console.log(
    `(b) hand-off, release() called → waiter's lock() resolved, library: ${ms(percentiles(lib ?? []))} p50 / p99 (${lib?.length})`,
  );
}

/** (c) SESSIONS sessions, one hold each, keeping alive once a second: the service's CPU. */
export async function rowC(service: ServiceProcess, http: Http): Promise<void> {
  const pid = service.child.pid ?? 0;
  const sessions: string[] = [];
  for (let i = 0; i < SESSIONS; i++) {
    const s = await http.session(60_000);
    await http.acquire(`bench-serve/c/${i}`, s);
    sessions.push(s);
  }
  const window = async (seconds: number): Promise<number> => {
    const [c0, t0] = [cpuMsOf(pid), performance.now()];
    await sleep(seconds * 1000);
    return ((cpuMsOf(pid) - c0) / (performance.now() - t0)) * 100;
  };
  const idlePct = await window(IDLE_SECONDS);
  let stop = false;
  const latencies: number[] = [];
  let failed = 0;
  const spacing = 1000 / SESSIONS;
  const driver = (async () => {
    const start = performance.now();
    for (let n = 0; !stop; n++) {
      const due = start + n * spacing;
      const wait = due - performance.now();
      if (wait > 1) await sleep(wait);
      const t = performance.now();
      void http.call('POST', `/v1/sessions/${sessions[n % SESSIONS] ?? ''}/keepalive`).then(
        (r) => (r.status === 200 ? latencies.push(performance.now() - t) : (failed += 1)),
        () => (failed += 1),
      );
    }
  })();
  await sleep(3_000); // every session kept alive at least once before the window
  latencies.length = 0;
  const busyPct = await window(CPU_SECONDS);
  stop = true;
  await driver;
  const kept = latencies.length / CPU_SECONDS;
  console.log(
    `(c) ${SESSIONS} sessions (ttl 60 s, one hold each) keeping alive once a second: service CPU ${busyPct.toFixed(1)} % of one core ` +
      `(idle ${idlePct.toFixed(1)} %; ${kept.toFixed(0)} keepalives/s answered, ${failed} failed, ${ms(percentiles(latencies))} p50 / p99; target ≤ 15 %)`,
  );
  for (const s of sessions) await http.call('DELETE', `/v1/sessions/${s}`);
}
