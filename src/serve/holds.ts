/**
 * Acquire, release and extend for sessions (docs/serve.md, "Design"). The wait is this
 * replica's long poll over the backend's own wait (`tryAcquire` + `waitForChange`, with
 * the backend's queue ticket for fair waits): it ends at `waitMs`, when the client goes
 * away, or when the session is found expired. A granted hold's lease is the session's ttl,
 * renewed only by the session's keepalive.
 */
import type { AcquireRequest, AcquireResult, Backend, Grant, LockKind } from '../backend.js';
import { LockTimeoutError, UnsupportedError } from '../errors.js';
import { BoundedMap } from '../util/bounded-map.js';
import { raceAbort } from '../util/time.js';
import { holdOf, type Lasting } from './intents.js';
import type { IntentInfo } from './markers.js';
import { Later } from './later.js';
import { encodeIdentity, randomId } from './records.js';
import { leaseOf, noSession, ServeError, type HoldInfo, type SessionInfo, type Sessions } from './sessions.js';

/** The route's read of a session (its client checked), made when it is needed. */
export type SessionRead = () => Promise<SessionInfo>;

/** An acquire request as the route validated it. */
export interface AcquireInput {
  readonly session: string;
  readonly lockId: string;
  readonly waitMs: number;
  readonly fair: boolean;
  readonly kind: LockKind;
  readonly permits: number;
  readonly requestId?: string;
  /**
   * An election participant's value: the owner id becomes `<value>#<session>.<request>`, the
   * form `Election.leader()` reads (docs/serve.md, "Elections").
   */
  readonly participant?: string;
  /**
   * Whether the client went away, for a one-shot attempt passed {@link NEVER_ABORTED} instead
   * of a signal of its own (an AbortController per request cost more than the attempt's checks).
   */
  readonly clientGone?: () => boolean;
}

/** The signal of attempts nobody aborts: a one-shot attempt's (its client checked by `clientGone`). */
export const NEVER_ABORTED: AbortSignal = new AbortController().signal;

/** What a granted acquire answers. */
export interface GrantView {
  readonly lockId: string;
  readonly token: string;
  readonly kind: LockKind;
  readonly session: string;
  readonly leaseEndsAt: number;
  readonly ttlMs: number;
  readonly requestId?: string;
}

/** How often a long poll looks whether its session is still alive (ms, at most). */
const SESSION_CHECK_MS = 1_000;
/**
 * A hold granted under an intent gets its full marker after this long (a quarter of the
 * shortest session ttl), so that a loss is reported by any replica's keepalive; most holds
 * are released before (ms).
 */
const WRITE_DOWN_MS = 250;
/** How many granted holds a replica remembers (Holds.#granted: a saving, and the holds to write down; past it a hold is not written down). */
const MAX_GRANTED = 100_000;

/** Acquisitions of sessions, with the per-replica bookkeeping of waits and retried requests. */
export class Holds {
  readonly #backend: Backend;
  readonly #sessions: Sessions;
  readonly #maxWaits: number;
  /** Waits in flight per session, on this replica. */
  readonly #waits = new Map<string, number>();
  /** The holds this replica granted, by session, lock and token (and the intent they use): released in one round trip. */
  readonly #granted = new BoundedMap<string, Granted>(MAX_GRANTED);
  /** The holds granted under an intent, to be written down (#writeDown). */
  readonly #writeDowns = new Later(WRITE_DOWN_MS);
  /** Acquisitions in flight by `session/requestId`: a retry joins the first. */
  readonly #inflight = new Map<string, Promise<GrantView>>();

  constructor(backend: Backend, sessions: Sessions, maxWaitsPerSession: number) {
    this.#backend = backend;
    this.#sessions = sessions;
    this.#maxWaits = maxWaitsPerSession;
  }

  /**
   * Stop the write-downs' timer (the service closes): a hold granted less than WRITE_DOWN_MS
   * before keeps its intent, from which any replica reads it back.
   */
  close(): void {
    this.#writeDowns.clear();
  }

