/**
 * A small typed, promise-shaped session over `node-zookeeper-client` (pure JavaScript, the
 * ZooKeeper wire protocol over a Node socket). Only what the lock recipes need; every error
 * keeps ZooKeeper's numeric code so callers can tell "no node" from "connection lost".
 *
 * Why this client and not the native `zookeeper` package: see docs/backends/zookeeper.md
 * ("Client library"). In short, on this machine the native binding spun the CPU and never
 * re-attached a session after the server it was connected to was killed, which is the
 * one failure a ZooKeeper lock exists to survive.
 *
 * The package is loaded lazily (an optional peer dependency).
 */
import { createRequire } from 'node:module';
import type { Socket } from 'node:net';

/** ZooKeeper error codes used by the recipes (the protocol's, same in every client). */
export const RC = {
  OK: 0,
  CONNECTIONLOSS: -4,
  OPERATIONTIMEOUT: -7,
  NONODE: -101,
  NODEEXISTS: -110,
  NOTEMPTY: -111,
  SESSIONEXPIRED: -112,
} as const;

/** Create modes. */
export const MODE = {
  PERSISTENT: 0,
  EPHEMERAL: 1,
  EPHEMERAL_SEQUENTIAL: 3,
} as const;

/** Watch event types. */
export const EVENT = { CREATED: 1, DELETED: 2, CHANGED: 3, CHILD: 4 } as const;

/** The parts of a znode's stat the recipes read. */
export interface Stat {
  /** The zxid of the create: global, monotonic across the ensemble. */
  readonly czxid: bigint;
  readonly numChildren: number;
}

/** An operation answered with a ZooKeeper error. */
export class ZkError extends Error {
  /** The ZooKeeper error code (see {@link RC}). */
  readonly rc: number;
  constructor(op: string, path: string, rc: number, cause?: unknown) {
    super(`zookeeper ${op} ${path} failed (code ${rc})`, cause === undefined ? undefined : { cause });
    this.name = 'ZkError';
    this.rc = rc;
  }
}

// ---- the structural shape of node-zookeeper-client that we use -------------------------

interface LibStat {
  readonly czxid: Buffer;
  readonly numChildren: number;
}
interface LibEvent {
  getType(): number;
}
type LibWatcher = (event: LibEvent) => void;
type LibCb<T> = (error: unknown, value: T, extra?: unknown) => void;
interface LibConnectionManager {
  servers: { host: string; port: number }[];
  socket?: Socket;
  connect: () => void;
}
interface LibClient {
  connect(): void;
  close(): void;
  on(event: string, listener: (...args: unknown[]) => void): unknown;
  getSessionId(): Buffer;
  getSessionPassword(): Buffer;
  getSessionTimeout(): number;
  create(path: string, data: Buffer, mode: number, cb: LibCb<string>): void;
  exists(path: string, cb: LibCb<LibStat | null>): void;
  getData(path: string, watcher: LibWatcher | undefined, cb: (error: unknown, data: Buffer | null, stat: LibStat) => void): void;
  getChildren(path: string, watcher: LibWatcher | undefined, cb: LibCb<string[]>): void;
  remove(path: string, version: number, cb: (error: unknown) => void): void;
  readonly connectionManager: LibConnectionManager;
}
interface LibModule {
  createClient(connectionString: string, options: Record<string, unknown>): LibClient;
}

let lib: LibModule | undefined;
function loadLib(): LibModule {
  if (lib) return lib;
  const require = createRequire(import.meta.url);
  const mod: unknown = require('node-zookeeper-client');
  if (typeof mod !== 'object' || mod === null || typeof (mod as { createClient?: unknown }).createClient !== 'function') {
    throw new Error("the 'node-zookeeper-client' package did not export createClient");
  }
  lib = mod as LibModule;
  return lib;
}

function codeOf(err: unknown): number {
  if (typeof err === 'object' && err !== null) {
    const c = (err as { code?: unknown }).code;
    if (typeof c === 'number') return c;
  }
  return RC.CONNECTIONLOSS;
}

function toStat(s: LibStat): Stat {
  return { czxid: Buffer.isBuffer(s.czxid) ? s.czxid.readBigInt64BE(0) : BigInt(String(s.czxid)), numChildren: s.numChildren };
}

/** Where a session is. */
export type SessionState = 'connecting' | 'connected' | 'disconnected' | 'expired' | 'closed';

