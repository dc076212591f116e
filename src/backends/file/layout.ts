/**
 * Where a lock lives on disk, and the clock its leases are measured by
 * (docs/backends/file.md, "Directory layout" and "Time").
 *
 * `<dir>/locks/<name>` is the state file of one lock id (replaced by rename, so a reader
 * sees the old or the new state, never half of one); `<dir>/work/<name>.mutex` is its
 * critical section and `<dir>/work/<name>.<pid>.tmp` the next state being written. Waiters
 * watch `<dir>/locks/`, which changes only when a state is replaced.
 */
import { createHash } from 'node:crypto';
import { lstatSync, mkdirSync, readFileSync, readlinkSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { InvalidArgumentError } from '../kit.js';

/** Ids up to this many UTF-8 bytes are spelled out in their file name (hex); longer ones hashed. */
const SPELLED_MAX_BYTES = 100;

/**
 * The file name of a lock id. Hex keeps names distinct on case-insensitive file systems
 * and free of separators; a long id is named by its SHA-256, and its state file carries the
 * full id, which is checked on every read.
 */
export function fileName(lockId: string): string {
  const bytes = Buffer.from(lockId, 'utf8');
  if (bytes.length <= SPELLED_MAX_BYTES) return `x${bytes.toString('hex')}`;
  return `h${createHash('sha256').update(bytes).digest('hex')}`;
}

/**
 * Create the directory (mode 0700 when it does not exist) and its `locks/` and `work/` (the
 * directory's own mode; files follow the umask: the directory is what keeps others out). The default directory
 * lives in a shared place (the temporary directory): it must be ours and not writable by
 * others, or another user could read or forge our locks.
 */
export function prepareDirectory(dir: string, isDefault: boolean): void {
  mkdirSync(dir, { recursive: true, mode: 0o700 });
  if (isDefault && typeof process.getuid === 'function') {
    const st = lstatSync(dir);
    if (!st.isDirectory() || st.uid !== process.getuid() || (st.mode & 0o022) !== 0) {
      throw new InvalidArgumentError('url', `the default lock directory ${dir} is not a directory of this user with mode 0700`);
    }
  }
  // Inside a directory the user chose, its own permissions decide who shares the locks.
  const mode = isDefault ? 0o700 : statSync(dir).mode & 0o777;
  mkdirSync(join(dir, 'locks'), { recursive: true, mode });
  mkdirSync(join(dir, 'work'), { recursive: true, mode });
}

/** The paths of one lock id under a backend directory. */
export interface LockPaths {
  readonly name: string;
  readonly state: string;
  readonly mutex: string;
  readonly tmp: string;
}

/** The paths of `lockId` under `dir`. */
export function lockPaths(dir: string, lockId: string): LockPaths {
  const name = fileName(lockId);
  return {
    name,
    state: join(dir, 'locks', name),
    mutex: join(dir, 'work', `${name}.mutex`),
    tmp: join(dir, 'work', `${name}.${process.pid}.tmp`),
  };
}

/**
 * Milliseconds on CLOCK_MONOTONIC. On Linux `process.hrtime` reads it, and it is one clock
 * for every process of the machine: leases written by one process are read by another, and
 * wall-clock steps (NTP, a user's `date`) do not move them.
 */
export function monotonicMs(): number {
  return Number(process.hrtime.bigint() / 1_000n) / 1_000;
}

let bootIdCache: string | undefined;

/** This boot's id (Linux); monotonic times of another boot are meaningless. */
export function bootId(): string {
  if (bootIdCache === undefined) {
    try {
      bootIdCache = readFileSync('/proc/sys/kernel/random/boot_id', 'utf8').trim();
    } catch {
      bootIdCache = 'unknown';
    }
  }
  return bootIdCache;
}

let pidNamespaceCache: string | undefined;

/**
 * This process's PID namespace (Linux; `-` elsewhere). Containers sharing a volume share the
 * kernel's boot id and monotonic clock, but a pid of another namespace is not ours to check.
 */
export function pidNamespace(): string {
  if (pidNamespaceCache === undefined) {
    try {
      pidNamespaceCache = readlinkSync('/proc/self/ns/pid').replace(/\s/g, '') || '-';
    } catch {
      pidNamespaceCache = '-';
    }
  }
  return pidNamespaceCache;
}

/**
 * True while a process with this pid exists (EPERM: it exists, as another user's), and for
 * any pid of another PID namespace (which cannot be checked from here).
 */
export function processAlive(pid: number, ns: string = pidNamespace()): boolean {
  if (ns !== pidNamespace()) return true;
  if (!Number.isInteger(pid) || pid <= 0) return false;
  if (pid === process.pid) return true;
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    return (err as { code?: unknown }).code === 'EPERM';
  }
}
