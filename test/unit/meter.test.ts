/**
 * `instrumentMeter` (OpenTelemetry metrics, docs/observability.md, "Metrics"): the wait-time
 * histogram and the timeout, backend-error and loss counters, each labelled with the
 * backend's scheme, recorded through the `MeterLike` part of an OpenTelemetry `Meter`.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { BackendUnavailableError, createLocker, instrumentMeter, type MeterLike } from '../../src/index.js';
import { FaultyBackend } from './faulty.js';
import { lossOf } from '../helpers.js';

type Point = { readonly name: string; readonly value: number; readonly attributes: Record<string, string> };

/** A meter that keeps every point it is given, by instrument name. */
function recordingMeter(): MeterLike & { points: Point[] } {
  const points: Point[] = [];
  const sink =
    (name: string) =>
    (value: number, attributes: Record<string, string> = {}) =>
      void points.push({ name, value, attributes });
  return {
    points,
    createCounter: (name) => ({ add: sink(name) }),
    createHistogram: (name) => ({ record: sink(name) }),
  };
}

test('OpenTelemetry metrics: wait histogram, timeouts, backend errors and losses, labelled by backend', async () => {
  const meter = recordingMeter();
  const a = createLocker('memory://meter', { ttlMs: 5_000 });
  const b = createLocker('memory://meter', { ttlMs: 200, autoExtend: false });
  const detach = instrumentMeter(b, meter);
  const held = await a.lock('m:1');
  await assert.rejects(b.lock('m:1', { timeoutMs: 30 }), /timed out/);
  await held.release();
  const mine = await b.lock('m:1');
  await lossOf(mine);
  const faulty = new FaultyBackend('meter');
  faulty.acquireError = new Error('connection reset');
  const c = createLocker(faulty);
  const detachC = instrumentMeter(c, meter);
  await assert.rejects(c.lock('m:2'), BackendUnavailableError);
  const of = (name: string): Point[] => meter.points.filter((p) => p.name === name);
  assert.deepEqual(
    of('locksmith.wait').map((p) => p.attributes),
    [{ 'locksmith.backend': 'memory', 'locksmith.kind': 'mutex' }],
  );
  assert.deepEqual(of('locksmith.timeouts'), [
    { name: 'locksmith.timeouts', value: 1, attributes: { 'locksmith.backend': 'memory', 'locksmith.kind': 'mutex' } },
  ]);
  assert.deepEqual(of('locksmith.lost'), [
    { name: 'locksmith.lost', value: 1, attributes: { 'locksmith.backend': 'memory', 'locksmith.reason': 'expired' } },
  ]);
  assert.deepEqual(of('locksmith.backend_errors'), [
    { name: 'locksmith.backend_errors', value: 1, attributes: { 'locksmith.backend': 'faulty', 'locksmith.operation': 'acquire' } },
  ]);
  detach();
  detachC();
  await Promise.all([a.close(), b.close(), c.close()]);
});
