/**
 * Redlock over N independent Redis masters, as docs/backends/redlock.md describes it: the
 * lease is sent to all masters at once with a short per-node timeout; the attempt wins with
 * a majority and a positive validity; otherwise it is taken back from ALL masters. Each
 * master runs the compare-and-set scripts of scripts.ts through the per-node command layer
 * shared with the Redis backend (../redis-wire/commands.ts); tokens come from a max-register (token.ts);
 * waiters are woken over pub/sub from any master (wake.ts).
 */
import { randomBytes } from 'node:crypto';
import { performance } from 'node:perf_hooks';
import {
  backendLog,
  BackendUnavailableError,
  InvalidArgumentError,
  logRoundTrips,
  logWake,
  wakeClock,
  LockLostError,
  raceAbort,
  sleep,
  type AcquireRequest,
  type AcquireResult,
  type Backend,
  type Capabilities,
  type Extension,
  type Grant,
  type LockState,
} from '../kit.js';
import { UnsupportedError } from '../../errors.js';
import { closeClient, type RedisClientLike, type RedisSubscriberClient } from '../redis-wire/clients.js';
import { RedisCommands } from '../redis-wire/commands.js';
import type { ListPage, ListRequest } from '../../backend.js';
import { lockIdAt } from '../redis-wire/keys.js';
import { lockPattern, readCursor, scanPage, writeCursor, type Scan } from '../redis-wire/scan.js';
import { classifyInspect, endedHolds, firstHolding, stateOf, type InspectReply } from './observe.js';
import {
  boundReply,
  countGranted,
  DEFAULT_MAX_EXTENSIONS,
  DEFAULT_NODE_TIMEOUT_MS,
  fanOut,
  granted,
  majority,
  nodeBound,
  quorumError,
  quorumUnreachable,
  splitBackoffMs,
  type NodeReply,
  type RedlockNode,
} from './quorum.js';
import { ACQUIRE, EXTEND, FORCE, INSPECT, INSPECT_MANY, RELEASE, type LuaScript } from './scripts.js';
import { TokenRegister, type AcquireReply } from './token.js';
import { keysAt, RedlockKeyCache } from './keys.js';
import { Wakeups, type Watch } from './wake.js';

const log = backendLog('redlock');

/** Options of {@link RedlockBackend}. */
export interface RedlockBackendOptions {
  /** Prefix of every key and channel. @default 'locksmith:' */
  readonly prefix?: string;
  /**
   * Bound on one master's reply; a dead master costs this much, not the ttl. Must be at most
   * ttl / 10 (TTL_PER_NODE_TIMEOUT) (a longer ttl is refused with `InvalidArgumentError`);
   * left unset, it is 200 ms, or ttl / 10 for a ttl under 2 s. @default 200
   */
  readonly nodeTimeoutMs?: number;
  /** Clock drift allowance per ms of ttl (Redlock's `ttl · driftFactor + 2 ms`). @default 0.01 */
  readonly driftFactor?: number;
  /** Renewals allowed per hold; the next one gives the lock up. @default {@link DEFAULT_MAX_EXTENSIONS} */
  readonly maxExtensions?: number;
  /** Random extra delay (up to this) over the attempt-scaled back-off after a split vote. @default 50 */
  readonly retryJitterMs?: number;
  /** Longest wait without a message before re-attempting. @default 1000 */
  readonly pollMs?: number;
  /** Disconnect the clients on `close()` (set when the backend created them from a URL). @default false */
  readonly ownsClients?: boolean;
  /** One label per client (`host:port`) for messages and node results. */
  readonly labels?: readonly string[];
  /** Secrets that must never appear in a message. */
  readonly secrets?: readonly string[];
  /** One pub/sub connection factory per client. @default `client.duplicate()` */
  readonly subscribers?: readonly (() => RedisSubscriberClient)[];
}

