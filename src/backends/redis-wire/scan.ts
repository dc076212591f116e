/**
 * Paging over the locks of one or more Redis nodes with `SCAN … MATCH` (never `KEYS`): one
 * bounded batch at a time, so a page costs a few SCAN calls plus one script per lock found,
 * whatever the keyspace holds. The cursor says where to go on: the node (Redlock scans its
 * masters one after another), the SCAN cursor of the batch, its COUNT, and how many keys of
 * that batch earlier pages took already (a batch may find more locks than a page has room
 * for). See docs/backends/redis.md, "Listing".
 */
import { InvalidArgumentError, raceAbort } from '../kit.js';

/** One node's SCAN: `[next cursor, keys]`, as ioredis `scan(cursor, 'MATCH', p, 'COUNT', n)` answers. */
export type Scan = (cursor: string, pattern: string, count: number) => Promise<readonly [string, readonly string[]]>;

/** Where a page starts. */
export interface ScanPosition {
  readonly node: number;
  readonly cursor: string;
  readonly count: number;
  /** Keys of the batch at `cursor` that earlier pages consumed. */
  readonly skip: number;
}

/** SCAN calls one page may make before it returns (shorter) with a cursor. */
const MAX_BATCHES = 32;

/** The position of a cursor string, or the start; a string this module did not write is refused. */
export function readCursor(cursor: string | undefined, nodes: number, limit: number): ScanPosition {
  if (cursor === undefined) return { node: 0, cursor: '0', count: countFor(limit), skip: 0 };
  const m = /^(\d{1,4})\.(\d{1,20})\.(\d{1,5})\.(\d{1,5})$/.exec(cursor);
  const node = Number(m?.[1]);
  const count = Number(m?.[3]);
  if (!m?.[2] || !(node < nodes) || !(count >= 1)) {
    throw new InvalidArgumentError('cursor', 'not a cursor of this backend (it pages by SCAN)');
  }
  return { node, cursor: m[2], count, skip: Number(m[4]) };
}

/** The cursor string of a position. */
export function writeCursor(p: ScanPosition): string {
  return `${p.node}.${p.cursor}.${p.count}.${p.skip}`;
}

/**
 * COUNT for a page of `limit` locks: a held lock has two or three keys (h and t; x with a
 * second holder; more with a queue), one of which matches, so three times the limit fills a
 * page in about one batch.
 */
function countFor(limit: number): number {
  return Math.min(5_000, Math.max(30, 3 * limit));
}

/** A Redis glob pattern matching `text` literally. */
export function globEscape(text: string): string {
  return text.replace(/[*?[\]\\]/g, (c) => `\\${c}`);
}

/**
 * Up to `limit` results from the keys that `scans` find from `from` on: `take(node, keys)`
 * turns a run of keys (in SCAN order, at most the room left) into results, at most one per
 * key. Returns the results and the next position (undefined after the last node's last batch).
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
  for (let batch = 0; pos && items.length < limit && batch < MAX_BATCHES; batch++) {
    signal.throwIfAborted();
    const scan: Scan | undefined = scans[pos.node];
    if (!scan) return { items, next: undefined };
    const [next, found]: readonly [string, readonly string[]] = await raceAbort(scan(pos.cursor, pattern, pos.count), signal);
    const keys = found.slice(pos.skip);
    const room = limit - items.length;
    // SCAN may return a key twice (the table was resized meanwhile): once per page is enough.
    const run: string[] = [];
    for (const k of keys.slice(0, room)) {
      if (!seen.has(k)) run.push(k);
      seen.add(k);
    }
    items.push(...(await take(pos.node, run)));
    if (keys.length > room) pos = { ...pos, skip: pos.skip + room };
    else if (next !== '0') pos = { node: pos.node, cursor: next, count: pos.count, skip: 0 };
    else pos = pos.node + 1 < scans.length ? { node: pos.node + 1, cursor: '0', count: pos.count, skip: 0 } : undefined;
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
