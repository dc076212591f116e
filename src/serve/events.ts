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
import { RESERVED_PREFIX } from './records.js';
import { lockJson } from './routes.js';
import { events as eventsSchema } from './schemas.js';
import { ServeError } from './sessions.js';
import { SseStream, type Snapshot } from './stream.js';

/** A comment line this often keeps proxies from closing an idle stream (ms). */
const HEARTBEAT_MS = 15_000;
const HEARTBEAT = Buffer.from(': keepalive\n\n');
/** Locks read at once when a state tick reads the locks that changed. */
const READS_AT_ONCE = 32;

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

/** One lock's state as an SSE frame. */
function stateFrame(info: Parameters<typeof lockJson>[0]): string {
  return `event: state\ndata: ${JSON.stringify(lockJson(info))}\n\n`;
}

/** One open stream, as the hub sees it. */
interface Listener {
  deliver(frames: Buffer): void;
  fail(err: unknown): void;
}

/** One shared watch of a prefix and what it feeds. */
interface Feed {
  readonly listeners: Record<StreamMode, Set<Listener>>;
  readonly stop: AbortController;
  /** The frames of this tick for `events` streams, encoded once when the tick ends. */
  batch: string;
  /** Locks changed since the last state tick. */
  readonly dirty: Set<string>;
  timer: NodeJS.Timeout | undefined;
  reading: boolean;
  lastStateAt: number;
}

/**
 * One `locker.watch()` per prefix on a replica, shared by every stream open on it: a hundred
 * web views cost one watch (one subscription, one read per change), not a hundred
 * (docs/benchmarks.md, "The lock service"). The watch starts with the first stream of its
 * prefix and stops with the last. A tick's frames are encoded once and the same Buffer is
 * written to every stream; state streams get one read of each changed lock per tick.
 */
export class WatchHub {
  readonly #feeds = new Map<string, Feed>();
  constructor(
    private readonly locker: Locker,
    private readonly everyMs: number,
    private readonly stateEveryMs: number,
  ) {}

  /** Follow `prefix`; the returned function unsubscribes. */
  subscribe(prefix: string, mode: StreamMode, listener: Listener): () => void {
    let feed = this.#feeds.get(prefix);
    if (!feed) {
      const listeners = { events: new Set<Listener>(), state: new Set<Listener>() };
      feed = { listeners, stop: new AbortController(), batch: '', dirty: new Set(), timer: undefined, reading: false, lastStateAt: 0 };
      this.#feeds.set(prefix, feed);
      this.#run(prefix, feed);
    }
    const own = feed;
    own.listeners[mode].add(listener);
    return () => {
      own.listeners[mode].delete(listener);
      if (own.listeners.events.size + own.listeners.state.size === 0) {
        own.stop.abort();
        clearTimeout(own.timer);
        if (this.#feeds.get(prefix) === own) this.#feeds.delete(prefix);
      }
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
        if (feed.listeners.events.size > 0) {
          if (feed.batch === '') setImmediate(() => this.#sendBatch(feed));
          feed.batch += frame(e);
        }
        if (feed.listeners.state.size > 0) {
          feed.dirty.add(e.lockId);
          this.#scheduleStates(feed);
        }
      }
    })().catch((err: unknown) => {
      if (this.#feeds.get(prefix) === feed) this.#feeds.delete(prefix);
      clearTimeout(feed.timer);
      if (feed.stop.signal.aborted) return;
      for (const l of [...feed.listeners.events, ...feed.listeners.state]) l.fail(err);
    });
  }

  #sendBatch(feed: Feed): void {
    const frames = Buffer.from(feed.batch);
    feed.batch = '';
    for (const l of feed.listeners.events) l.deliver(frames);
  }

  #scheduleStates(feed: Feed): void {
    if (feed.timer !== undefined || feed.reading || feed.stop.signal.aborted) return;
    const wait = Math.max(0, feed.lastStateAt + this.stateEveryMs - Date.now());
    feed.timer = setTimeout(() => void this.#sendStates(feed), wait);
  }

  /** One state tick: read each lock that changed since the last (after its change), send them all at once. */
  async #sendStates(feed: Feed): Promise<void> {
    feed.timer = undefined;
    feed.reading = true;
    const ids = [...feed.dirty];
    feed.dirty.clear();
    try {
      const text = await readStates(this.locker, ids);
      if (text !== '' && !feed.stop.signal.aborted) {
        const frames = Buffer.from(text);
        for (const l of feed.listeners.state) l.deliver(frames);
      }
    } catch {
      // The backend did not answer: read them again next tick (the watch fails the streams if it stays down).
      for (const id of ids) feed.dirty.add(id);
    } finally {
      feed.reading = false;
      feed.lastStateAt = Date.now();
      if (feed.dirty.size > 0) this.#scheduleStates(feed);
    }
  }
}

/** The states of `ids` as frames, a bounded number read at once. */
async function readStates(locker: Locker, ids: readonly string[]): Promise<string> {
  let text = '';
  for (let i = 0; i < ids.length; i += READS_AT_ONCE) {
    const infos = await Promise.all(ids.slice(i, i + READS_AT_ONCE).map((id) => locker.inspect(id)));
    for (const info of infos) text += stateFrame(info);
  }
  return text;
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

/** `mode=state`: the state of every lock under `prefix` now, every page of the listing. */
function initialStates(locker: Locker, prefix: string): Snapshot {
  return async (signal) => {
    let text = '';
    let cursor: string | undefined;
    do {
      const page = await locker.list({ prefix, limit: 1000, signal, ...(cursor === undefined ? {} : { cursor }) });
      for (const l of page.locks) if (!l.lockId.startsWith(RESERVED_PREFIX)) text += stateFrame(l);
      cursor = page.cursor;
    } while (cursor !== undefined && !signal.aborted);
    return text;
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
    const read = mode === 'state' ? initialStates(locker, prefix) : initialEvents(locker, prefix);
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
