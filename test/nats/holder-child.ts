/**
 * A holder in another process for the crash test: `holder-child.ts <url> <lockId> <ttlMs>`
 * (forked with tsx) takes the lock, sends `{ token }` to its parent, and holds (renewing)
 * until it is killed.
 */
import { createLocker } from '../../src/index.js';

const [url, lockId, ttl] = process.argv.slice(2);
if (!url || !lockId || !ttl || !process.send) throw new Error('usage: holder-child.ts <url> <lockId> <ttlMs> (forked)');
const locker = createLocker(url, { ttlMs: Number(ttl) });
const held = await locker.lock(lockId);
process.send({ token: held.token.toString() });
// Keep the process alive until the parent kills it.
setInterval(() => undefined, 60_000);
