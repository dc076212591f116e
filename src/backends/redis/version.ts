/**
 * The oldest Redis the scripts run on: they set expiries with `SET … PXAT` (Redis 6.2). A
 * URL-made backend checks the server's version once at connect, so an older server fails
 * there with a message naming the minimum instead of with a Lua error at the first lock.
 * See docs/backends/redis.md (the minimum version, under the URL forms).
 */
import { UnsupportedError } from '../../errors.js';

/** The oldest Redis version the Redis backend's scripts run on. */
export const MIN_REDIS_VERSION = '6.2.0';

/** What `INFO server` is asked for; ioredis `Redis` fits. */
export interface InfoClient {
  info(section: string): Promise<string>;
}

/**
 * The `UnsupportedError` for a server older than {@link MIN_REDIS_VERSION}, given its
 * `INFO server` text; undefined when it is new enough or says no version (a proxy that hides
 * it is given the benefit of the doubt).
 */
export function versionError(info: string): UnsupportedError | undefined {
  const m = /^redis_version:(\d+)\.(\d+)\.(\d+)/m.exec(info);
  if (!m) return undefined;
  const have = [Number(m[1]), Number(m[2]), Number(m[3])];
  const need = MIN_REDIS_VERSION.split('.').map(Number);
  for (let i = 0; i < 3; i++) {
    const h = have[i] ?? 0;
    const n = need[i] ?? 0;
    if (h > n) return undefined;
    if (h < n) return new UnsupportedError('redis', `Redis ${have.join('.')}: it needs Redis ${MIN_REDIS_VERSION} or later (SET … PXAT)`);
  }
  return undefined;
}

/**
 * Reject with {@link versionError} when the server behind `client` is too old. A server that
 * refuses INFO (an ACL without it) is not checked: the scripts then fail at the first lock.
 */
export async function checkVersion(client: InfoClient): Promise<void> {
  const err = versionError(await client.info('server').catch(() => ''));
  if (err) throw err;
}
