/**
 * A program written for redis-semaphore, unchanged but for the import line
 * (was: `import { Mutex, Semaphore, MultiSemaphore } from 'redis-semaphore';`).
 * test/compat/redis-semaphore.test.ts runs it.
 */
// ioredis 6 (this repository's) has no default export; with ioredis 5 it was `import Redis from 'ioredis'`.
import { Redis } from 'ioredis';
import { Mutex, Semaphore, MultiSemaphore } from '../../../src/compat/redis-semaphore.js';

/** What the jobs saw: the most concurrent workers and permits, the count, the skipped runs. */
interface Stats {
  counter: number;
  workers: number;
  maxWorkers: number;
  pairs: number;
  maxPair: number;
  skipped: number;
}

async function increment(redisClient: Redis, s: Stats): Promise<void> {
  const mutex = new Mutex(redisClient, 'counter', { onLockLost: (err) => console.error(err) });
  await mutex.acquire();
  try {
    const v = s.counter;
    await new Promise((r) => setTimeout(r, 2));
    s.counter = v + 1;
  } finally {
    await mutex.release();
  }
}

async function work(redisClient: Redis, s: Stats): Promise<void> {
  const semaphore = new Semaphore(redisClient, 'workers', 3);
  await semaphore.acquire();
  try {
    s.workers += 1;
    s.maxWorkers = Math.max(s.maxWorkers, s.workers);
    await new Promise((r) => setTimeout(r, 10));
    s.workers -= 1;
  } finally {
    await semaphore.release();
  }
}

async function pair(redisClient: Redis, s: Stats): Promise<void> {
  const semaphore = new MultiSemaphore(redisClient, 'pairs', 4, 2);
  await semaphore.acquire();
  try {
    s.pairs += 2;
    s.maxPair = Math.max(s.maxPair, s.pairs);
    await new Promise((r) => setTimeout(r, 10));
    s.pairs -= 2;
  } finally {
    await semaphore.release();
  }
}

async function optional(redisClient: Redis, s: Stats): Promise<void> {
  const mutex = new Mutex(redisClient, 'optional', { acquireAttemptsLimit: 1 });
  const lockAcquired = await mutex.tryAcquire();
  if (!lockAcquired) {
    s.skipped += 1;
    return;
  }
  try {
    await new Promise((r) => setTimeout(r, 50));
  } finally {
    await mutex.release();
  }
}

export async function jobs(port: number): Promise<{ maxWorkers: number; maxPair: number; counter: number; skipped: number }> {
  const redisClient = new Redis({ port, host: '127.0.0.1' });
  const s: Stats = { counter: 0, workers: 0, maxWorkers: 0, pairs: 0, maxPair: 0, skipped: 0 };
  await Promise.all([
    ...Array.from({ length: 10 }, () => increment(redisClient, s)),
    ...Array.from({ length: 9 }, () => work(redisClient, s)),
    ...Array.from({ length: 6 }, () => pair(redisClient, s)),
    optional(redisClient, s),
    optional(redisClient, s),
  ]);
  await redisClient.quit();
  return { maxWorkers: s.maxWorkers, maxPair: s.maxPair, counter: s.counter, skipped: s.skipped };
}
