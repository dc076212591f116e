/**
 * Leader election on any backend (Curator's LeaderLatch, etcd's Election): leadership is
 * the hold of one lock, so the leader's fencing token is the lock's token and a loss of
 * leadership is the lock's `signal`. See docs/recipes/election.md.
 */
import { randomBytes } from 'node:crypto';
import { hostname } from 'node:os';
import { InvalidArgumentError } from './errors.js';
import type { Lock } from './lock.js';
import { wakerFor } from './election-wake.js';
import { assertStorable, validateDuration } from './options.js';

/** The part of a Locker an election needs (kept structural to avoid an import cycle). */
export interface ElectionLocker {
  lock(lockId: string, options?: { signal?: AbortSignal; owner?: string; fair?: boolean; timeoutMs?: number }): Promise<Lock>;
  inspect(lockId: string): Promise<{ holders: readonly { ownerId: string; token: bigint; kind: string; expiresInMs?: number }[] }>;
  backend(): Promise<object & { capabilities: { fair: boolean } }>;
}

/** Options of {@link Election}. */
export interface ElectionOptions {
  /**
   * This participant's name, shown by `leader()` to everybody (a host name, a pod name).
   * At most 200 UTF-8 bytes, no `#`. @default {@link defaultParticipantId}: `${os.hostname()}:${pid}`
   */
  readonly id?: string;
  /**
   * How often `observe()` looks at the lock (ms) on backends that cannot watch it; where the
   * backend is notified of changes (ZooKeeper, etcd, Redis, file://, PostgreSQL with
   * notifications) it looks when notified instead, and every 30 s at the latest. @default 500
   */
  readonly observeEveryMs?: number;
}

/** Who leads. */
export interface LeaderInfo {
  /** The leader's participant id (`ElectionOptions.id`). */
  readonly id: string;
  /** The fencing token of its term: strictly increasing over terms. */
  readonly token: bigint;
  /** The remaining lease as the backend sees it, when it knows. */
  readonly expiresInMs?: number;
}

/** This process leads: until `signal` aborts (leadership lost) or `resign()`. */
export interface Leadership {
  /** The fencing token of this term; pass it to whatever the leader writes to. */
  readonly token: bigint;
  /** Aborted (reason `LockLostError`) when leadership is lost; pass it to the leader's work. */
  readonly signal: AbortSignal;
  /** The underlying lock handle. */
  readonly lock: Lock;
  /** Step down (idempotent). */
  resign(): Promise<void>;
}

const SEPARATOR = '#';

/** A leader election; create it with `locker.election(name)`. */
export class Election {
  /** The election's name (the lock id). */
  readonly name: string;
  /** This participant's id. */
  readonly id: string;
  readonly #locker: ElectionLocker;
  readonly #observeEveryMs: number;
  #term: Leadership | undefined;
  /** Pending campaigns: `resign()` aborts them, so a process that stepped down stays down. */
  readonly #campaigns = new Set<AbortController>();

  /** @internal Use `locker.election(name)`. */
  constructor(locker: ElectionLocker, name: string, options: ElectionOptions = {}) {
    this.#locker = locker;
    this.name = name;
    this.id = validateParticipant(options.id ?? defaultParticipantId());
    this.#observeEveryMs = options.observeEveryMs === undefined ? 500 : validateDuration(options.observeEveryMs, 'observeEveryMs');
  }

  /**
   * Resolve when this process leads (waits in arrival order where the backend is fair).
   * Rejects with the signal's reason when aborted, `LockTimeoutError` after `timeoutMs`,
   * and an `AbortError` when `resign()` withdraws it. A term whose lock this process
   * released (`term.lock.release()`, `await using`) is over: the next call campaigns again.
   */
  async campaign(options: { signal?: AbortSignal; timeoutMs?: number } = {}): Promise<Leadership> {
    // `held`, not `signal.aborted`: a released handle keeps its signal unaborted.
    if (this.#term?.lock.held) return this.#term;
    const withdraw = new AbortController();
    this.#campaigns.add(withdraw);
    try {
      const { fair } = (await this.#locker.backend()).capabilities;
      const owner = `${this.id}${SEPARATOR}${randomBytes(9).toString('base64url')}`;
      const signal = options.signal ? AbortSignal.any([options.signal, withdraw.signal]) : withdraw.signal;
      const lock = await this.#locker.lock(this.name, {
        ...(options.timeoutMs === undefined ? {} : { timeoutMs: options.timeoutMs }),
        signal,
        owner,
        fair,
      });
      if (withdraw.signal.aborted) {
        // Granted in the same turn as resign(): the caller asked not to lead.
        await lock.release();
        throw withdraw.signal.reason;
      }
      return this.#newTerm(lock);
    } finally {
      this.#campaigns.delete(withdraw);
    }
  }

