/**
 * `cassandra://host1,host2[:port]/keyspace?consistency=quorum` — the fair lock of docs/backends/cassandra.md on Apache Cassandra.
 *
 * Two algorithms, chosen with `?algorithm=`:
 * - `fair` (default, fair.ts): a queue partition sorted by time-service time (§5.4) and a
 *   main partition; the next in line prepares its main cell and fencing token while the
 *   holder holds, and takes over with one read when it releases (§5, listings 5–7).
 * - `shadow` (shadow.ts): the older shadow-table algorithm with its random backoffs (§4,
 *   listings 3–4), kept as the baseline the fair algorithm is measured against.
 *
 * Every cell carries a TTL that renewals rewrite; reads and writes run at QUORUM by default
 * (the theorems need R + W > RF); the fencing token is a lightweight transaction on a
 * per-lock counter whose value also rotates the partitions. See docs/backends/cassandra.md.
 */
import { encodeHostList, type Backend, type ConnectOptions } from '../kit.js';
import { CassandraBackend, type CassandraBackendOptions } from './backend.js';

export { CassandraBackend, type CassandraBackendOptions } from './backend.js';
export { parseCassandraUrl, type CassandraSettings, type CassandraAlgorithm, type CassandraConsistency } from './config.js';
export { TimeService, systemMicroClock, type MicroClock } from './time-service.js';
export { cellTtlSeconds, queueEntry } from './tables.js';
export { cassandraDdl } from './schema.js';
export type { StatementCounts } from './session.js';
export type { CassandraGrantData, CassandraTicket } from './types.js';
export type { FairGrantData, FairTicket } from './fair.js';
export type { ShadowGrantData, ShadowTicket } from './shadow.js';

/** Factory used by `createLocker('cassandra://…')`. */
export function createBackend(url: URL, options: ConnectOptions = {}): Promise<Backend> {
  return CassandraBackend.connect(url, options);
}

/** Like {@link createBackend}, with options beyond the URL (an injected clock, no local wake-ups). */
export function createCassandraBackend(url: string | URL, options: CassandraBackendOptions = {}): Promise<CassandraBackend> {
  return CassandraBackend.connect(typeof url === 'string' ? new URL(encodeHostList(url)) : url, options);
}
