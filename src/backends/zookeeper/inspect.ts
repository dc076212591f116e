/**
 * `inspect()`, `list()` and `forceRelease()` read a lock from its nodes. One id is one lock
 * across kinds (docs/backends/zookeeper.md, "One id, one lock"), so the semaphore's leases
 * and the queue are never held at once: while any lease is held, the leases are the holders
 * and everything in the queue waits. Who a holder or waiter is comes from its node's data
 * ("Node data"), when it joined from the node's ctime (the server's clock).
 */
import type { WaiterState } from '../../backend.js';
import type { HolderState, LockKind, LockState } from '../kit.js';
import type { Stat } from './driver.js';
import {
  GATE_DIR,
  GATE_NAMES,
  LEASES_DIR,
  LOCK_NAME,
  QUEUE_NAMES,
  READ_NAME,
  holdingGroup,
  parseLeaseData,
  sortedQueue,
  uuidOf,
  type LockPaths,
  type QueueNode,
} from './layout.js';
import type { RecipeHost } from './recipe.js';
import type { ZkSession } from './session.js';

/** A lock as read, with the nodes of each hold (what `forceRelease` deletes). */
export interface LockRead {
  readonly state: LockState;
  /** Per holder (same order as `state.holders`): its own node first, then its gate node if any. */
  readonly holdNodes: readonly (readonly string[])[];
}

type Node = { stat: Stat; data: Buffer | null } | null;

/** Read the state of the lock at `paths`. */
export async function readLockState(host: RecipeHost, s: ZkSession, lockId: string, paths: LockPaths): Promise<LockState> {
  return (await readLock(host, s, lockId, paths)).state;
}

/**
 * Read the lock at `paths`: one listing of its node, one of the semaphore folders only when
 * the listing shows them, then the data of every holder and waiter node, all at once.
 */
export async function readLock(host: RecipeHost, s: ZkSession, lockId: string, paths: LockPaths): Promise<LockRead> {
  const base = await host.op(s, 'getChildren', s.listing(paths.base));
  if (!base) return { state: { lockId, holders: [], waiters: 0, queue: [] }, holdNodes: [] };
  const folder = (dir: string, path: string) => (base.children.includes(dir) ? s.listing(path) : Promise.resolve(null));
  // Most locks have neither folder: then no request, and no bounded wait for none (a listing reads thousands).
  const [gateList, leaseList] =
    base.children.includes(GATE_DIR) || base.children.includes(LEASES_DIR)
      ? await host.op(s, 'getChildren', Promise.all([folder(GATE_DIR, paths.gate), folder(LEASES_DIR, paths.leases)]))
      : [null, null];
  const queue = sortedQueue(base.children, QUEUE_NAMES);
  const gate = sortedQueue(gateList?.children ?? [], GATE_NAMES);
  // A semaphore that holds the gate and waits for a permit already has its lease: not a holder.
  const waitingLease = uuids(gate.filter((n) => n.lockName === LOCK_NAME));
  const leases = (leaseList?.children ?? []).filter((n) => !waitingLease.has(uuidOf(n) ?? n));
  const group = leases.length > 0 ? [] : holdingGroup(queue, READ_NAME);
  const holdNodes: string[][] = leases.length > 0 ? leaseHolds(paths, leases) : group.map((n) => gatedNodes(paths, n, gate));
  const queued = uuids(queue);
  // Semaphores waiting at the gate wait too (a queue hold's gate node is not counted twice).
  const waiting = [
    ...queue.filter((n) => !group.includes(n)).map((n) => ({ path: `${paths.base}/${n.name}`, kind: kindOf(n) })),
    ...gate
      .filter((n) => n.lockName === LOCK_NAME && !queued.has(uuidOf(n.name) ?? n.name))
      .map((n) => ({ path: `${paths.gate}/${n.name}`, kind: 'semaphore' as const })),
  ];
  const [held, queuedNodes] = await host.op(
    s,
    'getData',
    Promise.all([
      Promise.all(holdNodes.map((nodes) => Promise.all(nodes.map((p) => s.get(p))))),
      Promise.all(waiting.map((w) => s.get(w.path))),
    ]),
  );
  const holders: HolderState[] = [];
  const kept: string[][] = [];
  for (const [i, [node, gateNode]] of held.entries()) {
    const n = group[i];
    const weight = leases.length > 0 ? (holdNodes[i]?.length ?? 1) : 1;
    const h = node ? holderOf(node, n ? kindOf(n) : 'semaphore', leases.length > 0 ? null : (gateNode ?? null), weight) : undefined;
    if (h) holders.push(h);
    if (h && holdNodes[i]) kept.push(holdNodes[i]);
  }
  const queueState = waitersOf(waiting, queuedNodes);
  const lastToken = lastTokenOf(holders, queueState.length, [base.stat, gateList?.stat, leaseList?.stat]);
  const state = { lockId, holders, waiters: queueState.length, queue: queueState, ...(lastToken !== undefined ? { lastToken } : {}) };
  return { state, holdNodes: kept };
}

