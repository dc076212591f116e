/**
 * The election cases every backend runs (docs/serve.md, "Elections"): campaign as a long
 * poll, leader, observe as SSE, resign, leadership lost with the session, one election with
 * the library's `locker.election()`, a resign withdrawing a waiting campaign, and bad input.
 */
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { test } from 'node:test';
import type { Locker } from '../../src/index.js';
import { eventually } from '../helpers.js';
import { call, client, sse } from './service.js';

const T = { timeout: 60_000 };
const fresh = (): string => `e${randomBytes(5).toString('hex')}/leader`;
const path = (name: string, action: string): string => `/v1/elections/${encodeURIComponent(name)}/${action}`;

/** An election client of the service at `base`. */
function elections(base: string) {
  return {
    campaign: (name: string, body: Record<string, unknown>, signal?: AbortSignal) =>
      call(base, 'POST', path(name, 'campaign'), body, {}, signal),
    resign: (name: string, body: Record<string, unknown>) => call(base, 'POST', path(name, 'resign'), body),
    leader: async (name: string) => (await call(base, 'GET', path(name, 'leader'))).body.leader as Record<string, unknown> | null,
  };
}

/** Register the cases against the service at `svc().base`, over `svc().locker`'s backend. */
export function electionCases(svc: () => Svc): void {
  termCases(svc);
  withdrawCases(svc);
  observeCases(svc);
  badInputCases(svc);
}

type Svc = { base: string; locker: Locker };

function termCases(svc: () => Svc): void {
  test('campaign, leader, a second campaign waits, resign hands leadership on with a greater token', T, async () => {
    const c = client(svc().base);
    const e = elections(svc().base);
    const name = fresh();
    const [a, b] = [await c.session(10_000, 'alpha'), await c.session(10_000, 'beta')];
    assert.equal(await e.leader(name), null);
    const first = await e.campaign(name, { session: a, value: 'node-a:8080' });
    assert.equal(first.status, 200, JSON.stringify(first.body));
    const l = await e.leader(name);
    assert.deepEqual([l?.value, l?.token, l?.session], ['node-a:8080', first.body.token, a]);
    const again = await e.campaign(name, { session: a });
    assert.equal(again.body.token, first.body.token, 'a leader campaigning again keeps its term');
    const refused = await e.campaign(name, { session: b, waitMs: 0 });
    assert.deepEqual([refused.status, refused.body.code], [409, 'LOCK_TIMEOUT']);
    const waiting = e.campaign(name, { session: b, waitMs: 20_000 });
    assert.deepEqual((await e.resign(name, { session: a })).body, { resigned: true });
    const second = await waiting;
    assert.equal(second.status, 200, JSON.stringify(second.body));
    assert.equal(second.body.value, 'beta', "the value defaults to the session's name");
    assert.ok(BigInt(second.body.token as string) > BigInt(first.body.token as string));
    assert.equal((await e.leader(name))?.value, 'beta');
    assert.deepEqual((await e.resign(name, { session: a })).body, { resigned: false }, 'resign is idempotent');
    assert.deepEqual((await e.resign(name, { session: b, token: '1' })).body, { resigned: false }, 'another term');
    await c.end(b);
    assert.equal(await e.leader(name), null, 'ending the session ends its term');
  });

  test('a session that stops keeping alive loses its leadership to a waiting campaign', T, async () => {
    const c = client(svc().base);
    const e = elections(svc().base);
    const name = fresh();
    const [dropped, other] = [await c.session(1_000, 'dropped'), await c.session(30_000, 'other')];
    const first = await e.campaign(name, { session: dropped });
    assert.equal(first.status, 200);
    const next = await e.campaign(name, { session: other, waitMs: 20_000, requestId: 'c-1' });
    assert.equal(next.status, 200, JSON.stringify(next.body));
    assert.ok(BigInt(next.body.token as string) > BigInt(first.body.token as string));
    assert.equal((await e.leader(name))?.session, other);
    const retried = await e.campaign(name, { session: other, requestId: 'c-1' });
    assert.equal(retried.body.token, next.body.token, 'a retried campaign answers the same term');
  });
}

function withdrawCases(svc: () => Svc): void {
  test("resign withdraws the session's waiting campaign: 409 CAMPAIGN_WITHDRAWN, no queue entry, never elected", T, async () => {
    const c = client(svc().base);
    const e = elections(svc().base);
    const name = fresh();
    const [a, b] = [await c.session(10_000, 'alpha'), await c.session(10_000, 'beta')];
    assert.equal((await e.campaign(name, { session: a })).status, 200);
    const waiting = e.campaign(name, { session: b, waitMs: 30_000 });
    const waiters = async (): Promise<number> => (await c.inspect(name)).body.waiters as number;
    await eventually('beta waits', async () => (await waiters()) === 1);
    assert.deepEqual((await e.resign(name, { session: b })).body, { resigned: false });
    const answer = await waiting;
    assert.deepEqual([answer.status, answer.body.code], [409, 'CAMPAIGN_WITHDRAWN'], JSON.stringify(answer.body));
    assert.equal(await waiters(), 0, 'no queue entry left behind');
    assert.deepEqual((await e.resign(name, { session: a })).body, { resigned: true });
    assert.equal(await e.leader(name), null, 'the withdrawn campaign is not elected');
    // A campaign whose client goes away leaves no queue entry either.
    assert.equal((await e.campaign(name, { session: a })).status, 200);
    const gone = new AbortController();
    const abandoned = e.campaign(name, { session: b, waitMs: 30_000 }, gone.signal).catch(() => undefined);
    await eventually('beta waits again', async () => (await waiters()) === 1);
    gone.abort();
    await abandoned;
    await eventually('the abandoned campaign left the queue', async () => (await waiters()) === 0);
    await Promise.all([c.end(a), c.end(b)]);
  });
}

