/**
 * The wake-up inbox of one Redis client: one pub/sub channel (`<prefix>w:<client id>`) on a
 * second connection, and the local waiters it wakes. A state change that lets the queue head
 * go publishes the head's waiter id to the head's client only, so one release wakes one
 * waiter in one process. A fair hand-off's message also carries the grant (token and the
 * server time its claim window ends), so the waiter can hold on receipt. The subscriber is
 * pinged while anyone waits; a silent or reconnected subscriber wakes every waiter for a
 * re-check (a lost message costs at most a health-check period). See
 * docs/backends/redis.md, "Waiting by notification".
 */
import { backendLog, BackendUnavailableError, raceAbort, type WakeCause } from '../kit.js';
import type { RedisSubscriberClient } from './clients.js';
import type { RedisCommands } from './commands.js';

const log = backendLog('redis');

/** What the inbox had delivered when an attempt was sent (a later wake-up is not lost). */
export interface InboxMark {
  /** The subscription epoch (undefined: not subscribed then). */
  readonly epoch: number | undefined;
  /** Messages received so far. */
  readonly seen: number;
}

/** A hand-off a release made to one of this client's waiters, as its message carried it. */
export interface HandOff {
  /** The fencing token of the handed hold. */
  readonly token: string;
  /** Server time (ms) at which the handed hold runs out unless claimed. */
  readonly expiresAt: number;
  /**
   * The secret of the waiter's attempt that the release script read from the queue entry:
   * a message without the current one was not sent by a release (anyone may PUBLISH).
   */
  readonly secret: string;
  /** The message count when it arrived (compared with an {@link InboxMark}). */
  readonly seen: number;
}

/** One waiter inside {@link Inbox.wait}. */
interface Sleeper {
  readonly waiterId: string | undefined;
  wake(): void;
  /** Re-check by local monotonic time `at` at the latest. */
  recheckBy(at: number): void;
}

/**
 * The open inboxes a release may find its waiter in, by channel. When a release messaged a
 * waiter listed here, the releasing backend's next acquire of that lock waits until the
 * waiter heard its message ({@link InboxDirectory.heard}), so that it does not barge in ahead
 * of the wake-up; the release itself does not wait. A backend lists its own inbox in the
 * directory it was given (by default the process's, {@link InboxDirectory.process}).
 */
export class InboxDirectory {
  /** The directory backends use unless given one: shared by every backend of this process. */
  static readonly process = new InboxDirectory();
  readonly #inboxes = new Map<string, Inbox>();

  /**
   * Resolve once the message a release just sent to `waiterId` (on `channel`) was heard, when
   * that waiter's inbox is listed here: its wake-up (its attempt, or its hold on receipt) then
   * runs before the releaser's own next acquire of that lock, in a hot loop say.
   * Undefined when the waiter is not here or already heard since `sentAt` (the release's send
   * time); the wait ends after `capMs` at most (a message lost with a dropped subscriber).
   */
  heard(channel: string, waiterId: string, sentAt: number, capMs: number): Promise<void> | undefined {
    return this.#inboxes.get(channel)?.heard(waiterId, sentAt, capMs);
  }

  /**
   * A release's reply is the message it sent a waiter (on `channel`, its id first): when that
   * waiter waits here, take the reply as its message now instead of when the message, which
   * passes through the server's pub/sub, arrives (a hand-off held on receipt, or a wake-up).
   */
  wake(channel: string, message: string, sentAt: number): void {
    this.#inboxes.get(channel)?.deliver(message, sentAt);
  }

  /** List `inbox` under `channel`. */
  add(channel: string, inbox: Inbox): void {
    this.#inboxes.set(channel, inbox);
  }

