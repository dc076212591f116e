/**
 * `locksmith run <lockId> cmd args…`: run a command while holding the lock (like
 * `flock`, `etcdctl lock`, `consul lock`). The child gets `LOCKSMITH_TOKEN`,
 * `LOCKSMITH_LOCK_ID` and `LOCKSMITH_OWNER`; signals sent to locksmith are forwarded to it;
 * if the lock is lost it is stopped (SIGTERM, then SIGKILL after a grace period); where the
 * OS allows it dies with a killed locksmith (deathsig.ts). A SIGINT or SIGTERM while still
 * waiting abandons the wait (its queue entry goes) and exits 130/143.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { hostname } from 'node:os';
import { randomBytes } from 'node:crypto';
import type { EventEmitter } from 'node:events';
import { LockTimeoutError, type Locker } from '../index.js';
import { diesWithParent } from './deathsig.js';
import { EXIT, signalStatus } from './exit.js';

/** Signals forwarded to the child while it runs. */
const FORWARDED: readonly NodeJS.Signals[] = ['SIGINT', 'SIGTERM', 'SIGHUP', 'SIGQUIT', 'SIGUSR1', 'SIGUSR2'];
/** Signals that end a wait. */
const INTERRUPTS: readonly NodeJS.Signals[] = ['SIGINT', 'SIGTERM', 'SIGHUP'];

/** What kind of hold `run` takes. */
export type RunHold = { readonly kind: 'mutex' } | { readonly kind: 'read' } | { readonly kind: 'semaphore'; readonly permits: number };

/**
 * What `run` tells the user: `wait` the progress lines while it waits, `info` what -v adds,
 * `conflict` why the lock was not obtained, `error` what went wrong with the command.
 */
export type Say = (kind: 'wait' | 'info' | 'conflict' | 'error', line: string) => void;

/** Options of {@link runWithLock}. */
export interface RunOptions {
  readonly lockId: string;
  readonly command: readonly string[];
  readonly hold?: RunHold;
  readonly ttlMs: number;
  /** undefined: wait forever; 0: one attempt. */
  readonly waitMs: number | undefined;
  readonly fair: boolean;
  readonly graceMs: number;
  /** Holder id; default `host:pid:random` so that `status` can say who holds. */
  readonly owner?: string;
  /** Exit status when the lock is not obtained. @default 1 (as flock) */
  readonly conflictExitCode?: number;
  readonly say: Say;
  /** Where signals come from (default `process`; tests pass their own emitter). */
  readonly signals?: EventEmitter;
}

/** A holder id that names this process: `host:pid:random`. */
export function processOwner(): string {
  return `${hostname()}:${process.pid}:${randomBytes(6).toString('base64url')}`;
}

/** Listen for `signals` on `source` until the returned function is called. */
function onSignals(source: EventEmitter, signals: readonly NodeJS.Signals[], handler: (sig: NodeJS.Signals) => void): () => void {
  const handlers = signals.map((sig) => [sig, () => handler(sig)] as const);
  for (const [sig, h] of handlers) source.on(sig, h);
  return () => {
    for (const [sig, h] of handlers) source.off(sig, h);
  };
}

/** What `run` holds while the command runs: a library lock, or a service hold (run-server.ts). */
export interface RunHandle {
  readonly token: bigint;
  readonly lockId: string;
  readonly ownerId: string;
  /** Aborted when the hold is lost: the command is stopped. */
  readonly signal: AbortSignal;
  release(): Promise<unknown>;
}

/** Obtains the hold `o` asks for; rejects with the signal's reason when it aborts, `LockTimeoutError` when not obtained in time. */
export type Acquirer = (o: RunOptions, signal: AbortSignal) => Promise<RunHandle>;

/** The library's acquire over `locker`. */
function lockerAcquirer(locker: Locker): Acquirer {
  return async (o, signal) => {
    const options = { ttlMs: o.ttlMs, fair: o.fair, owner: o.owner ?? processOwner(), signal };
    const wait = o.waitMs === undefined ? {} : { timeoutMs: o.waitMs };
    const hold = o.hold ?? { kind: 'mutex' };
    if (hold.kind === 'read') return locker.readWriteLock(o.lockId).read({ ...options, ...wait });
    if (hold.kind === 'semaphore') return locker.semaphore(o.lockId, { permits: hold.permits }).acquire({ ...options, ...wait });
    return locker.lock(o.lockId, { ...options, ...wait });
  };
}

