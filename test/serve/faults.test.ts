/**
 * The nemesis against the service over a real Redis (docs/guarantees.md, "Through the lock
 * service"): a kill -9 of a replica while its sessions hold and others wait, partitions
 * client↔service and service↔backend, and a client paused past its session's ttl. Clients
 * write with the tokens the service gave them; behind a read+write fence no stale write is
 * accepted, no section overlaps, no update is lost and no two leases were valid at once.
 */
import { after, before, test } from 'node:test';
import { startRedis } from '../../scripts/servers/redis.js';
import { useServer } from '../helpers.js';
import { assertSafe } from '../faults/verdict.js';
import { runServeFault, ServiceCluster, type ServeFault } from './fault-run.js';

// Short runs in `npm test`; SERVE_FAULT_CLIENTS / SERVE_FAULT_SECONDS make the longer runs of the figures.
const CLIENTS = Number(process.env.SERVE_FAULT_CLIENTS ?? 3);
const DURATION_MS = Number(process.env.SERVE_FAULT_SECONDS ?? 8) * 1000;
const redis = await useServer(() => startRedis());
let cluster: ServiceCluster;
before(async () => {
  // A short command timeout: a replica cut off from Redis answers 503 soon, and its clients move on.
  cluster = await ServiceCluster.start(`${redis.url}?commandTimeoutMs=500`);
});
after(async () => {
  await cluster.close();
});

const FAULTS: readonly ServeFault[] = ['replica-kill', 'partition-client', 'partition-backend', 'pause'];

for (const fault of FAULTS) {
  test(
    `service over redis: ${fault} — no stale write accepted behind the fence, no overlapping section, no double grant`,
    { timeout: DURATION_MS + 90_000 },
    async (t) => {
      const r = await runServeFault(cluster, fault, CLIENTS, DURATION_MS);
      const { timeline: _timeline, ...figures } = r;
      t.diagnostic(`${fault}: ${JSON.stringify({ ...figures, recoveriesMs: undefined })}`);
      assertSafe(r);
    },
  );
}
