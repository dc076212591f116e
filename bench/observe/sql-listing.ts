/**
 * Figures of docs/backends/postgres.md and mysql.md, "Listing" (a script, not a test: timings
 * belong here). On a server the harness starts:
 * - the uncontended lock+release cost with the identity stored against a checkout that does
 *   not store it, in alternating rounds (ABBA) on the same tables;
 * - paging through 10,000 held locks with limit 1000.
 *
 *   git archive <commit before> src | tar -x -C .ab-base
 *   npx tsx bench/observe/sql-listing.ts postgres .ab-base/src   (or mysql)
 */
import { resolve } from 'node:path';
import { pathToFileURL } from 'node:url';
import { createLocker, type Locker } from '../../src/index.js';
import type { Backend } from '../../src/backend.js';
import { startPostgres } from '../../scripts/servers/postgres.js';
import { startMariaDb } from '../../scripts/servers/mariadb.js';

const [engine = 'postgres', baseSrc] = process.argv.slice(2);
const ROUNDS = Number(process.env['ROUNDS'] ?? 12);
const OPS = Number(process.env['OPS'] ?? 300);
const HELD = Number(process.env['HELD'] ?? 10_000);

/** ms for `OPS` sequential lock+release on ids of `tag` (uncontended: nobody else uses them). */
async function round(l: Locker, tag: string): Promise<number> {
  const t0 = performance.now();
  for (let i = 0; i < OPS; i++) await (await l.lock(`bench:${tag}:${i % 50}`)).release();
  return performance.now() - t0;
}

const median = (xs: number[]): number => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)] ?? NaN;

async function identityCost(url: string): Promise<void> {
  if (baseSrc === undefined) return;
  const base = (await import(pathToFileURL(resolve(baseSrc, 'index.ts')).href)) as { createLocker: typeof createLocker };
  const before = base.createLocker(url);
  const after = createLocker(url);
  await round(before, 'before');
  await round(after, 'after');
  const t = { before: [] as number[], after: [] as number[] };
  for (let r = 0; r < ROUNDS; r++) {
    const order = r % 2 === 0 ? (['before', 'after'] as const) : (['after', 'before'] as const);
    for (const v of order) t[v].push(await round(v === 'before' ? before : after, v));
  }
  const [b, a] = [median(t.before) / OPS, median(t.after) / OPS];
  // Paired: each round's after against the before next to it, so that load drifting between rounds cancels out.
  const ratios = t.after.map((x, i) => x / (t.before[i] ?? NaN)).sort((p, q) => p - q);
  const pct = (x: number | undefined): string => `${(((x ?? NaN) - 1) * 100).toFixed(1)} %`;
  console.log(`${engine} uncontended lock+release, ${ROUNDS} alternating rounds of ${OPS}:`);
  console.log(`  median before ${(b * 1000).toFixed(0)} µs, after ${(a * 1000).toFixed(0)} µs`);
  console.log(
    `  paired after/before: median ${pct(median(ratios))}, quartiles ${pct(ratios[Math.floor(ROUNDS / 4)])} … ${pct(ratios[Math.floor((3 * ROUNDS) / 4)])}`,
  );
  await Promise.all([before.close(), after.close()]);
}

/**
 * The same comparison op by op: before, after and a second before (the control: the same
 * code twice shows the noise floor) take turns on every lock+release, rotating who goes
 * first, so all see the same load; per-op medians resist the outliers of a shared machine.
 */
async function identityCostInterleaved(url: string): Promise<void> {
  if (baseSrc === undefined) return;
  const base = (await import(pathToFileURL(resolve(baseSrc, 'index.ts')).href)) as { createLocker: typeof createLocker };
  const lockers = { before: base.createLocker(url), control: base.createLocker(url), after: createLocker(url) };
  const names = ['before', 'control', 'after'] as const;
  const t = { before: [] as number[], control: [] as number[], after: [] as number[] };
  const n = ROUNDS * OPS;
  for (let i = 0; i < n; i++) {
    for (let k = 0; k < 3; k++) {
      const v = names[(i + k) % 3] ?? 'before';
      const t0 = performance.now();
      await (await lockers[v].lock(`bench:op-${v}:${i % 50}`)).release();
      if (i >= 100) t[v].push(performance.now() - t0);
    }
  }
  const [b, c, a] = [median(t.before), median(t.control), median(t.after)];
  const pct = (x: number): string => `${(((x - b) / b) * 100).toFixed(1)} %`;
  console.log(`${engine} uncontended lock+release, ${n} interleaved ops each (first 100 dropped): per-op median`);
  console.log(
    `  before ${(b * 1000).toFixed(0)} µs, after ${(a * 1000).toFixed(0)} µs (${pct(a)}), control ${(c * 1000).toFixed(0)} µs (${pct(c)})`,
  );
  await Promise.all(Object.values(lockers).map((l) => l.close()));
}

async function pagingCost(url: string): Promise<void> {
  const l = createLocker(url);
  const held = [];
  for (let i = 0; i < HELD; i += 200) {
    held.push(
      ...(await Promise.all(Array.from({ length: Math.min(200, HELD - i) }, (_, k) => l.lock(`held:${i + k}`, { ttlMs: 600_000 })))),
    );
  }
  const b = (await l.backend()) as Required<Pick<Backend, 'list'>>;
  for (let run = 0; run < 3; run++) {
    const t0 = performance.now();
    let n = 0;
    let pages = 0;
    let cursor: string | undefined;
    do {
      const page = await b.list({ prefix: 'held:', limit: 1000, cursor, signal: new AbortController().signal });
      n += page.locks.length;
      pages += 1;
      cursor = page.cursor;
    } while (cursor !== undefined);
    console.log(`${engine} list ${n} held locks, limit 1000: ${pages} pages in ${(performance.now() - t0).toFixed(0)} ms`);
  }
  for (let i = 0; i < held.length; i += 200) await Promise.all(held.slice(i, i + 200).map((h) => h.release()));
  await l.close();
}

const server = engine === 'postgres' ? await startPostgres() : await startMariaDb();
try {
  const url = `${server.url}?migrate=true&poolSize=20`;
  // The tables with the new columns first: the older checkout then writes rows without them.
  const first = createLocker(url);
  await first.backend();
  await first.close();
  await identityCost(url);
  await identityCostInterleaved(url);
  await pagingCost(url);
} finally {
  await server.stop();
}
