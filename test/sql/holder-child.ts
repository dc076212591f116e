/**
 * A holder in another process for test/sql/observe.ts: locks `lockId` through `url` as the
 * locker named `name`, reports its identity and token over IPC, and holds until killed.
 */
import { createLocker } from '../../src/index.js';

const [url, lockId, name] = process.argv.slice(2);
if (url === undefined || lockId === undefined || name === undefined) throw new Error('usage: holder-child <url> <lockId> <name>');
const locker = createLocker(url, { name });
const lock = await locker.lock(lockId, { ttlMs: 60_000 });
process.send?.({ identity: locker.identity, token: lock.token.toString() });
// Held until the parent kills this process.
setInterval(() => undefined, 60_000);
