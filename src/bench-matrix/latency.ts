/**
 * The latency rows of the benchmark matrix, measured as a user of the library feels them:
 * uncontended lock + release on one id, and the hand-off to a waiter that has been idle for
 * a while, every library in ALTERNATING rounds of one run so that machine load hits each
 * alike (docs/benchmarks.md, "What each row measures"). No library gets a shortcut: every
 * waiter is left idle 20–50 ms whether or not it can report that it queued, and the
 * hand-off is timed from the call of `release()`, which is timed too.
 */
import { setTimeout as sleep } from 'node:timers/promises';
import { contenderOf, type BenchClient, type BenchHold, type BenchSource, type Contender } from './client.js';
import { percentiles, type Percentiles } from './stats.js';

/** Settings of the latency rows. */
export interface LatencyOptions {
  /** Uncontended lock + release cycles per library per round. @default 200 */
  readonly cycles?: number;
  /** Measured rounds of the uncontended row (after one unmeasured warm-up round). @default 10 */
  readonly rounds?: number;
  /** Hand-off samples per library (one per round). @default 60 */
  readonly handoffRounds?: number;
  /** Settings of the hand-off row. */
  readonly handoff?: HandoffOptions;
}

/** Hand-off settings. */
export interface HandoffOptions {
  /** The waiter is left idle at least this long after it called `lock()` (ms). @default 20 */
  readonly idleMinMs?: number;
  /** ...and at most this long, drawn at random per sample (ms). @default 50 */
  readonly idleMaxMs?: number;
  /** Stop sampling after this long (a library with 200 ms retries takes ~0.3 s per sample) (ms). @default 60000 */
  readonly budgetMs?: number;
}

/** Result of a hand-off row: from the call of `release()` to the waiter's `lock()` resolving. */
export interface HandoffResult extends Percentiles {
  /** 1: holder and waiter in this process (two clients); 2: the waiter in a second process. */
  readonly processes: 1 | 2;
  /** The idle range the waiter was left in before the release (ms). */
  readonly idleMs: readonly [number, number];
  /** How long the holder's `release()` call took while that waiter waited. */
  readonly release: Percentiles;
}

/**
 * The reference the hand-off row's `release()` is compared with: one plain round trip (Redis:
 * `PING`) from the holder's client, over its own connection, after the same idle as the
 * hand-off sample before it (nobody else touching the server meanwhile).
 */
export interface RoundTripResult {
  /** The first round trip after the idle (what `release()` with a waiter is divided by). */
  readonly idle: Percentiles;
  /** A second round trip at once after it (warm: what the idle costs is `idle` − `warm`). */
  readonly warm: Percentiles;
}

/** Result of the uncontended row. */
export interface UncontendedResult extends Percentiles {
  /** The `release()` part of each cycle alone (one round trip with no waiter). */
  readonly release: Percentiles;
}

/** Everything the latency rows measured for one library. */
export interface LatencyResult {
  readonly uncontended: UncontendedResult;
  /** Holder and waiter in one process. */
  readonly handoff: HandoffResult;
  /** The waiter in a second process (contenders with `remote` only). */
  readonly handoffRemote: HandoffResult | undefined;
  /** One round trip after the same idle (clients with `roundTrip` only). */
  readonly roundTrip: RoundTripResult | undefined;
}

/** Monotonic time in ms; `process.hrtime` is CLOCK_MONOTONIC, the same clock in every process of the machine. */
export const monoMs = (): number => Number(process.hrtime.bigint()) / 1e6;

const unique = (label: string): string => `bench:${label}:${Date.now().toString(36)}:${Math.random().toString(36).slice(2, 8)}`;

/** Rotate the order every round so that no library always runs first. */
function rotated<T>(list: readonly T[], round: number): T[] {
  const k = round % Math.max(1, list.length);
  return [...list.slice(k), ...list.slice(0, k)];
}

