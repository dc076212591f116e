/**
 * `redis://[user:pass@]host:port[/db]` — locks on one Redis through ioredis.
 *
 * `createLocker('redis://…')` reaches this module lazily; to use your own ioredis client
 * (a `Cluster` too: every key of one lock shares a `{hash tag}`), pass
 * `new RedisBackend(client)` to `createLocker`.
 */
import { Redis } from 'ioredis';
import type { Backend } from '../../backend.js';
import type { ConnectOptions } from '../../backend.js';
import { BackendUnavailableError, InvalidArgumentError } from '../../errors.js';
import { RedisBackend, type RedisBackendOptions } from './backend.js';

export { RedisBackend, REDIS_CAPABILITIES } from './backend.js';
export type { RedisBackendOptions, RedisClientLike, RedisCommandClient, RedisSubscriberClient } from './backend.js';
export { ALL_SCRIPTS, type LuaScript } from './scripts.js';

/** The URL without its password, for messages. */
function redactUrl(url: URL): string {
  if (!url.password) return url.href;
  const copy = new URL(url.href);
  copy.password = '***';
  return copy.href;
}

/**
 * Connect to the Redis at `url` and return its backend once the connection is up.
 * Rejects with `BackendUnavailableError` when Redis cannot be reached within
 * `options.connectTimeoutMs` (default 10 000 ms). Query parameters: `prefix`,
 * `commandTimeoutMs`.
 */
export async function createBackend(url: URL, options: ConnectOptions = {}): Promise<Backend> {
  if (url.protocol !== 'redis:') throw new InvalidArgumentError('url', `not a redis URL: ${redactUrl(url)}`);
  const dbText = url.pathname.replace(/^\/+/, '');
  if (dbText !== '' && !/^\d+$/.test(dbText)) {
    throw new InvalidArgumentError('url', `redis database must be a number, got '${dbText}' in ${redactUrl(url)}`);
  }
  const port = url.port === '' ? 6379 : Number(url.port);
  const connectTimeoutMs = options.connectTimeoutMs ?? 10_000;
  const commandTimeoutText = url.searchParams.get('commandTimeoutMs');
  const commandTimeoutMs = commandTimeoutText === null ? undefined : Number(commandTimeoutText);
  if (commandTimeoutMs !== undefined && !(Number.isFinite(commandTimeoutMs) && commandTimeoutMs > 0)) {
    throw new InvalidArgumentError('url', `commandTimeoutMs must be a positive number in ${redactUrl(url)}`);
  }
  const client = new Redis({
    host: url.hostname.replace(/^\[|\]$/g, '') || '127.0.0.1',
    port,
    db: dbText === '' ? 0 : Number(dbText),
    ...(url.username ? { username: decodeURIComponent(url.username) } : {}),
    ...(url.password ? { password: decodeURIComponent(url.password) } : {}),
    lazyConnect: true,
    connectTimeout: Math.min(connectTimeoutMs, 10_000),
    // A command issued while Redis is away fails after one reconnect attempt instead of
    // waiting in the offline queue forever; the backend's own timer bounds it as well.
    maxRetriesPerRequest: 1,
    // Keep reconnecting (the next acquire works once Redis is back), at most once a second.
    retryStrategy: (times: number) => Math.min(50 * times, 1_000),
  });
  // Reconnect failures are reported through commands; an unheard 'error' must not crash.
  client.on('error', () => undefined);
  const backendOptions: RedisBackendOptions = {
    ownsClient: true,
    label: redactUrl(url),
    ...(url.searchParams.get('prefix') !== null ? { prefix: url.searchParams.get('prefix') ?? '' } : {}),
    ...(commandTimeoutMs !== undefined ? { commandTimeoutMs } : {}),
  };
  let timer: NodeJS.Timeout | undefined;
  try {
    await Promise.race([
      client.connect(),
      new Promise<never>((_, reject) => {
        timer = setTimeout(() => reject(new Error(`no connection within ${connectTimeoutMs} ms`)), connectTimeoutMs);
        timer.unref();
      }),
    ]);
  } catch (err) {
    client.disconnect(false);
    throw new BackendUnavailableError(
      'redis',
      `could not connect to ${redactUrl(url)}: ${err instanceof Error ? err.message : String(err)}`,
      {
        cause: err,
        context: { url: redactUrl(url) },
      },
    );
  } finally {
    clearTimeout(timer);
  }
  return new RedisBackend(client, backendOptions);
}
