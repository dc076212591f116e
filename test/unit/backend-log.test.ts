/**
 * The backend kit's round-trip logging (src/backends/round-trip.ts): off, a call hands back
 * the engine's own promise and formats nothing; on, it writes one line with the lock id, the
 * outcome and the time, and a failure by its code only (docs/observability.md, "Logging").
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { format } from 'node:util';
import { LockLostError } from '../../src/errors.js';
import { logRoundTrips, type AcquireRequest, type Backend, type Grant, type Log } from '../../src/backends/kit.js';
import { MemoryBackend } from '../../src/backends/memory/backend.js';

/** A log whose switch the test holds; it records what it was asked to write, formatted. */
function spyLog(enabled: boolean): Log & { lines: string[] } {
  const lines: string[] = [];
  const log = Object.assign((fmt: string, ...args: unknown[]) => lines.push(format(fmt, ...args)), { enabled, lines });
  return log;
}

const request = (lockId: string): AcquireRequest => ({
  lockId,
  kind: 'mutex',
  permits: 1,
  ownerId: `o-${lockId}`,
  freshOwner: true,
  ttlMs: 5_000,
  fair: false,
  lockDelayMs: 0,
  wait: false,
  ticket: undefined,
  signal: new AbortController().signal,
  onLost: () => undefined,
  identity: '{"meta":{"secret":"m3ta-value"}}',
});

test('off: the round trip is the engine call itself and nothing is formatted', async () => {
  const log = spyLog(false);
  let formatted = 0;
  // A lock id that counts being turned into a string: off, nothing may format it.
  const lockId = { toString: () => String((formatted += 1)) } as unknown as string;
  const backend = new MemoryBackend(`log-off-${process.pid}`) as Backend;
  const sent: Promise<unknown>[] = [];
  const engine = backend.tryAcquire.bind(backend);
  backend.tryAcquire = (req) => {
    const p = engine({ ...req, lockId: 'x' });
    sent.push(p);
    return p;
  };
  logRoundTrips(backend, log);
  const got = backend.tryAcquire({ ...request('x'), lockId });
  assert.equal(got, sent[0], 'off, the wrapper hands back the engine promise unchanged');
  const r = await got;
  assert.ok(r.granted);
  assert.equal(await backend.release({ ...r.grant, lockId }), false);
  assert.deepEqual(log.lines, []);
  assert.equal(formatted, 0);
  await backend.close();
});

test('on: one line per attempt, renewal and release, a loss by its code, never the identity', async () => {
  const log = spyLog(true);
  const backend = new MemoryBackend(`log-on-${process.pid}`) as Backend;
  logRoundTrips(backend, log);
  const r = await backend.tryAcquire(request('job:1'));
  assert.ok(r.granted);
  const refused = await backend.tryAcquire({ ...request('job:1'), ownerId: 'other' });
  assert.equal(refused.granted, false);
  await backend.extend(r.grant, 1_000);
  assert.equal(await backend.release(r.grant), true);
  await assert.rejects(backend.extend(r.grant as Grant, 1_000), LockLostError);
  assert.equal(log.lines.length, 5, log.lines.join('\n'));
  assert.match(log.lines[0] ?? '', /^job:1: attempt mutex granted token \d+ in \d+\.\dms$/);
  assert.match(log.lines[1] ?? '', /^job:1: attempt mutex contended in /);
  assert.match(log.lines[2] ?? '', /^job:1: renew token \d+ for 1000ms in /);
  assert.match(log.lines[3] ?? '', /^job:1: release token \d+ released in /);
  assert.match(log.lines[4] ?? '', /^job:1: renew token \d+ failed in \d+\.\dms \(LOCK_LOST not-held\)$/);
  assert.ok(log.lines.every((l) => !l.includes('m3ta-value')));
  await backend.close();
});
