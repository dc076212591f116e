/**
 * `changes()` of the PostgreSQL backend against a real server (docs/backends/postgres.md,
 * "Watching"): `null` once listening, then the ids another locker's writes touch, only under
 * the prefix; a killed LISTEN connection comes back with `null`; an abort drops the connection.
 * All with `?watch=notify`; without it (the default) no watch statement runs and there is no `changes()`.
 */
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { after, describe, test } from 'node:test';
import pg from 'pg';
import { createLocker, type Locker } from '../../src/index.js';
import { createPostgresBackend, parsePostgresUrl, type SqlBackend } from '../../src/backends/postgres/index.js';
import { admin, startPostgres } from '../../scripts/servers/postgres.js';
import { eventually, useServer, waitingOn } from '../helpers.js';

const server = await useServer(() => startPostgres());
const node = server.nodes[0]!;
const T = { timeout: 60_000 };
const url = `${server.url}?migrate=true&watch=notify`;

/** A running `changes()` iteration: what it yielded so far, and when it ended. */
interface Watch {
  readonly seen: (string | null)[];
  readonly ended: Promise<void>;
  readonly stop: AbortController;
  /** Wait until `n` entries equal to `item` were seen (a couple of seconds is plenty). */
  until(item: string | null, n?: number): Promise<void>;
}

function watch(b: SqlBackend, prefix: string): Watch {
  assert.ok(b.changes, 'a listening PostgreSQL backend offers changes()');
  const stop = new AbortController();
  const seen: (string | null)[] = [];
  const iterable = b.changes({ prefix, signal: stop.signal });
  const ended = (async () => {
    for await (const item of iterable) seen.push(item);
  })();
  const count = (item: string | null): number => seen.filter((s) => s === item).length;
  return { seen, ended, stop, until: (item, n = 1) => eventually(`${n} × ${String(item)}`, () => count(item) >= n, 5_000) };
}

const pool = new pg.Pool({ connectionString: server.url, max: 6 });
pool.on('error', () => undefined);
const backend = await createPostgresBackend(pool, { migrate: true, watch: 'notify' });
const lockers: Locker[] = [];
function locker(): Locker {
  const l = createLocker(url);
  lockers.push(l);
  return l;
}
after(async () => {
  await Promise.allSettled(lockers.map((l) => l.close()));
  await backend.close();
  await pool.end();
});

const prefix = (): string => `pg:watch:${randomBytes(4).toString('hex')}:`;

/** null first, then acquire, a waiter joining, release and forceRelease each name the id. */
async function namesEveryWrite(): Promise<void> {
  const p = prefix();
  const id = `${p}ä/odd id`;
  const w = watch(backend, p);
  await w.until(null);
  assert.equal(w.seen[0], null);
  const [a, b] = [locker(), locker()];
  const held = await a.lock(id, { ttlMs: 30_000 });
  await w.until(id, 1);
  const queued = waitingOn(b, id);
  const next = b.lock(id, { timeoutMs: 30_000, fair: true });
  await queued;
  await w.until(id, 2);
  await held.release();
  const second = await next;
  // Released (3), then granted to the waiter (4): both commits are in before forceRelease.
  await w.until(id, 4);
  const before = w.seen.length;
  assert.equal(await backend.forceRelease(id), 1);
  await eventually('forceRelease named', () => w.seen.slice(before).includes(id), 5_000);
  await second.release().catch(() => undefined);
  w.stop.abort();
  await w.ended;
}

/** an id outside the prefix is not reported. */
async function filtersByPrefix(): Promise<void> {
  const p = prefix();
  const w = watch(backend, p);
  await w.until(null);
  const l = locker();
  const outside = await l.lock(`${p.slice(0, -1)}-other`, { ttlMs: 30_000 });
  const inside = await l.lock(`${p}in`, { ttlMs: 30_000 });
  await w.until(`${p}in`);
  assert.deepEqual(
    w.seen.filter((s) => s !== null),
    [`${p}in`],
  );
  await Promise.all([outside.release(), inside.release()]);
  w.stop.abort();
  await w.ended;
}

/** a killed LISTEN connection is re-established and says so with null. */
async function reconnects(): Promise<void> {
  const p = prefix();
  const w = watch(backend, p);
  await w.until(null);
  await admin(node.port, ["SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE query LIKE 'SELECT pg_advisory_lock_shared%'"]);
  await w.until(null, 2);
  const l = locker();
  const held = await l.lock(`${p}after`, { ttlMs: 30_000 });
  await w.until(`${p}after`);
  await held.release();
  w.stop.abort();
  await w.ended;
}

/** aborting ends the iteration and gives the connection back. */
async function abortDropsConnection(): Promise<void> {
  const checkedOut = (): number => pool.totalCount - pool.idleCount;
  const idle = checkedOut();
  const w = watch(backend, prefix());
  await w.until(null);
  assert.equal(checkedOut(), idle + 1);
  w.stop.abort();
  await w.ended;
  assert.equal(checkedOut(), idle);
}

