/**
 * Fault profiles: what the nemesis needs to know about one backend. Adding a backend is one
 * entry in PROFILES (docs/guarantees.md, "Fault tests"), named in its engine's manifest
 * (`faultProfiles`; the package test checks the two agree): how to start its engine with the
 * harness, the lease settings that make faults bite in a short run, and which server-kill
 * semantics apply. Endpoints are read from and written back into the backend URL generically
 * (`scheme://[user@]host:port,host:port/path?query`), so the proxy goes in front of every node.
 */
import { startRedis } from '../../scripts/servers/redis.js';
import { startZooKeeper } from '../../scripts/servers/zookeeper.js';
import { startCassandra } from '../../scripts/servers/cassandra.js';
import { startRedlock } from '../../scripts/servers/redlock.js';
import { startEtcd } from '../../scripts/servers/etcd.js';
import { startPostgres } from '../../scripts/servers/postgres.js';
import { startMariaDb } from '../../scripts/servers/mariadb.js';
import { startNats } from '../../scripts/servers/nats.js';
import type { RunningServer } from '../../scripts/servers/harness.js';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { createLocker } from '../../src/index.js';
import { encodeHostList, hostList } from '../../src/backends/kit.js';
import { ENGINES } from '../../src/backends/manifests.js';

/** What a server kill means on this engine. */
export type ServerKill =
  /** Kill one node of several; the quorum keeps serving, nothing may be double-granted. */
  | { readonly kind: 'quorum' }
  /**
   * Kill the only node; clients get typed unavailability until it restarts, nothing is
   * double-granted. `soakOnly` (the reason) keeps it out of `npm test`: the soak runs it.
   */
  | { readonly kind: 'single'; readonly downMs: number; readonly soakOnly?: string }
  /** Not run, and why (reported with the figures). */
  | { readonly kind: 'skip'; readonly why: string };

/** One backend's profile. */
export interface FaultProfile {
  readonly name: string;
  /** Start the engine for a run (harness: installed and started on loopback ports). */
  start(): Promise<RunningServer>;
  /** The port a host without one uses in this scheme's URLs. */
  readonly defaultPort: number;
  /** Lease settings for the workload; short so that faults bite within seconds. */
  readonly ttlMs: number;
  readonly lockDelayMs: number;
  readonly criticalMs: number;
  /** How long a pause / partition lasts: past the lease as the engine counts it. */
  readonly faultMs: number;
  readonly serverKill: ServerKill;
  /** False when clients reach the locks without a network (file://): partitions do not apply. */
  readonly network?: false;
  /**
   * Set (the reason) when leases end by the lockers' wall clocks within a documented skew:
   * the clock-skew fault breaks that assumption by design and is not run.
   */
  readonly wallClockLeases?: string;
  /** Workers ask for fair locks (the engine's hand-off path is then what the faults hit). */
  readonly fair?: boolean;
  /** The URL a worker uses, from the engine's (or a proxied) URL: add tuning parameters. */
  tune(url: string): string;
  /**
   * Upper bound on how long a crashed holder's lock stays taken. The target is
   * ttl + lockDelay + 1 s; engines whose leases are coarser say so here.
   */
  freeBoundMs(): number;
}

const withParam = (url: string, param: string): string => `${url}${url.includes('?') ? '&' : '?'}${param}`;
const standard = (p: { ttlMs: number; lockDelayMs: number }) => (): number => p.ttlMs + p.lockDelayMs + 1_000;

const redis: FaultProfile = {
  name: 'redis',
  // An append-only file synced on every write: a killed Redis restarts with its locks, as a
  // production Redis that must not double-grant after a crash is configured (docs/backends/redis.md).
  start: () => startRedis({ extraArgs: ['--appendonly', 'yes', '--appendfsync', 'always'] }),
  defaultPort: 6379,
  ttlMs: 300,
  // A lock delay, so that the crash bound ttl + lockDelay + 1 s is checked with one.
  lockDelayMs: 200,
  criticalMs: 5,
  faultMs: 800,
  serverKill: { kind: 'single', downMs: 1_500 },
  tune: (url) => url,
  freeBoundMs: standard({ ttlMs: 300, lockDelayMs: 200 }),
};

