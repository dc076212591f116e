/**
 * `locksmith serve` as its users see it (docs/benchmarks.md, "The lock service"):
 * `npm run bench:serve -- [redis|memory] [a,b,c,d]` starts the engine with the server harness
 * and the service as its own process, then measures from this process, a client on loopback:
 *
 * (a) acquire + release through the service against the library's own on the same backend,
 *     and against its floor (bench/serve-floor.ts: node:http running the library, its own
 *     process), in alternating rounds (ROUNDS × ITERATIONS cycles each, after WARMUP dropped);
 * (b) hand-off through the service: a waiter long-polls, idle 20–50 ms, then the holder's
 *     release is sent; from that send to the waiter's answer (HANDOFFS samples), with the
 *     library's hand-off (lock() of a second locker) in alternating rounds;
 * (c) SESSIONS (1,000) sessions, each holding one lock, keeping alive once a second: the
 *     service process's CPU (/proc/<pid>/stat) as % of one core over CPU_SECONDS (30: two
 *     of the service's renewal periods), against IDLE_SECONDS (5) idle;
 * (d) CONTENDERS (64) sharing one lock with 0 and with VIEWS (100) streams opened by a
 *     second process: as the web view page connects (its HTML, then `/v1/events?mode=state`)
 *     and as raw `/v1/events` clients (VIEW_MODES=page,raw), in VIEW_ROUNDS alternating
 *     rounds each of ROUND_SECONDS: the hand-off (release sent → next grant answered) p50/p99
 *     and grants a second.
 *
 * The service runs built (dist/cli/main.js, on plain Node, as users run it; the npm script
 * builds first). SERVE_CPU_PROF=DIR runs it under --cpu-prof (profiles written to DIR on
 * exit); SERVE_BEFORE=<another checkout's dist/cli/main.js, built there> adds that service to
 * rows (a), (b) and (d), in the same alternating rounds (before/after figures of a change).
 */
import { fork, type ChildProcess } from 'node:child_process';
import { get, type ClientRequest } from 'node:http';
import { once } from 'node:events';
import { setTimeout as sleep } from 'node:timers/promises';
import { fileURLToPath } from 'node:url';
import { createLocker } from '../src/index.js';
import { percentiles } from '../src/bench-matrix/stats.js';
import { startRedis } from '../scripts/servers/redis.js';
import { cpuMsOf, Http, startServiceProcess } from './serve-client.js';
import { env, ms, rowA, rowB, rowC, type Target } from './serve-rows.js';

const FLOOR = fileURLToPath(new URL('./serve-floor.ts', import.meta.url));
const BUILT = fileURLToPath(new URL('../dist/cli/main.js', import.meta.url));

const VIEWS = env('VIEWS', 100);
const CONTENDERS = env('CONTENDERS', 64);
const ROUND_SECONDS = env('ROUND_SECONDS', 5);
const VIEW_ROUNDS = env('VIEW_ROUNDS', 4);

/** How (d)'s streams connect: as the web view page does (`mode=state`), or as a raw `/v1/events` client. */
type ViewMode = 'page' | 'raw';
const PATHS: Record<ViewMode, string> = { page: '/v1/events?mode=state&prefix=', raw: '/v1/events?prefix=' };

/**
 * The views process: on 'open <mode> <base>' opens VIEWS streams to a service, each as the
 * web view page does (its HTML read once, then its one stream) or as a raw events client;
 * closes them on 'close'.
 */
function viewsChild(): void {
  let open: ClientRequest[] = [];
  let events = 0;
  process.on('message', (m: string) => {
    if (m.startsWith('open ')) {
      const [, mode, base] = m.split(' ') as [string, ViewMode, string];
      let ready = 0;
      const stream = (): ClientRequest =>
        get(`${base}${PATHS[mode]}`, (res) => {
          res.on('data', (c: Buffer) => (events += c.toString().match(/^event: /gm)?.length ?? 0));
          res.on('error', () => undefined);
          if (++ready === VIEWS) process.send?.('opened');
        }).on('error', () => undefined);
      open = Array.from({ length: VIEWS }, () => {
        if (mode === 'raw') return stream();
        const page = get(`${base}/`, (res) => {
          res.resume();
          res.on('end', () => open.push(stream()));
        });
        return page.on('error', () => undefined);
      });
    } else if (m === 'close') {
      for (const r of open) r.destroy();
      open = [];
      process.send?.(`closed ${events}`);
      events = 0;
    } else process.exit(0);
  });
}

