/**
 * Redis in the server harness: installs Debian's `redis-server` when it is missing and
 * starts one instance on a free loopback port with no persistence (`--save "" --appendonly
 * no`), so a restart loses every key — exactly what a failover to an empty replica does.
 * With `tls: true` it listens for TLS only, with a throw-away self-signed certificate made
 * by `openssl` (Debian's redis-server is built with TLS).
 */
import { join } from 'node:path';
import { readFile } from 'node:fs/promises';
import { execFile, type ChildProcess } from 'node:child_process';
import { promisify } from 'node:util';
import { createConnection } from 'node:net';
import { connect as tlsConnect } from 'node:tls';
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
  /**
   * TLS only (`--port 0 --tls-port …`, clients not asked for certificates): the URL is
   * `rediss://127.0.0.1:<port>` and `caFile` the certificate a client must trust. Default false.
   */
  readonly tls?: boolean;
}

/** A started Redis: its nodes, and with `tls` the PEM file of its self-signed certificate. */
export type RunningRedis = RunningServer & { readonly nodes: readonly ServerNode[]; readonly caFile?: string };

/** The redis-server binary (it is also the Sentinel: `redis-server <conf> --sentinel`). */
export const REDIS_SERVER = '/usr/bin/redis-server';

/**
 * Send one inline command over a raw socket (TLS when `ca` is given); resolves with the
 * reply once `complete` says so (default: the first line).
 */
export function rawCommand(
  port: number,
  command: string,
  timeoutMs = 2_000,
  complete: (reply: string) => boolean = (r) => r.includes('\r\n'),
  ca?: Buffer,
): Promise<string> {
  return new Promise((resolve, reject) => {
    const sock = ca ? tlsConnect({ host: '127.0.0.1', port, ca, servername: 'localhost' }) : createConnection({ host: '127.0.0.1', port });
    let buf = '';
    const timer = setTimeout(() => {
      sock.destroy();
      reject(new Error(`no reply to ${command} within ${timeoutMs} ms`));
    }, timeoutMs);
    timer.unref();
    sock.on(ca ? 'secureConnect' : 'connect', () => sock.write(`${command}\r\n`));
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

/** A self-signed certificate for 127.0.0.1 and localhost in `dir`: cert.pem and key.pem. */
async function selfSignedCertificate(dir: string): Promise<{ cert: string; key: string }> {
  await aptInstall('openssl', ['openssl']);
  const cert = join(dir, 'cert.pem');
  const key = join(dir, 'key.pem');
  const subject = ['-subj', '/CN=localhost', '-addext', 'subjectAltName=IP:127.0.0.1,DNS:localhost'];
  await promisify(execFile)('openssl', [
    'req',
    '-x509',
    '-newkey',
    'rsa:2048',
    '-nodes',
    '-days',
    '2',
    '-keyout',
    key,
    '-out',
    cert,
    ...subject,
  ]);
  return { cert, key };
}

/** The command line of one redis-server on `port` with its data in `dir`. */
function redisArgs(opts: StartRedisOptions, port: number, dir: string, tls: { cert: string; key: string } | undefined): string[] {
  const listen = tls
    ? ['--port', '0', '--tls-port', String(port), '--tls-cert-file', tls.cert, '--tls-key-file', tls.key, '--tls-auth-clients', 'no']
    : ['--port', String(port)];
  const cluster = opts.cluster
    ? ['--cluster-enabled', 'yes', '--cluster-config-file', join(dir, 'nodes.conf'), '--cluster-announce-ip', '127.0.0.1']
    : [];
  const base = ['--bind', '127.0.0.1', '--save', '', '--appendonly', 'no', '--dir', dir, '--daemonize', 'no', '--protected-mode', 'no'];
  return [...listen, ...base, ...cluster, ...(opts.extraArgs ?? [])];
}

/** Wait until the server on `port` answers (and, for a cluster node, owns every slot). */
async function redisReady(child: ChildProcess, port: number, dir: string, opts: StartRedisOptions, ca: Buffer | undefined): Promise<void> {
  const timeoutMs = opts.readyTimeoutMs ?? 60_000;
  await waitFor(
    `redis-server on port ${port}`,
    async () => {
      if (child.exitCode !== null) throw new Error(`redis-server exited with ${child.exitCode}; see ${dir}/redis.log`);
      const reply = await rawCommand(port, 'PING', 2_000, undefined, ca);
      return reply.startsWith('+PONG') || reply.includes('NOAUTH');
    },
    { timeoutMs, intervalMs: 50 },
  );
  if (!opts.cluster) return;
  // A restarted node keeps its slots in nodes.conf; ADDSLOTSRANGE then answers an error we ignore.
  await rawCommand(port, 'CLUSTER ADDSLOTSRANGE 0 16383', 2_000, undefined, ca);
  await waitFor(
    `redis cluster state ok on port ${port}`,
    async () =>
      (await rawCommand(port, 'CLUSTER INFO', 2_000, (r) => r.includes('cluster_state:') && r.endsWith('\r\n'), ca)).includes(
        'cluster_state:ok',
      ),
    { timeoutMs, intervalMs: 50 },
  );
}

/** Start one Redis server for tests or benchmarks; `stop()` kills it and removes its directory. */
export async function startRedis(opts: StartRedisOptions = {}): Promise<RunningRedis> {
  await aptInstall(REDIS_SERVER, ['redis-server']);
  const port = await freePort();
  const dir = await makeDataDir('redis');
  const tls = opts.tls ? await selfSignedCertificate(dir) : undefined;
  const ca = tls ? await readFile(tls.cert) : undefined;
  const args = redisArgs(opts, port, dir, tls);
  const start = async (): Promise<ChildProcess> => {
    const child = await spawnServer(REDIS_SERVER, args, { logFile: join(dir, 'redis.log'), cwd: dir });
    await redisReady(child, port, dir, opts, ca);
    return child;
  };
  const node = await makeNode('redis-0', '127.0.0.1', port, start);
  let stopped = false;
  return {
    engine: 'redis',
    url: `${tls ? 'rediss' : 'redis'}://127.0.0.1:${port}`,
    nodes: [node],
    ...(tls ? { caFile: tls.cert } : {}),
    async stop() {
      if (stopped) return;
      stopped = true;
      await node.stop();
      await removeDir(dir);
    },
  };
}
