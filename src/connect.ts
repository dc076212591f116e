/**
 * Backend URL → backend. Each engine's module is imported lazily, so a user of one backend
 * never loads another's driver library.
 */
import type { Backend, BackendFactory, ConnectOptions } from './backend.js';
import { BackendUnavailableError, DriverMissingError, InvalidArgumentError } from './errors.js';
import { unavailable } from './util/cause.js';
import { encodeHostList } from './util/host-list.js';
import { redact, secretsOf } from './util/redact.js';
import { withDeadline } from './util/time.js';

interface Engine {
  /** The engine module (imports its driver). */
  readonly load: () => Promise<{ createBackend: BackendFactory }>;
  /** The npm package the module needs, for the message when it is missing. */
  readonly driver?: string;
}

// One line per engine. The import is what keeps drivers out of users who do not need them.
const engines: Readonly<Record<string, Engine>> = {
  'memory:': { load: () => import('./backends/memory/index.js') },
  'redis:': { load: () => import('./backends/redis/index.js'), driver: 'ioredis' },
  'rediss:': { load: () => import('./backends/redis/index.js'), driver: 'ioredis' },
  'redis-sentinel:': { load: () => import('./backends/redis/index.js'), driver: 'ioredis' },
  'redlock:': { load: () => import('./backends/redlock/index.js'), driver: 'ioredis' },
  'zookeeper:': { load: () => import('./backends/zookeeper/index.js'), driver: 'node-zookeeper-client' },
  'cassandra:': { load: () => import('./backends/cassandra/index.js'), driver: 'cassandra-driver' },
  'etcd:': { load: () => import('./backends/etcd/index.js'), driver: 'etcd3' },
  'postgres:': { load: () => import('./backends/postgres/index.js'), driver: 'pg' },
  'postgresql:': { load: () => import('./backends/postgres/index.js'), driver: 'pg' },
  'mysql:': { load: () => import('./backends/mysql/index.js'), driver: 'mysql2' },
  'mariadb:': { load: () => import('./backends/mysql/index.js'), driver: 'mysql2' },
};

/** How long the core's connect bound waits past `connectTimeoutMs` for the factory's own. */
const CONNECT_BACKSTOP_MS = 250;

/** The URL schemes locksmith understands (without the colon). */
export function supportedSchemes(): string[] {
  return Object.keys(engines).map((s) => s.slice(0, -1));
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
    throw new InvalidArgumentError('url', `malformed backend URL '${redact(raw)}'`, { cause });
  }
  if (!(url.protocol in engines)) {
    throw new InvalidArgumentError(
      'url',
      `unknown backend scheme '${url.protocol.slice(0, -1)}' (supported: ${supportedSchemes().join(', ')})`,
      { context: { url: redact(url) } },
    );
  }
  return url;
}

/**
 * Load the engine module for `url` and create its backend, within `connectTimeoutMs` and
 * until `signal` aborts. A backend that connects after we gave up is closed.
 */
export async function connect(url: URL, options: ConnectOptions = {}): Promise<Backend> {
  const scheme = url.protocol.slice(0, -1);
  const engine = engines[url.protocol];
  if (!engine) throw new InvalidArgumentError('url', `unknown backend scheme '${scheme}'`);
  const ms = options.connectTimeoutMs;
  const work = (async () => (await loadEngine(scheme, engine)).createBackend(url, options))();
  try {
    return await withDeadline(work, {
      // A backstop just behind the factory's own deadline: a factory that bounds its connect
      // knows why it failed (a refused Sentinel, an unknown master) and reports that first.
      ...(ms === undefined ? {} : { timeoutMs: ms + CONNECT_BACKSTOP_MS }),
      ...(options.signal ? { signal: options.signal } : {}),
      onTimeout: () =>
        new BackendUnavailableError(scheme, `could not connect to ${redact(url)} within ${ms} ms`, { context: { url: redact(url) } }),
      onLate: (backend) => void backend.close().catch(() => undefined),
    });
  } catch (err) {
    if (options.signal?.aborted && err === options.signal.reason) throw err;
    throw unavailable(scheme, `connect to ${redact(url)}`, err, { secrets: secretsOf(url), context: { url: redact(url) } });
  }
}

async function loadEngine(scheme: string, engine: Engine): Promise<{ createBackend: BackendFactory }> {
  try {
    return await engine.load();
  } catch (err) {
    const code = (err as { code?: unknown }).code;
    if (engine.driver && (code === 'ERR_MODULE_NOT_FOUND' || code === 'MODULE_NOT_FOUND') && String(err).includes(engine.driver)) {
      throw new DriverMissingError(`the ${scheme} backend`, engine.driver, { cause: err });
    }
    throw err;
  }
}
