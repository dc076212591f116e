/** Fenced values on a real Redis (`fencedSet` / `fencedGet`, docs/recipes/fencing.md). */
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { once } from 'node:events';
import { after, test } from 'node:test';
import { Redis } from 'ioredis';
import { createLocker, StaleTokenError } from '../../src/index.js';
import { fencedGet, fencedSet } from '../../src/fenced/index.js';
import { startRedis } from '../../scripts/servers/redis.js';
import { useServer } from '../helpers.js';

const server = await useServer(() => startRedis());
const redis = new Redis(server.url);
after(() => redis.disconnect());
const T = { timeout: 60_000 };
const key = (label: string): string => `fenced:${label}:${randomBytes(4).toString('hex')}`;

test('a holder that paused past its lease cannot write after the next holder read or wrote (33/34)', T, async () => {
  const id = key('acct');
  const [a, b] = [createLocker(server.url), createLocker(server.url)];
  try {
    const stale = await a.lock(id, { ttlMs: 500, autoExtend: false });
    assert.equal(await fencedGet(redis, id, stale.token), null);
    if (!stale.signal.aborted) await once(stale.signal, 'abort');
    const next = await b.lock(id, { timeoutMs: 30_000 });
    // The next holder only reads: the fence is raised all the same.
    assert.equal(await fencedGet(redis, id, next.token), null);
    await assert.rejects(
      fencedSet(redis, id, stale.token, 'stale'),
      (e: unknown) => e instanceof StaleTokenError && e.newest === next.token,
    );
    await fencedSet(redis, id, next.token, 'next');
    await assert.rejects(fencedGet(redis, id, stale.token), StaleTokenError);
    assert.equal(await fencedGet(redis, id, next.token), 'next');
    await next.release();
  } finally {
    await Promise.allSettled([a.close(), b.close()]);
  }
});

test('tokens compare exactly beyond 2^53; one token writes again', T, async () => {
  const id = key('big');
  const token = 2n ** 62n + 1n;
  await fencedSet(redis, id, token, 'x');
  await fencedSet(redis, id, token, 'y');
  await assert.rejects(fencedSet(redis, id, token - 1n, 'z'), StaleTokenError);
  await fencedSet(redis, id, token * 10n, 'w');
  assert.equal(await fencedGet(redis, id, token * 10n), 'w');
  assert.equal(await redis.hget(id, 'fence'), (token * 10n).toString());
});

test('writers under one lock never lose an update', T, async () => {
  const id = key('count');
  const lockers = Array.from({ length: 4 }, () => createLocker(server.url));
  try {
    await Promise.all(
      lockers.map(async (l) => {
        for (let i = 0; i < 8; i++) {
          await l.withLock(
            id,
            async (lock) => {
              const n = Number((await fencedGet(redis, id, lock.token)) ?? '0');
              await fencedSet(redis, id, lock.token, String(n + 1));
            },
            { timeoutMs: 30_000 },
          );
        }
      }),
    );
    assert.equal(await redis.hget(id, 'value'), '32');
  } finally {
    await Promise.allSettled(lockers.map((l) => l.close()));
  }
});
