/**
 * The kit's HoldTable (src/backends/hold-table.ts), which etcd and ZooKeeper build their holds
 * on: a hold's own ttl ends in one `not-held` loss after the backend removed it, any other
 * loss is told once, and close-time clearing tells nobody.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { HoldTable, LockLostError, type Grant, type TrackedHold } from '../../src/backends/kit.js';

interface Data {
  readonly id: string;
}
interface Hold extends TrackedHold<Data> {
  attached: boolean;
}

function setup(): {
  table: HoldTable<Data, Hold>;
  removed: string[];
  detached: string[];
  told: string[];
  grant: (id: string) => Grant<Data>;
} {
  const removed: string[] = [];
  const detached: string[] = [];
  const told: string[] = [];
  const table = new HoldTable<Data, Hold>({
    backend: 'test',
    make: (grant, onLost) => ({ grant, onLost, timer: undefined, attached: true }),
    expired: (h) => {
      removed.push(h.grant.data.id);
      return { reason: 'ttl' };
    },
    dropped: (h) => detached.push(h.grant.data.id),
  });
  const grant = (id: string): Grant<Data> => ({
    lockId: id,
    kind: 'mutex',
    ownerId: 'o',
    token: 1n,
    ttlMs: 1_000,
    reentered: false,
    data: { id },
  });
  return { table, removed, detached, told, grant };
}

test("a hold's own ttl ends in its removal and one not-held loss; an extend re-arms it", async () => {
  const { table, removed, detached, told, grant } = setup();
  const g = grant('a');
  const h = table.add(
    g,
    (reason, err) => {
      assert.ok(err instanceof LockLostError);
      told.push(`${reason} ${String(err.context['backend'])} ${String(err.context['reason'])}`);
    },
    30,
  );
  table.arm(h, 80);
  await sleep(50);
  assert.deepEqual(told, [], 're-armed: not yet');
  for (let i = 0; i < 100 && told.length === 0; i++) await sleep(10);
  assert.deepEqual(told, ['not-held test ttl']);
  assert.deepEqual(removed, ['a']);
  assert.deepEqual(detached, ['a']);
  assert.equal(table.get(g.data), undefined);
});

test('lose() tells once; loseWhere() picks; drop() and clear() tell nobody', () => {
  const { table, detached, told, grant } = setup();
  const onLost = (reason: string): void => void told.push(reason);
  const a = table.add(grant('a'), onLost, 60_000);
  table.add(grant('b'), onLost, 60_000);
  table.add(grant('c'), onLost, 60_000);
  const d = grant('d');
  table.add(d, onLost, 60_000);
  table.lose(a, 'not-held', {});
  table.lose(a, 'session', {});
  assert.deepEqual(told, ['not-held']);
  table.loseWhere((h) => h.grant.data.id === 'b', 'session', {});
  assert.deepEqual(told, ['not-held', 'session']);
  assert.equal(table.drop(d.data), true);
  assert.equal(table.drop(d.data), false);
  table.clear();
  assert.deepEqual(told, ['not-held', 'session'], 'nobody told on drop or clear');
  assert.deepEqual(detached.sort(), ['a', 'b', 'c', 'd']);
});

test('a throwing loss callback does not escape the timer', async () => {
  const { table, told, grant } = setup();
  table.add(
    grant('a'),
    () => {
      told.push('called');
      throw new Error('listener bug');
    },
    5,
  );
  for (let i = 0; i < 100 && told.length === 0; i++) await sleep(10);
  assert.deepEqual(told, ['called']);
});
