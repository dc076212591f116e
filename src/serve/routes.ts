/**
 * The `/v1` routes: sessions and locks (docs/serve.md, "API"). Handlers are thin: the
 * schemas validate, `Sessions` and `Holds` do the work, errors go to errors.ts.
 */
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import type { LockKind } from '../backend.js';
import type { LockInfo } from '../observe/list.js';
import type { Locker } from '../locker.js';
import type { JsonValue } from '../observe/identity.js';
import { NEVER_ABORTED, type AcquireInput, type Holds } from './holds.js';
import { RESERVED_PREFIX } from './records.js';
import * as S from './schemas.js';
import { ServeError, type SessionInfo, type Sessions } from './sessions.js';

/** What the routes need. */
export interface RouteDeps {
  readonly locker: Locker;
  readonly sessions: Sessions;
  readonly holds: Holds;
  /** Called when a session is created by `client` (limits, docs/serve.md "Security"). */
  readonly onSession?: (client: string | undefined) => Promise<void> | void;
  /** Who asks (the bearer token's name), when the service checks tokens. */
  readonly clientOf: (request: FastifyRequest) => string | undefined;
}

type Params = { lockId: string };

/** What a route needs of the caller's token (auth.ts). */
export const READ = { need: 'read' } as const;
export const LOCK = { need: 'lock' } as const;
export const ADMIN = { need: 'admin' } as const;
export const OPEN = { need: 'none' } as const;
type HoldBody = { session: string; token: string };

/** A lock id from the path: bounded, storable, and outside the service's reserved prefix. */
export function checkLockId(lockId: string): string {
  if (Buffer.byteLength(lockId) > S.MAX_SERVE_LOCK_ID_BYTES) {
    throw new ServeError(400, 'INVALID_ARGUMENT', `lockId must be at most ${S.MAX_SERVE_LOCK_ID_BYTES} UTF-8 bytes`);
  }
  if (lockId.startsWith(RESERVED_PREFIX))
    throw new ServeError(400, 'INVALID_ARGUMENT', `lock ids under '${RESERVED_PREFIX}' are the service's own`);
  return lockId;
}

/** A lock's state as JSON (tokens as decimal strings). */
export function lockJson(info: LockInfo): unknown {
  return JSON.parse(JSON.stringify(info, (_k, v: unknown) => (typeof v === 'bigint' ? v.toString() : v)));
}

/** Register the session routes. */
export function sessionRoutes(app: FastifyInstance, deps: RouteDeps): void {
  app.post('/v1/sessions', { schema: S.createSession, config: LOCK }, async (request) => {
    const body = request.body as { ttlMs: number; name?: string; meta?: { [k: string]: JsonValue } };
    const client = deps.clientOf(request);
    await deps.onSession?.(client);
    const s = await deps.sessions.create(body.ttlMs, body.name, body.meta, client);
    return { id: s.id, ttlMs: s.ttlMs, name: s.name };
  });
  app.post('/v1/sessions/:id/keepalive', { schema: S.keepalive, config: LOCK }, async (request) => {
    const { id } = request.params as { id: string };
    // Renewed by this replica less than a quarter ttl ago: nothing to write (docs/serve.md, "Design").
    const recent = deps.sessions.recent(id, deps.clientOf(request));
    if (recent !== undefined) return { id, ttlMs: recent.session.ttlMs, holds: recent.holds, lost: [] };
    const r = await deps.sessions.keepalive(id, await ownSession(deps, request, id));
    return { id, ttlMs: r.session.ttlMs, holds: r.holds, lost: r.lost.map((h) => ({ lockId: h.lockId, token: h.token.toString() })) };
  });
  app.delete('/v1/sessions/:id', { schema: S.deleteSession, config: LOCK }, async (request) => {
    const { id } = request.params as { id: string };
    await ownSession(deps, request, id);
    return { released: await deps.sessions.remove(id) };
  });
}

/** A session of another client is refused as if it did not exist. */
export async function ownSession(deps: RouteDeps, request: FastifyRequest, id: string): Promise<SessionInfo> {
  const s = await deps.sessions.get(id);
  const client = deps.clientOf(request);
  if (client !== undefined && s.client !== client)
    throw new ServeError(404, 'SESSION_NOT_FOUND', `session '${id}' does not exist or has expired`);
  return s;
}

/**
 * The long polls (acquires with a wait) in flight on this replica, by lock id: a release of a
 * lock with one answers after the woken waiter's answer went out. Writing a reply wakes its
 * client, which on a busy or small machine often runs in the service's place (the kernel
 * favours a task that slept) before the service writes the next one: the hand-off's answer
 * should not be the one that waits.
 */
class Polls {
  readonly #count = new Map<string, number>();

  enter(lockId: string): void {
    this.#count.set(lockId, (this.#count.get(lockId) ?? 0) + 1);
  }

