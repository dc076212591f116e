/**
 * One dedicated LISTEN connection per backend: a NOTIFY of a lock id wakes that id's local
 * waiters. After the connection breaks it reconnects with a growing, capped delay and wakes
 * every waiter (a NOTIFY may have been missed meanwhile); the waiters' bounded fallback poll
 * covers the gap (docs/backends/postgres.md, "Waiting").
 */
import type pg from 'pg';
import { backendLog } from '../kit.js';

const log = backendLog('postgres');
const RETRY_MIN_MS = 100;
const RETRY_MAX_MS = 5_000;
/** How long close() waits for the destroyed connection to end before it gives up waiting. */
const END_WAIT_MS = 2_000;

/** The LISTEN connection of one backend. */
export class PgListener {
  readonly #pool: pg.Pool;
  readonly #channel: string;
  readonly #onChange: (lockId: string | undefined) => void;
  readonly #onListening: () => void;
  readonly #then: pg.QueryConfig | undefined;
  #client: pg.PoolClient | undefined;
  #timer: NodeJS.Timeout | undefined;
  #retryMs = RETRY_MIN_MS;
  #closed = false;

  /**
   * `then` runs on the connection after each LISTEN; `onListening` each time both are in place
   * (the first time and after every reconnect).
   */
  constructor(
    pool: pg.Pool,
    channel: string,
    onChange: (lockId: string | undefined) => void,
    onListening = (): void => undefined,
    then?: pg.QueryConfig,
  ) {
    this.#then = then;
    this.#pool = pool;
    this.#channel = channel;
    this.#onChange = onChange;
    this.#onListening = onListening;
  }

  /** Connect and LISTEN, retrying with the reconnect's backoff until it works or {@link close}. */
  keepTrying(): void {
    this.start().then(undefined, () => this.#backoff());
  }

  /** Connect and LISTEN (rejects when the first connection fails). */
  async start(): Promise<void> {
    const client = await this.#pool.connect();
    const lost = (): void => this.#lost(client);
    client.on('error', lost);
    client.on('end', lost);
    client.on('notification', (m) => {
      if (m.channel === this.#channel && m.payload !== undefined) this.#onChange(m.payload);
    });
    try {
      await client.query(`LISTEN ${this.#channel}`);
      if (this.#then) await client.query(this.#then);
    } catch (err) {
      client.release(true);
      throw err;
    }
    if (this.#closed) {
      client.release(true);
      return;
    }
    this.#client = client;
    if (log.enabled) log('LISTEN connection up: waiters are woken by NOTIFY');
    this.#retryMs = RETRY_MIN_MS;
    this.#onListening();
  }

  #backoff(): void {
    this.#retryMs = Math.min(RETRY_MAX_MS, this.#retryMs * 2);
    this.#schedule();
  }

  #lost(client: pg.PoolClient): void {
    if (this.#client !== client) return;
    this.#client = undefined;
    client.release(true);
    if (log.enabled) log('LISTEN connection lost: waking every waiter, reconnecting in %dms', this.#retryMs);
    this.#onChange(undefined);
    this.#schedule();
  }

  #schedule(): void {
    if (this.#closed || this.#timer) return;
    this.#timer = setTimeout(() => {
      this.#timer = undefined;
      this.start().then(
        () => this.#onChange(undefined),
        () => this.#backoff(),
      );
    }, this.#retryMs);
    // Background: a reconnect must not keep the process alive.
    this.#timer.unref();
  }

  /**
   * Stop listening, give the connection back (destroyed) and wait until it has ended. The
   * pool re-arms its idle 'error' listener on release; a server shutting down while the
   * connection still ends would reach the pool's 'error' event, which crashes the process
   * of a user whose own pool has no handler (docs/backends/postgres.md, "Using your own pool").
   */
  async close(): Promise<void> {
    this.#closed = true;
    clearTimeout(this.#timer);
    this.#timer = undefined;
    const client = this.#client;
    this.#client = undefined;
    if (!client) return;
    const ended = new Promise<void>((resolve) => {
      const timer = setTimeout(resolve, END_WAIT_MS);
      timer.unref();
      client.once('end', () => {
        clearTimeout(timer);
        resolve();
      });
    });
    client.release(true);
    await ended;
  }
}
