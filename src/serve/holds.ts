/**
 * Acquire, release and extend for sessions (docs/serve.md, "Design"). The wait is this
 * replica's long poll over the backend's own wait (`tryAcquire` + `waitForChange`, with
 * the backend's queue ticket for fair waits): it ends at `waitMs`, when the client goes
 * away, or when the session is found expired. A granted hold's lease is the session's ttl,
 * renewed only by the session's keepalive.
 */
import type { AcquireRequest, Backend, Grant, LockKind } from '../backend.js';
import { LockTimeoutError, UnsupportedError } from '../errors.js';
import { raceAbort } from '../util/time.js';
import { encodeIdentity, randomId } from './records.js';
import { noSession, ServeError, type HoldInfo, type SessionInfo, type Sessions } from './sessions.js';

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
}

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

/** Acquisitions of sessions, with the per-replica bookkeeping of waits and retried requests. */
export class Holds {
  readonly #backend: Backend;
  readonly #sessions: Sessions;
  readonly #maxWaits: number;
  /** Waits in flight per session, on this replica. */
  readonly #waits = new Map<string, number>();
  /** Acquisitions in flight by `session/requestId`: a retry joins the first. */
  readonly #inflight = new Map<string, Promise<GrantView>>();

  constructor(backend: Backend, sessions: Sessions, maxWaitsPerSession: number) {
    this.#backend = backend;
    this.#sessions = sessions;
    this.#maxWaits = maxWaitsPerSession;
  }

  /**
   * Acquire for a session; a retry with the same requestId answers the same grant. `known`:
   * the session as the route just read it (not read again).
   */
  async acquire(input: AcquireInput, signal: AbortSignal, known?: SessionInfo): Promise<GrantView> {
    if (input.requestId === undefined) return this.#acquireOnce(input, signal, known);
    const key = `${input.session}/${input.requestId}`;
    const running = this.#inflight.get(key);
    if (running) return raceAbort(running, signal);
    const p = this.#acquireOnce(input, signal, known);
    this.#inflight.set(key, p);
    try {
      return await p;
    } finally {
      this.#inflight.delete(key);
    }
  }

  /** Release the session's hold of `lockId` with `token`; `known`: the route's read of the session, in flight. */
  async release(session: string, lockId: string, token: bigint, known?: Promise<SessionInfo>): Promise<boolean> {
    const [, hold] = await both(known ?? this.#sessions.get(session), this.#held(session, lockId, token));
    const released = await this.#backend.release(hold.grant);
    await this.#sessions.forget(hold);
    return released;
  }

  /** Extend the session's hold of `lockId` by the session's ttl (a keepalive does it for all). */
  async extend(session: string, lockId: string, token: bigint, known?: Promise<SessionInfo>): Promise<GrantView> {
    const [info, hold] = await both(known ?? this.#sessions.get(session), this.#held(session, lockId, token));
    try {
      await this.#backend.extend(hold.grant, info.ttlMs);
    } catch (err) {
      await this.#sessions.forget(hold).catch(() => undefined);
      throw err;
    }
    return view(info, hold.grant, hold.requestId);
  }

  async #held(session: string, lockId: string, token: bigint): Promise<HoldInfo> {
    const hold = await this.#sessions.hold(session, lockId, token);
    if (!hold) throw new ServeError(409, 'LOCK_NOT_HELD', `session '${session}' holds no lock '${lockId}' with token ${token}`);
    return hold;
  }

  async #acquireOnce(input: AcquireInput, signal: AbortSignal, known: SessionInfo | undefined): Promise<GrantView> {
    const session = known ?? (await this.#sessions.get(input.session));
    if (input.requestId !== undefined) {
      const earlier = (await this.#sessions.holds(session.id)).find((h) => h.requestId === input.requestId && h.lockId === input.lockId);
      if (earlier) return view(session, earlier.grant, input.requestId);
    }
    this.#checkCapabilities(input);
    const waits = this.#waits.get(session.id) ?? 0;
    if (input.waitMs > 0 && waits >= this.#maxWaits) {
      throw new ServeError(429, 'LIMIT_EXCEEDED', `session '${session.id}' already has ${waits} waits on this replica`);
    }
    this.#waits.set(session.id, waits + 1);
    try {
      const grant = await this.#wait(session, input, signal);
      if (signal.aborted) {
        // Granted as the client went away: nobody would know of this hold, so give it back.
        await this.#backend.release(grant).catch(() => undefined);
        throw signal.reason;
      }
      try {
        await this.#sessions.remember(session, grant, input.requestId);
      } catch (err) {
        await this.#backend.release(grant).catch(() => undefined);
        throw err;
      }
      return view(session, grant, input.requestId);
    } finally {
      const left = (this.#waits.get(session.id) ?? 1) - 1;
      if (left > 0) this.#waits.set(session.id, left);
      else this.#waits.delete(session.id);
    }
  }

  #checkCapabilities(input: AcquireInput): void {
    const caps = this.#backend.capabilities;
    if (input.fair && !caps.fair) throw new UnsupportedError(this.#backend.name, 'fair (FIFO) waits');
    if ((input.kind === 'read' || input.kind === 'write') && !caps.shared)
      throw new UnsupportedError(this.#backend.name, 'read-write locks');
    if (input.kind === 'semaphore' && !caps.permits) throw new UnsupportedError(this.#backend.name, 'semaphores');
  }

  /** The long poll: attempts until granted, `waitMs` passed, the client left or the session ended. */
  async #wait(session: SessionInfo, input: AcquireInput, signal: AbortSignal): Promise<Grant> {
    const deadline = performance.now() + input.waitMs;
    const checkEvery = Math.min(SESSION_CHECK_MS, session.ttlMs / 2);
    let checked = performance.now();
    let req = request(session, input, signal);
    try {
      for (;;) {
        signal.throwIfAborted();
        const got = await this.#backend.tryAcquire(req);
        if (got.granted) return got.grant;
        req = { ...req, ticket: got.contended.ticket };
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
      // A wait given up leaves no queue entry or hold behind (the attempt's reply may have been lost).
      await this.#backend.cancel(req, req.ticket).catch(() => undefined);
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
    ownerId: `${input.participant === undefined ? '' : `${input.participant}#`}${session.id}.${input.requestId ?? randomId(9)}`,
    freshOwner: true,
    ttlMs: session.ttlMs,
    fair: input.fair,
    lockDelayMs: 0,
    wait: input.waitMs > 0,
    ticket: undefined,
    signal,
    onLost: () => undefined,
    identity: encodeIdentity(session.name, { session: session.id }),
  };
}

function view(session: SessionInfo, grant: Grant, requestId: string | undefined): GrantView {
  return {
    lockId: grant.lockId,
    token: grant.token.toString(),
    kind: grant.kind,
    session: session.id,
    ttlMs: session.ttlMs,
    leaseEndsAt: Date.now() + session.ttlMs,
    ...(requestId === undefined ? {} : { requestId }),
  };
}
