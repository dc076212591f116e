/**
 * A small typed, promise-shaped session over the native `zookeeper` package (the Apache C
 * client bound to Node). Only what the lock recipes need; every call keeps ZooKeeper's
 * numeric return code so callers can tell "no node" from "connection lost".
 *
 * The package is loaded lazily (it is an optional peer dependency with a native addon).
 */
import { createRequire } from 'node:module';

/** ZooKeeper return codes used by the recipes (from zookeeper.h). */
export const RC = {
  OK: 0,
  CONNECTIONLOSS: -4,
  OPERATIONTIMEOUT: -7,
  INVALIDSTATE: -9,
  NONODE: -101,
  NODEEXISTS: -110,
  NOTEMPTY: -111,
  SESSIONEXPIRED: -112,
  CLOSING: -116,
} as const;

/** Create modes (zookeeper.h). */
export const MODE = {
  PERSISTENT: 0,
  EPHEMERAL: 1,
  EPHEMERAL_SEQUENTIAL: 3,
  CONTAINER: 4,
} as const;

/** Watch event types (zookeeper.h). */
export const EVENT = { CREATED: 1, DELETED: 2, CHANGED: 3, CHILD: 4, SESSION: -1, NOTWATCHING: -2 } as const;

/** The parts of a znode's stat the recipes read. */
export interface Stat {
  readonly czxid: number;
  readonly mzxid: number;
  readonly ephemeralOwner: number | string;
  readonly numChildren: number;
}

/** An operation answered with a non-zero return code. */
export class ZkError extends Error {
  /** The ZooKeeper return code (see {@link RC}). */
  readonly rc: number;
  constructor(op: string, path: string, rc: number, detail: unknown) {
    super(`zookeeper ${op} ${path} failed: ${String(detail)} (rc ${rc})`);
    this.name = 'ZkError';
    this.rc = rc;
  }
}

type WatchCb = (type: number, state: number, path: string) => void;

/** The structural shape of the native client object (lib/zookeeper.js) that we use. */
interface NativeClient {
  init(config: Record<string, unknown>): unknown;
  close(): unknown;
  on(event: string, listener: (...args: unknown[]) => void): unknown;
  removeAllListeners(event?: string): unknown;
  a_create(path: string, data: Buffer, flags: number, cb: (rc: number, err: unknown, path: string) => void): number;
  a_exists(path: string, watch: boolean, cb: (rc: number, err: unknown, stat: Stat) => void): number;
  aw_get(path: string, watchCb: WatchCb, cb: (rc: number, err: unknown, stat: Stat, data: Buffer | null) => void): number;
  a_get(path: string, watch: boolean, cb: (rc: number, err: unknown, stat: Stat, data: Buffer | null) => void): number;
  a_get_children(path: string, watch: boolean, cb: (rc: number, err: unknown, children: string[]) => void): number;
  aw_get_children(path: string, watchCb: WatchCb, cb: (rc: number, err: unknown, children: string[]) => void): number;
  a_delete_(path: string, version: number, cb: (rc: number, err: unknown) => void): number;
  set_servers(servers: string): number;
  readonly state: number;
  readonly timeout: number;
  readonly client_id: string;
  readonly client_password: string;
  readonly data_as_buffer: boolean;
}

type NativeCtor = new (config: Record<string, unknown>) => NativeClient;

let ctor: NativeCtor | undefined;
function loadNative(): NativeCtor {
  if (ctor) return ctor;
  const require = createRequire(import.meta.url);
  const mod: unknown = require('zookeeper');
  if (typeof mod !== 'function') throw new Error("the 'zookeeper' package did not export its client class");
  ctor = mod as NativeCtor;
  return ctor;
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
  /** Resume an existing session (id and password in the native client's hex form). */
  readonly resume?: { readonly clientId: string; readonly password: string };
}

/**
 * One ZooKeeper session. It reports its state changes to `onState` (never throws from the
 * native event handlers). Once `expired` or `closed` it is dead for good: ephemeral nodes
 * created through it are gone (or will be, for `closed` after `abandon`).
 */
export class ZkSession {
  readonly #zk: NativeClient;
  #state: SessionState = 'connecting';
  readonly #listeners = new Set<(state: SessionState) => void>();

