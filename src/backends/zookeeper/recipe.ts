/**
 * What the queue recipes (queue.ts: mutex and read-write; semaphore.ts) share: the ticket
 * a contended attempt leaves behind, the grant data, the host interface the backend gives
 * them, and the pipelined "create, then list" step. Requests of one session are answered
 * in order, so a listing sent right after a create already sees it: one round trip, not
 * two. See docs/backends/zookeeper.md, "The algorithm".
 */
import type { AcquireRequest, AcquireResult, LockKind } from '../kit.js';
import { createProtectedNode } from './nodes.js';
import type { LockPaths } from './layout.js';
import type { Listing, ZkSession } from './session.js';
import type { Stat } from './driver.js';

/** What a waiting attempt watches next. */
export type WatchSpec =
  /**
   * The node ahead of ours: woken when it is deleted. `lastBlocker`: at the listing, no other
   * node ahead blocked us, so its deletion alone lets us hold (nothing can queue ahead of a
   * sequential node later).
   */
  | { readonly type: 'node'; readonly path: string; readonly lastBlocker?: boolean }
  /** A folder's children (the leases): woken on a change, done when `ready` says so. */
  | { readonly type: 'children'; readonly path: string; readonly ready: (children: readonly string[]) => boolean };

/** A watch registered for a ticket and not fired yet (so a re-wait does not stack watches). */
export interface ArmedWatch {
  readonly key: string;
  fired: boolean;
  /** It fired because the watched node was deleted (or was already gone). */
  gone: boolean;
  readonly wake: Set<() => void>;
}

/** The queue position a contended attempt leaves behind (the seam's `Ticket`). */
export interface ZkTicket {
  readonly session: ZkSession;
  readonly lockId: string;
  readonly kind: LockKind;
  /** The protected-mode uuid of every node this acquisition creates. */
  readonly uuid: string;
  readonly paths: LockPaths;
  /** Our node in the lock's queue (mutex, read, write). */
  queueNode: string | undefined;
  /** Our node in the gate. */
  gateNode: string | undefined;
  /** The last listing of the lock's queue showed the gate folder. */
  sawGate: boolean;
  /** Semaphore: our lease. */
  leaseNode: string | undefined;
  /** Semaphore: the further leases of a hold of several permits (one lease node per permit). */
  extraLeases: string[];
  /** Semaphore: our token (the czxid of our gate node), once read. */
  token: bigint | undefined;
  /** What the next wait watches. */
  watch: WatchSpec | undefined;
  armed: ArmedWatch | undefined;
  /** Our queue node's stat and watch, read while we wait (see {@link Prefetch}). */
  prefetch: Prefetch | undefined;
}

/**
 * What a grant reads of our node (its czxid, the token) and the watch that tells the holder
 * its node vanished, taken while the attempt waits — so that the hand-off, after the wake-up,
 * costs the one listing Curator's also costs, not a listing and then a read.
 */
export interface Prefetch {
  readonly path: string;
  readonly stat: Promise<Stat | null>;
  /** The watch fired before a grant took the node: the grant reads it again. */
  fired: boolean;
  /** Set by the grant: what the watch does once the node is held. */
  onGone: (() => void) | undefined;
}

/** What a grant carries for extend and release (the seam's grant `Data`). */
export interface ZkGrantData {
  readonly session: ZkSession;
  /** Our nodes, in the order a release deletes them (the gate first, then the queue). */
  readonly nodes: readonly string[];
}

/** What the recipes need from the backend. */
export interface RecipeHost {
  /** One request, bounded by the operation timeout; driver errors become BackendUnavailableError. */
  op<T>(s: ZkSession, what: string, work: Promise<T>): Promise<T>;
  /**
   * Turn the ticket's nodes into a grant: watch `hold` (our nodes, in release order), take
   * the token (`token`, else the czxid of `hold[0]`), start the lease, delete `drop`.
   */
  grant(
    req: AcquireRequest<ZkTicket>,
    t: ZkTicket,
    hold: readonly string[],
    token?: bigint,
    drop?: string,
  ): Promise<AcquireResult<ZkTicket, ZkGrantData>>;
  /** Delete the ticket's nodes (all, or only the gate node). */
  drop(t: ZkTicket, only?: 'gate'): Promise<void>;
  /** A waiting ticket: read and watch its queue node in the background ({@link Prefetch}). */
  prefetch(t: ZkTicket): void;
}

/** One step of a recipe: go on, start over (a node vanished), or wait on a watch. */
export type Step<T> = { readonly go: T } | { readonly again: true } | { readonly wait: WatchSpec };

/** Start the attempt over: one of our nodes vanished while the session lives. */
export const AGAIN = { again: true } as const;

/** A contended attempt: leave the ticket to wait on `watch`, or (tryLock) leave nothing behind. */
export async function contended(
  host: RecipeHost,
  req: AcquireRequest<ZkTicket>,
  t: ZkTicket,
  watch: WatchSpec,
): Promise<AcquireResult<ZkTicket, ZkGrantData>> {
  if (!req.wait) {
    await host.drop(t);
    return { granted: false, contended: { ticket: undefined } };
  }
  t.watch = watch;
  host.prefetch(t);
  return { granted: false, contended: { ticket: t } };
}

/** The name of a node from its path. */
export function nameOf(path: string): string {
  return path.slice(path.lastIndexOf('/') + 1);
}

/** A created node and the listings read right after it (null: the folder does not exist). */
export interface Created {
  readonly path: string;
  /** The listing of the node's parent (it contains the node), then one per `also` path. */
  readonly listings: readonly (Listing | null)[];
}

/**
 * Create our protected node under `parent` and list `parent` and each of `also` in the same
 * round trip. When a listing did not come back with our node in it (a parent had to be
 * created first, or the connection dropped), list again.
 */
export async function createAndList(
  host: RecipeHost,
  t: ZkTicket,
  parent: string,
  name: string,
  data: Buffer,
  also: readonly string[],
  signal: AbortSignal,
): Promise<Created> {
  // The caller gave up (its answer went out at once): an attempt that goes on to its next
  // stage must not leave a new node behind after that, for others to trip over.
  signal.throwIfAborted();
  const s = t.session;
  const created = createProtectedNode(s, parent, name, t.uuid, data);
  const reads = [parent, ...also].map((p) =>
    s.listing(p).then(
      (l) => ({ ok: true as const, l }),
      () => ({ ok: false as const }),
    ),
  );
  const path = await host.op(s, `create under ${parent}`, created);
  const results = await Promise.all(reads);
  const first = results[0];
  if (results.every((r) => r.ok) && first?.ok && first.l?.children.includes(nameOf(path))) {
    return { path, listings: results.map((r) => (r.ok ? r.l : null)) };
  }
  return { path, listings: await listAll(host, s, [parent, ...also]) };
}

/** List each of `paths` in one round trip. */
export function listAll(host: RecipeHost, s: ZkSession, paths: readonly string[]): Promise<(Listing | null)[]> {
  return host.op(s, 'getChildren', Promise.all(paths.map((p) => s.listing(p))));
}
