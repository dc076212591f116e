/**
 * `GET /v1/events?prefix=`: the changes of the locks under a prefix as Server-Sent Events,
 * from `locker.watch()`, one watch per prefix shared by the streams (docs/serve.md, "Events"). One event per change, named by
 * its type (`acquired`, `released`, `expired`, `lost`, `waiting`, `abandoned`), its data the
 * change as JSON with the token as a decimal string. The service's own records are never sent.
 */
import type { FastifyInstance } from 'fastify';
import type { Locker } from '../locker.js';
import { diff, snapshot } from '../observe/diff.js';
import type { WatchEvent } from '../observe/watch.js';
import { RESERVED_PREFIX } from './records.js';
import { events as eventsSchema } from './schemas.js';
import { ServeError } from './sessions.js';

/** A comment line this often keeps proxies from closing an idle stream (ms). */
const HEARTBEAT_MS = 15_000;

/** One change as an SSE frame. */
export function frame(e: WatchEvent): string {
  const data = JSON.stringify(e, (_k, v: unknown) => (typeof v === 'bigint' ? v.toString() : v));
  return `event: ${e.type}\ndata: ${data}\n\n`;
}

/** One open stream: where its frames go and how it ends on a watch error. */
interface Listener {
  send(frame: string): void;
  fail(err: unknown): void;
}

/**
 * One `locker.watch()` per prefix on a replica, shared by every stream open on it: a hundred
 * web views cost one watch (one subscription, one read per change), not a hundred
 * (docs/benchmarks.md, "The lock service"). The watch starts with the first stream of its
 * prefix and stops with the last. Each stream gets its own initial state from a listing.
 */
export class WatchHub {
  readonly #feeds = new Map<string, { listeners: Set<Listener>; stop: AbortController }>();
  constructor(
    private readonly locker: Locker,
    private readonly everyMs: number,
  ) {}

  /** Follow `prefix`; the returned function unsubscribes. */
  subscribe(prefix: string, listener: Listener): () => void {
    let feed = this.#feeds.get(prefix);
    if (!feed) {
      const created = { listeners: new Set<Listener>(), stop: new AbortController() };
      this.#feeds.set(prefix, created);
      this.#run(prefix, created);
      feed = created;
    }
    feed.listeners.add(listener);
    const own = feed;
    return () => {
      own.listeners.delete(listener);
      if (own.listeners.size === 0) {
        own.stop.abort();
        if (this.#feeds.get(prefix) === own) this.#feeds.delete(prefix);
      }
    };
  }

  #run(prefix: string, feed: { listeners: Set<Listener>; stop: AbortController }): void {
    const changes = this.locker.watch({ prefix, signal: feed.stop.signal, everyMs: this.everyMs });
    void (async () => {
      for await (const e of changes) {
        // The watch's initial events (its first listing, once) go to the streams open then:
        // a stream that opened before the watch's subscription was in place misses nothing
        // (it may see a lock twice as initial, which a view reads as one).
        if (e.lockId.startsWith(RESERVED_PREFIX)) continue;
        const f = frame(e);
        for (const l of feed.listeners) l.send(f);
      }
    })().catch((err: unknown) => {
      if (this.#feeds.get(prefix) === feed) this.#feeds.delete(prefix);
      if (!feed.stop.signal.aborted) for (const l of feed.listeners) l.fail(err);
    });
  }
}

/** The locks under `prefix` now, as initial events (what a watch starts with). */
async function initialFrames(locker: Locker, prefix: string, signal: AbortSignal): Promise<string> {
  const now = diff(undefined, await snapshot(await locker.backend(), prefix, signal), Date.now());
  return now
    .filter((e) => !e.lockId.startsWith(RESERVED_PREFIX))
    .map(frame)
    .join('');
}

/** Register the events route; `everyMs` is the polling period on backends that are not notified. */
export function eventRoutes(app: FastifyInstance, locker: Locker, everyMs: number): void {
  const hub = new WatchHub(locker, everyMs);
  app.get('/v1/events', { schema: eventsSchema, config: { need: 'read' } }, async (request, reply) => {
    const prefix = (request.query as { prefix?: string }).prefix ?? '';
    if (prefix.startsWith(RESERVED_PREFIX)) throw new ServeError(400, 'INVALID_ARGUMENT', `'${RESERVED_PREFIX}' is the service's own`);
    const stop = new AbortController();
    reply.hijack();
    const res = reply.raw;
    res.writeHead(200, { 'content-type': 'text/event-stream', 'cache-control': 'no-cache', connection: 'keep-alive' });
    res.write(': stream open\n\n');
    // Changes that come while the initial listing is read wait for it; frames of one tick go out in one write.
    let pending: string[] | undefined = [];
    let batch = '';
    const flush = (): void => {
      if (batch !== '' && !res.destroyed) res.write(batch);
      batch = '';
    };
    const send = (f: string): void => {
      if (pending) return void pending.push(f);
      if (batch === '') setImmediate(flush);
      batch += f;
    };
    const unsubscribe = hub.subscribe(prefix, {
      send,
      fail: (err) => {
        res.write(`event: error\ndata: ${JSON.stringify({ code: 'BACKEND_UNAVAILABLE', message: (err as Error).message })}\n\n`);
        stop.abort();
      },
    });
    const beat = setInterval(() => res.write(': keepalive\n\n'), HEARTBEAT_MS);
    beat.unref();
    res.once('close', () => stop.abort());
    try {
      res.write(await initialFrames(locker, prefix, stop.signal));
      const waiting = pending;
      pending = undefined;
      for (const f of waiting) send(f);
      if (!stop.signal.aborted) await new Promise((resolve) => stop.signal.addEventListener('abort', resolve, { once: true }));
    } catch (err) {
      if (!stop.signal.aborted)
        res.write(`event: error\ndata: ${JSON.stringify({ code: 'BACKEND_UNAVAILABLE', message: (err as Error).message })}\n\n`);
    } finally {
      unsubscribe();
      clearInterval(beat);
      stop.abort();
      flush();
      res.end();
    }
  });
}
