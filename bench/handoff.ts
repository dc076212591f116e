/**
 * `npm run bench:handoff -- <engine>...` — hand-off latency of locksmith on each engine, by
 * one method (docs/benchmarks.md, "Headline: hand-off latency per backend"): a holder and a waiter; the waiter
 * calls `lock()` and is left idle 20–50 ms; the holder calls `release()`; the figure is from
 * that call to the waiter's `lock()` resolving, 60 rounds (BENCH_HANDOFF_ROUNDS), p50/p99 —
 * with the waiter in this process, and in a second process (the script forks itself). The
 * rounds are the matrix's own (src/bench-matrix/latency.ts, remote.ts); variants of one
 * engine (redis / redis fair) run in alternating rounds.
 *
 * Engines: memory file redis redis-fair redlock zookeeper etcd cassandra postgres mysql
 * mysql-ab nats, or `all` (every one but cassandra, a heavy JVM: name it to run it, and
 * mysql-ab). `BEFORE=<another checkout>` runs each variant on that checkout's code too, in the
 * same alternating rounds (a change against the code before it). `mysql-ab` runs mysql, mysql with its server-side wake-ups off (`?bells=0`,
 * the poll alone) and the poll alone at 10 ms in alternating rounds of one run.
 */
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { createLocker } from '../src/index.js';
import { benchLatencies, forkedContender, lockerContender, machineInfo, type Contender } from '../src/bench-matrix/index.js';
import { childOrMain } from './common.js';

const TTL_MS = 10_000;

/** One measured variant: a name, the URL parameters it adds, fair or not. */
interface Variant {
  readonly name: string;
  readonly query?: string;
  readonly fair?: boolean;
  /** memory:// lives in one process: no second-process row. */
  readonly local?: boolean;
}

/** The server (or directory) an engine needs, its URL, and how to stop it. */
interface Started {
  readonly url: string;
  readonly version?: string;
  stop(): Promise<void>;
}

/** What each engine name starts and measures (servers come from the test harness, scripts/servers/). */
const ENGINES: Record<string, { readonly start: () => Promise<Started>; readonly variants: readonly Variant[] }> = {
  memory: {
    start: () => Promise.resolve({ url: 'memory://bench-handoff', stop: async () => undefined }),
    variants: [{ name: 'memory', local: true }],
  },
  file: {
    start: async () => {
      const dir = await mkdtemp(join(tmpdir(), 'locksmith-handoff-'));
      return { url: pathToFileURL(dir).href, stop: () => rm(dir, { recursive: true, force: true }) };
    },
    variants: [{ name: 'file' }],
  },
  redis: { start: server(async () => (await import('../scripts/servers/redis.js')).startRedis()), variants: [{ name: 'redis' }] },
  'redis-fair': {
    start: server(async () => (await import('../scripts/servers/redis.js')).startRedis()),
    variants: [{ name: 'redis fair', fair: true }],
  },
  redlock: { start: server(async () => (await import('../scripts/servers/redlock.js')).startRedlock()), variants: [{ name: 'redlock' }] },
  zookeeper: {
    start: server(async () => (await import('../scripts/servers/zookeeper.js')).startZooKeeper(), '/locksmith-handoff'),
    variants: [{ name: 'zookeeper' }],
  },
  etcd: {
    start: server(async () => (await import('../scripts/servers/etcd.js')).startEtcd(), '?prefix=handoff/'),
    variants: [{ name: 'etcd' }],
  },
  cassandra: {
    start: server(async () => (await import('../scripts/servers/cassandra.js')).startCassandra(), '?create=true'),
    variants: [{ name: 'cassandra' }],
  },
  postgres: {
    start: server(async () => (await import('../scripts/servers/postgres.js')).startPostgres(), '?migrate=true'),
    variants: [{ name: 'postgres' }],
  },
  mysql: {
    start: server(async () => (await import('../scripts/servers/mariadb.js')).startMariaDb(), '?migrate=true'),
    variants: [{ name: 'mysql' }],
  },
  'mysql-ab': {
    start: server(async () => (await import('../scripts/servers/mariadb.js')).startMariaDb(), '?migrate=true'),
    variants: [
      { name: 'mysql' },
      { name: 'mysql, poll only', query: 'bells=0' },
      { name: 'mysql, poll only, pollMs=10', query: 'bells=0&pollMs=10' },
    ],
  },
  nats: {
    start: server(async () => (await import('../scripts/servers/nats.js')).startNats(), '?bucket=handoff'),
    variants: [{ name: 'nats' }],
  },
};

