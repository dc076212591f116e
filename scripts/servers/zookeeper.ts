/**
 * ZooKeeper in the server harness: Debian's ZooKeeper 3.8 (jars in /usr/share/java) run
 * directly with `QuorumPeerMain` on Java 17, one process per node, each with its own
 * zoo.cfg, data directory and loopback ports. Three nodes form an ensemble (the tests'
 * default), one node runs standalone where a test needs no quorum.
 *
 * Debian's init scripts are not used: they assume one system-wide instance under systemd.
 */
import { writeFile, mkdir } from 'node:fs/promises';
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { connect as netConnect } from 'node:net';
import {
  aptInstall,
  freePorts,
  makeDataDir,
  makeNode,
  removeDir,
  spawnServer,
  waitFor,
  type RunningServer,
  type ServerClock,
  type ServerNode,
} from './harness.js';

/** Options of {@link startZooKeeper}. */
export interface ZooKeeperServerOptions {
  /** 1 (standalone) or 3 (an ensemble; the default). */
  readonly nodes?: 1 | 3;
  /**
   * ZooKeeper's tick. Session timeouts are bounded by 2..20 ticks unless overridden, so a
   * short tick lets tests negotiate short sessions (expiry cases stay fast).
   */
  readonly tickTimeMs?: number;
  /** Smallest session timeout the servers accept (default 2 ticks). */
  readonly minSessionTimeoutMs?: number;
  /** Largest session timeout the servers accept (default 60 s). */
  readonly maxSessionTimeoutMs?: number;
  /** Path appended to the URL as the chroot (default none). */
  readonly chroot?: string;
  /** Max heap per JVM (default 256m). */
  readonly heap?: string;
  /** Run every server's JVM on this clock (libfaketime; the JVM reads time through libc). */
  readonly clock?: ServerClock;
  /**
   * Sync the transaction log to disk before acknowledging (`forceSync=yes`, ZooKeeper's own
   * default). Default false: the harness runs without, like etcd on tmpfs (benchmarks compare
   * engines of one durability class, docs/benchmarks.md).
   */
  readonly forceSync?: boolean;
}

/** A running ZooKeeper engine plus what the ZooKeeper tests need beyond {@link RunningServer}. */
export interface RunningZooKeeper extends RunningServer {
  /** `host:port,host:port,...` of the client ports (no chroot). */
  readonly connectString: string;
  /** Ask one node for its mode (`leader`, `follower`, `standalone`) over the `srvr` command. */
  mode(node: ServerNode): Promise<string | undefined>;
}

const JAVA_DIR = '/usr/share/java';
const ZK_JAR = join(JAVA_DIR, 'zookeeper.jar');

/**
 * Install ZooKeeper (and Java) from Debian when the jar is missing. `libzookeeper-java` is
 * the part of Debian's `zookeeper` source package that carries the server and its
 * dependencies as jars; the `zookeeper` binary package adds only init scripts and a system
 * service on port 2181, which a CI machine with systemd would start for nothing.
 */
export async function installZooKeeper(): Promise<void> {
  await aptInstall('java', ['openjdk-17-jre-headless']);
  await aptInstall(ZK_JAR, ['libzookeeper-java', 'libslf4j-java']);
}

/**
 * Install Apache Curator (Debian's libcurator-*-java) and a JDK, for the interop tests that
 * run a Java Curator client against the same ensemble. Returns the classpath to use.
 */
export async function installCurator(): Promise<string> {
  await installZooKeeper();
  await aptInstall(join(JAVA_DIR, 'curator-recipes.jar'), [
    'libcurator-recipes-java',
    'libcurator-framework-java',
    'libcurator-client-java',
  ]);
  // Source-file mode (`java Foo.java`) needs the compiler module of a full JDK.
  await aptInstall('javac', ['openjdk-17-jdk-headless']);
  return ['curator-recipes.jar', 'curator-framework.jar', 'curator-client.jar', 'slf4j-nop.jar']
    .map((j) => join(JAVA_DIR, j))
    .filter((p) => existsSync(p))
    .join(':');
}

