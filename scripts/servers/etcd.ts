/**
 * etcd in the server harness: Debian's `etcd-server` (etcd 3.4, the v3 gRPC API the `etcd3`
 * client speaks) run directly, one process per member, each with its own data directory
 * and loopback client and peer ports. Three members form a cluster (the tests' default).
 * Debian's `etcd-client` brings `etcdctl` for the interoperability tests (`etcdctl lock`).
 *
 * Debian's systemd unit is not used: it assumes one system-wide member on port 2379.
 */
import { join } from 'node:path';
import { mkdir, mkdtemp } from 'node:fs/promises';
import {
  aptInstall,
  freePorts,
  makeDataDir,
  makeNode,
  removeDir,
  spawnServer,
  waitFor,
  type RunningServer,
  type ServerNode,
} from './harness.js';

/** Options of {@link startEtcd}. */
export interface EtcdServerOptions {
  /** 1 or 3 members (default 3). */
  readonly nodes?: 1 | 3;
  /** Raft heartbeat (ms, default 100, etcd's default). */
  readonly heartbeatMs?: number;
  /** Raft election timeout (ms, default 1000, etcd's default). */
  readonly electionTimeoutMs?: number;
  /**
   * Keep the data directories on tmpfs (`/dev/shm`), where etcd's fsync of every write costs
   * nothing: a like-for-like comparison with engines run without fsync (the harness's
   * ZooKeeper runs with `forceSync=no`). Default false: etcd as deployed, fsync on disk.
   */
  readonly memory?: boolean;
}

/** A running etcd cluster plus what the etcd tests need beyond {@link RunningServer}. */
export interface RunningEtcd extends RunningServer {
  /** `http://127.0.0.1:p1,http://127.0.0.1:p2,…`: the client endpoints, for `etcdctl --endpoints`. */
  readonly endpoints: string;
  /** The member that leads now (asked through the maintenance status API), if any. */
  leader(): Promise<ServerNode | undefined>;
  /** True when `node` answers its health check. */
  healthy(node: ServerNode): Promise<boolean>;
}

/** Install etcd and etcdctl from Debian when missing. */
export async function installEtcd(): Promise<void> {
  await aptInstall('etcd', ['etcd-server']);
  await aptInstall('etcdctl', ['etcd-client']);
}

/** POST to a member's gRPC gateway (JSON), bounded. */
async function gateway(node: ServerNode, path: string, timeoutMs = 2_000): Promise<unknown> {
  const res = await fetch(`http://${node.host}:${node.port}${path}`, {
    method: 'POST',
    body: '{}',
    signal: AbortSignal.timeout(timeoutMs),
  });
  if (!res.ok) throw new Error(`${path} answered ${res.status}`);
  return res.json();
}

async function healthy(node: ServerNode): Promise<boolean> {
  try {
    const res = await fetch(`http://${node.host}:${node.port}/health`, { signal: AbortSignal.timeout(2_000) });
    const body = (await res.json()) as { health?: unknown };
    return body.health === 'true' || body.health === true;
  } catch {
    return false;
  }
}

/** The member id a member reports for itself and for its leader. */
async function statusOf(node: ServerNode): Promise<{ self: string; leader: string } | undefined> {
  try {
    const s = (await gateway(node, '/v3/maintenance/status')) as { header?: { member_id?: string }; leader?: string };
    if (!s.header?.member_id || !s.leader) return undefined;
    return { self: s.header.member_id, leader: s.leader };
  } catch {
    return undefined;
  }
}

/** Where each member listens: its client and peer ports, and the initial cluster they form. */
interface EtcdPlan {
  readonly host: string;
  readonly clientPort: (i: number) => number;
  readonly peerPort: (i: number) => number;
  readonly cluster: string;
  /** One token for the whole cluster: members with different tokens refuse each other. */
  readonly token: string;
}

