/**
 * The per-node command layer of the Redis backends: one Lua script per operation, sent with
 * EVALSHA and re-sent with EVAL when the server answers NOSCRIPT (after a restart or
 * `SCRIPT FLUSH`), every command bounded by one deadline. The single-node backend uses one
 * of these; Redlock uses one per master. See docs/backends/redis.md, "Connections and failures".
 */
import { performance } from 'node:perf_hooks';
import { BackendUnavailableError, MAX_TIMER_MS, unavailable } from '../kit.js';
import type { RedisCommandClient } from './clients.js';
import type { LuaScript } from './lua.js';

/** Options of {@link RedisCommands}. */
export interface RedisCommandsOptions {
  /** Bound on one command round trip before `BackendUnavailableError`. */
  readonly timeoutMs: number;
  /** Engine name for errors (`redis`, `redlock`). */
  readonly engine: string;
  /** Where the commands go, for messages (a redacted URL or `host:port`). */
  readonly label: string;
  /** Secrets that must never appear in a message (the URL's password). */
  readonly secrets?: readonly string[];
}

/** A command unanswered this long counts as owed by a server that is not answering ({@link RedisCommands.owing}). */
const OWED_MS = 50;

/** A deadline check that ran this much later than scheduled saw a stalled event loop. */
const STALL_MS = 20;

/** A command in flight, for the shared deadline. */
interface InFlight {
  readonly deadline: number;
  settled: boolean;
  readonly fail: (err: BackendUnavailableError) => void;
  readonly what: string;
}

/**
 * Scripts on one Redis node, each bounded by `timeoutMs`; every failure is a locksmith error
 * that keeps the real cause (ECONNREFUSED, WRONGPASS, NOAUTH…).
 */
export class RedisCommands {
  readonly #client: RedisCommandClient;
  readonly #opts: RedisCommandsOptions;
  /**
   * Commands in flight, oldest first. They all get the same timeout, so their deadlines come
   * in this order and one timer (armed for the oldest) bounds them all: a timer per command
   * cost a setTimeout + clearTimeout pair on every script.
   */
  readonly #inFlight: InFlight[] = [];
  #timer: NodeJS.Timeout | undefined;

  /** Send scripts through `client`. */
  constructor(client: RedisCommandClient, options: RedisCommandsOptions) {
    this.#client = client;
    this.#opts = options;
  }

  /** The node this layer talks to, for messages. */
  get label(): string {
    return this.#opts.label;
  }

