/**
 * Child process of the clock-skew cases (run under `faketime`): takes a lock, prints what it
 * saw as one JSON line, and exits WITHOUT releasing, so the lease must end by the database's
 * clock alone. argv: url lockId ttlMs.
 */
import { createLocker } from '../../src/index.js';
import { abandon } from '../../src/testing.js';

const [url, lockId, ttl] = process.argv.slice(2);
if (url === undefined || lockId === undefined || ttl === undefined) throw new Error('usage: skewed-holder url lockId ttlMs');
const locker = createLocker(url, { autoExtend: false });
const lock = await locker.lock(lockId, { ttlMs: Number(ttl) });
const state = await locker.inspect(lockId);
process.stdout.write(
  `${JSON.stringify({ token: String(lock.token), wallClock: Date.now(), expiresInMs: state.holders[0]?.expiresInMs ?? -1 })}\n`,
);
await abandon(locker);
process.exit(0);
