/**
 * Backend URL → backend, through the engines' manifests (src/backends/manifests.ts). Each
 * engine's module is imported lazily, so a user of one backend never loads another's driver
 * library.
 */
import type { Backend, BackendFactory, ConnectOptions } from './backend.js';
import { BackendUnavailableError, DriverMissingError, InvalidArgumentError } from './errors.js';
import { unavailable } from './util/cause.js';
import { encodeHostList } from './util/host-list.js';
import { redact, secretsOf } from './util/redact.js';
import { withDeadline } from './util/time.js';
import type { EngineManifest } from './util/engine-manifest.js';
import { ENGINES } from './backends/manifests.js';

/** Scheme (with its colon, as `URL.protocol` has it) → the engine that serves it. */
const engines: ReadonlyMap<string, EngineManifest> = new Map(ENGINES.flatMap((e) => e.schemes.map((s) => [`${s}:`, e] as const)));

/** How long the core's connect bound waits past `connectTimeoutMs` for the factory's own. */
const CONNECT_BACKSTOP_MS = 250;

/** The URL schemes locksmith understands (without the colon). */
export function supportedSchemes(): string[] {
  return [...engines.keys()].map((s) => s.slice(0, -1));
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
  if (!engines.has(url.protocol)) {
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
  const engine = engines.get(url.protocol);
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

async function loadEngine(scheme: string, engine: EngineManifest): Promise<{ readonly createBackend: BackendFactory }> {
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
