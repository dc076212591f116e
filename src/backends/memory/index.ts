/**
 * `memory://[name]` — the embedded default backend and the reference every other backend
 * is read against. It has every capability: fair queues, read-write locks, semaphores,
 * notification, lockDelay and server-side reentrancy. See docs/backends/memory.md.
 *
 * Lockers created with the same `memory://name` URL in one process share one lock table,
 * so several lockers model several clients of one server. `memory://` alone is the table
 * named `default`. Nothing is shared across processes.
 */
import { InvalidArgumentError, UrlParams, type Backend, type ConnectOptions } from '../kit.js';
import { MemoryBackend } from './backend.js';

export { MemoryBackend } from './backend.js';

/** Factory used by `createLocker('memory://name')`. The URL takes no parameters. */
export function createBackend(url: URL, _options: ConnectOptions = {}): Backend {
  if (url.protocol !== 'memory:') throw new InvalidArgumentError('url', `not a memory URL: ${url.href}`);
  new UrlParams(url, []);
  // `memory://name` puts the name in the host; `memory:name` in the pathname.
  const name = decodeURIComponent(url.hostname || url.pathname.replace(/^\/+/, '')) || 'default';
  return new MemoryBackend(name);
}