function observeCases(svc: () => Svc): void {
  test('observe streams the leader, then each change; the library sees the same election', T, async () => {
    const c = client(svc().base);
    const e = elections(svc().base);
    const name = fresh();
    const stop = new AbortController();
    const seen: (Record<string, unknown> | null)[] = [];
    const reading = (async () => {
      for await (const ev of sse(svc().base, path(name, 'observe'), stop.signal)) {
        if (ev.event === 'leader') seen.push(ev.data.leader as Record<string, unknown> | null);
      }
    })();
    const election = svc().locker.election(name, { id: 'node-library' });
    try {
      await eventually('nobody leads, seen', () => seen.length === 1 && seen[0] === null);
      const s = await c.session(10_000, 'svc');
      const won = await e.campaign(name, { session: s, value: 'node-service' });
      await eventually('service leader seen', () => seen.some((l) => l?.value === 'node-service' && l.token === won.body.token));
      assert.equal((await election.leader())?.id, 'node-service', 'the library reads the service leader');
      const term = election.campaign();
      await e.resign(name, { session: s });
      const lib = await term;
      await eventually('library leader seen', () => seen.some((l) => l?.value === 'node-library' && l.token === lib.token.toString()));
      const l = await e.leader(name);
      assert.deepEqual([l?.value, l?.token, l?.session], ['node-library', lib.token.toString(), undefined]);
      await lib.resign();
      await c.end(s);
    } finally {
      stop.abort();
      await reading;
      await election.resign();
    }
  });
}

function badInputCases(svc: () => Svc): void {
  test('election bad input is a 4xx { code, message }; a fuzz leaves the leader leading', T, async () => {
    const c = client(svc().base);
    const e = elections(svc().base);
    const name = fresh();
    const s = await c.session(30_000);
    const won = await e.campaign(name, { session: s });
    const cases: [string, string, unknown, number, string][] = [
      ['POST', path(name, 'campaign'), { session: 'AAAAAAAAAAAAAAAAAAAAAA' }, 404, 'SESSION_NOT_FOUND'],
      ['POST', path(name, 'campaign'), { session: s, value: 'a#b' }, 400, 'INVALID_ARGUMENT'],
      ['POST', path(name, 'campaign'), { session: s, value: 'é'.repeat(100) }, 400, 'INVALID_ARGUMENT'],
      ['POST', path(name, 'campaign'), { session: s, waitMs: -1 }, 400, 'INVALID_ARGUMENT'],
      ['POST', path(name, 'campaign'), { session: s, extra: true }, 400, 'INVALID_ARGUMENT'],
      ['POST', path(name, 'resign'), { session: s, token: 'x' }, 400, 'INVALID_ARGUMENT'],
      ['POST', path('locksmith-serve/s/x', 'campaign'), { session: s }, 400, 'INVALID_ARGUMENT'],
      ['GET', path('x'.repeat(300), 'leader'), undefined, 400, 'INVALID_ARGUMENT'],
      ['GET', path('locksmith-serve/x', 'observe'), undefined, 400, 'INVALID_ARGUMENT'],
    ];
    for (const [method, p, body, status, code] of cases) {
      const r = await call(svc().base, method, p, body);
      assert.deepEqual([r.status, r.body.code], [status, code], `${method} ${p} ${JSON.stringify(body)}`);
    }
    const values: unknown[] = [null, 0, -1, '', 'x', true, [], {}, s, '123', '#', 'ü'.repeat(70)];
    const pick = (): unknown => values[Math.floor(Math.random() * values.length)];
    for (let i = 0; i < 60; i += 1) {
      const body: Record<string, unknown> = {};
      for (const k of ['session', 'value', 'waitMs', 'requestId', 'token', '__proto__']) if (Math.random() < 0.4) body[k] = pick();
      // Never a real resign of the leader: the fuzz's resigns name a token it does not hold.
      if (i % 2 === 0 && body.session === s) body.token = '999999';
      const r = await call(svc().base, 'POST', path(name, i % 2 ? 'campaign' : 'resign'), Math.random() < 0.1 ? '{x' : body);
      assert.ok(r.status >= 200 && r.status < 500 && (r.status === 200 || typeof r.body.code === 'string'), JSON.stringify(r.body));
    }
    assert.equal((await e.leader(name))?.token, won.body.token, 'the fuzz sent no real resign: the leader leads');
    const doc = await call(svc().base, 'GET', '/openapi.json');
    for (const a of ['campaign', 'resign', 'leader', 'observe']) assert.ok(`/v1/elections/{name}/${a}` in (doc.body.paths as object), a);
  });
}
