/**
 * `redlock://[user:pass@]h1:p1,h2:p2,h3:p3[/db][?prefix=…&nodeTimeoutMs=…&driftFactor=…&maxExtensions=…&retryJitterMs=…&pollMs=…]`
 * — Redlock over N independent Redis masters through ioredis. See docs/backends/redlock.md.
 *
 * `createLocker('redlock://…')` reaches this module lazily; to use your own ioredis clients
 * (one per master), pass `new RedlockBackend([a, b, c])` to `createLocker`.
 */
import { Redis, type RedisOptions } from 'ioredis';
import {
  BackendUnavailableError,
  hostList,
  backendLog,
  InvalidArgumentError,
  QuorumError,
  redact,
  secretsOf,
  unavailable,
  UrlParams,
  withDeadline,
  type Backend,
  type ConnectOptions,
  type NodeResult,
  urlUserInfo,
} from '../kit.js';
import { majority } from './quorum.js';
import { RedlockBackend, type RedlockBackendOptions } from './backend.js';

export { RedlockBackend, REDLOCK_CAPABILITIES } from './backend.js';
export type { RedlockBackendOptions, RedlockGrantData, RedlockTicket } from './backend.js';
import { logConnection } from '../redis-wire/clients.js';
export type { RedisClientLike } from '../redis-wire/clients.js';

/** The URL parameters the Redlock backend understands. */
const PARAMETERS = ['prefix', 'nodeTimeoutMs', 'driftFactor', 'maxExtensions', 'retryJitterMs', 'pollMs'] as const;

/** A parsed `redlock://` URL: one ioredis options object per master, and the backend options. */
export interface RedlockUrlOptions {
  readonly clients: readonly RedisOptions[];
  readonly backend: RedlockBackendOptions;
  readonly db: number;
}

/** Parse a `redlock://` URL (throws `InvalidArgumentError`). */
export function redlockOptions(url: URL, options: ConnectOptions = {}): RedlockUrlOptions {
  if (url.protocol !== 'redlock:') throw new InvalidArgumentError('url', `not a redlock URL: ${redact(url)}`);
  const q = new UrlParams(url, PARAMETERS);
  const dbText = url.pathname.replace(/^\/+|\/+$/g, '');
  if (dbText !== '' && !/^\d+$/.test(dbText)) {
    throw new InvalidArgumentError('url', `redlock database must be a number, got '${dbText}' in ${redact(url)}`);
  }
  const db = dbText === '' ? 0 : Number(dbText);
  const hosts = hostList(url, 6379);
  const drift = q.string('driftFactor');
  const driftFactor = drift === undefined ? undefined : Number(drift);
  if (driftFactor !== undefined && !(driftFactor >= 0 && driftFactor < 0.5)) {
    throw new InvalidArgumentError('url', `parameter 'driftFactor' must be a number in [0, 0.5), got '${drift}'`);
  }
  const connectTimeout = Math.min(options.connectTimeoutMs ?? 10_000, 10_000);
  const clients = hosts.map(({ host, port }): RedisOptions => ({
    host,
    port,
    db,
    ...userInfo(url),
    lazyConnect: true,
    // close() must not wait ioredis's default 2 s for a server that never answers to let go.
    disconnectTimeout: 100,
    connectTimeout,
    // A dead master must answer at once (an error), not hold commands in an offline queue.
    maxRetriesPerRequest: 1,
    enableOfflineQueue: false,
    // Keep reconnecting (a restarted master rejoins), at most once a second.
    retryStrategy: (times: number) => Math.min(50 * times, 1_000),
  }));
  const nodeTimeoutMs = q.int('nodeTimeoutMs', undefined, { min: 1 });
  const maxExtensions = q.int('maxExtensions', undefined, { min: 0 });
  const retryJitterMs = q.int('retryJitterMs', undefined, { min: 0 });
  const pollMs = q.int('pollMs', undefined, { min: 10 });
  const prefix = q.string('prefix');
  return {
    db,
    clients,
    backend: {
      ownsClients: true,
      labels: hosts.map(({ host, port }) => `${host.includes(':') ? `[${host}]` : host}:${port}`),
      secrets: secretsOf(url),
      ...(prefix !== undefined ? { prefix } : {}),
      ...(nodeTimeoutMs !== undefined ? { nodeTimeoutMs } : {}),
      ...(driftFactor !== undefined ? { driftFactor } : {}),
      ...(maxExtensions !== undefined ? { maxExtensions } : {}),
      ...(retryJitterMs !== undefined ? { retryJitterMs } : {}),
      ...(pollMs !== undefined ? { pollMs } : {}),
    },
  };
}

