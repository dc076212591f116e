/**
 * The fencing token across the quorum: a max-register kept on every master. A grant's token
 * is written to a majority of the masters it holds BEFORE the grant counts, and a master
 * reads its register atomically with taking the lease; since two majorities share a master,
 * a later grant reads a value ≥ every earlier token and proposes more. The proof is in
 * docs/backends/redlock.md, "Fencing tokens".
 *
 * One round trip in the common case: phase 1 (the lease) carries a proposal, and a master
 * whose register is below it stores it on the spot. Only when some granting master had a
 * register at or above the proposal does phase 2 write `max + 1` to the granting masters.
 */
import { FENCE, type LuaScript } from './scripts.js';
import { fanOut, granted, majority, type NodeReply, type RedlockNode } from './quorum.js';

/**
 * What phase 1 answered on one master: granted, with the register it held before this attempt
 * (the max of its stored value and its clock in µs, as the master sent it: parsed only when
 * phase 2 needs it) and whether it stored the proposal; or refused, with the holder's `PTTL`.
 */
export type AcquireReply =
  | { readonly granted: true; readonly register: string | number; readonly wrote: boolean }
  | { readonly granted: false; readonly pttl: number };

/**
 * How far ahead of this client's clock (µs) a fresh proposal goes: it must beat the clock
 * floor of every master it reaches, so it absorbs their skew against this client.
 */
const LEAD_US = 1_000_000n;
/** Proposals remembered for this many locks (the oldest is forgotten first). */
const CACHE_SIZE = 1_000;

/** The last token this client saw per lock, to propose the next one without a read. */
export class TokenRegister {
  readonly #last = new Map<string, bigint>();

  /** The token to propose in phase 1. */
  propose(lockId: string): bigint {
    const clock = BigInt(Date.now()) * 1000n + LEAD_US;
    const last = this.#last.get(lockId);
    return last !== undefined && last + 1n > clock ? last + 1n : clock;
  }

  /**
   * The token of an attempt that was granted by a majority: the proposal when every granting
   * master stored it, else `max + 1` written by phase 2 to the granting masters; undefined
   * when phase 2 did not reach a majority (the attempt then fails like a contended one).
   * Synchronous in the common case (every granting master stored the proposal): no promise
   * is made for a grant that needs no second round.
   */
  settle(
    lockId: string,
    proposal: bigint,
    replies: readonly NodeReply<AcquireReply>[],
    fence: (node: RedlockNode, script: LuaScript, token: bigint) => Promise<unknown>,
  ): bigint | Promise<bigint | undefined> {
    // The token must be above what each granting master now holds: the proposal where it was
    // stored, the register it read where it was not (too low, or refused as too far ahead of
    // that master's clock; docs/backends/redlock.md, "Fencing tokens").
    let max = 0n;
    let allWrote = true;
    for (const r of replies) {
      const v = r.value;
      if (r.outcome !== 'granted' || !v?.granted) continue;
      const held = v.wrote ? proposal : BigInt(v.register);
      if (held > max) max = held;
      if (!v.wrote) allWrote = false;
    }
    if (allWrote) {
      this.#remember(lockId, proposal);
      return proposal;
    }
    return this.#fence(lockId, max + 1n, replies, fence);
  }

  /** Phase 2: write `token` to the masters holding the lease; it counts once a majority stored it. */
  async #fence(
    lockId: string,
    token: bigint,
    replies: readonly NodeReply<AcquireReply>[],
    fence: (node: RedlockNode, script: LuaScript, token: bigint) => Promise<unknown>,
  ): Promise<bigint | undefined> {
    // To every master, not only those heard granting: a master whose grant had not arrived yet
    // runs this after it (one connection, in order) and stores the token too; the others
    // refuse (they do not hold the lease). The more masters hold the token, the more of them
    // may later restart empty without losing it (docs/backends/redlock.md).
    const acks = await fanOut(
      replies.map((r) => r.node),
      (node) => fence(node, FENCE, token),
      (reply) => ({ ok: reply === 1, value: undefined }),
      majority(replies.length),
    );
    if (granted(acks).length < majority(replies.length)) return undefined;
    this.#remember(lockId, token);
    return token;
  }

  #remember(lockId: string, token: bigint): void {
    this.#last.delete(lockId);
    this.#last.set(lockId, token);
    if (this.#last.size > CACHE_SIZE) {
      const oldest = this.#last.keys().next();
      if (!oldest.done) this.#last.delete(oldest.value);
    }
  }
}
