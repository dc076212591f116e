/**
 * One ZooKeeper session: a small typed, promise-shaped wrapper over `node-zookeeper-client`
 * with only what the lock recipes need. It reports its state changes to `onState`
 * listeners (never throwing into the client's event dispatch), bounds a silent server
 * with a watchdog on the monotonic clock, and keeps one library watch per path (watches.ts).
 * Once `expired` or `closed` it is dead for good: ephemeral nodes created through it are
 * gone (after `abandon`, once the ensemble expires it).
 */
import { performance } from 'node:perf_hooks';
import type { Socket } from 'node:net';
import {
  codeOf,
  EVENT,
  frameReplies,
  isNoNode,
  loadLib,
  RC,
  safe,
  toStat,
  ZkError,
  type LibCb,
  type LibClient,
  type LibStat,
  type Stat,
} from './driver.js';
import { WatchTable, type WatchListener } from './watches.js';

/** Where a session is. */
export type SessionState = 'connecting' | 'connected' | 'disconnected' | 'expired' | 'closed';

/** Options of {@link ZkSession.start}. */
export interface SessionOptions {
  /** `host:port,host:port` (no chroot: the backend prefixes paths itself). */
  readonly connectString: string;
  /** Requested session timeout; the server clamps it into its [min, max]. */
  readonly sessionTimeoutMs: number;
  /** `ready` rejects when no server accepted the session within this long. */
  readonly connectTimeoutMs: number;
  /** Attach to an existing session (Curator's KillSession technique in tests). */
  readonly resume?: { readonly sessionId: Buffer; readonly password: Buffer };
}

/** A session's children listing with the parent's stat. */
export interface Listing {
  readonly children: string[];
  readonly stat: Stat;
}

/** One ZooKeeper session (see the module comment). */
export class ZkSession {
  readonly #zk: LibClient;
  #state: SessionState = 'connecting';
  readonly #listeners = new Set<(state: SessionState) => void>();
  readonly #dataWatches = new WatchTable();
  readonly #childWatches = new WatchTable();
  readonly #existWatches = new WatchTable();
  #reaper: NodeJS.Timeout | undefined;
  /** Start times (monotonic) of the requests in flight, for the stall watchdog. */
  readonly #inflight = new Map<object, number>();
  /** How to fail each request in flight when the session dies (the library may keep them queued). */
  readonly #failers = new Map<object, (rc: number) => void>();
  #watchdog: NodeJS.Timeout | undefined;
  /** The socket corked for the requests of the current tick (see #batchWrites). */
  #corked: Socket | undefined;
  /** Set when the watchdog dropped a stalled connection; cleared by the next 'connected'. */
  #kicked = false;
  /** When the current (re)connection attempt started (monotonic). */
  #attemptSince = performance.now();
  /** Resolves once the session is established; rejects if it dies or times out first. */
  readonly ready: Promise<void>;
  #settle: ((err?: Error) => void) | undefined;

