/**
 * Helpers for tests of code that uses locksmith (and for locksmith's own fault tests):
 * {@link abandon} (a client crash), {@link startFaultProxy} (a network partition between one
 * client and its engine) and {@link startFencedStore} (a fenced resource behind a socket that
 * records what it accepted). See docs/testing.md. Import from `locksmith-dlm/testing`; never use
 * in production code.
 */
import { kAbandon, type Locker } from './locker.js';

export { startFaultProxy, type FaultMode, type FaultProxy, type FaultProxyOptions } from './testing/fault-proxy.js';
export {
  connectFencedStore,
  startFencedStore,
  type FenceMode,
  type FencedStore,
  type FencedStoreClient,
  type FencedStoreOptions,
  type StoreEvent,
} from './testing/fenced-store.js';

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