/** The queue-less ticket of a waiting acquisition: its subscription and what it had seen. */
export interface RedlockTicket {
  readonly watch: Watch;
  readonly seen: number;
  readonly subscribed: boolean;
  /** ms until the lock is expected to free up (-1: unknown). */
  readonly hintMs: number;
  /** The last attempt was a split vote: retry after a random delay (Redlock's back-off). */
  readonly split: boolean;
  /** How long the last attempt took (ms): the back-off after a split vote scales with it. */
  readonly attemptMs: number;
}

/** What a grant carries: the random value the masters hold, and its renewals so far. */
export interface RedlockGrantData {
  readonly value: string;
  extensions: number;
  /** The grant's lock-delay: its lease keys outlive the lease by this much (docs/backends/redlock.md). */
  readonly lockDelayMs: number;
}

/** How {@link RedlockBackend} releases a value on the masters. */
interface ReleaseHow {
  /** By source (EVAL), for clean-ups that may queue behind a command that timed out (../redis-wire/commands.ts). */
  readonly bySource?: boolean;
  /** Resolve once this many masters deleted it (the others settle in the background). */
  readonly quorum?: number;
  /** Keep the lock-delay of a lease that ran out (a holder's release). */
  readonly delayed?: boolean;
  /** Only these masters. @default every master */
  readonly nodes?: readonly RedlockNode[];
}

/** Redlock's capabilities: a mutex with notifications; no queue, no shared kinds, no server-side re-entry. */
export const REDLOCK_CAPABILITIES: Capabilities = Object.freeze({
  fair: false,
  shared: false,
  permits: false,
  notify: true,
  lockDelay: true,
  reentrant: false,
});

/**
 * Locks on N independent Redis masters (N ≥ 1; odd recommended). Accepts the user's own
 * ioredis clients, one per master; see {@link RedlockBackendOptions}.
 */
export class RedlockBackend implements Backend<RedlockTicket, RedlockGrantData> {
  readonly name = 'redlock';
  readonly capabilities: Capabilities = REDLOCK_CAPABILITIES;

  readonly #clients: readonly RedisClientLike[];
  readonly #nodes: readonly RedlockNode[];
  readonly #quorum: number;
  readonly #prefix: string;
  readonly #driftFactor: number;
  readonly #maxExtensions: number;
  readonly #retryJitterMs: number;
  readonly #nodeTimeoutMs: number;
  readonly #explicitTimeout: boolean;
  readonly #pollMs: number;
  readonly #ownsClients: boolean;
  readonly #tokens = new TokenRegister();
  readonly #keys: RedlockKeyCache;
  readonly #wake: Wakeups;
  #closed = false;
  /** A holder's release options, built once (no object per release). */
  readonly #holderRelease: ReleaseHow;
  readonly #delayedRelease: ReleaseHow;

