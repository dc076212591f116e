/**
 * Seeing every lock (`list`) and breaking one on purpose (`forceRelease`). Every lock id is
 * one node directly under the chroot (layout.ts), so one page lists the chroot's children,
 * sorts their names and reads the locks after the cursor; see docs/backends/zookeeper.md,
 * "Listing" and "Breaking a lock".
 */
import type { ListPage, ListRequest } from '../../backend.js';
import { InvalidArgumentError } from '../kit.js';
import { readLock } from './inspect.js';
import { decodeLockId, encodeLockId, lockPaths } from './layout.js';
import type { RecipeHost } from './recipe.js';
import type { ZkSession } from './session.js';

/**
 * At most this many locks of a page are read at once. All 1,000 at once kept ~2,000
 * requests and their replies in memory together: more garbage to collect for no gain in
 * time, since the one session answers them in order anyway (docs/backends/zookeeper.md,
 * "Listing").
 */
const READ_WINDOW = 128;

/** A cursor is this, then the encoded name of the last lock node the page looked at. */
const CURSOR_TAG = 'zk1:';

/** The node name a cursor resumes after; InvalidArgumentError for one this backend did not give. */
export function parseCursor(cursor: string | undefined): string | undefined {
  if (cursor === undefined) return undefined;
  const name = cursor.startsWith(CURSOR_TAG) ? cursor.slice(CURSOR_TAG.length) : '';
  if (name === '' || lockIdOf(name) === undefined) {
    throw new InvalidArgumentError('cursor', 'not a cursor of the zookeeper backend (give the cursor of the previous page, or none)');
  }
  return name;
}

/** The lock id a child of the root stands for; undefined for a name locksmith never writes. */
export function lockIdOf(name: string): string | undefined {
  const id = decodeLockId(name);
  // Only the canonical encoding of an id is a lock of ours (it also skips `/zookeeper`).
  return id !== '' && encodeLockId(id) === name ? id : undefined;
}

/**
 * One page: the root's child names (one getChildren), sorted, those after the cursor whose
 * id starts with `prefix`, at most `limit` of them read, {@link READ_WINDOW} at a time
 * (`readLock`: one listing of the lock's node, then its holder and waiter nodes). Idle lock nodes (kept by a crashed
 * holder, or the semaphore folders) are read but not listed, so a page can be shorter than
 * `limit` while more follow.
 */
export async function listLocks(host: RecipeHost, s: ZkSession, chroot: string, req: ListRequest): Promise<ListPage> {
  const after = parseCursor(req.cursor);
  const names = await host.op(s, 'getChildren', s.children(chroot === '' ? '/' : chroot));
  req.signal.throwIfAborted();
  names.sort();
  // Bytes of the prefix as they appear in an encoded name (the rare whole-name escapes are
  // caught by the check on the decoded id below).
  const raw = req.prefix === '' ? '' : encodeLockId(`${req.prefix}\u0001`).slice(0, -3);
  const picked: { name: string; lockId: string }[] = [];
  let more = false;
  for (const name of names) {
    if (after !== undefined && name <= after) continue;
    if (!name.startsWith(raw) && !name.startsWith('%')) continue;
    const lockId = lockIdOf(name);
    if (lockId === undefined || !lockId.startsWith(req.prefix)) continue;
    if (picked.length === req.limit) {
      more = true;
      break;
    }
    picked.push({ name, lockId });
  }
  const read = await inWindow(picked, READ_WINDOW, (p) => readLock(host, s, p.lockId, lockPaths(chroot, p.lockId)));
  req.signal.throwIfAborted();
  const locks = read.map((r) => r.state).filter((l) => l.holders.length > 0 || l.waiters > 0);
  const last = picked.at(-1);
  return { locks, cursor: more && last ? `${CURSOR_TAG}${last.name}` : undefined };
}

/**
 * End every hold of the lock: delete each holder's nodes (its queue node and gate node, or
 * its lease), as an expired session would. No version check is needed: a sequential node's
 * name is never reused and its data never changes, so a delete by name removes the node that
 * was read or nothing. A hold that ended meanwhile (its node gone: NONODE) is not counted,
 * and a waiter granted meanwhile holds other nodes, so it is left alone. Each delete is a
 * write, which raises the ensemble's zxid: every later grant creates its node after it, so
 * its czxid (the token) is above the broken holders' ones.
 */
export async function breakLock(host: RecipeHost, s: ZkSession, chroot: string, lockId: string): Promise<number> {
  const { holdNodes } = await readLock(host, s, lockId, lockPaths(chroot, lockId));
  const deleted = await host.op(s, 'delete', Promise.all(holdNodes.map((nodes) => Promise.all(nodes.map((n) => s.delete(n))))));
  return deleted.filter((d) => d[0] === true).length;
}

/** `work` over `items`, at most `window` at once, results in the order of `items`. */
async function inWindow<T, R>(items: readonly T[], window: number, work: (item: T) => Promise<R>): Promise<R[]> {
  const out = new Array<R>(items.length);
  let next = 0;
  const lane = async (): Promise<void> => {
    while (next < items.length) {
      const i = next++;
      out[i] = await work(items[i] as T);
    }
  };
  await Promise.all(Array.from({ length: Math.min(window, items.length) }, lane));
  return out;
}