/**
 * Connect to every master of `url` and return the backend once a majority is up (the others
 * keep reconnecting in the background). Rejects with `BackendUnavailableError` carrying each
 * failed master's cause within `options.connectTimeoutMs` (default 10 000 ms), or with
 * `options.signal`'s reason.
 */
export async function createBackend(url: URL, options: ConnectOptions = {}): Promise<Backend> {
  const parsed = redlockOptions(url, options);
  // The first failure of each handshake is the cause worth reporting (ioredis answers the
  // pending connect() with a bare "Connection is closed."); later ones are reconnect noise.
  const firstErrors: unknown[] = [];
  const clients = parsed.clients.map((o, i) => {
    const c = new Redis(o);
    c.on('error', (err: unknown) => {
      firstErrors[i] ??= err;
    });
    logConnection(backendLog('redlock'), c, `node ${i}`);
    return c;
  });
  // Pub/sub connections queue their SUBSCRIBE until connected (they are opened lazily).
  const subscribers = parsed.clients.map((o) => () => new Redis({ ...o, enableOfflineQueue: true }));

  const timeoutMs = options.connectTimeoutMs ?? 10_000;
  const results = await Promise.allSettled(
    clients.map((client) =>
      withDeadline(checkedConnect(client, parsed.db), {
        timeoutMs,
        ...(options.signal ? { signal: options.signal } : {}),
        onTimeout: () => new BackendUnavailableError('redlock', `no connection within ${timeoutMs} ms`, { context: { timeoutMs } }),
      }),
    ),
  );
  if (options.signal?.aborted) {
    for (const c of clients) c.disconnect(false);
    throw options.signal.reason;
  }
  const up = results.filter((r) => r.status === 'fulfilled').length;
  if (up < majority(clients.length)) {
    for (const c of clients) c.disconnect(false);
    const secrets = secretsOf(url);
    const nodes: NodeResult[] = results.map((r, i) => {
      const node = parsed.backend.labels?.[i] ?? String(i);
      if (r.status === 'fulfilled') return { node, ok: true };
      const cause = firstErrors[i] !== undefined && !(r.reason instanceof BackendUnavailableError) ? firstErrors[i] : r.reason;
      const error = unavailable('redlock', `connect to ${node}`, cause, { secrets });
      return { node, ok: false, outcome: error.context.timeoutMs === undefined ? 'error' : 'timeout', error };
    });
    const detail = nodes.map((n) => `${n.node}: ${n.ok ? 'connected' : String((n.error as Error).message)}`).join('; ');
    throw new QuorumError(`redlock could not connect to a majority of ${redact(url)} (${detail})`, nodes, {
      context: { backend: 'redlock', url: redact(url), connected: up, needed: majority(clients.length) },
    });
  }
  return new RedlockBackend(clients, { ...parsed.backend, subscribers });
}

/** Connect, then select the database again: ioredis swallows a failed SELECT in its handshake. */
async function checkedConnect(client: Redis, db: number): Promise<void> {
  await client.connect();
  if (db !== 0) await client.select(db);
}

/** The URL's user name and password for ioredis; a malformed %-escape is an InvalidArgumentError. */
function userInfo(url: URL): { username?: string; password?: string } {
  const { username, password } = urlUserInfo(url);
  return { ...(username === undefined ? {} : { username }), ...(password === undefined ? {} : { password }) };
}
