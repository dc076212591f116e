/**
 * The API cases every backend runs (docs/serve.md): lock, wait, tokens that grow, 409,
 * session expiry, request ids, disconnects, bad input and a fuzz of every route.
 */
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { test } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { eventually } from '../helpers.js';
import { call, client, sse } from './service.js';

const T = { timeout: 60_000 };
const fresh = (): string => `t${randomBytes(5).toString('hex')}/`;
const tokenOf = (r: { body: Record<string, unknown> }): bigint => BigInt(r.body.token as string);

/** Register the cases against the service at `base()`. */
export function apiCases(base: () => string): void {
  coreCases(base);
  sessionCases(base);
  renewalCases(base);
  pollCases(base);
  eventCases(base);
  badInputCases(base);
}

function coreCases(base: () => string): void {
  test('healthz answers without a session; openapi.json is OpenAPI 3.1 with every route', T, async () => {
    const h = await call(base(), 'GET', '/healthz');
    assert.equal(h.status, 200);
    assert.equal(h.body.ok, true);
    const doc = await call(base(), 'GET', '/openapi.json');
    assert.equal(doc.body.openapi, '3.1.0');
    const paths = Object.keys(doc.body.paths as object);
    for (const p of [
      '/v1/sessions',
      '/v1/sessions/{id}/keepalive',
      '/v1/locks/{lockId}/acquire',
      '/v1/locks/{lockId}/release',
      '/v1/locks',
    ]) {
      assert.ok(paths.includes(p), p);
    }
  });

  test('lock, 409 while held, a waiter gets it on release with a greater token', T, async () => {
    const c = client(base());
    const id = `${fresh()}job`;
    const [a, b] = [await c.session(10_000, 'alice'), await c.session(10_000, 'bob')];
    const first = await c.acquire(id, { session: a });
    assert.equal(first.status, 200);
    assert.match(first.body.token as string, /^[0-9]+$/);
    const refused = await c.acquire(id, { session: b, waitMs: 0 });
    assert.equal(refused.status, 409);
    assert.equal(refused.body.code, 'LOCK_TIMEOUT');
    const waiting = c.acquire(id, { session: b, waitMs: 20_000 });
    const held = await c.inspect(id);
    assert.equal((held.body.holders as { identity: { name: string } }[])[0]?.identity.name, 'alice');
    assert.deepEqual((await c.release(id, a, first.body.token)).body, { released: true });
    const second = await waiting;
    assert.equal(second.status, 200);
    assert.ok(tokenOf(second) > tokenOf(first));
    assert.equal((await c.release(id, a, first.body.token)).body.code, 'LOCK_NOT_HELD');
    assert.equal((await c.extend(id, b, second.body.token)).status, 200);
    const bodiless = await call(base(), 'POST', `/v1/sessions/${b}/keepalive`, undefined, { 'content-type': 'application/json' });
    assert.equal(bodiless.status, 200, 'a bodiless request with a JSON content type');
    assert.deepEqual((await c.end(b)).body, { released: 1 });
    assert.equal((await c.inspect(id)).body.holders instanceof Array ? ((await c.inspect(id)).body.holders as unknown[]).length : -1, 0);
  });
}

