/**
 * The thin binding to the `etcd3` package: its gRPC connection pool (host list, failover,
 * reconnects) and its raw v3 RPC clients, with every unary call bounded. Only the raw RPCs
 * are used: the package's `Lock` is try-once on a private lease and its `Lease` reports a
 * loss only after twice the ttl (docs/backends/etcd.md, "Client library"), so the lease and
 * the lock recipe are ours.
 */
import { Etcd3, type IDeleteRangeResponse, type IKeyValue, type IRequestOp, type ITxnRequest, type ITxnResponse } from 'etcd3';
import type { ICompare, ILeaseKeepAliveRequest, ILeaseKeepAliveResponse, IDuplexStream, IRangeResponse } from 'etcd3';
import { unavailable, withDeadline, type HostPort } from '../kit.js';
import { rangeEnd } from './layout.js';

/** Options of {@link EtcdClient}. */
export interface EtcdClientOptions {
  readonly hosts: readonly HostPort[];
  /** Bound on one request (each attempt and the whole call). */
  readonly operationTimeoutMs: number;
  readonly username?: string;
  readonly password?: string;
}

/**
 * gRPC ends a failed connection's message with "Resolution note: " and nothing after it when
 * the name resolved fine, so the message reads as cut off: drop the empty note.
 */
export function withoutEmptyNote(err: unknown): unknown {
  if (!(err instanceof Error) || !/\s*Resolution note:\s*$/.test(err.message)) return err;
  // Not the original as `cause`: the error's description would repeat its untidy message.
  const tidy = new Error(err.message.replace(/\s*Resolution note:\s*$/, ''));
  return Object.assign(tidy, { name: err.name, code: (err as { code?: unknown }).code });
}

/** The keep-alive stream of the lease API. */
export type KeepAliveStream = IDuplexStream<ILeaseKeepAliveRequest, ILeaseKeepAliveResponse>;

/** One key as the recipes see it. */
export interface Entry {
  readonly key: string;
  readonly createRevision: bigint;
  /** The revision of the key's last write. */
  readonly modRevision: bigint;
  readonly lease: string;
  readonly value: Buffer;
}

/** An etcd client: the pool and the few RPCs the recipe uses. */
export class EtcdClient {
  readonly raw: Etcd3;
  readonly #timeoutMs: number;
  readonly #secrets: string[];
  readonly #make: (hosts: string[]) => Etcd3;
  readonly #hosts: string[];
  /** One client per member for the keep-alive stream, made on first use (see keepAliveStream). */
  readonly #single = new Map<number, Etcd3>();
  /** The watch that keeps the package's watch stream open (see {@link EtcdClient.watch}). */
  #keeper: { cancel(): Promise<void> } | undefined;

  constructor(opts: EtcdClientOptions) {
    this.#timeoutMs = opts.operationTimeoutMs;
    this.#secrets = opts.password ? [opts.password] : [];
    // Each attempt gets a third of the bound: a member that does not answer (paused, cut off)
    // costs one attempt, and the pool's retry goes to the next member within the bound.
    const attemptMs = Math.max(500, Math.floor(opts.operationTimeoutMs / 3));
    this.#hosts = opts.hosts.map((h) => `${h.host.includes(':') ? `[${h.host}]` : h.host}:${h.port}`);
    this.#make = (hosts) =>
      new Etcd3({
        hosts,
        // Unary calls get a deadline per attempt (a silent member must not hold a call
        // forever); the keep-alive and watch streams live on, watched by their owners.
        defaultCallOptions: (ctx) => (ctx.isStream ? {} : { deadline: Date.now() + attemptMs }),
        ...(opts.username !== undefined ? { auth: { username: opts.username, password: opts.password ?? '' } } : {}),
      });
    this.raw = this.#make(this.#hosts);
  }

  /**
   * A watch builder on the package's one watch stream. The package tears that stream down
   * when its last watch is cancelled and opens a new one for the next, which cost about a
   * millisecond of every acquire and release (a holder watches its key, docs/backends/etcd.md,
   * "Watch stream"): one idle watch on a key nobody writes keeps it open until `close()`.
   */
  watch(): ReturnType<Etcd3['watch']> {
    if (!this.#keeper) {
      const keeper = this.raw.watch().key(KEEPER_KEY).watcher();
      keeper.on('error', () => undefined);
      this.#keeper = keeper;
    }
    return this.raw.watch();
  }

  /** How many members the URL names. */
  get size(): number {
    return this.#hosts.length;
  }

