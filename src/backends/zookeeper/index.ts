/**
 * `zookeeper://host1:port,host2:port,host3:port[/chroot][?sessionTimeoutMs=N]` — Apache
 * Curator's fair ephemeral-sequential lock (InterProcessMutex), its read-write lock and its
 * semaphore (InterProcessSemaphoreV2), over one ZooKeeper session per backend; one lock id
 * is one lock across kinds. See docs/backends/zookeeper.md.
 *
 * A host list with ports is not a valid WHATWG URL: `createLocker` percent-encodes its
 * colons (the kit's `encodeHostList`), and {@link createZooKeeperBackend} takes the plain form.
 */
import {
  encodeHostList,
  hostList,
  InvalidArgumentError,
  redact,
  unavailable,
  UrlParams,
  openConnected,
  type Backend,
  type ConnectOptions,
} from '../kit.js';
import { ZooKeeperBackend, type ZooKeeperBackendOptions } from './backend.js';

// The entry is what a user needs: the factories, the backend and its options. Tools and
// tests that look at the tree beside a locker import session.ts, layout.ts and nodes.ts directly.
export { ZooKeeperBackend, type ZooKeeperBackendOptions, type ZooKeeperStats } from './backend.js';

/** The URL parameters the backend understands. */
const PARAMETERS = ['sessionTimeoutMs', 'connectTimeoutMs', 'operationTimeoutMs'] as const;

/**
 * The backend options of a parsed `zookeeper://` URL (throws `InvalidArgumentError`).
 * @internal
 */
export function zooKeeperOptions(url: URL, options: ConnectOptions = {}): ZooKeeperBackendOptions {
  if (url.protocol !== 'zookeeper:') throw new InvalidArgumentError('url', `not a zookeeper URL: ${redact(url)}`);
  if (url.username || url.password) {
    throw new InvalidArgumentError('url', `zookeeper: credentials in the URL are not supported (${redact(url)})`);
  }
  const q = new UrlParams(url, PARAMETERS);
  const connectTimeoutMs = q.int('connectTimeoutMs', options.connectTimeoutMs, { min: 1 });
  const operationTimeoutMs = q.int('operationTimeoutMs', undefined, { min: 1 });
  return {
    connectString: hostList(url, 2181)
      .map((h) => `${h.host.includes(':') ? `[${h.host}]` : h.host}:${h.port}`)
      .join(','),
    chroot: decodeURIComponent(url.pathname).replace(/\/+$/, ''),
    sessionTimeoutMs: q.int('sessionTimeoutMs', 10_000, { min: 1 }),
    ...(connectTimeoutMs !== undefined ? { connectTimeoutMs } : {}),
    ...(operationTimeoutMs !== undefined ? { operationTimeoutMs } : {}),
  };
}

/** Parse a raw URL string, plain host list with ports allowed (`zookeeper://h1:2181,h2:2181/x`). */
function parseRaw(raw: string): URL {
  try {
    return new URL(encodeHostList(raw.trim()));
  } catch (cause) {
    throw new InvalidArgumentError('url', `malformed zookeeper URL '${redact(raw)}'`, { cause });
  }
}

/** A backend from a raw URL string; it connects at its first use. */
export function createZooKeeperBackend(raw: string, options: ConnectOptions = {}): ZooKeeperBackend {
  return new ZooKeeperBackend(zooKeeperOptions(parseRaw(raw), options));
}

/**
 * Factory used by `createLocker('zookeeper://…')`: the backend with its session
 * established, within `connectTimeoutMs`; stops (and closes the session) when
 * `options.signal` aborts.
 */
export async function createBackend(url: URL, options: ConnectOptions = {}): Promise<Backend> {
  return openConnected(new ZooKeeperBackend(zooKeeperOptions(url, options)), options, (err) =>
    unavailable('zookeeper', `connect to ${redact(url)}`, err),
  );
}