/** Send a four-letter-word command and collect the reply (the server closes after answering). */
export function fourLetter(host: string, port: number, cmd: string, timeoutMs = 3_000): Promise<string> {
  return new Promise((resolve, reject) => {
    const sock = netConnect({ host, port });
    let out = '';
    const timer = setTimeout(() => {
      sock.destroy();
      reject(new Error(`no answer to '${cmd}' from ${host}:${port}`));
    }, timeoutMs);
    timer.unref();
    sock.setEncoding('utf8');
    sock.on('connect', () => sock.write(cmd));
    sock.on('data', (d: string) => {
      out += d;
    });
    sock.on('error', (err) => {
      clearTimeout(timer);
      reject(err);
    });
    sock.on('close', () => {
      clearTimeout(timer);
      resolve(out);
    });
  });
}

async function modeOf(host: string, port: number): Promise<string | undefined> {
  const reply = await fourLetter(host, port, 'srvr');
  const m = /^Mode: (\w+)/m.exec(reply);
  return m?.[1];
}

/** Where each server listens and how the ensemble is tuned. */
interface ZkPlan {
  readonly n: number;
  readonly host: string;
  readonly tick: number;
  readonly minSession: number;
  readonly maxSession: number;
  readonly heap: string;
  readonly clientPort: (i: number) => number;
  readonly peerPort: (i: number) => number;
  readonly electionPort: (i: number) => number;
  readonly classpath: string;
  readonly env?: NodeJS.ProcessEnv;
  readonly forceSync: boolean;
}

/** zoo.cfg of server `i`, its data in `dataDir`. */
function zooCfg(plan: ZkPlan, i: number, dataDir: string): string {
  const { host, tick } = plan;
  const lines = [
    `tickTime=${tick}`,
    // Loaded CI machines stall for seconds; generous sync limits keep followers in the quorum.
    `initLimit=${Math.ceil(30_000 / tick)}`,
    `syncLimit=${Math.ceil(10_000 / tick)}`,
    `dataDir=${dataDir}`,
    `clientPort=${plan.clientPort(i)}`,
    `clientPortAddress=${host}`,
    `minSessionTimeout=${plan.minSession}`,
    `maxSessionTimeout=${plan.maxSession}`,
    'maxClientCnxns=0',
    'admin.enableServer=false',
    '4lw.commands.whitelist=*',
    'autopurge.purgeInterval=0',
    `forceSync=${plan.forceSync ? 'yes' : 'no'}`,
    // Empty lock parents (CONTAINER nodes) are reaped quickly, as in production tuning.
    'znode.container.checkIntervalMs=1000',
  ];
  if (plan.n > 1) {
    lines.push('standaloneEnabled=false');
    for (let j = 0; j < plan.n; j++) lines.push(`server.${j + 1}=${host}:${plan.peerPort(j)}:${plan.electionPort(j)}`);
  }
  return lines.join('\n') + '\n';
}

/** The JVM command line of one server reading `cfg`. */
function zkJavaArgs(plan: ZkPlan, cfg: string): string[] {
  return [
    `-Xmx${plan.heap}`,
    '-Xms32m',
    '-XX:+UseSerialGC',
    '-XX:TieredStopAtLevel=1',
    '-Xss512k',
    '-Dzookeeper.jmx.log4j.disable=true',
    '-Dorg.slf4j.simpleLogger.defaultLogLevel=warn',
    '-Dzookeeper.admin.enableServer=false',
    `-Dzookeeper.forceSync=${plan.forceSync ? 'yes' : 'no'}`,
    '-cp',
    plan.classpath,
    'org.apache.zookeeper.server.quorum.QuorumPeerMain',
    cfg,
  ];
}

