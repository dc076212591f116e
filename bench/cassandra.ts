/**
 * `npm run bench:cassandra` — the benchmark matrix (src/bench-matrix/) on one Cassandra node
 * started by the harness (QUORUM): the backend's fair lock and the shadow-table lock it
 * replaced, in the same run, as docs/backends/cassandra.md describes them:
 * - `locksmith (fair)`: the queue + main row + time service lock; contenders in one process,
 *   so a release wakes the next at once;
 * - `locksmith (fair, polled)`: the same with local wake-ups off, so every client behaves as a
 *   process of its own and learns of a release only by its poll (the cross-process case);
 * - `shadow algorithm` (the peer): the older shadow-table lock with its random backoffs, which
 *   the package no longer ships (bench/cassandra-shadow.ts).
 * The hot-lock rows default to a 10 ms critical section (the figures in the history section
 * of docs/benchmarks.md used it). Idle cost of waiters = CQL statements per second the
 * clients send (reads, writes and LWTs, counted by the backend). Knobs: bench/common.ts
 * (BENCH_QUICK=1 for a smoke run).
 */
import { createLocker } from '../src/index.js';
import { createCassandraBackend, type CassandraBackend } from '../src/backends/cassandra/index.js';
import { lockerContender, type BenchClient, type Contender, type ServerProbe } from '../src/bench-matrix/index.js';
import { startCassandra } from '../scripts/servers/cassandra.js';
import { ShadowBackend } from './cassandra-shadow.js';
import { main, runEngine } from './common.js';

const TTL_MS = 5_000;

/** Every backend the run made, for the statements probe (closed ones keep their counts). */
const backends: { readonly statements: { read: number; write: number; lwt: number } }[] = [];

/** The fair lock, with or without local wake-ups. */
function fairVariant(name: string, url: string, localWakeups: boolean): Contender {
  return {
    name,
    peer: false,
    fair: true,
    reportsQueued: true,
    async client(): Promise<BenchClient> {
      const backend: CassandraBackend = await createCassandraBackend(`${url}?create=true`, { localWakeups });
      backends.push(backend);
      return lockerContender(name, () => createLocker(backend, { ttlMs: TTL_MS }), true).client();
    },
  };
}

/** The shadow-table lock: the peer. */
function shadowVariant(name: string, url: string): Contender {
  return {
    name,
    peer: true,
    fair: false,
    reportsQueued: true,
    async client(): Promise<BenchClient> {
      const backend = await ShadowBackend.connect(`${url}?create=true`);
      backends.push(backend);
      return lockerContender(name, () => createLocker(backend, { ttlMs: TTL_MS }), false).client();
    },
  };
}

const statementsProbe: ServerProbe = async () =>
  backends.reduce((sum, b) => {
    const s = b.statements;
    return sum + s.read + s.write + s.lwt;
  }, 0);

main(async () => {
  const server = await startCassandra({ nodes: 1 });
  try {
    await runEngine({
      engine: 'cassandra 5.0 (1 node, QUORUM)',
      contenders: [
        fairVariant('locksmith (fair)', server.url, true),
        fairVariant('locksmith (fair, polled)', server.url, false),
        shadowVariant('shadow algorithm', server.url),
      ],
      probe: statementsProbe,
      probeCounts: 'CQL statements the clients send (reads + writes + LWTs)',
      defaults: { criticalMs: 10 },
      notes: [`ttl ${TTL_MS} ms; each client its own backend (connections); default pollMs 10`],
    });
  } finally {
    await server.stop();
  }
});
