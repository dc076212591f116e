/**
 * What the Redis backends need of an ioredis-like client: the commands of a main connection,
 * the pub/sub of a second one, and closing either. ioredis 5 and 6 `Redis` and `Cluster`
 * fit; so does a user's wrapper. See docs/backends/redis.md.
 */
import { failureCode, ms, type Log } from '../kit.js';

/** The commands sent on a main connection (ioredis `Redis` and `Cluster` both fit). */
export interface RedisCommandClient {
  evalsha(sha: string, numKeys: number, ...args: (string | number)[]): Promise<unknown>;
  eval(script: string, numKeys: number, ...args: (string | number)[]): Promise<unknown>;
  /** One SCAN batch (what `list` pages with); a client without it cannot list. */
  scan?(cursor: string, match: 'MATCH', pattern: string, countToken: 'COUNT', count: number): Promise<[string, string[]]>;
}

/** The subscriber connection: what pub/sub needs (ioredis `Redis` and `Cluster` both fit). */
export interface RedisSubscriberClient {
  subscribe(...channels: string[]): Promise<unknown>;
  unsubscribe(...channels: string[]): Promise<unknown>;
  ping(): Promise<unknown>;
  on(event: 'message', listener: (channel: string, message: string) => void): unknown;
  on(event: 'ready' | 'close' | 'end', listener: () => void): unknown;
  on(event: 'error', listener: (err: Error) => void): unknown;
  disconnect(reconnect?: boolean): void;
}

/**
 * A user's own client. A backend never closes it (unless told it owns it) and talks pub/sub
 * on `client.duplicate()`, which it does close.
 */
export interface RedisClientLike extends RedisCommandClient {
  duplicate(): RedisSubscriberClient;
  quit?(): Promise<unknown>;
  disconnect?(reconnect?: boolean): void;
}

/** A client a backend may close: ioredis has both; a user's wrapper may have either. */
export interface ClosableClient {
  quit?(): Promise<unknown>;
  disconnect?(reconnect?: boolean): void;
}

/** Close a client the backend created (disconnect at once; else quit, ignoring a failure). */
export async function closeClient(c: ClosableClient): Promise<void> {
  if (c.disconnect) c.disconnect(false);
  else if (c.quit) await c.quit().catch(() => undefined);
}

/** The connection events of an ioredis client that the backend logs. */
export interface ConnectionEvents {
  on(event: 'ready' | 'close', listener: () => void): unknown;
  on(event: 'reconnecting', listener: (delayMs: number) => void): unknown;
  on(event: 'error', listener: (err: Error) => void): unknown;
}

/**
 * Log a connection's reconnects, losses and errors on `log` (by its code only: a driver's
 * message may quote the address). `label` names the connection, never its URL.
 */
export function logConnection(log: Log, client: ConnectionEvents, label: string): void {
  let up = false;
  let downAt = 0;
  client.on('ready', () => {
    if (log.enabled && up) log('%s: reconnected after %s', label, ms(performance.now() - downAt));
    up = true;
  });
  client.on('close', () => {
    if (!up) return;
    up = false;
    downAt = performance.now();
    if (log.enabled) log('%s: connection lost', label);
  });
  client.on('reconnecting', (delayMs) => {
    if (log.enabled) log('%s: reconnecting in %dms', label, delayMs);
  });
  client.on('error', (err) => {
    if (log.enabled) log('%s: connection error (%s)', label, failureCode(err));
  });
}
