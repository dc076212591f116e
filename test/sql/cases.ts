/**
 * Cases both SQL engines must pass beyond the conformance suite: the database
 * restarted under a held lock, a holder's connections killed, clients with skewed clocks,
 * a 1024-byte lock id, missing tables, bad URL parameters.
 */
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { after, describe, test } from 'node:test';
import { BackendUnavailableError, createLocker, InvalidArgumentError, type Locker } from '../../src/index.js';
import { aptInstall } from '../../scripts/servers/harness.js';
import { eventually } from '../helpers.js';

const execFileP = promisify(execFile);
const T = { timeout: 120_000 };

/** What an engine's test file hands over. */
export interface SqlTarget {
  readonly name: string;
  /** The server's URL with `?migrate=true`. */
  readonly url: string;
  /** Crash and restart the server (same data). */
  restart(): Promise<void>;
  /** Kill every client connection of the test user (KILL / pg_terminate_backend); resolves with how many. */
  killConnections(): Promise<number>;
  /**
   * The same as {@link killConnections}, but synchronous (a command-line client run with
   * `execFileSync`): the event loop does not run meanwhile, so the driver has not yet read the
   * server's goodbye on its idle pooled connections when the test's next call checks one out.
   */
  killConnectionsNow(): void;
  /**
   * Count the INSERT statements on `table` from now on (a trigger; every attempt's lock-row
   * statement is one); resolves a reader of the count.
   */
  countInserts(table: string): Promise<() => Promise<number>>;
  /** How many rows of `lockId` each lock table of the default prefix has (read as an admin). */
  rowsOf(lockId: string): Promise<{ locks: number; holders: number; queue: number }>;
  /** Run one statement on the lock tables' database as an admin. */
  exec(sql: string): Promise<void>;
}

