/**
 * Leader election over the service's sessions (docs/serve.md, "Elections"). An election is
 * the library's (docs/recipes/election.md): leadership is the hold of the lock named as the
 * election, with the owner id `<value>#<session>.<request>`, so `locker.election(name)` in a
 * Node process and a service client campaign in one election and see the same leader. A
 * campaign is an acquire of the session (a long poll, request ids, the lease renewed by the
 * session's keepalive): a session that stops keeping alive loses its leadership.
 */
import type { ServerResponse } from 'node:http';
import type { FastifyInstance } from 'fastify';
import type { HolderInfo } from '../observe/list.js';
import type { LeaderInfo } from '../election.js';
import * as S from './election-schemas.js';
import { checkLockId, gone, LOCK, ownSession, READ, type RouteDeps } from './routes.js';
import { ServeError, type HoldInfo } from './sessions.js';
import { Campaigns } from './campaigns.js';

type Params = { name: string };
/** What `leader` and `observe` say about who leads. */
interface LeaderView {
  readonly value: string;
  readonly token: string;
  readonly session?: string;
  readonly expiresInMs?: number;
}

const SEPARATOR = '#';
const SESSION_OWNER = /^([A-Za-z0-9_-]{22})\./;
const HEARTBEAT_MS = 15_000;