  leave(lockId: string): void {
    const left = (this.#count.get(lockId) ?? 1) - 1;
    if (left > 0) this.#count.set(lockId, left);
    else this.#count.delete(lockId);
  }

  has(lockId: string): boolean {
    return this.#count.has(lockId);
  }
}

/** Resolves in the event loop's check phase, once every reaction already queued has run. */
const nextTurn = (): Promise<void> => new Promise((resolve) => setImmediate(resolve));

/** Register the lock routes. */
export function lockRoutes(app: FastifyInstance, deps: RouteDeps): void {
  const polls = new Polls();
  app.post('/v1/locks/:lockId/acquire', { schema: S.acquire, config: LOCK }, async (request, reply) => {
    const lockId = checkLockId((request.params as Params).lockId);
    const b = request.body as { session: string; waitMs?: number; fair?: boolean; kind?: LockKind; permits?: number; requestId?: string };
    const kind = b.kind ?? 'mutex';
    if (kind === 'semaphore' && b.permits === undefined) throw new ServeError(400, 'INVALID_ARGUMENT', 'a semaphore needs permits');
    const waitMs = b.waitMs ?? 0;
    // A one-shot attempt has no long poll to end: whether its client left is looked at once, after the grant.
    const socket = request.raw.socket;
    const input: AcquireInput = {
      session: b.session,
      lockId,
      waitMs,
      fair: b.fair ?? false,
      kind,
      permits: b.permits ?? 1,
      clientGone: waitMs === 0 ? (): boolean => socket.destroyed : undefined,
      requestId: b.requestId,
    };
    // A session this replica knows lets the first attempt go out beside the session's read.
    const session = (): Promise<SessionInfo> => ownSession(deps, request, b.session);
    const early = deps.sessions.known(b.session, deps.clientOf(request));
    if (waitMs === 0) return deps.holds.acquire(input, NEVER_ABORTED, session, early);
    polls.enter(lockId);
    try {
      return await deps.holds.acquire(input, gone(reply), session, early);
    } finally {
      polls.leave(lockId);
    }
  });
  app.post('/v1/locks/:lockId/release', { schema: S.release, config: LOCK }, async (request) => {
    const lockId = checkLockId((request.params as Params).lockId);
    const b = request.body as HoldBody;
    // The session's check and the hold's lookup are one read (or two at once); a hold this
    // replica granted is released without them (docs/serve.md, "Design").
    const session = (): Promise<SessionInfo> => ownSession(deps, request, b.session);
    const early = deps.sessions.known(b.session, deps.clientOf(request));
    const released = await deps.holds.release(b.session, lockId, BigInt(b.token), session, early);
    // A long poll of this lock here may just have been handed it by this release: its answer
    // is written first, and this one a turn of the event loop later (docs/serve.md, "Design").
    if (polls.has(lockId)) await nextTurn();
    return { released };
  });
  app.post('/v1/locks/:lockId/extend', { schema: S.extend, config: LOCK }, async (request) => {
    const lockId = checkLockId((request.params as Params).lockId);
    const b = request.body as HoldBody;
    const session = ownSession(deps, request, b.session);
    return deps.holds.extend(b.session, lockId, BigInt(b.token), session);
  });
  app.get('/v1/locks/:lockId', { schema: S.inspect, config: READ }, async (request) => {
    const lockId = checkLockId((request.params as Params).lockId);
    return lockJson(await deps.locker.inspect(lockId));
  });
  app.get('/v1/locks', { schema: S.list, config: READ }, async (request) => {
    const q = request.query as { prefix?: string; limit?: string; cursor?: string };
    if (q.prefix?.startsWith(RESERVED_PREFIX)) throw new ServeError(400, 'INVALID_ARGUMENT', `'${RESERVED_PREFIX}' is the service's own`);
    const page = await deps.locker.list({
      ...(q.prefix === undefined ? {} : { prefix: q.prefix }),
      ...(q.limit === undefined ? {} : { limit: Number(q.limit) }),
      ...(q.cursor === undefined ? {} : { cursor: q.cursor }),
    });
    const locks = page.locks.filter((l) => !l.lockId.startsWith(RESERVED_PREFIX)).map(lockJson);
    return { locks, ...(page.cursor === undefined ? {} : { cursor: page.cursor }) };
  });
}

/** Register `break` (admin): end every hold of the lock and move its token on. */
export function adminRoutes(app: FastifyInstance, deps: RouteDeps): void {
  app.post('/v1/locks/:lockId/break', { schema: S.breakLock, config: ADMIN }, async (request) => {
    const lockId = checkLockId((request.params as Params).lockId);
    const { reason } = request.body as { reason: string };
    return { holds: await deps.locker.forceRelease(lockId, { reason: `${reason} (by ${deps.clientOf(request) ?? 'local'})` }) };
  });
}

/** A signal that aborts when the client goes away before its answer (the long poll ends). */
export function gone(reply: FastifyReply): AbortSignal {
  const controller = new AbortController();
  reply.raw.once('close', () => {
    if (!reply.raw.writableFinished) controller.abort(new ServeError(499, 'CLIENT_GONE', 'the client went away'));
  });
  return controller.signal;
}
