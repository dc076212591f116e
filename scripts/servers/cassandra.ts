/**
 * Apache Cassandra 5.0 for tests and benchmarks, straight from Maven Central (Debian has no
 * package and there is no Docker here): `cassandra-all` and its runtime jars are copied once
 * into a cache outside the work tree (`~/.cache/locksmith/cassandra-<version>/lib`), then each
 * node runs `CassandraDaemon` on Java 17 with a generated yaml, on loopback, with a fresh data
 * directory. A cluster puts its nodes on 127.0.0.1, 127.0.0.2, 127.0.0.3 (all loopback on
 * Linux) with the same ports, which is what Cassandra expects of one node per address.
 */
import { execFile, type ChildProcess } from 'node:child_process';
import { existsSync } from 'node:fs';
import { mkdir, readFile, readdir, rename, rm, writeFile } from 'node:fs/promises';
import { createConnection } from 'node:net';
import { homedir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import {
  aptInstall,
  freePort,
  makeDataDir,
  makeNode,
  removeDir,
  spawnServer,
  waitFor,
  type RunningServer,
  type ServerNode,
} from './harness.js';

const execFileP = promisify(execFile);
const here = dirname(fileURLToPath(import.meta.url));
const assets = join(here, 'cassandra');

/** The Cassandra release the harness runs (5.0 is the first line that supports Java 17). */
export const CASSANDRA_VERSION = process.env.LOCKSMITH_CASSANDRA_VERSION ?? '5.0.6';

/** Options of {@link startCassandra}. */
export interface CassandraServerOptions {
  /** Number of nodes (1 or 3 in our tests). Default 1. */
  readonly nodes?: number;
  /** Keyspace named in the returned URL. Default `locksmith`. */
  readonly keyspace?: string;
  /** Extra query string for the returned URL, e.g. `consistency=quorum`. */
  readonly query?: string;
  /** `tombstone_failure_threshold` of the nodes. Default 5,000 (see the yaml template). */
  readonly tombstoneFailureThreshold?: number;
  /** JVM heap per node. Default `768m` (fits three nodes beside other engineers' servers). */
  readonly heap?: string;
  /** Startup timeout per node. Default 240 s (a loaded 2-core machine is slow to start a JVM). */
  readonly startTimeoutMs?: number;
}

/** Where the jars are cached between runs. */
export function cassandraLibDir(version = CASSANDRA_VERSION): string {
  const base = process.env.LOCKSMITH_CACHE_DIR ?? join(homedir(), '.cache', 'locksmith');
  return join(base, `cassandra-${version}`, 'lib');
}

/** Resolve the jars with Maven once; later calls find the cache and return at once. */
export async function installCassandra(version = CASSANDRA_VERSION): Promise<string> {
  const lib = cassandraLibDir(version);
  if (existsSync(join(lib, `cassandra-all-${version}.jar`))) return lib;
  await aptInstall('mvn', ['maven']);
  // A temporary directory renamed at the end: an interrupted download never looks complete.
  const tmp = `${lib}.tmp-${process.pid}`;
  await rm(tmp, { recursive: true, force: true });
  await mkdir(dirname(lib), { recursive: true });
  await execFileP(
    'mvn',
    [
      '-B',
      '-q',
      '-f',
      join(assets, 'pom.xml'),
      `-Dcassandra.version=${version}`,
      // Pinned: Maven 3.8 would otherwise pick the old 2.8 plugin.
      'org.apache.maven.plugins:maven-dependency-plugin:3.6.1:copy-dependencies',
      `-DoutputDirectory=${tmp}`,
      '-DincludeScope=runtime',
    ],
    { maxBuffer: 64 << 20, timeout: 15 * 60_000 },
  );
  if (existsSync(lib)) {
    await rm(tmp, { recursive: true, force: true });
  } else {
    await rename(tmp, lib);
  }
  return lib;
}

/** Cassandra 5.0 runs on Java 11 or 17, not 21: prefer Debian's 17 when the default `java` is another. */
function javaBinary(): string {
  for (const arch of ['amd64', 'arm64']) {
    const p = `/usr/lib/jvm/java-17-openjdk-${arch}/bin/java`;
    if (existsSync(p)) return p;
  }
  return 'java';
}

// The module flags of Cassandra 5.0's conf/jvm17-server.options: Java 17 refuses its
// reflective access otherwise.
const EXPORTS = [
  'java.base/jdk.internal.misc',
  'java.management.rmi/com.sun.jmx.remote.internal.rmi',
  'java.management/com.sun.jmx.remote.security',
  'java.rmi/sun.rmi.registry',
  'java.rmi/sun.rmi.server',
  'java.sql/java.sql',
  'java.base/java.lang.ref',
  'jdk.unsupported/sun.misc',
];
const OPENS = [
  'java.base/java.lang.module',
  'java.base/jdk.internal.loader',
  'java.base/jdk.internal.ref',
  'java.base/jdk.internal.reflect',
  'java.base/jdk.internal.math',
  'java.base/jdk.internal.module',
  'java.base/jdk.internal.util.jar',
  'jdk.management/com.sun.management.internal',
  'java.base/sun.nio.ch',
  'java.base/java.io',
  'java.base/java.lang.reflect',
  'java.base/java.lang',
  'java.base/java.util',
  'java.base/java.nio',
];

function tokenFor(index: number, count: number): string {
  // Evenly spaced Murmur3 tokens; with RF = nodes every node holds everything anyway.
  const span = 2n ** 64n / BigInt(count);
  return (-(2n ** 63n) + span * BigInt(index)).toString();
}

async function portOpen(host: string, port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const sock = createConnection({ host, port });
    const done = (ok: boolean): void => {
      sock.destroy();
      resolve(ok);
    };
    sock.setTimeout(1000, () => done(false));
    sock.once('connect', () => done(true));
    sock.once('error', () => done(false));
  });
}

