/**
 * `GET /v1/locks/{lockId}/history`: a lock's recent hand-offs (acquired, released, expired,
 * lost), for the lock's page of the web view (docs/serve.md, "Web view"). A replica keeps
 * them in memory from one `locker.watch()` of every lock, started by the first request for a
 * history and stopped after ten minutes without one, so a replica nobody looks at costs
 * nothing. The history is this replica's: it begins when its watch began (`since`), and two
 * replicas may show different beginnings.
 */
import type { FastifyInstance } from 'fastify';
import type { Locker } from '../locker.js';
import type { WatchEvent } from '../observe/watch.js';
import { BoundedMap } from '../util/bounded-map.js';
import { RESERVED_PREFIX } from './records.js';
import { checkLockId, READ } from './routes.js';
import { errorSchema, lockParams } from './schemas.js';

/** One change of a lock's holders, as the history keeps it. */
export interface HandoffEntry {
  readonly at: number;
  readonly type: 'acquired' | 'released' | 'expired' | 'lost';
  readonly holder: string;
  readonly ownerId: string;
  readonly kind: string;
  readonly token?: string;
}

/** Bounds of the history of one replica. */
export interface HistoryLimits {
  /** Entries kept per lock (the newest). @default 20 */
  readonly perLock: number;
  /** Locks kept (the most recently changed). @default 10000 */
  readonly locks: number;
  /** Stop watching after this long without a history request (ms). @default 600000 */
  readonly idleMs: number;
}

const DEFAULTS: HistoryLimits = { perLock: 20, locks: 10_000, idleMs: 600_000 };
const KEPT = new Set(['acquired', 'released', 'expired', 'lost']);

/** The hand-offs this replica saw, per lock. */
export class History {
  readonly #locker: Locker;
  readonly #everyMs: number;
  readonly #limits: HistoryLimits;
  /** Insertion order is recency: a changed lock moves to the end; the first is evicted. */
  readonly #entries: BoundedMap<string, HandoffEntry[]>;
  #watch: AbortController | undefined;
  #since = 0;
  #idle: NodeJS.Timeout | undefined;

  constructor(locker: Locker, everyMs: number, limits: Partial<HistoryLimits> = {}) {
    this.#locker = locker;
    this.#everyMs = everyMs;
    this.#limits = { ...DEFAULTS, ...limits };
    this.#entries = new BoundedMap(this.#limits.locks);
  }

  /** The hand-offs of `lockId`, oldest first, and since when this replica has watched. */
  recent(lockId: string): { since: number; handoffs: readonly HandoffEntry[] } {
    this.#follow();
    return { since: this.#since, handoffs: this.#entries.get(lockId) ?? [] };
  }

  /** Record one change (exported through the class for the watch loop and tests). */
  record(e: WatchEvent): void {
    if (e.initial === true || !KEPT.has(e.type) || e.lockId.startsWith(RESERVED_PREFIX)) return;
    const list = this.#entries.get(e.lockId) ?? [];
    this.#entries.delete(e.lockId);
    const i = e.identity;
    const entry: HandoffEntry = {
      at: e.at,
      type: e.type as HandoffEntry['type'],
      holder: i === undefined ? e.ownerId : i.pid === 0 ? i.name : `${i.name} ${i.pid}@${i.host}`,
      ownerId: e.ownerId,
      kind: e.kind,
      ...(e.token === undefined ? {} : { token: e.token.toString() }),
    };
    const at = successorOf(list, entry);
    list.splice(at, 0, at < list.length ? { ...entry, at: Math.min(entry.at, list[at]?.at ?? entry.at) } : entry);
    if (list.length > this.#limits.perLock) list.splice(0, list.length - this.#limits.perLock);
    this.#entries.set(e.lockId, list);
  }

  /** Stop watching and forget. */
  close(): void {
    clearTimeout(this.#idle);
    this.#watch?.abort();
    this.#watch = undefined;
    this.#entries.clear();
  }

  #follow(): void {
    clearTimeout(this.#idle);
    this.#idle = setTimeout(() => this.close(), this.#limits.idleMs);
    this.#idle.unref();
    if (this.#watch !== undefined) return;
    const stop = new AbortController();
    this.#watch = stop;
    this.#since = Date.now();
    void (async () => {
      try {
        for await (const e of this.#locker.watch({ prefix: '', signal: stop.signal, everyMs: this.#everyMs })) this.record(e);
      } catch {
        // The watch failed (backend down): the next request starts another.
      }
      if (this.#watch === stop) this.#watch = undefined;
    })();
  }
}

/**
 * Where an ended exclusive hold goes: before the acquisitions of greater tokens already
 * recorded. A watch reports a hand-off seen at once as the new hold first, at its own start,
 * and the end at the moment it was seen; an exclusive hold ended no later than the next one
 * began, so it is placed, and timed, before it.
 */
function successorOf(list: readonly HandoffEntry[], ended: HandoffEntry): number {
  let at = list.length;
  if (ended.type === 'acquired' || (ended.kind !== 'mutex' && ended.kind !== 'write') || ended.token === undefined) return at;
  while (at > 0) {
    const prev = list[at - 1];
    if (prev?.type !== 'acquired' || prev.token === undefined || BigInt(prev.token) <= BigInt(ended.token)) break;
    at -= 1;
  }
  return at;
}

const entry = {
  type: 'object',
  properties: {
    at: { type: 'integer', description: 'ms since the epoch' },
    type: { type: 'string', enum: ['acquired', 'released', 'expired', 'lost'] },
    holder: { type: 'string' },
    ownerId: { type: 'string' },
    kind: { type: 'string' },
    token: { type: 'string' },
  },
} as const;

const historySchema = {
  summary: "A lock's recent hand-offs, as this replica saw them since `since`",
  tags: ['locks'],
  params: lockParams,
  response: {
    200: {
      type: 'object',
      properties: { lockId: { type: 'string' }, since: { type: 'integer' }, handoffs: { type: 'array', items: entry } },
      required: ['lockId', 'since', 'handoffs'],
    },
    400: errorSchema,
    401: errorSchema,
    403: errorSchema,
  },
} as const;

/** Register the history route; the watch ends when the app closes. */
export function historyRoutes(app: FastifyInstance, locker: Locker, everyMs: number): History {
  const history = new History(locker, everyMs);
  app.addHook('onClose', async () => history.close());
  app.get('/v1/locks/:lockId/history', { schema: historySchema, config: READ }, async (request) => {
    const lockId = checkLockId((request.params as { lockId: string }).lockId);
    return { lockId, ...history.recent(lockId) };
  });
  return history;
}
