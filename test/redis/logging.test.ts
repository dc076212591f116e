/**
 * `DEBUG=locksmith*` against a Redis that requires a password: the backend namespace logs
 * the round trips and the connection's errors, and no line shows the password — neither on
 * a working connection nor when the password is refused (docs/observability.md, "Logging").
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { createLocker } from '../../src/index.js';
import { startRedis } from '../../scripts/servers/redis.js';
import { useServer } from '../helpers.js';
import { captured } from '../conformance/cases/logging.js';

const T = { timeout: 60_000 };
const SECRET = 'l0g-s3cr3t-pw';
const server = await useServer(() => startRedis({ extraArgs: ['--requirepass', SECRET] }));
const port = new URL(server.url).port;

test('no log line shows the password, on a working connection and a refused one', T, async () => {
  const lines = await captured(async () => {
    const locker = createLocker(`redis://:${SECRET}@127.0.0.1:${port}`);
    try {
      await (await locker.lock('logging:secret')).release();
    } finally {
      await locker.close();
    }
    const refused = createLocker(`redis://:wrong-${SECRET}@127.0.0.1:${port}`, { connectTimeoutMs: 5_000 });
    try {
      await assert.rejects(refused.lock('logging:secret'));
    } finally {
      await refused.close();
    }
  });
  const shown = `\n${lines.join('\n')}`;
  assert.ok(
    lines.some((l) => l.includes('locksmith:backend:redis logging:secret: attempt mutex granted')),
    `no attempt logged:${shown}`,
  );
  assert.ok(
    lines.some((l) => /locksmith:backend:redis connection: connection error \(WRONGPASS\)/.test(l)),
    `no refused password logged:${shown}`,
  );
  for (const line of lines) assert.ok(!line.includes(SECRET), `a log line shows the password: ${line}`);
});
