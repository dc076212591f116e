/**
 * `npm run bench:etcd-handoff` — the latency rows of the matrix (src/bench-matrix/latency.ts:
 * uncontended lock + release, and the hand-off to a waiter idle 20–50 ms, timed from the call
 * of `release()` to the waiter's `lock()` resolving, in one process and with the waiter in a
 * second one) for locksmith on etcd and on ZooKeeper, both 3-member clusters on this machine,
 * in ALTERNATING rounds of one run. `BEFORE=<another checkout>` adds that checkout's etcd
 * backend as a third contender, to measure a change against the code before it.
 * Both engines are of one durability class: by default etcd syncs every write to disk and
 * ZooKeeper runs with `forceSync=yes`; `BENCH_ETCD_TMPFS=1` puts etcd's data on tmpfs and
 * ZooKeeper runs with `forceSync=no` (neither syncs). The raw recipes of bench/floor-recipes.ts
 * (the least a queue lock can do, raw clients) run in the same rounds as each engine's floor;
 * BENCH_FLOOR=0 leaves them out. Knobs: BENCH_ITERATIONS,
 * BENCH_ROUNDS, BENCH_HANDOFF_ROUNDS (bench/common.ts). See docs/benchmarks.md.
 */
import { createLocker, type Locker } from '../src/index.js';
import { createZooKeeperBackend } from '../src/backends/zookeeper/index.js';
import { benchLatencies, forkedContender, lockerContender, machineInfo, type Contender } from '../src/bench-matrix/index.js';
import { startEtcd } from '../scripts/servers/etcd.js';
import { startZooKeeper } from '../scripts/servers/zookeeper.js';
import { childOrMain, optionsFromEnv } from './common.js';
import { rawEtcdContender, rawZooKeeperContender } from './floor-recipes.js';

const TTL_MS = 10_000;
const before = process.env['BEFORE'];
type MakeLocker = (url: string, o: { ttlMs: number }) => Locker;
const beforeLocker: MakeLocker | undefined = before
  ? ((await import(`${before}/src/index.ts`)) as { createLocker: MakeLocker }).createLocker
  : undefined;

/** The contenders on the engine at `url` (a forked waiter finds its own by name). */
function contenders(url: string): Contender[] {
  const zk = url.startsWith('zookeeper:');
  const out = [
    lockerContender('locksmith etcd', () => createLocker(`${url}?prefix=bench/`, { ttlMs: TTL_MS }), true),
    lockerContender('locksmith zookeeper', () => createLocker(createZooKeeperBackend(url), { ttlMs: TTL_MS }), true),
  ];
  // The floor: the least a queue lock can do on each engine, raw clients (bench/floor-recipes.ts).
  if (process.env['BENCH_FLOOR'] !== '0') out.push(zk ? rawZooKeeperContender(url) : rawEtcdContender(url));
  if (beforeLocker)
    out.push(lockerContender('locksmith etcd (BEFORE)', () => beforeLocker(`${url}?prefix=bench/`, { ttlMs: TTL_MS }), true));
  return zk ? out.filter((c) => c.name.includes('zookeeper')) : out.filter((c) => !c.name.includes('zookeeper'));
}

childOrMain(contenders, async () => {
  const o = optionsFromEnv();
  const load0 = machineInfo().load;
  const tmpfs = process.env['BENCH_ETCD_TMPFS'] === '1';
  const etcd = await startEtcd({ memory: tmpfs });
  // Like for like: ZooKeeper syncs its log exactly when etcd does.
  const zk = await startZooKeeper({ nodes: 3, forceSync: !tmpfs });
  try {
    const zkUrl = `zookeeper://${zk.connectString}/bench?sessionTimeoutMs=10000`;
    const script = import.meta.filename;
    const all = [
      ...contenders(etcd.url).map((c) => forkedContender(c, script, etcd.url)),
      ...contenders(zkUrl).map((c) => forkedContender(c, script, zkUrl)),
    ];
    console.log(
      `etcd 3-member cluster, data on ${tmpfs ? 'tmpfs (no fsync)' : 'disk (fsync per write)'}; ZooKeeper 3-node ensemble, forceSync=${tmpfs ? 'no' : 'yes'}`,
    );
    console.log(`${o.iterations} uncontended cycles × ${o.rounds} rounds, ${o.handoffRounds} hand-offs per library, libraries alternating`);
    const results = await benchLatencies(
      all,
      { cycles: o.iterations ?? 200, rounds: o.rounds ?? 10, handoffRounds: o.handoffRounds ?? 60 },
      (line) => process.stderr.write(`${line}\n`),
    );
    const f = (p: { p50: number; p99: number; n?: number } | undefined): string =>
      p ? `${p.p50.toFixed(3)} / ${p.p99.toFixed(3)}${p.n === undefined ? '' : ` (${p.n})`}` : 'n/a';
    console.log(
      '| library | uncontended p50 / p99 (ms) (samples) | hand-off p50 / p99, one process | release() with a waiter p50 / p99 | hand-off p50 / p99, two processes |',
    );
    console.log('|---|---:|---:|---:|---:|');
    for (const [name, r] of results)
      console.log(`| ${name} | ${f(r.uncontended)} | ${f(r.handoff)} | ${f(r.handoff.release)} | ${f(r.handoffRemote)} |`);
    console.log(`load average ${load0.toFixed(2)} at the start, ${machineInfo().load.toFixed(2)} at the end`);
  } finally {
    await etcd.stop();
    await zk.stop();
  }
});
