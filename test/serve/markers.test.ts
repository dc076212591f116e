/**
 * A hold's full marker is rolled to a new holder by a keepalive in its second half-life
 * (docs/serve.md, "Design"). A release after that, through the replica that granted the hold
 * (whose memory still names the marker's first holder), must remove the rolled marker too:
 * left behind, it made the next keepalive report the released hold as lost.
 */
import assert from 'node:assert/strict';
import { after, test } from 'node:test';
import { createLocker, InvalidArgumentError, type HolderInfo } from '../../src/index.js';
import { buildServer } from '../../src/serve/app.js';
import { eventually } from '../helpers.js';
import { client, fileUrl, startService } from './service.js';

const T = { timeout: 60_000 };
/** Short marker lives, so that a keepalive rolls one within the test (the default is an hour). */
const MARKER_TTL_MS = 6_000;
const url = fileUrl();
const a = await startService(url, { markerTtlMs: MARKER_TTL_MS });
const b = await startService(url, { markerTtlMs: MARKER_TTL_MS });
after(async () => {
  await Promise.all([a.close(), b.close()]);
});

/** The owner ids of the session's full marker of `lockId` (a holder of its index whose meta has the token). */
async function fullMarker(session: string, lockId: string): Promise<string[]> {
  const { holders } = await a.locker.inspect(`locksmith-serve/i/${session}`);
  const full = (h: HolderInfo): boolean => h.identity?.meta?.l === lockId && typeof h.identity.meta.t === 'string';
  return holders.filter(full).map((h) => h.ownerId);
}

test('a release after a keepalive rolled the hold’s marker leaves no marker that reports it lost', T, async () => {
  const [viaA, viaB] = [client(a.base), client(b.base)];
  const s = await viaA.session(20_000, 'roller');
  const got = await viaA.acquire('roll/one', { session: s });
  assert.equal(got.status, 200);
  // The hold is written down (its full marker) a moment after its grant.
  await eventually('the full marker', async () => (await fullMarker(s, 'roll/one')).length === 1);
  const first = await fullMarker(s, 'roll/one');
  // Past half the marker's life, a keepalive through the other replica rolls it.
  await new Promise((r) => setTimeout(r, MARKER_TTL_MS / 2 + 300));
  const renewed = await viaB.keepalive(s);
  assert.deepEqual([renewed.status, renewed.body.holds, renewed.body.lost], [200, 1, []], JSON.stringify(renewed.body));
  const rolled = await fullMarker(s, 'roll/one');
  assert.equal(rolled.length, 1);
  assert.notDeepEqual(rolled, first, 'the keepalive rolled the marker to a new holder');
  // Released through the replica that granted the hold and still remembers the first holder.
  assert.deepEqual((await viaA.release('roll/one', s, got.body.token)).body, { released: true });
  assert.deepEqual(await fullMarker(s, 'roll/one'), [], 'no marker of the released hold is left');
  const next = await viaA.keepalive(s);
  assert.deepEqual([next.status, next.body.holds, next.body.lost], [200, 0, []], JSON.stringify(next.body));
  assert.deepEqual((await viaA.end(s)).body, { released: 0 });
});

test('a closed service writes nothing more: a hold granted just before keeps its intent, no full marker follows', T, async () => {
  // The service does not close the locker it was given: a user that keeps it sees no late writes.
  const locker = createLocker(url, { name: 'serve-test' });
  const app = await buildServer({ insecure: true, locker });
  try {
    const base = await app.listen({ host: '127.0.0.1', port: 0 });
    const via = client(base);
    const s = await via.session(20_000, 'closing');
    assert.equal((await via.acquire('roll/closing', { session: s })).status, 200);
    await app.close();
    await new Promise((r) => setTimeout(r, 600));
    const { holders } = await locker.inspect(`locksmith-serve/i/${s}`);
    const full = holders.filter((h) => h.identity?.meta?.l === 'roll/closing' && typeof h.identity.meta.t === 'string');
    assert.deepEqual(full, [], 'no full marker written after close');
    assert.equal(holders.filter((h) => h.identity?.meta?.l === 'roll/closing').length, 1, 'the intent stays');
  } finally {
    await app.close();
    await locker.close();
  }
});

test('a marker life that is not a positive number of ms is an InvalidArgumentError, before anything is opened', async () => {
  const locker = createLocker(url, { name: 'serve-test' });
  try {
    for (const markerTtlMs of [0, -1, Number.NaN, Infinity, '60000' as unknown as number]) {
      await assert.rejects(buildServer({ insecure: true, locker, markerTtlMs }), InvalidArgumentError, String(markerTtlMs));
    }
  } finally {
    await locker.close();
  }
});
