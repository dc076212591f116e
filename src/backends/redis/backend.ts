/**
 * The Redis backend: a single Redis (or one Redis Cluster slot per lock) through ioredis.
 * Every operation is one Lua script (scripts.ts, from the `.lua` files of ../redis-wire/lua)
 * sent by the shared command layer (../redis-wire/commands.ts); waiters are woken through the
 * client's pub/sub inbox (../redis-wire/inbox.ts). See docs/backends/redis.md.
 */
import { randomBytes } from 'node:crypto';
import { performance } from 'node:perf_hooks';
import {
  BackendUnavailableError,
  EVERY_CAPABILITY,
  LockLostError,
  PermitsMismatchError,
  lossGuardMs,
  raceAbort,
  backendLog,
  logRoundTrips,
  logWake,
  wakeClock,
  type AcquireRequest,
  type AcquireResult,
  type Backend,
  type Capabilities,
  type Extension,
  type Grant,
  type LockKind,
  type LockState,
} from '../kit.js';
import type { ListPage, ListRequest } from '../../backend.js';
import { redisChanges } from './changes.js';
import { closeClient, type RedisClientLike } from '../redis-wire/clients.js';
import { RedisCommands } from '../redis-wire/commands.js';
import { Inbox, InboxDirectory } from '../redis-wire/inbox.js';
import type { RedisBackendOptions, RedisGrantData, RedisTicket } from './types.js';
import { LockKeyCache, keyBase } from '../redis-wire/keys.js';
import { Secrets } from '../redis-wire/secrets.js';
import type { Scan } from '../redis-wire/scan.js';
import { listPage, readInspect } from './observe.js';
import { Contention, granted, soloAttempt, soloFits } from './solo.js';
import { ACQUIRE, CANCEL, CLAIM, CLAIM_MS, EXTEND, FORCE, INSPECT, RELEASE, UNDO } from './scripts.js';

const log = backendLog('redis');

export type { RedisBackendOptions, RedisGrantData, RedisTicket } from './types.js';

/**
 * Clock-rate allowance on a hand-off's proof (the locker's default `driftFactor`): the proof
 * runs on the server's clock over a span that began at the last attempt (docs/backends/redis.md,
 * "Waiting by notification").
 */
const PROOF_DRIFT = 0.01;

/** How long an acquire waits for the wake-up of a waiter of this process that a release of this backend messaged. */
const HEAR_CAP_MS = 25;

const KIND_LETTER: Readonly<Record<LockKind, string>> = { mutex: 'm', read: 'r', write: 'w', semaphore: 's' };

/** A queue entry lives this much past its refresh period without a re-attempt. */
const WAITER_GRACE_MS = 1_250;
/**
 * A waiter refreshes its queue entry every third of its ttl, at most every third of this, so
 * a waiter that vanished blocks a fair queue for at most this + grace, even under a ttl of
 * hours. (A head handed the lock that never claims it is skipped much sooner, at the end of
 * its claim window: docs/backends/redis.md, "Waiting by notification".)
 */
const MAX_WAITER_PERIOD_MS = 30_000;

/** What the Redis backend can do (every capability of the seam). */
export const REDIS_CAPABILITIES: Capabilities = EVERY_CAPABILITY;

/**
 * Locks on one Redis. Accepts a URL-made client or a user's own ioredis client (see
 * {@link RedisClientLike}). Capabilities: fair queues, read-write locks, semaphores,
 * pub/sub notification, lockDelay and server-side reentrancy.
 */
export class RedisBackend implements Backend<RedisTicket, RedisGrantData> {
  readonly name = 'redis';
  readonly capabilities: Capabilities = REDIS_CAPABILITIES;

  readonly #client: RedisClientLike;
  readonly #prefix: string;
  /** Prefix of every client's inbox channel (the scripts append the client id); sent with most scripts, so built once. */
  readonly #inboxPrefix: string;
  readonly #ownsClient: boolean;
  readonly #healthCheckMs: number;
  readonly #commands: RedisCommands;
  readonly #inbox: Inbox;
  readonly #inboxes: InboxDirectory;
  /** This client's id: waiter ids are `<id>.<n>`, wake-ups arrive on `<prefix>w:<id>`. */
  readonly #clientId = randomBytes(12).toString('base64url');
  readonly #secrets = new Secrets();
  readonly #keys: LockKeyCache;
  #waiterSeq = 0;
  #attemptSeq = 0;
  /** The locks this backend saw contended lately: their first attempts skip ACQUIRE_SOLO (solo.ts). */
  readonly #contention = new Contention();
  /** Per lock id, the wake-up of a waiter of this process that this backend's last release messaged, until heard. */
  readonly #waking = new Map<string, Promise<void>>();
  #closed = false;
  /** Aborted by `close()`: ends every `changes()` iteration and drops its connection. */
  readonly #closing = new AbortController();

