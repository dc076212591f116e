/**
 * Child process of watch-notified.test.ts: a notified watch over a feed that announces a lock
 * id before its first `null` (as a feed of several subscriptions can, when one is in place
 * before the others), the `null` arriving on a later macrotask. The watch must list once the
 * `null` is there and report the held lock; it prints `listed` and exits. Run in a child
 * because the defect it guards against spun the event loop on microtasks: no timer of the
 * test runner could have fired.
 */
import { setTimeout as delay } from 'node:timers/promises';
import { createLocker } from '../../src/index.js';
import { MemoryBackend } from '../../src/backends/memory/index.js';
import type { WatchRequest } from '../../src/backends/kit.js';

class EarlyIdBackend extends MemoryBackend {
  async *changes(req: WatchRequest): AsyncIterable<string | null> {
    yield 'early:a';
    await delay(20);
    yield null;
    await new Promise<void>((resolve) => req.signal.addEventListener('abort', () => resolve(), { once: true }));
  }
}

const backend = new EarlyIdBackend('watch-early-id');
const watcher = createLocker(backend);
const other = createLocker('memory://watch-early-id');
const stop = new AbortController();
const held = await other.lock('early:a');
for await (const e of watcher.watch({ prefix: 'early:', signal: stop.signal })) {
  if (e.type === 'acquired' && e.lockId === 'early:a') break;
}
stop.abort();
await held.release();
await Promise.all([watcher.close(), other.close()]);
process.stdout.write('listed\n');
