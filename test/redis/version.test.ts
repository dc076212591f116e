/**
 * The scripts use `SET … PXAT` (Redis 6.2): a server too old for them is refused at connect
 * with `UnsupportedError` naming the minimum, judged from its `INFO server` text; the real
 * server of the test suite passes the same check.
 */
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { UnsupportedError } from '../../src/errors.js';
import { createBackend, MIN_REDIS_VERSION } from '../../src/backends/redis/index.js';
import { versionError } from '../../src/backends/redis/version.js';
import { startRedis } from '../../scripts/servers/redis.js';
import type { RunningServer } from '../../scripts/servers/harness.js';

let server: RunningServer;

before(async () => {
  server = await startRedis();
});

after(async () => {
  await server.stop();
});

test('a server older than Redis 6.2 is refused with UnsupportedError naming the minimum', () => {
  assert.equal(MIN_REDIS_VERSION, '6.2.0');
  for (const old of ['5.0.14', '6.0.16', '6.1.9']) {
    const err = versionError(`# Server\r\nredis_version:${old}\r\nredis_mode:standalone\r\n`);
    assert.ok(err instanceof UnsupportedError, old);
    assert.equal(err.code, 'UNSUPPORTED');
    assert.match(err.message, new RegExp(`Redis ${old.replace(/\./g, '\\.')}.*6\\.2\\.0 or later`));
  }
  for (const ok of ['6.2.0', '6.2.14', '7.0.15', '10.0.0']) assert.equal(versionError(`redis_version:${ok}\r\n`), undefined, ok);
  // No version to judge (a proxy that hides it): not refused.
  assert.equal(versionError('# Server\r\n'), undefined);
});

test('the real server passes the check at connect', { timeout: 30_000 }, async () => {
  const backend = await createBackend(new URL(server.url));
  await backend.close();
});
