/**
 * The quorum fan-out: one operation sent to every master at once (never one after the
 * other: a dead master costs its short per-node timeout, not the sum of them), each reply
 * classified as granted, refused, error or timeout. See docs/backends/redlock.md.
 */
import { BackendUnavailableError, InvalidArgumentError, QuorumError, type NodeResult } from '../kit.js';
import type { RedisSubscriberClient } from '../redis-wire/clients.js';
import type { RedisCommands } from '../redis-wire/commands.js';

/** One independent master. */
export interface RedlockNode {
  /** `host:port`, for messages and {@link NodeResult}s. */
  readonly label: string;
  /** Scripts on this master, each bounded by the per-node timeout. */
  readonly commands: RedisCommands;
  /** A second connection for pub/sub wake-ups (opened at the first wait). */
  readonly subscriber: () => RedisSubscriberClient;
}

/** What one master did with one operation. */
export interface NodeReply<T> {
  readonly node: RedlockNode;
  /** `pending`: not answered yet when a quorum-bounded {@link fanOut} resolved. */
  readonly outcome: 'granted' | 'refused' | 'error' | 'timeout' | 'pending';
  /** The classified reply (granted and refused only). */
  readonly value?: T;
  readonly error?: unknown;
}

/** ⌊N/2⌋ + 1: every two sets of this size share a master. */
export function majority(n: number): number {
  return Math.floor(n / 2) + 1;
}

/**
 * Send `op` to every node at once and classify each reply: `classify` says whether the
 * master granted (`ok`) and what it answered. Never rejects: a failure is a reply.
 *
 * With `quorum`, resolves as soon as that many masters granted (the others' replies are
 * `pending` in the result and settle in the background): an operation that has its majority
 * does not wait for the slowest master. Otherwise it waits for every reply.
 */
export function fanOut<T>(
  nodes: readonly RedlockNode[],
  op: (node: RedlockNode) => Promise<unknown>,
  classify: (reply: unknown) => { readonly ok: boolean; readonly value: T },
  quorum = Number.POSITIVE_INFINITY,
): Promise<NodeReply<T>[]> {
  return new Promise((resolve) => {
    const replies: NodeReply<T>[] = nodes.map((node) => ({ node, outcome: 'pending' }));
    let left = nodes.length;
    let yes = 0;
    let done = false;
    const settle = (i: number, reply: NodeReply<T>): void => {
      replies[i] = reply;
      left -= 1;
      if (reply.outcome === 'granted') yes += 1;
      if (!done && (left === 0 || yes >= quorum)) {
        done = true;
        resolve([...replies]);
      }
    };
    if (nodes.length === 0) resolve([]);
    nodes.forEach((node, i) => {
      let sent: Promise<unknown>;
      try {
        sent = op(node);
      } catch (error) {
        sent = Promise.reject(error);
      }
      sent.then(
        (raw) => {
          const { ok, value } = classify(raw);
          settle(i, { node, outcome: ok ? 'granted' : 'refused', value });
        },
        (error: unknown) => settle(i, { node, outcome: isTimeout(error) ? 'timeout' : 'error', error }),
      );
    });
  });
}

/** Replies that granted. */
export function granted<T>(replies: readonly NodeReply<T>[]): NodeReply<T>[] {
  return replies.filter((r) => r.outcome === 'granted');
}

/** Number of replies that granted (no array built: it is counted on every attempt and release). */
export function countGranted(replies: readonly NodeReply<unknown>[]): number {
  let n = 0;
  for (const r of replies) if (r.outcome === 'granted') n += 1;
  return n;
}

/** Number of masters that gave no usable answer. */
export function failures(replies: readonly NodeReply<unknown>[]): number {
  return replies.filter((r) => r.outcome === 'error' || r.outcome === 'timeout').length;
}

/** True when so many masters failed that the others can never form a majority. */
export function quorumUnreachable(replies: readonly NodeReply<unknown>[]): boolean {
  return replies.length - failures(replies) < majority(replies.length);
}

/** Every node's result, as {@link QuorumError} carries it. */
export function nodeResults(replies: readonly NodeReply<unknown>[]): NodeResult[] {
  return replies.map((r) => ({
    node: r.node.label,
    ok: r.outcome === 'granted',
    outcome: r.outcome === 'pending' ? 'timeout' : r.outcome,
    ...(r.error === undefined ? {} : { error: r.error }),
  }));
}

