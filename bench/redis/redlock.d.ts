/**
 * Types for node-redlock v5 beta as this benchmark uses it: its package ships
 * `dist/index.d.ts` but its `exports` map has no `types` entry, so NodeNext resolution
 * cannot see them.
 */
declare module 'redlock' {
  import type { Redis } from 'ioredis';

  /** A lock held through node-redlock. */
  export interface RedlockLock {
    release(): Promise<unknown>;
  }

  /** node-redlock's client (the subset used here). */
  export default class Redlock {
    constructor(
      clients: Iterable<Redis>,
      settings?: { retryCount?: number; retryDelay?: number; retryJitter?: number; driftFactor?: number },
    );
    acquire(resources: string[], duration: number): Promise<RedlockLock>;
    release(lock: RedlockLock, settings?: { retryCount?: number }): Promise<unknown>;
    on(event: 'error', listener: (err: unknown) => void): this;
    quit(): Promise<void>;
  }
}
