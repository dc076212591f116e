/**
 * A malformed %-escape in a URL's user info (accepted by the URL parser, refused by
 * decodeURIComponent) is a typed InvalidArgumentError that never shows the password.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { createLocker, InvalidArgumentError } from '../../src/index.js';
import { urlUserInfo } from '../../src/backends/kit.js';

const SECRET = 'a%ZZb';

/** The error is typed, coded, and shows the secret nowhere (message, context, cause). */
function typedWithoutSecret(e: unknown): true {
  assert.ok(e instanceof InvalidArgumentError, `expected InvalidArgumentError, got ${String(e)}`);
  assert.equal(e.code, 'INVALID_ARGUMENT');
  assert.equal(e.argument, 'url');
  const seen = `${e.message} ${JSON.stringify(e.context)} ${String(e.cause)} ${e.stack ?? ''}`;
  assert.ok(!seen.includes(SECRET) && !seen.includes('ZZ'), seen);
  return true;
}

test('urlUserInfo decodes user and password, and refuses a malformed escape without showing it', () => {
  assert.deepEqual(urlUserInfo(new URL('redis://us%40er:p%25w%3Ad@h:1')), { username: 'us@er', password: 'p%w:d' });
  assert.deepEqual(urlUserInfo(new URL('redis://h:1')), { username: undefined, password: undefined });
  for (const url of [`redis://:${SECRET}@h:1`, `redis://u:${SECRET}@h:1`, `rediss://u:${SECRET}@h:1/0`]) {
    assert.throws(() => urlUserInfo(new URL(url)), typedWithoutSecret);
  }
  // A user name is not a secret (redact() shows it), but it is refused the same way.
  assert.throws(
    () => urlUserInfo(new URL('redis://a%ZZ:pw@h:1')),
    (e) => e instanceof InvalidArgumentError && !e.message.includes('pw'),
  );
});

test('redis, redlock, etcd, postgres and mysql URLs with a malformed password escape reject with INVALID_ARGUMENT, not a bare URIError', async () => {
  // Port 1: the URL is refused before any connection is tried.
  for (const url of [
    `postgres://:${SECRET}@127.0.0.1:1/db`,
    `mysql://u:${SECRET}@127.0.0.1:1/db`,
    'postgres://u@127.0.0.1:1/d%ZZb',
    `redis://:${SECRET}@127.0.0.1:1`,
    `redlock://:${SECRET}@127.0.0.1:1,127.0.0.1:2,127.0.0.1:3`,
    `etcd://u:${SECRET}@127.0.0.1:1`,
  ]) {
    const locker = createLocker(url, { connectTimeoutMs: 2_000 });
    try {
      await assert.rejects(locker.lock('x', { timeoutMs: 5_000 }), (e: unknown) => {
        assert.ok(e instanceof InvalidArgumentError, `${url}: expected InvalidArgumentError, got ${String(e)}`);
        return url.endsWith('d%ZZb') || typedWithoutSecret(e);
      });
    } finally {
      await locker.close();
    }
  }
});
