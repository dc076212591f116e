/**
 * The curl, Python and Go examples of docs/serve.md ("Other languages"), taken from the page
 * itself and run against `locksmith serve` (a child process) over a real Redis and a real
 * PostgreSQL: they lock, wait behind another holder, and see the token grow. The Go example
 * is built once with Debian's golang-go (scripts/servers/go.ts).
 */
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { after, before, test } from 'node:test';
import { ensureGo } from '../../scripts/servers/go.js';
import { startPostgres } from '../../scripts/servers/postgres.js';
import { startRedis } from '../../scripts/servers/redis.js';
import { eventually, useServer } from '../helpers.js';
import { spawnService, type ServiceProcess } from './process.js';
import { client } from './service.js';

const T = { timeout: 180_000 };
const run = promisify(execFile);
const DOC = readFileSync(fileURLToPath(new URL('../../docs/serve.md', import.meta.url)), 'utf8');

/** The fenced block after `<!-- example: name -->`. */
function example(name: string): string {
  const m = new RegExp(`<!-- example: ${name} -->\\s*\`\`\`\\w+\\n([\\s\\S]*?)\`\`\``).exec(DOC);
  assert.ok(m?.[1], `docs/serve.md has the ${name} example`);
  return m[1];
}

/** The Go example, built once (a compile is seconds; each run is then a process). */
let goProgram = '';
before(async () => {
  const dir = mkdtempSync(join(tmpdir(), 'locksmith-go-example-'));
  writeFileSync(join(dir, 'main.go'), example('go'));
  goProgram = join(dir, 'example');
  await run(await ensureGo(), ['build', '-o', goProgram, 'main.go'], {
    cwd: dir,
    env: { ...process.env, GOFLAGS: '', GO111MODULE: 'off' },
  });
});

const runners = {
  curl: (env: NodeJS.ProcessEnv) => run('bash', ['-c', example('curl')], { env }),
  python: (env: NodeJS.ProcessEnv) => run('python3', ['-c', example('python')], { env }),
  go: (env: NodeJS.ProcessEnv) => run(goProgram, [], { env }),
};

const tokenIn = (out: string): bigint => {
  const m = /holding jobs\/nightly with token (\d+)/.exec(out);
  assert.ok(m?.[1], out);
  return BigInt(m[1]);
};

const services: ServiceProcess[] = [];
after(async () => {
  for (const s of services) await s.kill();
});

async function scenario(backend: string): Promise<void> {
  const service = await spawnService(backend);
  services.push(service);
  const env = { ...process.env, LOCKSMITH_URL: service.base };
  const one = tokenIn((await runners.curl(env)).stdout);
  const two = tokenIn((await runners.python(env)).stdout);
  assert.ok(two > one, 'the token grows from curl to Python');
  assert.ok(tokenIn((await runners.go(env)).stdout) > two, 'and to Go');
  // Each example waits while another session holds the lock, and gets it on release.
  const c = client(service.base);
  for (const name of ['curl', 'python', 'go'] as const) {
    const s = await c.session(30_000, 'blocker');
    const held = await c.acquire('jobs/nightly', { session: s });
    assert.equal(held.status, 200);
    const waiting = runners[name](env);
    await eventually(
      `${name} waits`,
      async () => ((await c.inspect('jobs/nightly')).body.waiters as number) >= 1 || (await settled(waiting)),
    );
    await new Promise((r) => setTimeout(r, 300));
    await c.release('jobs/nightly', s, held.body.token);
    const got = tokenIn((await waiting).stdout);
    assert.ok(got > BigInt(held.body.token as string), `${name} got a greater token`);
    await c.end(s);
  }
  assert.equal(((await c.inspect('jobs/nightly')).body.holders as unknown[]).length, 0, 'the examples released');
}

async function settled(p: Promise<unknown>): Promise<boolean> {
  return Promise.race([
    p.then(
      () => true,
      () => true,
    ),
    new Promise<boolean>((r) => setTimeout(() => r(false), 10)),
  ]);
}

const redis = await useServer(() => startRedis());
const postgres = await useServer(() => startPostgres());

test('the curl, Python and Go examples over Redis', T, () => scenario(redis.url));
test('the curl, Python and Go examples over PostgreSQL', T, () =>
  scenario(`${postgres.url}${postgres.url.includes('?') ? '&' : '?'}migrate=true`),
);