/**
 * The same Redis with fair workers: every grant is a hand-off, held on receipt of the
 * release's message and claimed in the background (docs/backends/redis.md).
 */
const redisFair: FaultProfile = { ...redis, name: 'redis-fair', fair: true };

const zookeeper: FaultProfile = {
  name: 'zookeeper',
  start: () => startZooKeeper({ nodes: 3 }),
  defaultPort: 2181,
  // The lease is the session: the ttl is the session timeout.
  ttlMs: 1_500,
  lockDelayMs: 0,
  criticalMs: 5,
  faultMs: 3_000,
  serverKill: { kind: 'quorum' },
  tune: (url) => withParam(url, 'sessionTimeoutMs=1500'),
  freeBoundMs: standard({ ttlMs: 1_500, lockDelayMs: 0 }),
};

const cassandra: FaultProfile = {
  name: 'cassandra',
  start: () => startCassandra({ nodes: 1 }),
  defaultPort: 9042,
  ttlMs: 1_000,
  lockDelayMs: 0,
  criticalMs: 20,
  faultMs: 3_500,
  // One node (three JVMs do not fit beside the other engines on this 2-core machine): a kill
  // restarts it on the same data directory, which takes from ~8 s to a minute here, and the
  // driver then takes up to ~25 s more to reconnect: too slow for a short run inside
  // `npm test` (docs/guarantees.md, "Fault tests").
  serverKill: {
    kind: 'single',
    downMs: 1_500,
    soakOnly: 'a restart and reconnect take 10-60 s; run by the soak (npm run faults)',
  },
  tune: (url) => withParam(url, 'create=true'),
  // Cells live in whole seconds, ceil(ttl) + 1 s (docs/backends/cassandra.md), and waiters poll.
  freeBoundMs: () => (Math.ceil(1_000 / 1_000) + 1) * 1_000 + 1_000,
};

const redlock: FaultProfile = {
  name: 'redlock',
  // Five independent masters without persistence: a killed master restarts empty after
  // downMs, which the quorum tolerates (docs/backends/redlock.md, "Restarts").
  start: () => startRedlock(),
  defaultPort: 6379,
  ttlMs: 800,
  lockDelayMs: 0,
  criticalMs: 5,
  faultMs: 1_500,
  serverKill: { kind: 'quorum' },
  tune: (url) => url,
  freeBoundMs: standard({ ttlMs: 800, lockDelayMs: 0 }),
};

const etcd: FaultProfile = {
  name: 'etcd',
  start: () => startEtcd(),
  defaultPort: 2379,
  // The lease is the backend's etcd lease (whole seconds on the server): 2 s.
  ttlMs: 2_000,
  lockDelayMs: 0,
  criticalMs: 5,
  faultMs: 4_000,
  serverKill: { kind: 'quorum' },
  tune: (url) => withParam(url, 'leaseTtlMs=2000'),
  // The server rounds a lease up to whole seconds and expires it on its leader's tick.
  freeBoundMs: () => 2_000 + 2_000,
};

/**
 * NATS JetStream KV on one node (Debian's 2.9.10 cannot replicate a compare-and-set safely:
 * docs/backends/nats.md, "Replicas"): a killed server restarts with its file store. Leases
 * are stored times on the workers' clocks (one machine here: no skew).
 */
const nats: FaultProfile = {
  name: 'nats',
  start: () => startNats({ nodes: 1 }),
  defaultPort: 4222,
  ttlMs: 1_500,
  lockDelayMs: 0,
  criticalMs: 5,
  faultMs: 3_000,
  serverKill: { kind: 'single', downMs: 1_500 },
  tune: (url) => withParam(url, 'bucket=faults&clockSkewMs=100'),
  wallClockLeases: 'leases end by the lockers\' wall clocks within clockSkewMs (docs/backends/nats.md, "Whose clock")',
  // A lease counts as ended clockSkewMs after its stored end; waiters wake at that time.
  freeBoundMs: standard({ ttlMs: 1_600, lockDelayMs: 0 }),
};