  /** One call, bounded; any failure becomes a BackendUnavailableError naming the cause. */
  async call<T>(what: string, work: () => Promise<T>, signal?: AbortSignal): Promise<T> {
    const limit = this.#timeoutMs;
    try {
      return await withDeadline(work(), {
        timeoutMs: limit,
        onTimeout: () => new Error(`no answer within ${limit} ms`),
        ...(signal ? { signal } : {}),
      });
    } catch (err) {
      if (signal?.aborted && err === signal.reason) throw err;
      throw unavailable('etcd', what, withoutEmptyNote(err), { secrets: this.#secrets });
    }
  }

  txn(what: string, req: ITxnRequest, signal?: AbortSignal): Promise<ITxnResponse> {
    return this.call(what, () => this.raw.kv.txn(req), signal);
  }

  /** Every key under `prefix`, oldest create revision first. */
  async list(prefix: string, signal?: AbortSignal): Promise<{ entries: Entry[]; revision: bigint }> {
    const res = await this.call('range', () => this.raw.kv.range(rangeOp(prefix).request_range ?? {}), signal);
    return { entries: entriesOf(res), revision: BigInt(res.header.revision) };
  }

  /** Delete `key` only while its create revision is `rev` (a newer key of that name is never touched). */
  async deleteIf(key: string, rev: bigint): Promise<boolean> {
    const res = await this.txn('delete', {
      compare: [createdAt(key, rev)],
      success: [{ request_delete_range: { key: Buffer.from(key) } }],
    });
    const del: IDeleteRangeResponse | undefined = res.responses[0]?.response_delete_range;
    return res.succeeded && del !== undefined && del.deleted !== '0';
  }

  leaseGrant(ttlSeconds: number, signal?: AbortSignal): Promise<{ ID: string; TTL: string }> {
    return this.call('lease grant', () => this.raw.leaseClient.leaseGrant({ TTL: ttlSeconds }), signal);
  }

  async leaseRevoke(id: string): Promise<void> {
    await this.call('lease revoke', () => this.raw.leaseClient.leaseRevoke({ ID: id }));
  }

  /**
   * A keep-alive stream to member `index` (modulo the host list). The lease picks the member
   * itself and moves to the next one when a stream stalls: the pool would pick at random,
   * possibly the same silent member again.
   */
  keepAliveStream(index: number): Promise<KeepAliveStream> {
    const client = this.#member(index);
    return this.call('lease keep-alive', () => client.leaseClient.leaseKeepAlive());
  }

  /**
   * A read-only transaction sent first to member `index` (the one whose keep-alive answered
   * last, so likely alive), then, if that fails, through the pool: a holder's check must not
   * spend its validity on a member that stopped answering.
   */
  async txnVia(index: number, what: string, req: ITxnRequest): Promise<ITxnResponse> {
    const client = this.#member(index);
    try {
      return await this.call(what, () => client.kv.txn(req));
    } catch {
      return this.txn(what, req);
    }
  }

  #member(index: number): Etcd3 {
    const i = index % this.#hosts.length;
    let single = this.#single.get(i);
    if (!single) {
      single = this.#make([this.#hosts[i] ?? '']);
      this.#single.set(i, single);
    }
    return single;
  }

  /**
   * Close every connection now. The `etcd3` package's own close leaves a channel that is
   * still connecting (a member that accepted the connection and never answered) to a
   * one-second `waitForReady` before it closes it, which keeps the process alive that long;
   * so the gRPC clients it made are closed here first, directly: the package then finds
   * them shut down and only forgets them (docs/backends/etcd.md, "Closing"). Closing them
   * after it would not do: its pending `waitForReady` wakes a closed channel up again.
   */
  close(): void {
    void this.#keeper?.cancel().catch(() => undefined);
    this.#keeper = undefined;
    const clients = [this.raw, ...this.#single.values()];
    for (const s of clients.flatMap(grpcClientsOf)) s.close();
    for (const c of clients) c.close();
    this.#single.clear();
  }
}

/** The key of the idle watch that keeps the watch stream open: no locksmith key starts with NUL. */
const KEEPER_KEY = '\u0000locksmith/watch-stream';

/** The part of a gRPC client that closing needs. */
interface GrpcClient {
  close(): void;
}

/**
 * The gRPC clients an `Etcd3` made so far, read from its connection pool (not part of the
 * package's typed API: a shape it does not have yields none, and its own close still runs).
 */
function grpcClientsOf(client: Etcd3): GrpcClient[] {
  const pool = (client as unknown as { pool?: { hosts?: unknown } }).pool;
  const hosts = Array.isArray(pool?.hosts) ? (pool.hosts as unknown[]) : [];
  const out: GrpcClient[] = [];
  for (const host of hosts) {
    const cached = (host as { cachedServices?: Record<string, unknown> } | undefined)?.cachedServices ?? {};
    for (const s of Object.values(cached)) {
      if (typeof (s as Partial<GrpcClient> | undefined)?.close === 'function') out.push(s as GrpcClient);
    }
  }
  return out;
}

/** The compare "`key` exists with create revision `rev`" (0: "does not exist"). */
export function createdAt(key: string, rev: bigint): ICompare {
  return { key: Buffer.from(key), target: 'Create', result: 'Equal', create_revision: rev.toString() };
}

/** A range over every key under `prefix`, oldest create revision first. */
export function rangeOp(prefix: string): IRequestOp {
  const key = Buffer.from(prefix);
  return { request_range: { key, range_end: rangeEnd(key), sort_order: 'Ascend', sort_target: 'Create' } };
}

/**
 * The `limit` youngest keys under `prefix` (youngest first), only among keys created at or
 * before revision `upTo` when given: what an exclusive waiter needs to know is one key, so
 * reading it costs the same with one waiter or a thousand (docs/backends/etcd.md, "The recipe").
 */
export function youngestOp(prefix: string, limit: number, upTo?: bigint): IRequestOp {
  const key = Buffer.from(prefix);
  return {
    request_range: {
      key,
      range_end: rangeEnd(key),
      sort_order: 'Descend',
      sort_target: 'Create',
      limit,
      ...(upTo === undefined ? {} : { max_create_revision: upTo.toString() }),
    },
  };
}

/** The keys of a range response. */
export function entriesOf(res: IRangeResponse | undefined): Entry[] {
  return (res?.kvs ?? []).map((kv: IKeyValue) => ({
    key: kv.key.toString('utf8'),
    createRevision: BigInt(kv.create_revision),
    modRevision: BigInt(kv.mod_revision),
    lease: kv.lease,
    value: kv.value,
  }));
}
