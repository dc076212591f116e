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
    url = new URL(raw);
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

/** Load the engine module for `url` and create its backend. */
export async function connect(url: URL, options: ConnectOptions = {}): Promise<Backend> {
  const loader = loaders[url.protocol];
  if (!loader) throw new InvalidArgumentError('url', `unknown backend scheme '${url.protocol}'`);
  const mod = await loader();
  return mod.createBackend(url, options);
}
