/**
 * The typed ticket and grant data of the Cassandra backend: one of each per algorithm,
 * told apart by `algorithm` (a backend only ever hands back what it gave).
 */
import type { AcquireRequest, AcquireResult, LockState } from '../kit.js';
import type { FairGrantData, FairTicket } from './fair.js';
import type { ShadowGrantData, ShadowTicket } from './shadow.js';

/** A queue position (fair) or the outcome that chooses the next backoff (shadow). */
export type CassandraTicket = FairTicket | ShadowTicket;

/** What a grant keeps for extend and release. */
export type CassandraGrantData = FairGrantData | ShadowGrantData;

/** What the backend dispatches to: one of the two algorithms. */
export interface LockAlgorithm {
  /** One attempt (see the seam's `tryAcquire`). */
  acquire(req: AcquireRequest<CassandraTicket>): Promise<AcquireResult<CassandraTicket, CassandraGrantData>>;
  /** Until another attempt is worth making. */
  wait(ticket: CassandraTicket | undefined, signal: AbortSignal): Promise<void>;
  /** Leave the queue (idempotent, never throws). */
  cancel(req: AcquireRequest<CassandraTicket>, ticket: CassandraTicket | undefined): Promise<void>;
  /** `ownerId`, a holder of this process, deleted its main cell. */
  released(lockId: string, ownerId: string): void;
  inspect(lockId: string): Promise<LockState>;
  /** The backend closes: forget what the process keeps about this backend's holds. */
  closed(): void;
}
