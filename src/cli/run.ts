/**
 * `locksmith run <lockId> -- cmd args…`: run a command while holding the lock (like
 * `flock`, `etcdctl lock`, `consul lock`). The child gets `LOCKSMITH_TOKEN` and
 * `LOCKSMITH_LOCK_ID`; if the lock is lost it is stopped (SIGTERM, then SIGKILL after a
 * grace period). The exit status is the child's, or one of {@link EXIT}.
 */
import { spawn } from 'node:child_process';
import { constants } from 'node:os';
import type { Locker } from '../locker.js';
import type { Lock } from '../lock.js';
import { LockTimeoutError } from '../errors.js';

/** Exit statuses of `locksmith run` that are not the child's own. */
export const EXIT = Object.freeze({
  /** Bad arguments. */
  USAGE: 64,
  /** The backend could not be reached. */
  UNAVAILABLE: 69,
  /** The lock was not obtained (held by another with --no-wait, or --wait ran out). */
  NOT_OBTAINED: 75,
  /** The lock was lost while the command ran; the command was stopped. */
  LOST: 76,
});

/** Options of {@link runWithLock}. */
export interface RunOptions {
  readonly lockId: string;
  readonly command: readonly string[];
  readonly ttlMs: number;
  /** undefined: wait forever; 0: one attempt (--no-wait). */
  readonly waitMs: number | undefined;
  readonly fair: boolean;
  readonly graceMs: number;
  readonly progress: (line: string) => void;
}

/** Acquire, run the child, release; resolve with the exit status to use. */
export async function runWithLock(locker: Locker, o: RunOptions): Promise<number> {
  const started = performance.now();
  const ticker = setInterval(() => {
    o.progress(`locksmith: waiting for lock '${o.lockId}' (${Math.round((performance.now() - started) / 1000)} s)`);
  }, 2_000);
  let lock: Lock | null;
  try {
    if (o.waitMs === 0) lock = await locker.tryLock(o.lockId, { ttlMs: o.ttlMs, fair: o.fair });
    else if (o.waitMs === undefined) lock = await locker.lock(o.lockId, { ttlMs: o.ttlMs, fair: o.fair });
    else lock = await locker.lock(o.lockId, { ttlMs: o.ttlMs, fair: o.fair, timeoutMs: o.waitMs });
  } catch (err) {
    if (err instanceof LockTimeoutError) lock = null;
    else throw err;
  } finally {
    clearInterval(ticker);
  }
  if (!lock) {
    o.progress(`locksmith: lock '${o.lockId}' is held by another; not obtained`);
    return EXIT.NOT_OBTAINED;
  }
  const held = lock;
  const [cmd, ...args] = o.command;
  if (cmd === undefined) return EXIT.USAGE;
  try {
    return await new Promise<number>((resolve) => {
      const child = spawn(cmd, args, {
        stdio: 'inherit',
        env: { ...process.env, LOCKSMITH_TOKEN: String(held.token), LOCKSMITH_LOCK_ID: held.lockId },
      });
      let lost = false;
      let killTimer: NodeJS.Timeout | undefined;
      const onLost = (): void => {
        lost = true;
        o.progress(`locksmith: lock '${o.lockId}' lost; stopping the command`);
        child.kill('SIGTERM');
        killTimer = setTimeout(() => child.kill('SIGKILL'), o.graceMs);
      };
      held.signal.addEventListener('abort', onLost, { once: true });
      // Forward the usual termination signals so Ctrl-C stops the child and then releases.
      const forward = (sig: NodeJS.Signals) => () => child.kill(sig);
      const fwd = { SIGINT: forward('SIGINT'), SIGTERM: forward('SIGTERM'), SIGHUP: forward('SIGHUP') };
      for (const [sig, h] of Object.entries(fwd)) process.on(sig, h);
      const done = (code: number): void => {
        clearTimeout(killTimer);
        held.signal.removeEventListener('abort', onLost);
        for (const [sig, h] of Object.entries(fwd)) process.off(sig, h);
        resolve(code);
      };
      child.once('error', (err) => {
        o.progress(`locksmith: could not start '${cmd}': ${err.message}`);
        done(127);
      });
      child.once('exit', (code, signal) => {
        if (lost) done(EXIT.LOST);
        else if (code !== null) done(code);
        else done(128 + (signal ? (constants.signals[signal] ?? 0) : 0));
      });
    });
  } finally {
    await held.release().catch(() => undefined);
  }
}
