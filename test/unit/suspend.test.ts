/**
 * A host suspended while a lock is held (a laptop lid, a paused VM, a live migration): the
 * monotonic clock stands still, the servers' leases do not. The lease clock counts the
 * suspended time (src/util/clock.ts, docs/guarantees.md "Validity"), so the holder that wakes
 * up knows at once that its lease is gone.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { spawn } from 'node:child_process';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { SuspendAwareClock } from '../../src/util/clock.js';
import { faketimeLibrary } from '../../scripts/servers/harness.js';

test('the lease clock adds a leap of the wall clock past the monotonic one, and nothing else', () => {
  let wall = 1_000_000;
  let mono = 50;
  const clock = new SuspendAwareClock(
    () => wall,
    () => mono,
  );
  mono += 100;
  wall += 100;
  assert.equal(clock.now(), 150, 'clocks in step: monotonic as is');
  mono += 10;
  wall += 40_010;
  assert.equal(clock.now(), 40_160, 'a 40 s suspend is counted');
  mono += 1_000;
  wall -= 5_000;
  assert.equal(clock.now(), 41_160, 'a backward step of the wall clock is ignored');
  mono += 3_600_000;
  wall += 3_600_000 + 1_800;
  assert.equal(clock.now(), 3_641_160, "an hour's NTP slew (500 ppm) is not a suspend");
  assert.equal(clock.gapMs, 40_000);
});

test('a process whose wall clock leaps 60 s ahead of its monotonic clock knows its 20 s lease is gone', async () => {
  const lib = await faketimeLibrary();
  const dir = mkdtempSync(join(tmpdir(), 'suspend-'));
  const file = join(dir, 'faketime');
  writeFileSync(file, '+0s\n');
  const child = spawn(process.execPath, ['--import', 'tsx', join(import.meta.dirname, 'suspend-child.ts')], {
    env: {
      ...process.env,
      LD_PRELOAD: lib,
      FAKETIME_TIMESTAMP_FILE: file,
      FAKETIME_CACHE_DURATION: '1',
      FAKETIME_DONT_FAKE_MONOTONIC: '1',
    },
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  const lines = createInterface({ input: child.stdout })[Symbol.asyncIterator]();
  assert.equal((await lines.next()).value, 'held');
  writeFileSync(file, '+60s\n');
  const report = JSON.parse(String((await lines.next()).value)) as { held: boolean; remainingMs: number; reason: string };
  assert.deepEqual(report, { held: false, remainingMs: 0, reason: 'expired' });
  await new Promise((r) => child.once('exit', r));
});
