/**
 * `locksmith serve` as its users see it (docs/benchmarks.md, "The lock service"):
 * `npm run bench:serve -- [redis|memory] [a,b,c,d]` starts the engine with the server harness
 * and the service as its own process, then measures from this process, a client on loopback:
 *
 * (a) acquire + release through the service against the library's own on the same backend,
 *     in alternating rounds (ROUNDS × ITERATIONS cycles each);
 * (b) hand-off through the service: a waiter long-polls, idle 20–50 ms, then the holder's
 *     release is sent; from that send to the waiter's answer (HANDOFFS samples), with the
 *     library's hand-off (lock() of a second locker) in alternating rounds;
 * (c) SESSIONS (1,000) sessions, each holding one lock, keeping alive once a second: the
 *     service process's CPU (/proc/<pid>/stat) as % of one core over CPU_SECONDS (30: two
 *     of the service's renewal periods), against IDLE_SECONDS (5) idle;
 * (d) CONTENDERS (64) sharing one lock with 0 and with VIEWS (100) SSE connections to
 *     /v1/events (opened by a second process, as browsers would), in VIEW_ROUNDS alternating
 *     rounds each of ROUND_SECONDS: the hand-off (release sent → next grant answered) p50/p99
 *     and grants a second.
 *
 * SERVE_CPU_PROF=DIR runs the service under --cpu-prof (profiles written to DIR on exit);
 * SERVE_BEFORE=<another checkout's src/cli/main.ts> adds that service to rows (a), (b) and (d),
 * in the same alternating rounds (before/after figures of a change).
 */
import { fork, type ChildProcess } from 'node:child_process';
import { get, type ClientRequest } from 'node:http';
import { once } from 'node:events';
import { setTimeout as sleep } from 'node:timers/promises';
import { createLocker } from '../src/index.js';
import { percentiles } from '../src/bench-matrix/stats.js';
import { startRedis } from '../scripts/servers/redis.js';
import { Http, startServiceProcess } from './serve-client.js';
import { env, ms, rowA, rowB, rowC, type Target } from './serve-rows.js';

const VIEWS = env('VIEWS', 100);
const CONTENDERS = env('CONTENDERS', 64);
const ROUND_SECONDS = env('ROUND_SECONDS', 5);
const VIEW_ROUNDS = env('VIEW_ROUNDS', 4);

/** The views process: opens VIEWS event streams to a service on 'open <base>', closes them on 'close'. */
function viewsChild(): void {
  let open: ClientRequest[] = [];
  let events = 0;
  process.on('message', (m: string) => {
    if (m.startsWith('open ')) {
      const base = m.slice(5);
      let ready = 0;
      open = Array.from({ length: VIEWS }, () =>
        get(`${base}/v1/events?prefix=`, (res) => {
          res.on('data', (c: Buffer) => (events += c.toString().match(/^event: /gm)?.length ?? 0));
          res.on('error', () => undefined);
          if (++ready === VIEWS) process.send?.('opened');
        }).on('error', () => undefined),
      );
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

/** What one service's rounds of (d) collected. */
interface DState {
  readonly target: Target;
  readonly sessions: string[];
  readonly none: number[];
  readonly viewed: number[];
  readonly grants: { none: number; viewed: number };
  events: number;
}

/** One round of (d) on one service, with or without the views. */
async function roundD(views: ChildProcess, d: DState, withViews: boolean): Promise<void> {
  if (withViews) {
    views.send(`open ${d.target.base}`);
    await once(views, 'message');
    await sleep(500);
  }
  const got = await contend(d.target.http, d.sessions);
  (withViews ? d.viewed : d.none).push(...got.gaps);
  d.grants[withViews ? 'viewed' : 'none'] += got.grants;
  if (withViews) {
    views.send('close');
    const [m] = (await once(views, 'message')) as [string];
    d.events += Number(m.split(' ')[1]);
  }
  for (const s of d.sessions) await d.target.http.call('POST', `/v1/sessions/${s}/keepalive`);
}

/** (d) hand-off with CONTENDERS on one lock, without and with VIEWS event streams, alternating (and across services). */
async function rowD(targets: readonly Target[]): Promise<void> {
  const views: ChildProcess = fork(import.meta.filename, ['--views'], { execArgv: ['--import', 'tsx'] });
  const states: DState[] = [];
  for (const target of targets) {
    const sessions = await Promise.all(Array.from({ length: CONTENDERS }, () => target.http.session(120_000)));
    states.push({ target, sessions, none: [], viewed: [], grants: { none: 0, viewed: 0 }, events: 0 });
  }
  for (let r = 0; r < VIEW_ROUNDS * 2; r++) {
    for (let k = 0; k < states.length; k++) await roundD(views, states[(r + k) % states.length]!, r % 2 === 1);
  }
  views.send('exit');
  const secs = VIEW_ROUNDS * ROUND_SECONDS;
  for (const d of states) {
    const [a, b] = [percentiles(d.none), percentiles(d.viewed)];
    const name = d.target.name;
    console.log(
      `(d) ${name}, ${CONTENDERS} contenders, no views: hand-off ${ms(a)} p50 / p99, ${(d.grants.none / secs).toFixed(0)} grants/s`,
    );
    console.log(
      `(d) ${name}, ${CONTENDERS} contenders, ${VIEWS} views: hand-off ${ms(b)} p50 / p99, ${(d.grants.viewed / secs).toFixed(0)} grants/s ` +
        `(${d.events} events delivered); slowdown p50 ${((b.p50 / a.p50 - 1) * 100).toFixed(1)} %, grants/s ${((1 - d.grants.viewed / d.grants.none) * 100).toFixed(1)} % (target ≤ 10 %)`,
    );
    for (const s of d.sessions) await d.target.http.call('DELETE', `/v1/sessions/${s}`);
  }
}

async function main(): Promise<void> {
  const engine = process.argv[2] ?? 'redis';
  const rows = (process.argv[3] ?? 'a,b,c,d').split(',');
  const redis = engine === 'redis' ? await startRedis() : undefined;
  const url = redis ? redis.url : engine === 'memory' ? 'memory://' : engine;
  const prof = process.env.SERVE_CPU_PROF;
  // SERVE_MAIN=<another checkout's src/cli/main.ts>: measure that service instead (row (c) of a change's before).
  const service = await startServiceProcess(url, prof ? ['--cpu-prof', `--cpu-prof-dir=${prof}`] : [], process.env.SERVE_MAIN);
  const http = new Http(service.base);
  const before = process.env.SERVE_BEFORE ? await startServiceProcess(url, [], process.env.SERVE_BEFORE) : undefined;
  const targets: Target[] = [
    { name: 'service', http, base: service.base },
    ...(before ? [{ name: 'service (before)', http: new Http(before.base), base: before.base }] : []),
  ];
  console.log(
    `backend: ${engine === 'redis' ? `redis (harness, ${url})` : url}; service ${service.base} (own process); node ${process.version}`,
  );
  try {
    if (rows.includes('a')) {
      const locker = createLocker(url);
      await rowA(locker, targets);
      await locker.close();
    }
    if (rows.includes('b')) await rowB(url, targets);
    if (rows.includes('c')) await rowC(service, http);
    if (rows.includes('d')) await rowD(targets);
  } finally {
    for (const t of targets) t.http.close();
    await Promise.all([service.stop(), before?.stop()]);
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
