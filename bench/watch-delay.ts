/**
 * How late `locker.watch()` reports another locker's acquire, as a user of the watch feels it
 * (docs/observability.md, "Watching"): `npm run bench:watch-delay -- [etcd|redis|file]` starts
 * the engine with the server harness, opens a watch on a prefix from one locker, and ROUNDS
 * (40) times has a second locker take and release a fresh lock under it; the figure is from
 * that `lock()` resolving to the watch yielding its `acquired` event (negative when the event
 * comes first). The watch's own delay: the notification plus the read the core makes of the
 * changed lock. p50 and p99 over the rounds.
 */
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { createLocker, type WatchEvent } from '../src/index.js';
import { startEtcd } from '../scripts/servers/etcd.js';
import { startRedis } from '../scripts/servers/redis.js';

const engine = process.argv[2] ?? 'etcd';
const ROUNDS = Number(process.env['ROUNDS'] ?? 40);

/** The engine's URL and how to stop what was started for it. */
async function open(): Promise<{ url: string; stop: () => Promise<void> }> {
  if (engine === 'etcd') {
    const server = await startEtcd();
    return { url: `${server.url}?prefix=bench-watch/`, stop: () => server.stop() };
  }
  if (engine === 'redis') {
    const server = await startRedis();
    return { url: server.url, stop: () => server.stop() };
  }
  if (engine === 'file') {
    const dir = await mkdtemp(join(tmpdir(), 'locksmith-watch-'));
    return { url: `file://${dir}`, stop: () => rm(dir, { recursive: true, force: true }) };
  }
  throw new Error(`unknown engine '${engine}' (etcd, redis or file)`);
}

const quantile = (sorted: readonly number[], q: number): number =>
  sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))] ?? NaN;

async function main(): Promise<void> {
  const { url, stop } = await open();
  const watcher = createLocker(url);
  const taker = createLocker(url);
  const ctl = new AbortController();
  const seen = new Map<string, number>();
  const feed = (async () => {
    for await (const e of watcher.watch({ prefix: 'w/', signal: ctl.signal }) as AsyncIterable<WatchEvent>) {
      if (e.type === 'acquired' && !seen.has(e.lockId)) seen.set(e.lockId, performance.now());
    }
  })().catch(() => undefined);
  try {
    await sleep(500);
    const delays: number[] = [];
    for (let i = 0; i < ROUNDS; i++) {
      const lockId = `w/${i}`;
      const lock = await taker.lock(lockId);
      const granted = performance.now();
      while (!seen.has(lockId) && performance.now() - granted < 10_000) await sleep(0.2);
      delays.push((seen.get(lockId) ?? NaN) - granted);
      await lock.release();
      await sleep(20);
    }
    const sorted = delays.filter(Number.isFinite).sort((a, b) => a - b);
    const missed = delays.length - sorted.length;
    console.log(
      `${engine}: watch reports another locker's acquire ${quantile(sorted, 0.5).toFixed(2)} ms p50, ` +
        `${quantile(sorted, 0.99).toFixed(2)} ms p99 after its lock() resolved (${sorted.length} rounds${missed ? `, ${missed} not seen in 10 s` : ''})`,
    );
  } finally {
    ctl.abort();
    await feed;
    await watcher.close();
    await taker.close();
    await stop();
  }
}

await main();
