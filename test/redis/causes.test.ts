/**
 * Connection failures name their real cause and never show a credential,
 * for each Redis URL form: a refused port, a host that does not resolve (the reserved
 * `.invalid` domain), TLS to a refused port, and Sentinels that cannot be reached (which
 * ioredis retries, so the error is the connect timeout: docs/backends/redis.md, "Sentinel").
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { BackendUnavailableError, createLocker } from '../../src/index.js';

const T = { timeout: 60_000 };
const SECRET = 's3cr3t-pw';

/** The error a first lock on `url` rejects with, checked to be a BackendUnavailableError without the secret. */
async function failure(url: string, connectTimeoutMs = 5_000): Promise<BackendUnavailableError> {
  const locker = createLocker(url, { connectTimeoutMs });
  try {
    const err = await locker.lock('causes').then(
      () => assert.fail(`${url} should not connect`),
      (e: unknown) => e,
    );
    assert.ok(err instanceof BackendUnavailableError, String(err));
    const shown = `${err.message} ${JSON.stringify(err.context)} ${err.stack ?? ''}`;
    assert.equal(shown.includes(SECRET), false, `the password leaked: ${shown}`);
    assert.ok(shown.includes('***'), 'the URL is shown redacted');
    return err;
  } finally {
    await locker.close();
  }
}

test('a refused port names ECONNREFUSED (redis:// and rediss://)', T, async () => {
  for (const scheme of ['redis', 'rediss']) {
    const err = await failure(`${scheme}://app:${SECRET}@127.0.0.1:1`);
    assert.match(err.message, /ECONNREFUSED/);
    assert.equal(err.context.causeCode, 'ECONNREFUSED');
  }
});

test('a host that does not resolve names the resolver error', T, async () => {
  const err = await failure(`redis://app:${SECRET}@no-such-host.invalid:6379`);
  assert.match(err.message, /ENOTFOUND|EAI_AGAIN/);
});

test('unreachable Sentinels are a connect timeout, credentials redacted', T, async () => {
  const err = await failure(`redis-sentinel://app:${SECRET}@127.0.0.1:1,127.0.0.1:2/mymaster`, 1_000);
  assert.match(err.message, /within 1000 ms/);
});
