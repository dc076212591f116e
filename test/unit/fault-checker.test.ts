/**
 * The fault checker (test/faults/checker.ts) on histories recorded by a real fenced store:
 * each figure must count the interleaving that defines it, and stay 0 when it does not happen.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { connectFencedStore, startFencedStore, type FenceMode, type FencedStoreClient } from '../../src/testing.js';
import { check, timeline } from '../../test/faults/checker.js';

async function recorded(mode: FenceMode, script: (a: FencedStoreClient, b: FencedStoreClient, note: (t: string) => void) => Promise<void>) {
  const store = await startFencedStore({ mode });
  const a = await connectFencedStore(store.port, 'a');
  const b = await connectFencedStore(store.port, 'b');
  try {
    await script(a, b, (t) => store.note('nemesis', t));
    return check(store.history(), store.value());
  } finally {
    a.close();
    b.close();
    await store.close();
  }
}

/** The 33/34 interleaving of docs/guarantees.md, "Fencing": A reads with 33, B reads with 34, A writes, B writes from a stale read. */
const interleaved = async (a: FencedStoreClient, b: FencedStoreClient): Promise<void> => {
  await a.begin(33n);
  const ra = await a.read(33n);
  await b.begin(34n);
  const rb = await b.read(34n);
  await a.write(33n, ra + 1).catch(() => undefined);
  await a.end(33n);
  await b.write(34n, rb + 1);
  await b.end(34n);
};

test('write-only fencing: the stale write, the lost update and the overlapping sections are counted', async () => {
  const f = await recorded('writes', interleaved);
  assert.equal(f.acceptedWrites, 2);
  assert.equal(f.staleWrites, 1);
  assert.equal(f.lostUpdates, 1);
  assert.equal(f.overlappingSections, 1);
  assert.equal(f.sections, 2);
});

test('read+write fencing: the same interleaving counts nothing', async () => {
  const f = await recorded('reads-and-writes', interleaved);
  assert.deepEqual([f.acceptedWrites, f.rejected, f.staleWrites, f.lostUpdates, f.overlappingSections], [1, 1, 0, 0, 0]);
});

test('double grants: overlapping sections count only when both leases were still valid after their end', async () => {
  const script = (aValid: boolean) => async (a: FencedStoreClient, b: FencedStoreClient) => {
    await a.begin(1n);
    await b.begin(2n);
    await a.end(1n);
    await a.note(`${aValid ? 'valid' : 'lost'} 1`);
    await b.end(2n);
    await b.note('valid 2');
  };
  assert.equal((await recorded('reads-and-writes', script(true))).doubleGrants, 1);
  assert.equal((await recorded('reads-and-writes', script(false))).doubleGrants, 0);
});

test('recovery runs from a kill to the next section begun; a killed section ends at its kill', async () => {
  const f = await recorded('reads-and-writes', async (a, b, note) => {
    await a.begin(1n);
    note('fault client-kill a');
    note('kill a');
    await new Promise((r) => setTimeout(r, 30));
    await b.begin(2n);
    await b.end(2n);
  });
  assert.equal(f.faults, 1);
  assert.equal(f.recoveriesMs.length, 1);
  assert.ok((f.recoveriesMs[0] ?? -1) >= 25, String(f.recoveriesMs));
  assert.equal(f.overlappingSections, 0);
});

test("after a kill, recovery ends at the next holder's grant as its worker noted it, not at its begin", async () => {
  const wall = (): number => performance.timeOrigin + performance.now();
  const f = await recorded('reads-and-writes', async (a, b, note) => {
    await b.note(`epoch ${wall().toFixed(1)}`); // what the runner notes (as 'runner' there)
    await a.begin(1n);
    note('kill a');
    await new Promise((r) => setTimeout(r, 30));
    await b.note(`granted 2 ${wall().toFixed(1)}`);
    // The begin reaches the store late (two processes to schedule on a loaded machine).
    await new Promise((r) => setTimeout(r, 300));
    await b.begin(2n);
    await b.end(2n);
  });
  // The epoch note above is b's, not the runner's: the store's clock is unknown, the begin counts.
  assert.ok((f.recoveriesMs[0] ?? -1) >= 300, String(f.recoveriesMs));
  const store = await startFencedStore({ mode: 'reads-and-writes' });
  const b = await connectFencedStore(store.port, 'b');
  try {
    store.note('runner', `epoch ${wall().toFixed(1)}`);
    store.note('nemesis', 'kill a');
    await new Promise((r) => setTimeout(r, 30));
    await b.note(`granted 2 ${wall().toFixed(1)}`);
    await new Promise((r) => setTimeout(r, 300));
    await b.begin(2n);
    const [ms] = check(store.history(), store.value()).recoveriesMs;
    assert.ok(ms !== undefined && ms >= 25 && ms < 300, `from the grant: ${String(ms)}`);
  } finally {
    b.close();
    await store.close();
  }
});

test('unhandled rejections, typed acquisition failures and stuck workers are counted from the notes', async () => {
  const f = await recorded('none', async (a, b, note) => {
    await a.note('unhandled rejection: Error: boom');
    await b.note('acquire failed: BACKEND_UNAVAILABLE');
    note('stuck b: last step note closing');
  });
  assert.equal(f.unhandled, 1);
  assert.equal(f.acquireFailures, 1);
  assert.deepEqual(f.stuck, ['stuck b: last step note closing']);
});

test('timeline: # for overlap, = for one owner, . for none, ^ under a fault', () => {
  const ev = (seq: number, at: number, client: string, op: 'begin' | 'end' | 'note', text?: string) => ({
    seq,
    at,
    client,
    op,
    ok: true,
    ...(text ? { text } : {}),
  });
  const line = timeline(
    [
      ev(0, 0, 'a', 'begin'),
      ev(1, 10, 'b', 'begin'),
      ev(2, 20, 'a', 'end'),
      ev(3, 30, 'b', 'end'),
      ev(4, 35, 'n', 'note', 'fault pause a'),
      ev(5, 39, 'n', 'note', 'heal pause'),
      ev(6, 60, 'n', 'note', 'idle'),
    ],
    6,
  );
  // Bucket 2 starts with both sections open, bucket 3 with one, 4 and 5 with none.
  assert.equal(line, '=##=..\n   ^  ');
});
