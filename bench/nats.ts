/**
 * `npm run bench:nats` — the benchmark matrix (src/bench-matrix/) on a real nats-server with
 * JetStream (one node, file store) started by the harness: locksmith's NATS backend (a key
 * per lock, compare-and-set on its revision, watch wake-ups). No npm package a user would
 * pick instead for locks on NATS exists to run beside it, so it runs alone. Knobs:
 * bench/common.ts (BENCH_QUICK=1 for a smoke run). See docs/benchmarks.md.
 */
import { createLocker } from '../src/index.js';
import { lockerContender, type Contender } from '../src/bench-matrix/index.js';
import { startNats } from '../scripts/servers/nats.js';
import { childOrMain, runEngine } from './common.js';

const TTL_MS = 10_000;

/** locksmith on the server at `url` (also what a forked hand-off waiter makes). */
function contenders(url: string): Contender[] {
  return [lockerContender('locksmith', () => createLocker(`${url}?bucket=bench&operationTimeoutMs=10000`, { ttlMs: TTL_MS }), true)];
}

childOrMain(contenders, async () => {
  const nats = await startNats();
  try {
    await runEngine({
      engine: 'nats-server 2.9.10 (Debian), one node, JetStream file store',
      contenders: contenders(nats.url),
      fork: { script: import.meta.filename, url: nats.url },
      notes: [
        `ttl ${TTL_MS} ms; operationTimeoutMs 10000 (the 10000-keys row timed out at the default 2000 on this loaded machine); locksmith's waiters: non-fair, woken by one watch of the bucket per locker`,
      ],
    });
  } finally {
    await nats.stop();
  }
});
