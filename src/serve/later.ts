/**
 * Work to run a fixed delay after it was queued, on one timer: the service queues some on
 * every acquire and release (intents.ts), and a timer each cost more than the work.
 */

/** A FIFO of callbacks run `delayMs` after they were added (every delay the same, so FIFO order is due order). */
export class Later {
  readonly #delayMs: number;
  #queue: { readonly due: number; readonly run: () => void }[] = [];
  #head = 0;
  #timer: NodeJS.Timeout | undefined;

  constructor(delayMs: number) {
    this.#delayMs = delayMs;
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
    this.#arm((this.#queue[this.#head]?.due ?? now) - now);
  }
}
