/**
 * Intent markers (docs/serve.md, "Design"): on backends whose grant any replica can rebuild
 * from the lock's own holders, a session's marker for lock L says only "session S may hold
 * L", with no token. An acquire has its intent written BESIDE its first attempt and is
 * answered once both are done, so a replica killed right after loses nothing, and neither the
 * grant nor a hand-off waits for a marker write. The replica that wrote an intent keeps using
 * it for the session's next acquisitions of L and removes it once unused for IDLE_MS: a
 * session that takes one lock again and again writes no marker at all. What an intent leaves
 * out (tokens, grant data) is read back from the lock: its holders whose owner id names the
 * session (`[value#]<session>.<request>`). An intent whose lock shows no holder of the
 * session means nothing.
 */
import type { Backend, Grant, HolderState, LockKind } from '../backend.js';
import { Later } from './later.js';
import type { HoldInfo, IntentInfo } from './markers.js';

/** An unused intent is removed after this long (ms): a session's next acquire of the lock reuses it meanwhile. */
export const IDLE_MS = 1_000;
/**
 * A replica reuses an intent it wrote for at most this long (ms), and at most a third of the
 * marker's life: with a wait of at most five minutes, a grant under it comes before a
 * keepalive may roll it (in the second half of its hour).
 */
export const REUSE_MS = 20 * 60_000;
/** How many intents a replica keeps in use or idle (a saving: past it, an acquire writes its own). */
const MAX_LASTING = 100_000;

/**
 * The backends whose grant data is a function of what `inspect` shows of a holder: none
 * (memory, file, SQL: lock, owner and token are the whole grant), or Redis's hash field,
 * which is the owner id for every kind but a semaphore permit. Elsewhere (a lease id, a
 * node path, a random value) the marker keeps the grant data and is written after the grant.
 */
export function rebuildable(backend: Backend, kind: LockKind): boolean {
  switch (backend.name) {
    case 'memory':
    case 'file':
    case 'postgres':
    case 'mysql':
      return true;
    case 'redis':
      return kind !== 'semaphore';
    default:
      return false;
  }
}

/** The session an owner id names (`[value#]<session>.<request>`), or undefined. */
export function sessionOf(ownerId: string): string | undefined {
  const tail = ownerId.slice(ownerId.lastIndexOf('#') + 1);
  const dot = tail.indexOf('.');
  return dot > 0 ? tail.slice(0, dot) : undefined;
}

/** The request id an owner id carries (`<session>.<requestId>`; a random one starts with `~`). */
function requestOf(ownerId: string): string | undefined {
  const tail = ownerId.slice(ownerId.lastIndexOf('#') + 1);
  const request = tail.slice(tail.indexOf('.') + 1);
  return request.startsWith('~') ? undefined : request;
}

/** The grant of `holder` of `lockId`, as the backend gave it to the acquire (see {@link rebuildable}). */
function grantOf(backend: Backend, lockId: string, holder: HolderState): Grant {
  const data = backend.name === 'redis' ? { field: holder.ownerId } : undefined;
  return { lockId, kind: holder.kind, ownerId: holder.ownerId, token: holder.token, ttlMs: 0, reentered: false, data };
}

/** One intent this replica wrote: its marker, the acquisitions and holds using it, when written. */
export interface Lasting {
  readonly marker: Promise<IntentInfo>;
  readonly writtenAt: number;
  users: number;
  /** Counts its uses: an idle removal queued before the last use does nothing. */
  uses: number;
}

/** How an intent is written and removed (sessions.ts). */
export interface IntentStore {
  write(session: string, lockId: string): Promise<IntentInfo>;
  remove(intent: IntentInfo): Promise<void>;
}

/** The intents this replica wrote, and intents read back into holds. */
export class Intents {
  readonly #backend: Backend;
  readonly #store: IntentStore;
  readonly #lasting = new Map<string, Lasting>();
  readonly #idle = new Later(IDLE_MS);
  readonly #reuseMs: number;

  /** `markerTtlMs`: how long the store's markers live (an intent is reused for a third of it at most). */
  constructor(backend: Backend, store: IntentStore, markerTtlMs: number) {
    this.#backend = backend;
    this.#store = store;
    this.#reuseMs = Math.min(REUSE_MS, markerTtlMs / 3);
  }

  /** Stop the idle removals' timer (the service closes; an intent left behind means nothing, and ends with its marker's life). */
  close(): void {
    this.#idle.clear();
  }

  /** Whether an acquire of `kind` writes an intent beside its first attempt (else a full marker after the grant). */
  uses(kind: LockKind): boolean {
    return rebuildable(this.#backend, kind);
  }

  /**
   * The session's intent for `lockId`, written now or reused, for one acquisition: to be
   * given back ({@link done}) when the acquisition fails or its hold is released here.
   */
  use(session: string, lockId: string): Lasting {
    const key = `${session}\u0000${lockId}`;
    let entry = this.#lasting.get(key);
    if (entry === undefined || performance.now() - entry.writtenAt > this.#reuseMs) {
      if (entry !== undefined) this.#lasting.delete(key);
      const fresh: Lasting = { marker: this.#store.write(session, lockId), writtenAt: performance.now(), users: 0, uses: 0 };
      // A marker that could not be written is never reused: the next acquire writes again.
      fresh.marker.catch(() => this.#lasting.get(key) === fresh && this.#lasting.delete(key));
      if (this.#lasting.size < MAX_LASTING) this.#lasting.set(key, fresh);
      entry = fresh;
    }
    entry.users += 1;
    entry.uses += 1;
    return entry;
  }

  /** An acquisition ended without a hold, or its hold was released: the intent is removed once unused for IDLE_MS. */
  done(session: string, lockId: string, entry: Lasting): void {
    entry.users -= 1;
    if (entry.users > 0) return;
    const key = `${session}\u0000${lockId}`;
    const uses = entry.uses;
    this.#idle.add(() => {
      if (entry.users > 0 || entry.uses !== uses) return;
      // Out of the map first: an acquire from now on writes its own intent, never this one.
      if (this.#lasting.get(key) === entry) this.#lasting.delete(key);
      entry.marker.then((intent) => this.#store.remove(intent)).catch(() => undefined);
    });
  }

  /** The holds of `session` behind `intents` (read from their locks), and the intents that mean nothing. */
  async resolve(session: string, intents: readonly IntentInfo[]): Promise<{ held: HoldInfo[]; stale: IntentInfo[] }> {
    const held: HoldInfo[] = [];
    const stale: IntentInfo[] = [];
    await Promise.all(
      intents.map(async (intent) => {
        const holders = (await this.#backend.inspect(intent.lockId)).holders.filter(
          (h) => sessionOf(h.ownerId) === session && (h.expiresInMs === undefined || h.expiresInMs > 0),
        );
        if (holders.length === 0) stale.push(intent);
        for (const h of holders) held.push(holdOf(intent, grantOf(this.#backend, intent.lockId, h)));
      }),
    );
    return { held, stale };
  }
}

/**
 * The hold an intent stands for, with its grant; `requestId`: the one its owner id was made
 * with (read from the owner id when not given). One object literal: the acquire path makes one
 * per grant (docs/benchmarks.md, "The lock service").
 */
export function holdOf(intent: IntentInfo, grant: Grant, requestId = requestOf(grant.ownerId)): HoldInfo {
  return {
    lockId: intent.lockId,
    token: grant.token,
    grant,
    markerId: intent.markerId,
    markerOwners: intent.markerOwners,
    markerLeftMs: intent.markerLeftMs,
    intent: true,
    requestId,
  };
}
