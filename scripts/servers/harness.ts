/**
 * The server harness: one uniform way to install, start on free loopback ports, wait for,
 * pause, kill and stop a real engine. Tests and benchmarks use it; nothing here is mocked.
 *
 * Each engine has a module `scripts/servers/<engine>.ts` that exports
 * `start<Engine>(opts): Promise<RunningServer>` built from these helpers. Installation is
 * part of starting (idempotent: apt-get / mvn only when the binary or jars are missing), so
 * a fresh machine needs nothing done by hand.
 *
 * Every process started here is tracked and killed when the Node process exits, so a
 * crashed test run does not leave servers behind.
 */
import { spawn, execFile, type ChildProcess } from 'node:child_process';
import { createServer } from 'node:net';
import { mkdtemp, mkdir, rm, open, chmod } from 'node:fs/promises';
import { existsSync, readFileSync, readdirSync, renameSync, writeFileSync } from 'node:fs';
import { performance } from 'node:perf_hooks';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { setTimeout as sleep } from 'node:timers/promises';

const execFileP = promisify(execFile);

/** One server process of a running engine (a cluster has several). */
export interface ServerNode {
  readonly name: string;
  readonly host: string;
  readonly port: number;
  /** The OS process id (for SIGSTOP / SIGCONT / SIGKILL in fault tests). */
  readonly pid: number;
  /** SIGKILL the process and wait until it is gone. */
  kill(): Promise<void>;
  /**
   * SIGSTOP: the process stays alive but answers nothing (a GC pause, a hung VM). Returns
   * once every thread of the process has stopped (see {@link waitUntilStopped}).
   */
  pause(): void;
  /** SIGCONT after `pause()`. */
  resume(): void;
  /** Start the same node again (same ports, same data directory) after `kill()`. */
  restart(): Promise<void>;
}

/** A running engine: its backend URL, its nodes, and how to stop it all. */
export interface RunningServer {
  readonly engine: string;
  /** The locksmith backend URL that reaches this engine, e.g. `redis://127.0.0.1:40123`. */
  readonly url: string;
  readonly nodes: readonly ServerNode[];
  /** Stop every node and remove the data directory. Idempotent. */
  stop(): Promise<void>;
}

const tracked = new Set<ChildProcess>();
let exitHookInstalled = false;
function installExitHook(): void {
  if (exitHookInstalled) return;
  exitHookInstalled = true;
  process.on('exit', () => {
    for (const child of tracked) {
      try {
        if (child.pid !== undefined) process.kill(child.pid, 'SIGCONT');
        child.kill('SIGKILL');
      } catch {
        /* already gone */
      }
    }
  });
}

/** A free TCP port on 127.0.0.1 (the OS picks; a tiny race with other processes is accepted). */
export async function freePort(host = '127.0.0.1'): Promise<number> {
  return new Promise((resolve, reject) => {
    const srv = createServer();
    srv.unref();
    srv.on('error', reject);
    srv.listen(0, host, () => {
      const addr = srv.address();
      const port = typeof addr === 'object' && addr !== null ? addr.port : 0;
      srv.close(() => resolve(port));
    });
  });
}

/** Several distinct free ports. */
export async function freePorts(n: number, host = '127.0.0.1'): Promise<number[]> {
  const out = new Set<number>();
  while (out.size < n) out.add(await freePort(host));
  return [...out];
}

