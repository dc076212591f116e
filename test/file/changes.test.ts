/**
 * `changes()` of the file backend: `null` once its watch of `locks/` stands, then the ids
 * whose state another backend or process replaces (acquire, release, a waiter queueing,
 * forceRelease), exactly as written (hex and hashed names), only under the prefix; `null`
 * again after `locks/` is removed and made again; aborting ends it and leaves no watch.
 */
import assert from 'node:assert/strict';
import { rmSync } from 'node:fs';
import { join } from 'node:path';
import { after, test } from 'node:test';
import type { AcquireRequest, Grant } from '../../src/backend.js';
import { FileBackend, prepareDirectory, type FileTicket } from '../../src/backends/file/index.js';
import { eventually, seamRequest } from '../helpers.js';
import { exited, lockDirectory, nextMessage, spawnChild } from './helpers.js';

const T = { timeout: 60_000 };
/** How long a change may take to be heard on this loaded machine (a bound, not a measure). */
const HEARD_MS = 10_000;
const { dir, url } = lockDirectory('file-changes');
prepareDirectory(dir, false);

/** What one `changes()` call yields, gathered as it comes. */
class Heard {
  readonly values: (string | null)[] = [];
  readonly ended: Promise<void>;
  readonly #abort = new AbortController();

  constructor(backend: FileBackend, prefix: string) {
    const iterable = backend.changes({ prefix, signal: this.#abort.signal });
    this.ended = (async () => {
      for await (const v of iterable) this.values.push(v);
    })();
    after(() => this.stop());
  }

  /** Wait until `value` was yielded at least `times` times. */
  async saw(value: string | null, times = 1): Promise<void> {
    await eventually(`${String(value)} × ${times}`, () => this.count(value) >= times, HEARD_MS);
  }

  count(value: string | null): number {
    return this.values.filter((v) => v === value).length;
  }

  /** Abort, and wait for the iteration to end. */
  async stop(): Promise<void> {
    this.#abort.abort();
    await this.ended;
  }
}

let owners = 0;

/** One attempt at `lockId` through the seam of `b` (a fresh owner, a lease longer than any test). */
async function attempt(b: FileBackend, lockId: string, over: Partial<AcquireRequest<FileTicket>> = {}) {
  return b.tryAcquire(seamRequest<FileTicket>(lockId, `owner-${++owners}`, { wait: false, ttlMs: 600_000, ...over }));
}

async function hold(b: FileBackend, lockId: string): Promise<Grant<undefined>> {
  const r = await attempt(b, lockId);
  assert.ok(r.granted, `${lockId} granted`);
  return r.grant;
}

/** The active handles of this process of one kind (fs.watch: FSEventWrap), once closed ones are gone. */
async function handles(kind: string): Promise<number> {
  // A closed handle leaves the list at its close callback, which runs after this turn's
  // immediates: the second one comes after it.
  for (let i = 0; i < 2; i++) await new Promise((resolve) => setImmediate(resolve));
  return process.getActiveResourcesInfo().filter((k) => k === kind).length;
}

test('null first, then acquire, a waiter queueing, release and forceRelease of another backend', T, async () => {
  const watcher = new FileBackend(dir);
  const other = new FileBackend(dir);
  const heard = new Heard(watcher, 'jobs:');
  await heard.saw(null);
  assert.equal(heard.values[0], null, 'null comes first');

  const g = await hold(other, 'jobs:a');
  await heard.saw('jobs:a');
  const before = heard.count('jobs:a');
  const queued = await attempt(other, 'jobs:a', { wait: true });
  assert.ok(!queued.granted && queued.contended.ticket, 'the second attempt queues');
  await heard.saw('jobs:a', before + 1);

  assert.equal(await other.release(g), true);
  await heard.saw('jobs:a', before + 2);

  const g2 = await hold(other, 'jobs:b');
  await heard.saw('jobs:b');
  const held = heard.count('jobs:b');
  assert.equal(await other.forceRelease(g2.lockId), 1);
  await heard.saw('jobs:b', held + 1);
  await heard.stop();
});

test('an id outside the prefix is not yielded; odd and long (hashed) ids come back as written', T, async () => {
  const watcher = new FileBackend(dir);
  const other = new FileBackend(dir);
  const heard = new Heard(watcher, 'odd/');
  await heard.saw(null);
  const long = `odd/${'é'.repeat(80)}`; // 164 bytes: named by its hash
  const ids = [long, 'odd/"quoted" ünï 🔒', 'odd/a/b'];
  const longOutside = `jobs:${'x'.repeat(120)}`; // hashed too, read back and dropped
  await hold(other, 'jobs:outside');
  await hold(other, longOutside);
  await hold(other, 'odd'); // the prefix without its slash is outside it too
  for (const id of ids) await hold(other, id);
  for (const id of ids) await heard.saw(id);
  // Heard in the order written: the earlier ids would have come before the last one.
  assert.equal(heard.count('jobs:outside'), 0);
  assert.equal(heard.count(longOutside), 0);
  assert.equal(heard.count('odd'), 0);
  await heard.stop();
});

test("another process's acquire is heard", T, async () => {
  const heard = new Heard(new FileBackend(dir), 'proc:');
  await heard.saw(null);
  const child = spawnChild({ mode: 'hold', url, lockId: 'proc:held', ttlMs: 30_000 });
  await nextMessage(child, 'held');
  await heard.saw('proc:held');
  child.kill('SIGKILL');
  await exited(child);
  await heard.stop();
});

test('locks/ removed and made again: watched again, and null again', T, async () => {
  const { dir: own } = lockDirectory('file-changes-gone');
  prepareDirectory(own, false);
  const heard = new Heard(new FileBackend(own, { pollMs: 100 }), '');
  const other = new FileBackend(own);
  await heard.saw(null);
  rmSync(join(own, 'locks'), { recursive: true });
  await hold(other, 'again:1'); // the write makes locks/ again
  await heard.saw(null, 2);
  await hold(other, 'again:2');
  await heard.saw('again:2');
  await heard.stop();
});

test('aborting ends the iteration without an error and leaves no watch or timer', T, async () => {
  const watches = await handles('FSEventWrap');
  const timers = await handles('Timeout');
  const heard = new Heard(new FileBackend(dir), '');
  await heard.saw(null);
  assert.equal(await handles('FSEventWrap'), watches + 1, 'one watch while iterating');
  await heard.stop();
  assert.equal(await handles('FSEventWrap'), watches, 'the watch is closed');
  assert.ok((await handles('Timeout')) <= timers, 'no timer left behind');
  const count = heard.values.length;
  await hold(new FileBackend(dir), 'after:abort');
  await handles('FSEventWrap');
  assert.equal(heard.values.length, count, 'nothing after the end');
});

test('aborting while the directory cannot be watched ends the retry wait too', T, async () => {
  const { dir: own } = lockDirectory('file-changes-none');
  rmSync(own, { recursive: true, force: true }); // no locks/ to watch
  const timers = await handles('Timeout');
  const heard = new Heard(new FileBackend(own, { pollMs: 60_000 }), '');
  await new Promise((resolve) => setTimeout(resolve, 50));
  assert.equal(heard.values.length, 0, 'no null while nothing is watched');
  await heard.stop();
  assert.equal(await handles('Timeout'), timers, 'the retry timer is cleared');
});
