/**
 * Waiting for a Redlock: a release publishes on the lock's channel on every master it
 * deleted from, and a waiter is woken by the first message from ANY master (a dead master
 * must not silence the others). One subscriber connection per master, opened at the first
 * wait; one subscription per lock while somebody in this client waits for it. Every wait is
 * also bounded by a fallback poll with jitter (a message lost in a reconnect costs at most
 * that). See docs/backends/redlock.md, "Waiting".
 */
import { sleep, withDeadline, type WakeCause } from '../kit.js';
import type { RedisSubscriberClient } from '../redis-wire/clients.js';
import type { RedlockNode } from './quorum.js';

/** How long a SUBSCRIBE may take before the wait goes on without that master. */
const SUBSCRIBE_BOUND_MS = 1_000;
/** Distinct releases remembered per lock, to wake one sleeper per release. */
const RECENT = 8;
/**
 * A release is acted on once a majority of masters announced it, or this long after the
 * first announcement (a master may have had no key to delete, or be down).
 */
const GRACE_MS = 10;

/** One lock watched by this client: its channel, how many acquisitions wait, what arrived. */
export interface Watch {
  readonly channel: string;
  refs: number;
  /** Messages received on the channel (from any master). */
  seen: number;
  /** Resolves once every reachable master confirmed the subscription (bounded). */
  ready: Promise<void>;
  subscribed: boolean;
  /** Wake-ups of the waits in progress, oldest first. */
  readonly sleepers: Set<() => void>;
  /** Payloads of the last releases acted on (a release arrives once per master). */
  readonly recent: string[];
  /** Releases announced by fewer than a majority of masters so far: count and grace timer. */
  readonly pending: Map<string, { count: number; readonly timer: NodeJS.Timeout }>;
}

/** The wake-ups of one Redlock client. */
export class Wakeups {
  readonly #nodes: readonly RedlockNode[];
  readonly #quorum: number;
  readonly #subscribers: (RedisSubscriberClient | undefined)[];
  readonly #watches = new Map<string, Watch>();
  #closed = false;

  /** Wake-ups over `nodes` (subscriber connections are opened lazily); `quorum` = majority. */
  constructor(nodes: readonly RedlockNode[], quorum: number) {
    this.#nodes = nodes;
    this.#quorum = quorum;
    this.#subscribers = nodes.map(() => undefined);
  }

  /** Start (or share) the subscription to `channel`. */
  watch(channel: string): Watch {
    const existing = this.#watches.get(channel);
    if (existing) {
      existing.refs += 1;
      return existing;
    }
    const w: Watch = {
      channel,
      refs: 1,
      seen: 0,
      ready: Promise.resolve(),
      subscribed: false,
      sleepers: new Set(),
      recent: [],
      pending: new Map(),
    };
    w.ready = this.#subscribe(w);
    this.#watches.set(channel, w);
    return w;
  }

  /** One acquisition stopped waiting on `w`; the last one unsubscribes. */
  unwatch(w: Watch): void {
    w.refs -= 1;
    if (w.refs > 0 || this.#watches.get(w.channel) !== w) return;
    this.#watches.delete(w.channel);
    for (const p of w.pending.values()) clearTimeout(p.timer);
    w.pending.clear();
    for (const sub of this.#subscribers) void sub?.unsubscribe(w.channel).catch(() => undefined);
  }

  /**
   * Resolve when a message arrived on `w` after `seenBefore`, after `delayMs`, or reject with
   * `signal.reason`. An attempt sent before the subscription was confirmed may have missed a
   * release: then resolve at once (once subscribed) so the caller attempts again.
   */
  async wait(w: Watch, seenBefore: number, subscribedBefore: boolean, delayMs: number, signal: AbortSignal): Promise<WakeCause> {
    signal.throwIfAborted();
    if (!subscribedBefore) {
      await withDeadline(w.ready, { signal });
      return 'poll';
    }
    if (w.seen > seenBefore) return 'notification';
    const ctl = new AbortController();
    const onAbort = (): void => ctl.abort(signal.reason);
    signal.addEventListener('abort', onAbort, { once: true });
    const wake = (): void => ctl.abort('woken');
    w.sleepers.add(wake);
    try {
      await sleep(delayMs, ctl.signal);
      return 'poll';
    } catch (err) {
      if (signal.aborted) throw signal.reason;
      if (err !== 'woken') throw err;
      return 'notification';
    } finally {
      w.sleepers.delete(wake);
      signal.removeEventListener('abort', onAbort);
    }
  }

  /** Close every subscriber connection. */
  close(): void {
    this.#closed = true;
    for (const w of this.#watches.values()) {
      for (const p of w.pending.values()) clearTimeout(p.timer);
      for (const wake of w.sleepers) wake();
    }
    this.#watches.clear();
    for (const sub of this.#subscribers.splice(0)) sub?.disconnect(false);
  }

  async #subscribe(w: Watch): Promise<void> {
    const each = this.#nodes.map((_n, i) => {
      const p = Promise.resolve().then(() => this.#subscriber(i).subscribe(w.channel));
      return withDeadline(p, { timeoutMs: SUBSCRIBE_BOUND_MS });
    });
    await Promise.allSettled(each);
    w.subscribed = true;
  }

  #subscriber(i: number): RedisSubscriberClient {
    const open = this.#subscribers[i];
    if (open) return open;
    const node = this.#nodes[i];
    if (!node || this.#closed) throw new Error('redlock wake-ups closed');
    const sub = node.subscriber();
    sub.on('error', () => undefined);
    sub.on('message', (channel: string, message: string) => this.#onMessage(channel, message));
    this.#subscribers[i] = sub;
    return sub;
  }

  /**
   * A release reaches every master, so it arrives up to N times (its payload is the released
   * value). It is acted on once a majority of masters announced it — an attempt made on the
   * first message would find the key still present on masters that had not yet run the
   * release, and split the vote — or after a short grace. It then wakes ONE sleeper of this
   * client, the oldest: the lock can go to one waiter only, and waking them all would make
   * them split the vote (Redlock's herd). The woken one's own release wakes the next; the
   * others still have their fallback poll.
   */
  #onMessage(channel: string, message: string): void {
    const w = this.#watches.get(channel);
    if (!w) return;
    w.seen += 1;
    if (w.recent.includes(message)) return;
    let p = w.pending.get(message);
    if (!p) {
      const timer = setTimeout(() => this.#act(w, message), GRACE_MS);
      timer.unref();
      p = { count: 0, timer };
      w.pending.set(message, p);
    }
    p.count += 1;
    if (p.count >= this.#quorum) this.#act(w, message);
  }

  #act(w: Watch, message: string): void {
    const p = w.pending.get(message);
    if (!p) return;
    clearTimeout(p.timer);
    w.pending.delete(message);
    w.recent.push(message);
    if (w.recent.length > RECENT) w.recent.shift();
    const first = w.sleepers.values().next();
    if (!first.done) first.value();
  }
}
