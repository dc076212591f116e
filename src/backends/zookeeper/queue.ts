/**
 * Mutex, read and write holds: Curator's InterProcessMutex and InterProcessReadWriteLock
 * on the lock's node, plus the gate once the id has been used as a semaphore. One attempt
 * of the core's wait loop walks three stages and stops at the first that must wait:
 *
 * 1. queue — our EPHEMERAL_SEQUENTIAL node in `P`; an exclusive hold needs to be first, a
 *    read hold needs no exclusive node ahead. Waiters watch only the node that blocks them.
 * 2. gate — only when `P/locks` exists (a semaphore has used this id): our node in the gate,
 *    first there (a read hold: no exclusive node ahead), and held for the whole hold.
 * 3. drain — holding the gate, wait until `P/leases` is empty. No lease can appear while
 *    we hold the gate: only a gate holder creates one.
 *
 * The token is the czxid of our gate node (gated) or of our queue node (not gated). Why
 * this excludes semaphores and keeps tokens increasing: docs/backends/zookeeper.md,
 * "One id, one lock".
 */
import type { AcquireRequest, AcquireResult } from '../kit.js';
import { CREATE_ATTEMPTS } from './nodes.js';
import {
  GATE_DIR,
  GATE_NAMES,
  QUEUE_NAMES,
  gateNameFor,
  nodeData,
  gateShared,
  predicate,
  queueNameFor,
  queueShared,
  sortedQueue,
} from './layout.js';
import { AGAIN, contended, createAndList, listAll, nameOf, type RecipeHost, type Step, type ZkGrantData, type ZkTicket } from './recipe.js';
import { unavailable } from '../kit.js';
import { asksDelay, orphanMarker } from './delay.js';

/** One attempt at a mutex, read or write hold. */
export async function attemptQueue(
  host: RecipeHost,
  req: AcquireRequest<ZkTicket>,
  t: ZkTicket,
): Promise<AcquireResult<ZkTicket, ZkGrantData>> {
  for (let round = 0; round < CREATE_ATTEMPTS; round++) {
    const queued = await queueStage(host, req, t);
    if ('again' in queued) continue;
    if ('wait' in queued) return contended(host, req, t, queued.wait);
    if (!queued.go.gated) return host.grant(req, t, [queuedNode(t)]);
    const gated = await gateStage(host, req, t);
    if ('again' in gated) continue;
    if ('wait' in gated) return contended(host, req, t, gated.wait);
    return host.grant(req, t, [gated.go, queuedNode(t)]);
  }
  throw unavailable('zookeeper', 'acquire', new Error(`our queue node under ${t.paths.base} kept vanishing`));
}

function queuedNode(t: ZkTicket): string {
  if (!t.queueNode) throw new Error('zookeeper: no queue node at grant');
  return t.queueNode;
}

/**
 * The node we waited on was the last one ahead that blocked us, and it was deleted: we hold
 * now, without listing again (Curator lists; this saves the round trip of every hand-off).
 */
function lastBlockerGone(t: ZkTicket): boolean {
  const w = t.watch;
  const a = t.armed;
  return w?.type === 'node' && w.lastBlocker === true && a !== undefined && a.gone && a.key === `node:${w.path}`;
}

/** Stage 1: first in the lock's queue (or, reading, no exclusive node ahead). */
async function queueStage(host: RecipeHost, req: AcquireRequest<ZkTicket>, t: ZkTicket): Promise<Step<{ gated: boolean }>> {
  const { base } = t.paths;
  if (t.queueNode && lastBlockerGone(t)) return { go: { gated: t.gateNode !== undefined || t.sawGate } };
  let children: readonly string[];
  if (t.queueNode) {
    children = (await listAll(host, t.session, [base]))[0]?.children ?? [];
  } else {
    const made = await createAndList(host, t, base, queueNameFor(req.kind), nodeData(req.ownerId, req.identity), [], req.signal);
    t.queueNode = made.path;
    children = made.listings[0]?.children ?? [];
  }
  t.sawGate = children.includes(GATE_DIR);
  const queue = sortedQueue(children, QUEUE_NAMES);
  const ours = nameOf(t.queueNode);
  const p = predicate(queue, ours, queueShared(req.kind));
  if (!p) {
    // Our node is gone while the session lives (deleted by hand): queue again, as Curator does.
    t.queueNode = undefined;
    return AGAIN;
  }
  if (!p.holds) {
    const rest = queue.filter((n) => n.name !== p.watch);
    // A holder with a lock-delay may leave a marker behind, and one that vanished already
    // left one: then a deletion alone is no hand-off (docs/backends/zookeeper.md, "Lock-delay").
    const delayed = asksDelay(p.watch ?? '') || orphanMarker(children, req.kind) !== undefined;
    const lastBlocker = predicate(rest, ours, queueShared(req.kind))?.holds === true && !delayed;
    return { wait: { type: 'node', path: `${base}/${p.watch ?? ''}`, lastBlocker } };
  }
  // A holder that vanished with a lock-delay left its marker: wait until it goes (delay.ts).
  const marker = orphanMarker(children, req.kind);
  if (marker !== undefined) return { wait: { type: 'node', path: `${base}/${marker}` } };
  // The gate exists once a semaphore used this id; from then on every hold takes it. A hold
  // that saw no gate here was queued before the gate existed (see the docs).
  return { go: { gated: t.gateNode !== undefined || t.sawGate } };
}

/** Stages 2 and 3: hold the gate, then wait until no semaphore lease is left. Goes on with our gate node. */
async function gateStage(host: RecipeHost, req: AcquireRequest<ZkTicket>, t: ZkTicket): Promise<Step<string>> {
  const { gate, leases } = t.paths;
  let listings;
  if (t.gateNode) {
    listings = await listAll(host, t.session, [gate, leases]);
  } else {
    const made = await createAndList(host, t, gate, gateNameFor(req.kind), nodeData(req.ownerId, req.identity), [leases], req.signal);
    t.gateNode = made.path;
    listings = made.listings;
  }
  const [gateList, leaseList] = listings;
  const p = gateList ? predicate(sortedQueue(gateList.children, GATE_NAMES), nameOf(t.gateNode), gateShared(req.kind)) : undefined;
  if (!p) {
    t.gateNode = undefined;
    return AGAIN;
  }
  if (!p.holds) return { wait: { type: 'node', path: `${gate}/${p.watch ?? ''}` } };
  // Curator counts every child of the leases folder; so do we.
  if (leaseList && leaseList.children.length > 0) {
    return { wait: { type: 'children', path: leases, ready: (children) => children.length === 0 } };
  }
  return { go: t.gateNode };
}
