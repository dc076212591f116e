/**
 * Intent markers (docs/serve.md, "Design"): on backends whose grant any replica can rebuild
 * from the lock's own holders, an acquire writes its session's marker BESIDE its first
 * attempt, before it knows the token: "session S may hold lock L as owner O". The acquire is
 * answered once both are done, so a replica killed right after loses nothing, and neither
 * the grant nor a hand-off waits for a marker write. What the marker leaves out (the token
 * and the backend's grant data) is read back from the lock: the holder whose owner id is O
 * (owner ids are unique per acquisition). An intent whose lock shows no holder O means
 * nothing: an attempt refused or given up, whose marker is being removed.
 */
import type { Backend, Grant, HolderState, LockKind } from '../backend.js';
import { BoundedMap } from '../util/bounded-map.js';
import type { HoldInfo } from './sessions.js';

/** What an intent marker says, as read back from the session's index. */
export interface IntentInfo {
  readonly lockId: string;
  readonly kind: LockKind;
  readonly ownerId: string;
  readonly requestId?: string;
  readonly markerId: string;
  readonly markerOwners: readonly string[];
  readonly markerLeftMs: number | undefined;
}

/** How many grants a replica remembers by owner id (a saving: a miss costs one inspect). */
const MAX_GRANTS = 100_000;

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

/** The grant of `holder` of `lockId`, as the backend gave it to the acquire (see {@link rebuildable}). */
function grantOf(backend: Backend, lockId: string, holder: HolderState): Grant {
  const data = backend.name === 'redis' ? { field: holder.ownerId } : undefined;
  return { lockId, kind: holder.kind, ownerId: holder.ownerId, token: holder.token, ttlMs: 0, reentered: false, data };
}

/** Intents turned into holds: from this replica's grants, else from their locks' holders. */
export class Intents {
  readonly #backend: Backend;
  /** The grants this replica made, by owner id (unique per acquisition). */
  readonly #grants = new BoundedMap<string, Grant>(MAX_GRANTS);

  constructor(backend: Backend) {
    this.#backend = backend;
  }

  /** Whether an acquire of `kind` writes an intent beside its attempt (else its marker after the grant). */
  uses(kind: LockKind): boolean {
    return rebuildable(this.#backend, kind);
  }

  /** A grant this replica made under an intent. */
  granted(grant: Grant): void {
    this.#grants.set(grant.ownerId, grant);
  }

  /** The hold ended (released or lost). */
  ended(ownerId: string): void {
    this.#grants.delete(ownerId);
  }

  /** The holds behind `intents`, and the intents that mean nothing (their lock has no holder of their owner). */
  async resolve(intents: readonly IntentInfo[]): Promise<{ held: HoldInfo[]; stale: IntentInfo[] }> {
    const held: HoldInfo[] = [];
    const stale: IntentInfo[] = [];
    await Promise.all(
      intents.map(async (intent) => {
        const mine = this.#grants.get(intent.ownerId);
        if (mine !== undefined && mine.lockId === intent.lockId) {
          held.push(holdOf(intent, mine));
          return;
        }
        const holder = (await this.#backend.inspect(intent.lockId)).holders.find(
          (h) => h.ownerId === intent.ownerId && (h.expiresInMs === undefined || h.expiresInMs > 0),
        );
        if (holder === undefined) stale.push(intent);
        else held.push(holdOf(intent, grantOf(this.#backend, intent.lockId, holder)));
      }),
    );
    return { held, stale };
  }
}

/** The hold an intent names, with its grant. */
export function holdOf(intent: IntentInfo, grant: Grant): HoldInfo {
  return {
    lockId: intent.lockId,
    token: grant.token,
    grant,
    markerId: intent.markerId,
    markerOwners: intent.markerOwners,
    markerLeftMs: intent.markerLeftMs,
    intent: true,
    ...(intent.requestId === undefined ? {} : { requestId: intent.requestId }),
  };
}
