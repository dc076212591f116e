/**
 * Redis Sentinel in the server harness: one master (scripts/servers/redis.ts), optionally
 * one replica of it, and one Sentinel watching them (quorum 1), each on a free loopback port.
 * The Sentinel is `redis-server <conf> --sentinel` (the same binary Debian's
 * `redis-sentinel` package links to), with its config file in a throw-away directory
 * (Sentinel rewrites it). A killed master is declared down after one second and the
 * replica promoted.
 */
import { join } from 'node:path';
import { writeFile } from 'node:fs/promises';
import type { ChildProcess } from 'node:child_process';
import { freePort, makeDataDir, makeNode, removeDir, spawnServer, waitFor, type RunningServer, type ServerNode } from './harness.js';
import { rawCommand, REDIS_SERVER, startRedis, type RunningRedis } from './redis.js';

/** Options of {@link startRedisSentinel}. */
export interface StartRedisSentinelOptions {
  /** The master's name in Sentinel. @default 'mymaster' */
  readonly masterName?: string;
  /** Also start a replica of the master (for failover). @default false */
  readonly replica?: boolean;
  /** Readiness bound in ms. @default 60000 */
  readonly readyTimeoutMs?: number;
}

/** A running master (+ replica) and Sentinel; `url` is the `redis-sentinel://` URL. */
export interface RunningSentinel extends RunningServer {
  readonly masterName: string;
  readonly master: RunningRedis;
  readonly replica: RunningRedis | undefined;
  /** The Sentinel process. */
  readonly sentinel: ServerNode;
  /** The master's port as Sentinel reports it now (changes after a failover). */
  masterPort(): Promise<number>;
}

/** The master's port as the Sentinel on `port` reports it for `name`. */
async function reportedMaster(port: number, name: string): Promise<number> {
  const reply = await rawCommand(
    port,
    `SENTINEL get-master-addr-by-name ${name}`,
    2_000,
    (r) => /\r\n\d+\r\n$/.test(r) || r.startsWith('*-1'),
  );
  const m = /\$\d+\r\n(\d+)\r\n$/.exec(reply);
  if (!m?.[1]) throw new Error(`Sentinel does not know master ${name}: ${JSON.stringify(reply)}`);
  return Number(m[1]);
}

/** Write the Sentinel's configuration: it monitors `name` at `masterPort`, quorum 1, 1 s down-after. */
async function writeSentinelConf(dir: string, port: number, name: string, masterPort: number): Promise<string> {
  const conf = join(dir, 'sentinel.conf');
  const lines = [
    `port ${port}`,
    'bind 127.0.0.1',
    'protected-mode no',
    `dir ${dir}`,
    `sentinel monitor ${name} 127.0.0.1 ${masterPort} 1`,
    `sentinel down-after-milliseconds ${name} 1000`,
    `sentinel failover-timeout ${name} 10000`,
  ];
  await writeFile(conf, `${lines.join('\n')}\n`);
  return conf;
}

/**
 * Sentinel learns of the replica from the master's INFO (every 10 s at first); a failover
 * before that has nobody to promote, so wait until it knows.
 */
async function awaitReplicaKnown(port: number, name: string, replicaPort: string, timeoutMs: number): Promise<void> {
  const known = (r: string): boolean => r.includes(replicaPort) || r.startsWith('*0');
  await waitFor(
    'the sentinel to know the replica',
    async () => (await rawCommand(port, `SENTINEL replicas ${name}`, 2_000, known)).includes(replicaPort),
    { timeoutMs, intervalMs: 100 },
  );
}

/** Start a master, an optional replica and one Sentinel; `stop()` stops them all. */
export async function startRedisSentinel(opts: StartRedisSentinelOptions = {}): Promise<RunningSentinel> {
  const name = opts.masterName ?? 'mymaster';
  const readyTimeoutMs = opts.readyTimeoutMs ?? 60_000;
  const master = await startRedis({ readyTimeoutMs });
  const masterPort = master.nodes[0]?.port ?? 0;
  const replica = opts.replica
    ? await startRedis({ readyTimeoutMs, extraArgs: ['--replicaof', '127.0.0.1', String(masterPort)] })
    : undefined;
  const port = await freePort();
  const dir = await makeDataDir('redis-sentinel');
  const conf = await writeSentinelConf(dir, port, name, masterPort);
  const reported = (): Promise<number> => reportedMaster(port, name);
  const start = async (): Promise<ChildProcess> => {
    const child = await spawnServer(REDIS_SERVER, [conf, '--sentinel'], { logFile: join(dir, 'sentinel.log'), cwd: dir });
    await waitFor(`redis sentinel on port ${port}`, async () => (await reported()) === masterPort || child.exitCode !== null, {
      timeoutMs: readyTimeoutMs,
      intervalMs: 50,
    });
    if (child.exitCode !== null) throw new Error(`redis sentinel exited with ${child.exitCode}; see ${dir}/sentinel.log`);
    return child;
  };
  const sentinel = await makeNode('sentinel-0', '127.0.0.1', port, start);
  if (replica) await awaitReplicaKnown(port, name, String(replica.nodes[0]?.port), readyTimeoutMs);
  let stopped = false;
  return {
    engine: 'redis-sentinel',
    url: `redis-sentinel://127.0.0.1:${port}/${name}`,
    nodes: [...master.nodes, ...(replica?.nodes ?? []), sentinel],
    masterName: name,
    master,
    replica,
    sentinel,
    masterPort: reported,
    async stop() {
      if (stopped) return;
      stopped = true;
      await sentinel.stop();
      await Promise.all([master.stop(), replica?.stop()]);
      await removeDir(dir);
    },
  };
}
