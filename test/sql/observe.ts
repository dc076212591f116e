/**
 * Seeing the locks of both SQL engines through the seam (docs/backends/postgres.md,
 * "Listing"): identities of holders and waiters (one in another process), keyset paging,
 * odd ids, prefixes, bad cursors, breaking a lock, and tables of an older version.
 */
import assert from 'node:assert/strict';
import { fork, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { after, describe, test } from 'node:test';
import { BackendUnavailableError, createLocker, InvalidArgumentError, LockLostError, type Locker } from '../../src/index.js';
import type { Backend, LockState } from '../../src/backend.js';
import { decodeIdentity, type Identity } from '../../src/observe/identity.js';
import { listSeam, waitingOn } from '../helpers.js';
import type { SqlTarget } from './cases.js';

const T = { timeout: 120_000 };
const here = dirname(fileURLToPath(import.meta.url));

type Lister = Required<Pick<Backend, 'list' | 'forceRelease'>> & Backend;

/** Every page of `prefix` with `limit` (test/helpers.ts). */
const listAll = async (b: Lister, prefix: string, limit: number): Promise<LockState[]> => (await listSeam(b, prefix, limit)).locks;

/** A holder of `lockId` in another process, named `name`: its identity and token once it holds. */
async function holderProcess(
  url: string,
  lockId: string,
  name: string,
): Promise<{ child: ChildProcess; identity: Identity; token: bigint }> {
  const child = fork(join(here, 'holder-child.ts'), [url, lockId, name], { execArgv: ['--import', 'tsx'], stdio: 'inherit' });
  after(() => void child.kill('SIGKILL'));
  const m = await new Promise<{ identity: Identity; token: string }>((resolve, reject) => {
    child.once('message', (msg) => resolve(msg as { identity: Identity; token: string }));
    child.once('exit', (code) => reject(new Error(`holder process exited (${code}) before holding`)));
  });
  return { child, identity: m.identity, token: BigInt(m.token) };
}

/** What the cases share: lockers closed after the file, their backends, unique prefixes. */
interface Ctx {
  client(o?: Parameters<typeof createLocker>[1], url?: string): Locker;
  lister(l: Locker): Promise<Lister>;
  prefix(label: string): string;
}

/** Register the cases. */
export function sqlObserveCases(t: SqlTarget): void {
  const open: Locker[] = [];
  const c: Ctx = {
    client: (o = {}, url = t.url) => {
      const l = createLocker(url, o);
      open.push(l);
      return l;
    },
    lister: async (l) => (await l.backend()) as Lister,
    prefix: (label) => `sql:see:${label}:${randomBytes(4).toString('hex')}:`,
  };
  after(async () => {
    await Promise.allSettled(open.map((l) => l.close()));
  });
  describe(`${t.name}: seeing the locks`, () => {
    whoCases(t, c);
    pagingCases(c);
  });
  describe(`${t.name}: breaking a lock`, () => breakCases(c));
  describe(`${t.name}: tables of an older version`, () => upgradeCases(t, c));
}

function whoCases(t: SqlTarget, { client, lister, prefix }: Ctx): void {
  test('a holder in another process and a waiter are listed with their identities, times on the server clock', T, async () => {
    const p = prefix('who');
    const lockId = `${p}lock`;
    const holder = await holderProcess(t.url, lockId, 'sql-holder-process');
    const waiter = client({ name: 'sql-waiter' });
    const queued = waitingOn(waiter, lockId);
    const waiting = waiter.lock(lockId, { timeoutMs: 60_000, fair: true });
    await queued;
    const b = await lister(client());
    const { locks } = await b.list({ prefix: p, limit: 10, cursor: undefined, signal: new AbortController().signal });
    assert.equal(locks.length, 1);
    const s = locks[0]!;
    assert.equal(s.lockId, lockId);
    assert.equal(s.lastToken, holder.token);
    const [h] = s.holders;
    assert.deepEqual(decodeIdentity(h?.identity), holder.identity);
    assert.notEqual(holder.identity.pid, process.pid);
    assert.equal(h?.token, holder.token);
    assert.ok(h?.acquiredAt !== undefined && h.leaseEndsAt !== undefined && h.acquiredAt <= h.leaseEndsAt);
    assert.ok(Math.abs(h.leaseEndsAt - h.acquiredAt - 60_000) < 1_000, 'the lease is the ttl on one clock');
    assert.equal(s.waiters, 1);
    const [w] = s.queue ?? [];
    assert.deepEqual(decodeIdentity(w?.identity), waiter.identity);
    assert.equal(w?.fair, true);
    assert.ok(w?.since !== undefined && w.since >= h.acquiredAt);
    // The remaining lease is the only thing that moves between the two reads.
    const still = (x: LockState): LockState => ({ ...x, holders: x.holders.map(({ expiresInMs: _, ...rest }) => rest) });
    assert.deepEqual(still(await b.inspect(lockId)), still(s), 'inspect shows what list shows');
    holder.child.kill('SIGKILL');
    assert.equal(await b.forceRelease(lockId), 1);
    await (await waiting).release();
  });
  test('a cursor that is not one of this listing is an InvalidArgumentError', T, async () => {
    const b = await lister(client());
    const signal = new AbortController().signal;
    for (const cursor of ['not base64!', 'AAAA=', '', Buffer.from('elsewhere:x').toString('base64url')]) {
      await assert.rejects(b.list({ prefix: 'sql:see:', limit: 5, cursor, signal }), (e: unknown) => {
        assert.ok(e instanceof InvalidArgumentError, String(e));
        assert.equal(e.argument, 'cursor');
        return true;
      });
    }
  });
}

function pagingCases({ client, lister, prefix }: Ctx): void {
  test('paging with limit 7 over 120 held locks sees each exactly once; a released lock leaves the list', T, async () => {
    const p = prefix('paging');
    const l = client({ name: 'sql-pager' });
    const ids = Array.from({ length: 120 }, (_, i) => `${p}${String(i).padStart(3, '0')}`);
    const locks = await Promise.all(ids.map((id) => l.lock(id, { ttlMs: 60_000 })));
    const b = await lister(l);
    const seen = (await listAll(b, p, 7)).map((s) => s.lockId);
    assert.deepEqual([...seen].sort(), [...ids].sort());
    assert.equal(new Set(seen).size, seen.length, 'each lock once');
    for (const s of await listAll(b, p, 1000)) assert.deepEqual(decodeIdentity(s.holders[0]?.identity), l.identity);
    await locks[5]!.release();
    const after = (await listAll(b, p, 7)).map((s) => s.lockId);
    assert.equal(after.length, 119);
    assert.ok(!after.includes(ids[5]!));
    await Promise.all(locks.map((k) => k.release()));
    assert.deepEqual(await listAll(b, p, 7), []);
  });
  test('odd ids list as themselves; a prefix with LIKE wildcards matches only itself', T, async () => {
    const base = prefix('odd');
    const p = `${base}a%b_c!d\\e:`;
    const odd = [`${p}it's "quoted"`, `${p}a/b\\c`, `${p}ünï©ødé ☃ 🔒`, `${p}${'é'.repeat(Math.floor((1024 - Buffer.byteLength(p)) / 2))}`];
    // What the prefix would match were `%` or `_` wildcards, or `!` an unescaped escape character.
    const decoys = [`${base}aXYb_c!d\\e:1`, `${base}a%bXc!d\\e:2`, `${base}a%b_cd\\e:3`];
    const l = client();
    const held = await Promise.all([...odd, ...decoys].map((id) => l.lock(id, { ttlMs: 60_000 })));
    const b = await lister(l);
    const seen = (await listAll(b, p, 2)).map((s) => s.lockId);
    assert.deepEqual([...seen].sort(), [...odd].sort());
    await Promise.all(held.map((k) => k.release()));
  });
}

function breakCases({ client, lister, prefix }: Ctx): void {
  test('forceRelease ends the hold: the holder loses at its next renewal, a waiter gets the lock with a higher token', T, async () => {
    const lockId = `${prefix('break')}lock`;
    const holder = client({ autoExtend: false });
    const lock = await holder.lock(lockId, { ttlMs: 60_000 });
    const waiter = client();
    const queued = waitingOn(waiter, lockId);
    const next = waiter.lock(lockId, { timeoutMs: 60_000, fair: true });
    await queued;
    const b = await lister(client());
    assert.equal(await b.forceRelease(lockId), 1);
    const got = await next;
    assert.ok(got.token >= lock.token + 2n, `${got.token} after ${lock.token}`);
    await assert.rejects(lock.extend(), LockLostError);
    assert.equal((await b.inspect(lockId)).holders[0]?.token, got.token);
    await got.release();
    assert.equal(await b.forceRelease(lockId), 0, 'nothing left to break');
    assert.equal((await b.inspect(lockId)).lastToken, got.token, 'no bump without a hold');
  });
}

function upgradeCases(t: SqlTarget, { client, lister }: Ctx): void {
  test('without the identity columns: a clear error, then ?migrate=true adds them in place, twice is harmless', T, async () => {
    const table = `old_${randomBytes(3).toString('hex')}`;
    const url = t.url.replace('migrate=true', `migrate=true&table=${table}`);
    await client({}, url).backend();
    await t.exec(`ALTER TABLE ${table}_holders DROP COLUMN identity, DROP COLUMN acquired_us, DROP COLUMN permits, DROP COLUMN weight`);
    await t.exec(`ALTER TABLE ${table}_queue DROP COLUMN identity, DROP COLUMN since_us, DROP COLUMN fair, DROP COLUMN weight`);
    // A hold an older version wrote: no identity, no start time.
    await t.exec(
      `INSERT INTO ${table}_holders (lock_id, token, owner_id, kind, count, expires_us, lock_delay_ms) VALUES ('old', 1, 'o', 'mutex', 1, 9000000000000000, 0)`,
    );
    await assert.rejects(client({}, url.replace('migrate=true&', '')).backend(), (e: unknown) => {
      assert.ok(e instanceof BackendUnavailableError, String(e));
      assert.equal(e.context['causeCode'], 'MISSING_COLUMN');
      return true;
    });
    const b = await lister(client({}, url));
    await client({}, url).backend();
    const [old] = await listAll(b, '', 10);
    assert.equal(old?.lockId, 'old');
    assert.deepEqual(Object.keys(old.holders[0] ?? {}).sort(), ['count', 'expiresInMs', 'kind', 'leaseEndsAt', 'ownerId', 'token']);
    const k = await client({ name: 'sql-upgraded' }, url).lock('new');
    assert.equal(decodeIdentity((await b.inspect('new')).holders[0]?.identity)?.name, 'sql-upgraded');
    await k.release();
  });
}
