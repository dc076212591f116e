/**
 * `redis://[user:pass@]host:port[/db][?prefix=…&commandTimeoutMs=…]`, `rediss://…` (TLS) and
 * `redis-sentinel://…` (sentinel.ts) — locks on one Redis through ioredis. See docs/backends/redis.md.
 *
 * `createLocker('redis://…')` reaches this module lazily; to use your own ioredis client
 * (a `Cluster` too: every key of one lock shares a `{hash tag}`), pass
 * `new RedisBackend(client)` to `createLocker`.
 */
import { Redis } from 'ioredis';
import {
  backendLog,
  redact,
  secretsOf,
  unavailable,
  withDeadline,
  BackendUnavailableError,
  type Backend,
  type ConnectOptions,
} from '../kit.js';
import { logConnection } from '../redis-wire/clients.js';
import { RedisBackend } from './backend.js';
import { SENTINEL_PROTOCOL, sentinelOptions } from './sentinel.js';
import { redisOptions } from './url.js';
import { checkVersion } from './version.js';
import { UnsupportedError } from '../../errors.js';

export { RedisBackend, REDIS_CAPABILITIES } from './backend.js';
export type { RedisBackendOptions, RedisGrantData, RedisTicket } from './backend.js';
export type { RedisClientLike, RedisCommandClient, RedisSubscriberClient } from '../redis-wire/clients.js';
export { RedisCommands, type RedisCommandsOptions } from '../redis-wire/commands.js';
export { InboxDirectory } from '../redis-wire/inbox.js';
export type { LuaScript } from '../redis-wire/lua.js';
export { keyBase, lockKeys, type LockKeys } from '../redis-wire/keys.js';
export { sentinelOptions } from './sentinel.js';
export { redisOptions, type RedisUrlOptions } from './url.js';
export { MIN_REDIS_VERSION } from './version.js';

/**
 * Connect to the Redis at `url` and return its backend once the connection is up and the
 * database selected. Rejects with `BackendUnavailableError` carrying the real cause
 * (ECONNREFUSED, WRONGPASS, NOAUTH, a database index out of range) within
 * `options.connectTimeoutMs` (default 10 000 ms), with `UnsupportedError` for a server older
 * than Redis 6.2 (`MIN_REDIS_VERSION`), or with `options.signal`'s reason.
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
  logConnection(backendLog('redis'), client, 'connection');
  try {
    await withDeadline(checkedConnect(client, parsed.db), {
      timeoutMs: options.connectTimeoutMs ?? 10_000,
      ...(options.signal ? { signal: options.signal } : {}),
      onTimeout: () => new ConnectTimeout(`no connection within ${options.connectTimeoutMs ?? 10_000} ms`, { cause: firstError }),
    });
  } catch (err) {
    client.disconnect(false);
    if (options.signal?.aborted && err === options.signal.reason) throw err;
    if (err instanceof UnsupportedError) throw err;
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
  await checkVersion(client);
}
