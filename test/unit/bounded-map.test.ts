/** The bounded caches of the service and the NATS backend (src/util/bounded-map.ts). */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { BoundedMap } from '../../src/util/bounded-map.js';

test('a BoundedMap forgets its oldest entry past its limit, and keeps the order of first insertion', () => {
  const m = new BoundedMap<string, number>(2);
  m.set('a', 1).set('b', 2);
  m.set('a', 10); // an update keeps its place: 'a' is still the oldest
  m.set('c', 3);
  assert.deepEqual(
    [...m.entries()],
    [
      ['b', 2],
      ['c', 3],
    ],
  );
  m.delete('b');
  m.set('b', 4); // re-inserted after a delete: the newest
  m.set('d', 5);
  assert.deepEqual([...m.keys()], ['b', 'd']);
  assert.equal(m.size, 2);
});

test('a BoundedMap of limit 0 keeps nothing', () => {
  const m = new BoundedMap<string, number>(0);
  m.set('a', 1);
  assert.equal(m.size, 0);
});
