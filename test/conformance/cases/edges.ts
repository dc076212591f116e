import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { InvalidArgumentError, LockTimeoutError } from '../../../src/index.js';
import { waitingOn } from '../../helpers.js';
import { T, type SuiteContext } from '../suite.js';

/** Edges found by adversarial review: election terms, ids an engine cannot store, permits. */
export function edgeCases(ctx: SuiteContext): void {
  electionEdges(ctx);
  idEdges(ctx);
}

function electionEdges(ctx: SuiteContext): void {
  const { client, id } = ctx;
  describe('election edges', () => {
    test('a term whose lock was released is over: campaign() campaigns again instead of returning it', T, async () => {
      const name = id('released-term');
      const a = client().election(name, { id: 'a' });
      const b = client().election(name, { id: 'b' });
      const first = await a.campaign();
      await first.lock.release();
      const other = await b.campaign({ timeoutMs: 60_000 });
      // b leads: one attempt for a must not lead (it used to resolve at once with the released term).
      await assert.rejects(a.campaign({ timeoutMs: 0 }), LockTimeoutError);
      await other.resign();
      const second = await a.campaign({ timeoutMs: 60_000 });
      assert.ok(second.lock.held);
      assert.ok(second.token > other.token);
      assert.equal((await b.leader())?.id, 'a');
      await second.resign();
    });

    test('`await using` on the term lock ends the term too', T, async () => {
      const name = id('using-term');
      const a = client().election(name, { id: 'a' });
      const b = client().election(name, { id: 'b' });
      {
        await using _held = (await a.campaign()).lock;
      }
      const other = await b.campaign({ timeoutMs: 60_000 });
      await assert.rejects(a.campaign({ timeoutMs: 0 }), LockTimeoutError);
      await other.resign();
    });

    test('resign() withdraws a pending campaign(): the process does not lead afterwards', T, async () => {
      const name = id('resign-pending');
      const leader = await client().election(name, { id: 'leader' }).campaign();
      const locker = client();
      const a = locker.election(name, { id: 'a' });
      const queued = waitingOn(locker, name);
      const pending = a.campaign({ timeoutMs: 60_000 });
      await queued;
      await a.resign();
      await assert.rejects(pending, (e: unknown) => e instanceof Error && e.name === 'AbortError');
      await leader.resign();
      // Nobody else campaigns: had the withdrawn campaign stayed queued, it would lead now.
      const heir = await client().election(name, { id: 'heir' }).campaign({ timeoutMs: 60_000 });
      assert.equal((await a.leader())?.id, 'heir');
      await heir.resign();
    });
  });
}

function idEdges(ctx: SuiteContext): void {
  const { client, id, caps } = ctx;
  describe('ids every backend can store', () => {
    const invalid = async (p: Promise<unknown>, argument: string): Promise<void> => {
      await assert.rejects(p, (e: unknown) => {
        assert.ok(e instanceof InvalidArgumentError, `expected InvalidArgumentError, got ${String(e)}`);
        assert.equal(e.argument, argument);
        return true;
      });
    };

    test('a NUL byte or a lone surrogate in a lock id is an InvalidArgumentError, before any engine sees it', T, async () => {
      const base = id('bad-chars');
      for (const bad of [`${base}\u0000x`, `${base}\ud800`, `${base}\udfff`, `\udc00${base}`, `${base}\ud800x`]) {
        await invalid(client().lock(bad), 'lockId');
        await invalid(client().tryLock(bad), 'lockId');
        await invalid(client().inspect(bad), 'lockId');
        assert.throws(() => client().election(bad), InvalidArgumentError);
        assert.throws(() => client().election(id('ok'), { id: bad }), InvalidArgumentError);
      }
    });

    test('a surrogate pair (an astral character) is a valid id, distinct from its neighbours', T, async () => {
      const base = id('astral');
      const names = [`${base}😀`, `${base}😁`, `${base}\ufffd`];
      const locks = await Promise.all(names.map((n) => client().tryLock(n)));
      for (const [i, l] of locks.entries()) {
        assert.ok(l, `${names[i]} free`);
        assert.equal(l.lockId, names[i]);
      }
      await Promise.all(locks.map((l) => l?.release()));
    });

    test('a NUL byte or lone surrogate in an owner is an InvalidArgumentError', T, async () => {
      await invalid(client().lock(id('bad-owner'), { owner: 'a\u0000b' }), 'owner');
      await invalid(client().lock(id('bad-owner'), { owner: 'a\ud800' }), 'owner');
    });

    if (caps.permits) {
      test('permits beyond what every engine stores (2^31 − 1) are refused; the bound itself works', T, async () => {
        for (const permits of [2 ** 31, 2 ** 53, 2 ** 53 + 2, Number.MAX_VALUE]) {
          assert.throws(
            () => client().semaphore(id('huge-permits'), { permits }),
            (e) => e instanceof InvalidArgumentError && e.argument === 'permits',
          );
        }
        const widest = await client()
          .semaphore(id('max-permits'), { permits: 2 ** 31 - 1 })
          .acquire({ timeoutMs: 60_000 });
        await widest.release();
      });
    }
  });
}
