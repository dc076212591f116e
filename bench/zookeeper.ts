/**
 * ZooKeeper benchmark on a real 3-node ensemble (loopback), locksmith's fair
 * ephemeral-sequential lock side by side with the peer a Node user would otherwise write:
 * seed 004's plain ephemeral-node lock (one fixed node, every waiter watches it: herd
 * effect, no order). Same client library, same ensemble, same run; ratios printed.
 *
 *   npm run bench:zookeeper            (BENCH_SECONDS=5 BENCH_HANDOFFS=200 by default)
 *
 * Figures only: nothing here is asserted.
 */
import { performance } from 'node:perf_hooks';
import { randomBytes } from 'node:crypto';
import { cpus } from 'node:os';
import { createLocker, type Locker } from '../src/index.js';
import { ZkSession, createZooKeeperBackend, type ZooKeeperBackend } from '../src/backends/zookeeper/index.js';
import { MODE, RC, ZkError } from '../src/backends/zookeeper/driver.js';
import { startZooKeeper, type RunningZooKeeper } from '../scripts/servers/zookeeper.js';
import { jainIndex, longestStreak } from '../src/bench/index.js';

const SECONDS = Number(process.env['BENCH_SECONDS'] ?? 5);
const HANDOFFS = Number(process.env['BENCH_HANDOFFS'] ?? 200);
const CONTENDERS = 16;

/** The minimal lock interface both contestants implement. */
interface Contestant {
  readonly name: string;
  acquire(lockId: string): Promise<() => Promise<void>>;
  notifications(): number;
  close(): Promise<void>;
}

function locksmith(server: RunningZooKeeper): Contestant {
  const backend: ZooKeeperBackend = createZooKeeperBackend(`zookeeper://${server.connectString}/bench?sessionTimeoutMs=10000`);
  const locker: Locker = createLocker(backend, { ttlMs: 10_000 });
  return {
    name: 'locksmith (sequential, fair)',
    async acquire(lockId) {
      const lock = await locker.lock(lockId, { fair: true });
      return () => lock.release();
    },
    notifications: () => backend.stats.waiterNotifications,
    close: () => locker.close(),
  };
}

/** Seed 004's first scheme: create one ephemeral node; on NodeExists, watch it and retry. */
function naive(server: RunningZooKeeper): Contestant {
  let session: Promise<ZkSession> | undefined;
  let notified = 0;
  const open = (): Promise<ZkSession> =>
    (session ??= ZkSession.open({ connectString: server.connectString, sessionTimeoutMs: 10_000, connectTimeoutMs: 30_000 }));
  return {
    name: 'naive ephemeral node (herd)',
    async acquire(lockId) {
      const s = await open();
      const dir = `/bench-naive/${lockId}`;
      const path = `${dir}/lock`;
      for (;;) {
        try {
          await s.create(path, Buffer.alloc(0), MODE.EPHEMERAL);
          return async () => {
            await s.delete(path);
          };
        } catch (err) {
          if (!(err instanceof ZkError)) throw err;
          if (err.rc === RC.NONODE) {
            await s.create('/bench-naive', Buffer.alloc(0), MODE.PERSISTENT).catch(() => undefined);
            await s.create(dir, Buffer.alloc(0), MODE.PERSISTENT).catch(() => undefined);
            continue;
          }
          if (err.rc !== RC.NODEEXISTS) throw err;
        }
        await new Promise<void>((resolve) => {
          void s
            .watchNode(path, () => {
              notified += 1;
              resolve();
            })
            .then(
              (stat) => {
                if (stat === null) resolve();
              },
              () => resolve(),
            );
        });
      }
    },
    notifications: () => notified,
    close: async () => (await session)?.close(),
  };
}

function pct(sorted: number[], p: number): number {
  if (sorted.length === 0) return NaN;
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))] as number;
}

async function uncontended(make: () => Contestant): Promise<{ p50: number; p99: number }> {
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
  samples.sort((a, b) => a - b);
  return { p50: pct(samples, 50), p99: pct(samples, 99) };
}

