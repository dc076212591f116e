/**
 * The fair lock's one-shot tryLock: fail at once if the main row has a
 * cell; else enqueue and, while first, try. It never leaves anything behind when it fails.
 * See docs/backends/cassandra.md, "The fair algorithm".
 */
import { sleep } from '../kit.js';
import type { FairSteps, Req, Result } from './fair-steps.js';
import { surelyAlive } from './tables.js';
import type { Candidate, FairTicket } from './types.js';

const FAILED: Result = { granted: false, contended: { ticket: undefined } };

/** One `tryLock` (docs/backends/cassandra.md, "The fair algorithm", `wait: false`), one call. */
export async function tryLockOnce(steps: FairSteps, req: Req): Promise<Result> {
  const { lockId, signal } = req;
  const { tables, rows } = steps;
  const counter = await tables.counter(lockId, signal);
  const s = rows.shardOf(counter);
  if ((await rows.main(lockId, s, signal)).length > 0) return FAILED;
  const t = steps.ticket(req, s);
  await steps.writeEntry(req, t, s);
  let wrote = false;
  try {
    const [ahead, sentAt] = await Promise.all([rows.ahead(lockId, s, t.entry, signal), steps.writeCell(req, s, null, t.ttlSec)]);
    wrote = true;
    if (ahead.length === 0) {
      const got =
        rows.shardOf(counter + 1n) !== s
          ? await steps.crossShard(req, t, counter, sentAt)
          : await tryAsFirst(steps, req, counter, t, sentAt);
      if (got.granted) return got;
    }
  } catch (err) {
    void forget(steps, req, s, t.entry, true);
    throw err;
  }
  await forget(steps, req, s, t.entry, wrote);
  return FAILED;
}

/**
 * tryLock's step 4 for the first in line: take the token, then look until alone. Other
 * cells beside ours are racers that are not first: they leave (theorem 3), so the first
 * keeps trying while it stays first and its cell surely lives, not a fixed number of times.
 */
async function tryAsFirst(steps: FairSteps, req: Req, counter: bigint, t: FairTicket, sentAt: number): Promise<Result> {
  const { lockId, ownerId, signal } = req;
  const { tables, rows } = steps;
  const s = rows.shardOf(counter);
  const token = await firstToken(steps, req, counter, t, sentAt);
  if (token === undefined) return FAILED;
  const cand: Candidate = { shard: s, token, sentAt, ttlSec: t.ttlSec, acquiredMs: 0n };
  for (let round = 0; surelyAlive(cand.sentAt, cand.ttlSec); round++) {
    // The first look bets on being alone and marks our cell with it.
    const [cells, markedAt] = await Promise.all([
      rows.main(lockId, s, signal),
      round === 0 ? steps.writeCell(req, s, cand, t.ttlSec) : undefined,
    ]);
    if (markedAt !== undefined) cand.sentAt = markedAt;
    if (!cells.some((c) => c.owner === ownerId)) return FAILED;
    if (cells.length === 1) {
      if (round > 0) cand.sentAt = await steps.writeCell(req, s, cand, t.ttlSec);
      return steps.grant(req, t, cand);
    }
    if (round === 0) await tables.unmark(lockId, s, ownerId, signal);
    if ((await rows.ahead(lockId, s, t.entry, signal)).length > 0) return FAILED;
    await sleep(2 + Math.random() * 8, signal);
  }
  return FAILED;
}

/**
 * The first in line's token. Racers that believed themselves first too (their look came
 * before our entry was visible) may win CASes before ours; while we stay first and our cell
 * surely lives, go on from the counter's current value within the shard.
 */
async function firstToken(steps: FairSteps, req: Req, counter: bigint, t: FairTicket, sentAt: number): Promise<bigint | undefined> {
  const { lockId, signal } = req;
  const { tables, rows } = steps;
  const s = rows.shardOf(counter);
  let seen = counter;
  while (surelyAlive(sentAt, t.ttlSec)) {
    const token = await rows.takeToken(lockId, seen, signal);
    if (token !== undefined) return token;
    if ((await rows.ahead(lockId, s, t.entry, signal)).length > 0) return undefined;
    seen = await tables.counter(lockId, signal);
    if (rows.shardOf(seen) !== s || rows.shardOf(seen + 1n) !== s) return undefined;
  }
  return undefined;
}

/** A failed tryLock takes its entry (and cell) back. */
async function forget(steps: FairSteps, req: Req, s: bigint, entry: string, cell: boolean): Promise<void> {
  await Promise.allSettled([
    steps.tables.deleteQueue(req.lockId, s, entry),
    cell ? steps.tables.deleteMain(req.lockId, s, req.ownerId) : undefined,
  ]);
}
