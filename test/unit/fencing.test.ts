import assert from 'node:assert/strict';
import { test } from 'node:test';
import { FencedResource, InvalidArgumentError, StaleTokenError } from '../../src/index.js';

// docs/guarantees.md, "Fencing": A (token 33) reads, B (token 34) reads, A writes before B does, then B writes.
function sequence33_34(res: FencedResource<number>): { aWrite: 'accepted' | 'rejected' } {
  const a = res.read(33n);
  const b = res.read(34n);
  let aWrite: 'accepted' | 'rejected' = 'accepted';
  try {
    res.write(33n, a + 1);
  } catch (err) {
    assert.ok(err instanceof StaleTokenError);
    aWrite = 'rejected';
  }
  res.write(34n, b + 1);
  return { aWrite };
}

test('write-only fencing accepts the stale write of the 33/34 sequence and loses an update', () => {
  const res = new FencedResource(0, { fenceReads: false });
  const { aWrite } = sequence33_34(res);
  assert.equal(aWrite, 'accepted');
  // Two increments, one survives: the lost update that write-only fencing lets through.
  assert.equal(res.peek(), 1);
});

test('fencing reads as well as writes rejects the stale write of the 33/34 sequence', () => {
  const res = new FencedResource(0);
  const { aWrite } = sequence33_34(res);
  assert.equal(aWrite, 'rejected');
  assert.equal(res.peek(), 1);
  assert.equal(res.rejected, 1);
  assert.equal(res.newestToken, 34n);
});

test('a read with an older token than one already seen is rejected', () => {
  const res = new FencedResource('x');
  res.write(10n, 'y');
  assert.throws(
    () => res.read(9n),
    (e) => e instanceof StaleTokenError && e.code === 'STALE_TOKEN' && e.token === 9n && e.newest === 10n,
  );
  assert.equal(res.read(10n), 'y');
});

test('update() is a fenced read-modify-write', () => {
  const res = new FencedResource(1);
  assert.equal(
    res.update(5n, (v) => v * 2),
    2,
  );
  assert.throws(() => res.update(4n, (v) => v + 1), StaleTokenError);
  assert.equal(res.peek(), 2);
});

test('a token that is not a bigint is a typed error', () => {
  const res = new FencedResource(0);
  assert.throws(() => res.write(3 as unknown as bigint, 1), InvalidArgumentError);
});
