/**
 * Child of clock-ahead.test.ts: one acquisition and release through `redlock://` from a
 * process whose wall clock runs an hour ahead (libfaketime); prints the token it was given.
 */
import { createLocker } from '../../src/index.js';

const [url, lockId] = process.argv.slice(2);
if (url === undefined || lockId === undefined) throw new Error('usage: clock-ahead-child.ts URL LOCK_ID');
const locker = createLocker(url);
const lock = await locker.lock(lockId, { timeoutMs: 30_000 });
process.stdout.write(`${lock.token}\n`);
await lock.release();
await locker.close();
