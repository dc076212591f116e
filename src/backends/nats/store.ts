/**
 * The bucket: the NATS connection, one JetStream key-value bucket, reads, writes guarded by
 * a revision (compare-and-set), and one shared watch that wakes waiters
 * (docs/backends/nats.md, "Waiting"). Errors of the client become `BackendUnavailableError`;
 * a lost compare-and-set is `undefined`, never an error.
 */
import { connect, type NatsConnection } from '@nats-io/transport-node';
import { jetstream } from '@nats-io/jetstream';
import { Kvm, KvWatchInclude, type KV, type KvEntry } from '@nats-io/kv';
import { BoundedMap, InvalidArgumentError, sleep, unavailable, type HostPort } from '../kit.js';

/** What the store needs to connect. */
export interface StoreOptions {
  readonly hosts: readonly HostPort[];
  readonly bucket: string;
  readonly replicas: number;
  readonly operationTimeoutMs: number;
  readonly username?: string;
  readonly password?: string;
  readonly token?: string;
}

/** One read of a key: its value (undefined when none or deleted) and the revision to guard on. */
export interface Read {
  readonly value: Uint8Array | undefined;
  /** The revision of the key's last write (a delete marker's too), 0 when it was never written. */
  readonly revision: number;
  /** The server's time of that write. */
  readonly created: Date | undefined;
}

const NAME = 'nats';
/** How many revisions the wake-up map remembers (keys nobody waits on any more fall out). */
const SEEN_CAP = 4_096;

/** JetStream's "wrong last sequence" (10071): somebody wrote the key since our read. */
export function isConflict(err: unknown): boolean {
  const e = err as { code?: unknown; message?: unknown; api_error?: { err_code?: unknown } };
  return (
    e.code === 10071 || e.api_error?.err_code === 10071 || (typeof e.message === 'string' && e.message.includes('wrong last sequence'))
  );
}

/**
 * Open the bucket, creating it only when it does not exist: opening needs the bucket's own
 * stream leader, creating needs the cluster's meta leader (which may be the node just lost).
 */
async function openBucket(kvm: Kvm, opts: StoreOptions, version: string | undefined): Promise<KV> {
  let kv = await kvm.open(opts.bucket);
  let replicas: number;
  try {
    replicas = (await kv.status()).replicas;
  } catch (err) {
    if (!/stream not found/i.test(String((err as { message?: unknown }).message))) throw err;
    if (opts.replicas > 1) refuseReplicated(version);
    kv = await kvm.create(opts.bucket, { history: 1, replicas: opts.replicas });
    replicas = opts.replicas;
  }
  if (replicas > 1) refuseReplicated(version);
  return kv;
}

/**
 * Before nats-server 2.9.21 a replicated stream checked a write's expected revision before
 * proposing it, not in the replicated log: two concurrent updates of one key with the same
 * expected revision could both succeed (nats-io/nats-server#4320). A lock on such a bucket
 * could be granted twice, so it is refused (docs/backends/nats.md, "Replicas").
 */
function refuseReplicated(version: string | undefined): void {
  if (version !== undefined && !olderThan(version, [2, 9, 21])) return;
  throw new InvalidArgumentError(
    'url',
    `nats: a replicated bucket needs nats-server 2.9.21 or later (this server: ${version ?? 'unknown'}): ` +
      'its compare-and-set is not atomic before; use replicas=1',
  );
}

/** True when the dotted `version` is below `min`. */
function olderThan(version: string, min: readonly number[]): boolean {
  const parts = version.split(/[.-]/).map((p) => Number.parseInt(p, 10));
  for (let i = 0; i < min.length; i++) {
    const a = parts[i] ?? 0;
    const b = min[i] ?? 0;
    if (Number.isNaN(a) || a !== b) return Number.isNaN(a) || a < b;
  }
  return false;
}

/** The connection and the bucket, opened by {@link Store.open}. */
export class Store {
  readonly #nc: NatsConnection;
  readonly kv: KV;
  /** Last revision the watch saw per key, and the waiters to wake per key. */
  readonly #seen = new BoundedMap<string, Read>(SEEN_CAP);
  readonly #waiters = new Map<string, Set<(rev: number) => void>>();
  #stop: (() => void) | undefined;
  #closed = false;

  private constructor(nc: NatsConnection, kv: KV) {
    this.#nc = nc;
    this.kv = kv;
  }

