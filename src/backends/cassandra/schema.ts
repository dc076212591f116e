/**
 * The keyspace and tables (`?create=true`), made once per process and cluster. See
 * docs/backends/cassandra.md, "The tables".
 */
import type { CassandraSettings } from './config.js';
import { scopeOf } from './config.js';
import type { Session } from './session.js';
import { raceAbort } from '../kit.js';

/**
 * Lock reads are tiny and on the critical path of every renewal: when a replica dies, the
 * coordinator must not wait for it until the failure detector convicts it (seconds, longer
 * than a short lease has), so it asks another replica after a fixed 20 ms instead of the
 * default latency percentile.
 */
const TABLE_OPTIONS = "WITH speculative_retry = '20ms' AND additional_write_policy = '20ms'";

/** Columns added after the first release, in the order they came: `ALTER TABLE … ADD` for an older keyspace. */
const ADDED_COLUMNS: ReadonlyArray<readonly [string, string]> = [
  ['lock_main', 'fence bigint'],
  ['lock_main', 'identity text'],
  ['lock_main', 'acquired bigint'],
  ['lock_main', 'lease_ms int'],
  ['lock_queue', 'identity text'],
];

/** Per (cluster, keyspace) schema creation, so that the lockers of one process do it once. */
const done = new Map<string, Promise<void>>();

/** The CQL that creates the keyspace and tables of `s` (what `?create=true` and `locksmith migrate` run). */
export function cassandraDdl(s: CassandraSettings): string[] {
  const ks = s.keyspace;
  return [
    `CREATE KEYSPACE IF NOT EXISTS ${ks} WITH replication = {'class': 'SimpleStrategy', 'replication_factor': ${s.replication}}`,
    // The queue: one partition per (lock, shard), entries sorted by time then owner. The
    // benchmark's shadow-table baseline keeps its shadow row here too, at negative shards.
    `CREATE TABLE IF NOT EXISTS ${ks}.lock_queue (lock_id text, shard bigint, entry text, identity text, PRIMARY KEY ((lock_id, shard), entry)) ${TABLE_OPTIONS}`,
    // The main row: who holds, and (once it holds) its fencing token, when it began and its lease.
    `CREATE TABLE IF NOT EXISTS ${ks}.lock_main (lock_id text, shard bigint, owner text, fence bigint, identity text, acquired bigint, lease_ms int, PRIMARY KEY ((lock_id, shard), owner)) ${TABLE_OPTIONS}`,
    // The fencing counter, moved only by lightweight transactions; its value also names the shard.
    `CREATE TABLE IF NOT EXISTS ${ks}.lock_token (lock_id text PRIMARY KEY, fence bigint) ${TABLE_OPTIONS}`,
    // The listing's index: a few bucket partitions of lock ids, each cell living as long as
    // the longest-lived queue entry of its lock (docs/backends/cassandra.md, "Listing").
    // Its cells are never deleted, only expire, and a newer write always expires later (its
    // timestamp is its expiry): an expired cell shadows nothing alive, so it can be purged at
    // the next compaction (gc_grace_seconds = 0) instead of lingering as a tombstone for 10 days.
    `CREATE TABLE IF NOT EXISTS ${ks}.lock_index (bucket int, lock_id text, PRIMARY KEY ((bucket), lock_id)) ${TABLE_OPTIONS} AND gc_grace_seconds = 0`,
    // The time service's max-register.
    `CREATE TABLE IF NOT EXISTS ${ks}.time_service (id text PRIMARY KEY, t bigint) ${TABLE_OPTIONS}`,
  ];
}

async function run(session: Session, s: CassandraSettings): Promise<void> {
  for (const q of cassandraDdl(s)) await session.exec('schema', q, []);
  // Tables made by an earlier version lack the columns added since (docs/backends/cassandra.md, "The tables").
  for (const [table, column] of ADDED_COLUMNS) {
    await session.exec('schema', `ALTER TABLE ${s.keyspace}.${table} ADD ${column}`, []).catch((err: unknown) => {
      if (!/conflicts with an existing column|already exists/i.test(String(err instanceof Error ? err.message : err))) throw err;
    });
  }
  // The driver waits for schema agreement after each DDL statement (maxSchemaAgreementWaitSeconds).
}

/**
 * Create the keyspace and tables unless this process already did for the same cluster.
 * Shared by concurrent callers, so it runs to its end; each caller stops waiting when its
 * own `signal` aborts.
 */
export function ensureSchema(session: Session, s: CassandraSettings, signal?: AbortSignal): Promise<void> {
  const key = scopeOf(s);
  let p = done.get(key);
  if (!p) {
    p = run(session, s);
    done.set(key, p);
    p.catch(() => done.delete(key));
  }
  return signal ? raceAbort(p, signal) : p;
}
