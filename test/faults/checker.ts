/**
 * The checker: reads the fenced store's history (its own serial order) and counts what went
 * wrong. Nothing here trusts a worker's clock; workers only add markers (begin, end, and after
 * the end whether their lease was still valid) and the runner adds fault notes.
 *
 * - stale writes / reads accepted: an accepted operation whose token is older than a token
 *   the resource had already seen (the write of a holder whose lock had passed on);
 * - overlapping accepted critical sections: two sections whose accepted operations interleave
 *   (a data race at the resource, whatever the lock said);
 * - double grants: two sections that overlap in the store's order while both holders' leases
 *   were still valid after their end (the lock's own promise broken); sound because validity
 *   is checked after the store recorded the end, and a holder's deadline only moves forward;
 * - lost updates: acknowledged increments missing from the final value;
 * - recovery: from a fault's heal (a crashed client's kill) to the next section begun; after a
 *   kill, to the moment that section's lock was granted, as its worker read the wall clock
 *   (see {@link recoveries});
 * - unhandled rejections in workers, workers stuck after the stop (liveness); and a timeline
 *   of lock ownership per time bucket.
 */
import type { StoreEvent } from '../../src/testing.js';

/** The checker's figures for one run. */
export interface Figures {
  readonly acceptedWrites: number;
  readonly rejected: number;
  readonly final: number;
  readonly lostUpdates: number;
  readonly staleWrites: number;
  readonly staleReads: number;
  readonly overlappingSections: number;
  readonly doubleGrants: number;
  readonly sections: number;
  readonly faults: number;
  /** ms from each heal to the next section begun by any client. */
  readonly recoveriesMs: readonly number[];
  readonly unhandled: number;
  readonly acquireFailures: number;
  /** Workers that had not finished a minute after the stop, each with its last step. */
  readonly stuck: readonly string[];
  readonly timeline: string;
}

interface Section {
  readonly key: string;
  readonly client: string;
  readonly begin: number;
  end: number;
  valid: boolean;
  firstOk: number;
  lastOk: number;
}

/** Sections from begin/end markers; a killed client's open section ends at its kill note. */
function sectionsOf(events: readonly StoreEvent[]): Section[] {
  const open = new Map<string, Section>();
  const all: Section[] = [];
  for (const e of events) {
    const key = `${e.client}#${e.token ?? ''}`;
    if (e.op === 'begin') {
      const s: Section = { key, client: e.client, begin: e.seq, end: Number.POSITIVE_INFINITY, valid: false, firstOk: -1, lastOk: -1 };
      open.set(e.client, s);
      all.push(s);
    } else if ((e.op === 'read' || e.op === 'write') && e.ok) {
      const s = open.get(e.client);
      if (s) {
        if (s.firstOk < 0) s.firstOk = e.seq;
        s.lastOk = e.seq;
      }
    } else if (e.op === 'end') {
      const s = open.get(e.client);
      if (s) s.end = e.seq;
      open.delete(e.client);
    } else if (e.op === 'note' && e.text !== undefined) {
      const valid = /^(valid|lost) (\d+)$/.exec(e.text);
      const s = valid ? all.findLast((x) => x.key === `${e.client}#${valid[2]}`) : undefined;
      if (s && valid) s.valid = valid[1] === 'valid';
      const killed = /^kill (\S+)$/.exec(e.text)?.[1];
      const k = killed === undefined ? undefined : open.get(killed);
      if (k) k.end = e.seq;
      if (killed !== undefined) open.delete(killed);
    }
  }
  return all;
}

/** Count pairs of intervals that intersect, by a sweep over start order (each later one counted once). */
function overlaps(intervals: readonly (readonly [number, number])[]): number {
  const sorted = [...intervals].sort((a, b) => a[0] - b[0]);
  let reach = Number.NEGATIVE_INFINITY;
  let n = 0;
  for (const [from, to] of sorted) {
    if (from < reach) n += 1;
    reach = Math.max(reach, to);
  }
  return n;
}

function staleness(events: readonly StoreEvent[]): { staleWrites: number; staleReads: number } {
  let newest = -1n;
  let staleWrites = 0;
  let staleReads = 0;
  for (const e of events) {
    if ((e.op !== 'read' && e.op !== 'write') || e.token === undefined) continue;
    if (e.ok && e.token < newest) {
      if (e.op === 'write') staleWrites += 1;
      else staleReads += 1;
    }
    if (e.token > newest) newest = e.token;
  }
  return { staleWrites, staleReads };
}

