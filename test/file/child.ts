/**
 * A separate process for the file backend's tests: `child.ts '<json ChildConfig>'`, forked
 * with an IPC channel. `hold` takes the lock (reporting `waiting` when it queues behind
 * another holder), reports its token and keeps it (renewing) until killed; on a `write` message it reports the token it would write with, as a naive
 * client that does not look at its signal would; on `release` it releases. `count` increments a shared counter file
 * `times` times under the lock and exits.
 */
import { readFileSync, writeFileSync } from 'node:fs';
import { setTimeout as sleep } from 'node:timers/promises';
import { createLocker } from '../../src/index.js';

/** What the test passes to a child. */
export type ChildConfig =
  | {
      readonly mode: 'hold';
      readonly url: string;
      readonly lockId: string;
      readonly ttlMs: number;
      readonly name?: string;
      readonly fair?: boolean;
    }
  | { readonly mode: 'count'; readonly url: string; readonly lockId: string; readonly file: string; readonly times: number };

/** Messages a child sends. */
export type ChildMessage =
  | { readonly type: 'waiting'; readonly pid: number }
  | { readonly type: 'held'; readonly token: string; readonly pid: number }
  | { readonly type: 'write'; readonly token: string; readonly lost: boolean }
  | { readonly type: 'released' }
  | { readonly type: 'counted'; readonly times: number };

const config = JSON.parse(process.argv[2] ?? '{}') as ChildConfig;
const send = (m: ChildMessage): void => void process.send?.(m);
const locker = createLocker(
  config.url,
  config.mode === 'hold' ? { ttlMs: config.ttlMs, ...(config.name ? { name: config.name } : {}) } : {},
);

if (config.mode === 'hold') {
  locker.once('waiting', () => send({ type: 'waiting', pid: process.pid }));
  const lock = await locker.lock(config.lockId, { timeoutMs: 60_000, ...(config.fair ? { fair: true } : {}) });
  process.on('message', (command) => {
    if (command === 'release') void lock.release().then(() => send({ type: 'released' }));
    else send({ type: 'write', token: lock.token.toString(), lost: lock.signal.aborted });
  });
  send({ type: 'held', token: lock.token.toString(), pid: process.pid });
  // Held until the test kills this process (the IPC channel keeps it alive).
} else {
  for (let i = 0; i < config.times; i++) {
    await locker.withLock(config.lockId, async () => {
      const value = Number(readFileSync(config.file, 'utf8'));
      // Give a racing process every chance to read the same value, were the lock not held.
      await sleep(1);
      writeFileSync(config.file, String(value + 1));
    });
  }
  await locker.close();
  send({ type: 'counted', times: config.times });
  process.disconnect?.();
}
