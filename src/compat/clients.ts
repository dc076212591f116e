/**
 * One locker per set of user clients, shared by every shim object built on them: a
 * `new Mutex(client, key)` per call must not open a pub/sub connection per call. See
 * docs/migrating/redis-semaphore.md, "Connections".
 */
import type { RedisClientLike } from '../backends/redis/index.js';
import { RedisBackend } from '../backends/redis/index.js';
import { RedlockBackend } from '../backends/redlock/index.js';
import { InvalidArgumentError, type LockLostError } from '../errors.js';
import type { Lock as Hold } from '../lock.js';
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

/** Told once when a watched hold is lost (the `LockLostError`). */
export type LossListener = (error: LockLostError) => void;

/** One watch: the hold and who is told of its loss. */
interface Watch {
  readonly hold: Hold;
  readonly listener: LossListener;
}

/**
 * The losses of one locker's holds, told to whoever watches each: ONE `lost` listener per
 * locker instead of an abort listener per hold, whose signal (an AbortController per hold)
 * cost 5–7 µs of a shim's uncontended cycle (docs/benchmarks.md, "Compat shims"). A hold is
 * named by kind, lock id and fencing token; two holds of this locker share those only when one
 * joined the other's hold on the server (`acquiredExternally`), so a watcher is told only when
 * its own hold is no longer held.
 */
export class LossRouter {
  /** By lock id: a string key made without formatting the token (a bigint) on every acquisition. */
  readonly #watchers = new Map<string, Watch[]>();

  constructor(locker: Locker) {
    locker.on('lost', (e) => {
      const watches = this.#watchers.get(e.lockId);
      if (watches === undefined) return;
      const lost = watches.filter((w) => w.hold.token === e.token && w.hold.kind === e.kind && !w.hold.held);
      for (const w of lost) this.#drop(w);
      for (const w of lost) tell(w.listener, e.error);
    });
  }

  /**
   * Tell `listener` when `hold` is lost; returns the function that stops watching. A hold
   * already lost (between its grant and this call) is told at once.
   */
  watch(hold: Hold, listener: LossListener): () => void {
    const watch: Watch = { hold, listener };
    const watches = this.#watchers.get(hold.lockId);
    if (watches) watches.push(watch);
    else this.#watchers.set(hold.lockId, [watch]);
    const unwatch = (): void => this.#drop(watch);
    if (!hold.held) {
      unwatch();
      tell(listener, hold.signal.reason as LockLostError);
    }
    return unwatch;
  }

  #drop(watch: Watch): void {
    const watches = this.#watchers.get(watch.hold.lockId);
    const at = watches?.indexOf(watch) ?? -1;
    if (watches === undefined || at < 0) return;
    if (watches.length === 1) this.#watchers.delete(watch.hold.lockId);
    else watches.splice(at, 1);
  }
}

/**
 * A throwing listener (redis-semaphore's default onLockLost) is an uncaught exception, as from
 * an abort listener, not the process warning the locker's events make of it.
 */
function tell(listener: LossListener, error: LockLostError): void {
  try {
    listener(error);
  } catch (err) {
    process.nextTick(() => {
      throw err;
    });
  }
}

const routers = new WeakMap<Locker, LossRouter>();

/** The {@link LossRouter} of `locker` (made on first use). */
export function lossRouter(locker: Locker): LossRouter {
  let router = routers.get(locker);
  if (router === undefined) {
    router = new LossRouter(locker);
    routers.set(locker, router);
  }
  return router;
}
