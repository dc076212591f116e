/**
 * The ZooKeeper backend: Curator's queue recipes over one session per backend, with the
 * session as the lease. The recipes are in queue.ts (mutex, read-write) and semaphore.ts,
 * waiting in wait.ts, the hand-off to a hold in grant.ts, the holds and their loss in
 * session-holds.ts, the tree layout in layout.ts.
 * See docs/backends/zookeeper.md.
 */
import { randomUUID } from 'node:crypto';
import {
  backendLog,
  BackendUnavailableError,
  InvalidArgumentError,
  LockLostError,
  logRoundTrips,
  logWake,
  wakeClock,
  unavailable,
  withDeadline,
  type AcquireRequest,
  type AcquireResult,
  type Backend,
  type Capabilities,
  type Extension,
  type Grant,
  type LockState,
} from '../kit.js';
import type { ListPage, ListRequest } from '../../backend.js';
import type { Abandonable } from '../kit.js';
import { grantHold, prefetchQueueNode, type GrantHost } from './grant.js';
import { SessionHolds } from './session-holds.js';
import { readLockState } from './inspect.js';
import { breakLock, listLocks } from './list.js';
import { lockPaths, protectedPrefix, type LockPaths } from './layout.js';
import { Deleter, findOwnerNodes, reapLockNode } from './nodes.js';
import { watchQueue } from './observe.js';
import { watchChanges, type FeedHost } from './changes.js';
import { attemptQueue } from './queue.js';
import type { RecipeHost, ZkGrantData, ZkTicket } from './recipe.js';
import { attemptSemaphore } from './semaphore.js';
import { ZkSession, type SessionState } from './session.js';
import { waitForChange } from './wait.js';
import { attemptWithDelay, delayUuid, DelayMarkers } from './delay.js';

const log = backendLog('zookeeper');

const DEFAULT_SESSION_TIMEOUT_MS = 10_000;
const DEFAULT_CONNECT_TIMEOUT_MS = 10_000;

/** Options of the ZooKeeper backend (from the URL or given directly). */
export interface ZooKeeperBackendOptions {
  /** `host:port,host:port,...` */
  readonly connectString: string;
  /** Path prefix for every lock ('' or `/a/b`). */
  readonly chroot?: string;
  /** Requested session timeout (the server clamps it). Default 10 000. */
  readonly sessionTimeoutMs?: number;
  /** Bound on establishing a session before `BackendUnavailableError`. Default 10 000. */
  readonly connectTimeoutMs?: number;
  /** Bound on one request before `BackendUnavailableError`. Default: the session timeout. */
  readonly operationTimeoutMs?: number;
}

/** Counters exposed for tests and benchmarks. */
export interface ZooKeeperStats {
  /** Watch notifications delivered to waiters (the herd-effect measure). */
  waiterNotifications: number;
  /** Sessions established so far. */
  sessions: number;
  /** `changes()` subscriptions open now. */
  changeFeeds: number;
  /** Child watches those subscriptions hold now (docs/backends/zookeeper.md, "Watching"). */
  changeWatches: number;
}

/** What the ZooKeeper backend can do. */
export const ZOOKEEPER_CAPABILITIES: Capabilities = Object.freeze({
  fair: true,
  shared: true,
  permits: true,
  notify: true,
  lockDelay: true,
  reentrant: false,
  weightedPermits: true,
});

/** ZooKeeper through `node-zookeeper-client` (see driver.ts for why that client). */
export class ZooKeeperBackend implements Backend<ZkTicket, ZkGrantData>, Abandonable {
  readonly name = 'zookeeper';
  readonly capabilities: Capabilities = ZOOKEEPER_CAPABILITIES;
  /** Counters for tests and benchmarks. */
  readonly stats: ZooKeeperStats = { waiterNotifications: 0, sessions: 0, changeFeeds: 0, changeWatches: 0 };

  readonly #opts: Required<Omit<ZooKeeperBackendOptions, 'operationTimeoutMs'>> & { operationTimeoutMs?: number };
  #session: ZkSession | undefined;
  #closed = false;
  readonly #deleter = new Deleter();
  readonly #held = new SessionHolds(this.#deleter);
  readonly #delays: DelayMarkers;
  readonly #grants: GrantHost = { held: this.#held, deleter: this.#deleter, op: (s, what, work) => this.#op(s, what, work) };
  readonly #host: RecipeHost = {
    op: (s, what, work) => this.#op(s, what, work),
    grant: (req, t, hold, token, drop) => grantHold(this.#grants, req, t, hold, token, drop),
    drop: (t, only) => this.#drop(t, only),
    prefetch: prefetchQueueNode,
  };

