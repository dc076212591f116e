/**
 * MariaDB in the server harness: Debian's `mariadb-server` (installed when missing), a fresh
 * data directory from `mariadb-install-db` owned by the unprivileged `mysql` user (mariadbd
 * refuses to run as root), started with `--user=mysql` on a free loopback port, no binary
 * log, relaxed flushing. A database `locksmith` and a user `locksmith`/`secret` are created;
 * `url` (`mysql://…`) reaches them.
 *
 * `kill()` is SIGKILL (a crash: InnoDB recovers at the next start); `restart()` starts the
 * same data directory on the same port.
 */
import { execFile, type ChildProcess } from 'node:child_process';
import { join } from 'node:path';
import { promisify } from 'node:util';
import mysql from 'mysql2/promise';
import {
  aptInstall,
  freePort,
  killChild,
  makeDataDir,
  pauseProcess,
  removeDir,
  spawnServer,
  waitFor,
  type RunningServer,
  type ServerClock,
  type ServerNode,
} from './harness.js';

const execFileP = promisify(execFile);
const MARIADBD = '/usr/sbin/mariadbd';

/** Options of {@link startMariaDb}. */
export interface StartMariaDbOptions {
  /** Readiness bound in ms (default 120 000: a first run also installs the package). */
  readonly readyTimeoutMs?: number;
  /** Run the server on this clock (libfaketime). */
  readonly clock?: ServerClock;
}

/** A fresh data directory owned by the unprivileged `mysql` user (mariadbd refuses root). */
async function initMariaDbData(dir: string, data: string): Promise<void> {
  await execFileP('chown', ['-R', 'mysql:mysql', dir]);
  await execFileP(
    'mariadb-install-db',
    ['--no-defaults', `--datadir=${data}`, '--user=mysql', '--auth-root-authentication-method=normal', '--skip-test-db'],
    { maxBuffer: 16 << 20 },
  );
}

/** The command line of mariadbd on `port`, its files under `dir`. */
function mariaDbArgs(port: number, dir: string, data: string, socket: string): string[] {
  return [
    '--no-defaults',
    `--datadir=${data}`,
    '--user=mysql',
    `--port=${port}`,
    '--bind-address=127.0.0.1',
    `--socket=${socket}`,
    `--pid-file=${join(dir, 'mysqld.pid')}`,
    '--skip-name-resolve',
    '--skip-log-bin',
    '--innodb-flush-log-at-trx-commit=2',
    '--innodb-buffer-pool-size=64M',
    '--max-connections=600',
    `--log-error=${join(dir, 'error.log')}`,
  ];
}

/** The node of a server whose process is `proc.child`, and that `start()` starts again. */
function mariaDbNode(port: number, proc: { child: ChildProcess }, start: () => Promise<ChildProcess>): ServerNode {
  return {
    name: 'mariadb-0',
    host: '127.0.0.1',
    port,
    get pid() {
      return proc.child.pid ?? -1;
    },
    kill: () => killChild(proc.child, 'SIGKILL'),
    pause: () => pauseProcess(proc.child.pid),
    resume: () => {
      if (proc.child.pid !== undefined) process.kill(proc.child.pid, 'SIGCONT');
    },
    restart: async () => {
      await killChild(proc.child, 'SIGKILL');
      proc.child = await start();
    },
  };
}

/** Start one MariaDB server; `stop()` shuts it down and removes its directory. */
export async function startMariaDb(opts: StartMariaDbOptions = {}): Promise<RunningMariaDb> {
  await aptInstall(MARIADBD, ['mariadb-server']);
  const port = await freePort();
  const dir = await makeDataDir('mariadb');
  const data = join(dir, 'data');
  const socket = join(dir, 'mysqld.sock');
  await initMariaDbData(dir, data);
  const args = mariaDbArgs(port, dir, data, socket);
  const readyTimeoutMs = opts.readyTimeoutMs ?? 120_000;
  const start = async (): Promise<ChildProcess> => {
    const env = opts.clock ? { env: { ...process.env, ...opts.clock.env } } : {};
    const child = await spawnServer(MARIADBD, args, { logFile: join(dir, 'mariadbd.log'), cwd: dir, ...env });
    await waitFor(
      `mariadbd on port ${port}`,
      async () => {
        if (child.exitCode !== null) throw new Error(`mariadbd exited with ${child.exitCode}; see ${dir}/error.log`);
        await adminMariaDb(socket, ['SELECT 1']);
        return true;
      },
      { timeoutMs: readyTimeoutMs, intervalMs: 100 },
    );
    return child;
  };
  const proc = { child: await start() };
  await adminMariaDb(socket, [
    'CREATE DATABASE IF NOT EXISTS locksmith',
    "CREATE USER IF NOT EXISTS 'locksmith'@'%' IDENTIFIED BY 'secret'",
    "GRANT ALL ON locksmith.* TO 'locksmith'@'%'",
  ]);
  const node = mariaDbNode(port, proc, start);
  let stopped = false;
  return {
    engine: 'mariadb',
    url: `mysql://locksmith:secret@127.0.0.1:${port}/locksmith`,
    nodes: [node],
    socket,
    async stop() {
      if (stopped) return;
      stopped = true;
      await killChild(proc.child, 'SIGTERM', 20_000);
      await removeDir(dir);
    },
  };
}

/** A running MariaDB, with the socket superuser statements go through. */
export interface RunningMariaDb extends RunningServer {
  readonly nodes: readonly ServerNode[];
  /** The unix socket of the server, for {@link adminMariaDb}. */
  readonly socket: string;
}

/** Run statements as root over the unix socket (test set-up and fault injection). */
export async function adminMariaDb(socket: string, statements: readonly string[]): Promise<unknown[]> {
  const conn = await mysql.createConnection({ socketPath: socket, user: 'root', connectTimeout: 2_000 });
  try {
    let rows: unknown[] = [];
    for (const s of statements) {
      const [r] = await conn.query(s);
      rows = Array.isArray(r) ? r : [];
    }
    return rows;
  } finally {
    await conn.end();
  }
}
