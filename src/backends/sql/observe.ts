/**
 * Seeing the locks of the SQL backend: a lock's state as `inspect` and `list` show it (who
 * holds, since when, until when on the database's clock; who waits, in queue order), and the
 * keyset paging of `list` (docs/backends/postgres.md, "Listing").
 */
import type { ListPage, ListRequest, WaiterState } from '../../backend.js';
import { InvalidArgumentError, MAX_LOCK_ID_BYTES, type HolderState, type LockState } from '../kit.js';
import { view } from './state.js';
import { big, micros, parseStates, text, type RawState, type Statements } from './statements.js';
import type { SqlResult, Stmt } from './types.js';

/** µs per ms. */
const US = 1000;

/** A lock's state from its rows read at `nowUs`: live holds and live waiters only, as `inspect` shows them. */
export function lockStateOf(lockId: string, nowUs: number, raw: RawState, lastToken: bigint): LockState {
  const v = view(nowUs, raw.holders, raw.queue);
  const holders = v.holders
    .filter((h) => h.expiresUs > nowUs)
    .map((h): HolderState => ({
      ownerId: h.ownerId,
      kind: h.kind,
      token: h.token,
      count: h.count,
      ...(h.weight > 1 ? { weight: h.weight } : {}),
      expiresInMs: Math.round((h.expiresUs - nowUs) / US),
      leaseEndsAt: Math.floor(h.expiresUs / US),
      ...(h.identity === '' ? {} : { identity: h.identity }),
      ...(h.acquiredUs > 0 ? { acquiredAt: Math.floor(h.acquiredUs / US) } : {}),
    }));
  const queue = v.queue.map((w): WaiterState => ({
    ownerId: w.ownerId,
    kind: w.kind,
    fair: w.fair,
    ...(w.identity === '' ? {} : { identity: w.identity }),
    ...(w.sinceUs > 0 ? { since: Math.floor(w.sinceUs / US) } : {}),
  }));
  return { lockId, holders, waiters: queue.length, queue, ...(lastToken > 0n ? { lastToken } : {}) };
}

/** The cursor of a page that ended at `lockId`: the id itself, base64url (ids are arbitrary text). */
export function encodeCursor(lockId: string): string {
  return Buffer.from(lockId, 'utf8').toString('base64url');
}

/**
 * The lock id a cursor of {@link encodeCursor} names. Anything else, or an id outside the
 * listing's prefix (a cursor of another listing), is an `InvalidArgumentError`.
 */
export function decodeCursor(cursor: string, prefix: string): string {
  const lockId = /^[A-Za-z0-9_-]+$/.test(cursor) ? Buffer.from(cursor, 'base64url').toString('utf8') : '';
  const valid =
    lockId !== '' && encodeCursor(lockId) === cursor && Buffer.byteLength(lockId) <= MAX_LOCK_ID_BYTES && lockId.startsWith(prefix);
  if (!valid) throw new InvalidArgumentError('cursor', 'not a cursor of this SQL listing (from another backend or prefix?)');
  return lockId;
}

/** Runs read-only statements in one transaction and one round trip. */
export type ReadRun = (stmts: readonly Stmt[]) => Promise<SqlResult[]>;

/**
 * One page: the ids (byte order, after the cursor, with a live hold or waiter; one more than
 * asked, to know whether a page follows), then the clock, the rows and the tokens of all of
 * them in a second round trip. An id whose rows expired between the two reads is left out.
 */
export async function listPage(run: ReadRun, st: Statements, req: ListRequest): Promise<ListPage> {
  const after = req.cursor === undefined ? '' : decodeCursor(req.cursor, req.prefix);
  const [page] = await run([st.pageIds(req.prefix, after, req.limit + 1)]);
  const ids = (page?.rows ?? []).map((r) => text(r['lock_id']));
  const mine = ids.slice(0, req.limit);
  const last = mine[mine.length - 1];
  const cursor = ids.length > req.limit && last !== undefined ? encodeCursor(last) : undefined;
  if (mine.length === 0) return { locks: [], cursor };
  req.signal.throwIfAborted();
  const [now, states, tokens] = await run([st.now(), st.statesOf(mine), st.tokensOf(mine)]);
  const nowUs = micros(now?.rows[0]?.['now_us']);
  const rows = parseStates(states);
  const lastTokens = new Map((tokens?.rows ?? []).map((r) => [text(r['lock_id']), big(r['token'])]));
  const locks: LockState[] = [];
  for (const id of mine) {
    const s = lockStateOf(id, nowUs, rows.get(id) ?? { holders: [], queue: [] }, lastTokens.get(id) ?? 0n);
    if (s.holders.length > 0 || s.waiters > 0) locks.push(s);
  }
  return { locks, cursor };
}