  private constructor(zk: NativeClient) {
    this.#zk = zk;
  }

  /** Connect a new session (or resume one), bounded by `connectTimeoutMs`. */
  static open(opts: SessionOptions): Promise<ZkSession> {
    const Native = loadNative();
    const config: Record<string, unknown> = {
      connect: opts.connectString,
      timeout: opts.sessionTimeoutMs,
      debug_level: 0,
      host_order_deterministic: false,
      // The binding closes the handle as "expired" after N consecutive empty reads (its
      // issues #228/#233); large child lists legitimately produce dozens, so raise it.
      response_counter_limit: 100_000,
    };
    if (opts.resume) {
      config['client_id'] = opts.resume.clientId;
      config['client_password'] = opts.resume.password;
    }
    const zk = new Native(config);
    const session = new ZkSession(zk);
    return new Promise<ZkSession>((resolve, reject) => {
      let settled = false;
      const timer = setTimeout(() => {
        if (settled) return;
        settled = true;
        session.#closeQuietly();
        reject(new Error(`no ZooKeeper server at ${opts.connectString} accepted a session within ${opts.connectTimeoutMs} ms`));
      }, opts.connectTimeoutMs);
      timer.unref();
      zk.on('connect', () => {
        session.#setState('connected');
        if (!settled) {
          settled = true;
          clearTimeout(timer);
          resolve(session);
        }
      });
      zk.on('connecting', () => {
        if (session.#state === 'connected') session.#setState('disconnected');
      });
      zk.on('close', (code: unknown) => {
        session.#setState(code === RC.SESSIONEXPIRED ? 'expired' : 'closed');
        if (!settled) {
          settled = true;
          clearTimeout(timer);
          reject(new Error(`ZooKeeper session closed before it was established (code ${String(code)})`));
        }
      });
      // The native wrapper emits 'error' only from its own connect(); keep a listener so an
      // unexpected one can never become an uncaught exception.
      zk.on('error', () => undefined);
      try {
        zk.init({});
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
    for (const l of [...this.#listeners]) {
      try {
        l(state);
      } catch {
        /* a listener must not break the native event dispatch */
      }
    }
  }

  #closeQuietly(): void {
    try {
      this.#zk.close();
    } catch {
      /* already closed */
    }
  }

  /** Current state. */
  get state(): SessionState {
    return this.#state;
  }

  /** True while the session may still be alive (connected or reconnecting). */
  get alive(): boolean {
    return this.#state === 'connected' || this.#state === 'disconnected' || this.#state === 'connecting';
  }

  /** Negotiated session timeout in ms (what the server will wait before expiring us). */
  get sessionTimeoutMs(): number {
    return this.#zk.timeout;
  }

  /** Session id (hex) and password (hex), e.g. to expire it from another connection in tests. */
  get credentials(): { clientId: string; password: string } {
    return { clientId: this.#zk.client_id, password: this.#zk.client_password };
  }

  /** Be told of state changes. Returns the unsubscribe function. */
  onState(listener: (state: SessionState) => void): () => void {
    this.#listeners.add(listener);
    return () => this.#listeners.delete(listener);
  }

  /** Close the session: the server deletes its ephemeral nodes at once. */
  close(): void {
    this.#setState('closed');
    this.#closeQuietly();
  }

  /**
   * Cut this client off from every server without closing the session (a crashed or
   * partitioned process): the server expires the session, and deletes its ephemeral nodes,
   * only after the session timeout. Used by tests and `testing.abandon`.
   */
  abandon(): void {
    try {
      this.#zk.set_servers('127.0.0.1:1');
    } catch {
      /* nothing to cut */
    }
    this.#setState('closed');
    const t = setTimeout(() => this.#closeQuietly(), 50);
    t.unref();
  }

  #call<T>(op: string, path: string, start: (cb: (rc: number, err: unknown, value: T) => void) => number): Promise<T> {
    return new Promise<T>((resolve, reject) => {
      const cb = (rc: number, err: unknown, value: T): void => {
        if (rc === RC.OK) resolve(value);
        else reject(new ZkError(op, path, rc, err));
      };
      let rc: number;
      try {
        rc = start(cb);
      } catch (err) {
        reject(new ZkError(op, path, RC.INVALIDSTATE, err));
        return;
      }
      if (typeof rc === 'number' && rc < 0) reject(new ZkError(op, path, rc, 'request not sent'));
    });
  }

  /** Create a node; resolves the created path (with the sequence suffix when sequential). */
  create(path: string, data: Buffer, mode: number): Promise<string> {
    return this.#call<string>('create', path, (cb) => this.#zk.a_create(path, data, mode, cb));
  }

  /** Stat of a node, or null when it does not exist. */
  async exists(path: string): Promise<Stat | null> {
    try {
      return await this.#call<Stat>('exists', path, (cb) => this.#zk.a_exists(path, false, cb));
    } catch (err) {
      if (err instanceof ZkError && err.rc === RC.NONODE) return null;
      throw err;
    }
  }

  /** Data and stat of a node, or null when it does not exist. */
  async get(path: string): Promise<{ stat: Stat; data: Buffer | null } | null> {
    try {
      return await new Promise((resolve, reject) => {
        let rc: number;
        try {
          rc = this.#zk.a_get(path, false, (code, err, stat, data) => {
            if (code === RC.OK) resolve({ stat, data: toBuffer(data) });
            else reject(new ZkError('get', path, code, err));
          });
        } catch (err) {
          reject(new ZkError('get', path, RC.INVALIDSTATE, err));
          return;
        }
        if (rc < 0) reject(new ZkError('get', path, rc, 'request not sent'));
      });
    } catch (err) {
      if (err instanceof ZkError && err.rc === RC.NONODE) return null;
      throw err;
    }
  }

  /**
   * Set a data watch on `path` (Curator's `getData().usingWatcher()`): resolves true with
   * the watch set, or false when the node does not exist (then no watch is left behind,
   * unlike an `exists` watch).
   */
  async watchNode(path: string, onEvent: (type: number) => void): Promise<boolean> {
    try {
      await new Promise<void>((resolve, reject) => {
        let rc: number;
        try {
          rc = this.#zk.aw_get(
            path,
            (type) => {
              try {
                onEvent(type);
              } catch {
                /* never throw into the native dispatcher */
              }
            },
            (code, err) => {
              if (code === RC.OK) resolve();
              else reject(new ZkError('getData', path, code, err));
            },
          );
        } catch (err) {
          reject(new ZkError('getData', path, RC.INVALIDSTATE, err));
          return;
        }
        if (rc < 0) reject(new ZkError('getData', path, rc, 'request not sent'));
      });
      return true;
    } catch (err) {
      if (err instanceof ZkError && err.rc === RC.NONODE) return false;
      throw err;
    }
  }

  /** Children names of `path` ([] when it does not exist). */
  async children(path: string): Promise<string[]> {
    try {
      return await this.#call<string[]>('getChildren', path, (cb) => this.#zk.a_get_children(path, false, cb));
    } catch (err) {
      if (err instanceof ZkError && err.rc === RC.NONODE) return [];
      throw err;
    }
  }

  /** Children of `path` with a one-shot child watch; null when the node does not exist. */
  async watchChildren(path: string, onEvent: (type: number) => void): Promise<string[] | null> {
    try {
      return await this.#call<string[]>('getChildren', path, (cb) =>
        this.#zk.aw_get_children(
          path,
          (type) => {
            try {
              onEvent(type);
            } catch {
              /* never throw into the native dispatcher */
            }
          },
          cb,
        ),
      );
    } catch (err) {
      if (err instanceof ZkError && err.rc === RC.NONODE) return null;
      throw err;
    }
  }

  /** Delete a node; resolves false when it did not exist. */
  async delete(path: string): Promise<boolean> {
    try {
      await this.#call<void>('delete', path, (cb) => this.#zk.a_delete_(path, -1, (rc, err) => cb(rc, err, undefined)));
      return true;
    } catch (err) {
      if (err instanceof ZkError && err.rc === RC.NONODE) return false;
      throw err;
    }
  }
}

function toBuffer(data: unknown): Buffer | null {
  if (data === null || data === undefined) return null;
  if (Buffer.isBuffer(data)) return data;
  if (typeof data === 'string') return Buffer.from(data, 'utf8');
  return null;
}