/** A replica's memory of the sessions it renewed (docs/serve.md, "Design"). */
function renewalCases(base: () => string): void {
  test('keepalives more often than a quarter ttl (answered from memory) keep the hold for many ttls', T, async () => {
    const c = client(base());
    const id = `${fresh()}job`;
    const [s, other] = [await c.session(1_000), await c.session(30_000)];
    const held = await c.acquire(id, { session: s });
    // Three ttls of keepalives every 100 ms: most are answered from the replica's memory
    // (docs/serve.md, "Design"); the record and the hold must still be renewed in time.
    for (const until = performance.now() + 3_000; performance.now() < until;) {
      assert.equal((await c.keepalive(s)).status, 200);
      await sleep(100);
    }
    assert.equal((await c.keepalive(s)).body.holds, 1);
    assert.equal((await c.acquire(id, { session: other })).status, 409, 'still held');
    assert.equal(((await c.inspect(id)).body.holders as { token: string }[])[0]?.token, held.body.token);
    await c.end(s);
    assert.equal((await c.acquire(id, { session: other })).status, 200);
  });

  test('a session deleted through the replica that renewed it is gone at once (keepalive, acquire)', T, async () => {
    const c = client(base());
    const id = `${fresh()}job`;
    const s = await c.session(60_000);
    assert.equal((await c.acquire(id, { session: s })).status, 200);
    assert.equal((await c.keepalive(s)).body.holds, 1);
    assert.equal((await c.keepalive(s)).body.holds, 1, 'from memory');
    assert.deepEqual((await c.end(s)).body, { released: 1 });
    assert.equal((await c.keepalive(s)).body.code, 'SESSION_NOT_FOUND');
    assert.equal((await c.acquire(`${id}-after`, { session: s })).body.code, 'SESSION_NOT_FOUND');
  });

  test('an expired session the replica knew: its acquire of a free lock is refused and leaves no holder', T, async () => {
    const c = client(base());
    const id = `${fresh()}job`;
    const s = await c.session(1_000);
    // Its hold, taken after the record was written, ends after the record: then both are gone.
    assert.equal((await c.acquire(`${id}-first`, { session: s })).status, 200);
    await eventually('expired', async () => ((await c.inspect(`${id}-first`)).body.holders as unknown[]).length === 0);
    // The attempt goes out beside the session's read (docs/serve.md, "Design"): it must be given back.
    assert.equal((await c.acquire(id, { session: s })).body.code, 'SESSION_NOT_FOUND');
    assert.deepEqual((await c.inspect(id)).body.holders, []);
  });
}

function sessionCases(base: () => string): void {
  test('a session that stops keeping alive loses its hold and its waits; one kept alive keeps it', T, async () => {
    const c = client(base());
    const id = `${fresh()}job`;
    // The kept session has room for a slow keepalive under load; only the dropped one must end.
    const [kept, dropped, other] = [await c.session(6_000), await c.session(1_000), await c.session(30_000)];
    const k = await c.acquire(`${id}-kept`, { session: kept });
    const d = await c.acquire(id, { session: dropped });
    assert.equal(k.status, 200);
    assert.equal(d.status, 200);
    const ticker = setInterval(() => void c.keepalive(kept), 500);
    try {
      const waitOfDropped = c.acquire(`${id}-kept`, { session: dropped, waitMs: 20_000 });
      const got = await c.acquire(id, { session: other, waitMs: 20_000 });
      assert.equal(got.status, 200, JSON.stringify(got.body));
      assert.ok(tokenOf(got) > tokenOf(d));
      assert.equal((await waitOfDropped).body.code, 'SESSION_NOT_FOUND');
      assert.equal((await c.keepalive(dropped)).status, 404);
      assert.equal((await c.acquire(`${id}-kept`, { session: other })).status, 409, 'the kept session still holds');
    } finally {
      clearInterval(ticker);
    }
  });

  test('keepalives at once (as from several replicas) keep the session and its hold', T, async () => {
    const c = client(base());
    const id = `${fresh()}job`;
    const s = await c.session(5_000);
    const held = await c.acquire(id, { session: s });
    for (let round = 0; round < 4; round += 1) {
      const answers = await Promise.all([1, 2, 3, 4].map(() => c.keepalive(s)));
      for (const a of answers) assert.equal(a.status, 200, JSON.stringify(a.body));
    }
    const last = await c.keepalive(s);
    assert.equal(last.body.holds, 1);
    assert.equal(((await c.inspect(id)).body.holders as { token: string }[])[0]?.token, held.body.token);
  });

  test('a retried acquire with the same requestId answers the same grant, one holder', T, async () => {
    const c = client(base());
    const id = `${fresh()}job`;
    const s = await c.session(10_000);
    const one = await c.acquire(id, { session: s, requestId: 'req-1' });
    const two = await c.acquire(id, { session: s, requestId: 'req-1', waitMs: 1_000 });
    assert.equal(two.status, 200);
    assert.equal(two.body.token, one.body.token);
    assert.equal(((await c.inspect(id)).body.holders as unknown[]).length, 1);
    assert.equal((await c.acquire(id, { session: s, requestId: 'req-2' })).status, 409);
  });
}

