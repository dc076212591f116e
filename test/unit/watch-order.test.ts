/**
 * The order of a watch's events when one snapshot shows a hand-off (docs/observability.md,
 * "Watching"): the previous holder's end first, then the next holder's start, so that a
 * consumer that keeps "who holds" from the events never sees two holders of a mutex.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import type { LockState } from '../../src/backend.js';
import { diff, stateEntries } from '../../src/observe/diff.js';

const NOW = 1_700_000_000_000;
const hold = (ownerId: string, token: bigint): LockState['holders'][number] => ({
  ownerId,
  kind: 'mutex',
  token,
  acquiredAt: NOW - 5,
  leaseEndsAt: NOW + 10_000,
});

test('a hand-off in one snapshot: released (and the waiter not abandoned) before acquired', () => {
  const before = stateEntries({ lockId: 'a', holders: [hold('A', 1n)], waiters: 1, queue: [{ ownerId: 'B', kind: 'mutex', fair: true }] });
  const after = stateEntries({ lockId: 'a', holders: [hold('B', 2n)], waiters: 0, queue: [] });
  const events = diff(before, after, NOW);
  assert.deepEqual(
    events.map((e) => `${e.type} ${e.ownerId}`),
    ['released A', 'acquired B'],
  );
});

test('an expired hold followed by a new one: expired first; a new waiter after both', () => {
  const before = stateEntries({ lockId: 'a', holders: [{ ...hold('A', 1n), leaseEndsAt: NOW - 1 }], waiters: 0 });
  const after = stateEntries({ lockId: 'a', holders: [hold('B', 2n)], waiters: 1, queue: [{ ownerId: 'C', kind: 'mutex', fair: true }] });
  assert.deepEqual(
    diff(before, after, NOW).map((e) => `${e.type} ${e.ownerId}`),
    ['expired A', 'acquired B', 'waiting C'],
  );
});

test('the first snapshot is all beginnings, marked initial', () => {
  const after = stateEntries({ lockId: 'a', holders: [hold('A', 1n)], waiters: 1, queue: [{ ownerId: 'B', kind: 'mutex', fair: true }] });
  const events = diff(undefined, after, NOW);
  assert.deepEqual(
    events.map((e) => `${e.type} ${e.ownerId} ${e.initial === true}`),
    ['acquired A true', 'waiting B true'],
  );
});
