/**
 * The Redis backend: a single Redis (or one Redis Cluster slot per lock) through ioredis.
 *
 * Every operation is one Lua script (see `scripts.ts`) sent with EVALSHA and re-sent with
 * EVAL when the server answers NOSCRIPT (after a restart or `SCRIPT FLUSH`). Waiters are
 * woken through pub/sub on a second connection; see {@link RedisBackend.waitForChange}.
 */
import { createHash, randomBytes } from 'node:crypto';
import { performance } from 'node:perf_hooks';
import type {
  AcquireRequest,
  AcquireResult,
  Backend,
  Capabilities,
  Extension,
  Grant,
  HolderState,
  LockKind,
  LockState,
} from '../../backend.js';
import { BackendUnavailableError, LockLostError } from '../../errors.js';
import { ACQUIRE, CANCEL, EXTEND, INSPECT, RELEASE, type LuaScript } from './scripts.js';

/** The commands the backend sends on its main connection (ioredis `Redis` and `Cluster` both fit). */
export interface RedisCommandClient {
  evalsha(sha: string, numKeys: number, ...args: (string | number)[]): Promise<unknown>;
  eval(script: string, numKeys: number, ...args: (string | number)[]): Promise<unknown>;
}

/** The subscriber connection: what pub/sub needs (ioredis `Redis` and `Cluster` both fit). */
export interface RedisSubscriberClient {
  subscribe(...channels: string[]): Promise<unknown>;
  unsubscribe(...channels: string[]): Promise<unknown>;
  ping(): Promise<unknown>;
  on(event: 'message', listener: (channel: string, message: string) => void): unknown;
  on(event: 'ready' | 'close' | 'end', listener: () => void): unknown;
  on(event: 'error', listener: (err: Error) => void): unknown;
  disconnect(reconnect?: boolean): void;
}

/**
 * A user's own client. The backend never closes it (unless `ownsClient` is set) and talks
 * pub/sub on `client.duplicate()`, which it does close.
 */
export interface RedisClientLike extends RedisCommandClient {
  duplicate(): RedisSubscriberClient;
  quit?(): Promise<unknown>;
  disconnect?(reconnect?: boolean): void;
}

/** Options of {@link RedisBackend}. */
export interface RedisBackendOptions {
  /** Prefix of every key and channel. Default `locksmith:`. */
  readonly prefix?: string;
  /** Bound on one command (script) round trip before `BackendUnavailableError`. Default 5 000 ms. */
  readonly commandTimeoutMs?: number;
  /**
   * While anybody waits, the subscriber connection is pinged this often; a failed ping
   * wakes every waiter for a re-check and reconnects the subscriber, so a lost
   * notification costs at most about this long. Default 250 ms.
   */
  readonly healthCheckMs?: number;
  /** Quit `client` on `close()` (set when the backend created it from a URL). Default false. */
  readonly ownsClient?: boolean;
  /** Label used in error messages (the redacted URL). */
  readonly label?: string;
}

/** The ticket of a waiting acquisition: its queue entry and the wake-up state it saw. */
interface RedisTicket {
  readonly kind: 'redis-ticket';
  readonly waiterId: string;
  /** ms until the earliest holder or queue entry runs out (-1: none). */
  readonly hintMs: number;
  /** Longest wait without a message: the waiter must refresh its queue entry before it expires. */
  readonly capMs: number;
  /** The channel's subscription epoch and message count when the attempt was sent (undefined: not subscribed then). */
  readonly epoch: number | undefined;
  readonly seen: number;
  /** Local monotonic time when the attempt was sent, and the server's clock (ms) when it ran. */
  readonly sentAt: number;
  readonly serverNow: number;
}

/** A grant a release handed to a local waiter through the inbox. */
interface HandOff {
  readonly token: string;
  readonly serverNow: number;
}

/** What the backend keeps in `Grant.data`. */
interface RedisGrantData {
  readonly field: string;
}

const KIND_LETTER: Readonly<Record<LockKind, string>> = { mutex: 'm', read: 'r', write: 'w', semaphore: 's' };
const LETTER_KIND: Readonly<Record<string, LockKind>> = { m: 'mutex', r: 'read', w: 'write', s: 'semaphore' };

/** A queue entry lives this much past its refresh period without a re-attempt (as the memory backend). */
const WAITER_GRACE_MS = 1_250;
/**
 * A waiter refreshes its queue entry every third of this (its ttl, at most 30 s), so a waiter
 * that died blocks a fair queue for at most this + grace, even under a ttl of hours.
 */
