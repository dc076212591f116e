/**
 * The `mode=state` cases every backend runs (docs/serve.md, "Events"): the stream starts
 * with every lock's state, ends a burst of changes with each lock's final state, and shows a
 * lock free once its holder's lease ended without any change being notified.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { eventually } from '../helpers.js';
import { client, sse, type Sse } from './service.js';

const T = { timeout: 60_000 };

/** Register the cases against the service at `svc().base`. */
export function stateCases(svc: () => { base: string }): void {
  /** Read a stream's events into `into` until `stop` aborts. */
  function collect(path: string, into: Sse[], stop: AbortSignal): Promise<void> {
    return (async () => {
      for await (const e of sse(svc().base, path, stop)) into.push(e);
    })();
  }

  test('mode=state: every lock first, then the latest state of each lock after a burst of changes', T, async () => {
    const c = client(svc().base);
    const s = await c.session(30_000, 'stater');
    const first = await c.acquire('st/held', { session: s });
    const stop = new AbortController();
    const seen: Sse[] = [];
    const reading = collect('/v1/events?mode=state&prefix=st/', seen, stop.signal);
    try {
      await eventually('the initial state', () => seen.some((e) => e.event === 'state' && e.data.lockId === 'st/held'));
      const initial = seen.find((e) => e.data.lockId === 'st/held')?.data;
      assert.equal((initial?.holders as { token: string }[])[0]?.token, first.body.token);
      let token: unknown;
      for (let i = 0; i < 40; i += 1) {
        const got = await c.acquire('st/burst', { session: s });
        token = got.body.token;
        if (i < 39) await c.release('st/burst', s, token);
      }
      const last = (): Record<string, unknown> | undefined => seen.filter((e) => e.data.lockId === 'st/burst').at(-1)?.data;
      await eventually('the final state of st/burst', () => (last()?.holders as { token: string }[] | undefined)?.[0]?.token === token);
      assert.deepEqual(Object.keys(last() ?? {}).sort(), ['holders', 'kind', 'lastToken', 'lockId', 'queue', 'waiters']);
      assert.ok(
        seen.every((e) => e.event === 'state'),
        'a state stream sends states only',
      );
      await c.release('st/burst', s, token);
      await eventually('st/burst free', () => (last()?.holders as unknown[]).length === 0);
      await c.end(s);
    } finally {
      stop.abort();
      await reading;
    }
  });

  test('mode=state: a hold whose lease ends (its session not kept alive) shows free, with no change notified', T, async () => {
    const c = client(svc().base);
    const s = await c.session(1_000, 'lapsed');
    const id = `st/lapse-${Date.now()}`;
    const stop = new AbortController();
    const seen: Sse[] = [];
    const reading = collect('/v1/events?mode=state&prefix=st/', seen, stop.signal);
    try {
      const held = await c.acquire(id, { session: s });
      assert.equal(held.status, 200);
      const last = (): Record<string, unknown> | undefined => seen.filter((e) => e.data.lockId === id).at(-1)?.data;
      await eventually('held', () => (last()?.holders as unknown[] | undefined)?.length === 1);
      await eventually('free once the lease ended', () => (last()?.holders as unknown[] | undefined)?.length === 0);
    } finally {
      stop.abort();
      await reading;
    }
  });
}