/** The participant value: given, else the session's name made storable as one. */
export function participantValue(given: string | undefined, sessionName: string): string {
  // eslint-disable-next-line no-control-regex -- NUL is exactly what no backend stores
  const value = given ?? [...sessionName.replace(/[#\u0000]/g, '_')].slice(0, S.MAX_VALUE_BYTES).join('');
  if (Buffer.byteLength(value) <= S.MAX_VALUE_BYTES) return value;
  if (given !== undefined) throw new ServeError(400, 'INVALID_ARGUMENT', `value must be at most ${S.MAX_VALUE_BYTES} UTF-8 bytes`);
  return Buffer.from(value)
    .subarray(0, S.MAX_VALUE_BYTES)
    .toString()
    .replace(/\uFFFD+$/, '');
}

/** The leader a lock holder is: value before the last `#`, the session after it when a session leads. */
export function leaderView(h: Pick<HolderInfo, 'ownerId' | 'token' | 'expiresInMs'>): LeaderView {
  const cut = h.ownerId.lastIndexOf(SEPARATOR);
  const session = cut > 0 ? SESSION_OWNER.exec(h.ownerId.slice(cut + 1))?.[1] : undefined;
  return {
    value: cut > 0 ? h.ownerId.slice(0, cut) : h.ownerId,
    token: h.token.toString(),
    ...(session === undefined ? {} : { session }),
    ...(h.expiresInMs === undefined ? {} : { expiresInMs: h.expiresInMs }),
  };
}

function observedView(l: LeaderInfo | undefined): { leader: LeaderView | null } {
  if (l === undefined) return { leader: null };
  return { leader: { value: l.id, token: l.token.toString(), ...(l.expiresInMs === undefined ? {} : { expiresInMs: l.expiresInMs }) } };
}

/** The session's holds of the election (a term is a mutex hold whose owner names a participant). */
async function terms(deps: RouteDeps, session: string, name: string, token?: string): Promise<HoldInfo[]> {
  const holds = await deps.sessions.holds(session);
  return holds.filter(
    (h) =>
      h.lockId === name &&
      h.grant.kind === 'mutex' &&
      h.grant.ownerId.includes(SEPARATOR) &&
      (token === undefined || h.token.toString() === token),
  );
}

/** Register campaign, resign, leader and observe. */
export function electionRoutes(app: FastifyInstance, deps: RouteDeps, everyMs: number): void {
  const campaigns = new Campaigns(deps.locker);
  app.post('/v1/elections/:name/campaign', { schema: S.campaign, config: LOCK }, async (request, reply) => {
    const name = checkLockId((request.params as Params).name);
    const b = request.body as { session: string; value?: string; waitMs?: number; requestId?: string };
    await ownSession(deps, request, b.session);
    const session = await deps.sessions.get(b.session);
    const value = participantValue(b.value, session.name);
    // Already leading: the same term, as `election.campaign()` answers (no wait on itself).
    const term = (await terms(deps, session.id, name))[0];
    if (term !== undefined)
      return grantView(name, leaderView({ ownerId: term.grant.ownerId, token: term.token }).value, term, session.ttlMs);
    const backend = await deps.locker.backend();
    const input = {
      session: session.id,
      lockId: name,
      waitMs: b.waitMs ?? 0,
      fair: backend.capabilities.fair,
      kind: 'mutex' as const,
      permits: 1,
      participant: value,
    };
    const got = await campaigns.run(session.id, name, input.waitMs > 0, (signal) =>
      deps.holds.acquire(b.requestId === undefined ? input : { ...input, requestId: b.requestId }, AbortSignal.any([gone(reply), signal])),
    );
    const { lockId, kind: _kind, ...rest } = got;
    return { name: lockId, value, ...rest };
  });
  app.post('/v1/elections/:name/resign', { schema: S.resign, config: LOCK }, async (request) => {
    const name = checkLockId((request.params as Params).name);
    const b = request.body as { session: string; token?: string };
    await ownSession(deps, request, b.session);
    // Waiting campaigns first, so that none is elected by the release of the term below.
    await campaigns.withdraw(b.session, name);
    let resigned = false;
    for (const t of await terms(deps, b.session, name, b.token)) {
      if (await deps.holds.release(b.session, name, t.token)) resigned = true;
    }
    return { resigned };
  });
  app.get('/v1/elections/:name/leader', { schema: S.leaderOf, config: READ }, async (request) => {
    const name = checkLockId((request.params as Params).name);
    const h = (await deps.locker.inspect(name)).holders.find((x) => x.kind === 'mutex');
    return { leader: h === undefined ? null : leaderView(h) };
  });
  app.get('/v1/elections/:name/observe', { schema: S.observe, config: READ }, async (request, reply) => {
    const name = checkLockId((request.params as Params).name);
    reply.hijack();
    await streamLeaders(deps, reply.raw, name, everyMs);
  });
}

function grantView(name: string, value: string, term: HoldInfo, ttlMs: number): unknown {
  const session = SESSION_OWNER.exec(term.grant.ownerId.slice(term.grant.ownerId.lastIndexOf(SEPARATOR) + 1))?.[1];
  return {
    name,
    value,
    token: term.token.toString(),
    session,
    ttlMs,
    leaseEndsAt: Date.now() + ttlMs,
    ...(term.requestId === undefined ? {} : { requestId: term.requestId }),
  };
}

/** `observe` as Server-Sent Events: the current leader first, then each change. */
async function streamLeaders(deps: RouteDeps, res: ServerResponse, name: string, everyMs: number): Promise<void> {
  const stop = new AbortController();
  res.writeHead(200, { 'content-type': 'text/event-stream', 'cache-control': 'no-cache', connection: 'keep-alive' });
  res.write(': stream open\n\n');
  const beat = setInterval(() => res.write(': keepalive\n\n'), HEARTBEAT_MS);
  beat.unref();
  res.once('close', () => stop.abort());
  try {
    for await (const l of deps.locker.election(name, { observeEveryMs: everyMs }).observe({ signal: stop.signal })) {
      res.write(`event: leader\ndata: ${JSON.stringify(observedView(l))}\n\n`);
    }
  } catch (err) {
    if (!stop.signal.aborted)
      res.write(`event: error\ndata: ${JSON.stringify({ code: 'BACKEND_UNAVAILABLE', message: (err as Error).message })}\n\n`);
  } finally {
    clearInterval(beat);
    stop.abort();
    res.end();
  }
}
