import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { InvalidArgumentError } from '../../../src/index.js';
import { T, type SuiteContext } from '../suite.js';

/** `locker.isCurrent(lockId, token)`: Chubby's sequencer check, on every backend. */
export function sequencerCases(ctx: SuiteContext): void {
  const { client, id, caps, shortTtl, crash } = ctx;
  describe('sequencer check (isCurrent)', () => {
    test("a holder's token is current until it releases; then only the next holder's is", T, async () => {
      const lockId = id('seq');
      const checker = client();
      const first = await client().lock(lockId);
      assert.equal(await checker.isCurrent(lockId, first.token), true);
      assert.equal(await checker.isCurrent(lockId, first.token + 1n), false);
      assert.equal(await checker.isCurrent(lockId, first.token - 1n), false);
      await first.release();
      assert.equal(await checker.isCurrent(lockId, first.token), false);
      const second = await client().lock(lockId);
      assert.equal(await checker.isCurrent(lockId, second.token), true);
      assert.equal(await checker.isCurrent(lockId, first.token), false);
      await second.release();
    });

    test("a crashed holder's token stops being current when its lease ends", T, async () => {
      const lockId = id('seq-crash');
      const doomed = client({ ttlMs: shortTtl });
      const lock = await doomed.lock(lockId);
      await crash(doomed);
      // The next holder gets in only after the crashed lease ended on the server.
      const next = await client().lock(lockId, { timeoutMs: 60_000 });
      assert.equal(await client().isCurrent(lockId, lock.token), false);
      assert.equal(await client().isCurrent(lockId, next.token), true);
      await next.release();
    });

    test('a lock id nobody ever held has no current token; a token that is not a bigint is refused', T, async () => {
      const checker = client();
      assert.equal(await checker.isCurrent(id('seq-never'), 1n), false);
      await assert.rejects(checker.isCurrent(id('seq-bad'), 1 as unknown as bigint), InvalidArgumentError);
      await assert.rejects(checker.isCurrent('', 1n), InvalidArgumentError);
    });

    if (caps.shared) {
      test("every reader's token is current while it reads", T, async () => {
        const lockId = id('seq-read');
        const rw = client().readWriteLock(lockId);
        const [a, b] = await Promise.all([rw.read(), client().readWriteLock(lockId).read()]);
        assert.equal(await client().isCurrent(lockId, a.token), true);
        assert.equal(await client().isCurrent(lockId, b.token), true);
        await a.release();
        assert.equal(await client().isCurrent(lockId, a.token), a.token === b.token);
        await b.release();
      });
    }

    if (caps.permits) {
      test("every permit holder's token is current", T, async () => {
        const lockId = id('seq-sem');
        const a = await client().semaphore(lockId, { permits: 2 }).acquire();
        const b = await client().semaphore(lockId, { permits: 2 }).acquire();
        assert.equal(await client().isCurrent(lockId, a.token), true);
        assert.equal(await client().isCurrent(lockId, b.token), true);
        await Promise.all([a.release(), b.release()]);
        assert.equal(await client().isCurrent(lockId, a.token), false);
      });
    }
  });
}
