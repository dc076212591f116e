/**
 * PostgreSQL in the server harness: Debian's `postgresql` (installed when missing), a fresh
 * cluster from `initdb` in a throw-away directory owned by the unprivileged `postgres` user
 * (the server refuses to run as root), started on a free loopback port with `setpriv` (which
 * execs, so the tracked pid is the postmaster's) and no fsync. A database `locksmith` owned by
 * the role `locksmith` (password `secret`) is created; `url` reaches it.
 *
 * `kill()` is an immediate shutdown (SIGQUIT: every backend dies, no checkpoint, crash
 * recovery at the next start), `restart()` starts the same cluster on the same port.
 */
import { execFile, type ChildProcess } from 'node:child_process';
import { readdirSync, existsSync } from 'node:fs';
import { writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { promisify } from 'node:util';
import pg from 'pg';
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

/** Options of {@link startPostgres}. */
export interface StartPostgresOptions {
  /** Readiness bound in ms (default 60 000: a first run also installs the package). */
  readonly readyTimeoutMs?: number;
  /** Extra `-c name=value` settings. */
  readonly settings?: Readonly<Record<string, string>>;
  /** Run the server (and every backend it forks) on this clock (libfaketime). */
  readonly clock?: ServerClock;
}

/** The newest installed server's bin directory (Debian: /usr/lib/postgresql/<major>/bin). */
function binDir(): string | undefined {
  const base = '/usr/lib/postgresql';
  if (!existsSync(base)) return undefined;
  const majors = readdirSync(base)
    .filter((d) => existsSync(join(base, d, 'bin', 'postgres')))
    .sort((a, b) => Number(b) - Number(a));
  return majors[0] === undefined ? undefined : join(base, majors[0], 'bin');
}

/** Run `cmd` as the postgres user. */
async function asPostgres(cmd: string, args: readonly string[]): Promise<void> {
  await execFileP('runuser', ['-u', 'postgres', '--', cmd, ...args], { maxBuffer: 16 << 20 });
}

/** The installed server's bin directory, installing Debian's package when none is. */
async function postgresBin(): Promise<string> {
  if (!binDir()) await aptInstall('/usr/lib/postgresql/15/bin/postgres', ['postgresql']);
  const bin = binDir();
  if (!bin) throw new Error('postgresql installed but no /usr/lib/postgresql/<major>/bin/postgres found');
  return bin;
}

/** The server's command line: its data directory and settings for a fast, throw-away test server. */
function postgresArgs(port: number, dir: string, data: string, extra: Record<string, string> | undefined): string[] {
  const settings: Record<string, string> = {
    listen_addresses: '127.0.0.1',
    port: String(port),
    unix_socket_directories: dir,
    // No fsync (only an OS crash could lose data), but commits stay synchronous: with
    // synchronous_commit=off a crash forgets the last commits, fencing tokens included.
    fsync: 'off',
    full_page_writes: 'off',
    max_connections: '400',
    shared_buffers: '32MB',
    ...(extra ?? {}),
  };
  return ['-D', data, ...Object.entries(settings).flatMap(([k, v]) => ['-c', `${k}=${v}`])];
}

/** Resolves once a client can run a query on `port` (rejects when the server exited). */
async function postgresReady(child: ChildProcess, port: number, dir: string, timeoutMs: number): Promise<void> {
  await waitFor(
    `postgres on port ${port}`,
    async () => {
      if (child.exitCode !== null) throw new Error(`postgres exited with ${child.exitCode}; see ${dir}/postgres.log`);
      const c = new pg.Client({ host: '127.0.0.1', port, user: 'postgres', database: 'postgres', connectionTimeoutMillis: 2_000 });
      c.on('error', () => undefined);
      await c.connect();
      await c.query('SELECT 1').finally(() => c.end());
      return true;
    },
    { timeoutMs, intervalMs: 100 },
  );
}

/** The node of a server whose process is `proc.child`, and that `start()` starts again. */
function postgresNode(port: number, proc: { child: ChildProcess }, start: () => Promise<ChildProcess>): ServerNode {
  return {
    name: 'postgres-0',
    host: '127.0.0.1',
    port,
    get pid() {
      return proc.child.pid ?? -1;
    },
    kill: () => killChild(proc.child, 'SIGQUIT', 10_000),
    pause: () => pauseProcess(proc.child.pid),
    resume: () => {
      if (proc.child.pid !== undefined) process.kill(proc.child.pid, 'SIGCONT');
    },
    restart: async () => {
      await killChild(proc.child, 'SIGQUIT', 10_000);
      proc.child = await start();
    },
  };
}

/** Start one PostgreSQL server; `stop()` shuts it down and removes its directory. */
export async function startPostgres(opts: StartPostgresOptions = {}): Promise<RunningServer & { readonly nodes: readonly ServerNode[] }> {
  const bin = await postgresBin();
  const port = await freePort();
  const dir = await makeDataDir('postgres');
  const data = join(dir, 'data');
  await execFileP('chown', ['-R', 'postgres:postgres', dir]);
  await asPostgres(join(bin, 'initdb'), ['-D', data, '-U', 'postgres', '--auth=trust', '-E', 'UTF8', '--no-sync', '--locale=C.UTF-8']);
  const args = postgresArgs(port, dir, data, opts.settings);
  const start = async (): Promise<ChildProcess> => {
    // The clock's variables through env(1), which execs: only the server runs libfaketime.
    const clock = Object.entries(opts.clock?.env ?? {}).map(([k, v]) => `${k}=${v}`);
    const server = [...(clock.length > 0 ? ['/usr/bin/env', ...clock] : []), join(bin, 'postgres'), ...args];
    const child = await spawnServer('setpriv', ['--reuid=postgres', '--regid=postgres', '--clear-groups', ...server], {
      logFile: join(dir, 'postgres.log'),
      cwd: dir,
    });
    await postgresReady(child, port, dir, opts.readyTimeoutMs ?? 60_000);
    return child;
  };
  const proc = { child: await start() };
  await admin(port, ["CREATE ROLE locksmith LOGIN PASSWORD 'secret'", 'CREATE DATABASE locksmith OWNER locksmith']);
  const node = postgresNode(port, proc, start);
  let stopped = false;
  return {
    engine: 'postgres',
    url: `postgres://locksmith:secret@127.0.0.1:${port}/locksmith`,
    nodes: [node],
    async stop() {
      if (stopped) return;
      stopped = true;
      // SIGINT: fast shutdown (ends the sessions, then exits).
      await killChild(proc.child, 'SIGINT', 10_000);
      await removeDir(dir);
    },
  };
}

/** Run statements as the superuser on database `postgres` (for test set-up and fault injection). */
export async function admin(port: number, statements: readonly string[], database = 'postgres'): Promise<pg.QueryResultRow[]> {
  const c = new pg.Client({ host: '127.0.0.1', port, user: 'postgres', database });
  c.on('error', () => undefined);
  await c.connect();
  try {
    let rows: pg.QueryResultRow[] = [];
    for (const s of statements) rows = (await c.query(s)).rows;
    return rows;
  } finally {
    await c.end();
  }
}

/** PgBouncer's configuration: transaction pooling of database `locksmith` on `targetPort`. */
async function writePgBouncerIni(dir: string, port: number, targetPort: number, poolSize: number): Promise<void> {
  await writeFile(
    join(dir, 'pgbouncer.ini'),
    [
      '[databases]',
      `locksmith = host=127.0.0.1 port=${targetPort} dbname=locksmith`,
      '[pgbouncer]',
      'listen_addr = 127.0.0.1',
      `listen_port = ${port}`,
      'unix_socket_dir =',
      'auth_type = trust',
      `auth_file = ${join(dir, 'userlist.txt')}`,
      'pool_mode = transaction',
      `default_pool_size = ${poolSize}`,
      'max_client_conn = 1000',
      `logfile = ${join(dir, 'pgbouncer.log')}`,
      'ignore_startup_parameters = extra_float_digits',
      '',
    ].join('\n'),
  );
}

/**
 * PgBouncer in transaction-pooling mode in front of a running PostgreSQL (Debian's
 * `pgbouncer`, installed when missing; run as the `postgres` user, it refuses root): every
 * transaction may land on another server connection, which breaks anything bound to a
 * session (advisory locks, LISTEN, session variables). `url` reaches database `locksmith`
 * through it as user `locksmith`.
 */
export async function startPgBouncer(server: RunningServer, poolSize = 3): Promise<RunningServer> {
  await aptInstall('/usr/sbin/pgbouncer', ['pgbouncer']);
  const target = server.nodes[0];
  if (!target) throw new Error('no postgres node to put pgbouncer in front of');
  const port = await freePort();
  const dir = await makeDataDir('pgbouncer');
  await writeFile(join(dir, 'userlist.txt'), '"locksmith" "secret"\n');
  await writePgBouncerIni(dir, port, target.port, poolSize);
  await execFileP('chown', ['-R', 'postgres:postgres', dir]);
  const child = await spawnServer(
    'setpriv',
    ['--reuid=postgres', '--regid=postgres', '--clear-groups', '/usr/sbin/pgbouncer', join(dir, 'pgbouncer.ini')],
    {
      logFile: join(dir, 'stdout.log'),
      cwd: dir,
    },
  );
  const url = `postgres://locksmith:secret@127.0.0.1:${port}/locksmith`;
  await waitFor(
    `pgbouncer on port ${port}`,
    async () => {
      if (child.exitCode !== null) throw new Error(`pgbouncer exited with ${child.exitCode}; see ${dir}/pgbouncer.log`);
      const c = new pg.Client({ connectionString: url, connectionTimeoutMillis: 2_000 });
      c.on('error', () => undefined);
      await c.connect();
      await c.query('SELECT 1').finally(() => c.end());
      return true;
    },
    { timeoutMs: 60_000, intervalMs: 100 },
  );
  let stopped = false;
  return {
    engine: 'pgbouncer',
    url,
    nodes: [],
    async stop() {
      if (stopped) return;
      stopped = true;
      await killChild(child, 'SIGINT', 5_000);
      await removeDir(dir);
    },
  };
}
