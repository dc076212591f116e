/**
 * Cases for the fenced SQL writes of `locksmith-dlm/fenced` (docs/recipes/fencing.md), shared
 * by PostgreSQL and MySQL/MariaDB: the 33/34 case with real locks, repeated writes under one
 * token, a missing row, and writers under one lock that never lose an update.
 */
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { test } from 'node:test';
import { once } from 'node:events';
import { StaleTokenError, type Locker } from '../../src/index.js';
import type { FencedUpdate, FencedWriteOutcome } from '../../src/fenced/index.js';

/** What a dialect's test file hands the cases. */
export interface FencedSqlTarget {
  readonly name: string;
  /** Run one statement (`?` placeholders are rewritten per dialect by the target). */
  exec(sql: string, values?: unknown[]): Promise<Record<string, unknown>[]>;
  update(u: FencedUpdate): Promise<FencedWriteOutcome>;
  /** A BIGINT column read as text (exact above 2^53 whatever the driver does with numbers). */
  text(column: string): string;
  locker(): Locker;
}

const T = { timeout: 60_000 };

export function fencedSqlCases(t: FencedSqlTarget): void {
  const table = `fenced_${randomBytes(4).toString('hex')}`;
  const ready = t.exec(
    `CREATE TABLE ${table} (id VARCHAR(64) PRIMARY KEY, n BIGINT NOT NULL, note VARCHAR(64), fence BIGINT NOT NULL DEFAULT 0)`,
  );
  const row = async (id: string, n = 0): Promise<void> => {
    await ready;
    await t.exec(`INSERT INTO ${table} (id, n) VALUES (?, ?)`, [id, n]);
  };
  const read = async (id: string): Promise<Record<string, unknown> | undefined> =>
    (await t.exec(`SELECT n, note, ${t.text('fence')} AS fence FROM ${table} WHERE id = ?`, [id]))[0];

  test(`${t.name}: a holder that paused past its lease writes with its older token after the next holder wrote: refused`, T, async () => {
    const id = `acct-${randomBytes(4).toString('hex')}`;
    await row(id);
    const [a, b] = [t.locker(), t.locker()];
    try {
      const stale = await a.lock(id, { ttlMs: 500, autoExtend: false });
      if (!stale.signal.aborted) await once(stale.signal, 'abort');
      const next = await b.lock(id, { timeoutMs: 30_000 });
      assert.ok(next.token > stale.token);
      assert.equal(await t.update({ table, key: { id }, set: { n: 34, note: 'next' }, token: next.token }), 'written');
      const refused = await t.update({ table, key: { id }, set: { n: 33, note: 'stale' }, token: stale.token }).catch((e: unknown) => e);
      assert.ok(refused instanceof StaleTokenError, `refused: ${String(refused)}`);
      assert.equal(refused.newest, next.token);
      const r = await read(id);
      assert.equal(String(r?.['note']), 'next');
      assert.equal(String(r?.['fence']), next.token.toString());
      await next.release();
    } finally {
      await Promise.allSettled([a.close(), b.close()]);
    }
  });

  test(`${t.name}: one token writes again (equal values too); a missing row is reported, not inserted`, T, async () => {
    const id = `rep-${randomBytes(4).toString('hex')}`;
    await row(id);
    const token = 2n ** 62n + 1n;
    assert.equal(await t.update({ table, key: { id }, set: { n: 1 }, token }), 'written');
    assert.equal(await t.update({ table, key: { id }, set: { n: 1 }, token }), 'written');
    await assert.rejects(t.update({ table, key: { id }, set: { n: 2 }, token: token - 1n }), StaleTokenError, 'exact beyond 2^53');
    assert.equal(String((await read(id))?.['fence']), token.toString());
    // An empty `set` raises the fence alone (a new holder's first step, docs/guarantees.md).
    assert.equal(await t.update({ table, key: { id }, set: {}, token: token + 1n }), 'written');
    await assert.rejects(t.update({ table, key: { id }, set: { n: 3 }, token }), StaleTokenError);
    assert.equal(Number((await read(id))?.['n']), 1);
    assert.equal(await t.update({ table, key: { id: `${id}-none` }, set: { n: 1 }, token }), 'missing');
    assert.equal((await t.exec(`SELECT id FROM ${table} WHERE id = ?`, [`${id}-none`])).length, 0);
  });

  test(`${t.name}: writers under one lock never lose an update`, T, () => writersNeverLose(t, table, row, read));
}

async function writersNeverLose(
  t: FencedSqlTarget,
  table: string,
  row: (id: string) => Promise<void>,
  read: (id: string) => Promise<Record<string, unknown> | undefined>,
): Promise<void> {
  const id = `count-${randomBytes(4).toString('hex')}`;
  await row(id);
  const lockers = Array.from({ length: 4 }, () => t.locker());
  try {
    await Promise.all(
      lockers.map(async (l) => {
        for (let i = 0; i < 8; i++) {
          await l.withLock(
            id,
            async (lock) => {
              const n = Number((await read(id))?.['n']);
              assert.equal(await t.update({ table, key: { id }, set: { n: n + 1 }, token: lock.token }), 'written');
            },
            { timeoutMs: 30_000 },
          );
        }
      }),
    );
    assert.equal(Number((await read(id))?.['n']), 32);
  } finally {
    await Promise.allSettled(lockers.map((l) => l.close()));
  }
}
