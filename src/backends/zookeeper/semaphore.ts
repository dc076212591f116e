/**
 * Semaphores: Curator's InterProcessSemaphoreV2 (the gate `P/locks`, then a lease in
 * `P/leases`, held once there are at most `permits` leases; then the gate is let go), so a
 * Curator semaphore on the same path counts the same leases. One more check than Curator
 * makes, because a lock id is one lock across kinds: holding the gate, a semaphore waits
 * for every node of the lock's queue older than the gate itself, since those may hold
 * without ever taking the gate (docs/backends/zookeeper.md, "One id, one lock").
 *
 * The token is the czxid of our gate node, read before the lease is created and written
 * into the lease (the gate node is gone once the permit is held).
 */
import { PermitsMismatchError, unavailable, type AcquireRequest, type AcquireResult } from '../kit.js';
import { MODE } from './driver.js';
import { CREATE_ATTEMPTS } from './nodes.js';
import {
  GATE_NAMES,
  LOCK_NAME,
  QUEUE_NAMES,
  leaseData,
  protectedPrefix,
  LEASE_NAME,
  nodeData,
  parseLeaseData,
  predicate,
  sortedQueue,
} from './layout.js';
import { AGAIN, contended, createAndList, listAll, nameOf, type RecipeHost, type Step, type ZkGrantData, type ZkTicket } from './recipe.js';

/** One attempt at a semaphore permit. */
export async function attemptSemaphore(
  host: RecipeHost,
  req: AcquireRequest<ZkTicket>,
  t: ZkTicket,
): Promise<AcquireResult<ZkTicket, ZkGrantData>> {
  for (let round = 0; round < CREATE_ATTEMPTS; round++) {
    if (!t.leaseNode) {
      const gate = await gateStage(host, req, t);
      if ('again' in gate) continue;
      if ('wait' in gate) return contended(host, req, t, gate.wait);
    }
    const lease = await leaseStage(host, req, t);
    if ('again' in lease) continue;
    if ('wait' in lease) return contended(host, req, t, lease.wait);
    const gateNode = t.gateNode;
    return host.grant(req, t, [lease.go, ...t.extraLeases], t.token, gateNode);
  }
  throw unavailable('zookeeper', 'acquire', new Error(`our semaphore node under ${t.paths.base} kept vanishing`));
}

/** Hold the gate, with no older node of the lock's queue left; then learn our token. */
async function gateStage(host: RecipeHost, req: AcquireRequest<ZkTicket>, t: ZkTicket): Promise<Step<true>> {
  const { gate, base } = t.paths;
  let listings;
  if (t.gateNode) {
    listings = await listAll(host, t.session, [gate, base]);
  } else {
    const made = await createAndList(host, t, gate, LOCK_NAME, nodeData(req.ownerId, req.identity), [base], req.signal);
    t.gateNode = made.path;
    listings = made.listings;
  }
  const [gateList, baseList] = listings;
  const p = gateList ? predicate(sortedQueue(gateList.children, GATE_NAMES), nameOf(t.gateNode)) : undefined;
  if (!p) {
    t.gateNode = undefined;
    return AGAIN;
  }
  if (!p.holds) return { wait: { type: 'node', path: `${gate}/${p.watch ?? ''}` } };
  const old = await oldestAhead(host, t, t.gateNode, gateList?.stat.czxid ?? 0n, baseList?.children ?? []);
  if (!old) {
    t.gateNode = undefined;
    return AGAIN;
  }
  if (old.blocker) {
    // It may hold without the gate: let the gate go (it may need it) and wait for it to leave.
    await host.drop(t, 'gate');
    return { wait: { type: 'node', path: old.blocker } };
  }
  t.token = old.token;
  return { go: true };
}

/**
 * Our token (the czxid of our gate node), and the oldest node of the lock's queue if it is
 * older than the gate folder (then it may hold without the gate). Sequence order is creation
 * order, so only the oldest node needs a look. Undefined when our gate node is gone.
 */
