/**
 * Redis in the server harness: installs Debian's `redis-server` when it is missing and
 * starts one instance on a free loopback port with no persistence (`--save "" --appendonly
 * no`), so a restart loses every key — exactly what a failover to an empty replica does.
 */
import { join } from 'node:path';
import { createConnection } from 'node:net';
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

/** Options of {@link startRedis}. */
export interface StartRedisOptions {
  /** Readiness bound in ms (default 60 000: a first run also installs the package). */
  readonly readyTimeoutMs?: number;
  /** Extra `redis-server` arguments, e.g. `['--requirepass', 'secret']`. */
  readonly extraArgs?: readonly string[];
  /**
   * Start a one-node Redis Cluster (cluster mode on, every slot assigned to this node), so
   * a Cluster client and cross-slot checks are real. Default false.
   */
  readonly cluster?: boolean;
}

const REDIS_SERVER = '/usr/bin/redis-server';

/** Send one inline command over a raw socket; resolves with the reply once `complete` says so (default: the first line). */
function rawCommand(
  port: number,
  command: string,
  timeoutMs = 2_000,
  complete: (reply: string) => boolean = (r) => r.includes('\r\n'),
): Promise<string> {
  return new Promise((resolve, reject) => {
    const sock = createConnection({ host: '127.0.0.1', port });
    let buf = '';
    const timer = setTimeout(() => {
      sock.destroy();
      reject(new Error(`no reply to ${command} within ${timeoutMs} ms`));
    }, timeoutMs);
    timer.unref();
    sock.on('connect', () => sock.write(`${command}\r\n`));
    sock.on('data', (d) => {
      buf += d.toString('utf8');
      if (complete(buf)) {
        clearTimeout(timer);
        sock.destroy();
        resolve(buf);
      }
    });
    sock.on('error', (err) => {
      clearTimeout(timer);
      reject(err);
    });
  });
}

/** Start one Redis server for tests or benchmarks; `stop()` kills it and removes its directory. */
export async function startRedis(opts: StartRedisOptions = {}): Promise<RunningServer & { readonly nodes: readonly ServerNode[] }> {
  await aptInstall(REDIS_SERVER, ['redis-server']);
  const port = await freePort();
  const dir = await makeDataDir('redis');
  const readyTimeoutMs = opts.readyTimeoutMs ?? 60_000;
  const args = [
    '--port',
    String(port),
    '--bind',
    '127.0.0.1',
    '--save',
    '',
    '--appendonly',
    'no',
    '--dir',
    dir,
    '--daemonize',
    'no',
    '--protected-mode',
    'no',
    ...(opts.cluster
      ? ['--cluster-enabled', 'yes', '--cluster-config-file', join(dir, 'nodes.conf'), '--cluster-announce-ip', '127.0.0.1']
      : []),
    ...(opts.extraArgs ?? []),
  ];
  const start = async () => {
    const child = await spawnServer(REDIS_SERVER, args, { logFile: join(dir, 'redis.log'), cwd: dir });
    await waitFor(
      `redis-server on port ${port}`,
      async () => {
        if (child.exitCode !== null) throw new Error(`redis-server exited with ${child.exitCode}; see ${dir}/redis.log`);
        const reply = await rawCommand(port, 'PING');
        return reply.startsWith('+PONG') || reply.includes('NOAUTH');
      },
      { timeoutMs: readyTimeoutMs, intervalMs: 50 },
    );
    if (opts.cluster) {
      // A restarted node keeps its slots in nodes.conf; ADDSLOTSRANGE then answers an error we ignore.
      await rawCommand(port, 'CLUSTER ADDSLOTSRANGE 0 16383');
      await waitFor(
        `redis cluster state ok on port ${port}`,
        async () =>
          (await rawCommand(port, 'CLUSTER INFO', 2_000, (r) => r.includes('cluster_state:') && r.endsWith('\r\n'))).includes(
            'cluster_state:ok',
          ),
        { timeoutMs: readyTimeoutMs, intervalMs: 50 },
      );
    }
    return child;
  };
  const node = await makeNode('redis-0', '127.0.0.1', port, start);
  let stopped = false;
  return {
    engine: 'redis',
    url: `redis://127.0.0.1:${port}`,
    nodes: [node],
    async stop() {
      if (stopped) return;
      stopped = true;
      await node.stop();
      await removeDir(dir);
    },
  };
}
