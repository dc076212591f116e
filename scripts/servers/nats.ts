/**
 * NATS in the server harness: Debian's `nats-server` (2.9) with JetStream, run directly, one
 * process per node, each with its own store directory and loopback client and cluster
 * ports. Three nodes form a JetStream cluster (Raft over the cluster routes); one node is a
 * plain single server. Readiness is the monitoring endpoint's `/healthz` (JetStream
 * included), asked on a third port per node.
 */
import { join } from 'node:path';
import { mkdir } from 'node:fs/promises';
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

/** Options of {@link startNats}. */
export interface NatsServerOptions {
  /** 1 or 3 nodes (default 1: the conformance suite; the engine tests use 3). */
  readonly nodes?: 1 | 3;
}

/** A running NATS server or cluster plus its monitoring ports. */
export interface RunningNats extends RunningServer {
  /** True when `node`'s `/healthz?js-enabled-only=true` answers ok. */
  healthy(node: ServerNode): Promise<boolean>;
}

const SERVER = '/usr/sbin/nats-server';

/** Install nats-server from Debian when missing. */
export async function installNats(): Promise<void> {
  await aptInstall(SERVER, ['nats-server']);
}

interface NatsPlan {
  readonly host: string;
  readonly client: (i: number) => number;
  readonly route: (i: number) => number;
  readonly monitor: (i: number) => number;
  readonly n: number;
}

/** The command line of node `i`, its store under `nodeDir`. */
function natsArgs(plan: NatsPlan, i: number, nodeDir: string): string[] {
  const args = [
    `--name=n${i + 1}`,
    `--addr=${plan.host}`,
    `--port=${plan.client(i)}`,
    `--http_port=${plan.monitor(i)}`,
    '--jetstream',
    `--store_dir=${join(nodeDir, 'store')}`,
  ];
  if (plan.n === 1) return args;
  const routes = Array.from({ length: plan.n }, (_, j) => j)
    .filter((j) => j !== i)
    .map((j) => `nats-route://${plan.host}:${plan.route(j)}`)
    .join(',');
  return [...args, `--cluster_name=locksmith`, `--cluster=nats://${plan.host}:${plan.route(i)}`, `--routes=${routes}`];
}

async function healthyAt(host: string, port: number): Promise<boolean> {
  try {
    const res = await fetch(`http://${host}:${port}/healthz`, { signal: AbortSignal.timeout(2_000) });
    return res.ok;
  } catch {
    return false;
  }
}

/**
 * Install if needed, start `nodes` nats-server processes with JetStream on free loopback
 * ports with fresh store directories, and wait until every node reports healthy (for a
 * cluster: JetStream's meta leader elected).
 */
export async function startNats(opts: NatsServerOptions = {}): Promise<RunningNats> {
  await installNats();
  const n = opts.nodes ?? 1;
  const host = '127.0.0.1';
  const dir = await makeDataDir('nats');
  const ports = await freePorts(n * 3);
  const plan: NatsPlan = {
    host,
    n,
    client: (i) => ports[i * 3] as number,
    route: (i) => ports[i * 3 + 1] as number,
    monitor: (i) => ports[i * 3 + 2] as number,
  };
  const monitorOf = new Map<string, number>();
  const nodes: (ServerNode & { stop(): Promise<void> })[] = [];
  try {
    for (let i = 0; i < n; i++) {
      const nodeDir = join(dir, `n${i + 1}`);
      await mkdir(nodeDir, { recursive: true });
      const start = () => spawnServer(SERVER, natsArgs(plan, i, nodeDir), { logFile: join(nodeDir, 'server.log'), cwd: nodeDir });
      const node = await makeNode(`n${i + 1}`, host, plan.client(i), start);
      monitorOf.set(node.name, plan.monitor(i));
      nodes.push(node);
    }
    await waitFor(
      `nats ${n}-node server to be healthy`,
      async () => (await Promise.all(nodes.map((_, i) => healthyAt(host, plan.monitor(i))))).every(Boolean),
      { timeoutMs: 60_000, intervalMs: 200 },
    );
  } catch (err) {
    for (const node of nodes) await node.stop().catch(() => undefined);
    await removeDir(dir);
    throw err;
  }
  let stopped = false;
  return {
    engine: 'nats',
    url: `nats://${nodes.map((node) => `${node.host}:${node.port}`).join(',')}`,
    nodes,
    healthy: (node) => healthyAt(node.host, monitorOf.get(node.name) ?? 0),
    async stop() {
      if (stopped) return;
      stopped = true;
      for (const node of nodes) await node.stop().catch(() => undefined);
      await removeDir(dir);
    },
  };
}
