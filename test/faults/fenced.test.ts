/**
 * The `locksmith-dlm/fenced` helpers under the nemesis (docs/recipes/fencing.md): workers
 * contend for a Redis lock, the holder is paused past its lease again and again, and every
 * section writes the counter through `fencedUpdatePostgres`, `fencedUpdateMysql` (MariaDB) or
 * `fencedGet` + `fencedSet` (a separate Redis) before the fault suite's own fenced store.
 * The guarded store records what the helper let through (./guard.ts): no write with a token
 * older than one it already accepted may be among them.
 */
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import type { RunningServer } from '../../scripts/servers/harness.js';
import { startMariaDb } from '../../scripts/servers/mariadb.js';
import { startPostgres } from '../../scripts/servers/postgres.js';
import { startRedis } from '../../scripts/servers/redis.js';
import { auditGuard, prepareGuard, type GuardConfig } from './guard.js';
import { PROFILES, prepare } from './profiles.js';
import { runFault } from './run.js';

const profile = PROFILES['redis'];
if (!profile) throw new Error('no redis fault profile');
let lockServer: RunningServer | undefined;
before(
  async () => {
    lockServer = await profile.start();
    await prepare(profile.tune(lockServer.url));
  },
  { timeout: 120_000 },
);
after(async () => {
  await lockServer?.stop();
});

const STORES: Record<GuardConfig['kind'], () => Promise<RunningServer>> = {
  postgres: () => startPostgres(),
  mysql: () => startMariaDb(),
  redis: () => startRedis(),
};

for (const kind of Object.keys(STORES) as GuardConfig['kind'][]) {
  test(
    `fenced helper on ${kind === 'mysql' ? 'MariaDB' : kind}: paused holders past their lease, no stale write accepted`,
    { timeout: 180_000 },
    async () => {
      if (!lockServer) throw new Error('the lock server did not start');
      const store = await STORES[kind]();
      try {
        const guard: GuardConfig = { kind, url: store.url };
        await prepareGuard(guard);
        const r = await runFault({
          profile,
          url: lockServer.url,
          server: lockServer,
          fault: 'pause',
          mode: 'reads-and-writes',
          clients: 3,
          durationMs: 6_000,
          // Long enough that a pause usually lands inside the section, between read and write.
          criticalMs: 100,
          guard,
        });
        if (r.skipped !== undefined) throw new Error(r.skipped);
        const audit = await auditGuard(guard);
        const { timeline, ...figures } = r;
        const shown = `${JSON.stringify({ audit, ...figures })}\n${timeline}`;
        assert.ok(r.faults > 0, `the fault was injected: ${shown}`);
        assert.ok(audit.accepted > 0, `the helper accepted writes: ${shown}`);
        assert.equal(audit.staleAccepted, 0, shown);
        assert.equal(r.staleWrites, 0, shown);
        assert.equal(r.unhandled, 0, shown);
        console.log(`fenced ${kind}: ${JSON.stringify(audit)} over ${r.faults} pauses`);
      } finally {
        await store.stop();
      }
    },
  );
}
