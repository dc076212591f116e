/**
 * Curator's two safety nets around the nodes of a lock (docs/backends/zookeeper.md, "Layout"):
 *
 * - Protected create: a create whose reply is lost (the connection dropped after the server
 *   applied it) is found again by the uuid in its name instead of being created twice.
 * - Guaranteed delete: a delete that cannot reach the ensemble now is retried in the
 *   background while the session lives. A node left behind would block the lock until the
 *   session ends, which for a live client is never.
 */
import { sleep } from '../kit.js';
import { isConnectionLoss, MODE, RC, ZkError } from './driver.js';
import { parseLeaseData, protectedPrefix, type LockPaths } from './layout.js';
import type { ZkSession } from './session.js';

/** Parent containers can be reaped between our mkdir and create; retry that race this often. */
export const CREATE_ATTEMPTS = 5;
/** Extra rounds for a parent reaped between our mkdirs and create (see {@link reapLockNode}). */
const MAX_REAPED_ROUNDS = 50;

/** What {@link createProtectedNode} needs of a session. */
export type ProtectedCreateSession = Pick<ZkSession, 'create' | 'children' | 'alive' | 'sessionTimeoutMs'>;

/**
 * Create `parent/_c_<uuid>-<name>NNNNNNNNNN` (EPHEMERAL_SEQUENTIAL), creating missing
 * parents (Curator's creatingParentsIfNeeded). When the reply is lost, look for our uuid
 * among the children before creating again (Curator's protected mode). Rejects with the
 * last `ZkError` when it gives up.
 */
export async function createProtectedNode(
  s: ProtectedCreateSession,
  parent: string,
  name: string,
  uuid: string,
  data: Buffer,
): Promise<string> {
  const prefix = protectedPrefix(uuid);
  let lastErr: unknown;
  let reaped = 0;
  for (let attempt = 0; attempt < CREATE_ATTEMPTS; attempt++) {
    try {
      return await s.create(`${parent}/${prefix}${name}`, data, MODE.EPHEMERAL_SEQUENTIAL);
    } catch (err) {
      lastErr = err;
      if (!(err instanceof ZkError)) throw err;
      if (err.rc === RC.NONODE) {
        // Reaped between our mkdirs and create (another client left the lock empty): each
        // such round means someone else got through, so it is progress; bounded all the same.
        if (reaped++ < MAX_REAPED_ROUNDS) attempt -= 1;
        await mkdirs(s, parent);
        continue;
      }
      if (isConnectionLoss(err)) {
        const found = await findProtected(s, parent, prefix);
        if (found) return found;
        if (!s.alive) break;
        continue;
      }
      break;
    }
  }
  throw lastErr;
}

/** Our node among `parent`'s children (by the protected prefix), retrying a lost connection. */
async function findProtected(s: ProtectedCreateSession, parent: string, prefix: string): Promise<string | undefined> {
  const deadline = performance.now() + Math.max(s.sessionTimeoutMs, 1_000);
  while (s.alive && performance.now() < deadline) {
    try {
      const mine = (await s.children(parent)).find((c) => c.startsWith(prefix));
      return mine ? `${parent}/${mine}` : undefined;
    } catch (err) {
      if (!isConnectionLoss(err)) throw err;
      await sleep(100, undefined, { ref: false });
    }
  }
  return undefined;
}

/** Create `path` and its missing parents as persistent nodes. */
async function mkdirs(s: ProtectedCreateSession, path: string): Promise<void> {
  let cur = '';
  for (const seg of path.split('/').filter((x) => x !== '')) {
    cur += `/${seg}`;
    try {
      await s.create(cur, Buffer.alloc(0), MODE.PERSISTENT);
    } catch (err) {
      if (err instanceof ZkError && err.rc === RC.NODEEXISTS) continue;
      throw err;
    }
  }
}

/**
 * Curator's ChildReaper idea, done by the client that leaves: once our nodes of a lock are
 * deleted, delete the lock's node in case that left it empty. The server refuses a node
 * that has children (NOTEMPTY), so a lock in use is never touched, and neither is an id
 * that has the semaphore's `locks`/`leases` folders: whether those exist decides whether a
 * mutex takes the gate (docs/backends/zookeeper.md, "One id, one lock"), so they stay. A
 * create that meets a lock node reaped meanwhile recreates it ({@link createProtectedNode}).
 * Tokens are czxids, global to the ensemble, so a recreated node does not restart them.
 * Best effort, one try: docs/backends/zookeeper.md, "Layout".
 */
export function reapLockNode(s: Pick<ZkSession, 'delete' | 'alive'>, paths: LockPaths): void {
  if (s.alive) void s.delete(paths.base).catch(() => undefined);
}

/**
 * The nodes of `ownerId` in the lock's folders, found by the owner every node carries in its
 * data: what an attempt whose reply was lost left behind with no ticket to name it.
 */
export async function findOwnerNodes(s: Pick<ZkSession, 'children' | 'get'>, paths: LockPaths, ownerId: string): Promise<string[]> {
  const found: string[] = [];
  for (const parent of [paths.base, paths.gate, paths.leases]) {
    for (const child of await s.children(parent)) {
      const node = await s.get(`${parent}/${child}`);
      if (node && parseLeaseData(node.data).ownerId === ownerId) found.push(`${parent}/${child}`);
    }
  }
  return found;
}

/** Longest pause between two background retries of one delete. */
const MAX_RETRY_MS = 5_000;

/** Curator's guaranteed delete, with the background retries owned (and cleared on close). */
export class Deleter {
  readonly #timers = new Set<NodeJS.Timeout>();
  #closed = false;

  /**
   * Delete `path` now; resolves whether it existed. When the ensemble cannot be reached,
   * rejects after scheduling background retries that go on while the session lives.
   */
  async delete(s: ZkSession, path: string): Promise<boolean> {
    try {
      return await s.delete(path);
    } catch (err) {
      this.#retry(s, () => s.delete(path).then(() => undefined), 1);
      throw err;
    }
  }

  /**
   * Delete every node whose name starts with `prefix` under each of `parents` (the nodes of
   * an attempt that failed in flight, found by their protected uuid), in the background.
   */
  sweep(s: ZkSession, parents: readonly string[], prefix: string): void {
    const once = async (): Promise<void> => {
      for (const parent of parents) {
        for (const c of await s.children(parent)) if (c.startsWith(prefix)) await s.delete(`${parent}/${c}`);
      }
    };
    once().catch(() => this.#retry(s, once, 1));
  }

  #retry(s: ZkSession, work: () => Promise<void>, attempt: number): void {
    if (this.#closed || !s.alive) return;
    const timer = setTimeout(
      () => {
        this.#timers.delete(timer);
        if (this.#closed || !s.alive) return;
        work().catch(() => this.#retry(s, work, attempt + 1));
      },
      Math.min(MAX_RETRY_MS, 100 * 2 ** attempt),
    );
    timer.unref();
    this.#timers.add(timer);
  }

  /** Stop every background retry (the session is closing: its nodes go with it). */
  close(): void {
    this.#closed = true;
    for (const t of this.#timers) clearTimeout(t);
    this.#timers.clear();
  }
}
