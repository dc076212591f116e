/**
 * The package as a user gets it: `npm pack` (which builds), installed into a scratch
 * TypeScript app (strict, exactOptionalPropertyTypes, `module: nodenext`, no `skipLibCheck`)
 * with none of the optional peers, type-checked, compiled and run on memory://; `require()`
 * of the ESM build works; every `files` entry ships;
 * a backend whose driver (or prom-client) is missing says what to install; the metrics and
 * tracing declarations compile without prom-client or OpenTelemetry. The install prefers
 * npm's cache (`npm ci` filled it), so the test needs no network on a prepared machine.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { execFile } from 'node:child_process';
import { mkdtemp, readdir, readFile, rm, writeFile, mkdir } from 'node:fs/promises';
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

test(
  'the packed tarball installs into a strict TypeScript app without optional peers, type-checks and runs',
  { timeout: 600_000 },
  async () => {
    const dir = await mkdtemp(join(tmpdir(), 'locksmith-package-'));
    try {
      await run('npm', ['pack', '--silent', '--pack-destination', dir], { cwd: root, maxBuffer: 64 << 20 });
      const tarball = (await readdir(dir)).find((f) => f.endsWith('.tgz'));
      assert.ok(tarball, 'npm pack wrote a tarball');
      const app = join(dir, 'app');
      await mkdir(app);
      await writeFile(join(app, 'package.json'), JSON.stringify({ name: 'scratch-app', private: true, type: 'module' }));
      await run(
        'npm',
        ['install', '--prefer-offline', '--no-audit', '--no-fund', join(dir, tarball), join(root, 'node_modules/@types/node')],
        {
          cwd: app,
          maxBuffer: 64 << 20,
        },
      );
      for (const peer of ['ioredis', 'pg', 'mysql2', 'cassandra-driver', 'etcd3', 'node-zookeeper-client', 'prom-client']) {
        assert.equal(existsSync(join(app, 'node_modules', peer)), false, `optional peer ${peer} was not installed`);
      }
      const installed = join(app, 'node_modules/locksmith-dlm');
      assert.equal(existsSync(join(installed, 'dist/index.js.map')), false, 'no source maps to unshipped sources');
      const manifest = JSON.parse(await readFile(join(root, 'package.json'), 'utf8')) as { files: string[] };
      for (const entry of manifest.files)
        assert.ok(existsSync(join(installed, entry)), `package.json "files" lists ${entry}, and it ships`);
      await writeFile(join(app, 'index.ts'), APP);
      await writeFile(join(app, 'tsconfig.json'), JSON.stringify(TSCONFIG));
      await run(process.execPath, [tsc, '-p', app], { cwd: app }).catch((err: { stdout?: string }) => {
        throw new Error(`the app does not type-check against the package:\n${err.stdout ?? ''}`);
      });
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
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  },
);
