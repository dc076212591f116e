/**
 * The validity arithmetic of a lease, shared by the core and by backends that signal a loss
 * themselves (etcd, ZooKeeper): see docs/guarantees.md, "Validity".
 */

/** Compute the local deadline for a lease of `ttlMs` whose request was sent at `sentAt`. */
export function validityDeadline(sentAt: number, ttlMs: number, driftFactor: number): number {
  return sentAt + ttlMs - (ttlMs * driftFactor + 2);
}

/** How long before `validUntil` the signal aborts: enough to beat a late timer, small against the ttl. */
export function lossGuardMs(ttlMs: number): number {
  return Math.min(1_000, Math.max(5, ttlMs * 0.05));
}
