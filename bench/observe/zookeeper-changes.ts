/**
 * How long after an acquire call `changes()` reports the id (and how long the grant took), on a one-node ensemble on loopback:
 * `npx tsx bench/observe/zookeeper-changes.ts`. Figures in docs/backends/zookeeper.md, "Watching".
 */
import { createZooKeeperBackend } from '../../src/backends/zookeeper/index.js';
import { seamRequest } from '../../test/helpers.js';
import { startZooKeeper } from '../../scripts/servers/zookeeper.js';

const ROUNDS = 200;

async function main(): Promise<void> {
  const server = await startZooKeeper({ nodes: 1 });
  const url = `zookeeper://${server.connectString}/bench-changes?sessionTimeoutMs=30000`;
  const watcher = createZooKeeperBackend(url);
  const actor = createZooKeeperBackend(url);
  const ac = new AbortController();
  let waiting: { id: string; resolve: () => void } | undefined;
  let ready!: () => void;
  const subscribed = new Promise<void>((r) => (ready = r));
  const feed = (async () => {
    for await (const id of watcher.changes({ prefix: 'b:', signal: ac.signal })) {
      if (id === null) ready();
      else if (waiting?.id === id) waiting.resolve();
    }
  })();
  await subscribed;
  const delays: number[] = [];
  const granted: number[] = [];
  for (let i = 0; i < ROUNDS; i++) {
    const id = `b:${i % 10}`;
    const seen = new Promise<void>((resolve) => (waiting = { id, resolve }));
    const t0 = performance.now();
    const result = await actor.tryAcquire(seamRequest(id, `o${i}`, { wait: false, ttlMs: 30_000 }));
    granted.push(performance.now() - t0);
    await seen;
    delays.push(performance.now() - t0);
    if (result.granted) await actor.release(result.grant);
  }
  ac.abort();
  await feed;
  console.log(`from the acquire call, ${ROUNDS} rounds: granted ${quantiles(granted)}; id reported ${quantiles(delays)}`);
  await Promise.all([watcher.close(), actor.close()]);
  await server.stop();
}

function quantiles(xs: number[]): string {
  const sorted = [...xs].sort((a, b) => a - b);
  const at = (q: number): string => (sorted[Math.floor(q * (sorted.length - 1))] ?? 0).toFixed(1);
  return `p50 ${at(0.5)} ms, p99 ${at(0.99)} ms`;
}

await main();
