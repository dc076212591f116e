/**
 * Watching by notification on a real Redis (docs/backends/redis.md, "Watching"): the scripts
 * publish every change of holds or queue on `<prefix>changes`, and `changes()` yields the lock
 * ids under its prefix, `null` once subscribed and again after a lost subscription.
 */
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { after, before, test } from 'node:test';
import { Redis } from 'ioredis';
import { createLocker, type Locker } from '../../src/index.js';
import { RedisBackend } from '../../src/backends/redis/index.js';
import { startRedis } from '../../scripts/servers/redis.js';
import type { RunningServer } from '../../scripts/servers/harness.js';
import { eventually, waitingOn } from '../helpers.js';

const T = { timeout: 120_000 };
const CHANNEL = 'locksmith:changes';

let server: RunningServer;
let admin: Redis;
const lockers: Locker[] = [];
const backends: RedisBackend[] = [];

before(async () => {
  server = await startRedis();
  admin = new Redis(server.url);
});

after(async () => {
  await Promise.all(lockers.map((l) => l.close()));
  await Promise.all(backends.map((b) => b.close()));
  admin.disconnect();
  await server.stop();
});

function locker(): Locker {
  const l = createLocker(server.url, { ttlMs: 30_000 });
  lockers.push(l);
  return l;
}

/** A fresh prefix per test. */
const space = (label: string): string => `chg-${label}-${randomBytes(4).toString('hex')}/`;

/** A watcher: what `changes()` yielded so far, and `done` once the iteration ended. */
interface Watch {
  readonly seen: (string | null)[];
  readonly done: Promise<void>;
  readonly stop: AbortController;
}

function watch(prefix: string): Watch {
  const backend = new RedisBackend(new Redis(server.url), { ownsClient: true });
  backends.push(backend);
  const stop = new AbortController();
  const seen: (string | null)[] = [];
  const done = (async () => {
    for await (const id of backend.changes({ prefix, signal: stop.signal })) seen.push(id);
  })();
  return { seen, done, stop };
}

/** Wait until `w` yielded `id` (again: counting from `from`), and return the new length. */
async function sees(w: Watch, id: string | null, from: number): Promise<number> {
  await eventually(`changes() yields ${String(id)}`, () => w.seen.slice(from).includes(id), 2_000);
  return w.seen.length;
}

async function subscribers(): Promise<number> {
  const reply = (await admin.call('PUBSUB', 'NUMSUB', CHANNEL)) as [string, number];
  return Number(reply[1]);
}

test('null first, then acquire, a waiter joining, a hand-off, cancel and forceRelease each name the lock', T, async () => {
  const prefix = space('all');
  const id = `${prefix}a`;
  const w = watch(prefix);
  await eventually('subscribed', () => w.seen.length > 0, 5_000);
  assert.equal(w.seen[0], null);
  const [holder, waiter] = [locker(), locker()];
  let n = w.seen.length;
  const held = await holder.lock(id);
  n = await sees(w, id, n);
  const queued = waitingOn(waiter, id);
  const pending = waiter.lock(id, { fair: true, timeoutMs: 60_000 });
  await queued;
  n = await sees(w, id, n);
  await held.release();
  n = await sees(w, id, n);
  const second = await pending;
  const gone = new AbortController();
  const joining = waitingOn(holder, id);
  const abandoned = holder.lock(id, { signal: gone.signal, timeoutMs: 60_000 }).catch(() => 'aborted');
  await joining;
  n = await sees(w, id, n);
  gone.abort();
  assert.equal(await abandoned, 'aborted');
  n = await sees(w, id, n);
  assert.equal(await holder.forceRelease(id, { reason: 'test' }), 1);
  await sees(w, id, n);
  await second.release().catch(() => undefined);
  w.stop.abort();
  await w.done;
});

test('an id outside the prefix is not yielded; ids with a brace are read back from their records', T, async () => {
  const prefix = space('in');
  const w = watch(prefix);
  await eventually('subscribed', () => w.seen.length > 0, 5_000);
  const l = locker();
  const outside = await l.lock(`${space('out')}x`);
  const inside = await l.lock(`${prefix}b`);
  // One connection delivers in publish order: once the later notice arrived, the earlier one had.
  let n = await sees(w, `${prefix}b`, 1);
  assert.deepEqual(w.seen, [null, `${prefix}b`]);
  const bracedOut = await l.lock(`${space('out')}{d}`);
  const braced = await l.lock(`${prefix}{c}`);
  n = await sees(w, `${prefix}{c}`, n);
  // Released, its keys are gone: the id comes from what the watcher read at the acquire.
  await Promise.all([outside.release(), inside.release(), bracedOut.release(), braced.release()]);
  await sees(w, `${prefix}{c}`, n);
  await sees(w, `${prefix}b`, n);
  assert.ok(!w.seen.slice(1).some((id) => id === null || !id.startsWith(prefix)), JSON.stringify(w.seen));
  w.stop.abort();
  await w.done;
});

test('a lost subscription is re-established and yields null again', T, async () => {
  const prefix = space('re');
  const w = watch(prefix);
  await eventually('subscribed', () => w.seen.length > 0, 5_000);
  await admin.call('CLIENT', 'KILL', 'TYPE', 'pubsub');
  let n = await sees(w, null, 1);
  await eventually('re-subscribed', async () => (await subscribers()) === 1, 5_000);
  const l = locker();
  const held = await l.lock(`${prefix}r`);
  n = await sees(w, `${prefix}r`, n);
  await held.release();
  await sees(w, `${prefix}r`, n);
  w.stop.abort();
  await w.done;
});

test('aborting the signal, or closing the backend, ends the iteration and drops the subscription', T, async () => {
  const prefix = space('end');
  const a = watch(prefix);
  const b = watch(prefix);
  await eventually('both subscribed', () => a.seen.length > 0 && b.seen.length > 0, 5_000);
  assert.equal(await subscribers(), 2);
  a.stop.abort();
  await a.done;
  await eventually('one subscriber left', async () => (await subscribers()) === 1, 5_000);
  await backends.at(-1)?.close();
  await b.done;
  await eventually('no subscriber left', async () => (await subscribers()) === 0, 5_000);
  const l = locker();
  await (await l.lock(`${prefix}z`)).release();
  assert.deepEqual(a.seen, [null]);
  assert.deepEqual(b.seen, [null]);
});
