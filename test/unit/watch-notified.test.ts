/**
 * `locker.watch()` on a backend that announces changed locks (`Backend.changes`): the core
 * lists once after the subscription, then inspects only the announced locks; a lease that
 * runs out (which no engine announces) is found by re-inspecting at its end; a `null`
 * (resubscribed) lists everything again. A memory backend with a hand-driven change feed.
 */
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { test } from 'node:test';
import { createLocker, type WatchEvent } from '../../src/index.js';
import { MemoryBackend } from '../../src/backends/memory/index.js';
import type { WatchRequest } from '../../src/backends/kit.js';

const here = dirname(fileURLToPath(import.meta.url));

/** A memory backend whose change feed the test drives, counting the backend's list and inspect calls. */
class AnnouncingBackend extends MemoryBackend {
  lists = 0;
  inspects = 0;
  #feeds = new Set<(id: string | null) => void>();

  override async list(...args: Parameters<MemoryBackend['list']>): ReturnType<MemoryBackend['list']> {
    this.lists += 1;
    return super.list(...args);
  }

  override async inspect(lockId: string): ReturnType<MemoryBackend['inspect']> {
    this.inspects += 1;
    return super.inspect(lockId);
  }

  announce(id: string | null): void {
    for (const f of this.#feeds) f(id);
  }

  async *changes(req: WatchRequest): AsyncIterable<string | null> {
    const queue: (string | null)[] = [null];
    let wake: (() => void) | undefined;
    const feed = (id: string | null): void => {
      queue.push(id);
      wake?.();
    };
    this.#feeds.add(feed);
    const stop = (): void => wake?.();
    req.signal.addEventListener('abort', stop, { once: true });
    try {
      while (!req.signal.aborted) {
        const next = queue.shift();
        if (next !== undefined) {
          if (next === null || next.startsWith(req.prefix)) yield next;
          continue;
        }
        await new Promise<void>((resolve) => (wake = resolve));
        wake = undefined;
      }
    } finally {
      this.#feeds.delete(feed);
      req.signal.removeEventListener('abort', stop);
    }
  }
}

async function take(it: AsyncIterator<WatchEvent>, n: number): Promise<WatchEvent[]> {
  const out: WatchEvent[] = [];
  while (out.length < n) {
    const r = await it.next();
    if (r.done) break;
    out.push(r.value);
  }
  return out;
}

test('a notified watch lists once, then inspects only the locks announced, and sees an expiry without an announcement', async () => {
  const backend = new AnnouncingBackend('watch-notified');
  const watcher = createLocker(backend);
  const other = createLocker('memory://watch-notified', { ttlMs: 300, autoExtend: false });
  const stop = new AbortController();
  try {
    const held = await other.lock('w:a');
    const it = watcher.watch({ prefix: 'w:', signal: stop.signal })[Symbol.asyncIterator]();
    const [initial] = await take(it, 1);
    assert.equal(initial?.type, 'acquired');
    assert.equal(initial?.initial, true);
    assert.equal(backend.lists, 1);
    await held.release();
    backend.announce('w:a');
    const [released] = await take(it, 1);
    assert.equal(released?.type, 'released');
    const second = await other.lock('w:b');
    backend.announce('w:b');
    const [acquired] = await take(it, 1);
    assert.equal(acquired?.lockId, 'w:b');
    // No announcement: the lease end brings the re-inspection.
    const [expired] = await take(it, 1);
    assert.equal(expired?.type, 'expired');
    assert.equal(expired?.token, second.token);
    assert.equal(backend.lists, 1, 'no listing beyond the first');
    await other.lock('w:c');
    backend.announce(null);
    const [relisted] = await take(it, 1);
    assert.equal(relisted?.lockId, 'w:c', 'a resubscription lists everything again');
    assert.equal(backend.lists, 2);
    stop.abort();
    assert.equal((await it.next()).done, true);
  } finally {
    stop.abort();
    await other.close();
    await watcher.close();
  }
});

test('an id announced before the first null neither blocks nor spins the watch: it lists once the null comes', () => {
  const child = spawnSync(process.execPath, ['--import', 'tsx', join(here, 'watch-early-id.ts')], {
    encoding: 'utf8',
    timeout: 30_000,
    killSignal: 'SIGKILL',
  });
  assert.equal(child.signal, null, `the watch never listed (the child was killed after 30 s): ${child.stderr}`);
  assert.equal(child.status, 0, child.stderr);
  assert.match(child.stdout, /listed/);
});
