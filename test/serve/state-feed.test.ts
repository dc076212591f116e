/**
 * `mode=state` on a backend without change notifications (docs/serve.md, "Events"): the
 * shared feed lists the prefix every `watchEveryMs` and sends what differs from its last
 * listing. A stream that opens between two listings starts with its own, newer listing; a
 * lock taken and released between the feed's listings is then shown held by that stream
 * alone, and the feed's next listing must still tell it the lock is free. Over memory://
 * listed every 1.5 s, so that the steps below all fall between two of them.
 */
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { createLocker, type Locker } from '../../src/index.js';
import { eventually } from '../helpers.js';
import { sse, startService, type Service, type Sse } from './service.js';

const URL_ = `memory://serve-state-feed-${process.pid}`;
let service: Service;
let locker: Locker;
before(async () => {
  service = await startService(URL_, { watchEveryMs: 1_500, streams: { stateEveryMs: 50 } });
  locker = createLocker(URL_);
});
after(async () => {
  await locker.close();
  await service.close();
});

function collect(path: string, into: Sse[], stop: AbortSignal): Promise<void> {
  return (async () => {
    for await (const e of sse(service.base, path, stop)) into.push(e);
  })();
}

test(
  'mode=state, polled: a lock held in a new stream’s first listing only is shown free after its release',
  { timeout: 30_000 },
  async () => {
    const stop = new AbortController();
    const first: Sse[] = [];
    const second: Sse[] = [];
    const anchor = await locker.lock('pf/anchor');
    const readers = [collect('/v1/events?mode=state&prefix=pf/', first, stop.signal)];
    try {
      // A stream's first listing comes after the feed's own: the feed has listed once when the first stream shows the anchor.
      await eventually('the first stream open', () => first.some((e) => e.data.lockId === 'pf/anchor'));
      const lock = await locker.lock('pf/short');
      readers.push(collect('/v1/events?mode=state&prefix=pf/', second, stop.signal));
      const shown = (into: Sse[]): Record<string, unknown> | undefined =>
        into.filter((e) => e.event === 'state' && e.data.lockId === 'pf/short').at(-1)?.data;
      await eventually('the second stream shows the lock held', () => (shown(second)?.holders as unknown[] | undefined)?.length === 1);
      await lock.release();
      await eventually(
        'the second stream shows the lock free',
        () => (shown(second)?.holders as unknown[] | undefined)?.length === 0,
        5_000,
      );
      assert.equal((shown(second)?.holders as unknown[]).length, 0);
    } finally {
      stop.abort();
      await Promise.all(readers);
      await anchor.release();
    }
  },
);