  private constructor(zk: LibClient, connectTimeoutMs: number, connectString: string) {
    this.#zk = zk;
    this.ready = new Promise<void>((resolve, reject) => {
      const timer = setTimeout(() => {
        this.#settle?.(new Error(`no ZooKeeper server at ${connectString} accepted a session within ${connectTimeoutMs} ms`));
        this.close();
      }, connectTimeoutMs);
      timer.unref();
      this.#settle = (err) => {
        this.#settle = undefined;
        clearTimeout(timer);
        if (err) reject(err);
        else resolve();
      };
    });
    // A session nobody awaits must not surface as an unhandled rejection.
    this.ready.catch(() => undefined);
  }

  /** Start connecting a new session (or attaching to one); `ready` says when it is usable. */
  static start(opts: SessionOptions): ZkSession {
    const options: Record<string, unknown> = {
      sessionTimeout: opts.sessionTimeoutMs,
      // Between rounds over all servers; short, so a lost server costs little.
      spinDelay: 200,
      retries: 0,
    };
    if (opts.resume) {
      options['sessionId'] = opts.resume.sessionId;
      options['sessionPassword'] = opts.resume.password;
    }
    const session = new ZkSession(loadLib().createClient(opts.connectString, options), opts.connectTimeoutMs, opts.connectString);
    frameReplies(session.#zk.connectionManager);
    session.#wire();
    session.#startWatchdog();
    try {
      session.#zk.connect();
    } catch (err) {
      session.#settle?.(err instanceof Error ? err : new Error(String(err)));
      session.close();
    }
    return session;
  }

  /** Connect a session and resolve once it is established (tools, tests, benchmarks). */
  static async open(opts: SessionOptions): Promise<ZkSession> {
    const session = ZkSession.start(opts);
    await session.ready;
    return session;
  }

  #wire(): void {
    this.#zk.on('connected', () => {
      this.#kicked = false;
      // Requests queued while disconnected are sent now: their wait starts now.
      const now = performance.now();
      for (const k of this.#inflight.keys()) this.#inflight.set(k, now);
      this.#setState('connected');
      this.#settle?.();
    });
    this.#zk.on('disconnected', () => {
      this.#attemptSince = performance.now();
      if (this.#state === 'connected') this.#setState('disconnected');
    });
    const dead = (state: 'expired' | 'closed') => (): void => {
      this.#settle?.(new Error(`ZooKeeper session ${state} before it was established`));
      this.#setState(state);
    };
    this.#zk.on('expired', dead('expired'));
    this.#zk.on('authenticationFailed', dead('closed'));
  }

  /**
   * The client library has no read timeout: a server that stops answering (SIGSTOP, a
   * hung VM, a black-holed route) would hold the session's requests forever. When a
   * request has waited a third of the session timeout, drop the connection so the client
   * re-attaches the same session through another server, well before the session (and
   * the lock) could expire. The same for a handshake: a paused server accepts the TCP
   * connection and never answers it. A false alarm only costs a reconnect. Intervals are
   * measured on the monotonic clock: a wall-clock step must not look like a stall.
   */
  #startWatchdog(): void {
    if (this.#watchdog) return;
    // Checked often: the check interval adds to the time a silent server holds the session.
    const every = Math.max(100, Math.floor(this.#requestedTimeout() / 12));
    this.#watchdog = setInterval(() => this.#checkStall(), every);
    this.#watchdog.unref();
  }

  #checkStall(): void {
    const limit = Math.max(300, this.#requestedTimeout() / 3);
    const now = performance.now();
    if (this.#state === 'connecting' || this.#state === 'disconnected') {
      if (now - this.#attemptSince > limit) {
        this.#attemptSince = now;
        safe(() => this.#zk.connectionManager.socket?.destroy());
      }
      return;
    }
    if (this.#state !== 'connected' || this.#kicked) return;
    for (const started of this.#inflight.values()) {
      if (now - started > limit) {
        this.#kicked = true;
        safe(() => this.#zk.connectionManager.socket?.destroy());
        return;
      }
    }
  }

  /** The negotiated timeout once known, else the requested one. */
  #requestedTimeout(): number {
    return this.#zk.getSessionTimeout();
  }

  #setState(state: SessionState): void {
    if (this.#state === state) return;
    if (this.#state === 'expired' || this.#state === 'closed') return;
    this.#state = state;
    if (state === 'expired' || state === 'closed') {
      if (this.#watchdog) clearInterval(this.#watchdog);
      this.#watchdog = undefined;
      const rc = state === 'expired' ? RC.SESSIONEXPIRED : RC.CONNECTIONLOSS;
      for (const fail of [...this.#failers.values()]) safe(() => fail(rc));
      this.#failers.clear();
      this.#inflight.clear();
      this.#dataWatches.endAll();
      this.#childWatches.endAll();
      this.#existWatches.endAll();
    }
    for (const l of [...this.#listeners]) safe(() => l(state));
  }

  /** Current state. */
  get state(): SessionState {
    return this.#state;
  }

  /** True while the session may still be alive (connected or reconnecting). */
  get alive(): boolean {
    return this.#state === 'connected' || this.#state === 'disconnected' || this.#state === 'connecting';
  }

  /** Negotiated session timeout in ms (what the server waits before expiring us). */
  get sessionTimeoutMs(): number {
    return this.#zk.getSessionTimeout();
  }

  /** Session id and password, e.g. to expire the session from another connection in tests. */
  get credentials(): { sessionId: Buffer; password: Buffer } {
    return { sessionId: this.#zk.getSessionId(), password: this.#zk.getSessionPassword() };
  }

  /** The client port of the server this session is attached to right now, if any. */
  get serverPort(): number | undefined {
    const sock = this.#zk.connectionManager.socket;
    return this.#state === 'connected' && sock ? sock.remotePort : undefined;
  }

  /** Session id as ZooKeeper prints it (hex). */
  get id(): string {
    return this.#zk.getSessionId().toString('hex');
  }

  /** Be told of state changes. Returns the unsubscribe function. */
  onState(listener: (state: SessionState) => void): () => void {
    this.#listeners.add(listener);
    return () => this.#listeners.delete(listener);
  }

  /** Close the session: the server deletes its ephemeral nodes at once. */
  close(): void {
    const abandoned = this.#reaper !== undefined;
    if (this.#reaper) clearTimeout(this.#reaper);
    this.#reaper = undefined;
    const connected = this.#state === 'connected';
    this.#settle?.(new Error('ZooKeeper session closed before it was established'));
    this.#setState('closed');
    safe(() => this.#zk.close());
    const cm = this.#zk.connectionManager;
    // The library reconnects whenever a socket closes in any state but its own CLOSING,
    // and a reconnect scheduled before close() overwrites that state: a closed session
    // must never dial again, or an unreachable ensemble keeps the process alive forever.
    safe(() => {
      cm.connect = () => undefined;
    });
    // Without a connection the CLOSE request would wait for one: end the reconnect loop now
    // (the session then expires on the ensemble by its timeout).
    if (!connected || abandoned) {
      safe(() => cm.socket?.destroy());
      return;
    }
    // A server that stopped answering never confirms the close; do not let its socket
    // keep the process alive.
    const t = setTimeout(() => safe(() => cm.socket?.destroy()), 2_000);
    t.unref();
  }

  /**
   * Cut this client off from every server without closing its session (a crashed or
   * partitioned process): the ensemble expires the session, and deletes its ephemeral
   * nodes, only after the session timeout. For tests and `testing.abandon`.
   */
  abandon(): void {
    const cm = this.#zk.connectionManager;
    const timeout = this.sessionTimeoutMs;
    this.#settle?.(new Error('ZooKeeper session abandoned before it was established'));
    this.#setState('closed');
    safe(() => {
      cm.servers = [{ host: '127.0.0.1', port: 1 }];
      cm.socket?.destroy();
    });
    // Stop the reconnect loop once the ensemble has certainly expired the session.
    this.#reaper = setTimeout(() => {
      this.#reaper = undefined;
      safe(() => this.#zk.close());
      safe(() => {
        cm.connect = () => undefined;
      });
      safe(() => cm.socket?.destroy());
    }, timeout + 1_000);
    this.#reaper.unref();
  }

  #call<T>(op: string, path: string, start: (cb: LibCb<T>) => void): Promise<T> {
    return new Promise<T>((resolve, reject) => {
      if (!this.alive) {
        reject(new ZkError(op, path, this.#state === 'expired' ? RC.SESSIONEXPIRED : RC.CONNECTIONLOSS));
        return;
      }
      const key = {};
      this.#inflight.set(key, performance.now());
      this.#failers.set(key, (rc) => reject(new ZkError(op, path, rc)));
      const done = (): void => {
        this.#inflight.delete(key);
        this.#failers.delete(key);
      };
      this.#batchWrites();
      try {
        start((error, value) => {
          done();
          if (error) reject(new ZkError(op, path, codeOf(error), error));
          else resolve(value);
        });
      } catch (err) {
        done();
        reject(new ZkError(op, path, RC.CONNECTIONLOSS, err));
      }
    });
  }

  /**
   * The library writes each request to the socket on its own (one syscall each); a listing
   * page sends them by the hundred in one tick. Corking the socket until the next tick
   * sends them in one write; a lone request waits no longer than the current tick.
   */
  #batchWrites(): void {
    const socket = this.#zk.connectionManager.socket;
    if (socket === undefined || this.#corked === socket) return;
    this.#corked = socket;
    socket.cork();
    process.nextTick(() => {
      if (this.#corked === socket) this.#corked = undefined;
      socket.uncork();
    });
  }

  /** Create a node; resolves the created path (with the sequence suffix when sequential). */
  create(path: string, data: Buffer, mode: number): Promise<string> {
    return this.#call<string>('create', path, (cb) => this.#zk.create(path, data, mode, cb));
  }

  /** Stat of a node, or null when it does not exist. */
  async exists(path: string): Promise<Stat | null> {
    const s = await this.#call<LibStat | null>('exists', path, (cb) => this.#zk.exists(path, cb));
    return s ? toStat(s) : null;
  }

  /** Data and stat of a node, or null when it does not exist. */
  async get(path: string): Promise<{ stat: Stat; data: Buffer | null } | null> {
    try {
      const [data, stat] = await this.#call<[Buffer | null, LibStat]>('getData', path, (cb) =>
        this.#zk.getData(path, undefined, (error, d, st) => cb(error, [d, st])),
      );
      return { stat: toStat(stat), data };
    } catch (err) {
      if (isNoNode(err)) return null;
      throw err;
    }
  }

  /**
   * Set a data watch on `path` (Curator's `getData().usingWatcher()`): resolves the node's
   * stat with the watch set, or null when the node does not exist (then no watch is left
   * behind, unlike an `exists` watch). `onEvent` gets the event type.
   */
  async watchNode(path: string, onEvent: WatchListener): Promise<Stat | null> {
    const watcher = this.#dataWatches.add(path, onEvent);
    try {
      const [, stat] = await this.#call<[Buffer | null, LibStat]>('getData', path, (cb) =>
        this.#zk.getData(path, watcher, (error, d, st) => cb(error, [d, st])),
      );
      return toStat(stat);
    } catch (err) {
      this.#dataWatches.failed(path, onEvent, watcher !== undefined);
      if (isNoNode(err)) return null;
      throw err;
    }
  }

  /** Children names of `path` ([] when it does not exist). */
  async children(path: string): Promise<string[]> {
    return (await this.listing(path))?.children ?? [];
  }

  /** Children of `path` with its stat, or null when it does not exist. */
  async listing(path: string): Promise<Listing | null> {
    try {
      const [children, stat] = await this.#call<[string[], LibStat]>('getChildren', path, (cb) =>
        this.#zk.getChildren(path, undefined, (error, c, st) => cb(error, [c, st])),
      );
      return { children, stat: toStat(stat) };
    } catch (err) {
      if (isNoNode(err)) return null;
      throw err;
    }
  }

  /** Children of `path` with a one-shot child watch; null when the node does not exist. */
  async watchChildren(path: string, onEvent: WatchListener): Promise<string[] | null> {
    const watcher = this.#childWatches.add(path, onEvent);
    try {
      return await this.#call<string[]>('getChildren', path, (cb) => this.#zk.getChildren(path, watcher, (error, c) => cb(error, c)));
    } catch (err) {
      this.#childWatches.failed(path, onEvent, watcher !== undefined);
      if (isNoNode(err)) return null;
      throw err;
    }
  }

  /** Stop telling `onEvent` about the child watch on `path` (the server's watch stays until it fires). */
  unwatchChildren(path: string, onEvent: WatchListener): void {
    this.#childWatches.remove(path, onEvent);
  }

  /**
   * Children of `path` with a one-shot child watch, or, when it does not exist, an exists
   * watch that fires when it is created (then resolves null). Either way a watch is set.
   * `off()` stops `onEvent` from being called (for a caller that gave up waiting).
   */
  async watchChildrenOrCreation(path: string, onEvent: WatchListener): Promise<{ children: string[] | null; off: () => void }> {
    const children = await this.watchChildren(path, onEvent);
    if (children !== null) return { children, off: () => this.#childWatches.remove(path, onEvent) };
    const watcher = this.#existWatches.add(path, onEvent);
    const off = (): void => this.#existWatches.remove(path, onEvent);
    try {
      const stat = await this.#call<LibStat | null>('exists', path, (cb) =>
        watcher ? this.#zk.exists(path, watcher, cb) : this.#zk.exists(path, cb),
      );
      // Created between the two requests: the exists watch waits for a change of it, so report this one.
      if (stat) safe(() => onEvent(EVENT.CREATED));
      return { children: null, off };
    } catch (err) {
      this.#existWatches.failed(path, onEvent, watcher !== undefined);
      throw err;
    }
  }

  /** Delete a node; resolves false when it did not exist. */
  async delete(path: string): Promise<boolean> {
    try {
      await this.#call<undefined>('delete', path, (cb) => this.#zk.remove(path, -1, (error) => cb(error, undefined)));
      return true;
    } catch (err) {
      if (isNoNode(err)) return false;
      throw err;
    }
  }
}
