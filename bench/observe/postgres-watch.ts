/**
 * Figure of docs/backends/postgres.md, "Watching" (a script, not a test: timings belong
 * here): the uncontended lock+release cost of `watch=notify` against the default `watch=poll`
 * (no watch statement), in alternating rounds (ABBA) on the same tables, first with nobody
 * watching, then with one `changes()` listening.
 *
 *   npx tsx bench/observe/postgres-watch.ts
 */
import pg from 'pg';
import { createLocker, type Locker } from '../../src/index.js';
import { PgEngine } from '../../src/backends/postgres/engine.js';
import { migratePostgres } from '../../src/backends/postgres/schema.js';
import { SqlBackend } from '../../src/backends/sql/backend.js';
import { tablesOf } from '../../src/backends/sql/statements.js';
import { startPostgres } from '../../scripts/servers/postgres.js';

const ROUNDS = Number(process.env['ROUNDS'] ?? 12);
const OPS = Number(process.env['OPS'] ?? 300);

/** A locker over its own pool; `notify` false is the default `watch=poll` (no watch statement). */
async function lockerOf(url: string, notify: boolean): Promise<{ locker: Locker; backend: SqlBackend }> {
  const pool = new pg.Pool({ connectionString: url, max: 4 });
  pool.on('error', () => undefined);
  const engine = new PgEngine(pool, {
    tables: tablesOf('locksmith'),
    channel: 'locksmith_changes',
    watchChannel: 'locksmith_watch',
    lockTimeoutMs: 2_000,
    listen: true,
    watch: notify,
    ownsPool: true,
  });
  const backend = new SqlBackend(engine, { sweepMs: 0, pollMs: 250, secrets: [] });
  await engine.start();
  return { locker: createLocker(backend), backend };
}

/** ms for `OPS` sequential lock+release on ids of `tag` (uncontended: nobody else uses them). */
async function round(l: Locker, tag: string): Promise<number> {
  const t0 = performance.now();
  for (let i = 0; i < OPS; i++) await (await l.lock(`bench:${tag}:${i % 50}`)).release();
  return performance.now() - t0;
}

const median = (xs: number[]): number => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)] ?? NaN;

async function compare(label: string, without: Locker, withNotify: Locker): Promise<void> {
  const t = { without: [] as number[], with: [] as number[] };
  for (let r = 0; r < ROUNDS; r++) {
    const order = r % 2 === 0 ? (['without', 'with'] as const) : (['with', 'without'] as const);
    for (const k of order) t[k].push(await round(k === 'with' ? withNotify : without, k));
  }
  const per = (xs: number[]): string => ((median(xs) / OPS) * 1000).toFixed(0);
  const a = median(t.without);
  const b = median(t.with);
  // Per pair of neighbouring rounds: the load of a shared machine drifts more slowly than that.
  const paired = median(t.with.map((w, i) => w / (t.without[i] ?? NaN)));
  const pct = (x: number): string => `${x >= 0 ? '+' : ''}${(x * 100).toFixed(1)}%`;
  console.log(
    `${label}: without ${per(t.without)} µs/op, with ${per(t.with)} µs/op (medians ${pct((b - a) / a)}, paired ${pct(paired - 1)})`,
  );
}

const server = await startPostgres();
try {
  const pool = new pg.Pool({ connectionString: server.url, max: 1 });
  await migratePostgres(pool, 'locksmith');
  await pool.end();
  const a = await lockerOf(server.url, false);
  const b = await lockerOf(server.url, true);
  await round(a.locker, 'without');
  await round(b.locker, 'with');
  console.log(`${ROUNDS} rounds × ${OPS} lock+release, medians`);
  await compare('nobody watching', a.locker, b.locker);
  const stop = new AbortController();
  const watching = (async () => {
    for await (const id of b.backend.changes!({ prefix: 'bench:', signal: stop.signal })) void id;
  })();
  await compare('one changes() listening', a.locker, b.locker);
  stop.abort();
  await watching;
  await Promise.all([a.locker.close(), b.locker.close()]);
} finally {
  await server.stop();
}
