/**
 * Listing by SCAN while the keyspace changes between pages (docs/backends/redis.md,
 * "Listing"): every lock held throughout the paging is listed. A page used to resume a SCAN
 * step by position, sending its cursor again and skipping the keys it had taken; keys
 * written between the two pages (here: other clients' keys, which grow and rehash Redis's
 * table) made that cursor answer other keys in another order, and locks were left out.
 */
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { Redis } from 'ioredis';
import { createLocker, type Locker } from '../../src/index.js';
import type { LockState } from '../../src/backend.js';
import { startRedis } from '../../scripts/servers/redis.js';
import type { RunningServer } from '../../scripts/servers/harness.js';

let server: RunningServer;
let locker: Locker;
let other: Redis;

before(async () => {
  server = await startRedis();
  locker = createLocker(server.url, { ttlMs: 60_000, autoExtend: false });
  other = new Redis(server.url);
});

after(async () => {
  other.disconnect();
  await locker.close();
  await server.stop();
});

/** Every page of `prefix` at `limit`, with `between()` run after each page. */
async function pages(prefix: string, limit: number, between: () => Promise<unknown>): Promise<LockState[]> {
  const backend = await locker.backend();
  assert.ok(backend.list);
  const listed: LockState[] = [];
  let cursor: string | undefined;
  do {
    const page = await backend.list({ prefix, limit, cursor, signal: new AbortController().signal });
    assert.ok(page.locks.length <= limit, `a page of ${page.locks.length} with limit ${limit}`);
    listed.push(...page.locks);
    cursor = page.cursor;
    await between();
  } while (cursor !== undefined);
  return listed;
}

test('redis: paging while other keys are written between pages lists every lock held throughout', { timeout: 120_000 }, async () => {
  let filler = 0;
  const missed: string[] = [];
  for (let trial = 0; trial < 80; trial++) {
    // An empty keyspace each time, and lock counts that reach the table's next size at
    // different points of the paging, where the other keys make it grow and rehash.
    await other.flushall();
    const prefix = `churn-${trial}/`;
    const ids = Array.from({ length: 50 + trial * 4 }, (_, i) => `${prefix}${i}`);
    const held = await Promise.all(ids.map((id) => locker.lock(id)));
    const listed = await pages(prefix, 7, () => Promise.all(Array.from({ length: 5 }, () => other.set(`other-${filler++}`, 'x'))));
    const seen = new Set(listed.map((s) => s.lockId));
    missed.push(...ids.filter((id) => !seen.has(id)));
    await Promise.all(held.map((h) => h.release()));
  }
  assert.deepEqual(missed, [], `${missed.length} held locks not listed`);
});
