/**
 * Paging over the locks of one or more Redis nodes with `SCAN … MATCH` (never `KEYS`): one
 * bounded batch at a time, so a page costs a few SCAN calls plus one script per lock found,
 * whatever the keyspace holds. The cursor says where to go on: the node (Redlock scans its
 * masters one after another), the SCAN cursor of the next batch and its COUNT. A page takes
 * every key of each SCAN reply it follows, never part of one: a SCAN cursor sent again can
 * answer another set of keys, in another order (keys written meanwhile, the table resized),
 * so resuming a reply by position skipped keys. See docs/backends/redis.md, "Listing".
 */
import { InvalidArgumentError, raceAbort } from '../kit.js';

/** One node's SCAN: `[next cursor, keys]`, as ioredis `scan(cursor, 'MATCH', p, 'COUNT', n)` answers. */
export type Scan = (cursor: string, pattern: string, count: number) => Promise<readonly [string, readonly string[]]>;

/** Where a page starts. */
export interface ScanPosition {
  readonly node: number;
  readonly cursor: string;
  readonly count: number;
  /**
   * Set when one SCAN step found more keys than a whole page holds (a reply at COUNT 1, a
   * rare long hash chain): the last key taken of that step, whose keys are taken in sorted
   * order, so the next page takes the ones after it.
   */
  readonly after?: string;
}

/** SCAN calls one page may make before it returns (shorter) with a cursor. */
const MAX_BATCHES = 32;

/** The position of a cursor string, or the start; a string this module did not write is refused. */
export function readCursor(cursor: string | undefined, nodes: number, limit: number): ScanPosition {
  if (cursor === undefined) return { node: 0, cursor: '0', count: countFor(limit) };
  // The last field: `0`, or `~` and the base64url of the key to go on after. (A number above
  // 0 came from an older version, which resumed by position: that step is taken again whole.)
  const m = /^(\d{1,4})\.(\d{1,20})\.(\d{1,5})\.(\d{1,5}|~[A-Za-z0-9_-]{1,1400})$/.exec(cursor);
  const node = Number(m?.[1]);
  const count = Number(m?.[3]);
  if (!m?.[2] || !m[4] || !(node < nodes) || !(count >= 1)) {
    throw new InvalidArgumentError('cursor', 'not a cursor of this backend (it pages by SCAN)');
  }
  const after = m[4].startsWith('~') ? Buffer.from(m[4].slice(1), 'base64url').toString() : undefined;
  return { node, cursor: m[2], count, ...(after === undefined ? {} : { after }) };
}

/** The cursor string of a position. */
export function writeCursor(p: ScanPosition): string {
  const last = p.after === undefined ? '0' : `~${Buffer.from(p.after).toString('base64url')}`;
  return `${p.node}.${p.cursor}.${p.count}.${last}`;
}

/**
 * COUNT for a page of `limit` locks: a held lock has two or three keys (h and t; x with a
 * second holder; more with a queue), about one of which matches, so twice the limit fills
 * most of a page in one step without often finding more than it holds (a step that does is
 * sent again with a smaller COUNT).
 */
function countFor(limit: number): number {
  return Math.min(5_000, Math.max(20, 2 * limit));
}

/** A Redis glob pattern matching `text` literally. */
export function globEscape(text: string): string {
  return text.replace(/[*?[\]\\]/g, (c) => `\\${c}`);
}

/** One SCAN step's keys not yet taken by this page, in sorted order after `after` when set. */
function fresh(found: readonly string[], seen: ReadonlySet<string>, after: string | undefined): string[] {
  // SCAN may return a key twice (the table was resized meanwhile): once per page is enough.
  const keys = [...new Set(found)].filter((k) => !seen.has(k));
  return after === undefined ? keys : keys.sort().filter((k) => k > after);
}

/**
 * Up to `limit` results from the keys that `scans` find from `from` on: `take(node, keys)`
 * turns a run of keys (at most the room left) into results, at most one per key. Returns the
 * results and the next position (undefined after the last node's last step). A step that
 * finds more keys than the room left is sent again from the same cursor with a COUNT scaled
 * to the room; at COUNT 1 a page that has results ends before it, and only a page with none
 * takes part of it (sorted, the rest on the next page after the last key taken).
 */
export async function scanPage<T>(
  scans: readonly Scan[],
  from: ScanPosition,
  pattern: string,
  limit: number,
  take: (node: number, keys: readonly string[]) => Promise<readonly T[]>,
  signal: AbortSignal,
): Promise<{ readonly items: T[]; readonly next: ScanPosition | undefined }> {
  const items: T[] = [];
  const seen = new Set<string>();
  let pos: ScanPosition | undefined = from;
  let shrunk: number | undefined; // the COUNT of a step sent again
  for (let batch = 0; pos && items.length < limit && batch < MAX_BATCHES; batch++) {
    signal.throwIfAborted();
    const scan: Scan | undefined = scans[pos.node];
    if (!scan) return { items, next: undefined };
    // Going on after a key: that step was made at COUNT 1, and must cover the same buckets again.
    const count: number = pos.after === undefined ? (shrunk ?? pos.count) : 1;
    const [next, found]: readonly [string, readonly string[]] = await raceAbort(scan(pos.cursor, pattern, count), signal);
    const keys = fresh(found, seen, pos.after);
    const room = limit - items.length;
    if (keys.length > room && count > 1) {
      shrunk = Math.max(1, Math.floor((count * room) / keys.length)); // the same cursor again, fewer buckets
      continue;
    }
    shrunk = undefined;
    if (keys.length > room && items.length > 0) break; // the next page takes this step whole
    const run = keys.length > room ? keys.sort().slice(0, room) : keys;
    for (const k of run) seen.add(k);
    items.push(...(await take(pos.node, run)));
    if (keys.length > room) pos = { node: pos.node, cursor: pos.cursor, count: pos.count, after: run[run.length - 1] ?? '' };
    else if (next !== '0') pos = { node: pos.node, cursor: next, count: pos.count };
    else pos = pos.node + 1 < scans.length ? { node: pos.node + 1, cursor: '0', count: pos.count } : undefined;
  }
  return { items, next: pos };
}

/**
 * The SCAN pattern of the keys ending in `suffix` of every lock whose id may start with
 * `idPrefix`: the tag starts with its first character, or is a SHA-1 tag (`{…`: an id with a
 * brace, whose id only its record knows). The caller filters by the whole prefix.
 */
export function lockPattern(keyPrefix: string, idPrefix: string, suffix: string): string {
  const first = [...idPrefix][0];
  const tag = first === undefined ? '' : `[{${first.replace(/[\]\\^-]/g, (c) => `\\${c}`)}]`;
  return `${globEscape(keyPrefix)}{${tag}*}${suffix}`;
}
