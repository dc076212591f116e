/**
 * SQL benchmark on a real PostgreSQL and a real MariaDB (loopback): locksmith's lease rows
 * side by side with the session-bound lock a Node user would otherwise write —
 * `pg_advisory_lock` / `GET_LOCK`, one dedicated connection per client, the server queueing
 * the waiter. Same server, same run; ratios printed.
 *
 *   npm run bench:sql     (BENCH_ENGINES=postgres,mysql BENCH_SECONDS=5 BENCH_HANDOFFS=200)
 *
 * Figures only: nothing here is asserted. The advisory locks have no lease, no fencing token
 * and no fair queue, and break behind a transaction-pooling proxy: they are the speed floor.
 */
import { performance } from 'node:perf_hooks';
import { randomBytes } from 'node:crypto';
import { cpus } from 'node:os';
import pg from 'pg';
import mysql from 'mysql2/promise';
import { createLocker } from '../src/index.js';
import { startPostgres } from '../scripts/servers/postgres.js';
import { startMariaDb } from '../scripts/servers/mariadb.js';
import { jainIndex, longestStreak } from '../src/bench/index.js';

const SECONDS = Number(process.env['BENCH_SECONDS'] ?? 5);
const HANDOFFS = Number(process.env['BENCH_HANDOFFS'] ?? 200);
const ENGINES = (process.env['BENCH_ENGINES'] ?? 'postgres,mysql').split(',');
const CONTENDERS = 8;

/** The minimal lock interface every contestant implements. */
interface Contestant {
  acquire(lockId: string): Promise<() => Promise<void>>;
  close(): Promise<void>;
}

function locksmith(url: string, fair = false): Contestant {
  const locker = createLocker(url, { ttlMs: 10_000, fair });
  return {
    async acquire(lockId) {
      const lock = await locker.lock(lockId);
      return () => lock.release();
    },
    close: () => locker.close(),
  };
}

/** pg_advisory_lock on one dedicated session (the lock dies with the session). */
function pgAdvisory(url: string): Contestant {
  let client: Promise<pg.Client> | undefined;
  const open = (): Promise<pg.Client> =>
    (client ??= (async () => {
      const c = new pg.Client({ connectionString: url });
      await c.connect();
      return c;
    })());
  return {
    async acquire(lockId) {
      const c = await open();
      await c.query('SELECT pg_advisory_lock(hashtext($1))', [lockId]);
      return async () => {
        await c.query('SELECT pg_advisory_unlock(hashtext($1))', [lockId]);
      };
    },
    close: async () => (await client)?.end(),
  };
}

/** MariaDB GET_LOCK on one dedicated connection (names up to 192 characters). */
function getLock(url: string): Contestant {
  let conn: Promise<mysql.Connection> | undefined;
  const open = (): Promise<mysql.Connection> => (conn ??= mysql.createConnection(url));
  return {
    async acquire(lockId) {
      const c = await open();
      await c.query('SELECT GET_LOCK(?, 60)', [lockId]);
      return async () => {
        await c.query('SELECT RELEASE_LOCK(?)', [lockId]);
      };
    },
    close: async () => (await conn)?.end(),
  };
}

interface Pct {
  p50: number;
  p99: number;
}

function pct(samples: number[]): Pct {
  const s = [...samples].sort((a, b) => a - b);
  const at = (p: number): number => s[Math.min(s.length - 1, Math.floor((p / 100) * s.length))] ?? NaN;
  return { p50: at(50), p99: at(99) };
}

async function uncontended(make: () => Contestant): Promise<Pct> {
  const c = make();
  const lockId = `u-${randomBytes(4).toString('hex')}`;
  const samples: number[] = [];
  for (let i = 0; i < HANDOFFS + 20; i++) {
    const t0 = performance.now();
    const release = await c.acquire(lockId);
    await release();
    if (i >= 20) samples.push(performance.now() - t0);
  }
  await c.close();
  return pct(samples);
}

