/**
 * The kit's poll (src/util/poll.ts), which the SQL and Cassandra waiters sleep in: a wake-up
 * ends it with true, the time running out with false, an abort with the signal's reason; a
 * registry's `onSettled` runs once, before the promise settles, however it ends.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { jitter, pollSleep } from '../../src/backends/kit.js';

test('a wake-up ends the poll with true, and onSettled runs once before it settles', async () => {
  let settled = 0;
  const poll = pollSleep(60_000, new AbortController().signal, { onSettled: () => (settled += 1) });
  assert.equal(settled, 0);
  poll.wake();
  assert.equal(settled, 1, 'onSettled ran synchronously with the wake-up');
  poll.wake();
  assert.equal(await poll.woken, true);
  assert.equal(settled, 1);
});

test('the poll ends with false when its time runs out, and a later wake-up changes nothing', async () => {
  let settled = 0;
  const poll = pollSleep(1, new AbortController().signal, { jitter: 0.25, onSettled: () => (settled += 1) });
  assert.equal(await poll.woken, false);
  poll.wake();
  assert.equal(settled, 1);
});

test('an abort rejects the poll with the signal reason, unchanged; an aborted signal throws at once', async () => {
  const ctl = new AbortController();
  let settled = 0;
  const poll = pollSleep(60_000, ctl.signal, { onSettled: () => (settled += 1) });
  const reason = new Error('caller gave up');
  ctl.abort(reason);
  await assert.rejects(poll.woken, (err) => err === reason);
  assert.equal(settled, 1);
  assert.throws(
    () => pollSleep(1, ctl.signal, { onSettled: () => (settled += 1) }),
    (err) => err === reason,
  );
  assert.equal(settled, 1, 'no onSettled for a poll that never started');
});

test('jitter stays within its spread and never goes below 1 ms', () => {
  for (let i = 0; i < 1_000; i += 1) {
    const v = jitter(100, 0.25);
    assert.ok(v >= 75 && v <= 125, `${v} within ±25 %`);
  }
  assert.equal(jitter(0, 0.5), 1);
});
