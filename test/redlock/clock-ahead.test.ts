/**
 * A client whose wall clock runs ahead proposes tokens from it (docs/backends/redlock.md,
 * "Fencing tokens"). Stored as it is, such a token outlives the registers' expiry (10 min
 * idle): the next holder, with a right clock, would then get a smaller token, and a fenced
 * resource would take the stale holder's writes and refuse the current one's. The masters
 * refuse proposals more than a minute ahead of their clocks, so tokens stay tied to them.
 */
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { after, test } from 'node:test';
import { Redis } from 'ioredis';
import { createLocker } from '../../src/index.js';
import { keyBase } from '../../src/backends/redis-wire/keys.js';
import { faketimeLibrary } from '../../scripts/servers/harness.js';
import { startRedlock } from '../../scripts/servers/redlock.js';
import { useServer } from '../helpers.js';

const execFileP = promisify(execFile);
const server = await useServer(() => startRedlock({ count: 3 }));
const locker = createLocker(server.url);
after(() => locker.close());

test('a client an hour ahead, then registers expired: the next holder still gets a larger token', { timeout: 120_000 }, async () => {
  const lockId = `rl:ahead:${randomBytes(6).toString('hex')}`;
  const { stdout } = await execFileP(
    process.execPath,
    ['--import', 'tsx', join(import.meta.dirname, 'clock-ahead-child.ts'), server.url, lockId],
    {
      env: { ...process.env, LD_PRELOAD: await faketimeLibrary(), FAKETIME: '+1h', FAKETIME_DONT_FAKE_MONOTONIC: '1' },
    },
  );
  const ahead = BigInt(stdout.trim());
  // What ten idle minutes do: every master's register expires.
  for (const n of server.nodes) {
    const raw = new Redis({ host: n.host, port: n.port });
    assert.equal(await raw.del(`${keyBase('locksmith:', lockId)}:rt`), 1, 'the register was written');
    raw.disconnect();
  }
  const next = await locker.lock(lockId);
  await next.release();
  assert.ok(next.token > ahead, `the next token ${next.token} is above the one the client ahead got (${ahead})`);
});