/** One library's open clients and samples. */
interface Lane {
  readonly c: Contender;
  readonly one: BenchClient;
  readonly a: BenchClient;
  readonly b: BenchClient;
  readonly remote: BenchClient | undefined;
  readonly lockId: string;
  readonly cycles: number[];
  readonly releases: number[];
  readonly hand: { readonly local: Sample[]; readonly remote: Sample[] };
  readonly trips: { readonly idle: number[]; readonly warm: number[] };
}

interface Sample {
  readonly handoffMs: number;
  readonly releaseMs: number;
  /** How long the waiter was left idle before the release (ms). */
  readonly idleMs: number;
}

/** The idle a waiter is left in, drawn per sample. */
const drawIdle = (o: HandoffOptions): number => {
  const min = o.idleMinMs ?? 20;
  return min + Math.random() * ((o.idleMaxMs ?? 50) - min);
};

async function openLane(c: Contender): Promise<Lane> {
  const [one, a, b] = await Promise.all([c.client(), c.client(), c.client()]);
  const remote = c.remote ? await c.remote() : undefined;
  const lockId = unique('lat');
  // Connect and load scripts / sessions before anything is measured.
  for (const client of [one, a, b, remote]) if (client) await (await client.acquire(`${lockId}:warm`)).release();
  return { c, one, a, b, remote, lockId, cycles: [], releases: [], hand: { local: [], remote: [] }, trips: { idle: [], warm: [] } };
}

/** `cycles` lock + release cycles of one client on one id; recorded unless `warmUp`. */
async function uncontendedRound(lane: Lane, cycles: number, warmUp: boolean): Promise<void> {
  const id = `${lane.lockId}:u`;
  for (let i = 0; i < cycles; i++) {
    const t0 = performance.now();
    const hold = await lane.one.acquire(id);
    const t1 = performance.now();
    await hold.release();
    const t2 = performance.now();
    if (warmUp) continue;
    lane.cycles.push(t2 - t0);
    lane.releases.push(t2 - t1);
  }
}

/**
 * One hand-off: A holds, B calls `lock()` and is left idle 20–50 ms (longer only if it has
 * not even reported queueing by then), A calls `release()` at t0; the sample is from t0 to
 * B's `lock()` resolving (in B's process, on the shared monotonic clock), and the length of
 * A's `release()` call.
 */
async function handoffSample(c: Contender, a: BenchClient, b: BenchClient, lockId: string, o: HandoffOptions): Promise<Sample> {
  const held = await a.acquire(lockId);
  let queued = !c.reportsQueued;
  let onQueued: () => void = () => undefined;
  const queuedNow = new Promise<void>((resolve) => (onQueued = resolve));
  const next = b
    .acquire(lockId, c.reportsQueued ? { onQueued: () => ((queued = true), onQueued()) } : {})
    .then((h): [BenchHold, number] => [h, h.heldAtMs ?? monoMs()]);
  const idleMs = drawIdle(o);
  await sleep(idleMs);
  // (A grant before any queued report would be a broken lock: do not hang on it.)
  if (!queued) await Promise.race([queuedNow, next]);
  const t0 = monoMs();
  await held.release();
  const releaseMs = monoMs() - t0;
  const [got, t1] = await next;
  await got.release();
  return { handoffMs: t1 - t0, releaseMs, idleMs };
}

/**
 * The reference of a hand-off sample: the holder's client `a`, after the same idle `idleMs`
 * (nobody queued, nothing in flight: no library touches the server meanwhile), sends one plain
 * round trip, then a second at once; both are recorded.
 */
async function roundTripSample(a: BenchClient, idleMs: number, into: Lane['trips']): Promise<void> {
  if (!a.roundTrip) return;
  await sleep(idleMs);
  const t0 = monoMs();
  await a.roundTrip();
  const t1 = monoMs();
  await a.roundTrip();
  into.idle.push(t1 - t0);
  into.warm.push(monoMs() - t1);
}

