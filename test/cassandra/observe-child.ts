/**
 * A waiter in another process for test/cassandra/observe.test.ts: `observe-child.ts <url>
 * <lockId> <name>`, forked with an IPC channel. It reports its locker's identity, waits for
 * the lock, reports `held` with its token, and keeps it until killed.
 */
import { createLocker } from '../../src/index.js';

const [url = '', lockId = '', name = ''] = process.argv.slice(2);
const locker = createLocker(url, { name, ttlMs: 10_000 });
process.send?.({ type: 'identity', identity: locker.identity });
const lock = await locker.lock(lockId, { timeoutMs: 120_000 });
process.send?.({ type: 'held', token: lock.token.toString() });
