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

/** The keep-alive stream of the lease API. */
export type KeepAliveStream = IDuplexStream<ILeaseKeepAliveRequest, ILeaseKeepAliveResponse>;

/** One key as the recipes see it. */
export interface Entry {
  readonly key: string;
  readonly createRevision: bigint;
  readonly lease: string;
  readonly value: Buffer;
}

/** An etcd client: the pool and the few RPCs the recipe uses. */
export class EtcdClient {
  readonly raw: Etcd3;
  readonly #timeoutMs: number;
  readonly #secrets: string[];

  constructor(opts: EtcdClientOptions) {
    this.#timeoutMs = opts.operationTimeoutMs;
    this.#secrets = opts.password ? [opts.password] : [];
    const timeout = opts.operationTimeoutMs;
    this.raw = new Etcd3({
      hosts: opts.hosts.map((h) => `${h.host.includes(':') ? `[${h.host}]` : h.host}:${h.port}`),
      // Unary calls get a deadline (a silent server must not hold a call forever); the
      // keep-alive and watch streams live on, watched by their owners.
      defaultCallOptions: (ctx) => (ctx.isStream ? {} : { deadline: Date.now() + timeout }),
      ...(opts.username !== undefined ? { auth: { username: opts.username, password: opts.password ?? '' } } : {}),
    });
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
      throw unavailable('etcd', what, err, { secrets: this.#secrets });
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

  keepAliveStream(): Promise<KeepAliveStream> {
    return this.call('lease keep-alive', () => this.raw.leaseClient.leaseKeepAlive());
  }

  close(): void {
    this.raw.close();
  }
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

/** The keys of a range response. */
export function entriesOf(res: IRangeResponse | undefined): Entry[] {
  return (res?.kvs ?? []).map((kv: IKeyValue) => ({
    key: kv.key.toString('utf8'),
    createRevision: BigInt(kv.create_revision),
    lease: kv.lease,
    value: kv.value,
  }));
}
