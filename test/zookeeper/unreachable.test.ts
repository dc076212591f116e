/**
 * An ensemble nobody answers for: nothing listens on the port, or a server accepts the TCP
 * connection and never answers the handshake. `lock`, `tryLock` and `locksmith run` must
 * all say BACKEND_UNAVAILABLE (exit 69) near `connectTimeoutMs`, not LOCK_TIMEOUT and not
 * after a session timeout. No ZooKeeper server is needed.
 */
import assert from 'node:assert/strict';
import { createServer } from 'node:net';
import { after, before, test } from 'node:test';
import { performance } from 'node:perf_hooks';
import { BackendUnavailableError, createLocker } from '../../src/index.js';
import { blackHole, type BlackHole } from '../helpers.js';
import { cli } from '../unit/cli-process.js';

const T = { timeout: 60_000 };
/** Far below the 10 s session timeout that the defect waited for: a behaviour check, not a timing one. */
const WELL_BEFORE_MS = 5_000;

let hole: BlackHole;
let closedPort: number;

before(async () => {
  hole = await blackHole();
  // A port that was just free: nothing listens there.
  const probe = createServer();
  await new Promise<void>((resolve) => probe.listen(0, '127.0.0.1', resolve));
  const address = probe.address();
  closedPort = typeof address === 'object' && address !== null ? address.port : 1;
  await new Promise<void>((resolve) => probe.close(() => resolve()));
});

after(async () => {
  await hole.close();
});

const targets = (): [string, number][] => [
  ['nothing listens', closedPort],
  ['a black hole', hole.port],
];

async function rejectsUnavailable(work: () => Promise<unknown>): Promise<void> {
  const started = performance.now();
  await assert.rejects(work(), (err) => {
    assert.ok(err instanceof BackendUnavailableError, `expected BackendUnavailableError, got ${String(err)}`);
    return true;
  });
  const took = performance.now() - started;
  assert.ok(took < WELL_BEFORE_MS, `rejected after ${Math.round(took)} ms`);
}

for (const [what, label] of [
  ['lock', 'lock({ timeoutMs: 5000 })'],
  ['tryLock', 'tryLock()'],
] as const) {
  test(`${label}: an unreachable ensemble is BackendUnavailableError near connectTimeoutMs`, T, async () => {
    for (const [where, port] of targets()) {
      const locker = createLocker(`zookeeper://127.0.0.1:${port}`, { connectTimeoutMs: 1_000 });
      try {
        await rejectsUnavailable(() =>
          what === 'lock' ? locker.lock(`down-${where}`, { timeoutMs: 5_000 }) : locker.tryLock(`down-${where}`),
        );
      } finally {
        await locker.close();
      }
    }
  });
}

test('locksmith run against an unreachable ensemble exits 69 (backend unavailable)', T, async () => {
  for (const [where, port] of targets()) {
    const started = performance.now();
    const r = await cli(['run', '-b', `zookeeper://127.0.0.1:${port}?connectTimeoutMs=1000`, 'job', '--', 'true']);
    assert.equal(r.code, 69, `${where}: exit ${String(r.code)}, stderr: ${r.stderr}`);
    assert.match(r.stderr, /BACKEND_UNAVAILABLE/);
    assert.ok(performance.now() - started < WELL_BEFORE_MS * 2, `${where}: the CLI took until the session timeout`);
  }
});
