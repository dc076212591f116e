/**
 * A program written for redis-semaphore, unchanged but for the import line
 * (was: `import { Mutex, Semaphore, MultiSemaphore } from 'redis-semaphore';`).
 * test/compat/redis-semaphore.test.ts runs it.
 */
// ioredis 6 (this repository's) has no default export; with ioredis 5 it was `import Redis from 'ioredis'`.
import { Redis } from 'ioredis';
import { Mutex, Semaphore, MultiSemaphore } from '../../../src/compat/redis-semaphore.js';

export async function jobs(port: number): Promise<{ maxWorkers: number; maxPair: number; counter: number; skipped: number }> {
  const redisClient = new Redis({ port, host: '127.0.0.1' });
  let counter = 0;
  let workers = 0;
  let maxWorkers = 0;
  let pairs = 0;
  let maxPair = 0;
  let skipped = 0;

  async function increment(): Promise<void> {
    const mutex = new Mutex(redisClient, 'counter', { onLockLost: (err) => console.error(err) });
    await mutex.acquire();
    try {
      const v = counter;
      await new Promise((r) => setTimeout(r, 2));
      counter = v + 1;
    } finally {
      await mutex.release();
    }
  }

  async function work(): Promise<void> {
    const semaphore = new Semaphore(redisClient, 'workers', 3);
    await semaphore.acquire();
    try {
      workers += 1;
      maxWorkers = Math.max(maxWorkers, workers);
      await new Promise((r) => setTimeout(r, 10));
      workers -= 1;
    } finally {
      await semaphore.release();
    }
  }

  async function pair(): Promise<void> {
    const semaphore = new MultiSemaphore(redisClient, 'pairs', 4, 2);
    await semaphore.acquire();
    try {
      pairs += 2;
      maxPair = Math.max(maxPair, pairs);
      await new Promise((r) => setTimeout(r, 10));
      pairs -= 2;
    } finally {
      await semaphore.release();
    }
  }

  async function optional(): Promise<void> {
    const mutex = new Mutex(redisClient, 'optional', { acquireAttemptsLimit: 1 });
    const lockAcquired = await mutex.tryAcquire();
    if (!lockAcquired) {
      skipped += 1;
      return;
    }
    try {
      await new Promise((r) => setTimeout(r, 50));
    } finally {
      await mutex.release();
    }
  }

  await Promise.all([
    ...Array.from({ length: 10 }, increment),
    ...Array.from({ length: 9 }, work),
    ...Array.from({ length: 6 }, pair),
    optional(),
    optional(),
  ]);
  await redisClient.quit();
  return { maxWorkers, maxPair, counter, skipped };
}