const summary = (samples: readonly Sample[], processes: 1 | 2, o: HandoffOptions): HandoffResult => ({
  ...percentiles(samples.map((s) => s.handoffMs)),
  processes,
  idleMs: [o.idleMinMs ?? 20, o.idleMaxMs ?? 50],
  release: percentiles(samples.map((s) => s.releaseMs)),
});

/**
 * The uncontended and hand-off rows for every contender, in alternating rounds: one
 * unmeasured warm-up round, then `rounds` rounds of `cycles` cycles each, then
 * `handoffRounds` hand-offs each (in one process, and in two for contenders with `remote`).
 */
export async function benchLatencies(
  contenders: readonly Contender[],
  o: LatencyOptions = {},
  progress?: (line: string) => void,
): Promise<Map<string, LatencyResult>> {
  const cycles = o.cycles ?? 200;
  const rounds = o.rounds ?? 10;
  const h = o.handoff ?? {};
  const lanes: Lane[] = [];
  try {
    for (const c of contenders) lanes.push(await openLane(c));
    progress?.('latency: warm-up round');
    for (const lane of lanes) await uncontendedRound(lane, cycles, true);
    for (let r = 0; r < rounds; r++) {
      progress?.(`latency: uncontended round ${r + 1}/${rounds}`);
      for (const lane of rotated(lanes, r)) await uncontendedRound(lane, cycles, false);
    }
    const stopAt = performance.now() + (h.budgetMs ?? 60_000);
    const handoffRounds = o.handoffRounds ?? 60;
    progress?.(`latency: ${handoffRounds} hand-off rounds`);
    for (let r = 0; r < handoffRounds && (r < 3 || performance.now() < stopAt); r++) {
      for (const lane of rotated(lanes, r)) {
        const local = await handoffSample(lane.c, lane.a, lane.b, `${lane.lockId}:h`, h);
        lane.hand.local.push(local);
        if (lane.remote) lane.hand.remote.push(await handoffSample(lane.c, lane.a, lane.remote, `${lane.lockId}:r`, h));
        await roundTripSample(lane.a, local.idleMs, lane.trips);
      }
    }
    return new Map(
      lanes.map((l) => [
        l.c.name,
        {
          uncontended: { ...percentiles(l.cycles), release: percentiles(l.releases) },
          handoff: summary(l.hand.local, 1, h),
          handoffRemote: l.remote ? summary(l.hand.remote, 2, h) : undefined,
          roundTrip: l.trips.idle.length > 0 ? { idle: percentiles(l.trips.idle), warm: percentiles(l.trips.warm) } : undefined,
        },
      ]),
    );
  } finally {
    await Promise.allSettled(lanes.flatMap((l) => [l.one, l.a, l.b, ...(l.remote ? [l.remote] : [])].map((x) => x.close())));
  }
}

/** Uncontended lock + release of one library: a warm-up round, then `rounds` rounds of `cycles`. */
export async function benchUncontended(source: BenchSource, cycles: number, fair = false, rounds = 1): Promise<UncontendedResult> {
  const c = contenderOf(source, fair);
  const r = await benchLatencies([c], { cycles, rounds, handoffRounds: 0 });
  const mine = r.get(c.name);
  if (!mine) throw new Error('no result');
  return mine.uncontended;
}

/** Hand-off latency of one library (in one process): `rounds` samples, see {@link benchLatencies}. */
export async function benchHandoff(source: BenchSource, rounds: number, fair = false, o: HandoffOptions = {}): Promise<HandoffResult> {
  const c = contenderOf(source, fair);
  const r = await benchLatencies([{ ...c, remote: undefined }], { cycles: 0, rounds: 0, handoffRounds: rounds, handoff: o });
  const mine = r.get(c.name);
  if (!mine) throw new Error('no result');
  return mine.handoff;
}
