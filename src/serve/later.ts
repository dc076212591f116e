/**
 * Work to run a fixed delay after it was queued, on one timer: the service queues some on
 * every acquire and release (intents.ts), and a timer each cost more than the work. The
 * timer fires at most every eighth of the delay: at a thousand acquires a second a timer
 * re-armed for each entry's own due time fired about every millisecond, a turn of the event
 * loop (and a system call) each, on the requests' path.
 */

/**
 * A FIFO of callbacks run `delayMs` after they were added, at most `delayMs / 8` later
 * (every delay the same, so FIFO order is due order).
 */
export class Later {
  readonly #delayMs: number;
  readonly #slackMs: number;
  #queue: { readonly due: number; readonly run: () => void }[] = [];
  #head = 0;
  #timer: NodeJS.Timeout | undefined;

  constructor(delayMs: number) {
    this.#delayMs = delayMs;
    this.#slackMs = delayMs / 8;
  }

  /** Run `run` in `delayMs` (a background timer: it keeps no process alive). */
  add(run: () => void): void {
    this.#queue.push({ due: performance.now() + this.#delayMs, run });
    if (this.#timer === undefined) this.#arm(this.#delayMs);
  }

  /** Drop what is queued and stop the timer (the owner closes). */
  clear(): void {
    if (this.#timer !== undefined) clearTimeout(this.#timer);
    this.#timer = undefined;
    this.#queue = [];
    this.#head = 0;
  }

  #arm(ms: number): void {
    this.#timer = setTimeout(() => this.#fire(), Math.max(1, Math.ceil(ms)));
    this.#timer.unref();
  }

  #fire(): void {
    this.#timer = undefined;
    const now = performance.now();
    while (this.#head < this.#queue.length) {
      const next = this.#queue[this.#head] as { readonly due: number; readonly run: () => void };
      if (next.due > now) break;
      this.#head += 1;
      try {
        next.run();
      } catch {
        // One callback's failure is its own; the others still run.
      }
    }
    if (this.#head === this.#queue.length) {
      this.#queue = [];
      this.#head = 0;
      return;
    }
    if (this.#head > 1024) {
      this.#queue = this.#queue.slice(this.#head);
      this.#head = 0;
    }
    // Not before the slack: what falls due meanwhile runs with it, a little late.
    this.#arm(Math.max(this.#slackMs, (this.#queue[this.#head]?.due ?? now) - now));
  }
}
