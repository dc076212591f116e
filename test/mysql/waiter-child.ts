/**
 * A waiter in another process for test/mysql/bells.test.ts: calls `lock(lockId)` through
 * `url`, says `waiting` when it queued and `held` when granted (over IPC), then releases and
 * exits.
 */
import { createLocker } from '../../src/index.js';

const [url, lockId] = process.argv.slice(2);
if (url === undefined || lockId === undefined) throw new Error('usage: waiter-child <url> <lockId>');
const locker = createLocker(url, { ttlMs: 60_000 });
locker.once('waiting', () => process.send?.({ op: 'waiting' }));
const lock = await locker.lock(lockId, { timeoutMs: 120_000 });
process.send?.({ op: 'held', token: lock.token.toString() });
await lock.release();
await locker.close();
process.disconnect();
