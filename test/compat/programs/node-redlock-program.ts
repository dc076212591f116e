/**
 * A program written for node-redlock v5, unchanged but for the import line of `Redlock`
 * (was: `import Redlock, { ResourceLockedError } from 'redlock';`). test/compat/redlock.test.ts runs it.
 */
// ioredis 6 (this repository's) has no default export; with ioredis 5 it was `import Client from 'ioredis'`.
import { Redis as Client } from 'ioredis';
import Redlock, { ResourceLockedError } from '../../../src/compat/redlock.js';

export async function transfer(port: number, log: string[]): Promise<Record<string, number>> {
  const redisA = new Client({ port, host: '127.0.0.1' });
  const redlock = new Redlock([redisA], {
    driftFactor: 0.01,
    retryCount: 10,
    retryDelay: 200,
    retryJitter: 200,
    automaticExtensionThreshold: 500,
  });
  redlock.on('error', (error) => {
    // Ignore cases where a resource is explicitly marked as locked on a client.
    if (error instanceof ResourceLockedError) return;
    log.push(`error: ${String(error)}`);
  });

  const balances: Record<string, number> = { alice: 100, bob: 0 };
  const send = async (from: string, to: string, amount: number): Promise<void> => {
    await redlock.using([from, to], 5000, async (signal) => {
      const a = balances[from] ?? 0;
      const b = balances[to] ?? 0;
      await new Promise((r) => setTimeout(r, 5));
      if (signal.aborted) throw signal.error;
      balances[from] = a - amount;
      balances[to] = b + amount;
    });
  };
  // Opposite orders at once: the resources are taken in one order, so this cannot deadlock.
  await Promise.all([send('alice', 'bob', 10), send('bob', 'alice', 5), send('alice', 'bob', 1)]);

  let lock = await redlock.acquire(['report'], 5000);
  try {
    log.push('report locked');
    lock = await lock.extend(5000);
    log.push('report extended');
  } finally {
    await lock.release();
  }
  await redisA.quit();
  return balances;
}