  /** Connect and open (creating when missing) the bucket; the cluster may still be electing. */
  static async open(opts: StoreOptions, signal?: AbortSignal): Promise<Store> {
    const nc = await connect({
      servers: opts.hosts.map((h) => `${h.host}:${h.port}`),
      name: 'locksmith',
      maxReconnectAttempts: -1,
      reconnectTimeWait: 250,
      timeout: opts.operationTimeoutMs,
      pingInterval: 2_000,
      // Only the URL's servers: a client cut off from them must not slip back in through an
      // address the cluster gossiped (docs/backends/nats.md, "Failure modes").
      ignoreClusterUpdates: true,
      ...(opts.username !== undefined ? { user: opts.username, pass: opts.password ?? '' } : {}),
      ...(opts.token !== undefined ? { token: opts.token } : {}),
    });
    try {
      const kvm = new Kvm(jetstream(nc, { timeout: opts.operationTimeoutMs }));
      for (let attempt = 0; ; attempt++) {
        try {
          const store = new Store(nc, await openBucket(kvm, opts, nc.info?.version));
          await store.#watch();
          return store;
        } catch (err) {
          if (err instanceof InvalidArgumentError) throw err;
          // A fresh cluster, or one electing a leader after a node died, answers "no JetStream
          // leader" (503) or times out for a while: retry a bounded time.
          if (attempt >= 40 || signal?.aborted) throw err;
          await sleep(250, signal);
        }
      }
    } catch (err) {
      await nc.close().catch(() => undefined);
      throw err;
    }
  }

  /** The client port of the server this connection is on now (tests pick a node to kill by it). */
  get serverPort(): number | undefined {
    return this.#nc.info?.port;
  }

  /** Read a key (deleted keys too: their marker's revision keeps the fencing order). */
  async read(key: string): Promise<Read> {
    let e: KvEntry | null;
    try {
      e = await this.kv.get(key);
    } catch (err) {
      throw unavailable(NAME, `read ${key}`, err);
    }
    if (!e) return { value: undefined, revision: 0, created: undefined };
    return { value: e.operation === 'PUT' ? e.value : undefined, revision: e.revision, created: e.created };
  }

  /** Write `value` if the key is still at `revision` (0: never written); the new revision, or undefined on a lost race. */
  async write(key: string, value: Uint8Array, revision: number): Promise<number | undefined> {
    try {
      return revision === 0 ? await this.kv.create(key, value) : await this.kv.update(key, value, revision);
    } catch (err) {
      if (isConflict(err)) return undefined;
      throw unavailable(NAME, `write ${key}`, err);
    }
  }

  /** Delete the key if it is still at `revision`; false on a lost race. */
  async remove(key: string, revision: number): Promise<boolean> {
    try {
      await this.kv.delete(key, { previousSeq: revision });
      return true;
    } catch (err) {
      if (isConflict(err)) return false;
      throw unavailable(NAME, `delete ${key}`, err);
    }
  }

  /** Every live key matching the subject filter. */
  async keys(filter: string): Promise<string[]> {
    try {
      const out: string[] = [];
      for await (const k of await this.kv.keys(filter)) out.push(k);
      return out;
    } catch (err) {
      throw unavailable(NAME, `list ${filter}`, err);
    }
  }

  /**
   * Resolve when `key` is written past `revision`, or `ms` passed, or `signal` aborts (then
   * reject with its reason).
   */
  async waitPast(key: string, revision: number, ms: number, signal: AbortSignal): Promise<boolean> {
    signal.throwIfAborted();
    if ((this.#seen.get(key)?.revision ?? 0) > revision) return true;
    const ctl = new AbortController();
    let woken = false;
    const wake = (rev: number): void => {
      if (rev <= revision) return;
      woken = true;
      ctl.abort();
    };
    const onAbort = (): void => ctl.abort();
    signal.addEventListener('abort', onAbort, { once: true });
    let set = this.#waiters.get(key);
    if (!set) this.#waiters.set(key, (set = new Set()));
    set.add(wake);
    try {
      await sleep(ms, ctl.signal).catch(() => undefined);
      signal.throwIfAborted();
      return woken;
    } finally {
      signal.removeEventListener('abort', onAbort);
      set.delete(wake);
      if (set.size === 0) this.#waiters.delete(key);
    }
  }

  /**
   * The shared watch over every key: one ordered consumer per backend, in place before the
   * first read (so no write after a read can be missed), restarted when it ends.
   */
  async #watch(): Promise<void> {
    const it = await this.kv.watch({ include: KvWatchInclude.UpdatesOnly });
    void (async () => {
      for await (const e of it) {
        if (this.#closed) break;
        this.#saw(e.key, { value: e.operation === 'PUT' ? e.value : undefined, revision: e.revision, created: e.created });
      }
    })()
      .catch(() => undefined)
      .finally(() => {
        // Waiters fall back to their bounded poll until the watch is back.
        if (!this.#closed) setTimeout(() => void this.#watch().catch(() => undefined), 250).unref();
      });
    this.#stop = () => it.stop();
  }

  /**
   * The key as the watch last delivered it, when that is at `revision` or later: a waiter
   * decides on it without a read (a stale copy only costs a refused compare-and-set).
   */
  cached(key: string, revision: number): Read | undefined {
    const seen = this.#seen.get(key);
    return seen && seen.revision >= revision ? seen : undefined;
  }

  #saw(key: string, read: Read): void {
    const revision = read.revision;
    this.#seen.delete(key);
    this.#seen.set(key, read);
    for (const w of this.#waiters.get(key) ?? []) w(revision);
  }

  async close(): Promise<void> {
    if (this.#closed) return;
    this.#closed = true;
    this.#stop?.();
    await this.#nc.close().catch(() => undefined);
  }
}
