/**
 * Opening a backend for `createLocker`: the one shape every engine that connects up front
 * shares (docs/architecture.md, "Shared utilities").
 */
import type { ConnectOptions } from '../backend.js';
import { withDeadline } from '../util/time.js';

/** A backend that connects after construction and can be closed whatever state it is in. */
export interface Connectable {
  connect(signal?: AbortSignal): Promise<unknown>;
  close(): Promise<void>;
}

/**
 * Connect `backend` under the caller's signal. On failure, close what it opened (a half-open
 * client must not keep the process alive), rethrow the caller's own abort reason as is, and
 * turn anything else into the engine's error with `wrap` (which names the redacted URL).
 */
export async function openConnected<B extends Connectable>(backend: B, options: ConnectOptions, wrap: (err: unknown) => Error): Promise<B> {
  try {
    await withDeadline(backend.connect(options.signal), options.signal ? { signal: options.signal } : {});
    return backend;
  } catch (err) {
    await backend.close().catch(() => undefined);
    if (options.signal?.aborted && err === options.signal.reason) throw err;
    throw wrap(err);
  }
}
