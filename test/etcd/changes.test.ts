/**
 * Watching by notification on etcd (docs/backends/etcd.md, "Watching"): `changes()` yields
 * `null` once its watches are in place, then the lock ids whose keys another client writes or
 * deletes — an acquisition, a waiter joining, a release, a forced release, a lease expiry —,
 * decoded and filtered by the id prefix; after a lost connection it yields `null` again, and
 * aborting ends it and cancels its watches.
 */
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { test } from 'node:test';
import { createLocker } from '../../src/index.js';
import { createEtcdBackend, type EtcdBackend } from '../../src/backends/etcd/index.js';
import { lockIdOfKey, watchedPrefixes } from '../../src/backends/etcd/changes.js';
import { startEtcd } from '../../scripts/servers/etcd.js';
import { eventually, faultProxy, seamRequest, useServer, waitingOn } from '../helpers.js';

const T = { timeout: 90_000 };
const server = await useServer(() => startEtcd());
const fresh = (): string => `chg-${randomBytes(4).toString('hex')}/`;
const isolated = (): string => `${server.url}?prefix=${fresh()}`;

/** What one `changes()` iteration has yielded so far, read in the background until `stop()`. */
interface Feed {
  readonly seen: (string | null)[];
  readonly ended: Promise<void>;
  /** Forget what was seen, then wait until `id` (or `null`) is yielded. */
  expect(id: string | null, what: string): Promise<void>;
  clear(): void;
  stop(): void;
}

function follow(backend: EtcdBackend, prefix: string): Feed {
  const ctl = new AbortController();
  const seen: (string | null)[] = [];
  const ended = (async () => {
    for await (const id of backend.changes({ prefix, signal: ctl.signal })) seen.push(id);
  })();
  return {
    seen,
    ended,
    expect: (id, what) => eventually(what, () => seen.includes(id), 15_000),
    clear: () => void seen.splice(0),
    stop: () => ctl.abort(),
  };
}

/** The etcd3 package's watch manager of a backend's client: its attached watchers. */
function watchersOf(backend: EtcdBackend): number {
  const raw = backend.client.raw as unknown as { watchManager: { watchers: unknown[] } };
  return raw.watchManager.watchers.length;
}

test('keys map back to lock ids: lock keys and fence keys, nothing else', () => {
  assert.equal(lockIdOfKey('p/', 'p/orders/694d8a1b2c'), 'orders');
  assert.equal(lockIdOfKey('p/', 'p/a%2Fb%25c/694d-1'), 'a/b%c');
  assert.equal(lockIdOfKey('p/', 'p/%fence/a%2Fb'), 'a/b');
  assert.equal(lockIdOfKey('p/', 'p/orders'), undefined, 'not one level under a lock segment');
  assert.equal(lockIdOfKey('p/', 'p/orders/x/y'), undefined, 'two levels under');
  assert.equal(lockIdOfKey('p/', 'p/%zz/x'), undefined, 'a segment encodeLockId never writes');
  assert.equal(lockIdOfKey('p/', 'q/orders/x'), undefined, 'another prefix');
  assert.deepEqual(watchedPrefixes('p/', ''), ['p/']);
  assert.deepEqual(watchedPrefixes('p/', 'a/'), ['p/a%2F', 'p/%fence/a%2F']);
});

test('acquire, a waiter joining, release and forceRelease each report the lock id; other prefixes do not', T, async () => {
  const url = isolated();
  const watching = createEtcdBackend(url);
  const a = createLocker(url, { name: 'chg-a' });
  const b = createLocker(url, { name: 'chg-b' });
  const id = 'ord/x%y';
  const feed = follow(watching, 'ord/');
  try {
    await eventually('null first', () => feed.seen.length > 0, 15_000);
    assert.equal(feed.seen[0], null, 'null comes first');
    feed.clear();
    await a.lock('outside/1', { ttlMs: 30_000 });
    const held = await a.lock(id, { ttlMs: 30_000 });
    await feed.expect(id, 'the acquisition is reported');
    assert.ok(!feed.seen.includes('outside/1'), 'an id outside the prefix is not reported');
    feed.clear();
    const queued = waitingOn(b, id);
    const next = b.lock(id, { ttlMs: 30_000, timeoutMs: 60_000 });
    await queued;
    await feed.expect(id, 'the waiter joining is reported');
    feed.clear();
    await held.release();
    await feed.expect(id, 'the release is reported');
    const second = await next;
    feed.clear();
    assert.equal(await watching.forceRelease(id), 1);
    await feed.expect(id, 'the forced release is reported');
    await second.release().catch(() => undefined);
    assert.ok(!feed.seen.includes('outside/1'));
  } finally {
    feed.stop();
    await feed.ended;
    await Promise.all([a.close(), b.close(), watching.close()]);
  }
});

