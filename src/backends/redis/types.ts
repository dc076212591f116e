/**
 * The Redis backend's public types: its options, its waiting ticket and the data of its
 * grants (docs/backends/redis.md).
 */
import type { InboxDirectory, InboxMark } from '../redis-wire/inbox.js';

/** Options of `RedisBackend` (backend.ts). */
export interface RedisBackendOptions {
  /** Prefix of every key and channel. @default 'locksmith:' */
  readonly prefix?: string;
  /** Bound on one command (script) round trip before `BackendUnavailableError`. @default 5000 */
  readonly commandTimeoutMs?: number;
  /**
   * While anybody waits, the subscriber connection is pinged this often; a failed ping wakes
   * every waiter for a re-check, so a lost notification costs at most about this long.
   * @default 250
   */
  readonly healthCheckMs?: number;
  /** Quit `client` on `close()` (set when the backend created it from a URL). @default false */
  readonly ownsClient?: boolean;
  /** Label used in error messages (the redacted URL). */
  readonly label?: string;
  /** Secrets (the URL's password) that must never appear in an error message. */
  readonly secrets?: readonly string[];
  /**
   * Where this backend lists its inbox, and where its releases look for the waiter they
   * messaged: this backend's next acquire of that lock waits until a listed waiter heard its
   * message (docs/backends/redis.md, "Waiting by notification"); the release itself does not.
   * @default `InboxDirectory.process`, shared by every backend of this process
   */
  readonly inboxes?: InboxDirectory;
}

/** The queue position of a waiting acquisition and the wake-up state it saw. */
export interface RedisTicket {
  readonly waiterId: string;
  /** ms until the earliest holder or queue entry runs out (-1: none). */
  readonly hintMs: number;
  /** Longest wait without a message: the waiter refreshes its queue entry at least this often. */
  readonly capMs: number;
  readonly mark: InboxMark;
  /** Local monotonic time the attempt was sent, and the server time (ms) it was answered at. */
  readonly sentAt: number;
  readonly serverMs: number;
  /**
   * The attempt's random secret, stored in its queue entry: a release that hands this waiter
   * the lock puts it in the message ('' when the request cannot be handed the lock).
   */
  readonly secret: string;
  /** The lock's last fencing token when the attempt was answered: a hand-off is above it. */
  readonly lastToken: bigint;
  /** The attempt's round trip (ms): what a claim of a hand-off is expected to take. */
  readonly rttMs: number;
}

/** What the backend keeps in `Grant.data`: the hash field of the hold. */
export interface RedisGrantData {
  readonly field: string;
}