/** The semaphore's holds: the lease nodes of one acquisition (one protected uuid) are one hold of as many permits. */
function leaseHolds(paths: LockPaths, leases: readonly string[]): string[][] {
  const byUuid = new Map<string, string[]>();
  for (const n of leases) {
    const key = uuidOf(n) ?? n;
    const nodes = byUuid.get(key) ?? [];
    nodes.push(`${paths.leases}/${n}`);
    byUuid.set(key, nodes);
  }
  return [...byUuid.values()];
}

/** A queue hold's nodes: its queue node, then its gate node when it took one. */
function gatedNodes(paths: LockPaths, n: QueueNode, gate: readonly QueueNode[]): string[] {
  const g = gate.find((x) => uuidOf(x.name) === uuidOf(n.name));
  return g ? [`${paths.base}/${n.name}`, `${paths.gate}/${g.name}`] : [`${paths.base}/${n.name}`];
}

/** A hold from its node; the token of a gated hold is its gate node's czxid, of a lease the one it carries. */
function holderOf(node: NonNullable<Node>, kind: LockKind, gateNode: Node, weight: number): HolderState {
  const { ownerId, token, identity } = parseLeaseData(node.data);
  return {
    ownerId,
    kind,
    token: kind === 'semaphore' ? (token ?? node.stat.czxid) : (gateNode?.stat.czxid ?? node.stat.czxid),
    count: 1,
    ...(weight > 1 ? { weight } : {}),
    ...(identity !== undefined ? { identity } : {}),
    acquiredAt: node.stat.ctime,
  };
}

/** The waiters that were still there when read, in the order they queued (czxid: global creation order). */
function waitersOf(waiting: readonly { path: string; kind: LockKind }[], nodes: readonly Node[]): WaiterState[] {
  const out: { w: WaiterState; czxid: bigint }[] = [];
  for (const [i, node] of nodes.entries()) {
    const kind = waiting[i]?.kind;
    if (!node || !kind) continue;
    const { ownerId, identity } = parseLeaseData(node.data);
    const w: WaiterState = { ownerId, kind, fair: true, ...(identity !== undefined ? { identity } : {}), since: node.stat.ctime };
    out.push({ w, czxid: node.stat.czxid });
  }
  return out.sort((a, b) => (a.czxid < b.czxid ? -1 : 1)).map((x) => x.w);
}

/**
 * The largest holder token; with no holder and no waiter, the zxid of the last change of
 * the lock's children (a release, a `forceRelease`), which every later grant's czxid is
 * above. With waiters and no holder (a hand-off in flight) the next token is a waiter's
 * czxid, older than that change, so nothing is claimed. docs/backends/zookeeper.md, "Breaking a lock".
 */
function lastTokenOf(holders: readonly HolderState[], waiters: number, stats: readonly (Stat | undefined)[]): bigint | undefined {
  if (holders.length > 0) return holders.reduce((m, h) => (h.token > m ? h.token : m), 0n);
  if (waiters > 0) return undefined;
  return stats.reduce<bigint>((m, st) => (st && st.pzxid > m ? st.pzxid : m), 0n);
}

/** The protected uuids of `nodes` (a node without one stands for itself). */
function uuids(nodes: readonly QueueNode[]): Set<string> {
  return new Set(nodes.map((n) => uuidOf(n.name) ?? n.name));
}

function kindOf(n: QueueNode): LockKind {
  if (n.lockName === READ_NAME) return 'read';
  return n.lockName === LOCK_NAME ? 'mutex' : 'write';
}