function pollCases(base: () => string): void {
  test('a client that goes away ends its long poll and leaves no queue entry', T, async () => {
    const c = client(base());
    const id = `${fresh()}job`;
    const [a, b] = [await c.session(10_000), await c.session(10_000)];
    await c.acquire(id, { session: a });
    const ac = new AbortController();
    const waiting = c.acquire(id, { session: b, waitMs: 60_000, fair: true }, ac.signal).catch((e: unknown) => e);
    await eventually('queued', async () => ((await c.inspect(id)).body.waiters as number) === 1);
    ac.abort();
    await waiting;
    await eventually('queue empty', async () => ((await c.inspect(id)).body.waiters as number) === 0);
  });

  test('list pages the locks under a prefix, never the service records', T, async () => {
    const c = client(base());
    const p = fresh();
    const s = await c.session(10_000);
    for (const n of ['a', 'b', 'c']) assert.equal((await c.acquire(`${p}${n}`, { session: s })).status, 200);
    const seen: string[] = [];
    let cursor: string | undefined;
    do {
      const q = `/v1/locks?prefix=${encodeURIComponent(p)}&limit=1${cursor ? `&cursor=${encodeURIComponent(cursor)}` : ''}`;
      const page = await call(base(), 'GET', q);
      assert.equal(page.status, 200);
      seen.push(...(page.body.locks as { lockId: string }[]).map((l) => l.lockId));
      cursor = page.body.cursor as string | undefined;
    } while (cursor);
    assert.deepEqual(seen.sort(), [`${p}a`, `${p}b`, `${p}c`]);
    const all = await call(base(), 'GET', '/v1/locks?limit=1000');
    assert.ok((all.body.locks as { lockId: string }[]).every((l) => !l.lockId.startsWith('locksmith-serve/')));
  });
}

function eventCases(base: () => string): void {
  test('/v1/events streams acquired and released under a prefix as Server-Sent Events', T, async () => {
    const c = client(base());
    const p = fresh();
    const s = await c.session(10_000, 'sse-holder');
    const stop = new AbortController();
    const seen: { event: string; lockId: unknown; token: unknown; name: unknown }[] = [];
    const reading = (async () => {
      for await (const e of sse(base(), `/v1/events?prefix=${encodeURIComponent(p)}`, stop.signal)) {
        const identity = e.data.identity as { name?: string } | undefined;
        seen.push({ event: e.event, lockId: e.data.lockId, token: e.data.token, name: identity?.name });
      }
    })();
    try {
      // The stream is open once a first change under the prefix arrives: lock until one does.
      let held = await c.acquire(`${p}a`, { session: s });
      await eventually('acquired seen', () => seen.some((e) => e.event === 'acquired'));
      await c.release(`${p}a`, s, held.body.token);
      held = await c.acquire(`${p}b`, { session: s });
      await eventually('b acquired', () => seen.some((e) => e.event === 'acquired' && e.lockId === `${p}b` && e.token === held.body.token));
      await c.release(`${p}b`, s, held.body.token);
      await eventually('b released', () => seen.some((e) => e.event === 'released' && e.lockId === `${p}b`));
      assert.ok(seen.every((e) => String(e.lockId).startsWith(p)));
      assert.equal(seen.find((e) => e.lockId === `${p}b`)?.name, 'sse-holder');
    } finally {
      stop.abort();
      await reading;
    }
  });
}

