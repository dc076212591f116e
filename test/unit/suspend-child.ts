/**
 * Child of suspend.test.ts: holds a memory:// lock for a long ttl, says so, then reports
 * whether it still believes it holds after the parent made its wall clock leap ahead (what a
 * host resumed from suspend looks like: the monotonic clock stood still, the wall clock did not).
 */
import { createLocker } from '../../src/index.js';

const locker = createLocker('memory://suspend', { ttlMs: 20_000 });
const lock = await locker.lock('suspended');
process.stdout.write('held\n');
// The parent writes the leap into libfaketime's file, read again at most once a second.
const until = performance.now() + 4_000;
while (lock.held && performance.now() < until) await new Promise((r) => setTimeout(r, 50));
const reason = (lock.signal.reason as { reason?: string } | undefined)?.reason ?? 'none';
process.stdout.write(`${JSON.stringify({ held: lock.held, remainingMs: lock.remainingMs(), reason })}\n`);
await locker.close();
