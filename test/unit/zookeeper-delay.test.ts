/**
 * The ZooKeeper lock-delay's rules that need no server (docs/backends/zookeeper.md,
 * "Lock-delay"): which marker blocks which hold, the uuid flag, the delay session's timeout.
 */
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { test } from 'node:test';
import { asksDelay, delaySessionTimeout, delayUuid, markerName, orphanMarker } from '../../src/backends/zookeeper/delay.js';
import { protectedPrefix } from '../../src/backends/zookeeper/layout.js';

const node = (uuid: string, name: string, seq: number): string => `${protectedPrefix(uuid)}${name}${String(seq).padStart(10, '0')}`;

test('a marker blocks only while its holder node is gone, and a reader marker never blocks a reader', () => {
  const [r, w] = [delayUuid(), delayUuid()];
  const live = [node(r, '__READ__', 1), markerName('read', r), node(w, '__WRIT__', 2), markerName('write', w)];
  assert.equal(orphanMarker(live, 'write'), undefined, 'live holders: no orphan');
  const readerGone = live.filter((c) => !c.startsWith(protectedPrefix(r)));
  assert.equal(orphanMarker(readerGone, 'read'), undefined, 'a vanished reader lets readers in');
  assert.equal(orphanMarker(readerGone, 'write'), markerName('read', r), 'and blocks a writer');
  assert.equal(orphanMarker(readerGone, 'mutex'), markerName('read', r), 'and a mutex');
  const writerGone = live.filter((c) => !c.startsWith(protectedPrefix(w)));
  assert.equal(orphanMarker(writerGone, 'read'), markerName('write', w), 'a vanished writer blocks readers too');
});

test('only an acquisition with a delay carries the uuid flag; marker names carry no Curator lock name', () => {
  for (let i = 0; i < 100; i++) {
    assert.equal(asksDelay(node(delayUuid(), 'lock-', i)), true);
    assert.equal(asksDelay(node(randomUUID(), 'lock-', i)), false);
  }
  assert.equal(asksDelay('lock-0000000001'), false, 'an unprotected (Curator) node');
  for (const name of [markerName('mutex', delayUuid()), markerName('read', delayUuid())]) {
    for (const curator of ['lock-', '__READ__', '__WRIT__', 'lease-']) assert.equal(name.includes(curator), false, name);
  }
});

test("the delay session's timeout leaves the delay after the main session's latest expiry", () => {
  for (const [main, delay] of [
    [2_000, 5_000],
    [10_000, 1_000],
    [4_000, 60_000],
  ] as const) {
    const t = delaySessionTimeout(main, delay);
    // Last heard a third of its timeout before a crash; the main one expires up to a tick (≤ main/2) late.
    assert.ok((t * 2) / 3 >= main + main / 2 + delay, `${main} + ${delay} → ${t}`);
  }
});