const MAX_WAITER_PERIOD_MS = 30_000;

function isTicket(t: unknown): t is RedisTicket {
  return typeof t === 'object' && t !== null && (t as { kind?: unknown }).kind === 'redis-ticket';
}

function grantData(g: Grant): RedisGrantData {
  const d = g.data as { field?: unknown } | undefined;
  if (d && typeof d.field === 'string') return { field: d.field };
  // A grant from elsewhere: the mutex / rw field is the owner itself.
  return { field: g.ownerId };
}

/** A command in flight, for the shared command timeout. */
interface InFlight {
  readonly deadline: number;
  settled: boolean;
  readonly fail: (err: BackendUnavailableError) => void;
  readonly what: string;
}

/** One waiter inside waitForChange. */
interface Sleeper {
  readonly waiterId: string | undefined;
  wake(): void;
}

/** What the Redis backend can do (every capability of the seam). */
export const REDIS_CAPABILITIES: Capabilities = Object.freeze({
  fair: true,
  shared: true,
  permits: true,
  notify: true,
  lockDelay: true,
  reentrant: true,
});

/**
 * Locks on one Redis. Accepts a URL-made client or a user's own ioredis client (see
 * {@link RedisClientLike}). Capabilities: fair queues, read-write locks, semaphores,
 * pub/sub notification, lockDelay and server-side reentrancy.
 */
export class RedisBackend implements Backend {
  readonly name = 'redis';
  readonly capabilities: Capabilities = REDIS_CAPABILITIES;

  readonly #client: RedisClientLike;
  readonly #prefix: string;
  readonly #commandTimeoutMs: number;
  readonly #healthCheckMs: number;
  readonly #ownsClient: boolean;
  readonly #label: string;
  /** This client's id: waiter ids are `<id>.<n>`, wake-ups arrive on `<prefix>w:<id>`. */
  readonly #clientId = randomBytes(12).toString('base64url');
  #waiterSeq = 0;
  #subscriber: RedisSubscriberClient | undefined;
  #subscriberReadyOnce = false;
  /** Counts confirmed subscriptions of the inbox; undefined while not subscribed. */
  #epoch: number | undefined;
  #epochs = 0;
  #subscribing: Promise<void> | undefined;
  /** Inbox messages received so far, and per local waiter the count at its last wake-up. */
  #received = 0;
  readonly #wokenAt = new Map<string, number>();
  /** Waiter ids of acquisitions in this client that may still wait (their wake-ups are kept). */
  readonly #localIds = new Set<string>();
  /** Grants handed to local waiters, not yet collected by their next attempt. */
  readonly #handoffs = new Map<string, HandOff>();
  readonly #sleepers = new Set<Sleeper>();
  #healthTimer: NodeJS.Timeout | undefined;
  #healthInFlight = false;
  /**
   * Commands in flight, oldest first. They all get the same timeout, so their deadlines come
   * in this order and one timer (armed for the oldest) bounds them all: a timer per command
   * cost a setTimeout + clearTimeout pair on every script.
   */
  readonly #inFlight: InFlight[] = [];
  #deadlineTimer: NodeJS.Timeout | undefined;
  #closed = false;

  /** Wrap `client`; see {@link RedisBackendOptions}. */
  constructor(client: RedisClientLike, options: RedisBackendOptions = {}) {
    this.#client = client;
    this.#prefix = options.prefix ?? 'locksmith:';
    this.#commandTimeoutMs = options.commandTimeoutMs ?? 5_000;
    this.#healthCheckMs = options.healthCheckMs ?? 250;
    this.#ownsClient = options.ownsClient ?? false;
    this.#label = options.label ?? 'redis';
  }

  /**
   * The base of every key of `lockId`: `prefix{tag}`. The tag is the lockId itself unless
   * it contains a brace (which would cut the hash tag short, or leave it empty and split a
   * lock's keys over slots); then it is `{` + SHA-1 hex, which no brace-free lockId can equal.
   */
  keyBase(lockId: string): string {
    const tag = /[{}]/.test(lockId) ? `{${sha1Hex(lockId)}` : lockId;
    return `${this.#prefix}{${tag}}`;
  }

