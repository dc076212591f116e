/**
 * The shared conformance suite: the same behaviours, asserted against every backend running
 * on a real engine. The capabilities come from the backend itself (a probe client asks it
 * before the cases are registered), and decide which cases exist; nothing is skipped at
 * run time.
 *
 * Cases assert behaviour, never timings: waits have generous bounds so a loaded machine
 * does not fail them, and every expiry case waits for the event it is about.
 *
 * Usage, in `test/conformance/<engine>.test.ts` (top-level await):
 * ```ts
 * const server = await useServer(() => startRedis());
 * await conformance({ name: 'redis', createLocker: (o) => createLocker(server.url, o) });
 * ```
 */
import assert from 'node:assert/strict';
import { after, afterEach, describe, test } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { randomBytes } from 'node:crypto';
import type { Locker, LockerOptions } from '../../src/index.js';
import type { Capabilities } from '../../src/backend.js';
import { abandon } from '../../src/testing.js';
import { exclusionCases } from './cases/exclusion.js';
import { waitCases } from './cases/waits.js';
import { handleCases } from './cases/handle.js';
import { ruleCases } from './cases/rules.js';
import { seamCases } from './cases/seam.js';
import { leaseCases } from './cases/leases.js';
import { reentryCases } from './cases/reentry.js';
import { kindCases } from './cases/kinds.js';
import { inputCases } from './cases/input.js';
import { electionCases } from './cases/election.js';
import { edgeCases } from './cases/edges.js';
import { sequencerCases } from './cases/sequencer.js';
import { observeCases } from './cases/observe.js';
import { lockAllCases } from './cases/lock-all.js';
import { runOnceCases } from './cases/run-once.js';
import { loggingCases } from './cases/logging.js';

/** What a backend's test file hands to {@link conformance}. */
export interface ConformanceTarget {
  /** Engine name shown in test titles. */
  readonly name: string;
  /** A new, independent client (its own connections) of the engine under test. */
  createLocker(options?: Partial<LockerOptions>): Locker;
  /** Shortest ttl the engine handles reliably in expiry cases (default 500 ms). */
  readonly shortTtlMs?: number;
  /** Make a holder vanish without releasing (default: `abandon(locker)`). */
  crash?(locker: Locker): Promise<void>;
  /**
   * A URL of this engine's scheme pointing at `127.0.0.1:port`, where a server accepts
   * connections and never answers (the connect-phase cases). Omit for in-process engines.
   */
  blackHoleUrl?(port: number): string;
  /** The password in the engine's URL, if it has one: no log line may show it. */
  readonly secret?: string;
}

/** What every group of cases gets. */
export interface SuiteContext {
  readonly target: ConformanceTarget;
  readonly caps: Capabilities;
  /** The optional seam methods of seeing and breaking locks the backend has. */
  readonly observe: { readonly list: boolean; readonly forceRelease: boolean };
  readonly shortTtl: number;
  /** A fresh client, closed after the case. */
  client(options?: Partial<LockerOptions>): Locker;
  /** A lock id no other case (or earlier run on the same server) uses. */
  id(label: string): string;
  crash(locker: Locker): Promise<void>;
}

/** Generous per-case bound: cases wait for events, this only stops a hung case. */
export const T = { timeout: 120_000 };

/** Register the conformance cases for `target` (await it at module top level). */
export async function conformance(target: ConformanceTarget): Promise<void> {
  const probe = target.createLocker();
  const probed = await probe.backend();
  const caps = { ...probed.capabilities };
  const observe = { list: typeof probed.list === 'function', forceRelease: typeof probed.forceRelease === 'function' };
  await probe.close();

  const open: Locker[] = [];
  const unhandled: unknown[] = [];
  const onUnhandled = (reason: unknown): void => {
    unhandled.push(reason);
  };
  process.on('unhandledRejection', onUnhandled);
  const ctx: SuiteContext = {
    target,
    caps,
    observe,
    shortTtl: target.shortTtlMs ?? 500,
    client: (options) => {
      const l = target.createLocker(options);
      open.push(l);
      return l;
    },
    id: (label) => `conf:${label}:${randomBytes(6).toString('hex')}`,
    crash: (l) => (target.crash ? target.crash(l) : abandon(l)),
  };

  describe(`conformance: ${target.name}`, () => {
    afterEach(async () => {
      await Promise.allSettled(open.splice(0).map((l) => l.close()));
    });
    exclusionCases(ctx);
    waitCases(ctx);
    handleCases(ctx);
    ruleCases(ctx);
    seamCases(ctx);
    leaseCases(ctx);
    reentryCases(ctx);
    kindCases(ctx);
    inputCases(ctx);
    electionCases(ctx);
    edgeCases(ctx);
    sequencerCases(ctx);
    observeCases(ctx);
    lockAllCases(ctx);
    runOnceCases(ctx);
    loggingCases(ctx);

    after(() => {
      process.off('unhandledRejection', onUnhandled);
    });

    test('no unhandled rejection during the whole run', async () => {
      await sleep(50);
      assert.deepEqual(unhandled, []);
    });
  });
}