/** Start server `i` (id i+1) in its own directory under `dir`. */
async function startZkServer(plan: ZkPlan, dir: string, i: number): Promise<ServerNode & { stop(): Promise<void> }> {
  const id = i + 1;
  const nodeDir = join(dir, `n${id}`);
  const dataDir = join(nodeDir, 'data');
  await mkdir(dataDir, { recursive: true });
  await writeFile(join(dataDir, 'myid'), `${id}\n`);
  const cfg = join(nodeDir, 'zoo.cfg');
  await writeFile(cfg, zooCfg(plan, i, dataDir));
  const logFile = join(nodeDir, 'server.log');
  const start = () => spawnServer('java', zkJavaArgs(plan, cfg), { logFile, cwd: nodeDir, ...(plan.env ? { env: plan.env } : {}) });
  return makeNode(`zk${id}`, plan.host, plan.clientPort(i), start);
}

/** Start every server and wait until each serves; on failure stop what started and remove `dir`. */
async function startZkServers(plan: ZkPlan, dir: string): Promise<(ServerNode & { stop(): Promise<void> })[]> {
  const nodes: (ServerNode & { stop(): Promise<void> })[] = [];
  try {
    for (let i = 0; i < plan.n; i++) nodes.push(await startZkServer(plan, dir, i));
    await waitFor(
      `ZooKeeper ${plan.n === 1 ? 'standalone' : `${plan.n}-node ensemble`} to serve`,
      async () => {
        for (const node of nodes) {
          const mode = await modeOf(node.host, node.port);
          if (mode === undefined) return false;
        }
        return true;
      },
      { timeoutMs: 120_000, intervalMs: 200 },
    );
    return nodes;
  } catch (err) {
    for (const node of nodes) await node.stop().catch(() => undefined);
    await removeDir(dir);
    throw err;
  }
}

/**
 * Install if needed, start `nodes` ZooKeeper servers on free loopback ports with fresh data
 * directories, and wait until every node serves (standalone, or leader/follower of a quorum).
 */
export async function startZooKeeper(opts: ZooKeeperServerOptions = {}): Promise<RunningZooKeeper> {
  await installZooKeeper();
  const n = opts.nodes ?? 3;
  const tick = opts.tickTimeMs ?? 200;
  const dir = await makeDataDir('zookeeper');
  const ports = await freePorts(n * 3);
  const plan: ZkPlan = {
    n,
    host: '127.0.0.1',
    tick,
    minSession: opts.minSessionTimeoutMs ?? 2 * tick,
    maxSession: opts.maxSessionTimeoutMs ?? 60_000,
    heap: opts.heap ?? '256m',
    forceSync: opts.forceSync ?? false,
    clientPort: (i) => ports[i * 3] as number,
    peerPort: (i) => ports[i * 3 + 1] as number,
    electionPort: (i) => ports[i * 3 + 2] as number,
    classpath: [ZK_JAR, join(JAVA_DIR, 'slf4j-simple.jar')].filter((p) => existsSync(p)).join(':'),
    ...(opts.clock ? { env: { ...process.env, ...opts.clock.env } } : {}),
  };
  const nodes = await startZkServers(plan, dir);
  const connectString = nodes.map((node) => `${node.host}:${node.port}`).join(',');
  const chroot = opts.chroot ?? '';
  let stopped = false;
  // A host list with ports is not a valid WHATWG URL authority; percent-encoding the colons
  // keeps it one (the backend decodes it), so `createLocker(url)` accepts it as is.
  const authority = connectString.replaceAll(':', '%3A');
  return {
    engine: 'zookeeper',
    url: `zookeeper://${authority}${chroot}`,
    connectString,
    nodes,
    mode: (node) => modeOf(node.host, node.port).catch(() => undefined),
    async stop() {
      if (stopped) return;
      stopped = true;
      for (const node of nodes) await node.stop().catch(() => undefined);
      await removeDir(dir);
    },
  };
}