/** Time from the holder's release() call until the queued waiter holds the lock. */
async function handoff(make: () => Contestant): Promise<Pct> {
  const a = make();
  const b = make();
  const lockId = `h-${randomBytes(4).toString('hex')}`;
  await (
    await b.acquire(`warm-${lockId}`)
  )();
  const samples: number[] = [];
  let other = b;
  let holder = a;
  let release = await holder.acquire(lockId);
  for (let i = 0; i < HANDOFFS; i++) {
    const next = other.acquire(lockId).then((r) => ({ r, at: performance.now() }));
    // Let the waiter queue before releasing.
    await new Promise((r) => setTimeout(r, 15));
    const releasedAt = performance.now();
    await release();
    const got = await next;
    samples.push(got.at - releasedAt);
    release = got.r;
    [holder, other] = [other, holder];
  }
  await release();
  await a.close();
  await b.close();
  return pct(samples);
}

interface Hot {
  opsPerSec: number;
  jain: number;
  longestStreak: number;
}

async function hot(make: () => Contestant): Promise<Hot> {
  const clients = Array.from({ length: CONTENDERS }, make);
  const lockId = `hot-${randomBytes(4).toString('hex')}`;
  for (const c of clients) await (await c.acquire(`warm-${randomBytes(4).toString('hex')}`))();
  const counts = new Array<number>(CONTENDERS).fill(0);
  const order: number[] = [];
  const end = performance.now() + SECONDS * 1000;
  const t0 = performance.now();
  await Promise.all(
    clients.map(async (c, i) => {
      while (performance.now() < end) {
        const release = await c.acquire(lockId);
        counts[i] = (counts[i] ?? 0) + 1;
        order.push(i);
        await release();
      }
    }),
  );
  const elapsed = (performance.now() - t0) / 1000;
  for (const c of clients) await c.close();
  return { opsPerSec: order.length / elapsed, jain: jainIndex(counts), longestStreak: longestStreak(order) };
}

const f = (n: number, d = 2): string => n.toFixed(d);

async function measure(engine: string, url: string, peerName: string, peer: (url: string) => Contestant): Promise<void> {
  const rows: [string, Pct, Pct, Hot][] = [];
  for (const [name, make] of [
    ['locksmith (lease rows)', () => locksmith(url)],
    ['locksmith, fair', () => locksmith(url, true)],
    [peerName, () => peer(url.replace(/\?.*$/, ''))],
  ] as const) {
    rows.push([name, await uncontended(make), await handoff(make), await hot(make)]);
  }
  console.log(`\n${engine}: hand-off/uncontended samples ${HANDOFFS}; hot lock ${CONTENDERS} contenders × ${SECONDS}s`);
  console.log('| contestant | uncontended p50 / p99 (ms) | hand-off p50 / p99 (ms) | hot lock ops/s | Jain | longest streak |');
  console.log('|---|---|---|---|---|---|');
  for (const [name, u, h, x] of rows) {
    console.log(
      `| ${name} | ${f(u.p50)} / ${f(u.p99)} | ${f(h.p50)} / ${f(h.p99)} | ${f(x.opsPerSec, 0)} | ${f(x.jain, 3)} | ${x.longestStreak} |`,
    );
  }
  const [, lu, lh, lx] = rows[0]!;
  const [, pu, ph, px] = rows[2]!;
  console.log(
    `ratios locksmith / ${peerName}: uncontended p50 ${f(lu.p50 / pu.p50)}×, hand-off p50 ${f(lh.p50 / ph.p50)}×, ` +
      `p99 ${f(lh.p99 / ph.p99)}×, hot ops/s ${f(lx.opsPerSec / px.opsPerSec)}×`,
  );
}

async function main(): Promise<void> {
  console.log(`${cpus().length} CPUs; node ${process.version}`);
  if (ENGINES.includes('postgres')) {
    const server = await startPostgres();
    try {
      await measure('PostgreSQL', `${server.url}?migrate=true`, 'pg_advisory_lock', pgAdvisory);
    } finally {
      await server.stop();
    }
  }
  if (ENGINES.includes('mysql')) {
    const server = await startMariaDb();
    try {
      await measure('MariaDB', `${server.url}?migrate=true`, 'GET_LOCK', getLock);
    } finally {
      await server.stop();
    }
  }
}

main().then(
  () => process.exit(0),
  (err: unknown) => {
    console.error(err);
    process.exit(1);
  },
);
