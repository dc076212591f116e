/**
 * Watching by notification on etcd (docs/backends/etcd.md, "Watching"): etcd watches on the
 * key ranges of the locks under a lock-id prefix and of their fence keys. Every holder and
 * waiter is a key, so an acquisition, a queued waiter, a release, a forced release and a
 * lease expiry (etcd deletes the lease's keys) are each a PUT or DELETE event on a key whose
 * segment decodes to the lock id. Nothing is written for it: the acquisition path is untouched.
 */
import type { IKeyValue } from 'etcd3';
import type { EtcdClient } from './client.js';
import { encodeLockId, lockIdOf } from './layout.js';

/** What {@link EtcdBackend.changes} is asked for. */
export interface ChangesRequest {
  /** Only lock ids that start with this (may be empty). */
  readonly prefix: string;
  /** Aborted when the watcher stops: the iteration ends and the etcd watches are cancelled. */
  readonly signal: AbortSignal;
}

/** Wait before re-creating a watch the server cancelled (history compacted, a member's refusal). */
const RECREATE_MS = 1_000;
const FENCE = '%fence/';

/**
 * The lock id a key under `backendPrefix` belongs to, or undefined when the key is not a lock
 * key (`<L>/<leaseHex>`) nor a fence key (`%fence/<L>`): other data under the prefix.
 */
export function lockIdOfKey(backendPrefix: string, key: string): string | undefined {
  if (!key.startsWith(backendPrefix)) return undefined;
  const rest = key.slice(backendPrefix.length);
  if (rest.startsWith(FENCE)) {
    const seg = rest.slice(FENCE.length);
    return seg.includes('/') ? undefined : lockIdOf(seg);
  }
  const slash = rest.indexOf('/');
  if (slash <= 0) return undefined;
  const leaf = rest.slice(slash + 1);
  // A lock key is one level under the lock's segment, as the listing reads it.
  if (leaf === '' || leaf.includes('/')) return undefined;
  return lockIdOf(rest.slice(0, slash));
}

/**
 * The key prefixes to watch for lock ids starting with `idPrefix`: the encoding keeps prefixes,
 * so an id prefix is a key prefix. With no id prefix the backend's whole prefix covers both the
 * locks and the fences in one watch.
 */
export function watchedPrefixes(backendPrefix: string, idPrefix: string): string[] {
  if (idPrefix === '') return [backendPrefix];
  const enc = encodeLockId(idPrefix);
  return [`${backendPrefix}${enc}`, `${backendPrefix}${FENCE}${enc}`];
}

/**
 * The lock ids under `req.prefix` as etcd's watches report their keys' writes and deletions;
 * `null` once every watch is in place, and again after a watch was re-established.
 */
export function watchChanges(client: EtcdClient, backendPrefix: string, req: ChangesRequest): AsyncIterable<string | null> {
  return {
    [Symbol.asyncIterator]: () => new ChangeFeed(client, backendPrefix, req)[Symbol.asyncIterator](),
  };
}

type Watcher = ReturnType<ReturnType<EtcdClient['raw']['watch']>['watcher']>;

/** One `changes()` call: its watches, its queue of ids, and the consumer waiting on it. */
class ChangeFeed {
  readonly #queue: (string | null)[] = [];
  readonly #queued = new Set<string>();
  readonly #watchers = new Map<string, Watcher>();
  readonly #connected = new Set<string>();
  readonly #timers = new Set<NodeJS.Timeout>();
  #owedNull = true;
  /** Set once: by the signal, or by the consumer leaving the loop (the signal may never abort). */
  #closed = false;
  #wake: (() => void) | undefined;
  readonly #stop: () => void;
  readonly #client: EtcdClient;
  readonly #backendPrefix: string;
  readonly #req: ChangesRequest;

  constructor(client: EtcdClient, backendPrefix: string, req: ChangesRequest) {
    this.#client = client;
    this.#backendPrefix = backendPrefix;
    this.#req = req;
    this.#stop = () => this.#close();
    if (req.signal.aborted) {
      this.#closed = true;
      return;
    }
    req.signal.addEventListener('abort', this.#stop, { once: true });
    for (const p of watchedPrefixes(backendPrefix, req.prefix)) this.#watch(p);
  }

  async *[Symbol.asyncIterator](): AsyncGenerator<string | null> {
    try {
      while (!this.#closed) {
        const next = this.#queue.shift();
        if (next === undefined) {
          await new Promise<void>((resolve) => (this.#wake = resolve));
          continue;
        }
        if (next !== null) this.#queued.delete(next);
        yield next;
      }
    } finally {
      this.#close();
    }
  }

  #watch(prefix: string): void {
    const w = this.#client.watch().prefix(prefix).watcher();
    this.#watchers.set(prefix, w);
    w.on('connected', () => {
      if (this.#closed) return;
      this.#connected.add(prefix);
      if (this.#owedNull && this.#connected.size === this.#watchers.size) {
        this.#owedNull = false;
        this.#push(null);
      }
    });
    w.on('disconnected', () => this.#lost(prefix));
    w.on('put', (kv: IKeyValue) => this.#seen(kv, true));
    w.on('delete', (kv: IKeyValue) => this.#seen(kv, false));
    // The server cancelled the watch (its start revision was compacted away, or it refused):
    // the package drops it, so a new one starts from now, and the core re-lists at its `null`.
    w.on('error', () => {
      this.#lost(prefix);
      if (this.#closed) return;
      const t = setTimeout(() => {
        this.#timers.delete(t);
        if (!this.#closed) this.#watch(prefix);
      }, RECREATE_MS);
      t.unref();
      this.#timers.add(t);
    });
  }

  #lost(prefix: string): void {
    this.#connected.delete(prefix);
    this.#owedNull = true;
  }

  #seen(kv: IKeyValue, put: boolean): void {
    // Until every watch is in place (`null` owed) nothing is passed on: the core lists after
    // the `null`, and that listing covers an event of a watch already in place. A feed yields
    // `null` first (docs/observability.md, "Watching"); the etcd package attaches watches one
    // at a time, so the lock watch can report a write before the fence watch exists.
    if (this.#closed || this.#owedNull) return;
    const key = kv.key.toString('utf8');
    const id = lockIdOfKey(this.#backendPrefix, key);
    if (id === undefined || !id.startsWith(this.#req.prefix)) return;
    // Every holder's and waiter's key is attached to a lease; a put without one under a
    // lock segment is other data (a fence key has none and is a change of its lock).
    if (put && kv.lease === '0' && !key.startsWith(`${this.#backendPrefix}${FENCE}`)) return;
    if (this.#queued.has(id)) return;
    this.#queued.add(id);
    this.#push(id);
  }

  #push(item: string | null): void {
    this.#queue.push(item);
    const wake = this.#wake;
    this.#wake = undefined;
    wake?.();
  }

  #close(): void {
    this.#closed = true;
    this.#req.signal.removeEventListener('abort', this.#stop);
    for (const t of this.#timers) clearTimeout(t);
    this.#timers.clear();
    // Our listeners stay (they check #closed): the package's own listeners on the watcher
    // must stay too for its cancellation to complete.
    for (const w of this.#watchers.values()) void w.cancel().catch(() => undefined);
    this.#watchers.clear();
    this.#connected.clear();
    const wake = this.#wake;
    this.#wake = undefined;
    wake?.();
  }
}
