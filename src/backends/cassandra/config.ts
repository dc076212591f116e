/**
 * `cassandra://host1,host2[:port]/keyspace?…` → the settings of the Cassandra backend.
 * Every query parameter is checked here (the kit's `UrlParams` rejects unknown ones), so a
 * typo is an `InvalidArgumentError` at `createLocker` time, not a surprise at the first
 * lock. See docs/backends/cassandra.md, "URL parameters".
 */
import { hostList, InvalidArgumentError, redact, UrlParams } from '../kit.js';

/** Consistency levels the backend accepts for its ordinary reads and writes. */
export type CassandraConsistency = 'quorum' | 'all' | 'local_quorum' | 'each_quorum' | 'one';

/** Everything the URL says. */
export interface CassandraSettings {
  readonly hosts: readonly string[];
  /** The native-protocol port, one for the whole cluster. */
  readonly port: number;
  readonly keyspace: string;
  readonly consistency: CassandraConsistency;
  /** `serial` or `local_serial`, for the fencing-token LWT. */
  readonly serialConsistency: 'serial' | 'local_serial';
  readonly localDataCenter: string;
  /** Create the keyspace and tables when missing. */
  readonly create: boolean;
  /** Replication factor used when `create` makes the keyspace (SimpleStrategy). */
  readonly replication: number;
  /** Fencing tokens per queue/main partition before the lock moves to the next shard. */
  readonly shardSize: number;
  /** Base interval of a waiter's poll in ms (the actual sleep is jittered around it). */
  readonly pollMs: number;
  /** How often this process pushes its clock into the time service, in ms. */
  readonly timeRefreshMs: number;
}

const CONSISTENCIES: readonly CassandraConsistency[] = ['quorum', 'all', 'local_quorum', 'each_quorum', 'one'];
const KNOWN = [
  'consistency',
  'serialConsistency',
  'localDataCenter',
  'create',
  'replication',
  'shardSize',
  'pollMs',
  'timeRefreshMs',
] as const;
const DEFAULT_PORT = 9042;

/**
 * The cluster's port. Cassandra serves every node on one native port, so `h1,h2:9043`
 * means 9043 for both; two different explicit ports are a mistake worth naming.
 */
function clusterPort(url: URL): number {
  const explicit = new Set<number>();
  for (const part of decodeURIComponent(url.host).split(',')) {
    const port = /^\s*(?:\[[^\]]+\]|[^:\s]+):(\d+)\s*$/.exec(part)?.[1];
    if (port !== undefined) explicit.add(Number(port));
  }
  if (url.port !== '') explicit.add(Number(url.port));
  if (explicit.size > 1) {
    throw new InvalidArgumentError('url', `cassandra hosts must share one port, got ${[...explicit].join(' and ')} in ${redact(url)}`);
  }
  return [...explicit][0] ?? DEFAULT_PORT;
}

/** Parse and validate a `cassandra://` URL. */
export function parseCassandraUrl(url: URL): CassandraSettings {
  if (url.protocol !== 'cassandra:') throw new InvalidArgumentError('url', `not a cassandra URL: ${redact(url)}`);
  if (url.host === '') throw new InvalidArgumentError('url', 'cassandra URL needs at least one host');
  const port = clusterPort(url);
  const hosts = hostList(url, port).map((h) => h.host);
  const keyspace = decodeURIComponent(url.pathname.replace(/^\/+/, '').replace(/\/+$/, '')) || 'locksmith';
  if (!/^[A-Za-z][A-Za-z0-9_]{0,47}$/.test(keyspace)) {
    throw new InvalidArgumentError('url', `keyspace '${keyspace}' must be a letter then letters, digits or _ (≤ 48)`);
  }
  const q = new UrlParams(url, KNOWN);
  return {
    hosts,
    port,
    keyspace,
    consistency: q.oneOf('consistency', CONSISTENCIES, 'quorum'),
    serialConsistency: q.oneOf('serialConsistency', ['serial', 'local_serial'], 'serial'),
    localDataCenter: q.string('localDataCenter') ?? 'datacenter1',
    create: q.bool('create', false),
    replication: q.int('replication', 1, { min: 1, max: 99 }),
    // ≥ 2: a holder's cell is at most one shard behind the counter's (see fair.ts).
    shardSize: q.int('shardSize', 1000, { min: 2, max: 1_000_000 }),
    pollMs: q.int('pollMs', 10, { min: 1, max: 10_000 }),
    timeRefreshMs: q.int('timeRefreshMs', 500, { min: 10, max: 60_000 }),
  };
}

/**
 * The scope of a cluster and keyspace within this process: lockers that share it see the
 * same lock rows, so a release by one can wake a waiter of another (see handoff.ts).
 */
export function scopeOf(s: CassandraSettings): string {
  return `${[...s.hosts].sort().join(',')}:${s.port}/${s.keyspace}`;
}
