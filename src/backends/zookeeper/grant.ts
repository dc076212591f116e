/**
 * The hand-off: a won queue position becomes a tracked hold. The grant reads our nodes'
 * czxids (the token, docs/backends/zookeeper.md, "Fencing token") and watches them, so a node
 * deleted under the holder is heard (session-holds.ts; "The session is the lease"). While an
 * attempt waits, its queue node is read ahead ({@link prefetchQueueNode}), so the hand-off
 * after the wake-up costs no round trip of its own.
 */
import { BackendUnavailableError, type AcquireRequest, type AcquireResult, type Grant } from '../kit.js';
import { EVENT } from './driver.js';
import type { Deleter } from './nodes.js';
import type { Prefetch, RecipeHost, ZkGrantData, ZkTicket } from './recipe.js';
import type { SessionHolds, ZkHold } from './session-holds.js';

/** What a grant needs from the backend. */
export interface GrantHost {
  /** The holds of the backend: the grant is tracked there from now. */
  readonly held: SessionHolds;
  readonly deleter: Deleter;
  /** RecipeHost.op: one request, bounded. */
  readonly op: RecipeHost['op'];
}

/** RecipeHost.prefetch: only a plain queue hold (no gate, no semaphore lease) is read ahead. */
export function prefetchQueueNode(t: ZkTicket): void {
  const path = t.queueNode;
  if (!path || t.gateNode || t.leaseNode || t.prefetch?.path === path) return;
  const onEvent = (type: number): void => {
    if (pre.onGone && type === EVENT.DELETED) pre.onGone();
    else pre.fired = true;
  };
  // Requests of one session are answered in order: by the time a later listing says we
  // hold, this read has been answered too.
  const pre: Prefetch = { path, stat: t.session.watchNode(path, onEvent).catch(() => null), fired: false, onGone: undefined };
  t.prefetch = pre;
}

/** RecipeHost.grant: see recipe.ts. */
export async function grantHold(
  host: GrantHost,
  req: AcquireRequest<ZkTicket>,
  t: ZkTicket,
  hold: readonly string[],
  token?: bigint,
  drop?: string,
): Promise<AcquireResult<ZkTicket, ZkGrantData>> {
  const s = t.session;
  const pre = t.prefetch;
  t.prefetch = undefined;
  if (pre && !drop && hold.length === 1 && hold[0] === pre.path) {
    const stat = await pre.stat;
    if (stat && !pre.fired) {
      const held = holdNodes(host.held, req, t, hold, token ?? stat.czxid);
      pre.onGone = () => void (host.held.has(held) && host.held.nodeGone(held, pre.path));
      return { granted: true, grant: held.grant };
    }
  }
  const ref: { held?: ZkHold } = {};
  // One round trip reads our nodes' czxids and watches them, so a node deleted under the
  // holder (an operator, an expired session) does not go unnoticed.
  const watch = (path: string) => (type: number) => {
    const held = ref.held;
    if (type === EVENT.DELETED && held && host.held.has(held)) void host.held.nodeGone(held, path);
  };
  const [stats] = await host.op(
    s,
    'getData',
    Promise.all([Promise.all(hold.map((p) => s.watchNode(p, watch(p)))), drop ? host.deleter.delete(s, drop).catch(() => false) : false]),
  );
  const first = stats[0];
  if (!first || stats.some((st) => st === null)) {
    throw new BackendUnavailableError('zookeeper', `zookeeper: our lock node under ${t.paths.base} vanished at grant`);
  }
  ref.held = holdNodes(host.held, req, t, hold, token ?? first.czxid);
  return { granted: true, grant: ref.held.grant };
}

/** The grant of the ticket's nodes `hold` with `token`, tracked from now; the ticket lets go of them. */
function holdNodes(holds: SessionHolds, req: AcquireRequest<ZkTicket>, t: ZkTicket, hold: readonly string[], token: bigint): ZkHold {
  const s = t.session;
  const grant: Grant<ZkGrantData> = {
    lockId: req.lockId,
    kind: req.kind,
    ownerId: req.ownerId,
    token,
    ttlMs: Math.min(req.ttlMs, s.sessionTimeoutMs),
    reentered: false,
    data: { session: s, nodes: hold },
  };
  const held = holds.add(grant, req.onLost, grant.ttlMs);
  // The ticket no longer owns the nodes: a late cancel must not delete a held lock.
  t.queueNode = t.gateNode = t.leaseNode = undefined;
  t.extraLeases = [];
  t.token = undefined;
  t.watch = undefined;
  return held;
}
