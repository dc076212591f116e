/**
 * The safety verdict every fault run must pass, for the library's nemesis and for the lock
 * service's: the fault was injected, the workload progressed, no stale operation was accepted
 * behind the fence, no update lost, no overlapping section, no unhandled rejection, no worker
 * left behind (docs/guarantees.md, "Fault tests").
 */
import assert from 'node:assert/strict';
import type { Figures } from './checker.js';

/**
 * Assert the verdict on `r`; double grants count too unless the fault may cause them (a
 * server's clock moved: the fence must hold, the lock's own promise cannot). Returns the
 * figures and timeline as shown in failures.
 */
export function assertSafe(r: Figures, { doubleGrants = true }: { doubleGrants?: boolean } = {}): string {
  const { timeline, ...figures } = r;
  const shown = `${JSON.stringify(figures)}\n${timeline}`;
  assert.ok(r.faults > 0, `the fault was injected: ${shown}`);
  assert.ok(r.acceptedWrites > 0, `the workload progressed: ${shown}`);
  assert.equal(r.staleWrites, 0, shown);
  assert.equal(r.staleReads, 0, shown);
  assert.equal(r.lostUpdates, 0, shown);
  assert.equal(r.overlappingSections, 0, shown);
  if (doubleGrants) assert.equal(r.doubleGrants, 0, shown);
  assert.equal(r.unhandled, 0, shown);
  // A worker that outlives its close is a liveness failure (a driver's leftover timers or
  // sockets: docs/guarantees.md, "Fault tests").
  assert.deepEqual(r.stuck, [], shown);
  return shown;
}
