/**
 * `etcd://host1:port,host2:port,host3:port[?prefix=…&leaseTtlMs=…]` — etcd's Go
 * `concurrency.Mutex` recipe, key-compatible with it (`etcdctl lock NAME` and locksmith
 * exclude each other), plus read-write locks and semaphores on the same keys, over one
 * lease per backend. `etcd://user:password@…` authenticates. See docs/backends/etcd.md.
 *
 * A host list with ports is not a valid WHATWG URL: `createLocker` percent-encodes its
 * colons (the kit's `encodeHostList`), and {@link createEtcdBackend} takes the plain form.
 */
import {
  BackendUnavailableError,
  encodeHostList,
  hostList,
  InvalidArgumentError,
  redact,
  unavailable,
  UrlParams,
  openConnected,
  type Backend,
  type ConnectOptions,
  urlUserInfo,
} from '../kit.js';
import { EtcdBackend, type EtcdBackendOptions } from './backend.js';

// The entry is what a user needs: the factories, the backend and its options. Tools and
// tests that look at the keys or the lease import layout.ts and lease.ts directly.
export { EtcdBackend, type EtcdBackendOptions, type EtcdStats } from './backend.js';

/** The URL parameters the backend understands. */
const PARAMETERS = ['prefix', 'leaseTtlMs', 'operationTimeoutMs'] as const;

/**
 * The backend options of a parsed `etcd://` URL (throws `InvalidArgumentError`).
 * @internal
 */
export function etcdOptions(url: URL): EtcdBackendOptions {
  if (url.protocol !== 'etcd:') throw new InvalidArgumentError('url', `not an etcd URL: ${redact(url)}`);
  if (url.pathname !== '' && url.pathname !== '/') {
    throw new InvalidArgumentError('url', `etcd: a path is not supported, use ?prefix= (${redact(url)})`);
  }
  const q = new UrlParams(url, PARAMETERS);
  const operationTimeoutMs = q.int('operationTimeoutMs', undefined, { min: 1 });
  return {
    hosts: hostList(url, 2379),
    prefix: q.string('prefix') ?? '',
    leaseTtlMs: q.int('leaseTtlMs', 10_000, { min: 1 }),
    ...(operationTimeoutMs !== undefined ? { operationTimeoutMs } : {}),
    ...credentials(url),
  };
}

function parseRaw(raw: string): URL {
  try {
    return new URL(encodeHostList(raw.trim()));
  } catch (cause) {
    throw new InvalidArgumentError('url', `malformed etcd URL '${redact(raw)}'`, { cause });
  }
}

/** A backend from a raw URL string (plain host list with ports allowed); it connects at first use. */
export function createEtcdBackend(raw: string): EtcdBackend {
  return new EtcdBackend(etcdOptions(parseRaw(raw)));
}

/**
 * Factory used by `createLocker('etcd://…')`: the backend with its lease granted (so an
 * unreachable cluster or a bad password fails here); stops, and closes what it opened,
 * when `options.signal` aborts.
 */
export async function createBackend(url: URL, options: ConnectOptions = {}): Promise<Backend> {
  return openConnected(new EtcdBackend(etcdOptions(url)), options, (err) =>
    // The client's error says what failed (the lease grant) but not where: name the URL.
    err instanceof BackendUnavailableError
      ? new BackendUnavailableError('etcd', `etcd connect to ${redact(url)} failed: ${err.message.replace(/^etcd /, '')}`, {
          cause: err,
          context: { ...err.context, url: redact(url) },
        })
      : unavailable('etcd', `connect to ${redact(url)}`, err),
  );
}

/** The URL's user name and password for etcd auth; a malformed %-escape is an InvalidArgumentError. */
function credentials(url: URL): { username?: string; password?: string } {
  const { username, password } = urlUserInfo(url);
  return username === undefined ? {} : { username, password: password ?? '' };
}
