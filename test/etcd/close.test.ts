/**
 * `close()` leaves nothing that keeps the process alive, even against a member that accepted
 * the connection and never answered (docs/backends/etcd.md, "Closing"): a child process
 * connects to a black hole, gives up, closes, and must exit by itself before its watchdog.
 */
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { dirname, join } from 'node:path';
import { test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { blackHole } from '../helpers.js';

const here = dirname(fileURLToPath(import.meta.url));

test('a process that closed its locker against a server that never answers exits by itself', { timeout: 60_000 }, async () => {
  const hole = await blackHole();
  try {
    const child = spawn(process.execPath, ['--import', 'tsx', join(here, 'close-child.ts'), String(hole.port)], {
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let out = '';
    child.stdout.on('data', (d: Buffer) => (out += d.toString()));
    child.stderr.on('data', (d: Buffer) => (out += d.toString()));
    const code = await new Promise<number | null>((resolve) => child.on('exit', (c) => resolve(c)));
    assert.equal(code, 0, out);
  } finally {
    await hole.close();
  }
});
