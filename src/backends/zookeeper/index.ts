/**
 * `zookeeper://host1:port,host2:port,host3:port[/chroot][?sessionTimeoutMs=N]` — the
 * fair ephemeral-sequential lock of seeds 002 §4 and 004 (Curator's InterProcessMutex),
 * its read-write lock and semaphore, over one ZooKeeper session per backend.
 *
 * - Every contender creates an EPHEMERAL_SEQUENTIAL node; the lowest holds the lock; every
 *   other waiter watches only its predecessor (no herd effect), and a predecessor that is
 *   gone before the watch is set simply means "check again" (seed 004's NoNode case).
 * - The queue node is the Contended `ticket`: the next attempt re-checks the children
 *   instead of creating another node; `cancel` deletes it.
 * - The session is the lease: a grant vouches for min(ttl, negotiated session timeout)
 *   from the moment the request was sent, because the server cannot expire a session
 *   earlier than its timeout after hearing from it. `extend` proves the session alive with
 *   a round trip. Session expiry (or our node deleted) is reported at once via `onLost`.
 * - Fencing token = the node's `czxid` (global, monotonic, survives parent deletion).
 *
 * See docs/backends/zookeeper.md for the layout, guarantees and failure modes.
 */
import { randomUUID } from 'node:crypto';
import type {
  AcquireRequest,
  AcquireResult,
  Backend,
  Capabilities,
  Extension,
  Grant,
  HolderState,
  LockKind,
  LockState,
} from '../../backend.js';
import { BackendUnavailableError, InvalidArgumentError, LockLostError } from '../../errors.js';
import type { ConnectOptions } from '../../connect.js';
import { EVENT, MODE, RC, ZkError, ZkSession, type SessionState } from './client.js';
import {
  LEASE_NAME,
  LOCK_NAME,
  QUEUE_NAMES,
  READ_NAME,
  SEM_LEASES,
  SEM_LOCKS,
  lockPath,
  nodeNameFor,
  predicate,
  protectedPrefix,
  sortedQueue,
  type QueueNode,
} from './layout.js';

/** The session wrapper, for tools and tests that look at the tree beside a locker. */
export { ZkSession } from './client.js';
/** How a lock id maps to a znode path (see docs/backends/zookeeper.md, "Layout"). */
export { encodeLockId, lockPath } from './layout.js';

/** Watches are reliable within a session; this poll only bounds the cost of a lost one. */
const FALLBACK_POLL_MS = 3_000;
/** Parent containers can be reaped between our mkdir and create; retry that race this often. */
const CREATE_ATTEMPTS = 5;
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
  /** Sessions opened so far. */
  sessions: number;
}

/** The queue position a contended attempt leaves behind. */
interface ZkTicket {
  readonly zk: true;
  readonly session: ZkSession;
  readonly lockId: string;
  readonly kind: LockKind;
  readonly uuid: string;
  /** Our queue node (for a semaphore: the node of its internal mutex). */
  nodePath: string | undefined;
  /** Semaphore only: our lease node once we hold the internal mutex. */
  leasePath: string | undefined;
  /** What the next wait watches. */
  watch: { readonly type: 'node' | 'children'; readonly path: string; readonly permits: number } | undefined;
  /** A watch already registered and not yet fired (so a re-wait does not stack watches). */
  armed: { readonly key: string; fired: boolean; readonly wake: Set<() => void> } | undefined;
}

/** What a grant carries for extend/release. */
interface ZkGrantData {
  readonly session: ZkSession;
  readonly path: string;
}

interface Held {
  readonly grant: Grant;
  readonly session: ZkSession;
  readonly onLost: AcquireRequest['onLost'];
  /** Deletes the node when the lease we vouched for ends without an extend. */
  timer: NodeJS.Timeout | undefined;
}

function isTicket(t: unknown): t is ZkTicket {
  return typeof t === 'object' && t !== null && (t as { zk?: unknown }).zk === true;
}

function grantData(grant: Grant): ZkGrantData {
  const d = grant.data;
  if (typeof d === 'object' && d !== null && (d as { session?: unknown }).session instanceof ZkSession) {
    return d as ZkGrantData;
  }
  throw new InvalidArgumentError('grant', 'not a grant of the zookeeper backend');
}

