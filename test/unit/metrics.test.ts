import assert from 'node:assert/strict';
import { test } from 'node:test';
import { Registry } from 'prom-client';
import { createLocker, instrumentPrometheus } from '../../src/index.js';
import { lossOf } from '../helpers.js';

test('Prometheus metrics follow waits, holds, contention and losses', async () => {
  const registry = new Registry();
  const a = createLocker('memory://metrics', { ttlMs: 200 });
  const b = createLocker('memory://metrics', { ttlMs: 200, autoExtend: false });
  await instrumentPrometheus(a, { registry });
  const detach = await instrumentPrometheus(b, { registry });
  const held = await a.lock('m');
  const waiting = b.lock('m');
  await new Promise((r) => setTimeout(r, 20));
  await held.release();
  const second = await waiting;
  await lossOf(second);
  const text = await registry.metrics();
  assert.match(text, /locksmith_wait_seconds_count\{kind="mutex",backend="memory"\} 2/);
  assert.match(text, /locksmith_hold_seconds_count\{kind="mutex",backend="memory"\} 1/);
  assert.match(text, /locksmith_contended_total\{kind="mutex",backend="memory"\} 1/);
  assert.match(text, /locksmith_lost_total\{kind="mutex",backend="memory",reason="expired"\} 1/);
  assert.match(text, /locksmith_held\{kind="mutex",backend="memory"\} 0/);
  detach();
  await Promise.all([a.close(), b.close()]);
});
