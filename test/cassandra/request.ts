/** A seam request for tests that drive a Cassandra backend directly (not through a locker). */
import type { AcquireRequest } from '../../src/backend.js';
import type { CassandraTicket } from '../../src/backends/cassandra/types.js';
import { seamRequest } from '../helpers.js';

/** A mutex request of `ownerId` on `lockId`: waiting, fair, 10 s ttl, unless `over` says otherwise. */
export function request(
  lockId: string,
  ownerId: string,
  over: Partial<AcquireRequest<CassandraTicket>> = {},
): AcquireRequest<CassandraTicket> {
  return seamRequest<CassandraTicket>(lockId, ownerId, over);
}