/** ZooKeeper through `node-zookeeper-client` (see client.ts for why that client). */
export class ZooKeeperBackend implements Backend {
  readonly name = 'zookeeper';
  readonly capabilities: Capabilities = {
    fair: true,
    shared: true,
    permits: true,
    notify: true,
    lockDelay: false,
    reentrant: false,
  };
  /** Counters for tests and benchmarks. */
  readonly stats: ZooKeeperStats = { waiterNotifications: 0, sessions: 0 };

  readonly #opts: Required<Omit<ZooKeeperBackendOptions, 'operationTimeoutMs'>> & { operationTimeoutMs?: number };
  #session: ZkSession | undefined;
  #opening: Promise<ZkSession> | undefined;
  #closed = false;
  readonly #held = new Map<string, Held>();
  /** Background retries of deletes that could not reach the ensemble. */
  readonly #retryTimers = new Set<NodeJS.Timeout>();

  constructor(opts: ZooKeeperBackendOptions) {
    if (!opts.connectString) throw new InvalidArgumentError('url', 'zookeeper: no servers given');
    const chroot = (opts.chroot ?? '').replace(/\/+$/, '');
    if (
      chroot !== '' &&
      (!chroot.startsWith('/') ||
        chroot
          .split('/')
          .slice(1)
          .some((s) => s === '' || s === '.' || s === '..'))
    ) {
      throw new InvalidArgumentError('url', `zookeeper: invalid chroot '${opts.chroot ?? ''}'`);
    }
    this.#opts = {
      connectString: opts.connectString,
      chroot,
      sessionTimeoutMs: opts.sessionTimeoutMs ?? DEFAULT_SESSION_TIMEOUT_MS,
      connectTimeoutMs: opts.connectTimeoutMs ?? DEFAULT_CONNECT_TIMEOUT_MS,
      ...(opts.operationTimeoutMs !== undefined ? { operationTimeoutMs: opts.operationTimeoutMs } : {}),
    };
  }

  /** The chroot every lock path starts with ('' for none). */
  get chroot(): string {
    return this.#opts.chroot;
  }

  /** The current session, if one is open (tests expire it through its credentials). */
  get session(): ZkSession | undefined {
    return this.#session;
  }

  // ---- session ---------------------------------------------------------------------------

  /** The live session, opening a new one when there is none or the last one expired. */
  async connect(): Promise<ZkSession> {
    if (this.#closed) throw new BackendUnavailableError(this.name, 'the zookeeper backend is closed');
    const s = this.#session;
    if (s && s.alive) return s;
    if (!this.#opening) {
      this.#opening = ZkSession.open({
        connectString: this.#opts.connectString,
        sessionTimeoutMs: this.#opts.sessionTimeoutMs,
        connectTimeoutMs: this.#opts.connectTimeoutMs,
      })
        .then((session) => {
          if (this.#closed) {
            session.close();
            throw new BackendUnavailableError(this.name, 'the zookeeper backend is closed');
          }
          this.stats.sessions += 1;
          this.#session = session;
          session.onState((state) => this.#onSessionState(session, state));
          return session;
        })
        .catch((cause: unknown) => {
          if (cause instanceof BackendUnavailableError) throw cause;
          throw new BackendUnavailableError(this.name, `cannot open a ZooKeeper session at ${this.#opts.connectString}`, {
            cause,
            context: { connectString: this.#opts.connectString },
          });
        })
        .finally(() => {
          this.#opening = undefined;
        });
    }
    return this.#opening;
  }

  #onSessionState(session: ZkSession, state: SessionState): void {
    if (state !== 'expired' && state !== 'closed') return;
    if (this.#session === session) this.#session = undefined;
    if (this.#closed) return;
    // Every ephemeral node of that session is gone (or going): each hold is lost now.
    const cause = new BackendUnavailableError(this.name, `the ZooKeeper session ${state === 'expired' ? 'expired' : 'was closed'}`);
    for (const [path, h] of [...this.#held]) {
      if (h.session !== session) continue;
      this.#dropHeld(path);
      try {
        h.onLost('session', cause);
      } catch {
        /* the core's callback must not break the session dispatch */
      }
    }
  }

  /** Run one request with a bound, mapping connection-level failures to BackendUnavailableError. */
  async #op<T>(session: ZkSession, what: string, run: () => Promise<T>): Promise<T> {
    const limit = this.#opts.operationTimeoutMs ?? Math.max(session.sessionTimeoutMs, 1_000);
    let timer: NodeJS.Timeout | undefined;
    try {
      return await Promise.race([
        run(),
        new Promise<never>((_, reject) => {
          timer = setTimeout(
            () => reject(new BackendUnavailableError(this.name, `zookeeper ${what} got no answer within ${limit} ms`)),
            limit,
          );
          timer.unref();
        }),
      ]);
    } catch (err) {
      if (err instanceof ZkError) {
        throw new BackendUnavailableError(this.name, `zookeeper ${what} failed: ${err.message}`, {
          cause: err,
          context: { rc: err.rc },
        });
      }
      throw err;
    } finally {
      if (timer) clearTimeout(timer);
    }
  }

  // ---- acquisition -----------------------------------------------------------------------

  async tryAcquire(req: AcquireRequest): Promise<AcquireResult> {
    if (req.kind === 'semaphore' && (!Number.isInteger(req.permits) || req.permits < 1)) {
      throw new InvalidArgumentError('permits', 'permits must be an integer ≥ 1');
    }
    let ticket: ZkTicket;
    if (isTicket(req.ticket)) {
      ticket = req.ticket;
      if (!ticket.session.alive || ticket.session !== this.#session) {
        throw new BackendUnavailableError(this.name, 'the ZooKeeper session that held our place in the queue ended', {
          context: { lockId: req.lockId },
        });
      }
    } else {
      const session = await this.connect();
      ticket = {
        zk: true,
        session,
        lockId: req.lockId,
        kind: req.kind,
        uuid: randomUUID(),
        nodePath: undefined,
        leasePath: undefined,
        watch: undefined,
        armed: undefined,
      };
    }
    try {
      return await this.#attempt(req, ticket);
    } catch (err) {
      // A failed attempt must not leave a node behind that blocks others until the session ends.
      if (!req.wait || !isTicket(req.ticket)) await this.#deleteTicketNodes(ticket);
      throw err;
    }
  }

  async #attempt(req: AcquireRequest, t: ZkTicket): Promise<AcquireResult> {
    const base = lockPath(this.#opts.chroot, req.lockId);
    if (req.kind === 'semaphore') return this.#attemptSemaphore(req, t, base);

    const s = t.session;
    const names = QUEUE_NAMES;
    for (let round = 0; round < CREATE_ATTEMPTS; round++) {
      if (!t.nodePath) t.nodePath = await this.#createProtected(s, base, nodeNameFor(req.kind), t.uuid, req.ownerId);
      const ours = t.nodePath.slice(base.length + 1);
      const queue = sortedQueue(await this.#op(s, 'getChildren', () => s.children(base)), names);
      const p = predicate(queue, ours, req.kind);
      if (!p) {
        // Our node is gone while the session lives (deleted by hand): queue again, as Curator does.
        t.nodePath = undefined;
        continue;
      }
      if (p.holds) return this.#granted(req, t, t.nodePath);
      if (!req.wait) {
        await this.#deleteTicketNodes(t);
        return { granted: false, contended: {} };
      }
      t.watch = { type: 'node', path: `${base}/${p.watch ?? ''}`, permits: 1 };
      return { granted: false, contended: { ticket: t } };
    }
    throw new BackendUnavailableError(this.name, `zookeeper: our queue node under ${base} kept vanishing`);
  }

  /**
   * Curator's InterProcessSemaphoreV2: hold the internal mutex `base/locks`, add a lease
   * node under `base/leases`, and hold a permit once there are at most `permits` leases;
   * then drop the mutex. Only the mutex holder watches the lease count.
   */
  async #attemptSemaphore(req: AcquireRequest, t: ZkTicket, base: string): Promise<AcquireResult> {
    const s = t.session;
    const locks = `${base}/${SEM_LOCKS}`;
    const leases = `${base}/${SEM_LEASES}`;
    for (let round = 0; round < CREATE_ATTEMPTS; round++) {
      if (!t.leasePath) {
        if (!t.nodePath) t.nodePath = await this.#createProtected(s, locks, LOCK_NAME, t.uuid, req.ownerId);
        const ours = t.nodePath.slice(locks.length + 1);
        const queue = sortedQueue(await this.#op(s, 'getChildren', () => s.children(locks)), [LOCK_NAME]);
        const p = predicate(queue, ours, 'mutex');
        if (!p) {
          t.nodePath = undefined;
          continue;
        }
        if (!p.holds) {
          if (!req.wait) {
            await this.#deleteTicketNodes(t);
            return { granted: false, contended: {} };
          }
          t.watch = { type: 'node', path: `${locks}/${p.watch ?? ''}`, permits: 1 };
          return { granted: false, contended: { ticket: t } };
        }
        t.leasePath = await this.#createProtected(s, leases, LEASE_NAME, t.uuid, req.ownerId);
      }
      const leaseName = t.leasePath.slice(leases.length + 1);
      const current = sortedQueue(await this.#op(s, 'getChildren', () => s.children(leases)), [LEASE_NAME]);
      if (!current.some((n) => n.name === leaseName)) {
        t.leasePath = undefined;
        continue;
      }
      if (current.length <= req.permits) {
        const leasePath = t.leasePath;
        const mutexPath = t.nodePath;
        t.nodePath = undefined;
        // The internal mutex is not part of the hold: if it cannot go now, it goes later.
        if (mutexPath) await this.#guaranteedDelete(s, mutexPath).catch(() => undefined);
        return this.#granted(req, t, leasePath);
      }
      if (!req.wait) {
        await this.#deleteTicketNodes(t);
        return { granted: false, contended: {} };
      }
      t.watch = { type: 'children', path: leases, permits: req.permits };
      return { granted: false, contended: { ticket: t } };
    }
    throw new BackendUnavailableError(this.name, `zookeeper: our semaphore node under ${base} kept vanishing`);
  }

  async #granted(req: AcquireRequest, t: ZkTicket, path: string): Promise<AcquireResult> {
    const s = t.session;
    // One round trip reads the czxid (the token) and watches our own node, so a node
    // deleted under the holder (an operator, a Curator revoke) does not go unnoticed.
    const stat = await this.#op(s, 'getData', () =>
      s.watchNode(path, (type) => {
        if (type !== EVENT.DELETED) return;
        const h = this.#held.get(path);
        if (!h || h.session !== s) return;
        this.#dropHeld(path);
        try {
          h.onLost('not-held', new LockLostError(req.lockId, 'not-held', { context: { path } }));
        } catch {
          /* never throw into the client's event dispatch */
        }
      }),
    );
    if (!stat) throw new BackendUnavailableError(this.name, `zookeeper: our lock node ${path} vanished at grant`);
    const grant: Grant = {
      lockId: req.lockId,
      kind: req.kind,
      ownerId: req.ownerId,
      token: stat.czxid,
      ttlMs: Math.min(req.ttlMs, s.sessionTimeoutMs),
      reentered: false,
      data: { session: s, path } satisfies ZkGrantData,
    };
    const held: Held = { grant, session: s, onLost: req.onLost, timer: undefined };
    this.#held.set(path, held);
    this.#armLeaseEnd(path, held, grant.ttlMs);
    // The ticket no longer owns the node: a late cancel() must not delete a held lock.
    t.watch = undefined;
    t.nodePath = undefined;
    t.leasePath = undefined;
    return { granted: true, grant };
  }

  /**
   * The lease is the session AND the ttl: a holder that stops renewing (autoExtend off, a
   * stuck event loop) must not keep the lock for as long as its session lives, or the ttl
   * would mean nothing. So when the lease we vouched for ends without an extend, we delete
   * our own node. The timer starts when the answer arrives, i.e. after the core's `sentAt`,
   * so the node outlives the holder's `validUntil`.
   */
  #armLeaseEnd(path: string, held: Held, ttlMs: number): void {
    if (held.timer) clearTimeout(held.timer);
    held.timer = setTimeout(() => {
      if (this.#held.get(path) !== held) return;
      this.#dropHeld(path);
      const s = held.session;
      if (s.alive) this.#guaranteedDelete(s, path).catch(() => undefined);
      try {
        held.onLost('not-held', new LockLostError(held.grant.lockId, 'not-held', { context: { path, reason: 'lease ended' } }));
      } catch {
        /* never throw from a timer */
      }
    }, ttlMs);
    held.timer.unref();
  }

  /** Forget a hold (and its lease timer); returns whether it was held. */
  #dropHeld(path: string): boolean {
    const h = this.#held.get(path);
    if (!h) return false;
    if (h.timer) clearTimeout(h.timer);
    this.#held.delete(path);
    return true;
  }

  async #createProtected(s: ZkSession, parent: string, name: string, uuid: string, ownerId: string): Promise<string> {
    try {
      return await createProtectedNode(s, parent, name, uuid, Buffer.from(ownerId, 'utf8'));
    } catch (cause) {
      if (cause instanceof ZkError) {
        throw new BackendUnavailableError(this.name, `zookeeper: cannot create a lock node under ${parent}`, { cause });
      }
      throw cause;
    }
  }

  async #deleteTicketNodes(t: ZkTicket): Promise<void> {
    const s = t.session;
    const paths = [t.leasePath, t.nodePath].filter((p): p is string => p !== undefined);
    t.leasePath = undefined;
    t.nodePath = undefined;
    t.watch = undefined;
    if (t.armed && !t.armed.fired) {
      t.armed.fired = true;
      for (const w of [...t.armed.wake]) w();
    }
    if (!s.alive) return;
    for (const p of paths) {
      try {
        await this.#guaranteedDelete(s, p);
      } catch {
        /* retried in the background */
      }
    }
  }

  /**
   * Delete one of our nodes; when the ensemble cannot be reached now, keep trying in the
   * background while the session lives (Curator's guaranteed delete). A node left behind
   * would block the lock until the session ends, which for a live client is never.
   * Rejects (after scheduling the retries) when the first try failed.
   */
  async #guaranteedDelete(s: ZkSession, path: string): Promise<boolean> {
    try {
      return await this.#op(s, 'delete', () => s.delete(path));
    } catch (err) {
      this.#retryDelete(s, path, 1);
      throw err;
    }
  }

  #retryDelete(s: ZkSession, path: string, attempt: number): void {
    if (this.#closed || !s.alive) return;
    const timer = setTimeout(
      () => {
        this.#retryTimers.delete(timer);
        if (this.#closed || !s.alive) return;
        s.delete(path).then(
          () => undefined,
          () => this.#retryDelete(s, path, attempt + 1),
        );
      },
      Math.min(5_000, 100 * 2 ** attempt),
    );
    timer.unref();
    this.#retryTimers.add(timer);
  }

  // ---- waiting ---------------------------------------------------------------------------

  waitForChange(lockId: string, ticket: unknown, signal: AbortSignal): Promise<void> {
    if (signal.aborted) return Promise.reject(signal.reason);
    if (!isTicket(ticket) || !ticket.watch) return this.#sleep(FALLBACK_POLL_MS / 10, signal);
    const t = ticket;
    const s = t.session;
    const watch = t.watch;
    if (!watch) return this.#sleep(FALLBACK_POLL_MS / 10, signal);
    if (!s.alive) {
      return Promise.reject(new BackendUnavailableError(this.name, 'the ZooKeeper session ended while waiting', { context: { lockId } }));
    }

    return new Promise<void>((resolve, reject) => {
      let done = false;
      let timer: NodeJS.Timeout | undefined;
      const key = `${watch.type}:${watch.path}`;
      const finish = (err?: unknown): void => {
        if (done) return;
        done = true;
        clearTimeout(timer);
        signal.removeEventListener('abort', onAbort);
        unsub();
        t.armed?.wake.delete(wake);
        if (err === undefined) resolve();
        else reject(err);
      };
      const wake = (): void => finish();
      const onAbort = (): void => finish(signal.reason);
      const unsub = s.onState((state) => {
        if (state === 'expired' || state === 'closed') {
          finish(new BackendUnavailableError(this.name, `the ZooKeeper session ${state} while waiting`, { context: { lockId } }));
        }
      });
      // The fallback poll: a cheap `exists` on the predecessor (not a full children listing,
      // which costs O(waiters) per waiter); only when it is gone is another attempt made.
      // Jitter spreads the polls of many waiters.
      const poll = (): void => {
        if (done) return;
        if (watch.type !== 'node' || !s.alive) {
          wake();
          return;
        }
        s.exists(watch.path).then(
          (stat) => (stat === null ? wake() : arm()),
          () => wake(),
        );
      };
      const arm = (): void => {
        if (done) return;
        timer = setTimeout(poll, FALLBACK_POLL_MS * (0.75 + Math.random() / 2));
        timer.unref();
      };
      arm();
      signal.addEventListener('abort', onAbort, { once: true });

      if (t.armed && t.armed.key === key && !t.armed.fired) {
        t.armed.wake.add(wake);
        return;
      }
      const armed = { key, fired: false, wake: new Set<() => void>([wake]) };
      t.armed = armed;
      const onEvent = (type: number): void => {
        if (armed.fired) return;
        armed.fired = true;
        // Type 0 is the session dying, not a notification from the ensemble.
        if (type !== 0) this.stats.waiterNotifications += 1;
        for (const w of [...armed.wake]) w();
      };
      const register =
        watch.type === 'node'
          ? s.watchNode(watch.path, onEvent).then((stat) => stat === null)
          : s.watchChildren(watch.path, onEvent).then((children) => {
              if (children === null) return true;
              return sortedQueue(children, [LEASE_NAME]).length <= watch.permits;
            });
      register.then(
        (alreadyChanged) => {
          if (alreadyChanged) {
            // Seed 004's NoNode case: the predecessor left before the watch was set.
            armed.fired = true;
            for (const w of [...armed.wake]) w();
          }
        },
        (err: unknown) => {
          armed.fired = true;
          // A lost connection is not the end: the next attempt re-checks and sets the watch
          // again; anything else surfaces.
          if (err instanceof ZkError && (err.rc === RC.CONNECTIONLOSS || err.rc === RC.OPERATIONTIMEOUT)) {
            for (const w of [...armed.wake]) w();
          } else {
            finish(new BackendUnavailableError(this.name, 'zookeeper: cannot set a watch', { cause: err }));
          }
        },
      );
    });
  }

  #sleep(ms: number, signal: AbortSignal): Promise<void> {
    return new Promise<void>((resolve, reject) => {
      const onAbort = (): void => {
        clearTimeout(timer);
        reject(signal.reason);
      };
      const timer = setTimeout(() => {
        signal.removeEventListener('abort', onAbort);
        resolve();
      }, ms);
      timer.unref();
      signal.addEventListener('abort', onAbort, { once: true });
    });
  }

  async cancel(_req: AcquireRequest, ticket: unknown): Promise<void> {
    if (!isTicket(ticket)) return;
    await this.#deleteTicketNodes(ticket);
  }

  // ---- holding ---------------------------------------------------------------------------

  async extend(grant: Grant, ttlMs: number): Promise<Extension> {
    const { session: s, path } = grantData(grant);
    if (!s.alive) throw new LockLostError(grant.lockId, 'session', { context: { backend: this.name, path } });
    if (s.state !== 'connected') {
      throw new BackendUnavailableError(this.name, 'disconnected from ZooKeeper: the session cannot be proven alive now', {
        context: { lockId: grant.lockId },
      });
    }
    let stat;
    try {
      stat = await this.#op(s, 'exists', () => s.exists(path));
    } catch (err) {
      if (!s.alive) throw new LockLostError(grant.lockId, 'session', { cause: err, context: { backend: this.name, path } });
      throw err;
    }
    const held = this.#held.get(path);
    if (!stat || stat.czxid !== grant.token || !held) {
      this.#dropHeld(path);
      throw new LockLostError(grant.lockId, 'not-held', { context: { backend: this.name, path } });
    }
    const vouched = Math.min(ttlMs, s.sessionTimeoutMs);
    this.#armLeaseEnd(path, held, vouched);
    return { ttlMs: vouched };
  }

  async release(grant: Grant): Promise<boolean> {
    const { session: s, path } = grantData(grant);
    const wasHeld = this.#dropHeld(path);
    if (!s.alive) return false;
    const deleted = await this.#guaranteedDelete(s, path);
    return deleted && wasHeld;
  }

  async inspect(lockId: string): Promise<LockState> {
    const s = await this.connect();
    const base = lockPath(this.#opts.chroot, lockId);
    const children = await this.#op(s, 'getChildren', () => s.children(base));
    let holderNodes: QueueNode[];
    let waiters: number;
    let dir = base;
    let kindOf: (n: QueueNode) => LockKind;
    if (children.includes(SEM_LEASES)) {
      dir = `${base}/${SEM_LEASES}`;
      holderNodes = sortedQueue(await this.#op(s, 'getChildren', () => s.children(dir)), [LEASE_NAME]);
      waiters = sortedQueue(await this.#op(s, 'getChildren', () => s.children(`${base}/${SEM_LOCKS}`)), [LOCK_NAME]).length;
      kindOf = () => 'semaphore';
    } else {
      const queue = sortedQueue(children, QUEUE_NAMES);
      holderNodes = [];
      for (const n of queue) {
        if (n.lockName === READ_NAME) {
          if (holderNodes.length > 0 && holderNodes[0]?.lockName !== READ_NAME) break;
          holderNodes.push(n);
        } else {
          if (holderNodes.length === 0) holderNodes.push(n);
          break;
        }
      }
      waiters = queue.length - holderNodes.length;
      kindOf = (n) => (n.lockName === READ_NAME ? 'read' : n.lockName === LOCK_NAME ? 'mutex' : 'write');
    }
    const holders: HolderState[] = [];
    let lastToken: bigint | undefined;
    for (const n of holderNodes) {
      const got = await this.#op(s, 'getData', () => s.get(`${dir}/${n.name}`));
      if (!got) continue;
      const token = got.stat.czxid;
      if (lastToken === undefined || token > lastToken) lastToken = token;
      holders.push({ ownerId: got.data ? got.data.toString('utf8') : '', kind: kindOf(n), token, count: 1 });
    }
    return { lockId, holders, waiters, ...(lastToken !== undefined ? { lastToken } : {}) };
  }

  async close(): Promise<void> {
    this.#closed = true;
    // Closing the session deletes every node of ours; pending delete retries are moot.
    for (const t of this.#retryTimers) clearTimeout(t);
    this.#retryTimers.clear();
    for (const path of [...this.#held.keys()]) this.#dropHeld(path);
    const opening = this.#opening;
    this.#session?.close();
    this.#session = undefined;
    if (opening) {
      await opening.then(
        (s) => s.close(),
        () => undefined,
      );
    }
  }

  /**
   * Simulate a crash (for `testing.abandon` and fault tests): cut the client off without
   * closing its session, so the server deletes its nodes only when the session expires.
   */
  async abandon(): Promise<void> {
    this.#closed = true;
    for (const t of this.#retryTimers) clearTimeout(t);
    this.#retryTimers.clear();
    for (const path of [...this.#held.keys()]) this.#dropHeld(path);
    this.#session?.abandon();
    this.#session = undefined;
  }
}

/** What {@link createProtectedNode} needs of a session. */
export type ProtectedCreateSession = Pick<ZkSession, 'create' | 'children' | 'alive' | 'sessionTimeoutMs'>;

/**
 * Create `parent/_c_<uuid>-<name>NNNNNNNNNN` (EPHEMERAL_SEQUENTIAL), creating missing
 * parents (Curator's creatingParentsIfNeeded). When the reply is lost (connection loss),
 * the create may or may not have happened: look for our uuid among the children before
 * creating again, so the node is found instead of leaked (Curator's protected mode).
 * Rejects with the last `ZkError` when it gives up.
 */
export async function createProtectedNode(
  s: ProtectedCreateSession,
  parent: string,
  name: string,
  uuid: string,
  data: Buffer,
): Promise<string> {
  const prefix = protectedPrefix(uuid);
  let lastErr: unknown;
  for (let attempt = 0; attempt < CREATE_ATTEMPTS; attempt++) {
    try {
      return await s.create(`${parent}/${prefix}${name}`, data, MODE.EPHEMERAL_SEQUENTIAL);
    } catch (err) {
      lastErr = err;
      if (!(err instanceof ZkError)) throw err;
      if (err.rc === RC.NONODE) {
        await mkdirs(s, parent);
        continue;
      }
      if (err.rc === RC.CONNECTIONLOSS || err.rc === RC.OPERATIONTIMEOUT) {
        const found = await findProtected(s, parent, prefix);
        if (found) return found;
        if (!s.alive) break;
        continue;
      }
      break;
    }
  }
  throw lastErr;
}

async function findProtected(s: ProtectedCreateSession, parent: string, prefix: string): Promise<string | undefined> {
  const deadline = Date.now() + Math.max(s.sessionTimeoutMs, 1_000);
  while (s.alive && Date.now() < deadline) {
    try {
      const children = await s.children(parent);
      const mine = children.find((c) => c.startsWith(prefix));
      return mine ? `${parent}/${mine}` : undefined;
    } catch (err) {
      if (!(err instanceof ZkError) || (err.rc !== RC.CONNECTIONLOSS && err.rc !== RC.OPERATIONTIMEOUT)) throw err;
      await new Promise((r) => setTimeout(r, 100).unref());
    }
  }
  return undefined;
}

async function mkdirs(s: ProtectedCreateSession, path: string): Promise<void> {
  let cur = '';
  for (const seg of path.split('/').filter((x) => x !== '')) {
    cur += `/${seg}`;
    try {
      await s.create(cur, Buffer.alloc(0), MODE.PERSISTENT);
    } catch (err) {
      if (err instanceof ZkError && err.rc === RC.NODEEXISTS) continue;
      throw err;
    }
  }
}

/**
 * Parse `zookeeper://h1:p1,h2:p2/chroot?sessionTimeoutMs=N&connectTimeoutMs=N` from a raw
 * string. Multi-host authorities with ports are not valid WHATWG URLs, so this does not go
 * through `new URL`.
 */
export function parseZooKeeperUrl(raw: string): ZooKeeperBackendOptions {
  const m = /^zookeeper:\/\/([^/?#]+)(\/[^?#]*)?(?:\?([^#]*))?$/.exec(raw.trim());
  if (!m || m[1] === undefined) throw new InvalidArgumentError('url', `malformed zookeeper URL '${raw}'`);
  return optionsFrom(decodeURIComponent(m[1]), m[2] ?? '', new URLSearchParams(m[3] ?? ''), raw);
}

function optionsFrom(hostList: string, path: string, params: URLSearchParams, raw: string): ZooKeeperBackendOptions {
  const hosts = hostList.split(',').map((h) => h.trim());
  const normalized: string[] = [];
  for (const h of hosts) {
    const hm = /^(\[[0-9a-fA-F:.]+\]|[A-Za-z0-9._-]+)(?::(\d{1,5}))?$/.exec(h);
    if (!hm || hm[1] === undefined) throw new InvalidArgumentError('url', `malformed host '${h}' in zookeeper URL '${raw}'`);
    const port = hm[2] === undefined ? 2181 : Number(hm[2]);
    if (port < 1 || port > 65535) throw new InvalidArgumentError('url', `bad port in zookeeper URL '${raw}'`);
    normalized.push(`${hm[1]}:${port}`);
  }
  const num = (name: string): number | undefined => {
    const v = params.get(name);
    if (v === null) return undefined;
    const n = Number(v);
    if (!Number.isFinite(n) || n <= 0) throw new InvalidArgumentError('url', `${name} must be a positive number in '${raw}'`);
    return n;
  };
  const sessionTimeoutMs = num('sessionTimeoutMs');
  const connectTimeoutMs = num('connectTimeoutMs');
  const chroot = decodeURIComponent(path).replace(/\/+$/, '');
  return {
    connectString: normalized.join(','),
    chroot,
    ...(sessionTimeoutMs !== undefined ? { sessionTimeoutMs } : {}),
    ...(connectTimeoutMs !== undefined ? { connectTimeoutMs } : {}),
  };
}

/** Build a backend from a raw URL string (accepts multi-host URLs with ports). */
export function createZooKeeperBackend(raw: string, options: ConnectOptions = {}): ZooKeeperBackend {
  const o = parseZooKeeperUrl(raw);
  return new ZooKeeperBackend({
    ...o,
    ...(o.connectTimeoutMs === undefined && options.connectTimeoutMs !== undefined ? { connectTimeoutMs: options.connectTimeoutMs } : {}),
  });
}

/** Factory used by `createLocker('zookeeper://…')`. */
export function createBackend(url: URL, options: ConnectOptions = {}): Backend {
  if (url.protocol !== 'zookeeper:') throw new InvalidArgumentError('url', `not a zookeeper URL: ${url.href}`);
  const o = optionsFrom(decodeURIComponent(url.host), url.pathname, url.searchParams, url.href);
  return new ZooKeeperBackend({
    ...o,
    ...(o.connectTimeoutMs === undefined && options.connectTimeoutMs !== undefined ? { connectTimeoutMs: options.connectTimeoutMs } : {}),
  });
}
