/**
 * One locker per set of user clients, shared by every shim object built on them: a
 * `new Mutex(client, key)` per call must not open a pub/sub connection per call. See
 * docs/migrating/redis-semaphore.md, "Connections".
 */
import type { RedisClientLike } from '../backends/redis/index.js';
import { RedisBackend } from '../backends/redis/index.js';
import { RedlockBackend } from '../backends/redlock/index.js';
import { InvalidArgumentError } from '../errors.js';
import { createLocker, type Locker } from '../locker.js';
import { DEFAULT_OPTIONS, type LockerOptions } from '../options.js';

/** A user's ioredis client (`Redis` or `Cluster`), as the shims accept it. */
export type CompatClient = RedisClientLike & { once?(event: 'end', listener: () => void): unknown };

/** The key prefix of every lock a shim takes (locksmith's layout, not the original library's). */
export const COMPAT_PREFIX = 'locksmith:';

interface Entry {
  readonly clients: readonly CompatClient[];
  readonly driftFactor: number | undefined;
  readonly locker: Locker;
}

const cache = new WeakMap<CompatClient, Entry[]>();

/**
 * The locker over `clients`: the Redis backend for one client, Redlock for several. The
 * locker closes itself when the first client ends (`quit()`), so a program that quits its
 * client exits as it did with the original library.
 */
export function lockerFor(clients: readonly CompatClient[], drift?: number): Locker {
  // node-redlock's default is locksmith's: one locker per client either way.
  const driftFactor = drift === DEFAULT_OPTIONS.driftFactor ? undefined : drift;
  const first = clients[0];
  if (first === undefined) throw new InvalidArgumentError('clients', 'at least one redis client is needed');
  const entries = cache.get(first) ?? [];
  const found = entries.find(
    (e) =>
      !e.locker.closed &&
      e.driftFactor === driftFactor &&
      e.clients.length === clients.length &&
      e.clients.every((c, i) => c === clients[i]),
  );
  if (found) return found.locker;
  const backend =
    clients.length === 1
      ? new RedisBackend(first, { prefix: COMPAT_PREFIX })
      : new RedlockBackend(clients, { prefix: COMPAT_PREFIX, ...(driftFactor === undefined ? {} : { driftFactor }) });
  const options: Partial<LockerOptions> = driftFactor === undefined ? {} : { driftFactor };
  const locker = createLocker(backend, options);
  const entry: Entry = { clients: [...clients], driftFactor, locker };
  cache.set(first, [...entries.filter((e) => !e.locker.closed), entry]);
  for (const c of clients) c.once?.('end', () => void locker.close());
  return locker;
}