function badInputCases(base: () => string): void {
  test('bad input is a 4xx { code, message }, never a crash', T, async () => {
    const c = client(base());
    const s = await c.session(10_000);
    const unknown = 'AAAAAAAAAAAAAAAAAAAAAA';
    const cases: [string, string, unknown, number, string][] = [
      ['POST', '/v1/sessions', { ttlMs: -1 }, 400, 'INVALID_ARGUMENT'],
      ['POST', '/v1/sessions', { ttlMs: '5000' }, 400, 'INVALID_ARGUMENT'],
      ['POST', '/v1/sessions', { ttlMs: 5000, color: 'red' }, 400, 'INVALID_ARGUMENT'],
      ['POST', '/v1/sessions', '{not json', 400, 'INVALID_ARGUMENT'],
      ['POST', '/v1/sessions', 'x'.repeat(100_000), 413, 'LIMIT_EXCEEDED'],
      ['POST', `/v1/sessions/${unknown}/keepalive`, undefined, 404, 'SESSION_NOT_FOUND'],
      ['POST', '/v1/sessions/short/keepalive', undefined, 400, 'INVALID_ARGUMENT'],
      ['POST', '/v1/locks/x/acquire', { session: unknown }, 404, 'SESSION_NOT_FOUND'],
      ['POST', '/v1/locks/x/acquire', { session: s, waitMs: -5 }, 400, 'INVALID_ARGUMENT'],
      ['POST', '/v1/locks/x/acquire', { session: s, waitMs: 'soon' }, 400, 'INVALID_ARGUMENT'],
      ['POST', '/v1/locks/x/acquire', { session: s, kind: 'banana' }, 400, 'INVALID_ARGUMENT'],
      ['POST', '/v1/locks/x/acquire', { session: s, kind: 'semaphore' }, 400, 'INVALID_ARGUMENT'],
      ['POST', '/v1/locks/x/acquire', { session: s, extra: 1 }, 400, 'INVALID_ARGUMENT'],
      ['POST', `/v1/locks/${'x'.repeat(300)}/acquire`, { session: s }, 400, 'INVALID_ARGUMENT'],
      ['POST', `/v1/locks/${encodeURIComponent('locksmith-serve/s/x')}/acquire`, { session: s }, 400, 'INVALID_ARGUMENT'],
      ['POST', '/v1/locks/x/release', { session: s, token: '1' }, 409, 'LOCK_NOT_HELD'],
      ['POST', '/v1/locks/x/release', { session: s, token: -1 }, 400, 'INVALID_ARGUMENT'],
      ['POST', '/v1/locks/x/extend', { session: s, token: '99' }, 409, 'LOCK_NOT_HELD'],
      ['GET', '/v1/locks?limit=abc', undefined, 400, 'INVALID_ARGUMENT'],
      ['GET', '/v1/locks?limit=5000', undefined, 400, 'INVALID_ARGUMENT'],
      ['GET', '/v1/locks?cursor=garbage', undefined, 400, 'INVALID_ARGUMENT'],
      ['GET', '/v1/nothing', undefined, 404, 'NOT_FOUND'],
    ];
    for (const [method, path, body, status, code] of cases) {
      const r = await call(base(), method, path, body);
      assert.equal(r.status, status, `${method} ${path} ${JSON.stringify(body)?.slice(0, 80)}: ${JSON.stringify(r.body)}`);
      assert.equal(r.body.code, code, `${method} ${path}`);
      assert.equal(typeof r.body.message, 'string');
    }
  });

  test('a fuzz of every route with random bodies: always 4xx JSON, the service serves, nothing held is lost', T, async () => {
    const c = client(base());
    const id = `${fresh()}held`;
    const s = await c.session(30_000);
    const held = await c.acquire(id, { session: s });
    const routes = [
      '/v1/sessions',
      `/v1/sessions/${s}/keepalive`,
      `/v1/locks/${encodeURIComponent(id)}/acquire`,
      `/v1/locks/${encodeURIComponent(id)}/release`,
      `/v1/locks/${encodeURIComponent(id)}/extend`,
    ];
    for (let i = 0; i < 150; i += 1) {
      const path = routes[i % routes.length] as string;
      const r = await call(base(), 'POST', path, randomBody(s));
      assert.ok(r.status < 500, `${path}: ${r.status} ${JSON.stringify(r.body)}`);
      if (r.status >= 400) assert.equal(typeof r.body.code, 'string');
    }
    assert.equal((await call(base(), 'GET', '/healthz')).status, 200);
    const state = await c.inspect(id);
    assert.equal((state.body.holders as { token: string }[])[0]?.token, held.body.token);
  });
}

/** Random JSON (or not), sometimes close to a valid body. */
function randomBody(session: string): unknown {
  const values: unknown[] = [null, 0, -1, 1.5, 1e308, '', 'x', true, [], {}, { a: 1 }, session, '123', 'ü'.repeat(50)];
  const pick = (): unknown => values[Math.floor(Math.random() * values.length)];
  const keys = ['session', 'ttlMs', 'waitMs', 'token', 'kind', 'permits', 'fair', 'requestId', 'name', 'meta', '__proto__', 'constructor'];
  const r = Math.random();
  if (r < 0.15) return randomBytes(Math.floor(Math.random() * 64)).toString('latin1');
  if (r < 0.25) return JSON.stringify(pick());
  const body: Record<string, unknown> = {};
  for (const k of keys) if (Math.random() < 0.3) body[k] = pick();
  // Never a valid release of the held lock: the fuzz sends no real token.
  if (typeof body.token === 'string' && /^[0-9]+$/.test(body.token)) body.token = '999999';
  return body;
}