/** The SQL engines: lease rows on the database's clock; a killed server restarts with its data. */
const sql = (name: string, start: () => Promise<RunningServer>, defaultPort: number): FaultProfile => ({
  name,
  start,
  defaultPort,
  ttlMs: 600,
  lockDelayMs: 0,
  criticalMs: 5,
  faultMs: 1_200,
  serverKill: { kind: 'single', downMs: 1_500 },
  tune: (url) => withParam(url, 'migrate=true'),
  freeBoundMs: standard({ ttlMs: 600, lockDelayMs: 0 }),
});

/**
 * Locks in a directory of this machine (file://): no server to kill, no network to cut; the
 * faults are the clients' own (kill -9, SIGSTOP) and wall-clock jumps (docs/backends/file.md).
 */
const file: FaultProfile = {
  name: 'file',
  start: async () => {
    const dir = mkdtempSync(join(tmpdir(), 'locksmith-faults-file-'));
    return { engine: 'file', url: pathToFileURL(dir).href, nodes: [], stop: async () => rmSync(dir, { recursive: true, force: true }) };
  },
  defaultPort: 0,
  network: false,
  ttlMs: 300,
  lockDelayMs: 200,
  criticalMs: 5,
  faultMs: 800,
  serverKill: { kind: 'skip', why: 'no server: the locks are files of this machine' },
  tune: (url) => url,
  freeBoundMs: standard({ ttlMs: 300, lockDelayMs: 200 }),
};

/** Every profile, by name. Add a backend here (and nothing else) to put it under the nemesis. */
export const PROFILES: Readonly<Record<string, FaultProfile>> = {
  redis,
  'redis-fair': redisFair,
  redlock,
  zookeeper,
  etcd,
  cassandra,
  postgres: sql('postgres', () => startPostgres(), 5432),
  mysql: sql('mysql', () => startMariaDb(), 3306),
  nats,
  file,
};

/**
 * The profile of the engine that serves the scheme of `url`, as its manifest names it
 * (`rediss://…` → redis, `mariadb://…` → mysql): the engine's first profile.
 */
export function profileForUrl(url: string): FaultProfile {
  const scheme = /^([a-z0-9+-]+):/i.exec(url)?.[1]?.toLowerCase() ?? '';
  const name = ENGINES.find((e) => e.schemes.includes(scheme))?.faultProfiles[0];
  const profile = name === undefined ? undefined : PROFILES[name];
  if (!profile) throw new Error(`no fault profile for '${scheme}:' (have ${Object.keys(PROFILES).join(', ')})`);
  return profile;
}

const AUTHORITY = /^([a-z0-9+]+:\/\/)([^@/?]*@)?([^/?]*)(.*)$/i;

/** The `host:port` endpoints of a backend URL, in order, read as the backends read them (the kit's hostList). */
export function endpointsOf(url: string, defaultPort: number): string[] {
  // A URL without a host (file:///dir) has no endpoint to put a proxy in front of.
  if (new URL(encodeHostList(url)).host === '') return [];
  return hostList(new URL(encodeHostList(url)), defaultPort).map((h) => `${h.host}:${h.port}`);
}

/** The same URL with its endpoints replaced (e.g. by fault proxies' addresses). */
export function withEndpoints(url: string, endpoints: readonly string[]): string {
  const m = AUTHORITY.exec(url);
  if (!m) throw new Error(`cannot read the hosts of ${url}`);
  return `${m[1]}${m[2] ?? ''}${endpoints.join(',')}${m[4] ?? ''}`;
}

/** Create any schema once, before many processes race to create it. */
export async function prepare(url: string): Promise<void> {
  const setup = createLocker(url);
  try {
    await (await setup.lock('fault:setup', { timeoutMs: 60_000 })).release();
  } finally {
    await setup.close();
  }
}
