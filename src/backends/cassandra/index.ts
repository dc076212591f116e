/**
 * `cassandra://host1,host2[:port]/keyspace?consistency=quorum` — the fair lock of docs/backends/cassandra.md on Apache Cassandra.
 *
 * The fair lock (fair.ts): a queue partition sorted by time-service time and a main
 * partition; the next in line prepares its main cell and fencing token while the holder
 * holds, and takes over with one read when it releases. (The older shadow-table lock it
 * replaced is a benchmark baseline only: bench/cassandra-shadow.ts.)
 *
 * Every cell carries a TTL that renewals rewrite; reads and writes run at QUORUM by default
 * (the theorems need R + W > RF); the fencing token is a lightweight transaction on a
 * per-lock counter whose value also rotates the partitions. See docs/backends/cassandra.md.
 */
import { encodeHostList, type Backend, type ConnectOptions } from '../kit.js';
import { CassandraBackend, type CassandraBackendOptions } from './backend.js';

// The entry is what a user needs: the factories, the backend, its options and the types its
// public members name. The algorithms' tables, tickets and time service are internals; tests
// import them from their modules.
export { CassandraBackend, type CassandraBackendOptions } from './backend.js';
export type { CassandraSettings, CassandraConsistency } from './config.js';
export type { MicroClock } from './time-service.js';
export { cassandraDdl } from './schema.js';
export type { StatementCounts } from './session.js';

/** Factory used by `createLocker('cassandra://…')`. */
export function createBackend(url: URL, options: ConnectOptions = {}): Promise<Backend> {
  return CassandraBackend.connect(url, options);
}

/** Like {@link createBackend}, with options beyond the URL (an injected clock, no local wake-ups). */
export function createCassandraBackend(url: string | URL, options: CassandraBackendOptions = {}): Promise<CassandraBackend> {
  return CassandraBackend.connect(typeof url === 'string' ? new URL(encodeHostList(url)) : url, options);
}
