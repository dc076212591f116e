/**
 * Redlock's liveness rules on three real masters (docs/backends/redlock.md, "Waiting",
 * "Renewals", "Timeouts"): two contenders that split the masters both back off and one
 * wins once the split clears; renewals are capped by default; a per-master timeout that is
 * not much smaller than the ttl is refused.
 */
import { after, test } from 'node:test';
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { Redis } from 'ioredis';
import { createLocker, InvalidArgumentError, LockLostError, type Locker } from '../../src/index.js';
import type { RedlockGrantData, RedlockTicket } from '../../src/backends/redlock/index.js';
import { DEFAULT_MAX_EXTENSIONS, splitBackoffMs } from '../../src/backends/redlock/quorum.js';
import { keyBase } from '../../src/backends/redis-wire/keys.js';
import type { AcquireResult, Backend, Grant } from '../../src/backend.js';
import { startRedlock } from '../../scripts/servers/redlock.js';
import { seamRequest, useServer } from '../helpers.js';

const server = await useServer(() => startRedlock({ count: 3 }));
const T = { timeout: 60_000 };
const open: Locker[] = [];
const masters = server.nodes.map((n) => new Redis({ host: n.host, port: n.port }));
after(async () => {
  await Promise.allSettled(open.map((l) => l.close()));
  for (const m of masters) m.disconnect();
});

async function seam(url = server.url): Promise<Backend<RedlockTicket, RedlockGrantData>> {
  const l = createLocker(url);
  open.push(l);
  return (await l.backend()) as Backend<RedlockTicket, RedlockGrantData>;
}
const id = (label: string): string => `split:${label}:${randomBytes(6).toString('hex')}`;
const rl = (lockId: string): string => `${keyBase('locksmith:', lockId)}:rl`;

/** Keep trying (backing off between attempts) until granted. */
async function acquireLoop(
  b: Backend<RedlockTicket, RedlockGrantData>,
  lockId: string,
  owner: string,
  first: AcquireResult<RedlockTicket, RedlockGrantData>,
): Promise<Grant<RedlockGrantData>> {
  let result = first;
  const signal = AbortSignal.timeout(30_000);
  while (!result.granted) {
    await b.waitForChange(lockId, result.contended.ticket, signal);
    result = await b.tryAcquire(seamRequest<RedlockTicket>(lockId, owner, { fair: false, ticket: result.contended.ticket, signal }));
  }
  return result.grant;
}

test('two contenders that split the masters both back off, and one wins once the split clears', T, async () => {
  const [a, b] = [await seam(), await seam()];
  const lockId = id('two');
  // Each contender holds its own minority (its value on one master); a third party holds the last.
  await masters[0]?.set(rl(lockId), 'owner-a', 'PX', 30_000);
  await masters[1]?.set(rl(lockId), 'owner-b', 'PX', 30_000);
  await masters[2]?.set(rl(lockId), 'third', 'PX', 30_000);
  const req = (owner: string) => seamRequest<RedlockTicket>(lockId, owner, { fair: false });
  const [ra, rb] = await Promise.all([a.tryAcquire(req('owner-a')), b.tryAcquire(req('owner-b'))]);
  assert.ok(!ra.granted && !rb.granted, 'one master each: no majority');
  assert.equal(ra.contended.ticket?.split, true, 'A saw a split vote');
  assert.equal(rb.contended.ticket?.split, true, 'B saw a split vote');
  assert.ok((ra.contended.ticket?.attemptMs ?? -1) >= 0 && (rb.contended.ticket?.attemptMs ?? -1) >= 0);
  assert.equal(await masters[0]?.get(rl(lockId)), null, 'A took back its minority');
  assert.equal(await masters[1]?.get(rl(lockId)), null, 'B took back its minority');
  // The split clears: the third party goes away. Both keep backing off and retrying.
  await masters[2]?.del(rl(lockId));
  const holders = new Set<string>();
  let overlap = false;
  const run = async (backend: typeof a, owner: string, first: typeof ra): Promise<void> => {
    const grant = await acquireLoop(backend, lockId, owner, first);
    if (holders.size > 0) overlap = true;
    holders.add(owner);
    await new Promise((resolve) => setTimeout(resolve, 50));
    holders.delete(owner);
    assert.equal(await backend.release(grant), true);
  };
  await Promise.all([run(a, 'owner-a', ra), run(b, 'owner-b', rb)]);
  assert.equal(overlap, false, 'never two holders at once');
});

test('the back-off after a split vote spans [attempt, 3 × attempt) plus the jitter', () => {
  assert.equal(
    splitBackoffMs(40, 50, () => 0),
    40,
  );
  assert.ok(splitBackoffMs(40, 50, () => 0.999_999) < 3 * 40 + 50);
  assert.ok(splitBackoffMs(40, 0, () => 0.999_999) > 2.9 * 40, 'comparably longer than the attempt');
  assert.equal(
    splitBackoffMs(-1, 0, () => 0.5),
    0,
  );
});

test('renewals are capped by default: the next one past the cap gives the lock up', T, async () => {
  const b = await seam();
  const lockId = id('cap');
  const result = await b.tryAcquire(seamRequest<RedlockTicket>(lockId, 'capped', { fair: false, wait: false }));
  assert.ok(result.granted);
  const grant = result.grant;
  grant.data.extensions = DEFAULT_MAX_EXTENSIONS - 1;
  assert.deepEqual(await b.extend(grant, 10_000), { ttlMs: 10_000 }, 'the last renewal allowed');
  await assert.rejects(b.extend(grant, 10_000), LockLostError);
  assert.equal(await b.release(grant), true, 'the hold itself stays until released or expired');
});

test('a per-master timeout above ttl/10 is refused; the default shrinks to ttl/10', T, async () => {
  const strict = createLocker(`${server.url}?nodeTimeoutMs=200`, { ttlMs: 1_000 });
  open.push(strict);
  await assert.rejects(strict.tryLock(id('ratio')), InvalidArgumentError);
  const fine = await strict.tryLock(id('ratio'), { ttlMs: 2_000 });
  assert.ok(fine, 'ttl = 10 × timeout is accepted');
  await fine.release();
  const defaults = createLocker(server.url, { ttlMs: 1_000 });
  open.push(defaults);
  const lock = await defaults.tryLock(id('default'));
  assert.ok(lock, 'the default timeout adapts to a short ttl');
  await lock.release();
});
