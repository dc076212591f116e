/**
 * The typed ticket and grant data of the Cassandra backend (the fair lock's), defined here
 * where nothing feeds back into them: the algorithm's files import them, never the reverse.
 * See docs/backends/cassandra.md, "The fair algorithm".
 */
import type { LocalWaiter } from './handoff.js';

/** A main cell written ahead of time, with the token taken after it. */
export interface Candidate {
  /** The shard of the cell (the counter's shard when it was written). */
  readonly shard: bigint;
  readonly token: bigint;
  /** Monotonic ms when the last full write of the cell was sent, and its TTL. */
  sentAt: number;
  ttlSec: number;
  /** When its last mark was written (time-service ms): the hold's start once it holds. */
  acquiredMs: bigint;
}

/** A waiting acquisition of the fair lock (mutable: the backend updates it each attempt). */
export interface FairTicket {
  readonly algorithm: 'fair';
  readonly entry: string;
  readonly waiter: LocalWaiter;
  /** The shard the entry lives in, when its write was last sent, and its TTL. */
  queueShard: bigint;
  queueSentAt: number;
  ttlSec: number;
  /** The counter's shard at the last look (where the next look reads first). */
  shard: bigint;
  /** Entries ahead at the last look (capped): waiters further back poll less often. */
  ahead: number;
  /** The owner of the marked cell seen at the last look (the holder we wait behind), and since when. */
  holder: string | undefined;
  holderSince: number;
  /** The fencing counter at the last look, when, and the lock's time per grant (see {@link observe}). */
  counter: bigint;
  counterAt: number;
  perGrantMs: number;
  candidate: Candidate | undefined;
}

/** What a fair grant keeps for extend and release. */
export interface FairGrantData {
  readonly algorithm: 'fair';
  readonly shard: bigint;
  readonly queueShard: bigint;
  readonly entry: string;
  /** When the main cell's last write was sent, and its TTL (see `surelyAlive`). */
  sentAt: number;
  ttlSec: number;
  /** The holder's identity and when the hold began: rewritten unchanged with every renewal. */
  readonly identity: string;
  readonly acquiredMs: bigint;
  /** Every rewrite of the main cell keeps it this much past the lease (docs/backends/cassandra.md, "Lock-delay"). */
  readonly lockDelayMs: number;
}

/** What the core hands back on the next attempt: a queue position. */
export type CassandraTicket = FairTicket;

/** What a grant keeps for extend and release. */
export type CassandraGrantData = FairGrantData;
