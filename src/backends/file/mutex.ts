/**
 * The critical section of one lock id across processes: an `O_EXCL` create of its
 * `.mutex` file, held for a few synchronous system calls (read, write, rename) and removed
 * after. A mutex left behind by a process that died (kill -9 between the create and the
 * unlink) is recognised by its owner's pid; one whose owner is alive but has not finished
 * within `staleMs` (a process stopped inside the section) is broken too, and the stopped
 * owner then finds its mutex gone before it commits and does not write
 * (docs/backends/file.md, "Critical section").
 */
import { randomBytes } from 'node:crypto';
import { closeSync, fstatSync, linkSync, openSync, readFileSync, renameSync, statSync, unlinkSync, writeSync } from 'node:fs';
import { threadId } from 'node:worker_threads';
import { bootId, monotonicMs, pidNamespace, processAlive } from './layout.js';

/** Identifies this module instance in this thread: a mutex with our pid and this nonce is a leftover of ours. */
const NONCE = `${threadId}.${randomBytes(6).toString('hex')}`;

/** A mutex this process holds. */
export interface Held {
  readonly path: string;
  readonly ino: number;
}

/**
 * Try once to enter the section of `path`. Undefined when another process is inside; a
 * stale mutex is broken on the way, so the next try can succeed.
 */
export function tryEnter(path: string, staleMs: number): Held | undefined {
  let fd: number;
  try {
    fd = openSync(path, 'wx');
  } catch (err) {
    if ((err as { code?: unknown }).code !== 'EEXIST') throw err;
    breakIfStale(path, staleMs);
    return undefined;
  }
  try {
    writeSync(fd, `${process.pid} ${NONCE} ${bootId()} ${pidNamespace()} ${monotonicMs()}`);
    return { path, ino: fstatSync(fd).ino };
  } finally {
    closeSync(fd);
  }
}

/** True while the mutex file at `held.path` is still the one this process created. */
export function stillHeld(held: Held): boolean {
  try {
    return statSync(held.path).ino === held.ino;
  } catch {
    return false;
  }
}

/** Leave the section (never removes a mutex that another process created after breaking ours). */
export function leave(held: Held): void {
  if (!stillHeld(held)) return;
  try {
    unlinkSync(held.path);
  } catch {
    /* broken meanwhile */
  }
}

function isStale(text: string, mtimeMs: number, staleMs: number): boolean {
  const [pid, nonce, boot, ns, at] = text.split(' ');
  // Empty or torn: its owner died between the create and the write (mtime is all there is).
  if (pid === undefined || nonce === undefined || boot === undefined || ns === undefined || at === undefined) {
    return Date.now() - mtimeMs > staleMs;
  }
  if (boot !== bootId()) return true;
  // Ours from this very module instance: our sections are synchronous, so none is running.
  if (Number(pid) === process.pid && ns === pidNamespace() && nonce === NONCE) return true;
  if (!processAlive(Number(pid), ns)) return true;
  return monotonicMs() - Number(at) > staleMs;
}

function breakIfStale(path: string, staleMs: number): void {
  let text: string;
  let mtimeMs: number;
  try {
    text = readFileSync(path, 'utf8');
    mtimeMs = statSync(path).mtimeMs;
  } catch {
    return; // gone meanwhile: the next try decides
  }
  if (!isStale(text, mtimeMs, staleMs)) return;
  // Move it aside first, then check that what moved is what we judged: a breaker racing
  // another breaker must not remove the mutex the other one has just created.
  const aside = `${path}.${randomBytes(6).toString('hex')}.stale`;
  try {
    renameSync(path, aside);
  } catch {
    return;
  }
  try {
    if (readFileSync(aside, 'utf8') !== text) linkSync(aside, path);
  } catch {
    /* the path was taken again meanwhile: that holder's commit check sees its mutex moved */
  } finally {
    try {
      unlinkSync(aside);
    } catch {
      /* already gone */
    }
  }
}
