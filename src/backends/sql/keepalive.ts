/**
 * The queue rows of one backend's waiters, kept alive together. A queue row expires unless
 * refreshed, so that a crashed waiter stops blocking a fair queue; refreshing it through the
 * waiter's own attempts made every waiter run a transaction on the lock row (reading the
 * whole queue) every couple of seconds, and a thousand waiters on one lock starved the
 * hand-offs. Here one statement per lock id and tick refreshes every row this backend has
 * queued, outside the lock row: the expiry only decides when a silent waiter is dropped, never
 * who holds (docs/backends/postgres.md, "Waiting").
 */
import type { Stmt } from './types.js';

/** Sequence numbers per statement (placeholders stay far below every driver's limit). */
const CHUNK = 500;

/** The refresh statement for some rows of one lock id. */
export type RefreshStatement = (lockId: string, seqs: readonly bigint[]) => Stmt;

/** Refreshes the queue rows it is told about, every `everyMs`, while there are any. */
export class QueueKeepalive {
  readonly #rows = new Map<string, Set<bigint>>();
  readonly #run: (stmts: Stmt[]) => Promise<unknown>;
  readonly #refresh: RefreshStatement;
  readonly #everyMs: number;
  #timer: NodeJS.Timeout | undefined;
  #busy = false;
  #closed = false;

  /** `run` executes the statements in one transaction; a failure waits for the next tick. */
  constructor(run: (stmts: Stmt[]) => Promise<unknown>, refresh: RefreshStatement, everyMs: number) {
    this.#run = run;
    this.#refresh = refresh;
    this.#everyMs = everyMs;
  }

  /** How many rows are kept alive (for tests and stats). */
  get size(): number {
    let n = 0;
    for (const set of this.#rows.values()) n += set.size;
    return n;
  }

  add(lockId: string, seq: bigint): void {
    // An attempt that was in flight when its backend closed must not start the timer again.
    if (this.#closed) return;
    let set = this.#rows.get(lockId);
    if (!set) {
      set = new Set();
      this.#rows.set(lockId, set);
    }
    set.add(seq);
    if (!this.#timer) {
      this.#timer = setInterval(() => void this.#tick(), this.#everyMs);
      // Waiters keep the process alive by their own waits; this is background upkeep.
      this.#timer.unref();
    }
  }

  delete(lockId: string, seq: bigint): void {
    const set = this.#rows.get(lockId);
    if (!set) return;
    set.delete(seq);
    if (set.size === 0) this.#rows.delete(lockId);
    if (this.#rows.size === 0) this.#stop();
  }

  /** Forget every row and stop, for good. */
  close(): void {
    this.#closed = true;
    this.#rows.clear();
    this.#stop();
  }

  #stop(): void {
    clearInterval(this.#timer);
    this.#timer = undefined;
  }

  async #tick(): Promise<void> {
    // A tick slower than the interval (a stalled database) must not pile up more.
    if (this.#busy || this.#rows.size === 0) return;
    this.#busy = true;
    const stmts: Stmt[] = [];
    for (const [lockId, set] of this.#rows) {
      const seqs = [...set];
      for (let i = 0; i < seqs.length; i += CHUNK) stmts.push(this.#refresh(lockId, seqs.slice(i, i + CHUNK)));
    }
    try {
      await this.#run(stmts);
    } catch {
      // Rows refreshed late expire at worst; their waiters then queue again at their next attempt.
    } finally {
      this.#busy = false;
    }
  }
}
