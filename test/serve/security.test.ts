/**
 * Security of the service (docs/serve.md, "Security"): bearer tokens with scopes, 401
 * without credentials, limits as 4xx JSON, and no secret in any answer or log line.
 */
import assert from 'node:assert/strict';
import { Writable } from 'node:stream';
import { after, before, test } from 'node:test';
import { call, client, fileUrl, startService, type Service } from './service.js';

const T = { timeout: 60_000 };
const SECRETS = {
  reader: 'read-secret-0123456789',
  locker: 'lock-secret-0123456789',
  other: 'other-secret-0123456789',
  admin: 'admin-secret-012345678',
};
const tokens = JSON.stringify({
  tokens: [
    { name: 'reader', token: SECRETS.reader, scopes: ['read'] },
    { name: 'locker', token: SECRETS.locker, scopes: ['lock:jobs/'] },
    { name: 'other', token: SECRETS.other, scopes: ['lock', 'read'] },
    { name: 'admin', token: SECRETS.admin, scopes: ['admin'] },
  ],
});
const as = (who: keyof typeof SECRETS): Record<string, string> => ({ authorization: `Bearer ${SECRETS[who]}` });

let service: Service;
const logs: string[] = [];
const answers: string[] = [];
before(async () => {
  const stream = new Writable({
    write(chunk: Buffer, _enc, done) {
      logs.push(chunk.toString());
      done();
    },
  });
  service = await startService(fileUrl(), {
    tokens,
    logger: { level: 'trace', stream },
    limits: { sessionsPerToken: 3, waitsPerSession: 1 },
  });
});
after(async () => {
  await service.close();
});

async function answer(method: string, path: string, body?: unknown, headers: Record<string, string> = {}) {
  const r = await call(service.base, method, path, body, headers);
  answers.push(JSON.stringify(r.body));
  return r;
}

test('without a token (or with a wrong one) every route but /healthz is 401, whatever the body', T, async () => {
  assert.equal((await answer('GET', '/healthz')).status, 200);
  const routes: [string, string, unknown][] = [
    ['GET', '/openapi.json', undefined],
    ['GET', '/v1/locks', undefined],
    ['GET', '/v1/locks/x', undefined],
    ['GET', '/v1/events', undefined],
    ['POST', '/v1/sessions', { ttlMs: 5000 }],
    ['POST', '/v1/sessions', '{garbage'],
    ['POST', '/v1/locks/jobs%2Fa/acquire', { session: 'x' }],
    ['POST', '/v1/locks/jobs%2Fa/break', { reason: 'x' }],
    ['GET', '/nowhere', undefined],
  ];
  for (const [method, path, body] of routes) {
    const variants: Record<string, string>[] = [{}, { authorization: 'Bearer wrong-token-000000000' }, { authorization: SECRETS.admin }];
    for (const headers of variants) {
      const r = await answer(method, path, body, headers);
      assert.equal(r.status, 401, `${method} ${path}`);
      assert.equal(r.body.code, 'UNAUTHORIZED');
    }
  }
});

test('scopes: read lists but cannot lock; lock:<prefix> locks only under it; a session of another token is not found', T, async () => {
  assert.equal((await answer('GET', '/v1/locks', undefined, as('reader'))).status, 200);
  assert.equal((await answer('POST', '/v1/sessions', { ttlMs: 5000 }, as('reader'))).body.code, 'FORBIDDEN');
  const c = client(service.base, as('locker'));
  const s = await c.session(10_000);
  const held = await c.acquire('jobs/a', { session: s });
  assert.equal(held.status, 200);
  assert.equal((await c.acquire('other/a', { session: s })).status, 403);
  assert.equal((await answer('GET', '/v1/locks', undefined, as('locker'))).status, 403);
  const theirs = client(service.base, as('other'));
  assert.equal((await theirs.release('jobs/a', s, held.body.token)).body.code, 'SESSION_NOT_FOUND');
  assert.equal((await theirs.keepalive(s)).status, 404);
  assert.equal((await answer('POST', '/v1/locks/jobs%2Fa/break', { reason: 'stuck' }, as('other'))).status, 403);
  const broke = await answer('POST', '/v1/locks/jobs%2Fa/break', { reason: 'stuck' }, as('admin'));
  assert.deepEqual(broke.body, { holds: 1 });
  assert.equal((await c.extend('jobs/a', s, held.body.token)).status, 409);
});