  /** One client per independent master. */
  constructor(clients: readonly RedisClientLike[], options: RedlockBackendOptions = {}) {
    if (clients.length === 0) throw new InvalidArgumentError('clients', 'redlock needs at least one Redis master');
    this.#clients = clients;
    this.#prefix = options.prefix ?? 'locksmith:';
    this.#keys = new RedlockKeyCache(this.#prefix);
    this.#driftFactor = options.driftFactor ?? 0.01;
    this.#maxExtensions = options.maxExtensions ?? DEFAULT_MAX_EXTENSIONS;
    this.#nodeTimeoutMs = options.nodeTimeoutMs ?? DEFAULT_NODE_TIMEOUT_MS;
    this.#explicitTimeout = options.nodeTimeoutMs !== undefined;
    this.#retryJitterMs = options.retryJitterMs ?? 50;
    this.#pollMs = options.pollMs ?? 1_000;
    this.#ownsClients = options.ownsClients ?? false;
    this.#nodes = clients.map((client, i) => {
      const label = options.labels?.[i] ?? `redlock node ${i}`;
      const commands = new RedisCommands(client, {
        engine: 'redlock',
        timeoutMs: this.#nodeTimeoutMs,
        label,
        ...(options.secrets ? { secrets: options.secrets } : {}),
      });
      return { label, commands, subscriber: options.subscribers?.[i] ?? (() => client.duplicate()) };
    });
    this.#quorum = majority(clients.length);
    this.#holderRelease = Object.freeze({ quorum: this.#quorum });
    this.#delayedRelease = Object.freeze({ quorum: this.#quorum, delayed: true });
    this.#wake = new Wakeups(this.#nodes, this.#quorum);
    logRoundTrips(this, log);
  }

  /** The masters, by label, in the order given. */
  get nodes(): readonly string[] {
    return this.#nodes.map((n) => n.label);
  }

  async tryAcquire(req: AcquireRequest<RedlockTicket>): Promise<AcquireResult<RedlockTicket, RedlockGrantData>> {
    this.#assertOpen();
    const value = req.freshOwner ? req.ownerId : `${req.ownerId}\0${randomBytes(9).toString('base64url')}`;
    // What the watch had seen BEFORE the attempt is sent: a release announced while the attempt
    // is in flight must still end the wait that follows, or this client sleeps until its poll.
    const seen = req.ticket?.watch.seen ?? 0;
    const subscribed = req.ticket?.watch.subscribed ?? false;
    const keys = this.#keys.of(req.lockId).all;
    const who = this.#keys.who(req.lockId, req.identity);
    const bound = nodeBound(req.ttlMs, this.#nodeTimeoutMs, this.#explicitTimeout);
    const t1 = performance.now();
    const proposal = this.#tokens.propose(req.lockId);
    // One argument list for every master (the command layer only reads it).
    const args = [value, req.ttlMs, proposal.toString(), who, req.lockDelayMs];
    const sent = fanOut(
      this.#nodes,
      (n) => boundReply(n.commands.eval(ACQUIRE, keys, args), bound, n.label, 'acquire'),
      classifyAcquire,
      this.#quorum,
    );
    let replies: NodeReply<AcquireReply>[];
    try {
      replies = await raceAbort(sent, req.signal);
    } catch (err) {
      // Aborted in flight. A release sent now runs on each master after the attempt (in order
      // on its connection): the answering masters are freed at once, a paused one when it
      // resumes. The core's cancel does it for a fresh owner, whose value it knows; an
      // explicit owner's carries a random part only this attempt knows.
      if (!req.freshOwner) void this.#releaseAll(req.lockId, value, { bySource: true }).catch(() => undefined);
      // Once the replies are in, again: an attempt re-sent after NOSCRIPT lands after the first.
      void sent.then(() => this.#releaseAll(req.lockId, value, { bySource: true })).catch(() => undefined);
      throw err;
    }
    const yes = countGranted(replies);
    if (log.enabled) log('%s: %d of %d masters granted (quorum %d)', req.lockId, yes, replies.length, this.#quorum);
    const settled = yes >= this.#quorum ? this.#tokens.settle(req.lockId, proposal, replies, this.#fenceWrite(req, value)) : undefined;
    const token = settled instanceof Promise ? await settled : settled;
    const grant = token === undefined ? undefined : this.#grantOf(req, value, token, t1);
    const attemptMs = performance.now() - t1;
    if (grant) {
      if (req.ticket) this.#wake.unwatch(req.ticket.watch);
      return { granted: true, grant };
    }
    // Redlock step 5: no majority (or no validity left): unlock ALL masters, even those
    // that seemed to refuse or did not answer.
    await this.#releaseAll(req.lockId, value);
    if (quorumUnreachable(replies)) throw quorumError(`acquire of '${req.lockId}'`, replies);
    if (!req.wait) return { granted: false, contended: { ticket: undefined } };
    const watch = req.ticket?.watch ?? this.#wake.watch(this.#keys.of(req.lockId).channel);
    const ticket = { watch, seen, subscribed, hintMs: hintOf(replies), split: yes > 0, attemptMs };
    return { granted: false, contended: { ticket } };
  }

  /** Phase 2's write of the token on one master (token.ts), bounded like the attempt. */
  #fenceWrite(req: AcquireRequest<RedlockTicket>, value: string): (n: RedlockNode, s: LuaScript, t: bigint) => Promise<unknown> {
    return (n, s, t) => {
      const bound = nodeBound(req.ttlMs, this.#nodeTimeoutMs, this.#explicitTimeout);
      return boundReply(n.commands.eval(s, this.#keys.of(req.lockId).fence, [value, t.toString()]), bound, n.label, 'token write');
    };
  }

  /** The grant of an attempt whose token a majority stored, or undefined when no validity is left. */
  #grantOf(req: AcquireRequest<RedlockTicket>, value: string, token: bigint, t1: number): Grant<RedlockGrantData> | undefined {
    // Redlock step 3: the time spent reaching the masters (and writing the token) must leave
    // a positive validity; a grant with none is never returned.
    if (req.ttlMs - (performance.now() - t1) - this.#drift(req.ttlMs) <= 0) return undefined;
    // The masters set their keys after the core sent the request: its send time plus the
    // ttl is a safe end (docs/backends/redlock.md, "Validity").
    return {
      lockId: req.lockId,
      kind: req.kind,
      ownerId: req.ownerId,
      token,
      ttlMs: req.ttlMs,
      reentered: false,
      data: { value, extensions: 0, lockDelayMs: req.lockDelayMs },
    };
  }

  #drift(ttlMs: number): number {
    return ttlMs * this.#driftFactor + 2;
  }

  /**
   * Compare-and-delete on every master (or `how.nodes`) at once; resolves with the replies.
   */
  #releaseAll(lockId: string, value: string, how: ReleaseHow = {}): Promise<NodeReply<undefined>[]> {
    const { bySource = false, quorum, delayed = false, nodes = this.#nodes } = how;
    const { lease: keys, channel } = this.#keys.of(lockId);
    // A holder's release keeps the lock-delay of a lease that ran out; a failed attempt's never does.
    const args = delayed ? [value, channel, '1'] : [value, channel];
    return fanOut(
      nodes,
      (n) => (bySource ? n.commands.evalSource(RELEASE, keys, args) : n.commands.eval(RELEASE, keys, args)),
      (reply) => ({ ok: reply === 1, value: undefined }),
      quorum,
    );
  }

  /**
   * Resolve when another attempt is worth making: a release published on any master, the
   * expected expiry of the holder's keys, a random delay after a split vote, or the
   * fallback poll (with jitter) at the latest.
   */
  async waitForChange(lockId: string, ticket: RedlockTicket | undefined, signal: AbortSignal): Promise<void> {
    signal.throwIfAborted();
    this.#assertOpen();
    const jitter = Math.random() * this.#retryJitterMs;
    if (!ticket) return sleep(jitter, signal);
    // After a split vote every contender backs off for a random time comparable to an
    // attempt, so that one of them can complete a whole attempt alone.
    if (ticket.split) return sleep(splitBackoffMs(ticket.attemptMs, this.#retryJitterMs), signal);
    const poll = this.#pollMs * (0.8 + 0.4 * Math.random());
    const delay = ticket.hintMs > 0 ? Math.min(ticket.hintMs + 1 + jitter, poll) : poll;
    const since = wakeClock(log);
    logWake(log, lockId, await this.#wake.wait(ticket.watch, ticket.seen, ticket.subscribed, delay, signal), since);
  }

  /** Stop watching; for a fresh owner also take back whatever an unanswered attempt left. */
  async cancel(req: AcquireRequest<RedlockTicket>, ticket: RedlockTicket | undefined): Promise<void> {
    if (ticket) this.#wake.unwatch(ticket.watch);
    if (!req.freshOwner || this.#closed) return;
    // A master that still owes a reply to an earlier command (a paused one, sitting on the
    // abandoned attempt) runs this release after it, in order on its connection, whenever it
    // answers: waiting for it would hold the caller for the whole per-master timeout.
    const owing: RedlockNode[] = [];
    const answering: RedlockNode[] = [];
    for (const n of this.#nodes) (n.commands.owing ? owing : answering).push(n);
    if (owing.length > 0) void this.#releaseAll(req.lockId, req.ownerId, { bySource: true, nodes: owing }).catch(() => undefined);
    await this.#releaseAll(req.lockId, req.ownerId, { bySource: true, nodes: answering });
  }

  async extend(grant: Grant<RedlockGrantData>, ttlMs: number): Promise<Extension> {
    this.#assertOpen();
    if (grant.data.extensions >= this.#maxExtensions) {
      throw new LockLostError(grant.lockId, 'expired', { context: { backend: this.name, maxExtensions: this.#maxExtensions } });
    }
    const keys = this.#keys.of(grant.lockId).lease;
    const bound = nodeBound(ttlMs, this.#nodeTimeoutMs, this.#explicitTimeout);
    const t1 = performance.now();
    const args = [grant.data.value, ttlMs, grant.data.lockDelayMs];
    const replies = await fanOut(
      this.#nodes,
      (n) => boundReply(n.commands.eval(EXTEND, keys, args), bound, n.label, 'extend'),
      (reply) => ({ ok: reply === 1, value: undefined }),
      this.#quorum,
    );
    const yes = granted(replies).length;
    const refused = replies.filter((r) => r.outcome === 'refused').length;
    if (refused > replies.length - this.#quorum) {
      throw new LockLostError(grant.lockId, 'not-held', { context: { backend: this.name, refused } });
    }
    if (yes < this.#quorum) throw quorumError(`extend of '${grant.lockId}'`, replies);
    // A majority renewed, but only a renewal inside its own validity counts.
    if (ttlMs - (performance.now() - t1) - this.#drift(ttlMs) <= 0) {
      throw new BackendUnavailableError(this.name, `redlock extend of '${grant.lockId}' took longer than its validity`);
    }
    grant.data.extensions += 1;
    return { ttlMs };
  }

  async release(grant: Grant<RedlockGrantData>): Promise<boolean> {
    this.#assertOpen();
    const how = grant.data.lockDelayMs > 0 ? this.#delayedRelease : this.#holderRelease;
    const replies = await this.#releaseAll(grant.lockId, grant.data.value, how);
    const deleted = countGranted(replies);
    if (deleted < this.#quorum && quorumUnreachable(replies)) throw quorumError(`release of '${grant.lockId}'`, replies);
    return deleted >= this.#quorum;
  }

  async inspect(lockId: string): Promise<LockState> {
    this.#assertOpen();
    const keys = this.#keys.of(lockId).all;
    const replies = await fanOut(this.#nodes, (n) => n.commands.eval(INSPECT, keys, []), classifyInspect);
    if (quorumUnreachable(replies)) throw quorumError(`inspect of '${lockId}'`, replies);
    return stateOf(lockId, replies, this.#quorum).state;
  }

  /**
   * One page of the held locks: SCAN over each master in turn, one INSPECT fan-out per lock
   * found (docs/backends/redlock.md, "Listing").
   */
  async list(req: ListRequest): Promise<ListPage> {
    this.#assertOpen();
    const scans = this.#clients.map((c, i): Scan => {
      const commands = this.#nodes[i]?.commands;
      if (!c.scan || !commands) throw new UnsupportedError(this.name, 'list() with a client that has no SCAN');
      const scan = c.scan.bind(c);
      return (cursor, pattern, count) => commands.bounded('SCAN', scan(cursor, 'MATCH', pattern, 'COUNT', count));
    });
    const pattern = lockPattern(this.#prefix, req.prefix, ':rl');
    const from = readCursor(req.cursor, scans.length, req.limit);
    const take = async (node: number, keys: readonly string[]): Promise<LockState[]> => {
      const found = await this.#listed(
        node,
        keys.map((key) => key.slice(0, -3)),
      );
      return found.filter((s) => s.lockId.startsWith(req.prefix));
    };
    const { items, next } = await scanPage(scans, from, pattern, req.limit, take, req.signal);
    return { locks: items, cursor: next && writeCursor(next) };
  }

  /**
   * The states of the locks at key bases `bases` that are listed from master `node`'s scan:
   * one INSPECT_MANY per master for all of them.
   */
  async #listed(node: number, bases: readonly string[]): Promise<LockState[]> {
    if (bases.length === 0) return [];
    const keys = bases.flatMap((b) => keysAt(b).all);
    const all = await fanOut(
      this.#nodes,
      (n) => n.commands.eval(INSPECT_MANY, keys, []),
      (reply) => ({ ok: Array.isArray(reply), value: Array.isArray(reply) ? (reply as unknown[]) : [] }),
    );
    if (quorumUnreachable(all)) throw quorumError('list', all);
    const out: LockState[] = [];
    bases.forEach((base, j) => {
      const replies = all.map((r): NodeReply<InspectReply> => {
        const one = r.value?.[j];
        return one === undefined
          ? { node: r.node, outcome: r.outcome }
          : { node: r.node, outcome: r.outcome, value: classifyInspect(one).value };
      });
      if (firstHolding(replies, this.#nodes) !== node) return;
      const known = lockIdAt(this.#prefix, base);
      const { state, storedId } = stateOf(known ?? '', replies, this.#quorum);
      const lockId = known ?? storedId;
      if (lockId !== undefined && state.holders.length > 0) out.push({ ...state, lockId });
    });
    return out;
  }

  /**
   * Break the lock on every master: delete its lease and raise its register one past what it
   * vouched for. Needs a majority, like any Redlock write; resolves the holds a majority held.
   */
  async forceRelease(lockId: string): Promise<number> {
    this.#assertOpen();
    const { all: keys, channel } = this.#keys.of(lockId);
    const replies = await fanOut(
      this.#nodes,
      (n) => n.commands.eval(FORCE, keys, [channel]),
      (reply) => ({ ok: true, value: String(reply ?? '') }),
    );
    if (granted(replies).length < this.#quorum) throw quorumError(`forceRelease of '${lockId}'`, replies);
    return endedHolds(replies, this.#quorum);
  }

  async close(): Promise<void> {
    if (this.#closed) return;
    this.#closed = true;
    this.#wake.close();
    for (const n of this.#nodes) n.commands.close();
    if (!this.#ownsClients) return;
    await Promise.all(this.#clients.map(closeClient));
  }

  /** True after `close()`. */
  get closed(): boolean {
    return this.#closed;
  }

  #assertOpen(): void {
    if (this.#closed) throw new BackendUnavailableError(this.name, 'the redlock backend is closed');
  }
}

function classifyAcquire(reply: unknown): { ok: boolean; value: AcquireReply } {
  const [code, a, b] = Array.isArray(reply) ? (reply as unknown[]) : [reply];
  if (code === 1) return { ok: true, value: { granted: true, register: typeof a === 'number' ? a : String(a), wrote: b === 1 } };
  return { ok: false, value: { granted: false, pttl: Number(a) } };
}

/** When the holder's keys should be gone from enough masters for a majority (-1: unknown). */
function hintOf(replies: readonly NodeReply<AcquireReply>[]): number {
  const ttls = replies
    .map((r) => (r.value && !r.value.granted ? r.value.pttl : -1))
    .filter((t) => t > 0)
    .sort((a, b) => a - b);
  return ttls[0] ?? -1;
}
