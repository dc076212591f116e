/**
 * Helpers for tests of code that uses locksmith (and for locksmith's own fault tests).
 * Import from `locksmith/testing`; never use in production code.
 */
import { kAbandon, type Locker } from './locker.js';

/**
 * Simulate a crash of the client behind `locker`: renewals stop, nothing is released,
 * waiters are dropped and the backend's connections are closed without cleanup. Held locks
 * then expire on the server by their ttl (or at once where the engine ties them to the
 * connection, like ZooKeeper's ephemeral nodes). The holders' signals do not fire: a
 * crashed process does not hear about anything.
 */
export function abandon(locker: Locker): Promise<void> {
  return locker[kAbandon]();
}