/** Poll `check` until it returns true or `timeoutMs` passes (then throw, naming `what`). */
export async function waitFor(
  what: string,
  check: () => Promise<boolean>,
  { timeoutMs = 60_000, intervalMs = 100 }: { timeoutMs?: number; intervalMs?: number } = {},
): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  let last: unknown;
  for (;;) {
    try {
      if (await check()) return;
    } catch (err) {
      last = err;
    }
    if (Date.now() > deadline) {
      throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`, { cause: last });
    }
    await sleep(intervalMs);
  }
}

/** Is an executable on PATH (or at an absolute path)? */
export async function hasCommand(cmd: string): Promise<boolean> {
  if (cmd.startsWith('/')) return existsSync(cmd);
  try {
    await execFileP('sh', ['-c', `command -v ${cmd}`]);
    return true;
  } catch {
    return false;
  }
}

let aptUpdated = false;
/**
 * Install Debian packages unless `probe` (a command name or absolute path) already exists.
 * Waits for the dpkg lock instead of failing when another install runs.
 */
export async function aptInstall(probe: string, packages: readonly string[]): Promise<void> {
  if (await hasCommand(probe)) return;
  const env = { ...process.env, DEBIAN_FRONTEND: 'noninteractive' };
  const lock = ['-o', 'DPkg::Lock::Timeout=600'];
  if (!aptUpdated) {
    await execFileP('apt-get', [...lock, 'update', '-qq'], { env, maxBuffer: 64 << 20 });
    aptUpdated = true;
  }
  await execFileP('apt-get', [...lock, 'install', '-y', '-qq', '--no-install-recommends', ...packages], {
    env,
    maxBuffer: 64 << 20,
  });
  if (!(await hasCommand(probe))) throw new Error(`installed ${packages.join(' ')} but ${probe} is still missing`);
}

/** A fresh temporary directory for one engine's data and logs. */
export async function makeDataDir(engine: string): Promise<string> {
  const base = join(tmpdir(), 'locksmith-servers');
  await mkdir(base, { recursive: true });
  return mkdtemp(join(base, `${engine}-`));
}

export async function removeDir(dir: string): Promise<void> {
  await rm(dir, { recursive: true, force: true });
}

/** Options of {@link spawnServer}. */
export interface SpawnOptions {
  readonly cwd?: string;
  readonly env?: NodeJS.ProcessEnv;
  /** stdout and stderr go to this file (appended). */
  readonly logFile: string;
  /** Run as this user (via `runuser`), e.g. `postgres`. */
  readonly user?: string;
}

/** Start a long-running server process, tracked for cleanup at exit. */
export async function spawnServer(cmd: string, args: readonly string[], opts: SpawnOptions): Promise<ChildProcess> {
  installExitHook();
  const log = await open(opts.logFile, 'a');
  const [file, argv] = opts.user ? ['runuser', ['-u', opts.user, '--', cmd, ...args]] : [cmd, [...args]];
  const child = spawn(file, argv, {
    cwd: opts.cwd,
    env: opts.env ?? process.env,
    stdio: ['ignore', log.fd, log.fd],
    detached: false,
  });
  tracked.add(child);
  child.once('exit', () => {
    tracked.delete(child);
    void log.close();
  });
  child.once('error', () => {
    tracked.delete(child);
  });
  return child;
}

/** SIGKILL a child (resuming it first if paused) and wait for its exit. */
export async function killChild(child: ChildProcess, signal: NodeJS.Signals = 'SIGKILL', graceMs = 20_000): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return;
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  try {
    if (child.pid !== undefined) process.kill(child.pid, 'SIGCONT');
  } catch {
    /* gone */
  }
  child.kill(signal);
  if (signal !== 'SIGKILL') {
    const timer = setTimeout(() => child.kill('SIGKILL'), graceMs);
    timer.unref();
    await exited;
    clearTimeout(timer);
    return;
  }
  await exited;
}

/** Whether one thread's `/proc/<pid>/task/<tid>/stat` says it runs no more: stopped, traced, or exiting. */
function threadHalted(stat: string): boolean {
  // The state follows the command name, which is in parentheses and may itself hold any character.
  const state = stat.charAt(stat.lastIndexOf(')') + 2);
  return state === 'T' || state === 't' || state === 'Z' || state === 'X';
}

/**
 * Block until every thread of `pid` has stopped. `kill(SIGSTOP)` returns once the signal is
 * queued, not once the process stopped: one of its threads must first be scheduled to start
 * the group stop, and until then the others run on. A multi-threaded server (the JVM) was
 * seen to read, commit and answer a request sent right after `kill` returned, so a test that
 * pauses a server and at once expects silence from it must wait for the stop. Reads /proc
 * (Linux); where there is none, or the process is gone, there is nothing to wait for.
 */
export function waitUntilStopped(pid: number, timeoutMs = 10_000): void {
  const tick = new Int32Array(new SharedArrayBuffer(4));
  const deadline = performance.now() + timeoutMs;
  for (;;) {
    let tasks: string[];
    try {
      tasks = readdirSync(`/proc/${pid}/task`);
    } catch {
      return;
    }
    const running = tasks.filter((tid) => {
      try {
        return !threadHalted(readFileSync(`/proc/${pid}/task/${tid}/stat`, 'utf8'));
      } catch {
        return false; // the thread exited meanwhile
      }
    });
    if (running.length === 0) return;
    if (performance.now() > deadline)
      throw new Error(`process ${pid}: ${running.length} thread(s) still running ${timeoutMs} ms after SIGSTOP`);
    // Sleep 1 ms without spinning: the threads we wait for need the CPU to stop.
    Atomics.wait(tick, 0, 0, 1);
  }
}

/** SIGSTOP `pid` and return once it has stopped ({@link waitUntilStopped}); nothing for an unspawned child. */
export function pauseProcess(pid: number | undefined): void {
  if (pid === undefined) return;
  process.kill(pid, 'SIGSTOP');
  waitUntilStopped(pid);
}

/**
 * Build a {@link ServerNode} around a start function: `start()` spawns the process (same
 * ports and data directory every time) and resolves once it is ready.
 */
export async function makeNode(
  name: string,
  host: string,
  port: number,
  start: () => Promise<ChildProcess>,
): Promise<ServerNode & { stop(): Promise<void> }> {
  let child = await start();
  return {
    name,
    host,
    port,
    get pid() {
      return child.pid ?? -1;
    },
    async kill() {
      await killChild(child, 'SIGKILL');
    },
    pause() {
      pauseProcess(child.pid);
    },
    resume() {
      if (child.pid !== undefined) process.kill(child.pid, 'SIGCONT');
    },
    async restart() {
      await killChild(child, 'SIGKILL');
      child = await start();
    },
    async stop() {
      await killChild(child, 'SIGTERM');
    },
  };
}

/** libfaketime's preload library (Debian `faketime`, installed when missing). */
export async function faketimeLibrary(): Promise<string> {
  await aptInstall('faketime', ['faketime']);
  for (const lib of readdirSync('/usr/lib').map((d) => join('/usr/lib', d, 'faketime', 'libfaketime.so.1'))) {
    if (existsSync(lib)) return lib;
  }
  throw new Error('libfaketime.so.1 not found after installing faketime');
}

/**
 * A server's own clock under libfaketime: start the server with `env` (its process, and the
 * processes it forks, then read time through the preloaded library), then step the clock.
 * Works for servers that read time through libc (PostgreSQL, MariaDB, the JVM); Go binaries
 * (etcd, nats-server) read it through the vDSO and Debian's redis-server aborts at start
 * (docs/guarantees.md, "When a server's clock jumps").
 */
export interface ServerClock {
  /**
   * Variables to start the server with (LD_PRELOAD and libfaketime's settings). Set them on
   * the server itself, not on a wrapper that changes user (setpriv, runuser): libfaketime in
   * the wrapper makes a semaphore as root that the server cannot open, and it exits.
   */
  readonly env: Readonly<Record<string, string>>;
  /** How far the server's clock is ahead of the machine's, in ms. */
  readonly offsetMs: number;
  /** Step the server's clock by `ms` (forward when positive); seen by its next clock read. */
  jump(ms: number): void;
  /** Remove the clock's file. */
  close(): Promise<void>;
}

/** Options of {@link startServerClock}. */
export interface ServerClockOptions {
  /**
   * Also step the monotonic clock (a fast oscillator moves both; an NTP step moves only the
   * wall clock). @default false
   */
  readonly fakeMonotonic?: boolean;
  /**
   * How long libfaketime may keep the offset before reading the file again, in whole
   * seconds. @default none: every clock read reads the file
   */
  readonly cacheSeconds?: number;
}

/** A {@link ServerClock} at offset 0, for one server (or one ensemble sharing it). */
export async function startServerClock(opts: ServerClockOptions = {}): Promise<ServerClock> {
  const library = await faketimeLibrary();
  const dir = await makeDataDir('clock');
  // Servers drop to their own users (postgres, mysql): they must be able to read the file.
  await chmod(dir, 0o755);
  const file = join(dir, 'offset');
  let offsetMs = 0;
  const write = (): void => {
    // Written aside and renamed: a server reading a half-written file would fall back to the
    // real time, a step backwards.
    writeFileSync(`${file}.next`, `${offsetMs >= 0 ? '+' : '-'}${(Math.abs(offsetMs) / 1000).toFixed(3)}s\n`, { mode: 0o644 });
    renameSync(`${file}.next`, file);
  };
  write();
  return {
    env: {
      LD_PRELOAD: library,
      FAKETIME_TIMESTAMP_FILE: file,
      // Read on every call: a step is seen at once, not after libfaketime's 10 s cache. A
      // JVM reads the clock so often that this costs it a core: it takes a 1 s cache instead.
      ...(opts.cacheSeconds === undefined ? { FAKETIME_NO_CACHE: '1' } : { FAKETIME_CACHE_DURATION: String(opts.cacheSeconds) }),
      ...(opts.fakeMonotonic === true ? {} : { FAKETIME_DONT_FAKE_MONOTONIC: '1' }),
    },
    get offsetMs() {
      return offsetMs;
    },
    jump(ms) {
      offsetMs += ms;
      write();
    },
    close: () => removeDir(dir),
  };
}
