/**
 * Debug logging: `DEBUG=locksmith*` (or `locksmith:acquire`, `locksmith:backend:redis`, …)
 * through the `debug` package, the convention ioredis and most of the ecosystem already
 * use, so one `DEBUG=locksmith*,ioredis*` shows both layers. docs/observability.md,
 * "Logging".
 *
 * Rules for every call site: guard with `if (log.enabled)` so that nothing is formatted
 * when the namespace is off; say what happened, to which lock id, and how long it took;
 * never log a URL (it may carry a password) nor an identity's `meta`.
 */
import createDebug from 'debug';

/** A namespace's logger: `enabled` is read on every call site before formatting anything. */
export interface Log {
  (format: string, ...args: unknown[]): void;
  readonly enabled: boolean;
}

/** Acquisition attempts, waits, wake-ups, grants, timeouts (acquire.ts). */
export const acquireLog: Log = createDebug('locksmith:acquire');
/** Renewals, losses and releases of held leases (lease.ts, registry.ts). */
export const leaseLog: Log = createDebug('locksmith:lease');
/** Listing, watching and breaking locks (locker.ts, observe/). */
export const observeLog: Log = createDebug('locksmith:observe');

const backendLogs = new Map<string, Log>();

/** The namespace of one backend, `locksmith:backend:<name>` (engines log their own round trips here). */
export function backendLog(name: string): Log {
  let log = backendLogs.get(name);
  if (!log) {
    log = createDebug(`locksmith:backend:${name}`);
    backendLogs.set(name, log);
  }
  return log;
}

/** Milliseconds with one decimal, for log lines. */
export const ms = (value: number): string => `${value.toFixed(1)}ms`;