  #newTerm(lock: Lock): Leadership {
    const term: Leadership = {
      token: lock.token,
      signal: lock.signal,
      lock,
      resign: async () => {
        if (this.#term === term) this.#term = undefined;
        await lock.release();
      },
    };
    this.#term = term;
    return term;
  }

  /** Step down if leading, and withdraw every pending `campaign()` (idempotent). */
  async resign(): Promise<void> {
    for (const c of this.#campaigns) c.abort(new DOMException(`resign() withdrew the campaign for '${this.name}'`, 'AbortError'));
    this.#campaigns.clear();
    await this.#term?.resign();
  }

  /** Who leads now, as the backend sees it (undefined: nobody). */
  async leader(): Promise<LeaderInfo | undefined> {
    const state = await this.#locker.inspect(this.name);
    const h = state.holders.find((x) => x.kind === 'mutex');
    if (!h) return undefined;
    const cut = h.ownerId.lastIndexOf(SEPARATOR);
    return {
      id: cut > 0 ? h.ownerId.slice(0, cut) : h.ownerId,
      token: h.token,
      ...(h.expiresInMs === undefined ? {} : { expiresInMs: h.expiresInMs }),
    };
  }

  /**
   * Leadership changes, as they are seen: the current leader first, then each new leader
   * (or `undefined` while nobody leads). Where the backend is notified of changes (its lock
   * watch, or `Backend.changes`), it looks when notified (at a leader's lease end, and every
   * 30 s at the latest); elsewhere every `observeEveryMs`.
   * Ends when `signal` aborts.
   */
  async *observe(options: { signal?: AbortSignal } = {}): AsyncGenerator<LeaderInfo | undefined> {
    const { signal } = options;
    // Ends the pending wait when the caller aborts or stops iterating (the finally below).
    const stop = new AbortController();
    const onAbort = (): void => stop.abort(signal?.reason);
    if (signal?.aborted) return;
    signal?.addEventListener('abort', onAbort, { once: true });
    try {
      const waker = wakerFor(await this.#locker.backend(), this.name, this.#observeEveryMs, stop.signal);
      let last: string | undefined;
      while (!stop.signal.aborted) {
        // Armed before the look, so a change between the look and the wait is not missed.
        const change = waker.arm();
        const now = await this.leader();
        const key = now ? `${now.id}@${now.token}` : '';
        if (key !== last) {
          last = key;
          yield now;
        }
        try {
          await waker.wait(change, now?.expiresInMs);
        } catch {
          return;
        }
      }
    } finally {
      signal?.removeEventListener('abort', onAbort);
      stop.abort();
    }
  }
}

/** Room left for `:pid` within the 200-byte participant id. */
const MAX_HOST_BYTES = 180;

/**
 * The default participant id, `host:pid`, so that `leader()` names the machine that leads.
 * `os.hostname()`, not `$HOSTNAME`: that variable is a shell's, unset in most services. A
 * host name is whatever the OS holds, so what no backend could store (`#`, NUL, a lone
 * surrogate) becomes `_` and it is cut, on a character boundary, to keep the id within 200
 * bytes (docs/recipes/election.md).
 */
export function defaultParticipantId(host: string = hostname(), pid: number = process.pid): string {
  let name = '';
  let bytes = 0;
  // eslint-disable-next-line no-control-regex -- NUL is exactly what no backend stores
  for (const ch of host.replace(/[#\u0000\p{Cs}]/gu, '_')) {
    bytes += Buffer.byteLength(ch, 'utf8');
    if (bytes > MAX_HOST_BYTES) break;
    name += ch;
  }
  return `${name || 'localhost'}:${pid}`;
}

function validateParticipant(id: unknown): string {
  if (typeof id !== 'string' || id.length === 0 || id.includes(SEPARATOR) || Buffer.byteLength(id, 'utf8') > 200) {
    throw new InvalidArgumentError('id', `an election participant id must be a non-empty string of at most 200 bytes without '#'`);
  }
  assertStorable(id, 'id');
  return id;
}
