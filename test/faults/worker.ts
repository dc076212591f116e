/**
 * A fault-test worker process: `tsx worker.ts '<json WorkerConfig>'`. Loops lock → begin →
 * fenced read → critical section → fenced write of value+1 → end → release until its stdin
 * closes (the runner's stop) or `maxOps` increments were tried. Like a naive client (or one hit
 * by a GC pause between its check and its write) it does not look at lock.signal before
 * writing: the fence is what must catch it. Everything it does is recorded by the store; at
 * `end` it says whether its lease was still valid, which is what the double-grant check reads.
 */
import { setTimeout as sleep } from 'node:timers/promises';
import { createLocker, LocksmithError, StaleTokenError, type Lock } from '../../src/index.js';
import { connectFencedStore } from '../../src/testing.js';
import type { GuardConfig } from './guard.js';

/** What the runner passes to a worker. */
export interface WorkerConfig {
  readonly url: string;
  readonly lockId: string;
  readonly client: string;
  readonly storePort: number;
  readonly ttlMs: number;
  readonly lockDelayMs: number;
  readonly fair: boolean;
  readonly criticalMs: number;
  readonly maxOps: number;
  /** Also write through a `locksmith-dlm/fenced` helper, before the store's write (./guard.ts). */
  readonly guard?: GuardConfig;
}

const config = JSON.parse(process.argv[2] ?? '{}') as WorkerConfig;
const store = await connectFencedStore(config.storePort, config.client);
// Loaded only when asked: the drivers it imports would slow every other worker's start.
const guard = config.guard ? await (await import('./guard.js')).openGuard(config.guard) : undefined;
let unhandled = 0;
process.on('unhandledRejection', (reason) => {
  unhandled += 1;
  // The stack goes to the runner's stderr (the soak's log): the note alone says too little.
  console.error(`${config.client}: unhandled rejection:`, reason);
  void store.note(`unhandled rejection: ${String(reason)}`).catch(() => undefined);
});
// A crash (an 'error' event nobody heard, a throw from a timer) is what "nothing crashes the
// process" forbids: record it like an unhandled rejection, then die as Node would.
process.on('uncaughtException', (err) => {
  unhandled += 1;
  console.error(`${config.client}: uncaught exception:`, err);
  void store
    .note(`unhandled rejection (uncaught exception): ${String(err)}`)
    .catch(() => undefined)
    .finally(() => process.exit(70));
});
let stopping = false;
process.stdin.on('data', () => undefined);
process.stdin.on('end', () => (stopping = true));
process.stdin.on('close', () => (stopping = true));

const locker = createLocker(config.url, { ttlMs: config.ttlMs, lockDelayMs: config.lockDelayMs });
const stats = { committed: 0, rejected: 0, failures: 0, unhandled: 0 };

/** One increment under the lock (granted at wall-clock `grantedAt`); the store records the outcome. */
async function increment(lock: Lock, grantedAt: number): Promise<void> {
  // When the lock was this worker's, on the machine's wall clock: the begin below reaches the
  // store only after this process and the store's are scheduled again, which on a loaded
  // machine is most of a crashed holder's measured recovery (test/faults/checker.ts). Not
  // awaited: the store's connection keeps the order, and the section is not made longer.
  void store.note(`granted ${lock.token} ${grantedAt.toFixed(1)}`).catch(() => undefined);
  await store.begin(lock.token);
  try {
    const value = await store.read(lock.token);
    if (config.criticalMs > 0) await sleep(config.criticalMs);
    // The helper first: a stale holder reaches it exactly as it reaches the store.
    await guard?.write(lock.token, value + 1);
    await store.write(lock.token, value + 1);
    stats.committed += 1;
  } catch (err) {
    if (!(err instanceof StaleTokenError)) throw err;
    stats.rejected += 1;
  } finally {
    await store.end(lock.token);
    // Checked after the store recorded the end: still valid now means valid over the whole
    // section as the store ordered it (the deadline only moves forward) — what the
    // double-grant check needs (test/faults/checker.ts).
    const valid = lock.remainingMs() > 0 && !lock.signal.aborted;
    await store.note(`${valid ? 'valid' : 'lost'} ${lock.token}`);
  }
}

for (let i = 0; i < config.maxOps && !stopping; i++) {
  let lock: Lock;
  let grantedAt: number;
  try {
    lock = await locker.lock(config.lockId, { timeoutMs: 30_000, fair: config.fair });
    grantedAt = performance.timeOrigin + performance.now();
  } catch (err) {
    // Unavailability and timeouts are the typed answers a fault should produce: retry.
    if (!(err instanceof LocksmithError)) throw err;
    stats.failures += 1;
    await store.note(`acquire failed: ${err.code}`).catch(() => undefined);
    await sleep(50);
    continue;
  }
  await increment(lock, grantedAt);
  await lock.release().catch(() => undefined);
}
await store.note('closing');
await locker.close().catch(() => undefined);
await guard?.close().catch(() => undefined);
// What is still alive once the locker is closed (the store's socket and stdin aside): the last
// step a stuck worker is reported with (test/faults/run.ts).
await store.note(`closed; alive: ${process.getActiveResourcesInfo().join(',')}`);
stats.unhandled = unhandled;
store.close();
process.stdout.write(`${JSON.stringify(stats)}\n`);
