/**
 * Run as a child process by test/compat/redis-semaphore.test.ts: a Mutex without
 * `onLockLost` loses its lock; the default must end the process with the LostLockError.
 */
import { Redis } from 'ioredis';
import { Mutex } from '../../../src/compat/redis-semaphore.js';
import { COMPAT_PREFIX } from '../../../src/compat/clients.js';
import { lockKeys } from '../../../src/backends/redis/index.js';

const port = Number(process.argv[2]);
const client = new Redis({ port, host: '127.0.0.1' });
const mutex = new Mutex(client, `lost-default-${process.pid}`, { lockTimeout: 300, refreshInterval: 80 });
await mutex.acquire();
await client.del(lockKeys(COMPAT_PREFIX, `mutex:lost-default-${process.pid}`)[0]);
// Kept alive until the loss ends the process; exit 0 would mean it was never reported.
setTimeout(() => process.exit(0), 5_000);