/** One round of (d): CONTENDERS loops on one lock for ROUND_SECONDS; hand-off gaps and grants. */
async function contend(http: Http, sessions: readonly string[]): Promise<{ gaps: number[]; grants: number }> {
  const gaps: number[] = [];
  let grants = 0;
  let releasedAt: number | undefined;
  const until = performance.now() + ROUND_SECONDS * 1000;
  await Promise.all(
    sessions.map(async (s) => {
      while (performance.now() < until) {
        const token = await http.acquire('bench-serve/d', s, ROUND_SECONDS * 1000);
        if (token === undefined) continue;
        if (releasedAt !== undefined) gaps.push(performance.now() - releasedAt);
        grants += 1;
        releasedAt = performance.now();
        await http.release('bench-serve/d', s, token);
      }
    }),
  );
  return { gaps, grants };
}

/** True when `base` streams `/v1/events?mode=state` (an older service answers 400 to the unknown mode). */
async function knowsStateMode(base: string): Promise<boolean> {
  const status = await new Promise<number>((resolve, reject) => {
    const req = get(`${base}${PATHS.page}`, (res) => {
      resolve(res.statusCode ?? 0);
      req.destroy();
    }).on('error', reject);
  });
  return status === 200;
}

/** What one service's rounds of (d) collected, per way of viewing. */
interface DState {
  readonly target: Target;
  readonly sessions: string[];
  /** Whether the service answers `/v1/events?mode=state` (older checkouts' pages followed the raw stream). */
  readonly stateStreams: boolean;
  readonly gaps: Record<'none' | ViewMode, number[]>;
  readonly grants: Record<'none' | ViewMode, number>;
  readonly events: Record<ViewMode, number>;
  /** CPU ms spent during the rounds of each mode: the service, Redis, the views' process. */
  readonly cpu: Record<'none' | ViewMode, { service: number; redis: number; views: number }>;
}

/** Where (d) reads CPU time: the service (per target), Redis and the views' process. */
const pids = { redis: 0, views: 0 };
const cpuOf = (pid: number | undefined): number => (pid ? cpuMsOf(pid) : 0);

/** One round of (d) on one service, without views or with VIEWS streams of `mode`. */
async function roundD(views: ChildProcess, d: DState, mode: 'none' | ViewMode): Promise<void> {
  if (mode !== 'none') {
    // A checkout whose page knew no mode=state: its views opened the raw stream (and re-read each changed lock, not done here).
    const wire = mode === 'page' && !d.stateStreams ? 'raw' : mode;
    views.send(`open ${wire} ${d.target.base}`);
    await once(views, 'message');
    await sleep(500);
  }
  const c0 = { service: cpuOf(d.target.pid), redis: cpuOf(pids.redis), views: cpuOf(pids.views) };
  const got = await contend(d.target.http, d.sessions);
  const used = d.cpu[mode];
  used.service += cpuOf(d.target.pid) - c0.service;
  used.redis += cpuOf(pids.redis) - c0.redis;
  used.views += cpuOf(pids.views) - c0.views;
  d.gaps[mode].push(...got.gaps);
  d.grants[mode] += got.grants;
  if (mode !== 'none') {
    views.send('close');
    const [m] = (await once(views, 'message')) as [string];
    d.events[mode] += Number(m.split(' ')[1]);
  }
  for (const s of d.sessions) await d.target.http.call('POST', `/v1/sessions/${s}/keepalive`);
}

/** VIEW_MODES: which streams (d) opens beside its rounds without views (default both). */
const MODES = (process.env.VIEW_MODES ?? 'page,raw').split(',') as ViewMode[];

