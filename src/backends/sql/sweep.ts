/**
 * The sweep of expired rows nobody comes back for. Every transaction on a lock id deletes
 * that id's expired holds and waiters, but a holder that crashed (or a waiter whose process
 * stopped) on an id never used again left its row for good. Each backend therefore looks,
 * now and then, for a bounded number of ids with expired rows and purges each one in the
 * ordinary way: its lock row locked first, so the sweep never races a grant
 * (docs/backends/postgres.md, "Clean-up"). Lock rows stay: they carry the fencing counter.
 */

/** Lock ids purged per sweep at most: one short transaction each. */
export const SWEEP_IDS = 100;

/** What the sweep needs from its backend. */
export interface SweepHost {
  /** Up to `limit` lock ids with expired holder or queue rows (a read, no lock taken). */
  staleIds(limit: number): Promise<string[]>;
  /** Delete the expired rows of `lockId` under its lock row. */
  purge(lockId: string): Promise<void>;
}

/** Sweeps every `everyMs` (± a quarter, so that many clients do not sweep in step); 0: never. */
export class Sweeper {
  readonly #host: SweepHost;
  readonly #everyMs: number;
  #timer: NodeJS.Timeout | undefined;
  #closed = false;

  constructor(host: SweepHost, everyMs: number) {
    this.#host = host;
    this.#everyMs = everyMs;
    this.#schedule();
  }

  /** One sweep now; resolves with the number of ids purged. A failed purge waits for the next sweep. */
  async sweep(): Promise<number> {
    const ids = await this.#host.staleIds(SWEEP_IDS);
    let purged = 0;
    for (const id of ids) {
      if (this.#closed) break;
      try {
        await this.#host.purge(id);
        purged += 1;
      } catch {
        // Best effort: the id's own next transaction, or the next sweep, purges it.
      }
    }
    return purged;
  }

  close(): void {
    this.#closed = true;
    clearTimeout(this.#timer);
    this.#timer = undefined;
  }

  #schedule(): void {
    if (this.#closed || this.#everyMs <= 0) return;
    const ms = this.#everyMs * (0.75 + Math.random() / 2);
    this.#timer = setTimeout(() => {
      this.sweep()
        .catch(() => undefined)
        .finally(() => this.#schedule());
    }, ms);
    // Background upkeep: never what keeps a process alive.
    this.#timer.unref();
  }
}