/** Acquire (abandoning the wait on SIGINT/SIGTERM/SIGHUP): the hold, or the exit status to use. */
async function obtain(acquire: Acquirer, o: RunOptions): Promise<RunHandle | number> {
  const ctl = new AbortController();
  let interrupted: NodeJS.Signals | undefined;
  const stopListening = onSignals(o.signals ?? process, INTERRUPTS, (sig) => {
    interrupted ??= sig;
    ctl.abort(new Error(`interrupted by ${sig}`));
  });
  const started = performance.now();
  const ticker = setInterval(() => {
    o.say('wait', `locksmith: waiting for lock '${o.lockId}' (${Math.round((performance.now() - started) / 1000)} s)`);
  }, 2_000);
  try {
    return await acquire(o, ctl.signal);
  } catch (err) {
    if (interrupted) return signalStatus(interrupted);
    if (!(err instanceof LockTimeoutError)) throw err;
    o.say('conflict', `locksmith: lock '${o.lockId}' is held by another; not obtained`);
    return o.conflictExitCode ?? EXIT.CONFLICT;
  } finally {
    clearInterval(ticker);
    stopListening();
  }
}

/** Acquire, run the child, release; resolve with the exit status to use. */
export async function runWithLock(locker: Locker, o: RunOptions): Promise<number> {
  return runHeld(lockerAcquirer(locker), o);
}

/** {@link runWithLock} over any {@link Acquirer} (the service's, for `run --server`). */
export async function runHeld(acquire: Acquirer, o: RunOptions): Promise<number> {
  const [cmd, ...args] = o.command;
  if (cmd === undefined) return EXIT.USAGE;
  const started = performance.now();
  const got = await obtain(acquire, o);
  if (typeof got === 'number') return got;
  o.say('info', `locksmith: got lock '${o.lockId}' (token ${got.token}) after ${Math.round(performance.now() - started)} ms`);
  try {
    return await supervise(got, cmd, args, o);
  } finally {
    await got.release().catch(() => undefined);
  }
}

/** Run the child under the lock: forward signals, stop it on loss, resolve with the exit status. */
function supervise(lock: RunHandle, cmd: string, args: readonly string[], o: RunOptions): Promise<number> {
  return new Promise<number>((resolve) => {
    const [file, argv] = diesWithParent(cmd, args);
    const child: ChildProcess = spawn(file, argv, {
      stdio: 'inherit',
      env: { ...process.env, LOCKSMITH_TOKEN: lock.token.toString(), LOCKSMITH_LOCK_ID: lock.lockId, LOCKSMITH_OWNER: lock.ownerId },
    });
    let lost = false;
    let killTimer: NodeJS.Timeout | undefined;
    const onLost = (): void => {
      lost = true;
      o.say('error', `locksmith: lock '${o.lockId}' lost; stopping the command`);
      child.kill('SIGTERM');
      killTimer = setTimeout(() => child.kill('SIGKILL'), o.graceMs);
    };
    lock.signal.addEventListener('abort', onLost, { once: true });
    const stopForwarding = onSignals(o.signals ?? process, FORWARDED, (sig) => child.kill(sig));
    const done = (code: number): void => {
      clearTimeout(killTimer);
      lock.signal.removeEventListener('abort', onLost);
      stopForwarding();
      resolve(code);
    };
    // Through setpriv the same cases are setpriv's own exit statuses, 126 and 127.
    child.once('error', (err: NodeJS.ErrnoException) => {
      o.say('error', `locksmith: could not start '${cmd}': ${err.message}`);
      done(err.code === 'EACCES' ? EXIT.CANNOT_EXECUTE : EXIT.NOT_FOUND);
    });
    child.once('exit', (code, signal) => {
      if (lost) done(EXIT.LOST);
      else if (code !== null) done(code);
      else done(signal ? signalStatus(signal) : EXIT.SOFTWARE);
    });
  });
}
