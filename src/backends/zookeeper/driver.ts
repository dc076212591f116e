/**
 * The thin binding to `node-zookeeper-client` (pure JavaScript, the ZooKeeper wire protocol
 * over a Node socket): the structural types of the few calls the recipes use, the lazy
 * loader (it is an optional peer dependency), ZooKeeper's codes, and the error that keeps
 * ZooKeeper's code so callers can tell "no node" from "connection lost".
 *
 * Why this client and not the native `zookeeper` package: docs/backends/zookeeper.md,
 * "Client library".
 */
import { createRequire } from 'node:module';
import type { Socket } from 'node:net';

/** ZooKeeper error codes used by the recipes (the protocol's, the same in every client). */
export const RC = {
  OK: 0,
  CONNECTIONLOSS: -4,
  OPERATIONTIMEOUT: -7,
  NONODE: -101,
  NODEEXISTS: -110,
  NOTEMPTY: -111,
  SESSIONEXPIRED: -112,
} as const;

/** ZooKeeper's names of the codes above (KeeperException.Code), for messages and `causeCode`. */
const RC_NAMES: ReadonlyMap<number, string> = new Map([
  [RC.CONNECTIONLOSS, 'CONNECTIONLOSS'],
  [RC.OPERATIONTIMEOUT, 'OPERATIONTIMEOUT'],
  [RC.NONODE, 'NONODE'],
  [RC.NODEEXISTS, 'NODEEXISTS'],
  [RC.NOTEMPTY, 'NOTEMPTY'],
  [RC.SESSIONEXPIRED, 'SESSIONEXPIRED'],
  [-102, 'NOAUTH'],
  [-103, 'BADVERSION'],
  [-115, 'AUTHFAILED'],
  [-118, 'SESSIONMOVED'],
]);

/** Create modes. */
export const MODE = {
  PERSISTENT: 0,
  EPHEMERAL: 1,
  EPHEMERAL_SEQUENTIAL: 3,
} as const;

/** Watch event types (0 is ours: the session died, the watch will never fire). */
export const EVENT = { SESSION_ENDED: 0, CREATED: 1, DELETED: 2, CHANGED: 3, CHILD: 4 } as const;

/** The parts of a znode's stat the recipes read. */
export interface Stat {
  /** The zxid of the create: global, monotonic across the ensemble. */
  readonly czxid: bigint;
  readonly numChildren: number;
}

/** An operation answered with a ZooKeeper error (or failed on the way there). */
export class ZkError extends Error {
  /** The ZooKeeper error code (see {@link RC}). */
  readonly rc: number;
  /** ZooKeeper's name of `rc` (`CONNECTIONLOSS`, `NONODE`…). */
  readonly code: string;
  constructor(op: string, path: string, rc: number, cause?: unknown) {
    const code = RC_NAMES.get(rc) ?? `ZK${String(rc).replace('-', 'E')}`;
    super(`${code}: zookeeper ${op} ${path} failed (code ${rc})`, cause === undefined ? undefined : { cause });
    this.name = 'ZkError';
    this.rc = rc;
    this.code = code;
  }
}

/** True for the errors after which the request may or may not have been applied. */
export function isConnectionLoss(err: unknown): boolean {
  return err instanceof ZkError && (err.rc === RC.CONNECTIONLOSS || err.rc === RC.OPERATIONTIMEOUT);
}

/** True when `err` says the node is not there. */
export function isNoNode(err: unknown): boolean {
  return err instanceof ZkError && err.rc === RC.NONODE;
}

// ---- the structural shape of node-zookeeper-client that we use -------------------------

/** A stat as the library hands it over. */
export interface LibStat {
  readonly czxid: Buffer;
  readonly numChildren: number;
}
/** A watch event as the library hands it over. */
export interface LibEvent {
  getType(): number;
}
/** A library watcher. */
export type LibWatcher = (event: LibEvent) => void;
/** A library callback. */
export type LibCb<T> = (error: unknown, value: T, extra?: unknown) => void;
/** The library's connection manager (we steer its reconnect loop and socket). */
export interface LibConnectionManager {
  servers: { host: string; port: number }[];
  socket?: Socket;
  connect: () => void;
}
/** The library's client. */
export interface LibClient {
  connect(): void;
  close(): void;
  on(event: string, listener: (...args: unknown[]) => void): unknown;
  getSessionId(): Buffer;
  getSessionPassword(): Buffer;
  getSessionTimeout(): number;
  create(path: string, data: Buffer, mode: number, cb: LibCb<string>): void;
  exists(path: string, cb: LibCb<LibStat | null>): void;
  exists(path: string, watcher: LibWatcher, cb: LibCb<LibStat | null>): void;
  getData(path: string, watcher: LibWatcher | undefined, cb: (error: unknown, data: Buffer | null, stat: LibStat) => void): void;
  getChildren(path: string, watcher: LibWatcher | undefined, cb: (error: unknown, children: string[], stat: LibStat) => void): void;
  remove(path: string, version: number, cb: (error: unknown) => void): void;
  readonly connectionManager: LibConnectionManager;
}
interface LibModule {
  createClient(connectionString: string, options: Record<string, unknown>): LibClient;
}

let lib: LibModule | undefined;

/** Load the library (once); throws the module-not-found error when it is not installed. */
export function loadLib(): LibModule {
  if (lib) return lib;
  const require = createRequire(import.meta.url);
  const mod: unknown = require('node-zookeeper-client');
  if (typeof mod !== 'object' || mod === null || typeof (mod as { createClient?: unknown }).createClient !== 'function') {
    throw new Error("the 'node-zookeeper-client' package did not export createClient");
  }
  lib = mod as LibModule;
  return lib;
}

/** The ZooKeeper code of a library error (a missing code is treated as a lost connection). */
export function codeOf(err: unknown): number {
  if (typeof err === 'object' && err !== null) {
    const c = (err as { code?: unknown }).code;
    if (typeof c === 'number') return c;
  }
  return RC.CONNECTIONLOSS;
}

/** Our stat from the library's. */
export function toStat(s: LibStat): Stat {
  return { czxid: Buffer.isBuffer(s.czxid) ? s.czxid.readBigInt64BE(0) : BigInt(String(s.czxid)), numChildren: s.numChildren };
}

/** Run `fn`, never letting it throw into the client's event dispatch. */
export function safe(fn: () => void): void {
  try {
    fn();
  } catch {
    /* never throw into the client's event dispatch */
  }
}
