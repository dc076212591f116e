/**
 * `file:///abs/dir` (or `file://` for the default directory) — locks shared by the
 * processes of one machine through a directory, with every capability of the seam: fencing
 * tokens, leases, fair queues, read-write locks, semaphores, re-entry and lockDelay. The
 * embedded default when processes must be coordinated without a server, as flock(1) does.
 * See docs/backends/file.md.
 */
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { InvalidArgumentError, UrlParams, unavailable, type Backend, type ConnectOptions } from '../kit.js';
import { FileBackend } from './backend.js';
import { prepareDirectory } from './layout.js';

export { FileBackend, FILE_CAPABILITIES, type FileBackendOptions, type FileTicket } from './backend.js';
export { fileName, prepareDirectory } from './layout.js';

/**
 * The directory `file://` (an empty path) uses: `<os.tmpdir()>/locksmith-<uid>`, the same
 * for every process of the user whatever its session. Not `$XDG_RUNTIME_DIR`: a cron job or
 * a systemd service usually has none while a login shell has one, and the two would
 * silently lock in different directories (docs/backends/file.md).
 */
export function defaultDirectory(): string {
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

/** Factory used by `createLocker('file:///abs/dir')` and `createLocker('file://')`. The URL takes no parameters. */
export function createBackend(url: URL, _options: ConnectOptions = {}): Backend {
  new UrlParams(url, []);
  const dir = directoryOf(url);
  const isDefault = url.pathname === '' || url.pathname === '/';
  try {
    prepareDirectory(dir, isDefault);
  } catch (err) {
    if (err instanceof InvalidArgumentError) throw err;
    throw unavailable('file', `open of the lock directory ${dir}`, err, { context: { directory: dir } });
  }
  return new FileBackend(dir, { isDefault });
}
