/**
 * Listing the locks of a directory in bounded pages (docs/backends/file.md, "Listing").
 *
 * Order is the state files' names, which are derived from the ids (layout.ts): `h` + a
 * SHA-256 for long ids, then `x` + the hex of short ids, so short ids come in the byte order
 * of their UTF-8. The cursor is the last name a page looked at (a keyset): a page starts
 * after it whatever was added or removed meanwhile, so a lock that exists throughout is
 * seen once, and state files are never deleted, so no cursor goes stale.
 *
 * Each page lists the names of `locks/` (names only) and reads state files from the cursor
 * on, until it has `limit` locks with a holder or a waiter or has read `limit +`
 * {@link IDLE_READS} files: idle ids (kept for their last token) cost reads, never an
 * unbounded page. A short id's name tells whether it matches the prefix before reading it;
 * a hashed one is read and its stored id checked.
 */
import { readdir, readFile } from 'node:fs/promises';
import { join } from 'node:path';
import type { ListPage, ListRequest, LockState } from '../../backend.js';
import { InvalidArgumentError } from '../kit.js';
import { bootId, fileName } from './layout.js';
import { parseState, type FileState } from './state.js';
import { clocksNow, viewOf } from './view.js';

/** Beyond `limit`, at most this many state files a page reads (idle or unreadable ones). */
const IDLE_READS = 1_000;
/** At most this many state files read at once. */
const BATCH = 32;
/** Cursors of this backend start so; the rest is a state file's name. */
const CURSOR_TAG = 'file1.';
/** A state file's name (layout.ts): anything else in `locks/` is not a lock. */
const NAME = /^(?:h[0-9a-f]{64}|x(?:[0-9a-f]{2}){1,100})$/;

/** The cursor that resumes after the state file `name`. */
function cursorAfter(name: string): string {
  return CURSOR_TAG + name;
}

/** The state file name a cursor of this backend resumes after. */
function nameOfCursor(cursor: string): string {
  const name = cursor.startsWith(CURSOR_TAG) ? cursor.slice(CURSOR_TAG.length) : '';
  if (!NAME.test(name))
    throw new InvalidArgumentError('cursor', 'not a cursor of the file backend (pass back the cursor of the previous page)');
  return name;
}

/**
 * The names a page may look at, after `after`, in order: only lock files, and of the short
 * ids only those whose hex starts with the prefix's (exact for a well-formed prefix; a
 * prefix with a lone surrogate is checked on the stored id only).
 */
function candidates(names: readonly string[], prefix: string, after: string | undefined): string[] {
  const bytes = Buffer.from(prefix, 'utf8');
  const wellFormed = bytes.toString('utf8') === prefix;
  const short = `x${bytes.toString('hex')}`;
  const keep = (n: string): boolean => {
    if (!NAME.test(n) || (after !== undefined && n <= after)) return false;
    if (n.startsWith('h') || !wellFormed) return true;
    return n.startsWith(short);
  };
  return names.filter(keep).sort();
}

/** One page of the locks under `directory` (the backend's directory). */
export async function listPage(directory: string, req: ListRequest): Promise<ListPage> {
  req.signal.throwIfAborted();
  const after = req.cursor === undefined ? undefined : nameOfCursor(req.cursor);
  const locksDir = join(directory, 'locks');
  const names = candidates(await readdir(locksDir), req.prefix, after);
  const budget = req.limit + IDLE_READS;
  const locks: LockState[] = [];
  let next = 0;
  while (next < names.length && next < budget && locks.length < req.limit) {
    req.signal.throwIfAborted();
    // No more reads than locks still missing (every file may hold one), at most BATCH at once.
    const batch = names.slice(next, Math.min(next + Math.min(BATCH, req.limit - locks.length), budget));
    const states = await Promise.all(batch.map((n) => readListed(locksDir, n)));
    const clocks = clocksNow();
    for (const s of states) {
      next += 1;
      if (s === undefined || !s.lockId.startsWith(req.prefix)) continue;
      const view = viewOf(s, clocks);
      if (view.holders.length > 0 || view.waiters > 0) locks.push(view);
      if (locks.length === req.limit) break;
    }
  }
  const last = names[next - 1];
  return { locks, cursor: next < names.length && last !== undefined ? cursorAfter(last) : undefined };
}

/**
 * The state in the file `name`, or undefined when it is gone, does not parse, or is not the file
 * of the id it stores (a hand-edited or foreign file): one bad file must not hide the rest
 * of the listing; `inspect()` of its id reports the error.
 */
async function readListed(locksDir: string, name: string): Promise<FileState | undefined> {
  let text: string;
  try {
    text = await readFile(join(locksDir, name), 'utf8');
  } catch (err) {
    if ((err as { code?: unknown }).code === 'ENOENT') return undefined;
    throw err;
  }
  try {
    const s = parseState(text, undefined, bootId());
    return fileName(s.lockId) === name ? s : undefined;
  } catch {
    return undefined;
  }
}
