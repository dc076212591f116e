/**
 * `cassandra://host1,host2[:port]/keyspace?…` → the settings of the Cassandra backend.
 * Every query parameter is validated here so that a typo is an `InvalidArgumentError` at
 * `createLocker` time, not a surprise at the first lock.
 */
import { InvalidArgumentError } from '../../errors.js';

/** Which of seed 000's algorithms a backend runs. */
export type CassandraAlgorithm = 'fair' | 'shadow';

/** Consistency levels the backend accepts for its ordinary reads and writes. */
export type CassandraConsistency = 'quorum' | 'all' | 'local_quorum' | 'each_quorum' | 'one';

/** Everything the URL says. */
export interface CassandraSettings {
  readonly hosts: readonly string[];
  readonly port: number;
  readonly keyspace: string;
  readonly algorithm: CassandraAlgorithm;
  readonly consistency: CassandraConsistency;
  /** `serial` or `local_serial`, for the fencing-token LWT. */
  readonly serialConsistency: 'serial' | 'local_serial';
  readonly localDataCenter: string;
  /** Create the keyspace and tables when missing. */
  readonly create: boolean;
  /** Replication factor used when `create` makes the keyspace (SimpleStrategy). */
  readonly replication: number;
  /** Acquisitions per queue/main partition before the fair lock moves to the next shard. */
  readonly shardSize: number;
  /** Base interval of a waiter's poll in ms (the actual sleep is jittered around it). */
  readonly pollMs: number;
  /** How often this process pushes its clock into the time service, in ms. */
  readonly timeRefreshMs: number;
}

const CONSISTENCIES: readonly CassandraConsistency[] = ['quorum', 'all', 'local_quorum', 'each_quorum', 'one'];
const KNOWN = new Set([
  'algorithm',
  'consistency',
  'serialConsistency',
  'localDataCenter',
  'create',
  'replication',
  'shardSize',
  'pollMs',
  'timeRefreshMs',
]);

function intParam(q: URLSearchParams, name: string, def: number, min: number, max: number): number {
  const raw = q.get(name);
  if (raw === null) return def;
  const n = Number(raw);
  if (!Number.isInteger(n) || n < min || n > max) {
    throw new InvalidArgumentError(name, `cassandra URL parameter ${name} must be an integer in [${min}, ${max}], got '${raw}'`);
  }
  return n;
}

/** Parse and validate a `cassandra://` URL. */
export function parseCassandraUrl(url: URL): CassandraSettings {
  if (url.protocol !== 'cassandra:') throw new InvalidArgumentError('url', `not a cassandra URL: ${url.href}`);
  // WHATWG URL keeps `h1,h2:port` as one host string; split it ourselves.
  const hostPart = decodeURIComponent(url.host);
  if (hostPart === '') throw new InvalidArgumentError('url', 'cassandra URL needs at least one host');
  let port = 9042;
  const hosts: string[] = [];
  for (const item of hostPart.split(',')) {
    const m = /^(\[[^\]]+\]|[^:]+)(?::(\d+))?$/.exec(item.trim());
    if (!m || !m[1]) throw new InvalidArgumentError('url', `bad host '${item}' in cassandra URL`);
    hosts.push(m[1].replace(/^\[|\]$/g, ''));
    if (m[2] !== undefined) port = Number(m[2]);
  }
  if (url.port !== '') port = Number(url.port);
  if (!Number.isInteger(port) || port < 1 || port > 65535) throw new InvalidArgumentError('url', `bad port in cassandra URL`);
  const keyspace = decodeURIComponent(url.pathname.replace(/^\/+/, '').replace(/\/+$/, '')) || 'locksmith';
  if (!/^[A-Za-z][A-Za-z0-9_]{0,47}$/.test(keyspace)) {
    throw new InvalidArgumentError('url', `keyspace '${keyspace}' must be a letter then letters, digits or _ (≤ 48)`);
  }
  const q = url.searchParams;
  for (const key of q.keys()) {
    if (!KNOWN.has(key)) throw new InvalidArgumentError(key, `unknown cassandra URL parameter '${key}' (known: ${[...KNOWN].join(', ')})`);
  }
  const algorithm = (q.get('algorithm') ?? 'fair').toLowerCase();
  if (algorithm !== 'fair' && algorithm !== 'shadow') {
    throw new InvalidArgumentError('algorithm', `algorithm must be 'fair' or 'shadow', got '${algorithm}'`);
  }
  const consistency = (q.get('consistency') ?? 'quorum').toLowerCase() as CassandraConsistency;
  if (!CONSISTENCIES.includes(consistency)) {
    throw new InvalidArgumentError('consistency', `consistency must be one of ${CONSISTENCIES.join(', ')}, got '${consistency}'`);
  }
  const serial = (q.get('serialConsistency') ?? 'serial').toLowerCase();
  if (serial !== 'serial' && serial !== 'local_serial') {
    throw new InvalidArgumentError('serialConsistency', `serialConsistency must be 'serial' or 'local_serial', got '${serial}'`);
  }
  const createRaw = (q.get('create') ?? 'false').toLowerCase();
  if (!['true', 'false', '1', '0'].includes(createRaw)) {
    throw new InvalidArgumentError('create', `create must be true or false, got '${createRaw}'`);
  }
  return {
    hosts,
    port,
    keyspace,
    algorithm,
    consistency,
    serialConsistency: serial,
    localDataCenter: q.get('localDataCenter') ?? 'datacenter1',
    create: createRaw === 'true' || createRaw === '1',
    replication: intParam(q, 'replication', 1, 1, 99),
    // ≥ 2: the safety check looks one shard back, which needs a holder's shard to be at
    // most one behind the current one (see fair.ts).
    shardSize: intParam(q, 'shardSize', 1000, 2, 1_000_000),
    pollMs: intParam(q, 'pollMs', 10, 1, 10_000),
    timeRefreshMs: intParam(q, 'timeRefreshMs', 500, 10, 60_000),
  };
}
