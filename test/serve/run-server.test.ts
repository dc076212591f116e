/**
 * `locksmith run --server URL` (docs/cli.md) against a real service over file://, with
 * tokens: the command gets the fencing token, and the exit statuses are the ordinary
 * `run`'s (conflict 1 or -E, the command's own, 76 when the hold is lost, 78 for a refused
 * token).
 */
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { cli, finished, startCli } from '../unit/cli-process.js';
import { eventually } from '../helpers.js';
import { call, client, fileUrl, startService, type Service } from './service.js';

const T = { timeout: 90_000 };
const SECRET = { lock: 'run-lock-secret-0123456789', admin: 'run-admin-secret-012345678' };
const tokens = JSON.stringify({
  tokens: [
    { name: 'runner', token: SECRET.lock, scopes: ['lock:jobs/', 'read'] },
    { name: 'ops', token: SECRET.admin, scopes: ['admin'] },
  ],
});
const auth = { authorization: `Bearer ${SECRET.lock}` };

let service: Service;
before(async () => {
  service = await startService(fileUrl(), { tokens });
});
after(async () => {
  await service.close();
});

const env = (): Record<string, string> => ({ LOCKSMITH_SERVER: service.base, LOCKSMITH_SERVER_TOKEN: SECRET.lock });
const holders = async (id: string): Promise<unknown[]> => (await client(service.base, auth).inspect(id)).body.holders as unknown[];

test('run --server: the command runs with the token; the hold and the session are gone after', T, async () => {
  const r = await cli(['run', 'jobs/a', 'sh', '-c', 'echo "$LOCKSMITH_LOCK_ID $LOCKSMITH_TOKEN $LOCKSMITH_OWNER"; exit 3'], env());
  assert.equal(r.code, 3, r.stderr);
  const [lockId, token, owner] = r.stdout.trim().split(' ');
  assert.equal(lockId, 'jobs/a');
  assert.match(token ?? '', /^[0-9]+$/);
  assert.match(owner ?? '', /^[A-Za-z0-9_-]{22}\.run-/);
  assert.equal((await holders('jobs/a')).length, 0);
  const again = await cli(['run', '--server', service.base, 'jobs/a', 'sh', '-c', 'echo $LOCKSMITH_TOKEN'], {
    LOCKSMITH_SERVER_TOKEN: SECRET.lock,
  });
  assert.equal(again.code, 0, again.stderr);
  assert.ok(BigInt(again.stdout.trim()) > BigInt(token ?? ''), 'the token grows');
  const records = await service.locker.list({ prefix: 'locksmith-serve/', limit: 1000 });
  assert.deepEqual(
    records.locks.filter((l) => l.holders.length > 0).map((l) => l.lockId),
    [],
    'no session or hold record is left',
  );
});

test('run --server: a held lock is a conflict (1, or -E), a wait gets it on release', T, async () => {
  const c = client(service.base, auth);
  const s = await c.session(30_000, 'blocker');
  const held = await c.acquire('jobs/b', { session: s });
  assert.equal((await cli(['run', '-n', 'jobs/b', 'true'], env())).code, 1);
  assert.equal((await cli(['run', '-n', '-E', '7', 'jobs/b', 'true'], env())).code, 7);
  assert.equal((await cli(['run', '-w', '0.3', 'jobs/b', 'true'], env())).code, 1);
  const waiting = finished(startCli(['run', '-w', '30', 'jobs/b', 'sh', '-c', 'echo $LOCKSMITH_TOKEN'], env()));
  await eventually('queued', async () => ((await c.inspect('jobs/b')).body.waiters as number) >= 1);
  await c.release('jobs/b', s, held.body.token);
  const got = await waiting;
  assert.equal(got.code, 0, got.stderr);
  assert.ok(BigInt(got.stdout.trim()) > BigInt(held.body.token as string));
  await c.end(s);
});

test('run --server: a hold broken while the command runs stops it with 76', T, async () => {
  const child = startCli(['run', '--ttl', '1s', '--grace', '1s', 'jobs/c', 'sleep', '60'], env());
  const done = finished(child);
  await eventually('held', async () => (await holders('jobs/c')).length === 1);
  const broke = await call(
    service.base,
    'POST',
    '/v1/locks/jobs%2Fc/break',
    { reason: 'test' },
    { authorization: `Bearer ${SECRET.admin}` },
  );
  assert.equal(broke.status, 200);
  const r = await done;
  assert.equal(r.code, 76, r.stderr);
  assert.match(r.stderr, /lost/);
});

test('run --server: a refused token is 78, a lock outside the scope too; an unreachable service is 69', T, async () => {
  const bad = await cli(['run', 'jobs/d', 'true'], { ...env(), LOCKSMITH_SERVER_TOKEN: 'wrong-wrong-wrong-wrong' });
  assert.equal(bad.code, 78, bad.stderr);
  assert.ok(!bad.stderr.includes('wrong-wrong'), 'the token is never printed');
  assert.equal((await cli(['run', 'other/d', 'true'], env())).code, 78);
  assert.equal((await cli(['run', '--server', 'http://127.0.0.1:9', 'jobs/d', 'true'], {})).code, 69);
  assert.equal((await cli(['run', '--backend', 'file://', '--server', service.base, 'jobs/d', 'true'], env())).code, 64);
});