/** Time from the holder's release() call until the queued waiter holds the lock. */
async function handoff(make: () => Contestant): Promise<{ p50: number; p99: number }> {
  const a = make();
  const b = make();
  const lockId = `h-${randomBytes(4).toString('hex')}`;
  const samples: number[] = [];
  let holder = a;
  let other = b;
  let release = await holder.acquire(lockId);
  for (let i = 0; i < HANDOFFS; i++) {
    let releasedAt = 0;
    const next = other.acquire(lockId).then((r) => ({ r, at: performance.now() }));
    // Let the waiter queue (and set its watch) before releasing.
    await new Promise((r) => setTimeout(r, 15));
    releasedAt = performance.now();
    await release();
    const got = await next;
    samples.push(got.at - releasedAt);
    release = got.r;
    [holder, other] = [other, holder];
  }
  await release();
  await a.close();
  await b.close();
  samples.sort((x, y) => x - y);
  return { p50: pct(samples, 50), p99: pct(samples, 99) };
}

interface HotResult {
  opsPerSec: number;
  jain: number;
  longestStreak: number;
  notificationsPerRelease: number;
}

/** 16 contenders, each with its own session, lock+release in a loop on one hot lock. */
async function hot(make: () => Contestant): Promise<HotResult> {
  const clients = Array.from({ length: CONTENDERS }, make);
  const lockId = `hot-${randomBytes(4).toString('hex')}`;
  // Open every session before the clock starts.
  for (const c of clients) await (await c.acquire(`warm-${randomBytes(4).toString('hex')}`))();
  const counts = new Array<number>(CONTENDERS).fill(0);
  const order: number[] = [];
  const before = clients.reduce((n, c) => n + c.notifications(), 0);
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
  const total = counts.reduce((a, b) => a + b, 0);
  const notified = clients.reduce((n, c) => n + c.notifications(), 0) - before;
  for (const c of clients) await c.close();
  return {
    opsPerSec: total / elapsed,
    jain: jainIndex(counts),
    longestStreak: longestStreak(order),
    notificationsPerRelease: total === 0 ? 0 : notified / total,
  };
}

const f = (n: number, d = 1): string => n.toFixed(d);

async function main(): Promise<void> {
  const server = await startZooKeeper({ nodes: 3 });
  try {
    console.log(`ZooKeeper 3-node ensemble on loopback (${server.connectString}); ${cpus().length} CPUs; node ${process.version}`);
    console.log(`hand-off/uncontended samples: ${HANDOFFS}; hot lock: ${CONTENDERS} contenders × ${SECONDS}s\n`);
    const makers: [string, () => Contestant][] = [
      ['locksmith', () => locksmith(server)],
      ['naive', () => naive(server)],
    ];
    const rows: Record<string, { u: { p50: number; p99: number }; h: { p50: number; p99: number }; hot: HotResult; name: string }> = {};
    for (const [key, make] of makers) {
      const name = make().name;
      const u = await uncontended(make);
      const h = await handoff(make);
      const hr = await hot(make);
      rows[key] = { u, h, hot: hr, name };
    }
    console.log(
      '| contestant | uncontended p50 / p99 (ms) | hand-off p50 / p99 (ms) | hot lock ops/s (16) | Jain | longest streak | watch notifications per release |',
    );
    console.log('|---|---|---|---|---|---|---|');
    for (const r of Object.values(rows)) {
      console.log(
        `| ${r.name} | ${f(r.u.p50, 2)} / ${f(r.u.p99, 2)} | ${f(r.h.p50, 2)} / ${f(r.h.p99, 2)} | ${f(r.hot.opsPerSec)} | ${f(r.hot.jain, 3)} | ${r.hot.longestStreak} | ${f(r.hot.notificationsPerRelease, 2)} |`,
      );
    }
    const ls = rows['locksmith'];
    const nv = rows['naive'];
    if (ls && nv) {
      console.log(
        `\nratios locksmith / naive: hand-off p50 ${f(ls.h.p50 / nv.h.p50, 2)}×, p99 ${f(ls.h.p99 / nv.h.p99, 2)}×; ` +
          `hot ops/s ${f(ls.hot.opsPerSec / nv.hot.opsPerSec, 2)}×; notifications per release ${f(ls.hot.notificationsPerRelease, 2)} vs ${f(nv.hot.notificationsPerRelease, 2)}`,
      );
    }
  } finally {
    await server.stop();
  }
}

main().then(
  () => process.exit(0),
  (err: unknown) => {
    console.error(err);
    process.exit(1);
  },
);