  /**
   * Run `s` on `keys` and `args`: EVALSHA, EVAL on NOSCRIPT, bounded. One promise of its own
   * and one reaction on the client's: an async wrapper around {@link bounded} cost an
   * uncontended cycle two more promises per script (docs/benchmarks.md, "Redis: the client's
   * own cost").
   */
  eval(s: LuaScript, keys: readonly string[], args: readonly (string | number)[]): Promise<unknown> {
    return new Promise<unknown>((resolve, reject) => this.#send(s, keys, args, resolve, reject, true));
  }

  /**
   * Run `s` by its source (EVAL), for rare clean-ups that may be queued behind a command
   * that timed out: if the server lost its script cache meanwhile, an EVALSHA would fail
   * there with NOSCRIPT after we stopped listening, and the clean-up would never happen.
   */
  evalSource(s: LuaScript, keys: readonly string[], args: readonly (string | number)[]): Promise<unknown> {
    return new Promise<unknown>((resolve, reject) => this.#send(s, keys, args, resolve, reject, false));
  }

  /**
   * Send `s` once, under the shared deadline: by its SHA (`bySha`), or by its source. A
   * NOSCRIPT answer (the server lost its script cache: restart, SCRIPT FLUSH) sends the
   * source, with a deadline of its own, as a command of its own (a stalled process may read
   * the NOSCRIPT reply only after the first deadline passed).
   */
  #send(
    s: LuaScript,
    keys: readonly string[],
    args: readonly (string | number)[],
    resolve: (v: unknown) => void,
    reject: (err: Error) => void,
    bySha: boolean,
  ): void {
    const entry = this.#track(s.name, reject);
    const client = this.#client;
    const sent = bySha ? client.evalsha(s.sha, keys.length, ...keys, ...args) : client.eval(s.source, keys.length, ...keys, ...args);
    sent.then(
      (v: unknown) => {
        entry.settled = true;
        resolve(v);
      },
      (err: unknown) => {
        // Past its deadline: already rejected, and no resend.
        if (entry.settled) return;
        entry.settled = true;
        if (bySha && isNoScript(err)) this.#send(s, keys, args, resolve, reject, false);
        else reject(this.#wrap(s.name, err));
      },
    );
  }

  /** `p`, or a `BackendUnavailableError` once `timeoutMs` passed without a reply. */
  bounded<T>(what: string, p: Promise<T>): Promise<T> {
    // The command may still settle after we gave up: the `then` below handles its rejection.
    return new Promise<T>((resolve, reject) => {
      const entry = this.#track(what, reject);
      p.then(
        (v) => {
          entry.settled = true;
          resolve(v);
        },
        (e: unknown) => {
          entry.settled = true;
          reject(e);
        },
      );
    });
  }

  /**
   * True while a command sent at least {@link OWED_MS} ago has had no reply (nor reached its
   * deadline): the server is not answering (paused, black-holed), and a command sent now
   * runs there only after it (one connection, in order). Ordinary traffic in flight, a few
   * ms old, does not count.
   */
  get owing(): boolean {
    const since = performance.now() - OWED_MS + this.#opts.timeoutMs;
    const oldest = this.#inFlight.find((e) => !e.settled);
    return oldest !== undefined && oldest.deadline <= since;
  }

  /** Put a command under the shared deadline; `fail` rejects it once that passes. */
  #track(what: string, fail: (err: BackendUnavailableError) => void): InFlight {
    const entry: InFlight = { deadline: performance.now() + this.#opts.timeoutMs, settled: false, fail, what };
    const q = this.#inFlight;
    // Replies come (nearly) in order: dropping the settled head here keeps the queue short.
    while (q.length > 0 && q[0]?.settled) q.shift();
    q.push(entry);
    if (!this.#timer) this.#arm();
    return entry;
  }

  /** Fail every command in flight and stop the deadline timer. */
  close(): void {
    clearTimeout(this.#timer);
    this.#timer = undefined;
    for (const e of this.#inFlight.splice(0)) {
      if (e.settled) continue;
      e.settled = true;
      e.fail(new BackendUnavailableError(this.#opts.engine, `${this.#opts.engine} ${e.what} abandoned: the backend was closed`));
    }
  }

  /** Fail every command past its deadline, then wait for the oldest one still in flight. */
  #arm(): void {
    this.#timer = undefined;
    const q = this.#inFlight;
    const now = performance.now();
    const { engine, timeoutMs, label } = this.#opts;
    for (let head = q[0]; head && (head.settled || head.deadline <= now); head = q[0]) {
      q.shift();
      if (head.settled) continue;
      head.settled = true;
      head.fail(
        new BackendUnavailableError(engine, `${engine} ${head.what} got no reply within ${timeoutMs} ms (${label})`, {
          context: { timeoutMs, node: label },
        }),
      );
    }
    const next = q[0];
    if (!next) return;
    this.#timer = setTimeout(
      () => this.#checkAfterIo(performance.now()),
      Math.min(MAX_TIMER_MS, Math.max(1, Math.ceil(next.deadline - now))),
    );
    this.#timer.unref();
  }

  /**
   * Check the deadlines only after a poll phase has read the replies that arrived: after an
   * event-loop stall (GC, a loaded machine) the timer phase runs BEFORE that I/O, and
   * replies already in the socket would be reported as timeouts (every Redlock master at
   * once). `setImmediate` runs after the poll phase; if it ran late itself (another stall
   * came between), it waits for one more poll phase — at most twice, so that a process
   * that is always busy still times its commands out.
   */
  #checkAfterIo(scheduledAt: number, deferrals = 0): void {
    setImmediate(() => {
      if (deferrals < 2 && performance.now() - scheduledAt > STALL_MS) this.#checkAfterIo(performance.now(), deferrals + 1);
      else this.#arm();
    });
  }

  #wrap(what: string, err: unknown): Error {
    return unavailable(this.#opts.engine, `${what} on ${this.#opts.label}`, err, {
      secrets: this.#opts.secrets ?? [],
      context: { node: this.#opts.label },
    });
  }
}

function isNoScript(err: unknown): boolean {
  return err instanceof Error && err.message.startsWith('NOSCRIPT');
}