/** listen=false: no changes(), yet its writes notify the watches of others; close() ends a backend's watches. */
async function notListening(): Promise<void> {
  const quiet = await createPostgresBackend(server.url, { listen: false, watch: 'notify' });
  assert.equal(quiet.changes, undefined);
  const p = prefix();
  const w = watch(backend, p);
  await w.until(null);
  const l = createLocker(quiet);
  const held = await l.lock(`${p}quiet`, { ttlMs: 30_000 });
  await w.until(`${p}quiet`);
  await held.release();
  await l.close();
  const other = await createPostgresBackend(server.url, { watch: 'notify' });
  const mine = watch(other, p);
  await mine.until(null);
  await other.close();
  await mine.ended;
  w.stop.abort();
  await w.ended;
}

/** With no watch, nothing is sent: a bare LISTEN (no advisory lock) hears the write after a watch starts, not the one before. */
async function silentUnwatched(): Promise<void> {
  const p = prefix();
  const raw = await pool.connect();
  const heard: string[] = [];
  raw.on('notification', (m) => void (m.payload?.startsWith(p) === true && heard.push(m.payload)));
  await raw.query('LISTEN locksmith_watch');
  const l = locker();
  await (await l.lock(`${p}unwatched`, { ttlMs: 30_000 })).release();
  const w = watch(backend, p);
  await w.until(null);
  await (await l.lock(`${p}watched`, { ttlMs: 30_000 })).release();
  await eventually('the watched write heard', () => heard.includes(`${p}watched`), 5_000);
  assert.equal(heard[0], `${p}watched`);
  w.stop.abort();
  await w.ended;
  raw.release(true);
}

/** A backend over its own pool that records every query text its connections send. */
async function counted(watch: 'poll' | 'notify' | undefined): Promise<{ backend: SqlBackend; sent: string[]; end: () => Promise<void> }> {
  const own = new pg.Pool({ connectionString: server.url, max: 3 });
  own.on('error', () => undefined);
  const sent: string[] = [];
  own.on('connect', (c) => {
    const query = c.query.bind(c) as (...args: unknown[]) => unknown;
    (c as { query: (...args: unknown[]) => unknown }).query = (...args: unknown[]) => {
      const q = args[0];
      sent.push(typeof q === 'string' ? q : String((q as { text?: unknown } | undefined)?.text));
      return query(...args);
    };
  });
  const b = await createPostgresBackend(own, watch === undefined ? {} : { watch });
  return { backend: b, sent, end: async () => (await b.close(), await own.end()) };
}

/** The default (no `watch` parameter): no `changes()`, no advisory check nor NOTIFY in any write, even while another client watches. */
async function optIn(): Promise<void> {
  assert.equal(parsePostgresUrl(new URL(server.url)).options.watch, 'poll');
  assert.equal(parsePostgresUrl(new URL(`${server.url}?watch=notify`)).options.watch, 'notify');
  assert.throws(() => parsePostgresUrl(new URL(`${server.url}?watch=yes`)), /watch/);
  const p = prefix();
  const w = watch(backend, p);
  await w.until(null);
  const plain = await counted(undefined);
  const opted = await counted('notify');
  assert.equal(plain.backend.changes, undefined);
  const byUrl = await createPostgresBackend(server.url);
  assert.equal(byUrl.changes, undefined);
  await byUrl.close();
  const [a, b] = [createLocker(plain.backend), createLocker(opted.backend)];
  const mark = { plain: plain.sent.length, opted: opted.sent.length };
  await (await a.lock(`${p}plain`, { ttlMs: 30_000 })).release();
  await (await b.lock(`${p}opted`, { ttlMs: 30_000 })).release();
  await w.until(`${p}opted`);
  const watchStatements = (qs: string[]): number => qs.filter((q) => /pg_try_advisory_xact_lock|locksmith_watch/.test(q)).length;
  assert.equal(watchStatements(plain.sent.slice(mark.plain)), 0);
  // The acquire and the release commits of the opted-in client each carry the check.
  assert.equal(watchStatements(opted.sent.slice(mark.opted)), 2);
  assert.ok(!w.seen.includes(`${p}plain`), 'the default client sent no NOTIFY');
  await Promise.all([a.close(), b.close()]);
  await Promise.all([plain.end(), opted.end()]);
  w.stop.abort();
  await w.ended;
}

describe('postgres: changes()', () => {
  test('null first, then acquire, a waiter joining, release and forceRelease each name the id', T, namesEveryWrite);
  test('an id outside the prefix is not reported', T, filtersByPrefix);
  test('a killed LISTEN connection is re-established and says so with null', T, reconnects);
  test('a backend without LISTEN has no changes() but notifies; close() ends its watches', T, notListening);
  test('nobody watching: no NOTIFY is sent', T, silentUnwatched);
  test('aborting ends the iteration and gives the connection back', T, abortDropsConnection);
  test('without ?watch=notify: no changes(), no watch statement nor NOTIFY in any write', T, optIn);
});
