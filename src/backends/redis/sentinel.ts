/**
 * `redis-sentinel://[user:pass@]s1:26379[,s2:26379…]/<master name>[/<db>][?prefix=…]` — the
 * Redis backend on whichever node the Sentinels name as master (ioredis's `sentinels` +
 * `name` options). See docs/backends/redis.md, "Sentinel".
 *
 * The hosts are Sentinels (default port 26379); the credentials, the database and the query
 * parameters are those of the Redis data nodes, exactly as in a `redis://` URL.
 */
import type { RedisOptions } from 'ioredis';
import { hostList, InvalidArgumentError, redact } from '../kit.js';
import type { RedisUrlOptions } from './url.js';

/** The scheme of a Sentinel URL (with the colon, as `URL.protocol` has it). */
export const SENTINEL_PROTOCOL = 'redis-sentinel:';

/** Sentinel's well-known port. */
const SENTINEL_PORT = 26_379;

/**
 * Parse a `redis-sentinel://` URL: `plain` parses the equivalent `redis://` URL (credentials,
 * `/db`, parameters); the Sentinels and the master name replace its host and port.
 * Throws `InvalidArgumentError` for a missing master name or a malformed path.
 */
export function sentinelOptions(url: URL, plain: (redisUrl: URL) => RedisUrlOptions): RedisUrlOptions {
  const sentinels = hostList(url, SENTINEL_PORT);
  const segments = url.pathname.split('/').filter((s) => s !== '');
  const [name, db, ...rest] = segments.map((s) => decodeURIComponent(s));
  if (name === undefined || rest.length > 0) {
    throw new InvalidArgumentError(
      'url',
      `a Sentinel URL names the master and optionally the database: redis-sentinel://host:26379/<master name>[/<db>], got ${redact(url)}`,
    );
  }
  const base = new URL(`redis://127.0.0.1/${db ?? ''}${url.search}`);
  base.username = url.username;
  base.password = url.password;
  const parsed = plain(base);
  const client: RedisOptions = { ...parsed.client, sentinels, name };
  delete client.host;
  delete client.port;
  return { db: parsed.db, client, backend: { ...parsed.backend, label: redact(url) } };
}
