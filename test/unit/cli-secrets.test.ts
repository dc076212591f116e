/**
 * No `locksmith` command prints the password of its backend URL: every command (run,
 * status, demo, bench, migrate, help), on success and on failure, with the URL given as
 * --backend or as LOCKSMITH_BACKEND; stdout and stderr are searched for it.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { freePort } from '../../scripts/servers/harness.js';
import { startRedis } from '../../scripts/servers/redis.js';
import { useServer } from '../helpers.js';
import { cli, type CliResult } from './cli-process.js';

const PASSWORD = 'Pw-0f-the-secrets-test';
const redis = await useServer(() => startRedis({ extraArgs: ['--requirepass', PASSWORD] }));
const port = redis.nodes[0]?.port ?? 0;
const url = `redis://:${PASSWORD}@127.0.0.1:${port}`;
const closed = await freePort();

/** Run the command and fail when its output shows the password (or its URL-encoded form). */
async function clean(args: readonly string[], env: Record<string, string> = {}): Promise<CliResult> {
  const result = await cli(args, env);
  const all = result.stdout + result.stderr;
  for (const secret of [PASSWORD, encodeURIComponent(PASSWORD)]) {
    assert.ok(!all.includes(secret), `locksmith ${args.join(' ')} printed the password:\n${all}`);
  }
  return result;
}

const BENCH = ['--iterations', '3', '--contenders', '1', '--duration', '100ms', '--keys', '5', '--waiters', '2', '--idle', '100ms'];

test('run (verbose, held, refused, unreachable) and status never print the password', async () => {
  const ok = await clean(['run', '-v', '-b', url, 'secret:job', 'true']);
  assert.equal(ok.code, 0, ok.stderr);
  assert.match(ok.stderr, /backend redis:\/\/:\*\*\*@127\.0\.0\.1/, 'the URL is shown, redacted');
  assert.equal((await clean(['run', '-v', 'secret:job', 'true'], { LOCKSMITH_BACKEND: url })).code, 0);
  await clean(['run', '-b', `redis://:${PASSWORD}x@127.0.0.1:${port}`, 'secret:job', 'true']);
  await clean(['run', '-b', `redis://:${PASSWORD}@127.0.0.1:${closed}`, 'secret:job', 'true']);
  await clean(['run', '-b', `redlock://:${PASSWORD}@127.0.0.1:${closed}`, 'secret:job', 'true']);
  await clean(['run', '-b', `etcd://root:${PASSWORD}@127.0.0.1:${closed}`, 'secret:job', 'true']);
  await clean(['run', '-b', `postgres://u:${PASSWORD}@127.0.0.1:${closed}/db`, 'secret:job', 'true']);
  await clean(['run', '-b', `mysql://u:${PASSWORD}@127.0.0.1:${closed}/db`, 'secret:job', 'true']);
  await clean(['run', '-b', `redis://:${PASSWORD}@127.0.0.1:${port}?bogus=1`, 'secret:job', 'true']);
  assert.equal((await clean(['status', '-b', url, 'secret:job'])).code, 1);
  assert.equal((await clean(['status', '--json', '-b', url, 'secret:job'])).code, 1);
});

test('bench (text and --json) names the backend without its password', async () => {
  const text = await clean(['bench', '-b', url, ...BENCH]);
  assert.equal(text.code, 0, text.stderr);
  assert.match(text.stdout, /^backend: redis:\/\/:\*\*\*@127\.0\.0\.1/m);
  const json = await clean(['bench', '--json', '-b', url, ...BENCH]);
  assert.equal(json.code, 0, json.stderr);
  assert.match((JSON.parse(json.stdout) as { backend: string }).backend, /^redis:\/\/:\*\*\*@/);
});

test('demo, migrate (--print and applied) and --help never print the password', async () => {
  const demo = await clean(['demo', '-b', url]);
  assert.equal(demo.code, 0, demo.stderr);
  assert.match(demo.stdout, /on redis:\/\/:\*\*\*@/);
  assert.equal((await clean(['migrate', '--print', '-b', `postgres://u:${PASSWORD}@127.0.0.1:${closed}/db`])).code, 0);
  assert.equal((await clean(['migrate', '--print', '-b', url])).code, 0);
  await clean(['migrate', '-b', `postgres://u:${PASSWORD}@127.0.0.1:${closed}/db`]);
  await clean(['migrate', '-b', `mysql://u:${PASSWORD}@127.0.0.1:${closed}/db`]);
  await clean(['--help'], { LOCKSMITH_BACKEND: url });
  await clean(['run', '--help'], { LOCKSMITH_BACKEND: url });
  await clean(['bench', '--help'], { LOCKSMITH_BACKEND: url });
});
