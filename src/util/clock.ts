/**
 * The clock leases are counted on: monotonic, plus the time the host was seen suspended.
 *
 * `performance.now()` is CLOCK_MONOTONIC, which stands still while the host is suspended (a
 * laptop lid, a VM paused by its hypervisor, a live migration). Leases on the servers keep
 * running meanwhile, so a holder that counts on the monotonic clock alone wakes up believing
 * it still holds a lease that ended long ago. Node offers no CLOCK_BOOTTIME, so the gap is
 * read off the wall clock: when the wall clock has advanced more than the monotonic clock
 * between two readings (beyond NTP's slew and a little jitter), the difference is added for
 * good. A forward step of the wall clock (NTP's `makestep`) looks the same and costs the
 * leases held at that moment the step's length: an early loss, never a late one. A backward
 * step is ignored. docs/guarantees.md, "Validity".
 */
import { performance } from 'node:perf_hooks';

/** NTP slews a clock by at most 500 ppm; twice that is never a suspend. */
const SLEW = 0.001;
/** Differences below this are reading jitter (two clocks read one after the other). */
const JITTER_MS = 25;

/** A monotonic clock that also counts suspended time (see the module's comment). */
export class SuspendAwareClock {
  readonly #wall: () => number;
  readonly #mono: () => number;
  #lastWall: number;
  #lastMono: number;
  /** Suspended time seen so far (only grows). */
  #gapMs = 0;

  /** The two clocks are parameters so that a test can drive them; the defaults are the real ones. */
  constructor(wall: () => number = Date.now, mono: () => number = () => performance.now()) {
    this.#wall = wall;
    this.#mono = mono;
    this.#lastWall = wall();
    this.#lastMono = mono();
  }

  /** Milliseconds: `performance.now()` plus every suspended interval seen since start. */
  now(): number {
    const mono = this.#mono();
    const wall = this.#wall();
    const dm = mono - this.#lastMono;
    const ahead = wall - this.#lastWall - dm;
    if (ahead > JITTER_MS + dm * SLEW) this.#gapMs += ahead;
    this.#lastMono = mono;
    this.#lastWall = wall;
    return mono + this.#gapMs;
  }

  /** The suspended time added so far (for logs and tests). */
  get gapMs(): number {
    return this.#gapMs;
  }
}

/** The process's lease clock. */
export const leaseClock = new SuspendAwareClock();
