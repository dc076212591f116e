/**
 * Masters without persistence that restart empty: the fencing token max-register stays
 * monotonic while a minority restarts at a time, and the restart scenario of
 * docs/backends/redlock.md ("Restarts and fsync"): an immediate restart can let a second
 * client in while the first still holds (the fence catches the stale holder), a restart
 * delayed past the ttl cannot.
 */
import { afterEach, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { Redis } from 'ioredis';
import { createLocker, FencedResource, QuorumError, StaleTokenError, type Locker, type LockerOptions } from '../../src/index.js';
import { RedlockBackend } from '../../src/backends/redlock/index.js';
import { keyBase } from '../../src/backends/redis-wire/keys.js';
import { startRedlock } from '../../scripts/servers/redlock.js';
import { lossOf, useServer } from '../helpers.js';

const server = await useServer(() => startRedlock({ count: 5 }));
const T = { timeout: 120_000 };
const open: Locker[] = [];

function client(options?: Partial<LockerOptions>): Locker {
  const l = createLocker(server.url, options);
  open.push(l);
  return l;
}
const id = (label: string): string => `rl:${label}:${randomBytes(6).toString('hex')}`;
const restart = (indexes: readonly number[]): Promise<unknown> => Promise.all(indexes.map((i) => server.nodes[i]?.restart()));
const kill = (indexes: readonly number[]): Promise<unknown> => Promise.all(indexes.map((i) => server.nodes[i]?.kill()));

afterEach(async () => {
  await Promise.allSettled(open.splice(0).map((l) => l.close()));
  await restart([0, 1, 2, 3, 4]);
});

describe('redlock: fencing tokens across the quorum', () => {
  test('tokens strictly increase while minorities of masters are killed and restart empty', T, async () => {
    const lockId = id('tokens');
    // A token far ahead of every clock on a majority of the registers, as a grant leaves it:
    // only the max-register can carry it on.
    const ahead = BigInt(Date.now()) * 1000n + 3_600_000_000n;
    for (const n of server.nodes.slice(0, 3)) {
      const raw = new Redis({ host: n.host, port: n.port });
      await raw.set(`${keyBase('locksmith:', lockId)}:rt`, ahead.toString());
      raw.disconnect();
    }
    const tokens: bigint[] = [];
    const once = async (): Promise<void> => {
      // A new client each time: no token remembered, everything comes from the masters.
      const locker = createLocker(server.url);
      try {
        const lock = await locker.lock(lockId, { timeoutMs: 30_000 });
        tokens.push(lock.token);
        await lock.release();
      } finally {
        await locker.close();
      }
    };
    await once();
    assert.ok(tokens[0] !== undefined && tokens[0] > ahead, 'the first token is above the register it read');
    for (const step of [[0], [1, 2], [3, 4], [0, 1], [2], [3, 4], [0, 2]]) {
      await restart(step);
      await once();
      await once();
    }
    for (let i = 1; i < tokens.length; i++) {
      const [prev, cur] = [tokens[i - 1], tokens[i]];
      assert.ok(prev !== undefined && cur !== undefined && cur > prev, `token ${i}: ${cur} after ${prev}`);
    }
  });

  test("the user's own clients work: new RedlockBackend([...ioredis clients])", T, async () => {
    const clients = server.nodes.map((n) => new Redis({ host: n.host, port: n.port }));
    const locker = createLocker(new RedlockBackend(clients, { labels: server.nodes.map((n) => `${n.host}:${n.port}`) }));
    open.push(locker);
    const lockId = id('own-clients');
    const a = await locker.lock(lockId);
    const waiting = client().lock(lockId, { timeoutMs: 30_000 });
    await a.release();
    const b = await waiting;
    assert.ok(b.token > a.token);
    await b.release();
    await locker.close();
    for (const c of clients) c.disconnect();
  });
});

describe('redlock: a master restarted without persistence', () => {
  /** A holds on masters 0, 1, 2 only (3 and 4 were down when it acquired). */
  async function holdOnThree(lockId: string, ttlMs: number): Promise<{ a: Awaited<ReturnType<Locker['lock']>>; b: Locker }> {
    const b = client();
    await b.backend();
    await kill([3, 4]);
    const a = await client({ ttlMs, autoExtend: false }).lock(lockId, { timeoutMs: 30_000 });
    await restart([3, 4]);
    return { a, b };
  }

  test('restarted at once, it lets a second client in while the first holds; the fence rejects the stale holder', T, async () => {
    const lockId = id('restart-now');
    const counter = new FencedResource(0);
    const { a, b } = await holdOnThree(lockId, 20_000);
    counter.update(a.token, (v) => v + 1);
    await restart([2]);
    const second = await b.lock(lockId, { timeoutMs: 30_000 });
    assert.equal(a.held, true, 'both believe they hold the lock: the safety violation of an immediate restart');
    assert.ok(second.token > a.token, 'the later grant has the larger token');
    counter.update(second.token, (v) => v + 1);
    assert.throws(() => counter.update(a.token, (v) => v + 1), StaleTokenError);
    assert.equal(counter.peek(), 2);
    await second.release();
    await a.release();
  });

  test('restarted only after the ttl, it lets nobody in while the first client holds', T, async () => {
    const lockId = id('restart-late');
    const ttlMs = 1_500;
    const { a, b } = await holdOnThree(lockId, ttlMs);
    const aLost = lossOf(a);
    await kill([2]);
    // b's connections to the masters restarted a moment ago may still be reconnecting (under
    // load): a QuorumError is no grant either, which is what this asserts.
    const early = await b.tryLock(lockId).catch((err: unknown) => {
      if (err instanceof QuorumError) return null;
      throw err;
    });
    assert.equal(early, null, 'two empty masters are not a majority');
    // The delayed restart: down for longer than the longest ttl.
    await aLost;
    await new Promise((resolve) => setTimeout(resolve, ttlMs));
    await restart([2]);
    assert.equal(a.held, false);
    const second = await b.lock(lockId, { timeoutMs: 30_000 });
    assert.ok(second.token > a.token);
    await second.release();
  });
});