async function isFreeEverywhere(port: number, hosts: readonly string[]): Promise<boolean> {
  for (const h of hosts) if (await portOpen(h, port)) return false;
  return true;
}

async function logHas(file: string, needle: string): Promise<boolean> {
  try {
    return (await readFile(file, 'utf8')).includes(needle);
  } catch {
    return false;
  }
}

/** What every node of one start shares. */
interface CassandraPlan {
  readonly count: number;
  readonly hosts: readonly string[];
  readonly storagePort: number;
  readonly nativePort: number;
  readonly dataDir: string;
  readonly template: string;
  readonly classpath: string;
  readonly heap: string;
  readonly timeoutMs: number;
  readonly tombstoneFailure: number;
}

/** Ports free on every address of `hosts` (every node listens on the same two). */
async function portsFreeEverywhere(hosts: readonly string[]): Promise<{ storagePort: number; nativePort: number }> {
  for (;;) {
    const storagePort = await freePort();
    const nativePort = await freePort();
    if (storagePort !== nativePort && (await isFreeEverywhere(storagePort, hosts)) && (await isFreeEverywhere(nativePort, hosts))) {
      return { storagePort, nativePort };
    }
  }
}

/** The JVM command line of one node whose files are under `dir`. */
function cassandraJvmArgs(plan: CassandraPlan, dir: string, yamlPath: string): string[] {
  return [
    `-Xms${plan.heap}`,
    `-Xmx${plan.heap}`,
    '-Xss256k',
    '-XX:+UseG1GC',
    '-XX:ActiveProcessorCount=2',
    '-ea',
    '-da:net.openhft...',
    '-Djava.net.preferIPv4Stack=true',
    '-Dchronicle.analytics.disable=true',
    '-Djdk.attach.allowAttachSelf=true',
    '-Dio.netty.tryReflectionSetAccessible=true',
    ...EXPORTS.flatMap((e) => ['--add-exports', `${e}=ALL-UNNAMED`]),
    ...OPENS.flatMap((o) => ['--add-opens', `${o}=ALL-UNNAMED`]),
    '-Dcassandra-foreground=yes',
    `-Dcassandra.config=file://${yamlPath}`,
    `-Dcassandra.storagedir=${join(dir, 'data')}`,
    `-Dcassandra.logdir=${join(dir, 'logs')}`,
    `-Dlogback.configurationFile=${join(assets, 'logback.xml')}`,
    `-Djna.tmpdir=${join(dir, 'tmp')}`,
    `-Djava.io.tmpdir=${join(dir, 'tmp')}`,
    '-Dcassandra.skip_wait_for_gossip_to_settle=0',
    '-Dcassandra.ring_delay_ms=1000',
    '-Dcassandra.consistent.rangemovement=false',
    '-Dcassandra.unsafesystem=true',
    '-Dcassandra.superuser_setup_delay_ms=0',
    '-cp',
    plan.classpath,
    'org.apache.cassandra.service.CassandraDaemon',
  ];
}

/** Prepare node `i`'s directory and configuration; returns how to start it (and start it again). */
async function prepareCassandraNode(
  plan: CassandraPlan,
  host: string,
  i: number,
): Promise<{ host: string; start: () => Promise<ChildProcess> }> {
  const dir = join(plan.dataDir, `node${i + 1}`);
  await mkdir(join(dir, 'logs'), { recursive: true });
  await mkdir(join(dir, 'tmp'), { recursive: true });
  const vars: Record<string, string> = {
    initial_token: tokenFor(i, plan.count),
    seeds: `127.0.0.1:${plan.storagePort}`,
    host,
    storage_port: String(plan.storagePort),
    native_port: String(plan.nativePort),
    tombstone_warn: String(Math.max(1, Math.floor(plan.tombstoneFailure / 5))),
    tombstone_failure: String(plan.tombstoneFailure),
  };
  const yamlPath = join(dir, 'cassandra.yaml');
  await writeFile(
    yamlPath,
    plan.template.replace(/\$\{(\w+)\}/g, (_, k: string) => vars[k] ?? ''),
  );
  const logFile = join(dir, 'logs', 'stdout.log');
  const args = cassandraJvmArgs(plan, dir, yamlPath);
  const start = async (): Promise<ChildProcess> => {
    // A restart must find the readiness line written by this start, not the previous one.
    await writeFile(logFile, '');
    const child = await spawnServer(javaBinary(), args, { logFile, cwd: dir });
    const exited = new Promise<never>((_, reject) => {
      child.once('exit', (code, sig) => reject(new Error(`cassandra node ${host} exited during startup (${code ?? sig}); see ${logFile}`)));
    });
    exited.catch(() => undefined);
    await Promise.race([
      exited,
      waitFor(
        `cassandra node ${host}:${plan.nativePort}`,
        async () => (await logHas(logFile, 'Starting listening for CQL clients')) && (await portOpen(host, plan.nativePort)),
        { timeoutMs: plan.timeoutMs, intervalMs: 250 },
      ),
    ]);
    return child;
  };
  return { host, start };
}