/** (d) hand-off with CONTENDERS on one lock, without views and with VIEWS streams of each mode, alternating (and across services). */
async function rowD(targets: readonly Target[]): Promise<void> {
  const views: ChildProcess = fork(import.meta.filename, ['--views'], { execArgv: ['--import', 'tsx'] });
  pids.views = views.pid ?? 0;
  const states: DState[] = [];
  for (const target of targets) {
    const sessions = await Promise.all(Array.from({ length: CONTENDERS }, () => target.http.session(120_000)));
    const gaps = { none: [], page: [], raw: [] };
    const zero = () => ({ service: 0, redis: 0, views: 0 });
    const cpu = { none: zero(), page: zero(), raw: zero() };
    const stateStreams = await knowsStateMode(target.base);
    states.push({ target, sessions, stateStreams, gaps, grants: { none: 0, page: 0, raw: 0 }, events: { page: 0, raw: 0 }, cpu });
  }
  const modes = ['none', ...MODES] as const;
  // One round each first, dropped: the first measured round otherwise pays the warm-up (JIT, connections) of whichever service comes first.
  for (const d of states) await contend(d.target.http, d.sessions);
  for (let r = 0; r < VIEW_ROUNDS * modes.length; r++) {
    for (let k = 0; k < states.length; k++) await roundD(views, states[(r + k) % states.length]!, modes[r % modes.length]!);
  }
  views.send('exit');
  const secs = VIEW_ROUNDS * ROUND_SECONDS;
  for (const d of states) {
    const base = percentiles(d.gaps.none);
    const name = d.target.name;
    // CPU as % of one core over the rounds of a mode, and per grant.
    const cpu = (mode: 'none' | ViewMode): string => {
      const c = d.cpu[mode];
      const pct = (x: number): string => `${((x / (secs * 1000)) * 100).toFixed(0)} %`;
      const per = (x: number): string => `${((x / Math.max(1, d.grants[mode])) * 1000).toFixed(0)} µs`;
      return `CPU: service ${pct(c.service)} (${per(c.service)}/grant), redis ${pct(c.redis)}, views ${pct(c.views)}`;
    };
    console.log(
      `(d) ${name}, ${CONTENDERS} contenders, no views: hand-off ${ms(base)} p50 / p99, ${(d.grants.none / secs).toFixed(0)} grants/s; ${cpu('none')}`,
    );
    for (const mode of MODES) {
      const p = percentiles(d.gaps[mode]);
      const page = d.stateStreams ? 'as the web view page (mode=state)' : 'as the web view page (its raw stream then)';
      const how = mode === 'page' ? page : 'raw /v1/events';
      console.log(
        `(d) ${name}, ${CONTENDERS} contenders, ${VIEWS} views ${how}: hand-off ${ms(p)} p50 / p99, ${(d.grants[mode] / secs).toFixed(0)} grants/s ` +
          `(${d.events[mode]} events delivered); slowdown p50 ${((p.p50 / base.p50 - 1) * 100).toFixed(1)} %, grants/s ${((1 - d.grants[mode] / d.grants.none) * 100).toFixed(1)} % (target ≤ 10 %); ${cpu(mode)}`,
      );
    }
    for (const s of d.sessions) await d.target.http.call('DELETE', `/v1/sessions/${s}`);
  }
}

async function main(): Promise<void> {
  const engine = process.argv[2] ?? 'redis';
  const rows = (process.argv[3] ?? 'a,b,c,d').split(',');
  const redis = engine === 'redis' ? await startRedis() : undefined;
  pids.redis = redis?.nodes[0]?.pid ?? 0;
  const url = redis ? redis.url : engine === 'memory' ? 'memory://' : engine;
  const prof = process.env.SERVE_CPU_PROF;
  // The service as users run it, built (`npm run bench:serve` builds first); SERVE_MAIN=<another
  // checkout's dist/cli/main.js or src/cli/main.ts>: measure that service instead (row (c) of a change's before).
  const service = await startServiceProcess(url, prof ? ['--cpu-prof', `--cpu-prof-dir=${prof}`] : [], process.env.SERVE_MAIN ?? BUILT);
  const http = new Http(service.base);
  const before = process.env.SERVE_BEFORE ? await startServiceProcess(url, [], process.env.SERVE_BEFORE) : undefined;
  // Rows (a) and (b)'s floor: node:http running the library, no service (bench/serve-floor.ts).
  const floor = rows.includes('a') || rows.includes('b') ? await startServiceProcess(url, [], FLOOR) : undefined;
  const targets: Target[] = [
    { name: 'service', http, base: service.base, pid: service.child.pid ?? 0 },
    ...(before ? [{ name: 'service (before)', http: new Http(before.base), base: before.base, pid: before.child.pid ?? 0 }] : []),
  ];
  const floorTarget = floor ? [{ name: 'floor', http: new Http(floor.base), base: floor.base, pid: floor.child.pid ?? 0 }] : [];
  console.log(
    `backend: ${engine === 'redis' ? `redis (harness, ${url})` : url}; service ${service.base} (own process); node ${process.version}`,
  );
  try {
    if (rows.includes('a')) {
      const locker = createLocker(url);
      await rowA(locker, [...targets, ...floorTarget]);
      await locker.close();
    }
    if (rows.includes('b')) await rowB(url, [...targets, ...floorTarget]);
    if (rows.includes('c')) await rowC(service, http);
    if (rows.includes('d')) await rowD(targets);
  } finally {
    for (const t of [...targets, ...floorTarget]) t.http.close();
    await Promise.all([service.stop(), before?.stop(), floor?.stop()]);
    await redis?.stop();
  }
}

if (process.argv[2] === '--views') viewsChild();
else
  main().then(
    () => process.exit(0),
    (err: unknown) => {
      console.error(err);
      process.exit(1);
    },
  );
