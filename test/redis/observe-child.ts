/**
 * A holder in another process for test/redis/observe.test.ts: `observe-child.ts <url> <lockId>
 * <name>`, forked with an IPC channel. It takes the lock under the locker name `name`,
 * reports its pid and token, and holds (renewing) until killed.
 */
import { createLocker } from '../../src/index.js';

const [url = '', lockId = '', name = ''] = process.argv.slice(2);
const locker = createLocker(url, { name, ttlMs: 30_000 });
const lock = await locker.lock(lockId, { timeoutMs: 60_000 });
process.send?.({ pid: process.pid, token: lock.token.toString() });
