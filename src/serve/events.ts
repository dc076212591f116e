/**
 * `GET /v1/events?prefix=`: the changes of the locks under a prefix as Server-Sent Events,
 * straight from `locker.watch()` (docs/serve.md, "Events"). One event per change, named by
 * its type (`acquired`, `released`, `expired`, `lost`, `waiting`, `abandoned`), its data the
 * change as JSON with the token as a decimal string. The service's own records are never sent.
 */
import type { FastifyInstance } from 'fastify';
import type { Locker } from '../locker.js';
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

/** Register the events route; `everyMs` is the polling period on backends that are not notified. */
export function eventRoutes(app: FastifyInstance, locker: Locker, everyMs: number): void {
  app.get('/v1/events', { schema: eventsSchema, config: { need: 'read' } }, async (request, reply) => {
    const prefix = (request.query as { prefix?: string }).prefix ?? '';
    if (prefix.startsWith(RESERVED_PREFIX)) throw new ServeError(400, 'INVALID_ARGUMENT', `'${RESERVED_PREFIX}' is the service's own`);
    const stop = new AbortController();
    const changes = locker.watch({ prefix, signal: stop.signal, everyMs });
    reply.hijack();
    const res = reply.raw;
    res.writeHead(200, { 'content-type': 'text/event-stream', 'cache-control': 'no-cache', connection: 'keep-alive' });
    res.write(': stream open\n\n');
    const beat = setInterval(() => res.write(': keepalive\n\n'), HEARTBEAT_MS);
    beat.unref();
    res.once('close', () => stop.abort());
    try {
      for await (const e of changes) {
        if (!e.lockId.startsWith(RESERVED_PREFIX)) res.write(frame(e));
      }
    } catch (err) {
      if (!stop.signal.aborted)
        res.write(`event: error\ndata: ${JSON.stringify({ code: 'BACKEND_UNAVAILABLE', message: (err as Error).message })}\n\n`);
    } finally {
      clearInterval(beat);
      stop.abort();
      res.end();
    }
  });
}
