/**
 * The lease of one backend: granted once, kept alive every sixth of its ttl (twice the Go
 * client's rate) over one keep-alive stream, and declared lost BEFORE the server can expire
 * it (docs/backends/etcd.md, "When is the lease lost?").
 *
 * A keep-alive unanswered for a sixth of the ttl has its stream replaced, on the next member
 * of the URL's list: a member that stopped answering is left behind deterministically.
 *
 * The server renews a lease when a keep-alive reaches it: it then expires no earlier than
 * `TTL` after that moment, which is after we sent it. So the last keep-alive the server
 * answered bounds the lease from below: it lives at least until `sentAt + TTL` on our
 * monotonic clock (less a clock-rate allowance). Every hold vouches only for time inside
 * that bound, and when it comes close without a newer answer, every hold on the lease is
 * told it is lost (`session`) while the server may still keep the keys a little longer.
 */
import { performance } from 'node:perf_hooks';
import { backendLog, lossGuardMs } from '../kit.js';
import type { EtcdClient, KeepAliveStream } from './client.js';

const log = backendLog('etcd');

const now = (): number => performance.now();

/** Why a lease ended. */
export type LeaseEnd = 'expired' | 'revoked' | 'closed';

/** The clock-rate allowance taken off every lease bound (Redlock's drift factor, 1%). */
const DRIFT = 0.01;

/** One etcd lease and its keep-alive loop. */
export class KeptAliveLease {
  /** The lease id as etcd prints it (decimal). */
  readonly id: string;
  /** The lease id as Go's `concurrency.Mutex` writes it in keys (`%x`). */
  readonly hex: string;
  /** The ttl the server granted (ms; etcd rounds up to seconds and to its minimum). */
  readonly ttlMs: number;
  readonly #client: EtcdClient;
  /** The server keeps the lease at least until this moment (monotonic ms). */
  #bound: number;
  #ended: LeaseEnd | undefined;
  readonly #listeners = new Set<(why: LeaseEnd) => void>();
  #stream: KeepAliveStream | undefined;
  /** Send times of the keep-alives on the current stream not answered yet, oldest first. */
  #sent: number[] = [];
  #tick: NodeJS.Timeout | undefined;
  #lossTimer: NodeJS.Timeout | undefined;
  /** Keep-alives the server answered (tests and benchmarks). */
  renewals = 0;

  private constructor(client: EtcdClient, id: string, ttlMs: number, sentAt: number) {
    this.#client = client;
    this.id = id;
    this.hex = BigInt(id).toString(16);
    this.ttlMs = ttlMs;
    this.#bound = sentAt + ttlMs;
  }

  /** Grant a lease of `ttlMs` (rounded up to whole seconds) and start keeping it alive. */
  static async grant(client: EtcdClient, ttlMs: number, signal?: AbortSignal): Promise<KeptAliveLease> {
    const sentAt = now();
    const res = await client.leaseGrant(Math.max(1, Math.ceil(ttlMs / 1_000)), signal);
    const s = new KeptAliveLease(client, res.ID, Number(res.TTL) * 1_000, sentAt);
    s.#armLoss();
    // The tick runs twice per keep-alive period, so a stalled stream is noticed early.
    s.#tick = setInterval(() => s.#onTick(), Math.max(50, s.ttlMs / 12));
    s.#tick.unref();
    s.#keepAlive();
    return s;
  }

  /** The index (in the URL's host list) of the member the keep-alive stream goes to now. */
  get member(): number {
    return this.#member % this.#client.size;
  }

  /** True until the lease is lost, revoked or closed. */
  get alive(): boolean {
    return this.#ended === undefined;
  }

  /** How the lease ended, once it did. */
  get ended(): LeaseEnd | undefined {
    return this.#ended;
  }

  /**
   * The moment (monotonic ms) up to which the server certainly keeps the lease, less the
   * clock-rate allowance: a hold vouches for nothing beyond it.
   */
  get deadline(): number {
    return this.#bound - (this.ttlMs * DRIFT + 2);
  }

  /** Be told once when the lease ends. Returns the unsubscribe function. */
  onEnd(listener: (why: LeaseEnd) => void): () => void {
    this.#listeners.add(listener);
    return () => this.#listeners.delete(listener);
  }

