/**
 * What the Redis backends need of an ioredis-like client: the commands of a main connection,
 * the pub/sub of a second one, and closing either. ioredis 5 and 6 `Redis` and `Cluster`
 * fit; so does a user's wrapper. See docs/backends/redis.md.
 */

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
