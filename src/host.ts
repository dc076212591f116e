/**
 * What the wait loop needs from the locker that owns it, and nothing more: the backend
 * (connected lazily, once, retried after a failure) and `close()` (a signal for calls that
 * need none of their own, and the controllers of waiting calls to abort). The locker owns
 * one and hands it down; the loop never calls into the locker (docs/architecture.md, "One
 * way down").
 */
import type { Backend } from './backend.js';
import { connect } from './connect.js';
import { LockerClosedError } from './errors.js';
import { withDeadline } from './util/time.js';

/** @internal The backend and the close state of one locker. */
export class LockerHost {
  readonly #source: URL | Backend;
  readonly #connectTimeoutMs: number;
  #backend: Promise<Backend> | undefined;
  /** The backend once connected (the hot path skips the promise). */
  #ready: Backend | undefined;
  #closed = false;
  /** Aborted on close: a backend factory still connecting stops. */
  readonly #closeController = new AbortController();
  /** Every waiting call's controller: close() aborts each (no listener per call on one signal). */
  readonly #waits = new Set<AbortController>();

  constructor(source: URL | Backend, connectTimeoutMs: number) {
    this.#source = source;
    this.#connectTimeoutMs = connectTimeoutMs;
  }

  /** Aborted by close() (with `LockerClosedError`): the signal of a call that needs none of its own. */
  get closeSignal(): AbortSignal {
    return this.#closeController.signal;
  }

  get closed(): boolean {
    return this.#closed;
  }

  /**
   * The backend, at once when connected; else connecting, given up (rejecting with the
   * reason) when the signal aborts. The signal is asked for only when connecting: a call
   * makes a controller of its own only when it waits.
   */
  backend(signal: () => AbortSignal): Backend | Promise<Backend> {
    return this.#ready ?? withDeadline(this.connect(), { signal: signal() });
  }

  /** The backend; the first call connects (bounded by `connectTimeoutMs` and close()). */
  connect(): Promise<Backend> {
    if (!this.#backend) {
      const source = this.#source;
      const p =
        source instanceof URL
          ? connect(source, { connectTimeoutMs: this.#connectTimeoutMs, signal: this.#closeController.signal })
          : Promise.resolve(source);
      this.#backend = p;
      p.then(
        (b) => {
          if (this.#backend === p) this.#ready = b;
        },
        () => {
          // A failed connection is retried by the next call instead of being cached forever.
          if (this.#backend === p) this.#backend = undefined;
        },
      );
    }
    return this.#backend;
  }

  /** The backend if a connection was made (or is being made), else undefined; never rejects. */
  async connected(): Promise<Backend | undefined> {
    return this.#backend ? this.#backend.catch(() => undefined) : undefined;
  }

  /** Abort `controller` on close(); returns the function that stops doing so. */
  track(controller: AbortController): () => void {
    this.#waits.add(controller);
    if (this.#closed) controller.abort(new LockerClosedError());
    return () => this.#waits.delete(controller);
  }

  /** Mark closed and abort every waiting call and the connection attempt with `LockerClosedError`. */
  stop(): void {
    this.#closed = true;
    const closed = new LockerClosedError();
    this.#closeController.abort(closed);
    for (const c of [...this.#waits]) c.abort(closed);
  }
}