  /** The loss is signalled a guard before the deadline, as the core does for a lock. */
  #armLoss(): void {
    clearTimeout(this.#lossTimer);
    const at = this.deadline - lossGuardMs(this.ttlMs);
    this.#lossTimer = setTimeout(() => this.#end('expired'), Math.max(0, at - now()));
    this.#lossTimer.unref();
  }

  /**
   * Send a keep-alive every sixth of the ttl (twice the Go client's rate: a member that went
   * silent is noticed sooner); replace a stream whose answers stopped.
   */
  #onTick(): void {
    const oldest = this.#sent[0];
    // A silent server or a cut route: gRPC may take minutes to notice a dead TCP connection.
    if (oldest !== undefined && now() - oldest > Math.max(250, this.ttlMs / 6)) {
      this.#reset();
      this.#keepAlive();
      return;
    }
    if (!this.#stream || now() - this.#lastSend >= this.ttlMs / 6) this.#keepAlive();
  }

  #lastSend = Number.NEGATIVE_INFINITY;

  #keepAlive(): void {
    if (!this.alive) return;
    const stream = this.#stream;
    if (!stream) {
      this.#open();
      return;
    }
    this.#sent.push(now());
    this.#lastSend = now();
    try {
      stream.write({ ID: this.id });
    } catch {
      this.#reset();
    }
  }

  #opening = false;
  /** The member the keep-alive stream goes to (an index into the URL's host list). */
  #member = Math.floor(Math.random() * 1_000);
  #open(): void {
    if (this.#opening || !this.alive) return;
    this.#opening = true;
    this.#client.keepAliveStream(this.#member).then(
      (stream) => {
        this.#opening = false;
        if (!this.alive) {
          stream.end();
          return;
        }
        this.#stream = stream;
        this.#sent = [];
        stream.on('data', (res: { TTL: string }) => this.#answered(stream, Number(res.TTL)));
        stream.on('error', () => this.#lost(stream));
        stream.on('end', () => this.#lost(stream));
        this.#keepAlive();
      },
      () => {
        this.#opening = false;
        this.#member = (this.#member + 1) % this.#client.size;
        this.#soon();
      },
    );
  }

  #answered(stream: KeepAliveStream, ttlSeconds: number): void {
    if (stream !== this.#stream || !this.alive) return;
    const sentAt = this.#sent.shift();
    if (ttlSeconds <= 0) {
      // The server no longer knows the lease: it expired or was revoked.
      this.#end('expired');
      return;
    }
    if (sentAt === undefined) return;
    this.renewals += 1;
    this.#bound = Math.max(this.#bound, sentAt + ttlSeconds * 1_000);
    this.#armLoss();
  }

  #lost(stream: KeepAliveStream): void {
    if (stream !== this.#stream) return;
    if (log.enabled) log('lease %s: keep-alive stream lost, reopening on another member', this.hex);
    this.#reset();
    this.#soon();
  }

  /** Try again shortly: a stream that broke must not wait for the next tick (a third of the ttl). */
  #soon(): void {
    if (!this.alive) return;
    const t = setTimeout(() => this.#keepAlive(), 100);
    t.unref();
  }

  #reset(): void {
    const stream = this.#stream;
    this.#stream = undefined;
    // The next stream goes to the next member: this one failed or went silent.
    this.#member = (this.#member + 1) % this.#client.size;
    this.#sent = [];
    if (stream) {
      try {
        stream.cancel();
      } catch {
        /* already closed */
      }
    }
  }

  #end(why: LeaseEnd): void {
    if (this.#ended) return;
    this.#ended = why;
    clearInterval(this.#tick);
    clearTimeout(this.#lossTimer);
    this.#reset();
    for (const l of [...this.#listeners]) {
      try {
        l(why);
      } catch {
        /* a listener must not break the others */
      }
    }
    this.#listeners.clear();
  }

  /**
   * Stop keeping the lease alive. With `revoke`, ask the server to drop it (its keys go at
   * once); without, they go when the server expires it (a crash, `abandon`). A lease
   * declared lost is revoked too, best effort, so its keys stop blocking waiters as soon as
   * the server is reachable again.
   */
  async close(revoke: boolean): Promise<void> {
    this.#end(revoke ? 'revoked' : 'closed');
    if (revoke) await this.#client.leaseRevoke(this.id).catch(() => undefined);
  }

  /** Revoke a lease we declared lost, in the background (its keys may still block others). */
  revokeLost(): void {
    void this.#client.leaseRevoke(this.id).catch(() => undefined);
  }
}