/** Register the cases. */
export function sqlCases(t: SqlTarget): void {
  const open: Locker[] = [];
  const client = (o: Parameters<typeof createLocker>[1] = {}): Locker => {
    const l = createLocker(t.url, o);
    open.push(l);
    return l;
  };
  const id = (label: string): string => `sql:${label}:${randomBytes(5).toString('hex')}`;
  after(async () => {
    await Promise.allSettled(open.map((l) => l.close()));
  });

  describe(`${t.name}: leases live in the database, not in sessions`, () => {
    test('a holder whose connections are killed keeps its lease; the lease, not the session, decides', T, async () => {
      const lockId = id('killed');
      const holder = client();
      const lock = await holder.lock(lockId, { ttlMs: 10_000 });
      assert.ok((await t.killConnections()) > 0, 'some connection was killed');
      assert.equal(await client().tryLock(lockId), null, 'still held after its sessions died');
      await lock.extend();
      assert.equal(lock.signal.aborted, false);
      const waiter = client().lock(lockId, { timeoutMs: 60_000 });
      await lock.release();
      const next = await waiter;
      assert.ok(next.token > lock.token);
      await next.release();
    });

    test('pooled connections the server killed a moment ago: the next calls retry on fresh ones instead of failing', T, async () => {
      const l = client();
      // Several idle pooled connections: concurrent calls open them.
      const warm = await Promise.all(Array.from({ length: 8 }, (_, i) => l.lock(id(`warm${i}`))));
      await Promise.all(warm.map((w) => w.release()));
      for (const call of ['tryLock', 'lock', 'inspect'] as const) {
        t.killConnectionsNow();
        const lockId = id(`killed-${call}`);
        if (call === 'inspect') {
          assert.equal((await l.inspect(lockId)).holders.length, 0);
          continue;
        }
        const got = call === 'lock' ? await l.lock(lockId, { timeoutMs: 10_000 }) : await l.tryLock(lockId);
        assert.ok(got, `${call} got the free lock`);
        await got.release();
      }
    });

    test('a crashed holder whose connections are gone still blocks until its lease ends', T, async () => {
      const lockId = id('killed-crash');
      const holder = client({ autoExtend: false });
      await holder.lock(lockId, { ttlMs: 1_500 });
      await t.killConnections();
      assert.equal(await client().tryLock(lockId), null);
      const next = await client().lock(lockId, { timeoutMs: 60_000 });
      assert.equal(next.held, true);
      await next.release();
    });

    test(
      'the database restarted while a lock is held: the holder keeps its lease (or hears of the loss) and tokens keep increasing',
      T,
      async () => {
        const lockId = id('restart');
        const lock = await client().lock(lockId, { ttlMs: 20_000 });
        await t.restart();
        await eventually(
          'the holder extends again after the restart',
          async () => {
            if (lock.signal.aborted) return true;
            await lock.extend();
            return true;
          },
          60_000,
          200,
        );
        const other = client();
        if (lock.signal.aborted) {
          assert.ok(lock.signal.reason instanceof Error, 'the holder heard of the loss');
        } else {
          assert.equal(await other.tryLock(lockId), null, 'nobody else holds it beside the holder');
          await lock.release();
        }
        const next = await other.lock(lockId, { timeoutMs: 60_000 });
        assert.ok(next.token > lock.token, `token ${next.token} > ${lock.token}`);
        await next.release();
      },
    );
  });

  describe(`${t.name}: a long queue`, () => {
    test('waiters behind others wait without touching the lock row, and their queue rows stay alive past their lifetime', T, async () => {
      const prefix = `kq${randomBytes(3).toString('hex')}`;
      const url = `${t.url}&table=${prefix}&pollMs=1000`;
      const lockId = id('queue');
      const at = (): Locker => {
        const l = createLocker(url);
        open.push(l);
        return l;
      };
      const held = await at().lock(lockId, { ttlMs: 60_000 });
      const inserts = await t.countInserts(`${prefix}_locks`);
      const w = at();
      const n = 12;
      const order: number[] = [];
      const waits: Promise<void>[] = [];
      for (let i = 0; i < n; i++) {
        waits.push(
          w.lock(lockId, { ttlMs: 60_000, timeoutMs: 60_000 }).then(async (l) => {
            order.push(i);
            await l.release();
          }),
        );
        // One at a time, so that the queue order is the order of i.
        await eventually(`waiter ${i} queued`, async () => (await w.inspect(lockId)).waiters === i + 1, 30_000, 20);
      }
      const before = await inserts();
      // Longer than a queue row lives without a refresh (5 s).
      await new Promise((r) => setTimeout(r, 6_500));
      const attempts = (await inserts()) - before;
      assert.equal((await w.inspect(lockId)).waiters, n, 'no queue row expired');
      // The first waiter polls about once a second; the other eleven only read their position.
      assert.ok(attempts <= n, `${attempts} lock-row transactions in 6.5 s (before this change, every waiter's poll was one: ~45)`);
      await held.release();
      await Promise.all(waits);
      assert.deepEqual(
        order,
        Array.from({ length: n }, (_, i) => i),
        'granted in queue order',
      );
    });
  });

  describe(`${t.name}: the database's clock decides`, () => {
    for (const skew of ['+1d', '-1d']) {
      test(`a holder whose clock is ${skew} off changes nothing: its lease ends by the database's clock`, T, async () => {
        await aptInstall('faketime', ['faketime']);
        const lockId = id(`skew${skew}`);
        const child = fileURLToPath(new URL('./skewed-holder.ts', import.meta.url));
        const tsx = fileURLToPath(new URL('../../node_modules/.bin/tsx', import.meta.url));
        const { stdout } = await execFileP('faketime', ['-f', skew, tsx, child, t.url, lockId, '3000'], {
          env: { ...process.env, FAKETIME_DONT_FAKE_MONOTONIC: '1' },
          timeout: 60_000,
        });
        const seen = JSON.parse(stdout.trim().split('\n').pop() ?? '{}') as { token: string; wallClock: number; expiresInMs: number };
        assert.ok(Math.abs(seen.wallClock - Date.now()) > 3_600_000, 'the child really ran with a skewed clock');
        assert.ok(seen.expiresInMs > 0 && seen.expiresInMs <= 3_000, `lease of ${seen.expiresInMs} ms on the database's clock`);
        const other = client();
        assert.equal(await other.tryLock(lockId), null, 'the skewed holder still holds');
        const next = await other.lock(lockId, { timeoutMs: 60_000 });
        assert.ok(next.token > BigInt(seen.token));
        await next.release();
      });
    }
  });

  describe(`${t.name}: input`, () => {
    test('a 1024-byte lock id (multi-byte characters) works and is distinct from its prefix', T, async () => {
      const long = 'é'.repeat(511) + 'ab';
      assert.equal(Buffer.byteLength(long), 1024);
      const a = await client().lock(long);
      const b = await client().tryLock(long.slice(0, -1));
      assert.ok(b, 'a prefix is another lock');
      assert.equal(await client().tryLock(long), null);
      assert.equal((await client().inspect(long)).holders.length, 1);
      await a.release();
      await b.release();
    });

    test('missing tables are a typed error naming migrate()', T, async () => {
      const l = createLocker(t.url.replace('migrate=true', 'table=never_migrated'));
      open.push(l);
      const e = await l.lock(id('missing')).catch((x: unknown) => x);
      assert.ok(e instanceof BackendUnavailableError, String(e));
      assert.equal(e.context['causeCode'], 'MISSING_TABLE');
      assert.match(e.message, /never_migrated_locks.*migrate\(\)/);
    });

    test('unknown, repeated or out-of-range URL parameters are rejected', T, async () => {
      for (const bad of ['bogus=1', 'pollMs=0', 'table=Bad-Name', 'migrate=maybe', 'table=a&table=b']) {
        const l = createLocker(`${t.url}&${bad}`);
        open.push(l);
        await assert.rejects(l.lock(id('bad-url')), InvalidArgumentError, bad);
      }
    });

    test('credentials never show in errors', T, async () => {
      const u = new URL(t.url);
      u.username = 'nosuchuser';
      u.password = 'hunter2-secret';
      const l = createLocker(u.href);
      open.push(l);
      const e = await l.lock(id('auth')).catch((x: unknown) => x);
      assert.ok(e instanceof BackendUnavailableError, String(e));
      assert.doesNotMatch(`${e.message} ${JSON.stringify(e.context)}`, /hunter2-secret/);
    });
  });
}
