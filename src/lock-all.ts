/**
 * All-or-nothing over several lock ids, written against the public Locker API (`lock` /
 * `tryLock` of each id): see docs/recipes/mutex.md, "Several locks at once".
 *
 * Deadlock freedom comes from the order, not from the backend: every caller takes the ids
 * sorted and de-duplicated, so two callers with overlapping sets never each hold what the
 * other waits for (the classic lock-ordering argument). A failure or timeout part-way
 * releases what was already taken before the call rejects.
 */
import { InvalidArgumentError, LockLostError, LockTimeoutError } from './errors.js';
import type { Lock } from './lock.js';
import { now } from './lease.js';
import { validateDuration, validateLockId, type LockOptions, type TryLockOptions } from './options.js';

/**
 * Several locks held as one: one token per id, one `release()`, one `signal` that aborts
 * when ANY of them is lost. Use it with `await using`:
 *
 * ```ts
 * await using all = await locker.lockAll(['account:1', 'account:2']);
 * await transfer(all.token('account:1'), all.token('account:2'));
 * ```
 */
export interface MultiLock extends AsyncDisposable {
  /** The ids held, sorted and de-duplicated (the order they were acquired in). */
  readonly lockIds: readonly string[];
  /** One handle per id, in the order of {@link MultiLock.lockIds}. */
  readonly locks: readonly Lock[];
  /** The fencing token of each id. */
  readonly tokens: ReadonlyMap<string, bigint>;
  /** Aborted, with the first `LockLostError` as `reason`, as soon as any one lock is lost. */
  readonly signal: AbortSignal;
  /** True while every lock is held. */
  readonly held: boolean;
  /** The fencing token of `lockId` (throws `InvalidArgumentError` for an id not in the set). */
  token(lockId: string): bigint;
  /** Renew every lease (see `Lock.extend`); rejects with the first failure. */
  extend(ttlMs?: number): Promise<void>;
  /** Release every lock (idempotent); rejects with the first release failure after trying all. */
  release(): Promise<void>;
}

/** The ids to take: validated, de-duplicated, in the one global order every caller uses. */
export function lockOrder(lockIds: unknown): string[] {
  if (!Array.isArray(lockIds) || lockIds.length === 0) {
    throw new InvalidArgumentError('lockIds', 'lockIds must be a non-empty array of lock ids');
  }
  const ids = new Set<string>();
  for (const id of lockIds as unknown[]) ids.add(validateLockId(id, 'lockIds'));
  // Code-unit order: identical in every process, whatever its locale.
  return [...ids].sort((a, b) => (a < b ? -1 : a > b ? 1 : 0));
}

type TakeOne = (lockId: string, options: TryLockOptions) => Promise<Lock | null>;

/**
 * Wait until every id is held (all-or-nothing). `timeoutMs` bounds the whole call; on
 * timeout, abort or failure the locks already taken are released first.
 */
/** The part of a Locker that lockAll needs (structural, so that locker.ts can import this module). */
export interface LockAllLocker {
  lock(lockId: string, options?: LockOptions): Promise<Lock>;
  tryLock(lockId: string, options?: TryLockOptions): Promise<Lock | null>;
}

export async function lockAll(locker: LockAllLocker, lockIds: readonly string[], options: LockOptions = {}): Promise<MultiLock> {
  const all = await takeAll(lockIds, options, (id, o) => locker.lock(id, o));
  if (all === null) throw new Error('unreachable: lock() never resolves null');
  return all;
}

/**
 * One attempt at every id (or wait up to `waitMs` in all): the held set, or `null` when
 * any id is held by another (whatever was taken meanwhile is released first).
 */
export function tryLockAll(locker: LockAllLocker, lockIds: readonly string[], options: TryLockOptions = {}): Promise<MultiLock | null> {
  return takeAll(lockIds, { waitMs: 0, ...options }, (id, o) => locker.tryLock(id, o));
}

