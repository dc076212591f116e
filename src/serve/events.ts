/**
 * `GET /v1/events?prefix=&mode=`: the locks under a prefix as Server-Sent Events
 * (docs/serve.md, "Events"), from one `locker.watch()` per prefix shared by the streams.
 * `mode=events` (the default): every change, named by its type (`acquired`, `released`,
 * `expired`, `lost`, `waiting`, `abandoned`), its data the change as JSON with the token as a
 * decimal string. `mode=state`: per lock that changed, its state as `GET /v1/locks/{lockId}`
 * answers it, at most once every `stateEveryMs` (what the web view shows). The service's own
 * records are never sent.
 */
import type { FastifyInstance } from 'fastify';
import type { Locker } from '../locker.js';
import { diff, snapshot } from '../observe/diff.js';
import type { WatchEvent } from '../observe/watch.js';
import { raceAbort } from '../util/time.js';
import { RESERVED_PREFIX } from './records.js';
import { events as eventsSchema } from './schemas.js';
import { ServeError } from './sessions.js';
import { listStates, StateFeed, stateFrame, type Listener } from './state-feed.js';
import { SseStream, type Snapshot } from './stream.js';

/** A comment line this often keeps proxies from closing an idle stream (ms). */
const HEARTBEAT_MS = 15_000;
const HEARTBEAT = Buffer.from(': keepalive\n\n');
/**
 * `mode=events`: the changes of this long go out together, one write per stream. A change is
 * sent at most this much later; a hundred streams of a lock handed on hundreds of times a
 * second cost a hundred writes per batch, not per change (docs/benchmarks.md, "The lock service").
 */
const BATCH_MS = 10;

/** What a stream sends: every change, or each changed lock's state. */
export type StreamMode = 'events' | 'state';

/** How the event streams of a replica behave (docs/serve.md, "Events"). */
export interface StreamOptions {
  /** Bytes a stream may have waiting unsent before it drops frames and later resyncs. @default 1048576 */
  readonly bufferBytes: number;
  /** `mode=state`: a changed lock's state is sent at most this often (ms). @default 250 */
  readonly stateEveryMs: number;
}

/** Defaults of {@link StreamOptions}. */
export const DEFAULT_STREAM_OPTIONS: StreamOptions = Object.freeze({ bufferBytes: 1 << 20, stateEveryMs: 250 });

/** One change as an SSE frame. */
export function frame(e: WatchEvent): string {
  const data = JSON.stringify(e, (_k, v: unknown) => (typeof v === 'bigint' ? v.toString() : v));
  return `event: ${e.type}\ndata: ${data}\n\n`;
}

/** One shared watch of a prefix for `mode=events` streams. */
interface Feed {
  readonly listeners: Set<Listener>;
  readonly stop: AbortController;
  /** The frames of this tick, encoded once when the tick ends. */
  batch: string;
}

/**
 * One `locker.watch()` per prefix on a replica, shared by every `mode=events` stream open on
 * it: a hundred streams cost one watch (one subscription, one read per change), not a hundred
 * (docs/benchmarks.md, "The lock service"). The watch starts with the first stream of its
 * prefix and stops with the last. A batch's frames are encoded once and the same Buffer is
 * written to every stream. `mode=state` streams share a {@link StateFeed} instead.
 */
export class WatchHub {
  readonly #feeds = new Map<string, Feed>();
  readonly #states = new Map<string, StateFeed>();
  constructor(
    private readonly locker: Locker,
    private readonly everyMs: number,
    private readonly stateEveryMs: number,
  ) {}