function server(start: () => Promise<{ url: string; stop(): Promise<void> }>, suffix = ''): () => Promise<Started> {
  return async () => {
    const s = await start();
    return { url: `${s.url}${suffix}`, stop: () => s.stop() };
  };
}

const withQuery = (url: string, query: string | undefined): string => (query ? `${url}${url.includes('?') ? '&' : '?'}${query}` : url);

/** `BEFORE=<another checkout>`: each variant also runs on that checkout's code, in the same alternating rounds. */
const before = process.env['BEFORE'];
type MakeLocker = (url: string, o: { ttlMs: number }) => ReturnType<typeof createLocker>;
const beforeLocker: MakeLocker | undefined = before
  ? ((await import(`${before}/src/index.ts`)) as { createLocker: MakeLocker }).createLocker
  : undefined;

/** The contenders of `variants` on `url` (also what a forked waiter makes from the same URL). */
function contendersOf(url: string, variants: readonly Variant[]): Contender[] {
  return variants.flatMap((v) => [
    lockerContender(v.name, () => createLocker(withQuery(url, v.query), { ttlMs: TTL_MS }), v.fair === true),
    ...(beforeLocker
      ? [lockerContender(`${v.name} (BEFORE)`, () => beforeLocker(withQuery(url, v.query), { ttlMs: TTL_MS }), v.fair === true)]
      : []),
  ]);
}

const ALL_VARIANTS = Object.values(ENGINES).flatMap((e) => e.variants);

/** The engines named on the command line (`all`: every one but cassandra); engines of one server run together. */
function requested(): string[] {
  const args = process.argv.slice(2).filter((a) => a !== '--');
  const names =
    args.length === 0 || args.includes('all') ? Object.keys(ENGINES).filter((n) => n !== 'cassandra' && n !== 'mysql-ab') : args;
  for (const n of names) if (!ENGINES[n]) throw new Error(`unknown engine '${n}' (${Object.keys(ENGINES).join(', ')}, all)`);
  return names;
}

const fmt = (n: number): string => (Number.isFinite(n) ? n.toFixed(2) : 'n/a');

/** Measure one engine (its variants alternating) and print one table row per variant and process count. */
async function measure(name: string, rounds: number): Promise<void> {
  const engine = ENGINES[name];
  if (!engine) return;
  const started = await engine.start();
  try {
    const local = new Set(engine.variants.filter((v) => v.local).map((v) => v.name));
    const contenders = contendersOf(started.url, engine.variants).map((c) =>
      local.has(c.name.replace(/ \(BEFORE\)$/, '')) ? c : forkedContender(c, import.meta.filename, started.url),
    );
    const results = await benchLatencies(contenders, { cycles: 0, rounds: 0, handoffRounds: rounds, handoff: { budgetMs: 120_000 } });
    for (const [variant, r] of results) {
      const cmd = `npm run bench:handoff -- ${name}`;
      console.log(
        `| ${variant} | 1 | ${fmt(r.handoff.p50)} | ${fmt(r.handoff.p99)} | ${fmt(r.handoff.release.p50)} | ${r.handoff.n} | \`${cmd}\` |`,
      );
      if (r.handoffRemote)
        console.log(
          `| ${variant} | 2 | ${fmt(r.handoffRemote.p50)} | ${fmt(r.handoffRemote.p99)} | ${fmt(r.handoffRemote.release.p50)} | ${r.handoffRemote.n} | \`${cmd}\` |`,
        );
    }
  } finally {
    await started.stop();
  }
}

childOrMain(
  (url) => contendersOf(url, ALL_VARIANTS),
  async () => {
    const rounds = Number(process.env['BENCH_HANDOFF_ROUNDS'] ?? 60);
    const m = machineInfo();
    console.log(`machine: ${m.cpus} CPUs, ${m.cpu}, node ${m.node}, load average ${m.load.toFixed(2)} at the start`);
    console.log(`hand-off: waiter idle 20–50 ms, release() call → waiter's lock() resolved, ${rounds} rounds, ms`);
    console.log('| engine | processes | p50 | p99 | release() p50 | n | command |');
    console.log('|---|---|---|---|---|---|---|');
    for (const name of requested()) await measure(name, rounds);
  },
);