  /**
   * Acquire for a session; a retry with the same requestId answers the same grant. `read`:
   * the route's read of the session. `early`: the session's fixed attributes as this replica
   * knows them (Sessions.known): the first attempt then goes out beside the read, and is
   * given back if the read finds no session.
   */
  async acquire(input: AcquireInput, signal: AbortSignal, read?: SessionRead, early?: SessionInfo): Promise<GrantView> {
    const reader = read ?? ((): Promise<SessionInfo> => this.#sessions.get(input.session));
    if (input.requestId === undefined) return this.#acquireOnce(input, signal, reader, early);
    const key = `${input.session}/${input.requestId}`;
    const running = this.#inflight.get(key);
    if (running) return raceAbort(running, signal);
    const p = this.#acquireOnce(input, signal, reader, undefined);
    this.#inflight.set(key, p);
    try {
      return await p;
    } finally {
      this.#inflight.delete(key);
    }
  }

  /**
   * Release the session's hold of `lockId` with `token`. `read`: the route's read of the
   * session; `early` as for acquire: a hold this replica granted is then released and its
   * marker removed at once, and the session is read only when the hold was no longer held.
   */
  async release(session: string, lockId: string, token: bigint, read?: SessionRead, early?: SessionInfo): Promise<boolean> {
    const reader = read ?? ((): Promise<SessionInfo> => this.#sessions.get(session));
    const key = holdKey(session, lockId, token);
    const mine = early === undefined ? undefined : this.#granted.get(key);
    this.#granted.delete(key);
    this.#sessions.changed(session);
    if (mine !== undefined && this.#current(mine)) {
      if (await this.#released(session, mine)) return true;
      // No longer held (its lease ended): the answer is the session's, as below.
      await reader();
      return false;
    }
    const [, hold] = await this.#find(session, lockId, token, reader());
    return this.#released(session, hold);
  }

  /**
   * Whether this replica's memory of a hold still names its marker's holders: a keepalive
   * (through any replica) rolls a full marker to new holders once half its life is over, so
   * past a quarter of it the marker is read again (left behind, the rolled marker would
   * report the released hold as lost). An intent's hold removes no marker.
   */
  #current(hold: Granted): boolean {
    return hold.intent === true || performance.now() - hold.markedAt < this.#sessions.markerTtlMs / 4;
  }

  /**
   * Release a hold and remove its full marker with it (left behind, it would report the hold
   * as lost). A hold read back from an intent leaves the intent to the replica that wrote it,
   * which removes it once unused (intents.ts); a release that failed keeps it in use, so the
   * hold stays renewed.
   */
  async #released(session: string, hold: HoldInfo & { readonly lasting?: Lasting }): Promise<boolean> {
    if (hold.intent === true) {
      const released = await this.#backend.release(hold.grant);
      if (hold.lasting !== undefined) this.#sessions.done(session, hold.lockId, hold.lasting);
      return released;
    }
    const [released, forgot] = await Promise.allSettled([this.#backend.release(hold.grant), this.#sessions.forget(hold)]);
    if (released.status === 'rejected') throw released.reason;
    if (forgot.status === 'rejected') throw forgot.reason;
    return released.value;
  }

  /** Extend the session's hold of `lockId` by the session's ttl (a keepalive does it for all). */
  async extend(session: string, lockId: string, token: bigint, reading?: Promise<SessionInfo>): Promise<GrantView> {
    const [info, hold] = await this.#find(session, lockId, token, reading);
    try {
      await this.#backend.extend(hold.grant, leaseOf(info.ttlMs));
    } catch (err) {
      await this.#sessions.forget(hold).catch(() => undefined);
      throw err;
    }
    return view(info, hold.grant, hold.requestId);
  }

  /** The session and its hold: one read where the session's record has its holds (an index), else two at once. */
  async #find(session: string, lockId: string, token: bigint, reading?: Promise<SessionInfo>): Promise<[SessionInfo, HoldInfo]> {
    const read = reading ?? this.#sessions.get(session);
    if (this.#sessions.indexed) {
      const info = await read;
      const hold = (await this.#sessions.resolve(info, lockId)).held.find((h) => h.lockId === lockId && h.token === token);
      if (!hold) throw notHeld(session, lockId, token);
      return [info, hold];
    }
    return both(read, this.#held(session, lockId, token));
  }

  async #held(session: string, lockId: string, token: bigint): Promise<HoldInfo> {
    const hold = await this.#sessions.hold(session, lockId, token);
    if (!hold) throw notHeld(session, lockId, token);
    return hold;
  }

  async #acquireOnce(input: AcquireInput, signal: AbortSignal, reader: SessionRead, early: SessionInfo | undefined): Promise<GrantView> {
    // A session this replica renewed less than a quarter ttl ago is not read at all.
    const fresh = input.requestId === undefined && early !== undefined && this.#sessions.alive(early.id, early.client) !== undefined;
    const read = fresh ? undefined : reader();
    read?.catch(() => undefined); // awaited below, or by the first attempt when it goes out early
    const session = early ?? (await (read as Promise<SessionInfo>));
    if (input.requestId !== undefined) {
      const holds =
        session.holds === undefined ? await this.#sessions.holds(session.id) : (await this.#sessions.resolve(session, input.lockId)).held;
      const earlier = holds.find((h) => h.requestId === input.requestId && h.lockId === input.lockId);
      if (earlier) return view(session, earlier.grant, input.requestId);
    }
    this.#checkCapabilities(input);
    const waits = this.#waits.get(session.id) ?? 0;
    if (input.waitMs > 0 && waits >= this.#maxWaits) {
      throw new ServeError(429, 'LIMIT_EXCEEDED', `session '${session.id}' already has ${waits} waits on this replica`);
    }
    this.#waits.set(session.id, waits + 1);
    try {
      const req = request(session, input, signal);
      // The intent goes out beside the first attempt, or is reused: no marker write after the grant (intents.ts).
      // Its marker's failure is handled where it was written (Intents.use), and awaited below.
      const lasting = this.#sessions.intends(input.kind) ? this.#sessions.use(session.id, input.lockId) : undefined;
      let grant: Grant;
      try {
        grant = await this.#wait(session, input, req, early === undefined ? undefined : read);
      } catch (err) {
        if (lasting !== undefined) this.#sessions.done(session.id, input.lockId, lasting);
        throw err;
      }
      const hold = await this.#marked(session, grant, input, lasting, signal);
      const key = holdKey(session.id, grant.lockId, grant.token);
      this.#granted.set(key, hold);
      if (hold.intent === true) this.#writeDowns.add(() => void this.#writeDown(key, session, hold).catch(() => undefined));
      this.#sessions.changed(session.id);
      return view(session, grant, input.requestId);
    } finally {
      const left = (this.#waits.get(session.id) ?? 1) - 1;
      if (left > 0) this.#waits.set(session.id, left);
      else this.#waits.delete(session.id);
    }
  }

  /** The granted hold with its marker: the intent written beside the attempts, else a marker written now. */
  async #marked(
    session: SessionInfo,
    grant: Grant,
    input: AcquireInput,
    lasting: Lasting | undefined,
    signal: AbortSignal,
  ): Promise<Granted> {
    try {
      // Granted as the client went away: nobody would know of this hold, so give it back.
      signal.throwIfAborted();
      if (input.clientGone?.() === true) throw new ServeError(499, 'CLIENT_GONE', 'the client went away');
      if (lasting === undefined) return withMarkedAt(await this.#sessions.remember(session, grant, input.requestId));
      return intentHold(await lasting.marker, grant, input.requestId, lasting);
    } catch (err) {
      await this.#backend.release(grant).catch(() => undefined);
      if (lasting !== undefined) this.#sessions.done(session.id, grant.lockId, lasting);
      throw err;
    }
  }

  /**
   * A hold still held here WRITE_DOWN_MS after its grant gets its full marker (intents.ts): from then on
   * any replica's keepalive reports it lost when it is broken or ends, and its intent may go.
   * A hold released through this replica meanwhile gets none, or has it removed.
   */
  async #writeDown(key: string, session: SessionInfo, hold: Granted): Promise<void> {
    if (this.#granted.get(key) !== hold) return;
    const full = await this.#sessions.remember(session, hold.grant, hold.requestId);
    if (this.#granted.get(key) !== hold) {
      await this.#sessions.forget(full);
      return;
    }
    // The full marker stands for the hold now: the intent is no longer needed for it.
    this.#granted.set(key, withMarkedAt(full));
    if (hold.lasting !== undefined) this.#sessions.done(session.id, hold.lockId, hold.lasting);
  }

  #checkCapabilities(input: AcquireInput): void {
    const caps = this.#backend.capabilities;
    if (input.fair && !caps.fair) throw new UnsupportedError(this.#backend.name, 'fair (FIFO) waits');
    if ((input.kind === 'read' || input.kind === 'write') && !caps.shared)
      throw new UnsupportedError(this.#backend.name, 'read-write locks');
    if (input.kind === 'semaphore' && !caps.permits) throw new UnsupportedError(this.#backend.name, 'semaphores');
  }

  /** The long poll: attempts until granted, `waitMs` passed, the client left or the session ended. */
  async #wait(session: SessionInfo, input: AcquireInput, first: AcquireRequest, pending?: Promise<SessionInfo>): Promise<Grant> {
    const deadline = performance.now() + input.waitMs;
    const checkEvery = Math.min(SESSION_CHECK_MS, session.ttlMs / 2);
    const signal = first.signal;
    let checked = performance.now();
    let req = first;
    try {
      for (;;) {
        signal.throwIfAborted();
        const got = await this.#backend.tryAcquire(req);
        if (!got.granted) req = { ...req, ticket: got.contended.ticket };
        if (pending !== undefined) {
          // The first attempt went out beside the session's read: it stands only if the session does.
          const read = pending;
          pending = undefined;
          await confirmed(read, got, this.#backend);
        }
        if (got.granted) return got.grant;
        const left = deadline - performance.now();
        if (left <= 0) throw new LockTimeoutError(input.lockId, input.waitMs);
        await this.#pause(input.lockId, req.ticket, Math.min(left, checked + checkEvery - performance.now()), signal);
        // The session is read when its check is due, not on every wake-up: a hand-off goes
        // straight to the attempt (docs/benchmarks.md, "The lock service").
        if (performance.now() - checked >= checkEvery) {
          await this.#sessions.get(session.id);
          checked = performance.now();
        }
      }
    } catch (err) {
      // A wait given up leaves no queue entry or hold behind (the attempt's reply may have been
      // lost); a single soft attempt that was answered "refused" left nothing to cancel.
      if (req.wait || !(err instanceof LockTimeoutError)) await this.#backend.cancel(req, req.ticket).catch(() => undefined);
      if (err instanceof ServeError && err.code === 'SESSION_NOT_FOUND') throw noSession(session.id);
      throw err;
    }
  }

  /** Wait for a change of the lock, at most `ms`, ending early when `signal` aborts. */
  async #pause(lockId: string, ticket: unknown, ms: number, signal: AbortSignal): Promise<void> {
    const slice = AbortSignal.any([signal, AbortSignal.timeout(Math.max(1, Math.ceil(ms)))]);
    try {
      await raceAbort(this.#backend.waitForChange(lockId, ticket, slice), slice);
    } catch (err) {
      if (signal.aborted) throw err;
    }
  }
}

/**
 * A hold this replica granted, with the intent it uses (given back when it is released here)
 * and when its marker was written or read (performance.now()).
 */
type Granted = HoldInfo & { readonly lasting?: Lasting; readonly markedAt: number };

/** The read of a session whose first attempt went out beside it; a grant is given back when it fails. */
async function confirmed(read: Promise<SessionInfo>, got: AcquireResult, backend: Backend): Promise<void> {
  try {
    await read;
  } catch (err) {
    if (got.granted) await backend.release(got.grant).catch(() => undefined);
    throw err;
  }
}

const holdKey = (session: string, lockId: string, token: bigint): string => `${session}\u0000${lockId}\u0000${token}`;

function notHeld(session: string, lockId: string, token: bigint): ServeError {
  return new ServeError(409, 'LOCK_NOT_HELD', `session '${session}' holds no lock '${lockId}' with token ${token}`);
}

/** Two reads at once; the session's error first whichever fails first (an unknown session is SESSION_NOT_FOUND). */
async function both(session: Promise<SessionInfo>, hold: Promise<HoldInfo>): Promise<[SessionInfo, HoldInfo]> {
  const [s, h] = await Promise.allSettled([session, hold]);
  if (s.status === 'rejected') throw s.reason;
  if (h.status === 'rejected') throw h.reason;
  return [s.value, h.value];
}

function request(session: SessionInfo, input: AcquireInput, signal: AbortSignal): AcquireRequest {
  return {
    lockId: input.lockId,
    kind: input.kind,
    permits: input.kind === 'semaphore' ? input.permits : 1,
    // `~` starts a random request part (never a request id's): intents.ts reads request ids back.
    ownerId: `${input.participant === undefined ? '' : `${input.participant}#`}${session.id}.${input.requestId ?? `~${randomId(9)}`}`,
    freshOwner: true,
    ttlMs: leaseOf(session.ttlMs),
    fair: input.fair,
    lockDelayMs: 0,
    wait: input.waitMs > 0,
    ticket: undefined,
    signal,
    onLost: () => undefined,
    identity: identityOf(session),
  };
}

/**
 * The identity of a session's holds, encoded once per session object: the object this
 * replica keeps of a known session (Sessions.known) is the same on every request.
 */
const identities = new WeakMap<SessionInfo, string>();
function identityOf(session: SessionInfo): string {
  let identity = identities.get(session);
  if (identity === undefined) {
    identity = encodeIdentity(session.name, { session: session.id });
    identities.set(session, identity);
  }
  return identity;
}

/** The answer of a grant; an undefined requestId is left out by the serializer (one object shape, no spread). */
function view(session: SessionInfo, grant: Grant, requestId: string | undefined): GrantView {
  return {
    lockId: grant.lockId,
    token: grant.token.toString(),
    kind: grant.kind,
    session: session.id,
    ttlMs: session.ttlMs,
    leaseEndsAt: Date.now() + session.ttlMs,
    requestId,
  };
}

/** The hold granted under an intent (as `holdOf` reads one back, with the request id its owner id was made with). */
function intentHold(intent: IntentInfo, grant: Grant, requestId: string | undefined, lasting: Lasting): Granted {
  return Object.assign(holdOf(intent, grant, requestId), { lasting, markedAt: performance.now() });
}

/** A hold with its full marker, as just written. */
function withMarkedAt(hold: HoldInfo): Granted {
  return {
    lockId: hold.lockId,
    token: hold.token,
    grant: hold.grant,
    markerId: hold.markerId,
    markerOwners: hold.markerOwners,
    markerLeftMs: hold.markerLeftMs,
    requestId: hold.requestId,
    markedAt: performance.now(),
  };
}
