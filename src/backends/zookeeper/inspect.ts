/**
 * `inspect()`: the holders and waiters of one lock id, read from its nodes. One id is one
 * lock across kinds (docs/backends/zookeeper.md, "One id, one lock"), so the semaphore's
 * leases and the queue are never held at once: while any lease is held, the leases are the
 * holders and everything in the queue waits.
 */
import type { HolderState, LockKind, LockState } from '../kit.js';
import {
  GATE_NAMES,
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

/** Read the state of the lock at `paths`. */
export async function readLockState(host: RecipeHost, s: ZkSession, lockId: string, paths: LockPaths): Promise<LockState> {
  const [baseList, gateList, leaseList] = await host.op(
    s,
    'getChildren',
    Promise.all([paths.base, paths.gate, paths.leases].map((p) => s.children(p))),
  );
  const queue = sortedQueue(baseList ?? [], QUEUE_NAMES);
  const gate = sortedQueue(gateList ?? [], GATE_NAMES);
  // A semaphore that holds the gate and waits for a permit already has its lease: not a holder.
  const waitingLease = uuids(gate.filter((n) => n.lockName === LOCK_NAME));
  const leases = (leaseList ?? []).filter((n) => !waitingLease.has(uuidOf(n) ?? n));
  const holders = leases.length > 0 ? await leaseHolders(host, s, paths.leases, leases) : await queueHolders(host, s, paths, queue, gate);
  const queued = uuids(queue);
  // Semaphores waiting at the gate are queued too (a queue hold's gate node is not counted twice).
  const semaphoreWaiters = gate.filter((n) => n.lockName === LOCK_NAME && !queued.has(uuidOf(n.name) ?? n.name)).length;
  const queueWaiters = queue.length - (leases.length > 0 ? 0 : holders.length);
  const lastToken = holders.reduce<bigint | undefined>((m, h) => (m === undefined || h.token > m ? h.token : m), undefined);
  return { lockId, holders, waiters: queueWaiters + semaphoreWaiters, ...(lastToken !== undefined ? { lastToken } : {}) };
}

/** The protected uuids of `nodes` (a node without one stands for itself). */
function uuids(nodes: readonly QueueNode[]): Set<string> {
  return new Set(nodes.map((n) => uuidOf(n.name) ?? n.name));
}

async function leaseHolders(host: RecipeHost, s: ZkSession, dir: string, names: readonly string[]): Promise<HolderState[]> {
  const got = await host.op(s, 'getData', Promise.all(names.map((n) => s.get(`${dir}/${n}`))));
  const out: HolderState[] = [];
  for (const g of got) {
    if (!g) continue;
    const { ownerId, token } = parseLeaseData(g.data);
    out.push({ ownerId, kind: 'semaphore', token: token ?? g.stat.czxid, count: 1 });
  }
  return out;
}

/** The holding group of the queue; the token of a gated hold is its gate node's czxid. */
async function queueHolders(
  host: RecipeHost,
  s: ZkSession,
  paths: LockPaths,
  queue: readonly QueueNode[],
  gate: readonly QueueNode[],
): Promise<HolderState[]> {
  const group = holdingGroup(queue, READ_NAME);
  const gateOf = (n: QueueNode): QueueNode | undefined => gate.find((g) => uuidOf(g.name) === uuidOf(n.name));
  const reads = group.map((n) => {
    const g = gateOf(n);
    return Promise.all([s.get(`${paths.base}/${n.name}`), g ? s.exists(`${paths.gate}/${g.name}`) : Promise.resolve(null)]);
  });
  const got = await host.op(s, 'getData', Promise.all(reads));
  const out: HolderState[] = [];
  for (const [i, [node, gateStat]] of got.entries()) {
    const n = group[i];
    if (!node || !n) continue;
    out.push({
      ownerId: node.data ? node.data.toString('utf8') : '',
      kind: kindOf(n),
      token: gateStat?.czxid ?? node.stat.czxid,
      count: 1,
    });
  }
  return out;
}

function kindOf(n: QueueNode): LockKind {
  if (n.lockName === READ_NAME) return 'read';
  return n.lockName === LOCK_NAME ? 'mutex' : 'write';
}