/** Options of {@link ZkSession.open}. */
export interface SessionOptions {
  /** `host:port,host:port` (no chroot: the backend prefixes paths itself). */
  readonly connectString: string;
  /** Requested session timeout; the server clamps it into its [min, max]. */
  readonly sessionTimeoutMs: number;
  /** Reject with an error when no server accepted the session within this long. */
  readonly connectTimeoutMs: number;
  /** Attach to an existing session (Curator's KillSession technique in tests). */
  readonly resume?: { readonly sessionId: Buffer; readonly password: Buffer };
}

/**
 * One ZooKeeper session. It reports its state changes to `onState` listeners (never
 * throwing into the client's event dispatch). Once `expired` or `closed` it is dead for
 * good: ephemeral nodes created through it are gone (after `abandon`, once the ensemble
 * expires it).
 */
export class ZkSession {
  readonly #zk: LibClient;
  #state: SessionState = 'connecting';
  readonly #listeners = new Set<(state: SessionState) => void>();
  /** One library watch per path and kind; our listeners fan out from it. */
  readonly #dataWatch = new Map<string, Set<(type: number) => void>>();
  readonly #childWatch = new Map<string, Set<(type: number) => void>>();
  #reaper: NodeJS.Timeout | undefined;
  /** Start times of the requests in flight (for the stall watchdog). */
  readonly #inflight = new Map<object, number>();
  /** How to fail each request in flight when the session dies (the library may keep them queued). */
  readonly #failers = new Map<object, (rc: number) => void>();
  #watchdog: NodeJS.Timeout | undefined;
  /** Set when the watchdog dropped a stalled connection; cleared by the next 'connected'. */
  #kicked = false;
  /** When the current (re)connection attempt started. */
  #attemptSince = Date.now();

  private constructor(zk: LibClient) {
    this.#zk = zk;
  }

