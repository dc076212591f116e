import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { InvalidArgumentError, LockLostError, type LeaderInfo } from '../../../src/index.js';
import { lossOf, eventually } from '../../helpers.js';
import { T, type SuiteContext } from '../suite.js';

/** Leader election (`locker.election(name)`) on every backend. */
export function electionCases(ctx: SuiteContext): void {
  describe('leader election', () => {
    test('campaign leads with a token; leader() names the leader; a second candidate waits', T, () => campaignLeadsTokenLeaderNames(ctx));

    test('resign() hands leadership to the next candidate with a larger token', T, () => resignHandsLeadershipNextCandidate(ctx));

    test("a crashed leader's term ends by its lease and another candidate leads", T, () => crashedLeadersTermEndsBy(ctx));

    test('loss of leadership aborts the term signal with LockLostError', T, () => lossLeadershipAbortsTermSignal(ctx));

    test('observe() yields the leaders as they change', T, () => observeYieldsLeadersAsThey(ctx));

    // Only where the engine is notified: elsewhere observe() polls by design, and these cases
    // (a poll far beyond their bound) would be false failures. Not registered, not skipped.
    if (ctx.observe.notified) {
      test('observe() is woken by the engine where it is notified: leader changes seen with observeEveryMs far beyond the case', T, () =>
        observeWokenByNotification(ctx),
      );

      test(
        "observe() where the engine is notified sees a crashed leader's term end, announced or not (a lease end writes nothing on some engines)",
        T,
        () => observeSeesCrashedLeaderEnd(ctx),
      );
    }

    test('a bad participant id is a typed error', T, () => badParticipantIdTypedError(ctx));
  });
}

async function campaignLeadsTokenLeaderNames(ctx: SuiteContext): Promise<void> {
  const { client, id } = ctx;
  const name = id('election');
  const a = client().election(name, { id: 'node-a' });
  const b = client().election(name, { id: 'node-b' });
  const term = await a.campaign();
  assert.equal(typeof term.token, 'bigint');
  assert.equal(term.signal.aborted, false);
  const leader = await b.leader();
  assert.equal(leader?.id, 'node-a');
  assert.equal(leader?.token, term.token);
  const ctl = new AbortController();
  const waiting = b.campaign({ signal: ctl.signal });
  setTimeout(() => ctl.abort(new Error('not now')), 300);
  await assert.rejects(waiting, /not now/);
  await a.resign();
}

async function resignHandsLeadershipNextCandidate(ctx: SuiteContext): Promise<void> {
  const { client, id } = ctx;
  const name = id('resign');
  const a = client().election(name, { id: 'a' });
  const b = client().election(name, { id: 'b' });
  const first = await a.campaign();
  const next = b.campaign({ timeoutMs: 60_000 });
  await first.resign();
  const second = await next;
  assert.ok(second.token > first.token);
  assert.equal((await a.leader())?.id, 'b');
  await b.resign();
  await eventually('nobody leads', async () => (await a.leader()) === undefined);
}

async function crashedLeadersTermEndsBy(ctx: SuiteContext): Promise<void> {
  const { client, id, shortTtl, crash } = ctx;
  const name = id('crash');
  const doomed = client({ ttlMs: shortTtl });
  const first = await doomed.election(name, { id: 'doomed' }).campaign();
  await crash(doomed);
  const second = await client().election(name, { id: 'heir' }).campaign({ timeoutMs: 60_000 });
  assert.ok(second.token > first.token);
  await second.resign();
}

async function lossLeadershipAbortsTermSignal(ctx: SuiteContext): Promise<void> {
  const { client, id, shortTtl } = ctx;
  const locker = client({ ttlMs: shortTtl, autoExtend: false });
  const term = await locker.election(id('lost')).campaign();
  assert.ok((await lossOf(term.lock)) instanceof LockLostError);
  assert.equal(term.signal.aborted, true);
}

async function observeYieldsLeadersAsThey(ctx: SuiteContext): Promise<void> {
  const { client, id } = ctx;
  const name = id('observe');
  const watcher = client().election(name, { id: 'watcher', observeEveryMs: 50 });
  const ctl = new AbortController();
  const seen: (LeaderInfo | undefined)[] = [];
  const done = (async () => {
    for await (const l of watcher.observe({ signal: ctl.signal })) seen.push(l);
  })();
  await eventually('the first view', () => seen.length >= 1);
  const a = await client().election(name, { id: 'a' }).campaign();
  await eventually('a leads', () => seen.some((l) => l?.id === 'a'));
  await a.resign();
  const b = await client().election(name, { id: 'b' }).campaign();
  await eventually('b leads', () => seen.some((l) => l?.id === 'b'));
  await b.resign();
  ctl.abort();
  await done;
  const ids = seen.map((l) => l?.id);
  assert.equal(ids[0], undefined);
  assert.ok(ids.indexOf('a') < ids.indexOf('b'));
}

/**
 * With a 10-minute poll, only a notification can show the changes within the 20 s bound of
 * each wait (the safety-net look comes every 30 s).
 */
async function observeWokenByNotification(ctx: SuiteContext): Promise<void> {
  const { client, id } = ctx;
  const name = id('observe-notified');
  const watcher = client().election(name, { id: 'watcher', observeEveryMs: 600_000 });
  const ctl = new AbortController();
  const seen: (LeaderInfo | undefined)[] = [];
  const done = (async () => {
    for await (const l of watcher.observe({ signal: ctl.signal })) seen.push(l);
  })();
  const within = 20_000;
  await eventually('the first view', () => seen.length >= 1, within);
  const a = await client().election(name, { id: 'a' }).campaign();
  await eventually('a leads', () => seen.some((l) => l?.id === 'a'), within);
  const next = client().election(name, { id: 'b' }).campaign();
  await a.resign();
  const b = await next;
  await eventually('b leads', () => seen.some((l) => l?.id === 'b'), within);
  await b.resign();
  await eventually('nobody leads', () => seen.at(-1) === undefined && seen.length > 2, within);
  ctl.abort();
  await done;
}

/** As above: a 10-minute poll, so the end is seen from a notification or at the lease end. */
async function observeSeesCrashedLeaderEnd(ctx: SuiteContext): Promise<void> {
  const { client, id, shortTtl, crash } = ctx;
  const name = id('observe-crash');
  const doomed = client({ ttlMs: shortTtl });
  await doomed.election(name, { id: 'doomed' }).campaign();
  const watcher = client().election(name, { id: 'watcher', observeEveryMs: 600_000 });
  const ctl = new AbortController();
  const seen: (LeaderInfo | undefined)[] = [];
  const done = (async () => {
    for await (const l of watcher.observe({ signal: ctl.signal })) seen.push(l);
  })();
  await eventually('the doomed leader', () => seen[0]?.id === 'doomed', 20_000);
  await crash(doomed);
  await eventually('nobody leads once its lease ran out', () => seen.at(-1) === undefined, 20_000);
  ctl.abort();
  await done;
}

function badParticipantIdTypedError(ctx: SuiteContext): void {
  const { client, id } = ctx;
  assert.throws(() => client().election(id('bad'), { id: '' }), InvalidArgumentError);
  assert.throws(() => client().election(id('bad'), { id: 'a#b' }), InvalidArgumentError);
  assert.throws(() => client().election(''), InvalidArgumentError);
}