  /** Unlist `inbox` (if `channel` still names it). */
  remove(channel: string, inbox: Inbox): void {
    if (this.#inboxes.get(channel) === inbox) this.#inboxes.delete(channel);
  }
}

/** The inbox of one client; see the module comment. */
export class Inbox {
  readonly #open: () => RedisSubscriberClient;
  readonly #channel: string;
  readonly #commands: RedisCommands;
  readonly #healthCheckMs: number;
  readonly #directory: InboxDirectory;
  #subscriber: RedisSubscriberClient | undefined;
  #readyOnce = false;
  #epoch: number | undefined;
  #epochs = 0;
  #subscribing: Promise<void> | undefined;
  #received = 0;
  /** Per local waiter, the message count at its last wake-up. */
  readonly #wokenAt = new Map<string, number>();
  /** Per local waiter, the latest hand-off its messages carried. */
  readonly #handed = new Map<string, HandOff>();
  /** Per local waiter, when (local time) its latest message arrived. */
  readonly #heardAt = new Map<string, number>();
  /** Releases of this process waiting until a local waiter's message arrives. */
  readonly #hearers = new Map<string, Set<() => void>>();
  /** Per local waiter, the latest "re-check by" (local time) a message set, and when it came. */
  readonly #recheck = new Map<string, { readonly at: number; readonly seen: number }>();
  /** Waiter ids of acquisitions in this client that may still wait (their wake-ups are kept). */
  readonly #localIds = new Set<string>();
  readonly #sleepers = new Set<Sleeper>();
  #healthTimer: NodeJS.Timeout | undefined;
  #healthInFlight = false;
  #closed = false;

  /**
   * `open` makes the subscriber connection (at the first wait); `channel` is this client's
   * inbox; `commands` bounds the SUBSCRIBE round trip; `directory` lists this inbox until
   * {@link close}.
   */
  constructor(
    open: () => RedisSubscriberClient,
    channel: string,
    commands: RedisCommands,
    healthCheckMs: number,
    directory: InboxDirectory,
  ) {
    this.#open = open;
    this.#channel = channel;
    this.#commands = commands;
    this.#healthCheckMs = healthCheckMs;
    this.#directory = directory;
    directory.add(channel, this);
  }