  /** The state feed of `prefix`, started by its first stream (for its `ready` and `seen`). */
  stateFeed(prefix: string): StateFeed {
    let feed = this.#states.get(prefix);
    if (!feed) {
      const created = new StateFeed(this.locker, prefix, this.everyMs, this.stateEveryMs);
      this.#states.set(prefix, created);
      created.start(() => {
        if (this.#states.get(prefix) === created) this.#states.delete(prefix);
      });
      feed = created;
    }
    return feed;
  }

  /** Follow `prefix`; the returned function unsubscribes. */
  subscribe(prefix: string, mode: StreamMode, listener: Listener): () => void {
    if (mode === 'state') {
      const feed = this.stateFeed(prefix);
      feed.listeners.add(listener);
      return () => {
        feed.listeners.delete(listener);
        if (feed.listeners.size > 0) return;
        feed.close();
        if (this.#states.get(prefix) === feed) this.#states.delete(prefix);
      };
    }
    let feed = this.#feeds.get(prefix);
    if (!feed) {
      feed = { listeners: new Set<Listener>(), stop: new AbortController(), batch: '' };
      this.#feeds.set(prefix, feed);
      this.#run(prefix, feed);
    }
    const own = feed;
    own.listeners.add(listener);
    return () => {
      own.listeners.delete(listener);
      if (own.listeners.size > 0) return;
      own.stop.abort();
      if (this.#feeds.get(prefix) === own) this.#feeds.delete(prefix);
    };
  }

  #run(prefix: string, feed: Feed): void {
    const changes = this.locker.watch({ prefix, signal: feed.stop.signal, everyMs: this.everyMs });
    void (async () => {
      for await (const e of changes) {
        // The watch's initial events (its first listing, once) go to the streams open then:
        // a stream that opened before the watch's subscription was in place misses nothing
        // (it may see a lock twice as initial, which a view reads as one).
        if (e.lockId.startsWith(RESERVED_PREFIX)) continue;
        if (feed.batch === '') setTimeout(() => this.#sendBatch(feed), BATCH_MS);
        feed.batch += frame(e);
      }
    })().catch((err: unknown) => {
      if (this.#feeds.get(prefix) === feed) this.#feeds.delete(prefix);
      if (!feed.stop.signal.aborted) for (const l of feed.listeners) l.fail(err);
    });
  }

  #sendBatch(feed: Feed): void {
    const frames = Buffer.from(feed.batch);
    feed.batch = '';
    for (const l of feed.listeners) l.deliver(frames);
  }
}

/** `mode=events`: the holds and waiters under `prefix` now, as initial events (what a watch starts with). */
function initialEvents(locker: Locker, prefix: string): Snapshot {
  return async (signal) => {
    const now = diff(undefined, await snapshot(await locker.backend(), prefix, signal), Date.now());
    return now
      .filter((e) => !e.lockId.startsWith(RESERVED_PREFIX))
      .map(frame)
      .join('');
  };
}

/** `mode=state`: the state of every lock under `prefix` now, read once the feed follows changes. */
function initialStates(locker: Locker, feed: StateFeed, prefix: string): Snapshot {
  return async (signal) => {
    await raceAbort(feed.ready, signal);
    const infos = await listStates(locker, prefix, signal);
    feed.seen(infos);
    return infos.map(stateFrame).join('');
  };
}

const schema = {
  ...eventsSchema,
  querystring: {
    type: 'object',
    properties: {
      ...eventsSchema.querystring.properties,
      mode: { type: 'string', enum: ['events', 'state'], description: 'every change (default), or each changed lock’s state' },
    },
    additionalProperties: false,
  },
} as const;

/** Register the events route; `everyMs` is the polling period on backends that are not notified. */
export function eventRoutes(app: FastifyInstance, locker: Locker, everyMs: number, options: Partial<StreamOptions> = {}): void {
  const opts = { ...DEFAULT_STREAM_OPTIONS, ...options };
  const hub = new WatchHub(locker, everyMs, opts.stateEveryMs);
  app.get('/v1/events', { schema, config: { need: 'read' } }, async (request, reply) => {
    const q = request.query as { prefix?: string; mode?: StreamMode };
    const prefix = q.prefix ?? '';
    const mode = q.mode ?? 'events';
    if (prefix.startsWith(RESERVED_PREFIX)) throw new ServeError(400, 'INVALID_ARGUMENT', `'${RESERVED_PREFIX}' is the service's own`);
    const stop = new AbortController();
    reply.hijack();
    const res = reply.raw;
    res.writeHead(200, { 'content-type': 'text/event-stream', 'cache-control': 'no-cache', connection: 'keep-alive' });
    res.write(': stream open\n\n');
    const read = mode === 'state' ? initialStates(locker, hub.stateFeed(prefix), prefix) : initialEvents(locker, prefix);
    const stream = new SseStream(res, opts.bufferBytes, read, stop);
    // Subscribed before the first snapshot: what changes while it is read is queued, not missed.
    const unsubscribe = hub.subscribe(prefix, mode, stream);
    const beat = setInterval(() => stream.deliver(HEARTBEAT), HEARTBEAT_MS);
    beat.unref();
    res.once('close', () => stop.abort());
    try {
      await stream.sync();
      if (!stop.signal.aborted) await new Promise((resolve) => stop.signal.addEventListener('abort', resolve, { once: true }));
    } finally {
      unsubscribe();
      clearInterval(beat);
      stop.abort();
      res.end();
    }
  });
}
