import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { performance } from 'node:perf_hooks';
import { FencedResource } from '../../../src/index.js';
import { waitingOn } from '../../helpers.js';
import { T, type SuiteContext } from '../suite.js';

/** Mutual exclusion, fencing tokens, hand-over to a waiter and inspect(). */
export function exclusionCases(ctx: SuiteContext): void {
  describe('mutual exclusion and tokens', () => {
    test('lock() returns a handle with lockId, ownerId, bigint token, live signal and future validUntil', T, () =>
      lockReturnsHandleLockIdOwnerId(ctx),
    );

    test('16 concurrent contenders never overlap: a fenced read-modify-write counter loses nothing', T, () =>
      n16ConcurrentContendersNeverOverlap(ctx),
    );

    test('tokens strictly increase across owners', T, () => tokensStrictlyIncreaseAcrossOwners(ctx));

    test('tokens increase per lockId independently of other lock ids', T, () => tokensIncreasePerLockIdIndependently(ctx));

    test('a released lock goes to the waiting client', T, () => releasedLockGoesWaitingClient(ctx));

    test('inspect() shows the holder and its token', T, () => inspectShowsHolderToken(ctx));
  });
}

async function lockReturnsHandleLockIdOwnerId(ctx: SuiteContext): Promise<void> {
  const { client, id } = ctx;
  const lockId = id('handle');
  const lock = await client().lock(lockId);
  assert.equal(lock.lockId, lockId);
  assert.equal(typeof lock.ownerId, 'string');
  assert.ok(lock.ownerId.length > 0);
  assert.equal(typeof lock.token, 'bigint');
  assert.ok(lock.token > 0n);
  assert.equal(lock.signal.aborted, false);
  assert.ok(lock.validUntil > performance.now());
  assert.equal(lock.held, true);
  await lock.release();
  assert.equal(lock.held, false);
}

async function n16ConcurrentContendersNeverOverlap(ctx: SuiteContext): Promise<void> {
  const { client, id } = ctx;
  const lockId = id('exclusion');
  const counter = new FencedResource(0);
  const rounds = 3;
  let inside = 0;
  let maxInside = 0;
  await Promise.all(
    Array.from({ length: 16 }, async () => {
      const locker = client();
      for (let i = 0; i < rounds; i++) {
        await locker.withLock(lockId, async (lock) => {
          inside += 1;
          maxInside = Math.max(maxInside, inside);
          const v = counter.read(lock.token);
          await sleep(1);
          counter.write(lock.token, v + 1);
          inside -= 1;
        });
      }
    }),
  );
  assert.equal(maxInside, 1);
  assert.equal(counter.rejected, 0);
  assert.equal(counter.peek(), 16 * rounds);
}

async function tokensStrictlyIncreaseAcrossOwners(ctx: SuiteContext): Promise<void> {
  const { client, id } = ctx;
  const lockId = id('tokens');
  const clients = [client(), client(), client()];
  const tokens: bigint[] = [];
  for (let i = 0; i < 9; i++) {
    const lock = await clients[i % 3]!.lock(lockId);
    tokens.push(lock.token);
    await lock.release();
  }
  for (let i = 1; i < tokens.length; i++) assert.ok(tokens[i]! > tokens[i - 1]!, `token ${tokens[i]} after ${tokens[i - 1]}`);
}

async function tokensIncreasePerLockIdIndependently(ctx: SuiteContext): Promise<void> {
  const { client, id } = ctx;
  const a = id('tok-a');
  const b = id('tok-b');
  const locker = client();
  const seen: Record<string, bigint[]> = { [a]: [], [b]: [] };
  for (const lockId of [a, b, a, b, a]) {
    const lock = await locker.lock(lockId);
    seen[lockId]!.push(lock.token);
    await lock.release();
  }
  for (const list of Object.values(seen)) {
    for (let i = 1; i < list.length; i++) assert.ok(list[i]! > list[i - 1]!);
  }
}

async function releasedLockGoesWaitingClient(ctx: SuiteContext): Promise<void> {
  const { client, id } = ctx;
  const lockId = id('handoff');
  const a = client();
  const b = client();
  const held = await a.lock(lockId);
  const waiting = waitingOn(b, lockId);
  const next = b.lock(lockId, { timeoutMs: 60_000 });
  await waiting;
  await held.release();
  const got = await next;
  assert.ok(got.token > held.token);
  await got.release();
}

async function inspectShowsHolderToken(ctx: SuiteContext): Promise<void> {
  const { client, id } = ctx;
  const lockId = id('inspect');
  const locker = client();
  const lock = await locker.lock(lockId);
  const state = await locker.inspect(lockId);
  assert.equal(state.lockId, lockId);
  assert.ok(state.holders.some((h) => h.token === lock.token));
  await lock.release();
  const after = await locker.inspect(lockId);
  assert.equal(after.holders.length, 0);
}
