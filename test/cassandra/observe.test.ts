/**
 * Seeing the locks on a real Cassandra node, through the seam (docs/backends/cassandra.md,
 * "Listing" and "Breaking a lock"): identities of a holder and of a waiter in another
 * process, paging over the index, a released lock leaving the list, odd ids, prefixes, bad
 * cursors, and a break that the holder learns of at its next renewal.
 *
 * `LOCKSMITH_TEST_CASSANDRA_URL` points the file at a node already running (for development:
 * one JVM instead of one per run); without it the harness starts one.
 */
import assert from 'node:assert/strict';
import { fork, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { after, before, describe, test } from 'node:test';
import { createCassandraBackend, type CassandraBackend } from '../../src/backends/cassandra/index.js';
import type { LockState } from '../../src/backend.js';
import { createLocker, InvalidArgumentError, LockLostError, type Lock, type Locker } from '../../src/index.js';
import { decodeIdentity, type Identity } from '../../src/observe/identity.js';
import type { RunningServer } from '../../scripts/servers/harness.js';
import { startCassandra } from '../../scripts/servers/cassandra.js';
import { eventually, listSeam } from '../helpers.js';

const here = dirname(fileURLToPath(import.meta.url));
const T = { timeout: 240_000 };
let server: RunningServer | undefined;
let base = process.env.LOCKSMITH_TEST_CASSANDRA_URL ?? '';
const opened: Array<{ close(): Promise<void> }> = [];
const children: ChildProcess[] = [];

before(
  async () => {
    if (base !== '') return;
    server = await startCassandra({ nodes: 1 });
    base = server.url;
  },
  { timeout: 600_000 },
);

after(async () => {
  for (const c of children) c.kill('SIGKILL');
  await Promise.allSettled(opened.map((o) => o.close()));
  await server?.stop();
});

const url = (): string => `${base}?create=true`;
function locker(name: string): Locker {
  const l = createLocker(url(), { name, ttlMs: 10_000 });
  opened.push(l);
  return l;
}
async function backend(): Promise<CassandraBackend> {
  const b = await createCassandraBackend(url());
  opened.push(b);
  return b;
}
const unique = (tag: string): string => `${tag}-${randomBytes(4).toString('hex')}/`;

/** Every page of `prefix` with `limit` (test/helpers.ts). */
const listAll = async (b: CassandraBackend, prefix: string, limit: number): Promise<LockState[]> =>
  (await listSeam(b, prefix, limit)).locks;

function sameIdentity(stored: string | undefined, expected: Identity): void {
  const got = decodeIdentity(stored);
  assert.ok(got, `an identity was stored: ${String(stored)}`);
  assert.deepEqual({ host: got.host, pid: got.pid, name: got.name }, { host: expected.host, pid: expected.pid, name: expected.name });
}

function waiterChild(lockId: string, name: string): { child: ChildProcess; identity: Promise<Identity> } {
  const child = fork(join(here, 'observe-child.ts'), [url(), lockId, name], { execArgv: ['--import', 'tsx'], stdio: 'inherit' });
  children.push(child);
  const identity = new Promise<Identity>((resolve, reject) => {
    child.on('message', (m: { type: string; identity?: Identity }) => {
      if (m.type === 'identity' && m.identity) resolve(m.identity);
    });
    child.once('exit', (code) => reject(new Error(`the waiter process exited with ${String(code)}`)));
  });
  return { child, identity };
}

describe('cassandra: listing holders and waiters', () => {
  test('a holder and a waiter in another process are listed with their identities, in queue order', T, async () => {
    const prefix = unique('who');
    const lockId = `${prefix}lock`;
    const holderLocker = locker('observe-holder');
    const held = await holderLocker.lock(lockId);
    const { child, identity } = waiterChild(lockId, 'observe-waiter');
    const waiter = await identity;
    assert.notEqual(waiter.pid, process.pid);
    const b = await backend();
    let state: LockState | undefined;
    await eventually('the waiter is queued', async () => {
      state = (await listAll(b, prefix, 10))[0];
      return (state?.queue?.length ?? 0) > 0;
    });
    assert.ok(state);
    assert.equal(state.lockId, lockId);
    const [holder] = state.holders;
    assert.ok(holder && state.holders.length === 1);
    sameIdentity(holder.identity, holderLocker.identity);
    assert.equal(holder.token, held.token);
    assert.ok(holder.acquiredAt !== undefined && holder.leaseEndsAt !== undefined && holder.leaseEndsAt > holder.acquiredAt);
    const [queued] = state.queue ?? [];
    assert.ok(queued && queued.fair && queued.since !== undefined);
    sameIdentity(queued.identity, waiter);
    assert.equal(state.waiters, 1);
    const inspected = await b.inspect(lockId);
    sameIdentity(inspected.queue?.[0]?.identity, waiter);
    child.kill('SIGKILL');
    await held.release();
  });

  test('paging with limit 7 over 120 held locks sees each exactly once, and only under its prefix', T, async () => {
    const prefix = unique('page');
    const other = unique('page');
    const l = locker('observe-pager');
    const ids = Array.from({ length: 120 }, (_, i) => `${prefix}${String(i).padStart(3, '0')}`);
    const locks = await Promise.all([...ids, `${other}x`].map((id) => l.lock(id)));
    const b = await backend();
    const seen = (await listAll(b, prefix, 7)).map((s) => s.lockId);
    assert.equal(seen.length, new Set(seen).size, 'no lock twice');
    assert.deepEqual([...seen].sort(), ids);
    const all = (await listAll(b, '', 1000)).map((s) => s.lockId);
    assert.ok(all.includes(`${other}x`) && all.includes(ids[0] ?? ''), 'the empty prefix lists every lock');
    await Promise.all(locks.map((k) => k.release()));
  });
});

describe('cassandra: what the listing holds', () => {
  test('a released lock leaves the list, the others stay', T, async () => {
    const prefix = unique('gone');
    const l = locker('observe-release');
    const a = await l.lock(`${prefix}a`);
    const keep = await l.lock(`${prefix}b`);
    const b = await backend();
    assert.deepEqual((await listAll(b, prefix, 5)).map((s) => s.lockId).sort(), [`${prefix}a`, `${prefix}b`]);
    await a.release();
    assert.deepEqual(
      (await listAll(b, prefix, 5)).map((s) => s.lockId),
      [`${prefix}b`],
    );
    await keep.release();
    assert.deepEqual(await listAll(b, prefix, 5), []);
  });

  test('odd ids (quotes, slashes, unicode, 1 KB) list as themselves', T, async () => {
    const prefix = unique('odd');
    const odd = [
      `${prefix}it's "quoted"`,
      `${prefix}a/b\\c`,
      `${prefix}ключ-鍵-🔒`,
      `${prefix}${'x'.repeat(1024 - Buffer.byteLength(prefix))}`,
    ];
    const l = locker('observe-odd');
    const locks = await Promise.all(odd.map((id) => l.lock(id)));
    const b = await backend();
    assert.deepEqual((await listAll(b, prefix, 2)).map((s) => s.lockId).sort(), [...odd].sort());
    await Promise.all(locks.map((k) => k.release()));
  });

  test('a cursor the backend did not write is an InvalidArgumentError', T, async () => {
    const b = await backend();
    for (const cursor of ['', 'zz', '16', '99', '3.', '3.!!', '3.a.b', '-1']) {
      await assert.rejects(b.list({ prefix: '', limit: 5, cursor, signal: new AbortController().signal }), (err: unknown) => {
        assert.ok(err instanceof InvalidArgumentError, `cursor '${cursor}': ${String(err)}`);
        return true;
      });
    }
  });
});

describe('cassandra: breaking a lock', () => {
  test('forceRelease ends the hold: its next extend is LockLostError and the waiter gets a token at least 2 higher', T, async () => {
    const lockId = `${unique('break')}lock`;
    const holder = await locker('observe-broken').lock(lockId);
    const waiting = locker('observe-next').lock(lockId, { timeoutMs: 60_000 });
    const b = await backend();
    await eventually('the waiter is queued', async () => ((await b.inspect(lockId)).queue?.length ?? 0) > 0);
    assert.equal(await b.forceRelease(lockId), 1);
    await assert.rejects(holder.extend(), LockLostError);
    const next: Lock = await waiting;
    assert.ok(next.token >= holder.token + 2n, `next ${next.token} after broken ${holder.token}`);
    const state = await b.inspect(lockId);
    assert.deepEqual(
      state.holders.map((h) => h.token),
      [next.token],
    );
    assert.ok((state.lastToken ?? 0n) >= next.token);
    await next.release();
    assert.equal(await b.forceRelease(lockId), 0, 'nothing left to break');
  });

  test('forceRelease with nobody waiting bumps the counter: the next grant is the broken token + 2', T, async () => {
    const lockId = `${unique('bump')}lock`;
    const l = locker('observe-bump');
    const holder = await l.lock(lockId);
    const b = await backend();
    assert.equal(await b.forceRelease(lockId), 1);
    assert.equal((await b.inspect(lockId)).lastToken, holder.token + 1n);
    await assert.rejects(holder.extend(), LockLostError);
    const next = await l.tryLock(lockId);
    assert.ok(next, 'the broken lock is free');
    assert.equal(next.token, holder.token + 2n);
    await next.release();
  });
});
