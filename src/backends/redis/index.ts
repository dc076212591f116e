/**
 * `redis://[user:pass@]host:port[/db][?prefix=…&commandTimeoutMs=…]`, `rediss://…` (TLS) and
 * `redis-sentinel://…` (sentinel.ts) — locks on one Redis through ioredis. See docs/backends/redis.md.
 *
 * `createLocker('redis://…')` reaches this module lazily; to use your own ioredis client
 * (a `Cluster` too: every key of one lock shares a `{hash tag}`), pass
 * `new RedisBackend(client)` to `createLocker`.
 */
import { isIP } from 'node:net';
import { Redis, type RedisOptions } from 'ioredis';
import {
  InvalidArgumentError,
  redact,
  secretsOf,
  unavailable,
  UrlParams,
  withDeadline,
  BackendUnavailableError,
  type Backend,
  type ConnectOptions,
} from '../kit.js';
import { RedisBackend, type RedisBackendOptions } from './backend.js';
import { SENTINEL_PROTOCOL, sentinelOptions } from './sentinel.js';

export { RedisBackend, REDIS_CAPABILITIES } from './backend.js';
export type { RedisBackendOptions, RedisClientLike, RedisGrantData, RedisTicket } from './backend.js';
export { RedisCommands, type RedisCommandClient, type RedisCommandsOptions } from './commands.js';
export type { RedisSubscriberClient } from './inbox.js';
export { ALL_SCRIPTS, type LuaScript } from './scripts.js';
export { keyBase, lockKeys, type LockKeys } from './keys.js';
export { sentinelOptions } from './sentinel.js';

/** The URL parameters the Redis backend understands. */
const PARAMETERS = ['prefix', 'commandTimeoutMs', 'healthCheckMs'] as const;

/** A parsed `redis://` URL: the ioredis options and the backend options. */
export interface RedisUrlOptions {
  readonly client: RedisOptions;
  readonly backend: RedisBackendOptions;
  readonly db: number;
}

/** Parse a `redis://` / `rediss://` URL (throws `InvalidArgumentError`). */
export function redisOptions(url: URL, options: ConnectOptions = {}): RedisUrlOptions {
  if (url.protocol !== 'redis:' && url.protocol !== 'rediss:') throw new InvalidArgumentError('url', `not a redis URL: ${redact(url)}`);
  const q = new UrlParams(url, PARAMETERS);
  const dbText = url.pathname.replace(/^\/+|\/+$/g, '');
  if (dbText !== '' && !/^\d+$/.test(dbText)) {
    throw new InvalidArgumentError('url', `redis database must be a number, got '${dbText}' in ${redact(url)}`);
  }
  const db = dbText === '' ? 0 : Number(dbText);
  const connectTimeoutMs = options.connectTimeoutMs ?? 10_000;
  const host = url.hostname.replace(/^\[|\]$/g, '') || '127.0.0.1';
  const commandTimeoutMs = q.int('commandTimeoutMs', undefined, { min: 1 });
  const healthCheckMs = q.int('healthCheckMs', undefined, { min: 10 });
  const prefix = q.string('prefix');
  return {
    db,
    client: {
      host,
      port: url.port === '' ? 6379 : Number(url.port),
      db,
      ...(url.username ? { username: decodeURIComponent(url.username) } : {}),
      ...(url.password ? { password: decodeURIComponent(url.password) } : {}),
      // SNI takes a host name only (an IP there is deprecated, DEP0123).
      ...(url.protocol === 'rediss:' ? { tls: isIP(host) === 0 ? { servername: host } : {} } : {}),
      lazyConnect: true,
      connectTimeout: Math.min(connectTimeoutMs, 10_000),
      // A command issued while Redis is away fails after one reconnect attempt instead of
      // waiting in the offline queue forever; the backend's own timer bounds it as well.
      maxRetriesPerRequest: 1,
      // Keep reconnecting (the next acquire works once Redis is back), at most once a second.
      retryStrategy: (times: number) => Math.min(50 * times, 1_000),
    },
    backend: {
      ownsClient: true,
      label: redact(url),
      secrets: secretsOf(url),
      ...(prefix !== undefined ? { prefix } : {}),
      ...(commandTimeoutMs !== undefined ? { commandTimeoutMs } : {}),
      ...(healthCheckMs !== undefined ? { healthCheckMs } : {}),
    },
  };
}

/**
 * Connect to the Redis at `url` and return its backend once the connection is up and the
 * database selected. Rejects with `BackendUnavailableError` carrying the real cause
 * (ECONNREFUSED, WRONGPASS, NOAUTH, a database index out of range) within
 * `options.connectTimeoutMs` (default 10 000 ms), or with `options.signal`'s reason.
 */
export async function createBackend(url: URL, options: ConnectOptions = {}): Promise<Backend> {
  const parsed = url.protocol === SENTINEL_PROTOCOL ? sentinelOptions(url, (u) => redisOptions(u, options)) : redisOptions(url, options);
  const client = new Redis(parsed.client);
  // The first failure of the handshake is the cause worth reporting: ioredis answers the
  // pending connect() with a bare "Connection is closed." once it gives up.
  let firstError: unknown;
  client.on('error', (err: unknown) => {
    firstError ??= err;
  });
  try {
    await withDeadline(checkedConnect(client, parsed.db), {
      timeoutMs: options.connectTimeoutMs ?? 10_000,
      ...(options.signal ? { signal: options.signal } : {}),
      onTimeout: () => new ConnectTimeout(`no connection within ${options.connectTimeoutMs ?? 10_000} ms`, { cause: firstError }),
    });
  } catch (err) {
    client.disconnect(false);
    if (options.signal?.aborted && err === options.signal.reason) throw err;
    // A timeout names what went wrong meanwhile (a refused Sentinel, an unknown master).
    const cause =
      firstError !== undefined && !(err instanceof BackendUnavailableError) ? (err instanceof ConnectTimeout ? err : firstError) : err;
    throw unavailable('redis', `connect to ${redact(url)}`, cause, { secrets: secretsOf(url), context: { url: redact(url) } });
  }
  return new RedisBackend(client, parsed.backend);
}

/** Our own connect deadline passed; its `cause` is the first error ioredis reported meanwhile. */
class ConnectTimeout extends Error {}

/**
 * Connect, then select the database again: ioredis swallows a failed SELECT in its handshake
 * and goes on with db 0, so a wrong `/99` would silently share db 0's locks.
 */
async function checkedConnect(client: Redis, db: number): Promise<void> {
  await client.connect();
  if (db !== 0) await client.select(db);
}
