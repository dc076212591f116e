/**
 * The command timeout is one timer for every command in flight (they share `commandTimeoutMs`,
 * so deadlines come in send order). Each command must still fail on its own deadline, and an
 * answered command must not disturb the others. No Redis needed: a client that never answers.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { performance } from 'node:perf_hooks';
import { setTimeout as sleep } from 'node:timers/promises';
import type { AcquireRequest } from '../../src/backend.js';
import { RedisBackend, type RedisClientLike, type RedisTicket } from '../../src/backends/redis/index.js';
import { BackendUnavailableError } from '../../src/errors.js';
import { seamRequest } from '../helpers.js';

test('redis: every command in flight fails on its own commandTimeoutMs deadline, answered ones resolve', async () => {
  const client: RedisClientLike = {
    // Lock 'ok' answers (a grant: a bare token from the 4-key first attempt, ACQUIRE_SOLO, else
    // ACQUIRE's {1, token, field}); every other lock never does.
    evalsha: (_sha, n, ...args) =>
      String(args[0]).includes('{ok}') ? Promise.resolve(n === 4 ? '7' : [1, '7', 'o']) : new Promise<unknown>(() => undefined),
    eval: () => new Promise<unknown>(() => undefined),
    duplicate: () => {
      throw new Error('not used');
    },
  };
  const backend = new RedisBackend(client, { commandTimeoutMs: 200 });
  // The backend's timer is unref'd (a real client's socket keeps the process alive; this one has none).
  const keepAlive = setInterval(() => undefined, 1_000);
  const req = (lockId: string): AcquireRequest<RedisTicket> =>
    seamRequest<RedisTicket>(lockId, 'o', { ttlMs: 1_000, fair: false, wait: false });
  const t0 = performance.now();
  const failsAt = (p: Promise<unknown>): Promise<number> =>
    p.then(
      () => assert.fail('a command that got no reply resolved'),
      (err: unknown) => {
        assert.ok(err instanceof BackendUnavailableError, String(err));
        return performance.now() - t0;
      },
    );
  const first = failsAt(backend.tryAcquire(req('a')));
  await sleep(100);
  const answered = await backend.tryAcquire(req('ok'));
  assert.equal(answered.granted, true);
  const second = failsAt(backend.tryAcquire(req('b')));
  const [a, b] = await Promise.all([first, second]).finally(() => clearInterval(keepAlive));
  assert.ok(a >= 190 && a < 1_000, `the first command failed after ${a.toFixed(0)} ms`);
  assert.ok(b >= 290 && b < 1_100 && b > a, `the second command failed after ${b.toFixed(0)} ms (first: ${a.toFixed(0)} ms)`);
  await backend.close();
});