/** The command line of member `i` (named `name`, its data under `nodeDir`). */
function etcdArgs(plan: EtcdPlan, i: number, name: string, nodeDir: string, opts: EtcdServerOptions): string[] {
  const { host, clientPort, peerPort } = plan;
  return [
    `--name=${name}`,
    `--data-dir=${join(nodeDir, 'data')}`,
    `--listen-client-urls=http://${host}:${clientPort(i)}`,
    `--advertise-client-urls=http://${host}:${clientPort(i)}`,
    `--listen-peer-urls=http://${host}:${peerPort(i)}`,
    `--initial-advertise-peer-urls=http://${host}:${peerPort(i)}`,
    `--initial-cluster=${plan.cluster}`,
    `--initial-cluster-token=${plan.token}`,
    '--initial-cluster-state=new',
    `--heartbeat-interval=${opts.heartbeatMs ?? 100}`,
    `--election-timeout=${opts.electionTimeoutMs ?? 1000}`,
    '--logger=zap',
    '--log-level=warn',
    '--snapshot-count=100000',
  ];
}

/** Start every member and wait until all are healthy; on failure stop what started and remove `dir`. */
async function startMembers(
  n: number,
  dir: string,
  plan: EtcdPlan,
  opts: EtcdServerOptions,
): Promise<(ServerNode & { stop(): Promise<void> })[]> {
  const nodes: (ServerNode & { stop(): Promise<void> })[] = [];
  try {
    for (let i = 0; i < n; i++) {
      const name = `e${i + 1}`;
      const nodeDir = join(dir, name);
      await mkdir(nodeDir, { recursive: true });
      const args = etcdArgs(plan, i, name, nodeDir, opts);
      const start = () => spawnServer('etcd', args, { logFile: join(nodeDir, 'server.log'), cwd: nodeDir });
      nodes.push(await makeNode(name, plan.host, plan.clientPort(i), start));
    }
    await waitFor(`etcd ${n}-member cluster to be healthy`, async () => (await Promise.all(nodes.map(healthy))).every(Boolean), {
      timeoutMs: 60_000,
      intervalMs: 200,
    });
    return nodes;
  } catch (err) {
    for (const node of nodes) await node.stop().catch(() => undefined);
    await removeDir(dir);
    throw err;
  }
}

/** The member the others follow, undefined while there is none. */
async function leaderOf(nodes: readonly ServerNode[]): Promise<ServerNode | undefined> {
  for (const node of nodes) {
    const s = await statusOf(node);
    if (!s) continue;
    for (const other of nodes) {
      if ((await statusOf(other))?.self === s.leader) return other;
    }
  }
  return undefined;
}

/**
 * Install if needed, start `nodes` etcd members on free loopback ports with fresh data
 * directories, and wait until every member is healthy (a leader elected, a quorum serving).
 */
export async function startEtcd(opts: EtcdServerOptions = {}): Promise<RunningEtcd> {
  await installEtcd();
  const n = opts.nodes ?? 3;
  const host = '127.0.0.1';
  const dir = opts.memory ? await mkdtemp(join('/dev/shm', 'locksmith-etcd-')) : await makeDataDir('etcd');
  const ports = await freePorts(n * 2);
  const peerPort = (i: number): number => ports[i * 2 + 1] as number;
  const plan: EtcdPlan = {
    host,
    clientPort: (i) => ports[i * 2] as number,
    peerPort,
    cluster: Array.from({ length: n }, (_, i) => `e${i + 1}=http://${host}:${peerPort(i)}`).join(','),
    token: `locksmith-${process.pid}-${Date.now()}`,
  };
  const nodes = await startMembers(n, dir, plan, opts);
  let stopped = false;
  return {
    engine: 'etcd',
    url: `etcd://${nodes.map((node) => `${node.host}:${node.port}`).join(',')}`,
    endpoints: nodes.map((node) => `http://${node.host}:${node.port}`).join(','),
    nodes,
    healthy,
    leader: () => leaderOf(nodes),
    async stop() {
      if (stopped) return;
      stopped = true;
      for (const node of nodes) await node.stop().catch(() => undefined);
      await removeDir(dir);
    },
  };
}