  /** Wrap `client`; see {@link RedisBackendOptions}. */
  constructor(client: RedisClientLike, options: RedisBackendOptions = {}) {
    this.#client = client;
    this.#prefix = options.prefix ?? 'locksmith:';
    this.#inboxPrefix = `${this.#prefix}w:`;
    this.#keys = new LockKeyCache(this.#prefix);
    this.#ownsClient = options.ownsClient ?? false;
    this.#healthCheckMs = options.healthCheckMs ?? 250;
    this.#commands = new RedisCommands(client, {
      engine: 'redis',
      timeoutMs: options.commandTimeoutMs ?? 5_000,
      label: options.label ?? 'redis',
      ...(options.secrets ? { secrets: options.secrets } : {}),
    });
    this.#inboxes = options.inboxes ?? InboxDirectory.process;
    const channel = `${this.#inboxPrefix}${this.#clientId}`;
    logRoundTrips(this, log);
    this.#inbox = new Inbox(() => client.duplicate(), channel, this.#commands, this.#healthCheckMs, this.#inboxes);
  }

  /** The base of every key of `lockId` (see ../redis-wire/keys.ts). */
  keyBase(lockId: string): string {
    return keyBase(this.#prefix, lockId);
  }

  /**
   * The waiter id of an acquisition. A fresh owner's is derived from the owner, so that
   * `cancel` finds the queue entry of an attempt whose reply never came.
   */
  #waiterId(req: AcquireRequest<RedisTicket>): string {
    if (!req.wait) return '';
    if (req.ticket) return req.ticket.waiterId;
    return req.freshOwner ? `${this.#clientId}.${req.ownerId}` : `${this.#clientId}.${(++this.#waiterSeq).toString(36)}`;
  }

  /** Not an async function: the usual first attempt costs one reaction on the command's promise (docs/benchmarks.md). */
  tryAcquire(req: AcquireRequest<RedisTicket>): Promise<AcquireResult<RedisTicket, RedisGrantData>> {
    try {
      this.#assertOpen();
      const handed = req.ticket && this.#holdOnReceipt(req, req.ticket);
      if (handed) return Promise.resolve({ granted: true, grant: handed });
      // This backend just released the lock to a waiter of this process: let its wake-up go
      // out first, or this attempt, sent sooner, would take the lock back every time.
      const waking = req.ticket ? undefined : this.#waking.get(req.lockId);
      if (waking) return raceAbort(waking, req.signal).then(() => this.#attemptNow(req));
      return this.#attemptNow(req);
    } catch (err) {
      return Promise.reject(err as Error);
    }
  }

  /** ACQUIRE_SOLO when it fits (solo.ts), the full ACQUIRE when it does not or answers 0. */
  #attemptNow(req: AcquireRequest<RedisTicket>): Promise<AcquireResult<RedisTicket, RedisGrantData>> {
    const stamp = req.freshOwner ? '' : `~${this.#clientId}.${(++this.#attemptSeq).toString(36)}`;
    if (!soloFits(req, this.#contention)) return this.#fullAttempt(req, stamp);
    // No queue entry can come of it: no waiter id, inbox mark or secret yet (solo.ts).
    return soloAttempt(this.#commands, this.#keys, req, KIND_LETTER[req.kind], stamp, this.#inboxPrefix).then(
      (token) => {
        if (token !== 0) return granted(req, 1, token, req.ownerId);
        this.#contention.saw(req.lockId);
        return this.#fullAttempt(req, stamp);
      },
      (err: unknown) => {
        this.#lostAttempt(req, '', stamp);
        throw err;
      },
    );
  }

  /** One full ACQUIRE: a grant, a re-entry, or a queue position with what its wait needs. */
  async #fullAttempt(req: AcquireRequest<RedisTicket>, stamp: string): Promise<AcquireResult<RedisTicket, RedisGrantData>> {
    const waiterId = this.#waiterId(req);
    // Note what the inbox delivered BEFORE the attempt is sent: a wake-up after this point is
    // seen by waitForChange, so a release between the attempt and the wait is not lost.
    // Any waiting mutex/write attempt may be handed the lock by a release, fair or not.
    const secret = req.wait && (req.kind === 'mutex' || req.kind === 'write') ? this.#secrets.next() : '';
    const mark = this.#inbox.mark(waiterId);
    const capMs = Math.max(10, Math.floor(Math.min(req.ttlMs, MAX_WAITER_PERIOD_MS) / 3));
    const sentAt = performance.now();
    let reply: unknown;
    try {
      reply = await this.#attempt(req, waiterId, capMs, secret, stamp);
    } catch (err) {
      this.#lostAttempt(req, waiterId, stamp);
      throw err;
    }
    const [code, a, b, last] = Array.isArray(reply) ? (reply as unknown[]) : [reply];
    if (code === 1 || code === 2 || code === 3) this.#inbox.forget(waiterId);
    if (code === 3) throw new PermitsMismatchError(req.lockId, req.permits, Number(a));
    if (code !== 1) this.#contention.saw(req.lockId);
    if (code === 1 || code === 2) return granted(req, code, a, b);
    if (!req.wait) return { granted: false, contended: { ticket: undefined } };
    const lastToken = BigInt(String(last ?? '0'));
    return {
      granted: false,
      contended: {
        ticket: {
          waiterId,
          hintMs: Number(a),
          capMs,
          mark,
          sentAt,
          serverMs: Number(b),
          secret,
          lastToken,
          rttMs: performance.now() - sentAt,
        },
      },
    };
  }

  /**
   * Send one ACQUIRE. An explicit owner's attempt carries a stamp that its hold keeps: when the
   * reply never comes, UNDO is queued right behind it on the same connection
   * ({@link #lostAttempt}) and takes back exactly what it did once the server runs both (the core cleans up only generated owners,
   * whose every hold is this acquisition's; an explicit owner may hold from elsewhere).
   */
  #attempt(req: AcquireRequest<RedisTicket>, waiterId: string, capMs: number, secret: string, stamp: string): Promise<unknown> {
    return this.#commands.eval(ACQUIRE, this.#keys.of(req.lockId), [
      KIND_LETTER[req.kind],
      req.permits,
      req.ownerId,
      req.ttlMs,
      req.lockDelayMs,
      req.fair ? '1' : '0',
      req.wait ? '1' : '0',
      waiterId,
      3 * capMs + WAITER_GRACE_MS,
      this.#inboxPrefix,
      secret,
      stamp,
      this.#keys.who(req.lockId, req.identity),
      req.weight ?? 1,
    ]);
  }

  /** An attempt failed (its reply may simply be late): forget its wake-ups, undo what it did. */
  #lostAttempt(req: AcquireRequest<RedisTicket>, waiterId: string, stamp: string): void {
    this.#inbox.forget(waiterId);
    if (stamp === '' || this.#closed) return;
    // A queue entry of a later attempt is the core's to cancel (it has the ticket).
    const args = [req.ownerId, stamp, req.ticket ? '' : waiterId, this.#inboxPrefix];
    // EVAL, not EVALSHA: a script cache lost meanwhile must not turn the undo into NOSCRIPT.
    this.#commands.evalSource(UNDO, this.#keys.of(req.lockId), args).catch(() => undefined);
  }

  /**
   * A release handed this waiter the lock and its message said so: hold on receipt, for what
   * the hand-off vouches for, and claim the full lease in the background (the grant's
   * `confirmation`). Only a message with the last attempt's secret counts (the release script
   * read it from the queue entry; anyone allowed to PUBLISH could send the rest), and only
   * with a token above the last one that attempt saw. That attempt, sent at `ticket.sentAt`
   * and answered at server time `ticket.serverMs`, found no hand-off to claim, so the hold
   * runs at least `expiresAt − serverMs` past that send; never more than the claim window a
   * release grants. With less than half the window left, claim with a round trip instead (the
   * attempt's own claim path).
   */
  #holdOnReceipt(req: AcquireRequest<RedisTicket>, ticket: RedisTicket): Grant<RedisGrantData> | undefined {
    const handOff = this.#inbox.handedSince(ticket.waiterId, ticket.mark);
    if (!handOff || (req.kind !== 'mutex' && req.kind !== 'write')) return undefined;
    if (ticket.secret === '' || handOff.secret !== ticket.secret || !(BigInt(handOff.token) > ticket.lastToken)) return undefined;
    const windowMs = Math.min(req.ttlMs, CLAIM_MS);
    // The proof spans from the last attempt's send, up to the whole wait before it: its drift
    // allowance is taken on that span here; the core takes its own only on the ttl it is given.
    const spanMs = handOff.expiresAt - ticket.serverMs;
    const ttlMs = Math.min(windowMs, Math.floor(ticket.sentAt + spanMs - spanMs * PROOF_DRIFT - performance.now()));
    // The claim's reply must come well within what the hold vouches for: else the holder
    // would be told it lost a lock the server granted it for the full ttl. A slow connection
    // claims with the attempt instead, whose grant counts from its own send.
    if (!(ttlMs >= windowMs / 2) || !(ticket.rttMs < ttlMs / 4)) return undefined;
    // A reply after this may come after the core gave the lease up (its deadline is at least
    // half the ttl away, whatever the driftFactor, less its loss guard): such a claim is
    // given back and reported lost, so that no server-side lease outlives its holder.
    const vouchedUntil = performance.now() + ttlMs / 2 - lossGuardMs(ttlMs) - 3;
    this.#inbox.forget(ticket.waiterId);
    const field = req.ownerId;
    // The claim goes out in the check phase, once the caller's code after `await lock()` ran:
    // the hold does not depend on it, and its send (a syscall) is then off the hand-off's path.
    const confirmation = new Promise<void>((resolve) => setImmediate(resolve))
      .then(() =>
        this.#commands.eval(CLAIM, this.#keys.of(req.lockId).slice(0, 3), [
          field,
          KIND_LETTER[req.kind],
          handOff.token,
          ticket.waiterId,
          req.ttlMs,
          req.lockDelayMs,
        ]),
      )
      .then((ok): Extension => {
        if (ok !== 1) throw new LockLostError(req.lockId, 'not-held', { context: { backend: this.name } });
        if (performance.now() < vouchedUntil) return { ttlMs: req.ttlMs };
        // Too late: the holder may have counted the lock as lost (expired) already. Give back
        // the full lease the claim took, not block the lock for it, and make the loss certain.
        this.#giveBack(req, field, handOff.token);
        throw new LockLostError(req.lockId, 'expired', { context: { backend: this.name } });
      });
    confirmation.catch(() => undefined);
    const token = BigInt(handOff.token);
    return { lockId: req.lockId, kind: req.kind, ownerId: req.ownerId, token, ttlMs, reentered: false, data: { field }, confirmation };
  }

  /** Release a hold nobody will use (best effort; it passes on to the next in line). */
  #giveBack(req: AcquireRequest<RedisTicket>, field: string, token: string): void {
    if (this.#closed) return;
    const args = [field, KIND_LETTER[req.kind], token, this.#inboxPrefix];
    this.#commands.eval(RELEASE, this.#keys.of(req.lockId), args).catch(() => undefined);
  }

  /**
   * Resolve when another attempt is worth making: a message naming this waiter (it became
   * the queue head, or a release handed it the lock), the moment the earliest holder or queue
   * entry runs out, or `capMs` at the latest. Only the head is woken, fair or not.
   */
  waitForChange(lockId: string, ticket: RedisTicket | undefined, signal: AbortSignal): Promise<void> {
    try {
      signal.throwIfAborted();
      this.#assertOpen();
    } catch (err) {
      return Promise.reject(err as Error);
    }
    const delay = ticket ? Math.min(ticket.hintMs > 0 ? ticket.hintMs + 2 : ticket.capMs, ticket.capMs) : this.#healthCheckMs;
    const woken = this.#inbox.wait(ticket?.waiterId, ticket?.mark, delay, signal);
    // Logging off, the inbox's own promise: no async layer on a hand-off's path (its value is unused).
    if (!log.enabled) return woken as Promise<unknown> as Promise<void>;
    const since = wakeClock(log);
    return woken.then((cause) => logWake(log, lockId, cause, since));
  }

  /**
   * Leave the queue; for a fresh owner also drop any hold an attempt whose reply was lost may
   * have left (no other acquisition can carry that owner).
   */
  async cancel(req: AcquireRequest<RedisTicket>, ticket: RedisTicket | undefined): Promise<void> {
    if (!ticket && !req.freshOwner) return;
    const waiterId = ticket?.waiterId ?? (req.wait ? `${this.#clientId}.${req.ownerId}` : '');
    this.#inbox.forget(waiterId);
    if (this.#closed) return;
    // Behind a command the server has not answered (it is paused, or the network black-holed):
    // this one runs after it on the same connection whenever the server answers, and waiting
    // for it would hold the caller for the whole command timeout.
    const owing = this.#commands.owing;
    const done = this.#commands.evalSource(CANCEL, this.#keys.of(req.lockId), [
      waiterId,
      this.#inboxPrefix,
      req.ownerId,
      req.freshOwner ? '1' : '0',
    ]);
    if (owing) done.catch(() => undefined);
    else await done;
  }

  async extend(grant: Grant<RedisGrantData>, ttlMs: number): Promise<Extension> {
    this.#assertOpen();
    const keys = this.#keys.of(grant.lockId).slice(0, 3);
    const ok = await this.#commands.eval(EXTEND, keys, [grant.data.field, KIND_LETTER[grant.kind], grant.token.toString(), ttlMs]);
    if (ok !== 1) throw new LockLostError(grant.lockId, 'not-held', { context: { backend: this.name } });
    return { ttlMs };
  }

  /** Not an async function: a release that messaged nobody costs one reaction on the command's promise. */
  release(grant: Grant<RedisGrantData>): Promise<boolean> {
    if (this.#closed) return Promise.reject(this.#closedError());
    const sentAt = performance.now();
    const args = [grant.data.field, KIND_LETTER[grant.kind], grant.token.toString(), this.#inboxPrefix];
    return this.#commands
      .eval(RELEASE, this.#keys.of(grant.lockId), args)
      .then((ok) => (typeof ok === 'string' ? this.#messaged(grant.lockId, ok, sentAt) : ok === 1));
  }

  /**
   * The release messaged a waiter; its reply is that message (the waiter id first). When that waiter is in
   * this process, its inbox takes the reply as the message, and this backend's next acquire of the lock
   * waits for that (docs/backends/redis.md, "Waiting by notification").
   */
  #messaged(lockId: string, ok: string, sentAt: number): true {
    this.#contention.saw(lockId);
    const bar = ok.indexOf('|');
    const waiterId = bar < 0 ? ok : ok.slice(0, bar);
    const channel = `${this.#inboxPrefix}${waiterId.slice(0, waiterId.indexOf('.'))}`;
    const heard = this.#inboxes.heard(channel, waiterId, sentAt, HEAR_CAP_MS);
    if (!heard) return true;
    // Delivered once the caller's code after `await release()` ran (a tick runs after the
    // microtasks), before any I/O or timer: ahead of the pub/sub message, which Redis writes
    // after this reply and which is read in a later poll phase.
    process.nextTick(() => this.#inboxes.wake(channel, ok, sentAt));
    this.#waking.set(lockId, heard);
    void heard.then(() => {
      if (this.#waking.get(lockId) === heard) this.#waking.delete(lockId);
    });
    return true;
  }

  async inspect(lockId: string): Promise<LockState> {
    this.#assertOpen();
    const [h, x, t, q, qx, qw] = this.#keys.of(lockId);
    return readInspect(lockId, await this.#commands.eval(INSPECT, [h, x, t, q, qx, qw], [])).state;
  }

  /** One page of the locks with a holder or a waiter, by SCAN (docs/backends/redis.md, "Listing"). */
  async list(req: ListRequest): Promise<ListPage> {
    this.#assertOpen();
    return listPage({ commands: this.#commands, prefix: this.#prefix, scan: this.#scan() }, req);
  }

  /**
   * End every hold of `lockId` at once, step its fencing counter up by one and let the next
   * in line take over, as a release would (one script).
   */
  async forceRelease(lockId: string): Promise<number> {
    this.#assertOpen();
    return Number(await this.#commands.eval(FORCE, this.#keys.of(lockId), [this.#inboxPrefix]));
  }

  /**
   * The lock ids under `req.prefix` whose holds or queue changed, as the scripts publish them
   * on `<prefix>changes`, on a connection of its own (docs/backends/redis.md, "Watching").
   */
  changes(req: { readonly prefix: string; readonly signal: AbortSignal }): AsyncIterable<string | null> {
    this.#assertOpen();
    return redisChanges({
      commands: this.#commands,
      open: () => this.#client.duplicate(),
      keyPrefix: this.#prefix,
      prefix: req.prefix,
      signal: AbortSignal.any([req.signal, this.#closing.signal]),
    });
  }

  /** The client's SCAN, unless it is a Cluster (whose SCAN reaches one random node). */
  #scan(): Scan | undefined {
    const c = this.#client as RedisClientLike & { nodes?: unknown };
    if (!c.scan || typeof c.nodes === 'function') return undefined;
    const scan = c.scan.bind(c);
    return (cursor, pattern, count) => this.#commands.bounded('SCAN', scan(cursor, 'MATCH', pattern, 'COUNT', count));
  }

  async close(): Promise<void> {
    if (this.#closed) return;
    this.#closed = true;
    this.#closing.abort();
    this.#inbox.close();
    this.#commands.close();
    if (this.#ownsClient) await closeClient(this.#client);
  }

  /** True after `close()`. */
  get closed(): boolean {
    return this.#closed;
  }

  #assertOpen(): void {
    if (this.#closed) throw this.#closedError();
  }

  #closedError(): BackendUnavailableError {
    return new BackendUnavailableError(this.name, 'the redis backend is closed');
  }
}
