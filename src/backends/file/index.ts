/**
 * `file:///abs/dir` (or `file://` for the default directory) — locks shared by the
 * processes of one machine through a directory, with every capability of the seam: fencing
 * tokens, leases, fair queues, read-write locks, semaphores, re-entry and lockDelay. The
 * embedded default when processes must be coordinated without a server, as flock(1) does.
 * See docs/backends/file.md.
 */
import { lstatSync, mkdirSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { InvalidArgumentError, UrlParams, unavailable, type Backend, type ConnectOptions } from '../kit.js';
import { FileBackend } from './backend.js';

export { FileBackend, FILE_CAPABILITIES, type FileBackendOptions, type FileTicket } from './backend.js';
export { fileName } from './layout.js';

/**
 * The directory `file://` (an empty path) uses: `$XDG_RUNTIME_DIR/locksmith` when the
 * runtime directory is set (per user, on tmpfs, gone at logout or reboot), else
 * `<os.tmpdir()>/locksmith-<uid>`.
 */
export function defaultDirectory(env: NodeJS.ProcessEnv = process.env): string {
  const runtime = env.XDG_RUNTIME_DIR;
  if (runtime !== undefined && runtime !== '') return join(runtime, 'locksmith');
  const uid = typeof process.getuid === 'function' ? process.getuid() : 'user';
  return join(tmpdir(), `locksmith-${uid}`);
}

/** The directory a `file:` URL names (the default one for an empty path). */
export function directoryOf(url: URL): string {
  if (url.protocol !== 'file:') throw new InvalidArgumentError('url', `not a file URL: ${url.href}`);
  if (url.hostname !== '' && url.hostname !== 'localhost') {
    throw new InvalidArgumentError('url', `a file URL names a directory of this machine (file:///abs/dir), not host '${url.hostname}'`);
  }
  if (url.pathname === '' || url.pathname === '/') return defaultDirectory();
  return fileURLToPath(url).replace(/\/+$/, '');
}

/**
 * Create the directory (mode 0700 when it does not exist) and its `locks/` and `work/` (the
 * directory's own mode; files follow the umask: the directory is what keeps others out). The default directory
 * lives in a shared place when there is no runtime directory: it must be ours and not
 * writable by others, or another user could read or forge our locks.
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

/** Factory used by `createLocker('file:///abs/dir')` and `createLocker('file://')`. The URL takes no parameters. */
export function createBackend(url: URL, _options: ConnectOptions = {}): Backend {
  new UrlParams(url, []);
  const dir = directoryOf(url);
  try {
    prepareDirectory(dir, url.pathname === '' || url.pathname === '/');
  } catch (err) {
    if (err instanceof InvalidArgumentError) throw err;
    throw unavailable('file', `open of the lock directory ${dir}`, err, { context: { directory: dir } });
  }
  return new FileBackend(dir);
}
