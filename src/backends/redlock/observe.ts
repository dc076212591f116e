/**
 * Seeing the locks of Redlock: what each master knows of a lock (INSPECT) merged into one
 * state — a holder counts when a majority of masters hold its value — and `list` by SCAN over
 * each master in turn. A lock is listed from the scan of the first master (in the order
 * given) that holds its lease, so a lock held throughout the paging is listed once however
 * many masters hold it. See docs/backends/redlock.md, "Listing".
 */
import type { WaiterState } from '../../backend.js';
import type { HolderState, LockState } from '../kit.js';
import { readWho } from '../redis-wire/keys.js';
import type { NodeReply, RedlockNode } from './quorum.js';

/** What one master answered to INSPECT. */
export interface InspectReply {
  readonly value: string;
  readonly pttl: number;
  readonly register: string;
  /** `<acquired at ms>|who` of the hold on this master, or ''. */
  readonly record: string;
  /** The master's clock, ms since the epoch. */
  readonly now: number;
}

/** INSPECT's reply `{value, pttl, register, record, nowMs}` on one master. */
export function classifyInspect(reply: unknown): { ok: boolean; value: InspectReply } {
  const [value, pttl, register, record, now] = Array.isArray(reply) ? (reply as unknown[]) : [];
  return {
    ok: true,
    value: {
      value: String(value ?? ''),
      pttl: Number(pttl),
      register: String(register ?? ''),
      record: String(record ?? ''),
      now: Number(now ?? 0),
    },
  };
}

/** The merged state, and the lockId the holder's record carries (an id with a brace). */
export interface MergedState {
  readonly state: LockState;
  readonly storedId: string | undefined;
}

/**
 * The holder is the value a majority holds, its token the highest register among them; the
 * last token is the highest register seen. Its lease end is the quorum-th longest, on that
 * master's clock; identity and acquisition time come from the first of them with a record.
 */
export function stateOf(lockId: string, replies: readonly NodeReply<InspectReply>[], quorum: number): MergedState {
  const byValue = new Map<string, InspectReply[]>();
  let last: bigint | undefined;
  for (const r of replies) {
    if (!r.value) continue;
    if (r.value.register !== '' && (last === undefined || BigInt(r.value.register) > last)) last = BigInt(r.value.register);
    if (r.value.value === '') continue;
    byValue.set(r.value.value, [...(byValue.get(r.value.value) ?? []), r.value]);
  }
  const holders: HolderState[] = [];
  let storedId: string | undefined;
  for (const [value, on] of byValue) {
    if (on.length < quorum) continue;
    const nul = value.indexOf('\0');
    // Only the holder writes a register while it holds the lease there (scripts.ts).
    const tokens = on.filter((o) => o.register !== '').map((o) => BigInt(o.register));
    const byTtl = [...on].sort((a, b) => b.pttl - a.pttl);
    const end = byTtl[quorum - 1];
    const rec = on.map((o) => /^(\d+)\|([\s\S]*)$/.exec(o.record)).find((m) => m !== null);
    const who = rec?.[2] === undefined ? undefined : readWho(rec[2]);
    storedId ??= who?.lockId;
    holders.push({
      ownerId: nul >= 0 ? value.slice(0, nul) : value,
      kind: 'mutex',
      token: tokens.reduce((a, b) => (b > a ? b : a), 0n),
      expiresInMs: end?.pttl ?? 0,
      count: 1,
      ...(end ? { leaseEndsAt: end.now + end.pttl } : {}),
      ...(rec?.[1] === undefined ? {} : { acquiredAt: Number(rec[1]) }),
      ...(who ? { identity: who.identity } : {}),
    });
  }
  const queue: readonly WaiterState[] = [];
  const state: LockState = { lockId, holders, waiters: 0, queue, ...(last === undefined ? {} : { lastToken: last }) };
  return { state, storedId };
}

/** The index of the first master that holds a lease for the lock (-1: none). */
export function firstHolding(replies: readonly NodeReply<InspectReply>[], nodes: readonly RedlockNode[]): number {
  let first = -1;
  for (const r of replies) {
    if (!r.value || r.value.value === '') continue;
    const i = nodes.indexOf(r.node);
    if (i >= 0 && (first < 0 || i < first)) first = i;
  }
  return first;
}

/** Holds ended by a FORCE fan-out: the values a majority of masters deleted. */
export function endedHolds(replies: readonly NodeReply<string>[], quorum: number): number {
  const count = new Map<string, number>();
  for (const r of replies) if (r.value) count.set(r.value, (count.get(r.value) ?? 0) + 1);
  return [...count.values()].filter((n) => n >= quorum).length;
}