/** The error of an operation whose quorum was unreachable, naming every master's result. */
export function quorumError(what: string, replies: readonly NodeReply<unknown>[]): QuorumError {
  const nodes = nodeResults(replies);
  const summary = nodes.map((n) => `${n.node}: ${n.outcome ?? (n.ok ? 'granted' : 'refused')}`).join(', ');
  const needed = majority(replies.length);
  return new QuorumError(`redlock ${what}: a majority (${needed} of ${replies.length}) cannot be reached (${summary})`, nodes, {
    context: { backend: 'redlock', needed },
  });
}

/**
 * Default cap on the renewals of one hold. Redlock asks for a limit so that a holder that is
 * alive but stuck cannot keep a lock from everyone forever; 1000 renewals at ttl/3 is about
 * 333 ttls (56 min at the default 10 s): far beyond an ordinary critical section, and a finite
 * bound. See docs/backends/redlock.md, "Renewals".
 */
export const DEFAULT_MAX_EXTENSIONS = 1000;

/**
 * The ttl must be at least this many per-master timeouts: a slow master then eats at most a
 * tenth of the validity per round trip (docs/backends/redlock.md, "Timeouts").
 */
export const TTL_PER_NODE_TIMEOUT = 10;

/** The per-master timeout when none is given. */
export const DEFAULT_NODE_TIMEOUT_MS = 200;

/**
 * The per-master bound of an operation with this ttl: undefined when the configured timeout
 * already keeps the ratio; ttl / 10 when the default does not; an explicit timeout that does
 * not is refused (docs/backends/redlock.md, "Timeouts").
 */
export function nodeBound(ttlMs: number, nodeTimeoutMs: number, explicit: boolean): number | undefined {
  const limit = ttlMs / TTL_PER_NODE_TIMEOUT;
  if (nodeTimeoutMs <= limit) return undefined;
  if (explicit) {
    throw new InvalidArgumentError(
      'nodeTimeoutMs',
      `redlock nodeTimeoutMs (${nodeTimeoutMs} ms) must be at most ttl / ${TTL_PER_NODE_TIMEOUT} (ttl ${ttlMs} ms)`,
      { context: { nodeTimeoutMs, ttlMs } },
    );
  }
  return Math.max(1, Math.floor(limit));
}

/**
 * `p` bounded by `timeoutMs` for one master (undefined: the command layer's own bound is
 * enough); the timeout is classified as such by {@link fanOut}. A reply that lands later is
 * ignored here: the caller's clean-up on that master is queued behind it on the same connection.
 */
export function boundReply<T>(p: Promise<T>, timeoutMs: number | undefined, node: string, what: string): Promise<T> {
  if (timeoutMs === undefined) return p;
  return new Promise<T>((resolve, reject) => {
    let done = false;
    const give = (): void => {
      if (done) return;
      done = true;
      reject(
        new BackendUnavailableError('redlock', `redlock ${what} got no reply within ${timeoutMs} ms (${node})`, {
          context: { timeoutMs, node },
        }),
      );
    };
    // Give up only after the next poll phase: a reply that arrived while the event loop was
    // stalled is read there and is a reply, not a timeout (as in ../redis-wire/commands.ts).
    const timer = setTimeout(() => setImmediate(give), timeoutMs);
    p.then(
      (v) => {
        if (done) return;
        done = true;
        clearTimeout(timer);
        resolve(v);
      },
      (e: unknown) => {
        if (done) return;
        done = true;
        clearTimeout(timer);
        reject(e);
      },
    );
  });
}

/**
 * The back-off after a split vote (docs/backends/redlock.md, "Waiting"): uniform in
 * `[attemptMs, 3 · attemptMs)` plus up to `jitterMs`. Redlock asks for a delay comparably
 * longer than the time to reach a majority, so that the contender that backs off least has
 * time to complete a whole attempt before the others come back; the jitter desynchronises
 * contenders whose attempts take next to no time (one host, loopback).
 */
export function splitBackoffMs(attemptMs: number, jitterMs: number, random: () => number = Math.random): number {
  const attempt = Math.max(0, attemptMs);
  return attempt * (1 + 2 * random()) + jitterMs * random();
}

function isTimeout(err: unknown): boolean {
  return err instanceof BackendUnavailableError && typeof err.context.timeoutMs === 'number';
}
