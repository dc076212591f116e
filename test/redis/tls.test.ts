/**
 * `rediss://` against a real TLS-only redis-server with a self-signed certificate: the
 * certificate is verified (an untrusted one is a BackendUnavailableError naming the
 * certificate problem), and a user trusts their CA the two ways docs/backends/redis.md
 * gives: `NODE_EXTRA_CA_CERTS` for a URL (here the CLI, in a child process), or their own
 * ioredis client with `tls: { ca }` passed to `RedisBackend`.
 */
import assert from 'node:assert/strict';
import { after, test } from 'node:test';
import { execFile } from 'node:child_process';
import { readFile } from 'node:fs/promises';
import { resolve } from 'node:path';
import { promisify } from 'node:util';
import { Redis } from 'ioredis';
import { BackendUnavailableError, createLocker, type Locker } from '../../src/index.js';
import { RedisBackend } from '../../src/backends/redis/index.js';
import { startRedis } from '../../scripts/servers/redis.js';
import { useServer } from '../helpers.js';

const T = { timeout: 120_000 };
const root = resolve(import.meta.dirname, '../..');
const server = await useServer(() => startRedis({ tls: true }));
const caFile = server.caFile ?? assert.fail('a TLS server has a CA file');
const port = server.nodes[0]?.port ?? 0;

const lockers: Locker[] = [];
after(async () => {
  await Promise.all(lockers.map((l) => l.close()));
});

test('the harness serves TLS only, on a rediss:// URL', () => {
  assert.match(server.url, /^rediss:\/\/127\.0\.0\.1:\d+$/);
});

test('an untrusted self-signed certificate is refused, with the certificate problem as the cause', T, async () => {
  const l = createLocker(server.url, { connectTimeoutMs: 5_000 });
  lockers.push(l);
  const err = await l.lock('tls:untrusted').catch((e: unknown) => e);
  assert.ok(err instanceof BackendUnavailableError, String(err));
  assert.match(err.message, /self[- ]signed certificate/i);
});

test('a rediss:// URL locks when the CA is trusted through NODE_EXTRA_CA_CERTS (the CLI in a child process)', T, async () => {
  const { stdout } = await promisify(execFile)(
    process.execPath,
    ['--import', 'tsx', 'src/cli/main.ts', 'run', 'tls:cli', '--backend', server.url, '--', 'sh', '-c', 'echo "token=$LOCKSMITH_TOKEN"'],
    { cwd: root, env: { ...process.env, NODE_EXTRA_CA_CERTS: caFile, LOCKSMITH_BACKEND: '' } },
  );
  assert.match(stdout, /token=\d+/);
});

test('a user-supplied ioredis client with tls.ca locks through RedisBackend', T, async () => {
  const client = new Redis({ host: '127.0.0.1', port, tls: { ca: await readFile(caFile) } });
  const l = createLocker(new RedisBackend(client));
  lockers.push(l);
  try {
    const lock = await l.lock('tls:own-client', { timeoutMs: 10_000 });
    assert.equal(await createLocker(new RedisBackend(client)).tryLock('tls:own-client'), null);
    await lock.release();
  } finally {
    await l.close();
    await client.quit();
  }
});
