/**
 * `/v1/events` streams (docs/serve.md, "Events"): `mode=state` (what the web view follows)
 * starts with every lock's state and ends a burst of changes with each lock's final state;
 * a client that stops reading gets a `resync` and the whole state again instead of the
 * service buffering every change for it. Over memory:// (polled every 50 ms).
 */
import assert from 'node:assert/strict';
import { get, type IncomingMessage } from 'node:http';
import { after, before, test } from 'node:test';
import { createLocker, type Lock, type Locker } from '../../src/index.js';
import { eventually } from '../helpers.js';
import { sse, startService, type Service } from './service.js';
import { stateCases } from './stream-cases.js';

const T = { timeout: 120_000 };
const URL_ = `memory://serve-streams-${process.pid}`;
const BUFFER_BYTES = 16_384;

let service: Service;
let bulky: Locker;
before(async () => {
  service = await startService(URL_, { watchEveryMs: 50, streams: { bufferBytes: BUFFER_BYTES, stateEveryMs: 100 } });
  // Big events (a long name and meta in every identity): megabytes of changes take few locks.
  bulky = createLocker(URL_, { name: 'b'.repeat(100), meta: { pad: 'p'.repeat(400) } });
});
after(async () => {
  await bulky.close();
  await service.close();
});

stateCases(() => service);

/** A stream whose client reads nothing until `resume()`; then every event it got, in order. */
function pausedStream(path: string): Promise<{ resume(): void; text(): string; events(): string[]; res: IncomingMessage }> {
  return new Promise((resolve, reject) => {
    get(service.base + path, (res) => {
      res.pause();
      let text = '';
      resolve({
        res,
        resume: () => {
          res.setEncoding('utf8');
          res.on('data', (chunk: string) => (text += chunk));
          res.resume();
        },
        text: () => text,
        events: () => [...text.matchAll(/^event: (.*)$/gm)].map((m) => m[1] ?? ''),
      });
    }).on('error', reject);
  });
}

for (const mode of ['events', 'state'] as const) {
  test(`mode=${mode}: a client that stops reading gets a resync, not every change buffered`, T, async () => {
    const prefix = `slow-${mode}/`;
    const stream = await pausedStream(`/v1/events?mode=${mode}&prefix=${prefix}`);
    const ids = Array.from({ length: 1000 }, (_, i) => `${prefix}${'x'.repeat(200)}/${i}`);
    let changes = 0;
    // A client that reads, on the same prefix: each phase of a round goes on once it got the
    // phase's frames, so the paused stream was sent them too (no sleep guesses a poll's timing).
    const stop = new AbortController();
    let seen = 0;
    const reading = (async () => {
      for await (const e of sse(service.base, `/v1/events?mode=${mode}&prefix=${prefix}`, stop.signal))
        if (e.data.lockId !== undefined) seen += 1;
    })();
    const phase = async (what: string, work: () => Promise<unknown>): Promise<void> => {
      const from = seen;
      await work();
      await eventually(what, () => seen >= from + ids.length);
    };
    // About 1 KB an event: each round is about 2 MB of changes, far more than the stream's
    // bound plus what the kernel's socket buffers absorb (a few MB on loopback).
    try {
      for (let round = 0; round < 8; round += 1) {
        let held: (Lock | null)[] = [];
        await phase('the holds sent', async () => (held = await Promise.all(ids.map((id) => bulky.tryLock(id, { ttlMs: 60_000 })))));
        await phase('the releases sent', () => Promise.all(held.map((l) => l?.release())));
        changes += 2 * ids.length;
      }
    } finally {
      stop.abort();
      await reading;
    }
    const final = await bulky.tryLock(`${prefix}final`, { ttlMs: 60_000 });
    assert.ok(final);
    stream.resume();
    // After the resync comes the whole state as it is now: the final lock, none of the bulk.
    const sinceResync = (): string => {
      const text = stream.text();
      const at = text.lastIndexOf('event: resync');
      return at < 0 ? '' : text.slice(at);
    };
    await eventually('a resync, then the final lock', () => sinceResync().includes(`"lockId":"${prefix}final"`));
    const frames = [...sinceResync().matchAll(/^data: (.*)$/gm)].map((m) => JSON.parse(m[1] ?? '{}') as Record<string, unknown>);
    const bulk = frames.filter((f) => typeof f.lockId === 'string' && f.lockId.includes('/x'));
    assert.ok(
      bulk.every((f) => (mode === 'state' ? (f.holders as unknown[]).length === 0 : f.initial !== true)),
      'the state after the resync has none of the bulk held',
    );
    const got = stream.events().filter((e) => e !== 'resync');
    assert.ok(got.length < changes, `${got.length} events delivered of ${changes} changes: dropped while the client read nothing`);
    stream.res.destroy();
    await final.release();
  });
}