test('limits: sessions per token and waits per session answer 429 LIMIT_EXCEEDED', T, async () => {
  const c = client(service.base, as('other'));
  const ids = [await c.session(), await c.session(), await c.session()];
  const fourth = await answer('POST', '/v1/sessions', { ttlMs: 5000 }, as('other'));
  assert.equal(fourth.status, 429);
  assert.equal(fourth.body.code, 'LIMIT_EXCEEDED');
  const [a, b] = ids as [string, string, string];
  await c.acquire('limits/x', { session: a });
  const first = c.acquire('limits/x', { session: b, waitMs: 3_000 });
  await new Promise((r) => setTimeout(r, 200));
  const second = await c.acquire('limits/x', { session: b, waitMs: 3_000 });
  assert.equal(second.status, 429);
  assert.equal((await first).status, 409);
  await c.end(a);
  assert.equal((await answer('POST', '/v1/sessions', { ttlMs: 5000 }, as('other'))).status, 200, 'an ended session frees its place');
});

test('requests per second per token: over the bucket, 429 LIMIT_EXCEEDED; other tokens are not slowed', T, async () => {
  const limited = await startService(fileUrl(), { tokens, limits: { requestsPerSecond: 5 } });
  try {
    const burst = await Promise.all(Array.from({ length: 40 }, () => call(limited.base, 'GET', '/v1/locks', undefined, as('reader'))));
    const refused = burst.filter((r) => r.status === 429);
    assert.ok(refused.length > 0 && refused.length < 40, `${refused.length} refused`);
    assert.ok(refused.every((r) => r.body.code === 'LIMIT_EXCEEDED'));
    assert.equal((await call(limited.base, 'GET', '/v1/locks', undefined, as('admin'))).status, 200);
  } finally {
    await limited.close();
  }
});

test('elections: campaign and resign need the lock scope of the name, leader and observe need read', T, async () => {
  const s = await client(service.base, as('locker')).session(10_000);
  const e = (name: string, action: string): string => `/v1/elections/${encodeURIComponent(name)}/${action}`;
  assert.equal((await answer('POST', e('jobs/leader', 'campaign'), { session: s }, as('locker'))).status, 200);
  assert.equal((await answer('POST', e('other/leader', 'campaign'), { session: s }, as('locker'))).body.code, 'FORBIDDEN');
  assert.equal((await answer('POST', e('jobs/leader', 'campaign'), { session: s }, as('reader'))).body.code, 'FORBIDDEN');
  assert.equal((await answer('POST', e('jobs/leader', 'campaign'), { session: s })).body.code, 'UNAUTHORIZED');
  assert.equal((await answer('POST', e('jobs/leader', 'resign'), { session: s }, as('other'))).body.code, 'SESSION_NOT_FOUND');
  assert.equal((await answer('GET', e('jobs/leader', 'leader'), undefined, as('locker'))).body.code, 'FORBIDDEN');
  const seen = await answer('GET', e('jobs/leader', 'leader'), undefined, as('reader'));
  assert.equal((seen.body.leader as { session?: string } | null)?.session, s);
  assert.deepEqual((await answer('POST', e('jobs/leader', 'resign'), { session: s }, as('locker'))).body, { resigned: true });
});

test('no token appears in any answer or log line', T, () => {
  assert.ok(logs.length > 10, 'the service logged');
  for (const secret of Object.values(SECRETS)) {
    assert.ok(!logs.some((l) => l.includes(secret)), 'a log line holds a token');
    assert.ok(!answers.some((a) => a.includes(secret)), 'an answer holds a token');
  }
});
