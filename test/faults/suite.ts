/**
 * The fault suite of one backend: its engine started once, then every fault of the nemesis
 * that applies to its profile, each a short run with a read+write fence, asserting the safety
 * invariants on the checker's figures. A backend's test file is one call.
 */
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import type { RunningServer } from '../../scripts/servers/harness.js';
import { FAULTS, type Fault, type FaultName } from './nemesis.js';
import { PROFILES, prepare, type FaultProfile } from './profiles.js';
import { runFault } from './run.js';
import type { Figures } from './checker.js';
import { assertSafe } from './verdict.js';

/** Sizes of the short runs inside `npm test`. */
export interface SuiteOptions {
  readonly clients?: number;
  readonly durationMs?: number;
}

/** Register the fault tests of the backend named `name` (a key of PROFILES). */
export function faultSuite(name: string, options: SuiteOptions = {}): void {
  const profile = PROFILES[name];
  if (!profile) throw new Error(`no fault profile '${name}'`);
  let server: RunningServer | undefined;
  before(
    async () => {
      server = await profile.start();
      await prepare(profile.tune(server.url));
    },
    { timeout: 600_000 },
  );
  after(async () => {
    await server?.stop();
  });
  const applicable = (Object.keys(FAULTS) as FaultName[]).filter((f) => FAULTS[f].skip(profile, true) === undefined);
  for (const fault of applicable) {
    const f: Fault = FAULTS[fault];
    const soakOnly = f.soakOnly?.(profile);
    if (soakOnly !== undefined) {
      // Too slow for `npm test`, not skipped: the soak runs it; this test checks that it would.
      test(`${name}: ${fault} — not run in npm test: ${soakOnly}`, (t) => {
        assert.equal(f.skip(profile, true), undefined, `the soak would not run ${fault} on ${name}`);
        t.diagnostic(`${name}: ${fault} is run by \`npm run faults -- --backend ${name} --faults ${fault}\``);
      });
      continue;
    }
    // Where the lock's own promise may break (a server clock running ahead), double grants
    // are reported, not asserted; every fence assertion stays.
    const grants = f.mayDoubleGrant === undefined ? 'no double grant' : 'double grants counted';
    test(
      `${name}: ${fault} — no stale write accepted, no update lost behind a read+write fence, ${grants}`,
      { timeout: 240_000 },
      async (t) => {
        if (!server) throw new Error(`${name} did not start`);
        const r = await shortRun(profile, server, fault, options);
        if (f.mayDoubleGrant !== undefined) {
          t.diagnostic(`${name}: ${fault}: ${r.doubleGrants} double grants, ${r.rejected} stale operations refused by the fence`);
        }
      },
    );
  }
}

/** One short run of `fault` behind a read+write fence, asserting every safety invariant. */
async function shortRun(profile: FaultProfile, server: RunningServer, fault: FaultName, options: SuiteOptions): Promise<Figures> {
  const r = await runFault({
    profile,
    url: server.url,
    server,
    fault,
    mode: 'reads-and-writes',
    clients: options.clients ?? 3,
    durationMs: options.durationMs ?? 6_000,
  });
  if (r.skipped !== undefined) throw new Error(`not applicable: ${r.skipped}`);
  const f: Fault = FAULTS[fault];
  const shown = assertSafe(r, { doubleGrants: f.mayDoubleGrant === undefined });
  if (fault === 'client-kill') {
    const bound = profile.freeBoundMs();
    for (const ms of r.recoveriesMs) assert.ok(ms <= bound, `a crashed holder's lock freed after ${ms} ms > ${bound} ms: ${shown}`);
  }
  return r;
}