  #keys(lockId: string): string[] {
    const base = this.keyBase(lockId);
    return [`${base}:h`, `${base}:x`, `${base}:t`, `${base}:q`, `${base}:qx`, `${base}:qw`, `${base}:qs`];
  }

  /** Prefix of every client's inbox channel (the script appends the client id). */
  get #inboxPrefix(): string {
    return `${this.#prefix}w:`;
  }

  async tryAcquire(req: AcquireRequest): Promise<AcquireResult> {
    this.#assertOpen();
    const keys = this.#keys(req.lockId);
    const prev = isTicket(req.ticket) ? req.ticket : undefined;
    const waiterId = req.wait ? (prev?.waiterId ?? `${this.#clientId}.${(++this.#waiterSeq).toString(36)}`) : '';
    if (prev) {
      const handed = this.#handoffs.get(prev.waiterId);
      if (handed) {
        const grant = await this.#collect(req, prev, handed);
        if (grant) return { granted: true, grant };
      }
    }
    // Note what the inbox has delivered BEFORE the attempt is sent: a wake-up after this point
    // is seen by waitForChange, so a release between the attempt and the wait is not lost.
    const epoch = this.#epoch;
    const seen = this.#received;
    if (req.wait) this.#localIds.add(waiterId);
    const waiterPeriod = Math.min(req.ttlMs, MAX_WAITER_PERIOD_MS);
    const waiterTtl = waiterPeriod + WAITER_GRACE_MS;
    const sentAt = performance.now();
    let reply: unknown;
    try {
      reply = await this.#eval(ACQUIRE, keys, [
        KIND_LETTER[req.kind],
        req.permits,
        req.ownerId,
        req.ttlMs,
        req.lockDelayMs,
        req.fair ? '1' : '0',
        req.wait ? '1' : '0',
        waiterId,
        waiterTtl,
        this.#inboxPrefix,
      ]);
    } catch (err) {
      this.#forget(waiterId);
      throw err;
    }
    const [code, a, b] = asArray(reply);
    if (code === 1 || code === 2) {
      this.#forget(waiterId);
      const grant: Grant = {
        lockId: req.lockId,
        kind: req.kind,
        ownerId: req.ownerId,
        token: BigInt(String(a)),
        ttlMs: req.ttlMs,
        reentered: code === 2,
        data: { field: String(b) } satisfies RedisGrantData,
      };
      return { granted: true, grant };
    }
    if (!req.wait) return { granted: false, contended: { ticket: undefined } };
    const ticket: RedisTicket = {
      kind: 'redis-ticket',
      waiterId,
      hintMs: typeof a === 'number' ? a : Number(a),
      capMs: Math.max(10, Math.floor(waiterPeriod / 3)),
      epoch,
      seen,
      sentAt,
      serverNow: Number(b),
    };
    return { granted: false, contended: { ticket } };
  }

  /**
   * Take a grant a release handed over (no round trip). The server started its lease at
   * `handed.serverNow`; our previous attempt ran at `prev.serverNow` and was sent at
   * `prev.sentAt`, so the lease started no earlier than `prev.sentAt + (handed − prev)` on
   * our clock: vouch for what is left of it from now. If that is under half the ttl, renew
   * first. Undefined when the hold is gone (then a normal attempt follows).
   */
  async #collect(req: AcquireRequest, prev: RedisTicket, handed: HandOff): Promise<Grant | undefined> {
    this.#forget(prev.waiterId);
    const grant: Grant = {
      lockId: req.lockId,
      kind: req.kind,
      ownerId: req.ownerId,
      token: BigInt(handed.token),
      ttlMs: req.ttlMs,
      reentered: false,
      data: { field: req.ownerId } satisfies RedisGrantData,
    };
    // Both server times are whole ms: take 1 ms off the difference so rounding never helps us.
    const startedLocal = prev.sentAt + Math.max(0, handed.serverNow - prev.serverNow - 1);
    const left = req.ttlMs - (performance.now() - startedLocal);
    if (Number.isFinite(left) && left >= req.ttlMs / 2) return { ...grant, ttlMs: Math.floor(left) };
    try {
      await this.extend(grant, req.ttlMs);
      return grant;
    } catch (err) {
      if (err instanceof LockLostError) return undefined;
      throw err;
    }
  }

  /**
   * Resolve when another attempt is worth making: a message in this client's inbox that
   * names this waiter (it became the queue head, or a release handed it the lock), the
   * moment the earliest holder or queue entry runs out, or a third of `min(ttl, 30 s)` at
   * the latest (the waiter must refresh its queue entry). Only the head is woken, fair or
   * not: a release never stirs the whole queue. If the inbox was not subscribed when the
   * attempt was sent, subscribe and resolve at once: the re-check then happens after the
   * subscription, so no wake-up falls between the two.
   */
  async waitForChange(_lockId: string, ticket: unknown, signal: AbortSignal): Promise<void> {
    if (signal.aborted) throw signal.reason;
    this.#assertOpen();
    const t = isTicket(ticket) ? ticket : undefined;
    if (this.#epoch === undefined || t === undefined || t.epoch !== this.#epoch) {
      if (t) this.#localIds.add(t.waiterId);
      await this.#subscribe(signal);
      // Without a ticket there is no snapshot to compare against: wait a short bounded while.
      if (t !== undefined) return;
    }
    if (t && (this.#wokenAt.get(t.waiterId) ?? 0) > t.seen) return;
    const delay = t === undefined ? this.#healthCheckMs : Math.max(1, Math.min(t.hintMs > 0 ? t.hintMs + 2 : t.capMs, t.capMs));
    await new Promise<void>((resolve, reject) => {
      const sleeper: Sleeper = { waiterId: t?.waiterId, wake: () => finish() };
      const finish = (err?: unknown): void => {
        clearTimeout(timer);
        signal.removeEventListener('abort', onAbort);
        if (this.#sleepers.delete(sleeper)) this.#sleepingChanged();
        if (err === undefined) resolve();
        else reject(err);
      };
      const onAbort = (): void => finish(signal.reason);
      const timer = setTimeout(() => finish(), delay);
      timer.unref();
      signal.addEventListener('abort', onAbort, { once: true });
      this.#sleepers.add(sleeper);
      this.#sleepingChanged();
    });
  }

  async cancel(req: AcquireRequest, ticket: unknown): Promise<void> {
    if (!isTicket(ticket)) return;
    this.#forget(ticket.waiterId);
    if (this.#closed) return;
    await this.#eval(CANCEL, this.#keys(req.lockId), [ticket.waiterId, this.#inboxPrefix, req.ownerId]);
  }

  async extend(grant: Grant, ttlMs: number): Promise<Extension> {
    this.#assertOpen();
    const keys = this.#keys(grant.lockId);
    const { field } = grantData(grant);
    const ok = await this.#eval(EXTEND, keys.slice(0, 3), [field, KIND_LETTER[grant.kind], grant.token.toString(), ttlMs]);
    if (ok !== 1) throw new LockLostError(grant.lockId, 'not-held', { context: { backend: this.name } });
    return { ttlMs };
  }

  async release(grant: Grant): Promise<boolean> {
    this.#assertOpen();
    const { field } = grantData(grant);
    const ok = await this.#eval(RELEASE, this.#keys(grant.lockId), [
      field,
      KIND_LETTER[grant.kind],
      grant.token.toString(),
      this.#inboxPrefix,
    ]);
    // The release messaged a waiter. Redis wrote that message together with this reply; when
    // the waiter lives in this process its socket is readable in this same poll phase. Yield
    // one event-loop turn so it takes the lock (the critical path) before the releaser's own
    // continuation runs — otherwise the next holder waits behind whatever the releaser does
    // next (often: its next acquire).
    if (ok === 2) await new Promise<void>((resolve) => setImmediate(resolve));
    return ok === 1 || ok === 2;
  }

  async inspect(lockId: string): Promise<LockState> {
    this.#assertOpen();
    const k = this.#keys(lockId);
    const reply = asArray(await this.#eval(INSPECT, [k[0] ?? '', k[1] ?? '', k[2] ?? '', k[4] ?? ''], []));
    const [last, waiters, ...rest] = reply;
    const holders: HolderState[] = [];
    for (let i = 0; i + 2 < rest.length; i += 3) {
      const field = String(rest[i]);
      const [letter, count, token] = String(rest[i + 1]).split('|');
      const nul = field.indexOf('\0');
      holders.push({
        ownerId: nul >= 0 ? field.slice(0, nul) : field,
        kind: LETTER_KIND[letter ?? 'm'] ?? 'mutex',
        token: BigInt(token ?? '0'),
        expiresInMs: Number(rest[i + 2]),
        count: Number(count),
      });
    }
    return {
      lockId,
      holders,
      waiters: Number(waiters),
      ...(last === '' || last === null || last === undefined ? {} : { lastToken: BigInt(String(last)) }),
    };
  }

  async close(): Promise<void> {
    if (this.#closed) return;
    this.#closed = true;
    clearInterval(this.#healthTimer);
    this.#healthTimer = undefined;
    // Wake every sleeper: its next attempt sees the closed backend.
    for (const s of [...this.#sleepers]) s.wake();
    this.#localIds.clear();
    this.#handoffs.clear();
    this.#wokenAt.clear();
    const sub = this.#subscriber;
    this.#subscriber = undefined;
    if (sub) sub.disconnect(false);
    if (this.#ownsClient) {
      const c = this.#client;
      if (c.disconnect) c.disconnect(false);
      else if (c.quit) await c.quit().catch(() => undefined);
    }
  }

  /** True after `close()`. */
  get closed(): boolean {
    return this.#closed;
  }

  #assertOpen(): void {
    if (this.#closed) throw new BackendUnavailableError(this.name, 'the redis backend is closed');
  }

  /** EVALSHA, EVAL on NOSCRIPT; bounded by `commandTimeoutMs`; every failure a locksmith error. */
  async #eval(s: LuaScript, keys: readonly string[], args: readonly (string | number)[]): Promise<unknown> {
    const all = [...keys, ...args];
    try {
      return await this.#bounded(s.name, this.#client.evalsha(s.sha, keys.length, ...all));
    } catch (err) {
      if (err instanceof BackendUnavailableError) throw err;
      if (!isNoScript(err)) throw this.#unavailable(s.name, err);
    }
    try {
      return await this.#bounded(s.name, this.#client.eval(s.source, keys.length, ...all));
    } catch (err) {
      if (err instanceof BackendUnavailableError) throw err;
      throw this.#unavailable(s.name, err);
    }
  }

  #bounded<T>(what: string, p: Promise<T>): Promise<T> {
    // The command may still settle after we gave up; never leave its rejection unhandled.
    p.catch(() => undefined);
    return new Promise<T>((resolve, reject) => {
      const entry: InFlight = { deadline: performance.now() + this.#commandTimeoutMs, settled: false, fail: reject, what };
      const q = this.#inFlight;
      // Replies come (nearly) in order: dropping the settled head here keeps the queue short.
      while (q.length > 0 && q[0]?.settled) q.shift();
      q.push(entry);
      if (!this.#deadlineTimer) this.#armDeadline();
      p.then(
        (v) => {
          entry.settled = true;
          resolve(v);
        },
        (e: unknown) => {
          entry.settled = true;
          reject(e);
        },
      );
    });
  }

  /** Fail every command past its deadline, then wait for the oldest one still in flight. */
  #armDeadline(): void {
    this.#deadlineTimer = undefined;
    const q = this.#inFlight;
    const now = performance.now();
    for (let head = q[0]; head && (head.settled || head.deadline <= now); head = q[0]) {
      q.shift();
      if (head.settled) continue;
      head.settled = true;
      head.fail(
        new BackendUnavailableError(this.name, `redis ${head.what} got no reply within ${this.#commandTimeoutMs} ms (${this.#label})`, {
          context: { timeoutMs: this.#commandTimeoutMs },
        }),
      );
    }
    const next = q[0];
    if (!next) return;
    // setTimeout takes at most 2^31 − 1 ms (more fires at once); a later deadline just re-arms.
    const delay = Math.min(2_147_483_647, Math.max(1, Math.ceil(next.deadline - now)));
    this.#deadlineTimer = setTimeout(() => this.#armDeadline(), delay);
    this.#deadlineTimer.unref();
  }

  #unavailable(what: string, err: unknown): BackendUnavailableError {
    const msg = err instanceof Error ? err.message : String(err);
    return new BackendUnavailableError(this.name, `redis ${what} failed (${this.#label}): ${msg}`, { cause: err });
  }

  /** Drop a waiter id whose acquisition ended (granted, cancelled, failed). */
  #forget(waiterId: string): void {
    if (waiterId === '') return;
    this.#localIds.delete(waiterId);
    this.#wokenAt.delete(waiterId);
    this.#handoffs.delete(waiterId);
  }

  #getSubscriber(): RedisSubscriberClient {
    if (this.#subscriber) return this.#subscriber;
    const sub = this.#client.duplicate();
    this.#subscriber = sub;
    // ioredis emits 'error' on every failed reconnect; an unheard 'error' must not crash anything.
    sub.on('error', () => undefined);
    sub.on('message', (_channel, message) => this.#onMessage(message));
    sub.on('ready', () => {
      if (!this.#subscriberReadyOnce) {
        this.#subscriberReadyOnce = true;
        return;
      }
      // A reconnect: messages may have been lost while it was down. Resubscribe on demand and
      // let every waiter re-check.
      this.#resetSubscription();
    });
    sub.on('close', () => {
      if (this.#subscriber === sub) this.#resetSubscription();
    });
    return sub;
  }

  #resetSubscription(): void {
    this.#epoch = undefined;
    this.#subscribing = undefined;
    for (const s of [...this.#sleepers]) s.wake();
  }

  /** Subscribe the inbox (once per connection); resolves when Redis confirmed it. */
  async #subscribe(signal: AbortSignal): Promise<void> {
    if (this.#epoch !== undefined) return;
    if (!this.#subscribing) {
      const sub = this.#getSubscriber();
      const p: Promise<void> = this.#bounded('subscribe', sub.subscribe(`${this.#inboxPrefix}${this.#clientId}`)).then(
        () => {
          if (this.#subscribing === p) {
            this.#epoch = ++this.#epochs;
            this.#subscribing = undefined;
          }
        },
        (err: unknown) => {
          if (this.#subscribing === p) this.#subscribing = undefined;
          throw err instanceof BackendUnavailableError ? err : this.#unavailable('subscribe', err);
        },
      );
      p.catch(() => undefined);
      this.#subscribing = p;
    }
    const pending = this.#subscribing;
    await new Promise<void>((resolve, reject) => {
      const onAbort = (): void => reject(signal.reason);
      signal.addEventListener('abort', onAbort, { once: true });
      pending.then(
        () => {
          signal.removeEventListener('abort', onAbort);
          resolve();
        },
        (err: unknown) => {
          signal.removeEventListener('abort', onAbort);
          reject(err);
        },
      );
    });
  }

  /** `<waiterId>` (go and re-check) or `g|<waiterId>|<token>|<serverNowMs>` (the lock is yours). */
  #onMessage(message: string): void {
    this.#received += 1;
    let id = message;
    if (message.startsWith('g|')) {
      const [, wid, token, serverNow] = message.split('|');
      if (wid === undefined || token === undefined) return;
      id = wid;
      if (this.#localIds.has(id)) this.#handoffs.set(id, { token, serverNow: Number(serverNow) });
    }
    if (!this.#localIds.has(id)) return;
    this.#wokenAt.set(id, this.#received);
    for (const s of [...this.#sleepers]) if (s.waiterId === id) s.wake();
  }

  #sleepingChanged(): void {
    if (this.#sleepers.size > 0 && !this.#healthTimer && !this.#closed) {
      this.#healthTimer = setInterval(() => this.#healthCheck(), this.#healthCheckMs);
      this.#healthTimer.unref();
    } else if (this.#sleepers.size === 0 && this.#healthTimer) {
      clearInterval(this.#healthTimer);
      this.#healthTimer = undefined;
    }
  }

  /** One PING on the subscriber; no answer within two periods means it is dead or half-open. */
  #healthCheck(): void {
    const sub = this.#subscriber;
    if (!sub || this.#healthInFlight || this.#closed) return;
    this.#healthInFlight = true;
    let settled = false;
    const timer = setTimeout(() => {
      if (settled) return;
      settled = true;
      this.#healthInFlight = false;
      this.#resetSubscription();
      if (this.#subscriber === sub) sub.disconnect(true);
    }, this.#healthCheckMs * 2);
    timer.unref();
    sub.ping().then(
      () => {
        if (settled) return;
        settled = true;
        clearTimeout(timer);
        this.#healthInFlight = false;
      },
      () => {
        if (settled) return;
        settled = true;
        clearTimeout(timer);
        this.#healthInFlight = false;
        this.#resetSubscription();
      },
    );
  }
}

function sha1Hex(s: string): string {
  return createHash('sha1').update(s, 'utf8').digest('hex');
}

function asArray(reply: unknown): unknown[] {
  return Array.isArray(reply) ? (reply as unknown[]) : [reply];
}

function isNoScript(err: unknown): boolean {
  return err instanceof Error && err.message.startsWith('NOSCRIPT');
}