async function takeAll(lockIds: readonly string[], options: TryLockOptions, take: TakeOne): Promise<MultiLock | null> {
  const ids = lockOrder(lockIds);
  const { timeoutMs, waitMs, signal, ...rest } = options;
  const budget = timeoutMs ?? waitMs;
  const total = budget === undefined ? undefined : validateDuration(budget, timeoutMs === undefined ? 'waitMs' : 'timeoutMs', true);
  const [only] = ids;
  if (ids.length === 1 && only !== undefined) {
    // One id: its own lock and signal (nothing to combine, nothing to roll back).
    const lock = await take(only, { ...rest, ...(signal ? { signal } : {}), ...(total === undefined ? {} : { timeoutMs: total }) });
    return lock && multiLock(ids, [lock], undefined, []);
  }
  const deadline = total === undefined ? undefined : now() + total;
  // A lock lost while later ids are still awaited ends the wait: the set can no longer be whole.
  const lost = new AbortController();
  const waitSignal = signal ? AbortSignal.any([signal, lost.signal]) : lost.signal;
  const locks: Lock[] = [];
  const detach: (() => void)[] = [];
  try {
    for (const id of ids) {
      const left = deadline === undefined ? undefined : Math.max(0, Math.ceil(deadline - now()));
      const lock = await take(id, { ...rest, signal: waitSignal, ...(left === undefined ? {} : { timeoutMs: left }) });
      if (lock === null) {
        await releaseAll(locks, detach);
        return null;
      }
      locks.push(lock);
      detach.push(onLoss(lock, lost));
    }
  } catch (err) {
    await releaseAll(locks, detach).catch(() => undefined);
    if (err instanceof LockTimeoutError && total !== undefined) {
      throw new LockTimeoutError(String(err.context.lockId), total, { cause: err });
    }
    throw err;
  }
  if (lost.signal.aborted) {
    const reason: unknown = lost.signal.reason;
    await releaseAll(locks, detach).catch(() => undefined);
    throw reason instanceof LockLostError ? reason : new LockLostError(ids.join(','), 'not-held');
  }
  return multiLock(ids, locks, lost, detach);
}

/** Abort `combined` with the lock's own `LockLostError` when it is lost. */
function onLoss(lock: Lock, combined: AbortController): () => void {
  const listener = (): void => {
    if (!combined.signal.aborted) combined.abort(lock.signal.reason);
  };
  if (lock.signal.aborted) {
    listener();
    return () => undefined;
  }
  lock.signal.addEventListener('abort', listener, { once: true });
  return () => lock.signal.removeEventListener('abort', listener);
}

/** Release every lock, even when one fails; reject with the first failure. */
async function releaseAll(locks: readonly Lock[], detach: (() => void)[]): Promise<void> {
  for (const d of detach.splice(0)) d();
  // Reverse order of acquisition: nobody waiting on a later id is woken before an earlier one frees.
  const results = await Promise.allSettled([...locks].reverse().map((l) => l.release()));
  const failed = results.find((r) => r.status === 'rejected');
  if (failed) throw failed.reason;
}

/** The handle; `lost` is the combined controller (undefined for one id: its lock's own signal serves). */
function multiLock(ids: readonly string[], locks: readonly Lock[], lost: AbortController | undefined, detach: (() => void)[]): MultiLock {
  const tokens = new Map(locks.map((l) => [l.lockId, l.token] as const));
  let releasing: Promise<void> | undefined;
  const release = (): Promise<void> => (releasing ??= releaseAll(locks, detach));
  return {
    lockIds: Object.freeze([...ids]),
    locks: Object.freeze([...locks]),
    tokens,
    // Read lazily: a lock's signal costs a controller, and most holds never read it.
    get signal() {
      return lost?.signal ?? (locks[0] as Lock).signal;
    },
    get held() {
      return releasing === undefined && locks.every((l) => l.held);
    },
    token(lockId: string): bigint {
      const t = tokens.get(lockId);
      if (t === undefined) throw new InvalidArgumentError('lockId', `'${lockId}' is not one of this MultiLock's ids`);
      return t;
    },
    async extend(ttlMs?: number): Promise<void> {
      await Promise.all(locks.map((l) => l.extend(ttlMs)));
    },
    release,
    [Symbol.asyncDispose]: release,
  };
}
