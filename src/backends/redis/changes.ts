/**
 * `changes()` of the Redis backend: every script that writes or removes a hold or a queue
 * entry PUBLISHes the lock's key base (`<prefix>{tag}`) on `<prefix>changes`; a watcher
 * subscribes to that channel on a connection of its own and reads the lock id back from the
 * key base. See docs/backends/redis.md, "Watching".
 */
import type { RedisSubscriberClient } from '../redis-wire/clients.js';
import type { RedisCommands } from '../redis-wire/commands.js';
import { keysAt, lockIdAt } from '../redis-wire/keys.js';
import { readInspect } from './observe.js';
import { INSPECT } from './scripts.js';

/** What one watcher needs: a new subscriber connection, the key prefix, what to watch. */
export interface ChangesSource {
  /** Runs INSPECT, to read back the id of a lock whose keys carry a SHA-1. */
  readonly commands: RedisCommands;
  /** Opens the watcher's own connection (closed when the watch ends). */
  readonly open: () => RedisSubscriberClient;
  /** The backend's key prefix (the channel is `<keyPrefix>changes`). */
  readonly keyPrefix: string;
  /** Only lock ids that start with this. */
  readonly prefix: string;
  readonly signal: AbortSignal;
}

/** How many ids of SHA-1-tagged locks a watcher remembers (its key base → its id). */
const MAX_NAMED = 10_000;

/** A failed SUBSCRIBE is tried again this much later (or at the connection's next `ready`). */
const RETRY_MS = 1_000;

/** The channel the scripts publish changes of locks under `keyPrefix` on (`changed()` in lua/prelude-handoff.lua). */
export function changesChannel(keyPrefix: string): string {
  return `${keyPrefix}changes`;
}

/**
 * Pending notices, coalesced (a Set keeps each id once, in arrival order); `null` means
 * "re-list everything" (subscribed anew, or a lock whose id the key cannot give back).
 */
class Pending {
  readonly #items = new Set<string | null>();
  #wake: (() => void) | undefined;

  push(item: string | null): void {
    this.#items.add(item);
    this.#wake?.();
  }

  /** Take everything pending, waiting for the first notice (or `wake`) when there is none. */
  async take(): Promise<(string | null)[]> {
    if (this.#items.size === 0) await new Promise<void>((resolve) => (this.#wake = resolve));
    this.#wake = undefined;
    const items = [...this.#items];
    this.#items.clear();
    return items;
  }

  /** End a pending `take` (on abort). */
  wake(): void {
    this.#wake?.();
  }
}

/**
 * Notices of locks whose key base carries a SHA-1 (an id with a brace), which does not give
 * the id back: the hold or queue records do (docs/backends/redis.md, "Listing"), read with
 * one INSPECT and remembered. A lock already empty whose id was never seen here gives `null`,
 * and the core re-lists.
 */
function namer(src: ChangesSource, pending: Pending): (base: string) => void {
  const named = new Map<string, string>();
  const push = (id: string): void => {
    if (id.startsWith(src.prefix)) pending.push(id);
  };
  return (base) => {
    const known = named.get(base);
    if (known !== undefined) return push(known);
    const [h, x, t, q, qx, qw] = keysAt(base);
    void src.commands.eval(INSPECT, [h, x, t, q, qx, qw], []).then(
      (reply) => {
        const id = readInspect('', reply).storedId;
        if (src.signal.aborted) return;
        if (id === undefined) return pending.push(null);
        if (named.size >= MAX_NAMED) named.clear();
        named.set(base, id);
        push(id);
      },
      () => src.signal.aborted || pending.push(null),
    );
  };
}

/**
 * The lock ids under `src.prefix` whose holds or queue changed, as the scripts publish them:
 * `null` once subscribed (and again after every re-subscription), then ids. Ends when
 * `src.signal` aborts; the connection and the retry timer go with it.
 */
export async function* redisChanges(src: ChangesSource): AsyncGenerator<string | null> {
  const { signal } = src;
  if (signal.aborted) return;
  const channel = changesChannel(src.keyPrefix);
  const pending = new Pending();
  const sub = src.open();
  let retry: NodeJS.Timeout | undefined;
  let subscribed = false;
  let inFlight = false;
  const subscribe = (): void => {
    clearTimeout(retry);
    retry = undefined;
    if (inFlight) return;
    inFlight = true;
    sub.subscribe(channel).then(
      () => {
        inFlight = false;
        if (signal.aborted || subscribed) return;
        subscribed = true;
        pending.push(null);
      },
      () => {
        inFlight = false;
        if (signal.aborted || retry) return;
        retry = setTimeout(subscribe, RETRY_MS);
        retry.unref();
      },
    );
  };
  const named = namer(src, pending);
  // ioredis emits 'error' on every failed reconnect; an unheard 'error' must not crash anything.
  sub.on('error', () => undefined);
  sub.on('message', (ch, message) => {
    if (ch !== channel) return;
    const id = lockIdAt(src.keyPrefix, message);
    if (id === undefined) named(message);
    else if (id.startsWith(src.prefix)) pending.push(id);
  });
  // Notices published while the connection was down are lost: subscribe again, then say so.
  sub.on('close', () => (subscribed = false));
  sub.on('ready', () => {
    if (!subscribed) subscribe();
  });
  const onAbort = (): void => pending.wake();
  signal.addEventListener('abort', onAbort, { once: true });
  subscribe();
  try {
    while (!signal.aborted) {
      const items = await pending.take();
      for (const item of items) {
        if (signal.aborted) return;
        yield item;
      }
    }
  } finally {
    signal.removeEventListener('abort', onAbort);
    clearTimeout(retry);
    retry = undefined;
    sub.disconnect(false);
  }
}
