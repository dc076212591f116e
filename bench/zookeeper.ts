/**
 * `npm run bench:zookeeper` — the benchmark matrix (src/bench-matrix/) on a 3-node ZooKeeper
 * ensemble started by the harness: locksmith's ephemeral-sequential lock (fair by
 * construction) next to Apache Curator's InterProcessMutex (a JVM peer, see
 * zookeeper/curator.ts) and the plain ephemeral-node lock a Node user would otherwise write
 * (one fixed node, every waiter watches it: herd effect, no order), in the same run.
 * Idle cost of waiters = packets the ensemble receives per second (`mntr`, summed over the
 * nodes). Knobs: bench/common.ts (BENCH_QUICK=1 for a smoke run; BENCH_CURATOR=0 leaves
 * Curator out). See docs/benchmarks.md.
 */
import { createLocker } from '../src/index.js';
import { createZooKeeperBackend } from '../src/backends/zookeeper/index.js';
import { ZkSession } from '../src/backends/zookeeper/session.js';
import { MODE, RC, ZkError } from '../src/backends/zookeeper/driver.js';
import { lockerContender, type BenchClient, type Contender, type ServerProbe } from '../src/bench-matrix/index.js';
import { fourLetter, installCurator, startZooKeeper, type RunningZooKeeper } from '../scripts/servers/zookeeper.js';
import { CuratorJvm, curatorContender } from './zookeeper/curator.js';
import { childOrMain, runEngine } from './common.js';

/** Wait for a change of `path` (or its absence), or the abort of `signal`. */
function changeOf(s: ZkSession, path: string, signal: AbortSignal | undefined): Promise<void> {
  return new Promise<void>((resolve, reject) => {
    const onAbort = (): void => reject(signal?.reason);
    signal?.addEventListener('abort', onAbort, { once: true });
    const done = (): void => {
      signal?.removeEventListener('abort', onAbort);
      resolve();
    };
    void s.watchNode(path, done).then(
      (stat) => stat === null && done(),
      () => done(),
    );
  });
}

/** The plain ephemeral-node lock: create one fixed node; on NodeExists, watch it and retry. */
function naive(server: RunningZooKeeper): Contender {
  return {
    name: 'plain ephemeral node (herd)',
    peer: true,
    reportsQueued: true,
    async client(): Promise<BenchClient> {
      const s = await ZkSession.open({ connectString: server.connectString, sessionTimeoutMs: 10_000, connectTimeoutMs: 30_000 });
      return {
        async acquire(lockId, o = {}) {
          const dir = `/bench-naive/${lockId.replace(/[^\w.:-]/g, '_')}`;
          const path = `${dir}/lock`;
          let queued = false;
          for (;;) {
            o.signal?.throwIfAborted();
            try {
              await s.create(path, Buffer.alloc(0), MODE.EPHEMERAL);
              return { release: async () => void (await s.delete(path)) };
            } catch (err) {
              if (!(err instanceof ZkError)) throw err;
              if (err.rc === RC.NONODE) {
                await s.create('/bench-naive', Buffer.alloc(0), MODE.PERSISTENT).catch(() => undefined);
                await s.create(dir, Buffer.alloc(0), MODE.PERSISTENT).catch(() => undefined);
                continue;
              }
              if (err.rc !== RC.NODEEXISTS) throw err;
            }
            const change = changeOf(s, path, o.signal);
            if (!queued) o.onQueued?.();
            queued = true;
            await change;
          }
        },
        close: async () => s.close(),
      };
    },
  };
}

/** Packets the ensemble received, summed over its nodes (`mntr`). */
function packetsProbe(server: RunningZooKeeper): ServerProbe {
  return async () => {
    const replies = await Promise.all(server.nodes.map((n) => fourLetter(n.host, n.port, 'mntr')));
    return replies.reduce((sum, r) => sum + Number(/zk_packets_received\s+(\d+)/.exec(r)?.[1] ?? 0), 0);
  };
}

/** locksmith on the ensemble at `url` (also what a forked hand-off waiter makes). */
function locksmith(url: string): Contender {
  return lockerContender('locksmith', () => createLocker(createZooKeeperBackend(url), { ttlMs: 10_000 }), true);
}

childOrMain(
  (url) => [locksmith(url)],
  async () => {
    const withCurator = process.env.BENCH_CURATOR !== '0';
    const classpath = withCurator ? await installCurator() : '';
    const server = await startZooKeeper({ nodes: 3 });
    const jvm = withCurator ? new CuratorJvm(classpath, server.connectString) : undefined;
    try {
      await jvm?.ready;
      const url = `zookeeper://${server.connectString}/bench?sessionTimeoutMs=10000`;
      const contenders = [locksmith(url), ...(jvm ? [curatorContender(jvm)] : []), naive(server)];
      await runEngine({
        engine: `zookeeper (3-node ensemble, ${server.connectString})`,
        contenders,
        // Curator runs in one JVM, the plain lock needs the harness's handle: locksmith alone waits in a second process.
        fork: { script: import.meta.filename, url, only: ['locksmith'] },
        probe: packetsProbe(server),
        probeCounts: "packets the ensemble receives (mntr's zk_packets_received, all nodes)",
        notes: [
          'session timeout 10 s for everybody; Curator: one JVM, each client its own session, requests over stdin/stdout',
          'locksmith waits on its predecessor node (one notification per release); the plain lock wakes every waiter',
        ],
      });
    } finally {
      jvm?.stop();
      await server.stop();
    }
  },
);