/**
 * From each heal or kill to the next section. After a kill (the asserted bound, "a crashed
 * holder's lock is free for others within ttl + lockDelay", docs/guarantees.md), up to when
 * the next holder's `lock()` resolved, from its worker's `granted <token> <wall ms>` note: the
 * lock was free by then at the latest, so the figure stays an upper bound on the freeing,
 * without the begin's own trip to this store (two processes to schedule; on a loaded machine
 * most of the figure). The store's clock is put on the wall clock by the runner's `epoch`
 * note. After a heal, still up to the begin: clock faults skew the workers' wall clocks.
 */
function recoveries(events: readonly StoreEvent[]): number[] {
  const out: number[] = [];
  const granted = new Map<string, number>();
  let wallOrigin: number | undefined;
  let healed: { at: number; kill: boolean } | undefined;
  for (const e of events) {
    const text = e.op === 'note' ? (e.text ?? '') : '';
    const epoch = /^epoch ([\d.]+)$/.exec(text);
    if (epoch && e.client === 'runner') wallOrigin = Number(epoch[1]) - e.at;
    const grant = /^granted (\d+) ([\d.]+)$/.exec(text);
    if (grant) granted.set(`${e.client}#${grant[1]}`, Number(grant[2]));
    if (/^(heal|kill) /.test(text)) healed ??= { at: e.at, kill: text.startsWith('kill ') };
    else if (e.op === 'begin' && healed !== undefined) {
      const wall = granted.get(`${e.client}#${e.token ?? ''}`);
      const at = healed.kill && wall !== undefined && wallOrigin !== undefined ? Math.min(e.at, wall - wallOrigin) : e.at;
      out.push(Math.max(0, Math.round(at - healed.at)));
      healed = undefined;
    }
  }
  return out;
}

/**
 * A line of characters, one per time bucket of the run: `#` two or more sections open at once
 * (overlap), `=` one owner, `.` none (everyone waiting); below it `^` where a fault was active.
 */
export function timeline(events: readonly StoreEvent[], width = 100): string {
  const last = events[events.length - 1];
  if (!last) return '';
  const span = Math.max(1, last.at) / width;
  const owners = new Array<number>(width).fill(0);
  const faulty = new Array<boolean>(width).fill(false);
  const bucket = (at: number): number => Math.min(width - 1, Math.floor(at / span));
  const open = new Set<string>();
  let faultFrom: number | undefined;
  let lastBucket = 0;
  let endOwners = 0;
  for (const e of events) {
    const b = bucket(e.at);
    // Buckets with no event keep the owners the previous one ended with; a bucket starts
    // with the owners it inherits.
    for (let i = lastBucket + 1; i <= b; i++) owners[i] = endOwners;
    lastBucket = b;
    const kill = e.op === 'note' ? /^kill (\S+)$/.exec(e.text ?? '')?.[1] : undefined;
    if (e.op === 'begin') open.add(e.client);
    if (e.op === 'end') open.delete(e.client);
    if (kill !== undefined) open.delete(kill);
    if (e.op === 'note' && /^fault /.test(e.text ?? '')) faultFrom = b;
    if (e.op === 'note' && /^(heal|kill) /.test(e.text ?? '')) {
      for (let i = faultFrom ?? b; i <= b; i++) faulty[i] = true;
      faultFrom = undefined;
    }
    owners[b] = Math.max(owners[b] ?? 0, open.size);
    endOwners = open.size;
  }
  const line = owners.map((n) => (n >= 2 ? '#' : n === 1 ? '=' : '.')).join('');
  return `${line}\n${faulty.map((f) => (f ? '^' : ' ')).join('')}`;
}

/** Check one run's history. `initial` is the counter's starting value. */
export function check(events: readonly StoreEvent[], final: number, initial = 0): Figures {
  const sections = sectionsOf(events);
  const accepted = sections.filter((s) => s.firstOk >= 0).map((s): [number, number] => [s.firstOk, s.lastOk]);
  const held = sections.filter((s) => s.valid).map((s): [number, number] => [s.begin, s.end]);
  const acceptedWrites = events.filter((e) => e.op === 'write' && e.ok).length;
  const notes = events.filter((e) => e.op === 'note').map((e) => e.text ?? '');
  return {
    acceptedWrites,
    rejected: events.filter((e) => (e.op === 'read' || e.op === 'write') && !e.ok).length,
    final,
    lostUpdates: acceptedWrites - (final - initial),
    ...staleness(events),
    overlappingSections: overlaps(accepted),
    doubleGrants: overlaps(held),
    sections: sections.length,
    faults: notes.filter((t) => t.startsWith('fault ')).length,
    recoveriesMs: recoveries(events),
    unhandled: notes.filter((t) => t.startsWith('unhandled rejection')).length,
    acquireFailures: notes.filter((t) => t.startsWith('acquire failed')).length,
    stuck: notes.filter((t) => t.startsWith('stuck ')),
    timeline: timeline(events),
  };
}
