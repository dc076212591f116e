/**
 * etcd benchmark on a real 3-member cluster (loopback): locksmith's etcd backend (the Go
 * `concurrency.Mutex` recipe) next to `etcdctl lock` (the Go client itself, hand-off only:
 * it is a process per acquisition) and next to locksmith's ZooKeeper backend on a 3-node
 * ensemble, all in the same run; ratios printed.
 *
 *   npm run bench:etcd            (BENCH_SECONDS=5 BENCH_HANDOFFS=100 by default)
 *
 * Figures only: nothing here is asserted.
 */
import { spawn } from 'node:child_process';
import { cpus } from 'node:os';
import { performance } from 'node:perf_hooks';
import { setTimeout as sleep } from 'node:timers/promises';
import { createLocker } from '../src/index.js';
import { createEtcdBackend, type EtcdBackend } from '../src/backends/etcd/index.js';
import { createZooKeeperBackend, type ZooKeeperBackend } from '../src/backends/zookeeper/index.js';
import { benchHandoff, benchHot, benchUncontended, type HotResult } from '../src/bench/matrix.js';
import type { LockerFactory } from '../src/bench/client.js';
import { percentiles, type Percentiles } from '../src/bench/stats.js';
import { startEtcd, type RunningEtcd } from '../scripts/servers/etcd.js';
import { startZooKeeper } from '../scripts/servers/zookeeper.js';

const SECONDS = Number(process.env['BENCH_SECONDS'] ?? 5);
const HANDOFFS = Number(process.env['BENCH_HANDOFFS'] ?? 100);
const CONTENDERS = 16;

interface Row {
  readonly name: string;
  readonly u: Percentiles;
  readonly h: Percentiles;
  readonly hot: HotResult;
  readonly notificationsPerRelease: number;
}

async function measure(name: string, make: LockerFactory, notifications: () => number): Promise<Row> {
  const u = await benchUncontended(make, HANDOFFS * 2, true);
  const h = await benchHandoff(make, HANDOFFS, true);
  const before = notifications();
  const hot = await benchHot(make, CONTENDERS, SECONDS * 1_000, 0, true);
  return { name, u, h, hot, notificationsPerRelease: hot.ops === 0 ? 0 : (notifications() - before) / hot.ops };
}

/** Hand-off from locksmith to a queued `etcdctl lock`: release at t0, etcdctl prints its key at t1. */
async function etcdctlHandoff(server: RunningEtcd, iterations: number): Promise<Percentiles> {
  const locker = createLocker(server.url);
  const lockId = `bench-ctl-${Date.now().toString(36)}`;
  const samples: number[] = [];
  try {
    for (let i = 0; i < iterations; i++) {
      const held = await locker.lock(lockId);
      const child = spawn('etcdctl', [`--endpoints=${server.endpoints}`, 'lock', lockId], { stdio: ['ignore', 'pipe', 'ignore'] });
      const printed = new Promise<number>((resolve) => child.stdout.once('data', () => resolve(performance.now())));
      while ((await locker.inspect(lockId)).waiters === 0) await sleep(5);
      await sleep(5);
      const t0 = performance.now();
      await held.release();
      samples.push((await printed) - t0);
      const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
      child.kill('SIGINT');
      await exited;
    }
    return percentiles(samples);
  } finally {
    await locker.close();
  }
}

const f = (n: number, d = 2): string => n.toFixed(d);

async function main(): Promise<void> {
  // BENCH_ETCD_TMPFS=1: etcd's data on tmpfs (no fsync cost), like the harness's ZooKeeper (forceSync=no).
  const etcd = await startEtcd({ memory: process.env['BENCH_ETCD_TMPFS'] === '1' });
  const zk = await startZooKeeper({ nodes: 3 });
  try {
    const where = process.env['BENCH_ETCD_TMPFS'] === '1' ? 'tmpfs (fsync free)' : 'disk (fsync per write)';
    console.log(
      `etcd 3.4 3-member cluster (data on ${where}) and ZooKeeper 3-node ensemble (forceSync=no) on loopback; ${cpus().length} CPUs; node ${process.version}`,
    );
    console.log(`uncontended: ${HANDOFFS * 2} samples; hand-off: ${HANDOFFS}; hot lock: ${CONTENDERS} contenders × ${SECONDS}s, fair\n`);
    const etcdBackends: EtcdBackend[] = [];
    const zkBackends: ZooKeeperBackend[] = [];
    const makeEtcd: LockerFactory = (o) => {
      const b = createEtcdBackend(`${etcd.url}?prefix=bench/`);
      etcdBackends.push(b);
      return createLocker(b, { ttlMs: 10_000, ...o });
    };
    const makeZk: LockerFactory = (o) => {
      const b = createZooKeeperBackend(`zookeeper://${zk.connectString}/bench?sessionTimeoutMs=10000`);
      zkBackends.push(b);
      return createLocker(b, { ttlMs: 10_000, ...o });
    };
    const rows: Row[] = [
      await measure('locksmith etcd', makeEtcd, () => etcdBackends.reduce((n, b) => n + b.stats.waiterNotifications, 0)),
      await measure('locksmith zookeeper', makeZk, () => zkBackends.reduce((n, b) => n + b.stats.waiterNotifications, 0)),
    ];
    const ctl = await etcdctlHandoff(etcd, Math.min(HANDOFFS, 40));
    console.log(
      '| contestant | uncontended p50 / p99 (ms) | hand-off p50 / p99 (ms) | hot lock ops/s (16) | Jain | longest streak | notifications per release |',
    );
    console.log('|---|---|---|---|---|---|---|');
    for (const r of rows) {
      console.log(
        `| ${r.name} | ${f(r.u.p50)} / ${f(r.u.p99)} | ${f(r.h.p50)} / ${f(r.h.p99)} | ${f(r.hot.opsPerSec, 1)} | ${f(r.hot.jain, 3)} | ${r.hot.longestStreak} | ${f(r.notificationsPerRelease)} |`,
      );
    }
    console.log(`| etcdctl lock (Go client), locksmith → etcdctl | — | ${f(ctl.p50)} / ${f(ctl.p99)} (n=${ctl.n}) | — | — | — | — |`);
    const [e, z] = rows;
    if (e && z) {
      console.log(
        `\nratios etcd / zookeeper: uncontended p50 ${f(e.u.p50 / z.u.p50)}×; hand-off p50 ${f(e.h.p50 / z.h.p50)}×, p99 ${f(e.h.p99 / z.h.p99)}×; ` +
          `hot ops/s ${f(e.hot.opsPerSec / z.hot.opsPerSec)}×`,
      );
      console.log(`ratio locksmith etcd hand-off p50 / etcdctl hand-off p50: ${f(e.h.p50 / ctl.p50)}×`);
    }
  } finally {
    await etcd.stop();
    await zk.stop();
  }
}

main().then(
  () => process.exit(0),
  (err: unknown) => {
    console.error(err);
    process.exit(1);
  },
);
