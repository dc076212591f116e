/**
 * The package as a user gets it: `npm pack` (which builds), installed into a scratch
 * TypeScript app (strict, exactOptionalPropertyTypes, `module: nodenext`, no `skipLibCheck`)
 * with none of the optional peers, type-checked, compiled and run on memory://; `require()`
 * of the ESM build works; every `files` entry ships;
 * a backend whose driver (or prom-client) is missing says what to install; the metrics and
 * tracing declarations compile without prom-client or OpenTelemetry; `locksmith-dlm/redis`
 * type-checks against a user's ioredis 5 and ioredis 6. The install prefers npm's cache
 * (`npm ci` filled it), so the test needs no network on a prepared machine; the ioredis
 * majors are the project's own installs (`ioredis`, `ioredis5`), linked into the app.
 */
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { execFile } from 'node:child_process';
import { mkdtemp, readdir, readFile, rm, writeFile, mkdir, symlink } from 'node:fs/promises';
import { existsSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { promisify } from 'node:util';

const run = promisify(execFile);
const root = resolve(import.meta.dirname, '../..');
const tsc = join(root, 'node_modules/typescript/bin/tsc');

const APP = `import {
  createLocker,
  instrumentPrometheus,
  instrumentTracing,
  LockTimeoutError,
  DriverMissingError,
  type Lock,
  type LockerOptions,
  type SpanLike,
  type TracerLike,
} from 'locksmith-dlm';
import { abandon } from 'locksmith-dlm/testing';
import { UrlParams, type Backend } from 'locksmith-dlm/backend';
import { jainIndex } from 'locksmith-dlm/bench';

const options: Partial<LockerOptions> = { ttlMs: 5_000 };
const locker = createLocker('memory://app', options);
let token = '';
{
  await using lock: Lock = await locker.lock('account:42', { timeoutMs: 1_000 });
  token = JSON.stringify(lock);
  const other = createLocker('memory://app');
  const err = await other.lock('account:42', { timeoutMs: 0 }).catch((e: unknown) => e);
  if (!(err instanceof LockTimeoutError)) throw new Error('expected LockTimeoutError');
  await abandon(other);
}
const missing = await createLocker('redis://127.0.0.1:1').lock('x').catch((e: unknown) => e);
if (!(missing instanceof DriverMissingError) || !missing.message.includes('npm i ioredis')) throw new Error(\`expected DriverMissingError, got \${String(missing)}\`);
const noProm = await instrumentPrometheus(locker).catch((e: unknown) => e);
if (!(noProm instanceof DriverMissingError) || !noProm.message.includes('prom-client')) throw new Error(\`expected DriverMissingError for prom-client, got \${String(noProm)}\`);
const spans: string[] = [];
const span: SpanLike = { setAttribute: () => span, setStatus: () => span, end: () => undefined };
const tracer: TracerLike = { startSpan: (name) => (spans.push(name), span) };
const detach = instrumentTracing(locker, tracer);
await locker.withLock('traced', () => undefined);
detach();
if (!spans.includes('locksmith.hold')) throw new Error(\`expected a hold span, got \${spans.join()}\`);
const backend: Backend | undefined = undefined;
void backend;
void UrlParams;
await locker.close();
console.log(JSON.stringify({ ok: true, jain: jainIndex([1, 1]), lock: JSON.parse(token) }));
`;

const TSCONFIG = {
  compilerOptions: {
    target: 'ES2022',
    lib: ['ES2023', 'ESNext.Disposable'],
    module: 'NodeNext',
    moduleResolution: 'NodeNext',
    strict: true,
    noUncheckedIndexedAccess: true,
    exactOptionalPropertyTypes: true,
    skipLibCheck: false,
    types: ['node'],
    outDir: 'out',
  },
  include: ['index.ts'],
};

const REDIS_APP = `import { Redis } from 'ioredis';
import { createLocker } from 'locksmith-dlm';
import { RedisBackend, type RedisClientLike } from 'locksmith-dlm/redis';

const client = new Redis({ host: '127.0.0.1', port: 1, lazyConnect: true });
const like: RedisClientLike = client;
const locker = createLocker(new RedisBackend(like, { prefix: 'app:' }));
await locker.close();
client.disconnect();
const { version } = (await import('ioredis/package.json', { with: { type: 'json' } })).default;
console.log(version);
`;

/** Every documented backend import, in a consumer with the drivers but none of their @types (pg has no own types). */
const DRIVERS_APP = `import { createLocker } from 'locksmith-dlm';
import { createPostgresBackend, migrate, postgresDdl, type PgQueryTarget } from 'locksmith-dlm/postgres';
import { createMysqlBackend, migrate as migrateMysql } from 'locksmith-dlm/mysql';
import { RedisBackend } from 'locksmith-dlm/redis';
import { RedlockBackend } from 'locksmith-dlm/redlock';
import { createZooKeeperBackend } from 'locksmith-dlm/zookeeper';

const statements: string[] = [];
const target: PgQueryTarget = { query: async (text: string) => void statements.push(text) };
await migrate(target, { table: 'app' });
const sem = createLocker('memory://drivers').semaphore('pool', { permits: 3 });
const two = await sem.acquire({ permits: 2 });
await two.release();
void [createPostgresBackend, createMysqlBackend, migrateMysql, RedisBackend, RedlockBackend, createZooKeeperBackend];
console.log(postgresDdl('app').includes('app_holders') && statements.length === 1);
`;

let dir = '';
let tarball = '';
before(async () => {
  dir = await mkdtemp(join(tmpdir(), 'locksmith-package-'));
  await run('npm', ['pack', '--silent', '--pack-destination', dir], { cwd: root, maxBuffer: 64 << 20 });
  const packed = (await readdir(dir)).find((f) => f.endsWith('.tgz'));
  assert.ok(packed, 'npm pack wrote a tarball');
  tarball = join(dir, packed);
});
after(async () => {
  if (dir !== '') await rm(dir, { recursive: true, force: true });
});

/** A scratch app in `dir/name` with the tarball and @types/node installed (no optional peers), and `source` as index.ts. */
async function scratchApp(name: string, source: string): Promise<string> {
  const app = join(dir, name);
  await mkdir(app);
  await writeFile(join(app, 'package.json'), JSON.stringify({ name: `scratch-${name}`, private: true, type: 'module' }));
  await run('npm', ['install', '--prefer-offline', '--no-audit', '--no-fund', tarball, join(root, 'node_modules/@types/node')], {
    cwd: app,
    maxBuffer: 64 << 20,
  });
  await writeFile(join(app, 'index.ts'), source);
  await writeFile(join(app, 'tsconfig.json'), JSON.stringify(TSCONFIG));
  return app;
}

/** Type-check and compile the app; fails with tsc's report. */
async function typecheck(app: string): Promise<void> {
  await run(process.execPath, [tsc, '-p', app], { cwd: app }).catch((err: { stdout?: string }) => {
    throw new Error(`the app does not type-check against the package:\n${err.stdout ?? ''}`);
  });
}

test(
  'the packed tarball installs into a strict TypeScript app without optional peers, type-checks and runs',
  { timeout: 600_000 },
  async () => {
    const app = await scratchApp('app', APP);
    for (const peer of ['ioredis', 'pg', 'mysql2', 'cassandra-driver', 'etcd3', 'node-zookeeper-client', 'prom-client']) {
      assert.equal(existsSync(join(app, 'node_modules', peer)), false, `optional peer ${peer} was not installed`);
    }
    const installed = join(app, 'node_modules/locksmith-dlm');
    assert.equal(existsSync(join(installed, 'dist/index.js.map')), false, 'no source maps to unshipped sources');
    const manifest = JSON.parse(await readFile(join(root, 'package.json'), 'utf8')) as { files: string[] };
    for (const entry of manifest.files) assert.ok(existsSync(join(installed, entry)), `package.json "files" lists ${entry}, and it ships`);
    await typecheck(app);
    const { stdout } = await run(process.execPath, [join(app, 'out/index.js')], { cwd: app });
    const result = JSON.parse(stdout) as { ok: boolean; lock: { token: string; lockId: string } };
    assert.equal(result.ok, true);
    assert.equal(result.lock.lockId, 'account:42');
    assert.match(result.lock.token, /^\d+$/);
    const cjs = await run(process.execPath, ['-e', "const l = require('locksmith-dlm'); console.log(typeof l.createLocker)"], {
      cwd: app,
    });
    assert.equal(cjs.stdout.trim(), 'function', 'require() of the ESM build works');
    const cli = await run(join(app, 'node_modules/.bin/locksmith'), ['--version'], { cwd: app });
    assert.match(cli.stdout, /^\d+\.\d+\.\d+/);
  },
);

test(
  'every documented backend import compiles in a strict app without @types/pg or other driver @types',
  { timeout: 600_000 },
  async () => {
    const app = await scratchApp('drivers', DRIVERS_APP);
    for (const driver of ['pg', 'mysql2', 'ioredis', 'node-zookeeper-client']) {
      await symlink(join(root, 'node_modules', driver), join(app, 'node_modules', driver), 'dir');
    }
    assert.equal(existsSync(join(app, 'node_modules/@types/pg')), false, '@types/pg is not installed');
    await typecheck(app);
    const { stdout } = await run(process.execPath, [join(app, 'out/index.js')], { cwd: app });
    assert.equal(stdout.trim(), 'true');
  },
);

for (const [major, installed] of [
  ['5', 'ioredis5'],
  ['6', 'ioredis'],
] as const) {
  test(`locksmith-dlm/redis type-checks and loads with a user's ioredis ${major} in a strict app`, { timeout: 600_000 }, async () => {
    const app = await scratchApp(`redis-${major}`, REDIS_APP);
    await symlink(join(root, 'node_modules', installed), join(app, 'node_modules/ioredis'), 'dir');
    await typecheck(app);
    const { stdout } = await run(process.execPath, [join(app, 'out/index.js')], { cwd: app });
    assert.equal(stdout.trim().split('.')[0], major, `the app ran on ioredis ${stdout.trim()}`);
  });
}
