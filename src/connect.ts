/**
 * Backend URL → backend. Each engine's module is imported lazily, so a user of one backend
 * never loads another's driver library.
 */
import type { Backend } from './backend.js';
import { InvalidArgumentError } from './errors.js';

/** Options passed from `createLocker` to a backend factory. */
export interface ConnectOptions {
  /** Upper bound for the backend's first connection before `BackendUnavailableError`. */
  readonly connectTimeoutMs?: number;
}

/** What each `src/backends/<engine>/index.ts` exports as `createBackend`. */
export type BackendFactory = (url: URL, options: ConnectOptions) => Backend | Promise<Backend>;

type Loader = () => Promise<{ createBackend: BackendFactory }>;

// One line per engine. The import is what keeps drivers out of users who do not need them.
const loaders: Readonly<Record<string, Loader>> = {
  'memory:': () => import('./backends/memory/index.js'),
  'redis:': () => import('./backends/redis/index.js'),
  'zookeeper:': () => import('./backends/zookeeper/index.js'),
  'cassandra:': () => import('./backends/cassandra/index.js'),
};

/** The URL schemes locksmith understands (without the colon). */
export function supportedSchemes(): string[] {
  return Object.keys(loaders).map((s) => s.slice(0, -1));
}

/**
 * Parse and check a backend URL synchronously, so that a malformed URL or an unknown
 * scheme is an `InvalidArgumentError` at `createLocker` time, not at the first lock.
 */
export function parseBackendUrl(raw: string): URL {
  if (typeof raw !== 'string' || raw.trim() === '') {
    throw new InvalidArgumentError('url', 'backend URL must be a non-empty string');
  }
  let url: URL;
  try {
    url = new URL(encodeHostList(raw));
  } catch (cause) {
    throw new InvalidArgumentError('url', `malformed backend URL '${raw}'`, { cause });
  }
  if (!(url.protocol in loaders)) {
    throw new InvalidArgumentError(
      'url',
      `unknown backend scheme '${url.protocol.slice(0, -1)}' (supported: ${supportedSchemes().join(', ')})`,
      { context: { url: raw } },
    );
  }
  return url;
}

/**
 * `zookeeper://h1:2181,h2:2181/x` is how every ZooKeeper and Cassandra user writes a
 * cluster, but a host list with ports is not a valid WHATWG URL. Percent-encode the colons
 * inside such a list, so the URL parses with the whole list as its (opaque) host; a backend
 * reads it back with `decodeURIComponent(url.host)` (see {@link hostList}).
 */
function encodeHostList(raw: string): string {
  const m = /^([a-z][a-z0-9+.-]*:\/\/)((?:[^@/?#]*@)?)([^/?#]*)(.*)$/is.exec(raw);
  if (!m || !m[3]?.includes(',')) return raw;
  return `${m[1]}${m[2]}${m[3].replace(/:/g, '%3A')}${m[4]}`;
}

/** One host of a backend URL's host list. */
export interface HostPort {
  readonly host: string;
  readonly port: number;
}

/**
 * The hosts of `url` (`h1:p1,h2:p2` or `h1,h2:port`), each with its port or `defaultPort`.
 * Throws `InvalidArgumentError` for an empty host or a bad port.
 */
export function hostList(url: URL, defaultPort: number): HostPort[] {
  const raw = decodeURIComponent(url.host);
  const fallbackPort = url.port === '' ? defaultPort : Number(url.port);
  return raw.split(',').map((part) => {
    const m = /^\s*(\[[^\]]+\]|[^:\s]+)(?::(\d+))?\s*$/.exec(part);
    if (!m || m[1] === undefined) throw new InvalidArgumentError('url', `malformed host '${part}' in '${url.href}'`);
    const port = m[2] === undefined ? fallbackPort : Number(m[2]);
    if (!Number.isInteger(port) || port < 1 || port > 65_535) throw new InvalidArgumentError('url', `bad port in host '${part}'`);
    return { host: m[1].replace(/^\[|\]$/g, ''), port };
  });
}

/** Load the engine module for `url` and create its backend. */
export async function connect(url: URL, options: ConnectOptions = {}): Promise<Backend> {
  const loader = loaders[url.protocol];
  if (!loader) throw new InvalidArgumentError('url', `unknown backend scheme '${url.protocol}'`);
  const mod = await loader();
  return mod.createBackend(url, options);
}