  /** See {@link InboxDirectory.heard}: `waiterId` is a waiter of this inbox. */
  heard(waiterId: string, sentAt: number, capMs: number): Promise<void> | undefined {
    if (this.#epoch === undefined || !this.#localIds.has(waiterId)) return undefined;
    if ((this.#heardAt.get(waiterId) ?? -Infinity) >= sentAt) return undefined;
    let hearers = this.#hearers.get(waiterId);
    if (!hearers) {
      hearers = new Set();
      this.#hearers.set(waiterId, hearers);
    }
    const set = hearers;
    return new Promise<void>((resolve) => {
      let timer: NodeJS.Timeout | undefined;
      let over = false;
      const done = (): void => {
        over = true;
        clearTimeout(timer);
        set.delete(done);
        if (set.size === 0 && this.#hearers.get(waiterId) === set) this.#hearers.delete(waiterId);
        resolve();
      };
      set.add(done);
      // The cap's timer is armed once the release's caller ran: arming a timer right after
      // an idle spell cost the release 0.03–0.05 ms before it resolved (docs/benchmarks.md,
      // "Redis: release() with a waiter against one round trip").
      process.nextTick(() => {
        if (!over) timer = setTimeout(done, capMs);
      });
    });
  }

  /** Note the inbox state before an attempt of `waiterId` is sent. */
  mark(waiterId: string): InboxMark {
    if (waiterId !== '') this.#localIds.add(waiterId);
    return { epoch: this.#epoch, seen: this.#received };
  }

  /**
   * A release of this process, sent at `sentAt`, sent `message` to one of this inbox's waiters
   * and had it back as its reply (see {@link InboxDirectory.wake}): take it as that message,
   * sooner; not when the message was heard already. The message still counts when it comes
   * (a spare re-check at worst; a waiter that held on receipt has forgotten its id by then).
   */
  deliver(message: string, sentAt: number): void {
    const bar = message.indexOf('|');
    const waiterId = bar < 0 ? message : message.slice(0, bar);
    if (!this.#localIds.has(waiterId)) return;
    if ((this.#heardAt.get(waiterId) ?? -Infinity) >= sentAt) return;
    this.#onMessage(message);
  }

  /** The acquisition of `waiterId` ended: drop its wake-up state. */
  forget(waiterId: string): void {
    if (waiterId === '') return;
    this.#localIds.delete(waiterId);
    this.#wokenAt.delete(waiterId);
    this.#handed.delete(waiterId);
    this.#recheck.delete(waiterId);
    this.#heardAt.delete(waiterId);
  }

  /** The hand-off made to `waiterId` whose message arrived after `mark`, if any. */
  handedSince(waiterId: string, mark: InboxMark): HandOff | undefined {
    const h = this.#handed.get(waiterId);
    return h && h.seen > mark.seen ? h : undefined;
  }

  /**
   * Resolve when `waiterId` was messaged since `mark`, or after `delayMs` (sooner when a
   * message since `mark` asked for a re-check by a deadline). If the inbox was
   * not subscribed when the attempt was sent, subscribe and resolve at once: the re-check
   * then happens after the subscription, so no wake-up falls between the two.
   */
  wait(waiterId: string | undefined, mark: InboxMark | undefined, delayMs: number, signal: AbortSignal): Promise<WakeCause> {
    if (this.#epoch === undefined || mark === undefined || mark.epoch !== this.#epoch) {
      if (waiterId !== undefined) this.#localIds.add(waiterId);
      return raceAbort(this.#subscribe(), signal).then(() => (mark !== undefined ? 'poll' : this.#sleep(waiterId, mark, delayMs, signal)));
    }
    return this.#sleep(waiterId, mark, delayMs, signal);
  }

  /**
   * The subscribed wait itself. Not async: a wake-up resolves the caller's promise directly,
   * without the extra microtask turns of an async function that returns a promise (each
   * one a step of the hand-off's path after an idle wait, docs/benchmarks.md, "Redis: the
   * client's own cost").
   */
  #sleep(waiterId: string | undefined, mark: InboxMark | undefined, delayMs: number, signal: AbortSignal): Promise<WakeCause> {
    if (waiterId !== undefined && mark && (this.#wokenAt.get(waiterId) ?? 0) > mark.seen) return Promise.resolve('notification');
    let due = performance.now() + Math.max(1, delayMs);
    const recheck = waiterId === undefined ? undefined : this.#recheck.get(waiterId);
    if (recheck && mark && recheck.seen > mark.seen) due = Math.min(due, recheck.at);
    return new Promise<WakeCause>((resolve, reject) => {
      const sleeper: Sleeper = {
        waiterId,
        wake: () => finish(undefined, 'notification'),
        recheckBy: (at) => {
          if (at >= due) return;
          due = at;
          clearTimeout(timer);
          timer = setTimeout(() => finish(), Math.max(1, at - performance.now()));
        },
      };
      const finish = (err?: unknown, cause: WakeCause = 'poll'): void => {
        clearTimeout(timer);
        signal.removeEventListener('abort', onAbort);
        if (this.#sleepers.delete(sleeper)) this.#sleepingChanged();
        if (err === undefined) resolve(cause);
        else reject(err);
      };
      const onAbort = (): void => finish(signal.reason);
      // Ref'd: a caller awaiting a lock keeps the process alive (cleared when it settles).
      let timer = setTimeout(() => finish(), Math.max(1, due - performance.now()));
      signal.addEventListener('abort', onAbort, { once: true });
      this.#sleepers.add(sleeper);
      this.#sleepingChanged();
    });
  }

  /** Wake every sleeper (their next attempt sees the closed backend) and drop the connection. */
  close(): void {
    if (this.#closed) return;
    this.#closed = true;
    clearInterval(this.#healthTimer);
    this.#healthTimer = undefined;
    for (const s of [...this.#sleepers]) s.wake();
    this.#localIds.clear();
    this.#wokenAt.clear();
    this.#handed.clear();
    this.#recheck.clear();
    this.#heardAt.clear();
    this.#directory.remove(this.#channel, this);
    for (const hearers of [...this.#hearers.values()]) for (const done of [...hearers]) done();
    const sub = this.#subscriber;
    this.#subscriber = undefined;
    sub?.disconnect(false);
  }

  #connection(): RedisSubscriberClient {
    if (this.#subscriber) return this.#subscriber;
    const sub = this.#open();
    this.#subscriber = sub;
    // ioredis emits 'error' on every failed reconnect; an unheard 'error' must not crash anything.
    sub.on('error', () => undefined);
    sub.on('message', (_channel, message) => this.#onMessage(message));
    sub.on('ready', () => {
      if (!this.#readyOnce) {
        this.#readyOnce = true;
        return;
      }
      // A reconnect: messages may have been lost while it was down.
      if (log.enabled) log('inbox: pub/sub reconnected, subscribing again and waking %d waiters', this.#sleepers.size);
      this.#reset();
    });
    sub.on('close', () => {
      if (this.#subscriber === sub) this.#reset();
    });
    return sub;
  }

  #reset(): void {
    this.#epoch = undefined;
    this.#subscribing = undefined;
    for (const s of [...this.#sleepers]) s.wake();
  }

  /** Subscribe (once per connection); resolves when Redis confirmed it. */
  #subscribe(): Promise<void> {
    if (this.#closed) return Promise.reject(new BackendUnavailableError('redis', 'the redis backend is closed'));
    if (this.#epoch !== undefined) return Promise.resolve();
    if (!this.#subscribing) {
      const p: Promise<void> = this.#commands.bounded('subscribe', this.#connection().subscribe(this.#channel)).then(() => {
        if (this.#subscribing === p) {
          this.#epoch = ++this.#epochs;
          this.#subscribing = undefined;
        }
      });
      p.catch(() => {
        if (this.#subscribing === p) this.#subscribing = undefined;
      });
      this.#subscribing = p;
    }
    return this.#subscribing;
  }

  /**
   * A message is the id of the waiter that should re-check now, followed for a hand-off by
   * `|token|expiresAt|secret`; or `<id>|next|<ms>`: the lock was handed to the waiter ahead, so
   * re-check within that claim window, not now (`after_release` in lua/prelude-handoff.lua).
   */
  #onMessage(message: string): void {
    this.#received += 1;
    const [waiterId = '', token, expiresAt, secret = ''] = message.split('|');
    // A release waiting on this message goes on in the check phase, after every microtask:
    // the waiter's wake-up below (its attempt or claim already written) runs first.
    const hearers = this.#hearers.get(waiterId);
    if (hearers) setImmediate(() => hearers.forEach((done) => done()));
    if (!this.#localIds.has(waiterId)) return;
    this.#heardAt.set(waiterId, performance.now());
    if (token === 'next') {
      // The window ends that long after the release; a few ms more for the message's trip.
      const at = performance.now() + Number(expiresAt) + 5;
      if (!(at < Infinity)) return;
      this.#recheck.set(waiterId, { at, seen: this.#received });
      for (const s of this.#sleepers) if (s.waiterId === waiterId) s.recheckBy(at);
      return;
    }
    this.#wokenAt.set(waiterId, this.#received);
    if (token !== undefined && expiresAt !== undefined && /^\d+$/.test(token)) {
      this.#handed.set(waiterId, { token, expiresAt: Number(expiresAt), secret, seen: this.#received });
    }
    for (const s of [...this.#sleepers]) if (s.waiterId === waiterId) s.wake();
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
    const done = (healthy: boolean): void => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      this.#healthInFlight = false;
      if (healthy) return;
      if (log.enabled) log('inbox: pub/sub connection silent for %dms, reconnecting', this.#healthCheckMs * 2);
      this.#reset();
      if (this.#subscriber === sub) sub.disconnect(true);
    };
    const timer = setTimeout(() => done(false), this.#healthCheckMs * 2);
    timer.unref();
    sub.ping().then(
      () => done(true),
      () => done(false),
    );
  }
}