  /**
   * The client library has no read timeout: a server that stops answering (SIGSTOP, a
   * hung VM, a black-holed route) would hold the session's requests forever. When a
   * request has waited a third of the session timeout, drop the connection so the client
   * re-attaches the same session through another server, well before the session (and
   * the lock) could expire. The same holds for a handshake: a paused server accepts the
   * TCP connection and never answers it, so an attempt that has not completed in a third
   * of the session timeout moves on to the next server. A false alarm only costs a reconnect.
   */
  #startWatchdog(): void {
    if (this.#watchdog) return;
    // Checked often: the check interval adds to the time a silent server holds the session.
    const every = Math.max(100, Math.floor(this.sessionTimeoutMs / 12));
    this.#watchdog = setInterval(() => {
      const limit = Math.max(300, this.sessionTimeoutMs / 3);
      const now = Date.now();
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
    }, every);
    this.#watchdog.unref();
  }

  #stopWatchdog(): void {
    if (this.#watchdog) clearInterval(this.#watchdog);
    this.#watchdog = undefined;
  }

  /** Connect a new session (or attach to one), bounded by `connectTimeoutMs`. */
  static open(opts: SessionOptions): Promise<ZkSession> {
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
    const zk = loadLib().createClient(opts.connectString, options);
    const session = new ZkSession(zk);
    session.#startWatchdog();
    return new Promise<ZkSession>((resolve, reject) => {
      let settled = false;
      const timer = setTimeout(() => {
        if (settled) return;
        settled = true;
        session.close();
        reject(new Error(`no ZooKeeper server at ${opts.connectString} accepted a session within ${opts.connectTimeoutMs} ms`));
      }, opts.connectTimeoutMs);
      timer.unref();
      zk.on('connected', () => {
        session.#kicked = false;
        // Requests queued while disconnected are sent now: their wait starts now.
        const now = Date.now();
        for (const k of session.#inflight.keys()) session.#inflight.set(k, now);
        session.#setState('connected');
        session.#startWatchdog();
        if (!settled) {
          settled = true;
          clearTimeout(timer);
          resolve(session);
        }
      });
      zk.on('disconnected', () => {
        session.#attemptSince = Date.now();
        if (session.#state === 'connected') session.#setState('disconnected');
      });
      const dead = (state: 'expired' | 'closed') => (): void => {
        session.#setState(state);
        if (!settled) {
          settled = true;
          clearTimeout(timer);
          reject(new Error(`ZooKeeper session ${state} before it was established`));
        }
      };
      zk.on('expired', dead('expired'));
      zk.on('authenticationFailed', dead('closed'));
      try {
        zk.connect();
      } catch (err) {
        settled = true;
        clearTimeout(timer);
        reject(err instanceof Error ? err : new Error(String(err)));
      }
    });
  }

  #setState(state: SessionState): void {
    if (this.#state === state) return;
    if (this.#state === 'expired' || this.#state === 'closed') return;
    this.#state = state;
    if (state === 'expired' || state === 'closed') {
      this.#stopWatchdog();
      const rc = state === 'expired' ? RC.SESSIONEXPIRED : RC.CONNECTIONLOSS;
      for (const fail of [...this.#failers.values()]) safe(() => fail(rc));
      this.#failers.clear();
      this.#inflight.clear();
      // Watches of a dead session never fire: wake their listeners so nobody waits forever.
      for (const m of [this.#dataWatch, this.#childWatch]) {
        for (const set of m.values()) for (const l of [...set]) safe(() => l(0));
        m.clear();
      }
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
      this.#inflight.set(key, Date.now());
      this.#failers.set(key, (rc) => reject(new ZkError(op, path, rc)));
      const done = (): void => {
        this.#inflight.delete(key);
        this.#failers.delete(key);
      };
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
      if (err instanceof ZkError && err.rc === RC.NONODE) return null;
      throw err;
    }
  }

  /**
   * Set a data watch on `path` (Curator's `getData().usingWatcher()`): resolves the node's
   * stat with the watch set, or null when the node does not exist (then no watch is left
   * behind, unlike an `exists` watch). `onEvent` gets the event type (0: the session died).
   */
  async watchNode(path: string, onEvent: (type: number) => void): Promise<Stat | null> {
    const fanOut = this.#fanOut(this.#dataWatch, path, onEvent);
    try {
      const [, stat] = await this.#call<[Buffer | null, LibStat]>('getData', path, (cb) =>
        this.#zk.getData(path, fanOut, (error, d, st) => cb(error, [d, st])),
      );
      return toStat(stat);
    } catch (err) {
      this.#unwatch(this.#dataWatch, path, onEvent, fanOut !== undefined);
      if (err instanceof ZkError && err.rc === RC.NONODE) return null;
      throw err;
    }
  }

  /** Children names of `path` ([] when it does not exist). */
  async children(path: string): Promise<string[]> {
    try {
      return await this.#call<string[]>('getChildren', path, (cb) => this.#zk.getChildren(path, undefined, cb));
    } catch (err) {
      if (err instanceof ZkError && err.rc === RC.NONODE) return [];
      throw err;
    }
  }

  /** Children of `path` with a one-shot child watch; null when the node does not exist. */
  async watchChildren(path: string, onEvent: (type: number) => void): Promise<string[] | null> {
    const fanOut = this.#fanOut(this.#childWatch, path, onEvent);
    try {
      return await this.#call<string[]>('getChildren', path, (cb) => this.#zk.getChildren(path, fanOut, cb));
    } catch (err) {
      this.#unwatch(this.#childWatch, path, onEvent, fanOut !== undefined);
      if (err instanceof ZkError && err.rc === RC.NONODE) return null;
      throw err;
    }
  }

  /**
   * A watch request failed. If it was the one carrying the library watcher, no watch is
   * registered for anyone on that path: wake the others (type 0, "check again").
   */
  #unwatch(map: Map<string, Set<(type: number) => void>>, path: string, onEvent: (type: number) => void, carried: boolean): void {
    const set = map.get(path);
    if (!set) return;
    set.delete(onEvent);
    if (!carried) return;
    map.delete(path);
    for (const l of [...set]) safe(() => l(0));
  }

  /**
   * Add `onEvent` to the listeners of `path`; returns the library watcher to pass with the
   * request, or undefined when one is already registered (the server keeps one watch per
   * path and connection anyway, and the library would fire a duplicate per registration).
   */
  #fanOut(map: Map<string, Set<(type: number) => void>>, path: string, onEvent: (type: number) => void): LibWatcher | undefined {
    let set = map.get(path);
    const first = set === undefined;
    if (!set) {
      set = new Set();
      map.set(path, set);
    }
    set.add(onEvent);
    if (!first) return undefined;
    return (event: LibEvent) => {
      const listeners = map.get(path);
      map.delete(path);
      const type = safeType(event);
      for (const l of listeners ? [...listeners] : []) safe(() => l(type));
    };
  }

  /** Delete a node; resolves false when it did not exist. */
  async delete(path: string): Promise<boolean> {
    try {
      await this.#call<void>('delete', path, (cb) => this.#zk.remove(path, -1, (error) => cb(error, undefined)));
      return true;
    } catch (err) {
      if (err instanceof ZkError && err.rc === RC.NONODE) return false;
      throw err;
    }
  }
}

function safe(fn: () => void): void {
  try {
    fn();
  } catch {
    /* never throw into the client's event dispatch */
  }
}

function safeType(event: LibEvent): number {
  try {
    return event.getType();
  } catch {
    return 0;
  }
}