async function oldestAhead(
  host: RecipeHost,
  t: ZkTicket,
  gateNode: string,
  gateCzxid: bigint,
  baseChildren: readonly string[],
): Promise<{ token: bigint; blocker: string | undefined } | undefined> {
  const s = t.session;
  const { base } = t.paths;
  let children = baseChildren;
  for (let look = 0; ; look++) {
    const oldest = sortedQueue(children, QUEUE_NAMES)[0];
    const path = oldest ? `${base}/${oldest.name}` : undefined;
    const [ours, first] = await host.op(s, 'exists', Promise.all([s.exists(gateNode), path ? s.exists(path) : Promise.resolve(null)]));
    if (!ours) return undefined;
    if (!path || (first && first.czxid > gateCzxid)) return { token: ours.czxid, blocker: undefined };
    // A node that left between the listing and its stat: look again (the next may be old too);
    // after many looks, wait on the gone node, which wakes at once.
    if (first || look >= 20) return { token: ours.czxid, blocker: path };
    children = (await listAll(host, s, [base]))[0]?.children ?? [];
  }
}

/** Holding the gate: add our lease, and hold a permit once there are at most `permits` leases. */
async function leaseStage(host: RecipeHost, req: AcquireRequest<ZkTicket>, t: ZkTicket): Promise<Step<string>> {
  const { leases } = t.paths;
  let children: readonly string[];
  if (t.leaseNode) {
    children = (await listAll(host, t.session, [leases]))[0]?.children ?? [];
  } else {
    const data = leaseData(req.ownerId, tokenOf(t), req.identity, req.permits);
    const made = await createAndList(host, t, leases, LEASE_NAME, data, [], req.signal);
    t.leaseNode = made.path;
    children = made.listings[0]?.children ?? [];
    await checkSize(host, req, t, children);
    if ((req.weight ?? 1) > 1) children = await addLeases(host, req, t, data);
  }
  if (!children.includes(nameOf(t.leaseNode))) {
    t.leaseNode = undefined;
    return AGAIN;
  }
  if (!t.extraLeases.every((p) => children.includes(nameOf(p)))) {
    // A further lease of ours is gone (an operator): start over, from the gate.
    await host.drop(t);
    return AGAIN;
  }
  // Curator counts every child of the leases folder (ours included, one per permit); so do we.
  if (children.length <= req.permits) return { go: t.leaseNode };
  const permits = req.permits;
  return { wait: { type: 'children', path: leases, ready: (c) => c.length <= permits } };
}

/**
 * Holding the gate (nobody else adds a lease meanwhile): a lease of another size refuses
 * ours with `PermitsMismatchError`, after our nodes are deleted. One lease is read: every
 * lease of a locksmith semaphore was checked the same way (Curator's carry no size).
 */
async function checkSize(host: RecipeHost, req: AcquireRequest<ZkTicket>, t: ZkTicket, children: readonly string[]): Promise<void> {
  const mine = t.leaseNode === undefined ? undefined : nameOf(t.leaseNode);
  const other = children.find((c) => c !== mine);
  if (other === undefined) return;
  const node = await host.op(t.session, 'getData', t.session.get(`${t.paths.leases}/${other}`));
  const held = node ? parseLeaseData(node.data).permits : undefined;
  if (held === undefined || held === req.permits) return;
  await host.drop(t);
  throw new PermitsMismatchError(req.lockId, req.permits, held);
}

/**
 * A hold of n permits is n lease nodes, as Curator's `acquire(qty)` makes them while it holds
 * the gate: the other n − 1, with the same protected uuid (a cancel's sweep finds them).
 * Returns the leases folder's children after them.
 */
async function addLeases(host: RecipeHost, req: AcquireRequest<ZkTicket>, t: ZkTicket, data: Buffer): Promise<readonly string[]> {
  const s = t.session;
  const path = `${t.paths.leases}/${protectedPrefix(t.uuid)}${LEASE_NAME}`;
  for (let i = 1; i < (req.weight ?? 1); i++) {
    req.signal.throwIfAborted();
    t.extraLeases.push(await host.op(s, 'create', s.create(path, data, MODE.EPHEMERAL_SEQUENTIAL)));
  }
  return (await listAll(host, s, [t.paths.leases]))[0]?.children ?? [];
}

function tokenOf(t: ZkTicket): bigint {
  if (t.token === undefined) throw new Error('zookeeper: semaphore token not read before the lease');
  return t.token;
}
