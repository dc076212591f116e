/**
 * The server harness's `pause()` (scripts/servers/harness.ts): fault tests pause a server and
 * at once expect it to answer nothing, so `pause()` must not return while any thread of the
 * process still runs. `kill(SIGSTOP)` alone returns before the process has stopped.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { existsSync, readFileSync, readdirSync } from 'node:fs';
import { join } from 'node:path';
import { makeDataDir, makeNode, removeDir, spawnServer } from '../../scripts/servers/harness.js';

/** Threads of `pid` not in a stopped (or exiting) state, from /proc. */
function runningThreads(pid: number): string[] {
  return readdirSync(`/proc/${pid}/task`).filter((tid) => {
    const stat = readFileSync(`/proc/${pid}/task/${tid}/stat`, 'utf8');
    return !'TtZX'.includes(stat.charAt(stat.lastIndexOf(')') + 2));
  });
}

test('pause() returns only once every thread of the server has stopped', { skip: !existsSync('/proc/self/task') }, async () => {
  const dir = await makeDataDir('pause');
  // A Node process: several threads (libuv, V8), like a server's, and a timer that wakes it.
  const start = () => spawnServer(process.execPath, ['-e', 'setInterval(() => {}, 5)'], { logFile: join(dir, 'out.log') });
  const node = await makeNode('pausable', '127.0.0.1', 0, start);
  try {
    for (let round = 0; round < 50; round++) {
      node.pause();
      assert.deepEqual(runningThreads(node.pid), [], `round ${round}: threads still running after pause()`);
      node.resume();
    }
  } finally {
    await node.stop();
    await removeDir(dir);
  }
});
