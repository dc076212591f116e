import assert from 'node:assert/strict';
import { test } from 'node:test';
import { format } from 'node:util';
import createDebug from 'debug';
import { Registry } from 'prom-client';
import {
  BackendUnavailableError,
  createLocker,
  instrumentPrometheus,
  InvalidArgumentError,
  UnsupportedError,
  type LockerEvents,
  type WatchEvent,
} from '../../src/index.js';
import { MemoryBackend } from '../../src/backends/memory/index.js';
import type { Backend } from '../../src/backends/kit.js';
import { FaultyBackend } from './faulty.js';
import { eventually, waitingOn } from '../helpers.js';

/** The memory backend under another name: a second engine for the cursor checks. */
function renamed(table: string, name: string): Backend {
  const inner = new MemoryBackend(table);
  return {
    name,
    capabilities: inner.capabilities,
    tryAcquire: (r) => inner.tryAcquire(r as never),
    waitForChange: (id, t, s) => inner.waitForChange(id, t as never, s),
    cancel: (r, t) => inner.cancel(r as never, t as never),
    extend: (g, ttl) => inner.extend(g as never, ttl),
    release: (g) => inner.release(g as never),
    inspect: (id) => inner.inspect(id),
    list: (r) => inner.list(r),
    close: () => inner.close(),
  };
}

/** Collect `locker.watch()` until aborted. */
function collect(iterable: AsyncIterable<WatchEvent>): { seen: WatchEvent[]; done: Promise<void> } {
  const seen: WatchEvent[] = [];
  const done = (async () => {
    for await (const e of iterable) seen.push(e);
  })();
  return { seen, done };
}

test('list names the kind of each lock: mutex, rw, semaphore, election', async () => {
  const locker = createLocker('memory://observe-kinds');
  const held = [
    await locker.lock('k:mutex'),
    await locker.readWriteLock('k:rw').read(),
    await locker.semaphore('k:sem', { permits: 2 }).acquire(),
  ];
  const term = await locker.election('k:election', { id: 'node-1' }).campaign();
  const kinds = Object.fromEntries((await locker.list({ prefix: 'k:' })).locks.map((l) => [l.lockId, l.kind]));
  assert.deepEqual(kinds, { 'k:election': 'election', 'k:mutex': 'mutex', 'k:rw': 'rw', 'k:sem': 'semaphore' });
  const info = await locker.inspect('k:mutex');
  assert.equal(info.holders[0]?.identity?.pid, process.pid);
  assert.equal(info.holders[0].count, 1);
  await term.resign();
  await Promise.all(held.map((l) => l.release()));
  await locker.close();
});

test('a cursor from another backend, or for another prefix, is InvalidArgumentError, never an empty page', async () => {
  const mem = createLocker('memory://observe-cursor');
  const other = createLocker(renamed('observe-cursor', 'other'));
  const locks = await Promise.all(['c:1', 'c:2', 'c:3'].map((id) => mem.lock(id)));
  const page = await mem.list({ prefix: 'c:', limit: 2 });
  assert.equal(page.locks.length, 2);
  assert.ok(page.cursor);
  const rest = await mem.list({ prefix: 'c:', limit: 2, cursor: page.cursor });
  assert.deepEqual(
    rest.locks.map((l) => l.lockId),
    ['c:3'],
  );
  assert.equal(rest.cursor, undefined);
  await assert.rejects(
    other.list({ prefix: 'c:', cursor: page.cursor }),
    (e: unknown) => e instanceof InvalidArgumentError && /memory/.test(e.message),
  );
  await assert.rejects(mem.list({ prefix: 'c:1', cursor: page.cursor }), InvalidArgumentError);
  await Promise.all(locks.map((l) => l.release()));
  await Promise.all([mem.close(), other.close()]);
});

test('a backend without list or forceRelease: UnsupportedError from list, watch and forceRelease', async () => {
  const locker = createLocker(new FaultyBackend('observe-unsupported'));
  await assert.rejects(locker.list(), UnsupportedError);
  await assert.rejects(locker.forceRelease('x', { reason: 'r' }), UnsupportedError);
  await assert.rejects(collect(locker.watch()).done, UnsupportedError);
  await locker.close();
});