test('while locks under the prefix keep changing, the first thing every feed yields is null (its two watches in place)', T, async () => {
  const url = isolated();
  const watching = createEtcdBackend(url);
  const writer = createLocker(url, { name: 'chg-writer' });
  let writing = true;
  const writes = (async () => {
    for (let i = 0; writing; i++) await (await writer.lock(`busy/${i % 4}`, { ttlMs: 30_000 })).release();
  })();
  try {
    for (let round = 0; round < 15; round++) {
      const ctl = new AbortController();
      let first: string | null | undefined;
      for await (const id of watching.changes({ prefix: 'busy/', signal: ctl.signal })) {
        first = id;
        break;
      }
      assert.equal(first, null, `round ${round}: an id came before the watches were in place`);
    }
  } finally {
    writing = false;
    await writes;
    await Promise.all([writer.close(), watching.close()]);
  }
});

test('a lease that etcd expires (a crashed holder) is reported: its keys are deleted', T, async () => {
  const url = `${isolated()}&leaseTtlMs=2000`;
  const watching = createEtcdBackend(url);
  const crashing = createEtcdBackend(url);
  const feed = follow(watching, '');
  try {
    await feed.expect(null, 'null first');
    const res = await crashing.tryAcquire(seamRequest('crash', 'owner-1', { ttlMs: 60_000 }));
    assert.ok(res.granted);
    await feed.expect('crash', 'the acquisition is reported');
    feed.clear();
    await crashing.abandon();
    await feed.expect('crash', 'the expiry is reported');
    assert.equal((await watching.inspect('crash')).holders.length, 0, 'the hold is gone');
  } finally {
    feed.stop();
    await feed.ended;
    await watching.close();
  }
});

test('a lost watch stream is re-established and yields null again; changes go on', T, async () => {
  const node = server.nodes[0];
  assert.ok(node);
  const proxy = await faultProxy(node.port);
  const prefix = fresh();
  const url = `${server.url}?prefix=${prefix}`;
  const watching = createEtcdBackend(`etcd://127.0.0.1:${proxy.port}?prefix=${prefix}`);
  const other = createLocker(url, { name: 'chg-other' });
  const feed = follow(watching, '');
  try {
    await feed.expect(null, 'null first');
    feed.clear();
    proxy.heal(); // drops every connection through the proxy: the watch stream breaks
    await feed.expect(null, 'null again once the watch is back');
    const h = await other.lock('after-reconnect', { ttlMs: 30_000 });
    await feed.expect('after-reconnect', 'a change after the reconnect is reported');
    await h.release();
  } finally {
    feed.stop();
    await feed.ended;
    await Promise.all([other.close(), watching.close()]);
    await proxy.close();
  }
});

test('aborting ends the iteration and cancels its watches', T, async () => {
  const url = isolated();
  const watching = createEtcdBackend(url);
  // The idle watch that keeps the stream open comes with the first watch and stays until close.
  watching.client.watch();
  const before = watchersOf(watching);
  const feeds = [follow(watching, ''), follow(watching, 'a/')];
  try {
    for (const f of feeds) await f.expect(null, 'null first');
    assert.equal(watchersOf(watching), before + 3, 'one watch, then two (locks and fences)');
    for (const f of feeds) f.stop();
    await Promise.all(feeds.map((f) => f.ended));
    await eventually('the watches are cancelled', () => watchersOf(watching) === before, 10_000);
    const ended = new AbortController();
    ended.abort();
    const none: (string | null)[] = [];
    for await (const id of watching.changes({ prefix: '', signal: ended.signal })) none.push(id);
    assert.deepEqual(none, [], 'an aborted signal yields nothing');
    assert.equal(watchersOf(watching), before);
    // A consumer that leaves the loop without aborting drops the watches too.
    for await (const id of watching.changes({ prefix: '', signal: new AbortController().signal })) if (id === null) break;
    await eventually('the watch of a loop left early is cancelled', () => watchersOf(watching) === before, 10_000);
  } finally {
    await watching.close();
  }
});

test('closing the backend ends a running iteration', T, async () => {
  const watching = createEtcdBackend(isolated());
  const feed = follow(watching, 'a/');
  await feed.expect(null, 'null first');
  await watching.close();
  await feed.ended;
  assert.deepEqual(feed.seen, [null]);
});