  constructor(opts: ZooKeeperBackendOptions) {
    if (!opts.connectString) throw new InvalidArgumentError('url', 'zookeeper: no servers given');
    const chroot = (opts.chroot ?? '').replace(/\/+$/, '');
    const segments = chroot.split('/').slice(1);
    if (chroot !== '' && (!chroot.startsWith('/') || segments.some((s) => s === '' || s === '.' || s === '..'))) {
      throw new InvalidArgumentError('url', `zookeeper: invalid chroot '${opts.chroot ?? ''}'`);
    }
    this.#opts = {
      connectString: opts.connectString,
      chroot,
      sessionTimeoutMs: opts.sessionTimeoutMs ?? DEFAULT_SESSION_TIMEOUT_MS,
      connectTimeoutMs: opts.connectTimeoutMs ?? DEFAULT_CONNECT_TIMEOUT_MS,
      ...(opts.operationTimeoutMs !== undefined ? { operationTimeoutMs: opts.operationTimeoutMs } : {}),
    };
    this.#delays = new DelayMarkers(this.#opts);
    logRoundTrips(this, log);
  }

  /** The chroot every lock path starts with ('' for none). */
  get chroot(): string {
    return this.#opts.chroot;
  }

  /** The current session, if one was started (tests expire it through its credentials). */
  get session(): ZkSession | undefined {
    return this.#session;
  }

  /** The znodes of `lockId` (see docs/backends/zookeeper.md, "Layout"). */
  paths(lockId: string): LockPaths {
    return lockPaths(this.#opts.chroot, lockId);
  }

  // ---- session ---------------------------------------------------------------------------

  /** The live session, opening a new one when there is none or the last one ended. */
  async connect(signal?: AbortSignal): Promise<ZkSession> {
    if (this.#closed) throw new BackendUnavailableError(this.name, 'the zookeeper backend is closed');
    let s = this.#session;
    if (!s || !s.alive) s = this.#startSession();
    try {
      await withDeadline(s.ready, signal ? { signal } : {});
    } catch (err) {
      if (signal?.aborted && err === signal.reason) throw err;
      throw unavailable(this.name, `connect to ${this.#opts.connectString}`, err, { context: { connectString: this.#opts.connectString } });
    }
    if (this.#closed) throw new BackendUnavailableError(this.name, 'the zookeeper backend is closed');
    return s;
  }

  #startSession(): ZkSession {
    const s = ZkSession.start({
      connectString: this.#opts.connectString,
      sessionTimeoutMs: this.#opts.sessionTimeoutMs,
      connectTimeoutMs: this.#opts.connectTimeoutMs,
    });
    this.#session = s;
    s.ready.then(
      () => {
        this.stats.sessions += 1;
      },
      () => undefined,
    );
    s.onState((state) => this.#onSessionState(s, state));
    return s;
  }

  #onSessionState(s: ZkSession, state: SessionState): void {
    if (log.enabled) log('session %s', state);
    if (state !== 'expired' && state !== 'closed') return;
    if (this.#session === s) this.#session = undefined;
    // Every ephemeral node of that session is gone (or going): each of its holds is lost now.
    if (!this.#closed) this.#held.sessionEnded(s, state);
  }

  /** One request, bounded; any failure becomes a BackendUnavailableError naming the cause. */
  async #op<T>(s: ZkSession, what: string, work: Promise<T>): Promise<T> {
    const limit = this.#opts.operationTimeoutMs ?? Math.max(s.sessionTimeoutMs, 1_000);
    try {
      return await withDeadline(work, { timeoutMs: limit, onTimeout: () => new Error(`no answer within ${limit} ms`) });
    } catch (err) {
      throw unavailable(this.name, what, err);
    }
  }

  // ---- acquisition -----------------------------------------------------------------------

  async tryAcquire(req: AcquireRequest<ZkTicket>): Promise<AcquireResult<ZkTicket, ZkGrantData>> {
    if (req.kind === 'semaphore' && (!Number.isInteger(req.permits) || req.permits < 1)) {
      throw new InvalidArgumentError('permits', 'permits must be an integer ≥ 1');
    }
    const t = req.ticket ?? (await this.#newTicket(req));
    if (req.ticket && (!t.session.alive || t.session !== this.#session)) {
      throw new BackendUnavailableError(this.name, 'the ZooKeeper session that held our place in the queue ended', {
        context: { lockId: req.lockId },
      });
    }
    const recipe = req.kind === 'semaphore' ? attemptSemaphore : attemptQueue;
    const run = (r: AcquireRequest<ZkTicket>): Promise<AcquireResult<ZkTicket, ZkGrantData>> => recipe(this.#host, r, t);
    const attempt = attemptWithDelay(this.#delays, req, t, run, (g) => this.release(g)).catch((err: unknown) => {
      // A failed attempt ends the acquisition: nothing of it may stay to block others.
      void this.#drop(t, undefined, true);
      throw err;
    });
    // An abort answers at once; the attempt goes on, and what it gets is handed back then.
    return withDeadline(attempt, { signal: req.signal, onLate: (r) => this.#discard(t, r) });
  }

  async #newTicket(req: AcquireRequest<ZkTicket>): Promise<ZkTicket> {
    const session = await this.connect(req.signal);
    return {
      session,
      lockId: req.lockId,
      kind: req.kind,
      uuid: req.lockDelayMs > 0 ? delayUuid() : randomUUID(),
      paths: this.paths(req.lockId),
      queueNode: undefined,
      gateNode: undefined,
      leaseNode: undefined,
      extraLeases: [],
      token: undefined,
      watch: undefined,
      armed: undefined,
      sawGate: false,
      prefetch: undefined,
    };
  }

  /** An attempt that finished after its caller gave up: give back what it got. */
  #discard(t: ZkTicket, r: AcquireResult<ZkTicket, ZkGrantData>): void {
    if (r.granted) void this.release(r.grant).catch(() => undefined);
    else void this.#drop(t);
  }

  /** RecipeHost.drop: delete the ticket's nodes (or only its gate node); `sweep` also finds lost creates. */
  async #drop(t: ZkTicket, only?: 'gate', sweep = false): Promise<void> {
    const s = t.session;
    const nodes = only === 'gate' ? [t.gateNode] : [...t.extraLeases, t.leaseNode, t.gateNode, t.queueNode];
    t.gateNode = undefined;
    t.token = undefined;
    t.prefetch = undefined;
    if (!only) {
      t.leaseNode = t.queueNode = undefined;
      t.extraLeases = [];
      t.watch = undefined;
      if (t.armed && !t.armed.fired) {
        t.armed.fired = true;
        for (const w of [...t.armed.wake]) w();
      }
    }
    if (!s.alive) return;
    if (sweep) this.#deleter.sweep(s, [t.paths.base, t.paths.gate, t.paths.leases], protectedPrefix(t.uuid));
    const ours = nodes.filter((n): n is string => n !== undefined);
    await this.#op(s, 'delete', Promise.all(ours.map((n) => this.#deleter.delete(s, n)))).catch(() => undefined);
    if (!only && ours.length > 0) reapLockNode(s, t.paths);
  }

  async waitForChange(lockId: string, ticket: ZkTicket | undefined, signal: AbortSignal): Promise<void> {
    const since = wakeClock(log);
    let notified = false;
    await waitForChange(ticket, signal, {
      notified: () => {
        this.stats.waiterNotifications += 1;
        notified = true;
      },
    });
    logWake(log, lockId, notified ? 'notification' : 'poll', since);
  }

  /**
   * Remove the queue position `ticket`. Without a ticket there is nothing of ours to find:
   * an attempt whose caller gave up deletes what it created when it finishes (tryAcquire),
   * and a create whose reply was lost is found by its uuid (nodes.ts).
   */
  async cancel(req: AcquireRequest<ZkTicket>, ticket: ZkTicket | undefined): Promise<void> {
    if (ticket) await this.#drop(ticket);
    else if (req.freshOwner) await this.#dropOwner(req);
  }

  /**
   * An attempt whose reply was lost left nodes no ticket names (its protected uuid went with
   * the reply): every node carries its owner in its data, and a fresh owner is this
   * acquisition alone, so delete the nodes of that owner. A session that ended took them.
   */
  async #dropOwner(req: AcquireRequest<ZkTicket>): Promise<void> {
    const s = this.#session;
    if (!s?.alive) return;
    const nodes = await this.#op(s, 'list', findOwnerNodes(s, this.paths(req.lockId), req.ownerId));
    await this.#op(s, 'delete', Promise.all(nodes.map((n) => this.#deleter.delete(s, n)))).catch(() => undefined);
  }

  // ---- holding ---------------------------------------------------------------------------

  async extend(grant: Grant<ZkGrantData>, ttlMs: number): Promise<Extension> {
    const { session: s, nodes } = grant.data;
    const context = { backend: this.name, nodes };
    if (!s.alive) throw new LockLostError(grant.lockId, 'session', { context });
    const held = this.#held.get(grant.data);
    if (!held) throw new LockLostError(grant.lockId, 'not-held', { context });
    if (s.state !== 'connected') {
      throw new BackendUnavailableError(this.name, 'disconnected from ZooKeeper: the session cannot be proven alive now', {
        context: { lockId: grant.lockId },
      });
    }
    let stats;
    try {
      stats = await this.#op(s, 'exists', Promise.all(nodes.map((n) => s.exists(n))));
    } catch (err) {
      if (!s.alive) throw new LockLostError(grant.lockId, 'session', { cause: err, context });
      throw err;
    }
    const gone = nodes.find((_, i) => !stats[i]);
    if (gone !== undefined) throw new LockLostError(grant.lockId, await this.#held.nodeGone(held, gone), { context });
    if (!this.#held.has(held)) throw new LockLostError(grant.lockId, s.alive ? 'not-held' : 'session', { context });
    const vouched = Math.min(ttlMs, s.sessionTimeoutMs);
    this.#held.arm(held, vouched);
    return { ttlMs: vouched };
  }

  async release(grant: Grant<ZkGrantData>): Promise<boolean> {
    const { session: s, nodes } = grant.data;
    const wasHeld = this.#held.drop(grant.data);
    // A clean release ends the lock-delay: the marker goes with the nodes (delay.ts).
    const unmarked = this.#delays.release(grant.data, wasHeld).catch(() => undefined);
    if (!s.alive) return false;
    const [deleted] = await this.#op(s, 'delete', Promise.all([Promise.all(nodes.map((n) => this.#deleter.delete(s, n))), unmarked]));
    reapLockNode(s, this.paths(grant.lockId));
    return wasHeld && deleted.every(Boolean);
  }

  /**
   * For `election.observe()`: resolve once the queue of `lockId` may have changed (a watch),
   * or after `maxMs` at the latest. See observe.ts.
   */
  async watchLock(lockId: string, maxMs: number, signal: AbortSignal): Promise<void> {
    const s = await this.connect(signal);
    return watchQueue(s, this.paths(lockId).base, maxMs, signal);
  }

  /** The ids under `req.prefix` whose holds or queue changed, from child watches: docs/backends/zookeeper.md, "Watching". */
  changes(req: { readonly prefix: string; readonly signal: AbortSignal }): AsyncIterable<string | null> {
    const host: FeedHost = {
      connect: (signal) => this.connect(signal),
      isClosed: () => this.#closed,
      chroot: this.#opts.chroot,
      stats: this.stats,
    };
    return watchChanges(host, req.prefix, req.signal);
  }

  async inspect(lockId: string): Promise<LockState> {
    const s = await this.connect();
    return readLockState(this.#host, s, lockId, this.paths(lockId));
  }

  /** One page of the locks under the chroot: docs/backends/zookeeper.md, "Listing". */
  async list(req: ListRequest): Promise<ListPage> {
    const s = await this.connect(req.signal);
    return listLocks(this.#host, s, this.#opts.chroot, req);
  }

  /** Delete every holder's nodes: docs/backends/zookeeper.md, "Breaking a lock". */
  async forceRelease(lockId: string): Promise<number> {
    const s = await this.connect();
    const broken = await breakLock(this.#host, s, this.#opts.chroot, lockId);
    await this.#op(s, 'delete markers', this.#delays.clear(s, this.paths(lockId).base));
    return broken;
  }

  async close(): Promise<void> {
    this.#closed = true;
    // Closing the session deletes every node of ours; pending delete retries are moot.
    this.#deleter.close();
    this.#held.clear();
    this.#delays.close();
    this.#session?.close();
    this.#session = undefined;
  }

  /**
   * Testing only (`abandon()` in `locksmith-dlm/testing`): cut the client off without closing
   * its session, so the ensemble deletes its nodes only when the session expires (a crash).
   */
  async abandon(): Promise<void> {
    this.#closed = true;
    this.#deleter.close();
    this.#held.clear();
    this.#delays.abandon();
    this.#session?.abandon();
    this.#session = undefined;
  }
}