test('watch (polling) reports expired holds and abandoned waiters', async () => {
  const watcher = createLocker('memory://observe-watch');
  const ctl = new AbortController();
  const { seen, done } = collect(watcher.watch({ prefix: 'w:', signal: ctl.signal, everyMs: 20 }));
  const holder = createLocker('memory://observe-watch', { ttlMs: 200, autoExtend: false });
  const lock = await holder.lock('w:1');
  const waiter = createLocker('memory://observe-watch');
  const gaveUp = new AbortController();
  const queued = waitingOn(waiter, 'w:1');
  const waiting = waiter.lock('w:1', { signal: gaveUp.signal, fair: true });
  await queued;
  await eventually('waiting is seen', () => seen.some((e) => e.type === 'waiting'));
  gaveUp.abort(new Error('gave up'));
  await assert.rejects(waiting, /gave up/);
  await eventually('abandoned is seen', () => seen.some((e) => e.type === 'abandoned'));
  await eventually('expired is seen', () => seen.some((e) => e.type === 'expired' && e.token === lock.token));
  ctl.abort();
  await done;
  assert.equal(seen.find((e) => e.type === 'acquired')?.identity?.pid, process.pid);
  await Promise.all([watcher.close(), holder.close(), waiter.close()]);
});

test('timeout and error events, and their Prometheus counters labelled by backend', async () => {
  const registry = new Registry();
  const a = createLocker('memory://observe-events');
  const b = createLocker('memory://observe-events');
  await instrumentPrometheus(b, { registry });
  const held = await a.lock('e:1');
  const timeouts: LockerEvents['timeout'][] = [];
  b.on('timeout', (e) => timeouts.push(e));
  await assert.rejects(b.lock('e:1', { timeoutMs: 30 }), /timed out/);
  assert.equal(await b.tryLock('e:1', { waitMs: 30 }), null);
  assert.equal(await b.tryLock('e:1'), null, 'a one-shot tryLock is no timeout');
  assert.deepEqual(
    timeouts.map((t) => [t.lockId, t.timeoutMs]),
    [
      ['e:1', 30],
      ['e:1', 30],
    ],
  );
  const faulty = new FaultyBackend('observe-events');
  faulty.acquireError = new Error('connection reset');
  const c = createLocker(faulty);
  await instrumentPrometheus(c, { registry });
  const errors: LockerEvents['error'][] = [];
  c.on('error', (e) => errors.push(e));
  await assert.rejects(c.lock('e:2'), BackendUnavailableError);
  assert.deepEqual(
    errors.map((e) => [e.operation, e.lockId, e.backend]),
    [['acquire', 'e:2', 'faulty']],
  );
  const text = await registry.metrics();
  assert.match(text, /locksmith_timeouts_total\{kind="mutex",backend="memory"\} 2/);
  assert.match(text, /locksmith_backend_errors_total\{backend="faulty",operation="acquire"\} 1/);
  await held.release();
  await Promise.all([a.close(), b.close(), c.close()]);
});

test('DEBUG=locksmith* logs attempts, waits, renewals and breaks by lock id; never a meta value', async () => {
  const lines: string[] = [];
  const previous = createDebug.log;
  createDebug.log = (...args: unknown[]) => void lines.push(format(...args));
  createDebug.enable('locksmith:*');
  try {
    const a = createLocker('memory://observe-log', { ttlMs: 300, meta: { secret: 'hunter2' } });
    const lock = await a.lock('log:1');
    const waiting = a.lock('log:1', { timeoutMs: 60_000 });
    await eventually('a renewal', () => lines.some((l) => l.includes('renewed')));
    await a.forceRelease('log:1', { reason: 'test break' });
    await lock.release();
    await (await waiting).release();
    await a.close();
  } finally {
    createDebug.disable();
    createDebug.log = previous;
  }
  const text = lines.join('\n');
  for (const ns of ['locksmith:acquire', 'locksmith:lease', 'locksmith:observe']) assert.ok(text.includes(ns), `${ns} logged`);
  for (const what of ['attempt', 'woken', 'holding token', 'renewed', 'broken by', 'test break'])
    assert.ok(text.includes(what), `${what} logged`);
  assert.ok(!text.includes('hunter2'), 'no meta value in the log');
  assert.equal(createDebug('locksmith:acquire').enabled, false);
});
