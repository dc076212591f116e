/**
 * Parsing a `redis://` / `rediss://` URL into ioredis options and backend options (the URL
 * forms are in docs/backends/redis.md). sentinel.ts builds on it for `redis-sentinel://`.
 */
import { isIP } from 'node:net';
import type { RedisOptions } from 'ioredis';
import { InvalidArgumentError, redact, secretsOf, UrlParams, urlUserInfo, type ConnectOptions } from '../kit.js';
import type { RedisBackendOptions } from './backend.js';

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
      ...userInfo(url),
      // SNI takes a host name only (an IP there is deprecated, DEP0123).
      ...(url.protocol === 'rediss:' ? { tls: isIP(host) === 0 ? { servername: host } : {} } : {}),
      lazyConnect: true,
      // close() must not wait ioredis's default 2 s for a server that never answers to let go.
      disconnectTimeout: 100,
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

/** The URL's user name and password for ioredis; a malformed %-escape is an InvalidArgumentError. */
function userInfo(url: URL): { username?: string; password?: string } {
  const { username, password } = urlUserInfo(url);
  return { ...(username === undefined ? {} : { username }), ...(password === undefined ? {} : { password }) };
}