/** Every node must see every other one as UP, or QUORUM would fail right after start. */
async function awaitGossip(plan: CassandraPlan): Promise<void> {
  const { count, hosts, storagePort } = plan;
  await waitFor(
    'cassandra cluster gossip',
    async () => {
      for (let i = 0; i < count; i++) {
        const log = await readFile(join(plan.dataDir, `node${i + 1}`, 'logs', 'stdout.log'), 'utf8').catch(() => '');
        const ups = hosts.filter((h) => h !== hosts[i] && log.includes(`/${h}:${storagePort} is now UP`));
        if (ups.length < count - 1) return false;
      }
      return true;
    },
    { timeoutMs: plan.timeoutMs, intervalMs: 250 },
  );
}

/** Start the seed, then the others together (auto_bootstrap is off, nothing streams), and wait for gossip. */
async function startCassandraNodes(plan: CassandraPlan): Promise<Array<ServerNode & { stop(): Promise<void> }>> {
  const starters = await Promise.all(plan.hosts.map((host, i) => prepareCassandraNode(plan, host, i)));
  const nodes: Array<ServerNode & { stop(): Promise<void> }> = [];
  try {
    const [first, ...rest] = starters;
    if (!first) throw new Error('startCassandra: nodes must be ≥ 1');
    nodes.push(await makeNode('cassandra-1', first.host, plan.nativePort, first.start));
    nodes.push(...(await Promise.all(rest.map((n, i) => makeNode(`cassandra-${i + 2}`, n.host, plan.nativePort, n.start)))));
    if (plan.count > 1) await awaitGossip(plan);
    return nodes;
  } catch (err) {
    await Promise.all(nodes.map((n) => n.stop().catch(() => undefined)));
    await removeDir(plan.dataDir);
    throw err;
  }
}

/**
 * Start a Cassandra node (or a cluster of `nodes` on 127.0.0.1..N) and wait until every
 * node serves CQL and sees the others. Returns a URL `cassandra://h1,h2,h3:port/keyspace`.
 */
export async function startCassandra(opts: CassandraServerOptions = {}): Promise<RunningServer> {
  const count = opts.nodes ?? 1;
  if (javaBinary() === 'java') await aptInstall('/usr/lib/jvm/java-17-openjdk-amd64/bin/java', ['openjdk-17-jre-headless']);
  const lib = await installCassandra();
  const hosts = Array.from({ length: count }, (_, i) => `127.0.0.${i + 1}`);
  const plan: CassandraPlan = {
    count,
    hosts,
    ...(await portsFreeEverywhere(hosts)),
    dataDir: await makeDataDir('cassandra'),
    template: await readFile(join(assets, 'cassandra.yaml.template'), 'utf8'),
    classpath: `${lib}/*`,
    heap: opts.heap ?? '768m',
    timeoutMs: opts.startTimeoutMs ?? 240_000,
    tombstoneFailure: opts.tombstoneFailureThreshold ?? 5000,
  };
  const nodes = await startCassandraNodes(plan);
  const keyspace = opts.keyspace ?? 'locksmith';
  const query = opts.query ? `?${opts.query}` : '';
  let stopped = false;
  return {
    engine: 'cassandra',
    url: `cassandra://${hosts.join(',')}:${plan.nativePort}/${keyspace}${query}`,
    nodes,
    async stop() {
      if (stopped) return;
      stopped = true;
      await Promise.all(nodes.map((n) => n.stop().catch(() => undefined)));
      await removeDir(plan.dataDir);
    },
  };
}

/** For a quick manual check: `npx tsx scripts/servers/cassandra.ts [nodes]` starts, prints, stops. */
async function main(): Promise<void> {
  const n = Number(process.argv[2] ?? '1');
  const t0 = Date.now();
  const server = await startCassandra({ nodes: n });
  console.log(`${server.url} ready in ${Date.now() - t0} ms`);
  await server.stop();
  const left = await readdir(join(cassandraLibDir())).then((f) => f.length);
  console.log(`stopped (${left} jars cached in ${cassandraLibDir()})`);
}

if (process.argv[1] && fileURLToPath(import.meta.url) === process.argv[1]) {
  main().catch((err: unknown) => {
    console.error(err);
    process.exitCode = 1;
  });
}
