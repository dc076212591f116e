/**
 * An engine is one place: its manifest (`src/backends/<engine>/manifest.ts`). Everything
 * else that names an engine must agree with the manifests: package.json (the `exports`
 * subpath, the driver as an optional peer and a dev dependency, the `test:<engine>` script
 * run by `npm test`, the benchmark script), the server scripts, the fault profiles and their
 * test files, the docs page and the README's backend table. A manifest must not import its
 * engine or driver (connect.ts stays lazy). See docs/architecture.md, "Adding an engine".
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { existsSync, readFileSync, readdirSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { ENGINES } from '../../src/backends/manifests.js';
import { supportedSchemes } from '../../src/connect.js';
import { docsPageOf } from '../../src/util/engine-manifest.js';
import { PROFILES } from '../faults/profiles.js';

const root = resolve(import.meta.dirname, '../..');
const pkg = JSON.parse(readFileSync(join(root, 'package.json'), 'utf8')) as {
  exports: Record<string, string | Record<string, string>>;
  scripts: Record<string, string>;
  peerDependencies: Record<string, string>;
  peerDependenciesMeta: Record<string, { optional?: boolean }>;
  devDependencies: Record<string, string>;
};
/** Optional peers that are not an engine's driver. */
// The NATS engine's driver is three packages: the manifest names the transport, the other two come with it.
const NON_ENGINE_PEERS = ['prom-client', '@nats-io/jetstream', '@nats-io/kv'];
const read = (path: string): string => readFileSync(join(root, path), 'utf8');
const readIfAny = (path: string): string => (existsSync(join(root, path)) ? read(path) : '');

test('every engine folder has a manifest, listed once, and connect.ts serves exactly their schemes', () => {
  const folders = readdirSync(join(root, 'src/backends'), { withFileTypes: true })
    // An engine folder's index.ts exports the factory; shared folders (sql/, a wire layer) do not.
    .filter((d) => d.isDirectory() && /export (async )?function createBackend\b/.test(readIfAny(`src/backends/${d.name}/index.ts`)))
    .map((d) => d.name);
  assert.deepEqual([...ENGINES.map((e) => e.name)].sort(), folders.sort(), 'src/backends/manifests.ts lists every engine folder');
  for (const e of ENGINES) assert.ok(existsSync(join(root, `src/backends/${e.name}/manifest.ts`)), `${e.name} has manifest.ts`);
  const schemes = ENGINES.flatMap((e) => e.schemes);
  assert.equal(new Set(schemes).size, schemes.length, 'no scheme is served by two engines');
  assert.deepEqual(supportedSchemes(), schemes);
});

test('a manifest imports neither its engine nor its driver: only types, and the engine lazily', () => {
  for (const e of ENGINES) {
    const source = read(`src/backends/${e.name}/manifest.ts`);
    const imports = source.split('\n').filter((l) => /^\s*(import|export)\b.*\bfrom\b/.test(l));
    for (const line of imports) assert.match(line, /^import type /, `${e.name}/manifest.ts: ${line}`);
    assert.match(source, /load: \(\) => import\('\.\/index\.js'\)/, `${e.name} loads its own index.ts, lazily`);
  }
});

test('package.json: an exports subpath per engine, no other engine subpath', () => {
  for (const e of ENGINES) {
    assert.deepEqual(
      pkg.exports[`./${e.name}`],
      {
        types: `./dist/backends/${e.name}/index.d.ts`,
        import: `./dist/backends/${e.name}/index.js`,
        default: `./dist/backends/${e.name}/index.js`,
      },
      `exports "./${e.name}"`,
    );
  }
  const engineSubpaths = Object.entries(pkg.exports)
    .filter(([, v]) => typeof v === 'object' && /^\.\/dist\/backends\/[^/]+\/index\.js$/.test(v.import ?? ''))
    .map(([k]) => k.slice(2));
  assert.deepEqual(engineSubpaths.sort(), ENGINES.map((e) => e.name).sort());
});

test('package.json: every driver is an optional peer and a dev dependency; every optional peer is a driver or named here', () => {
  const drivers = new Set(ENGINES.flatMap((e) => (e.driver === undefined ? [] : [e.driver])));
  for (const d of drivers) {
    assert.ok(pkg.peerDependencies[d], `${d} is a peer dependency`);
    assert.equal(pkg.peerDependenciesMeta[d]?.optional, true, `${d} is optional`);
    assert.ok(pkg.devDependencies[d], `${d} is a dev dependency (the tests use it)`);
  }
  for (const peer of Object.keys(pkg.peerDependencies)) {
    assert.ok(drivers.has(peer) || NON_ENGINE_PEERS.includes(peer), `peer ${peer} is some engine's driver`);
  }
});

test('package.json: each engine test script runs its conformance file and is part of npm test; bench scripts exist', () => {
  for (const e of ENGINES) {
    const script = pkg.scripts[e.testScript];
    assert.ok(script, `script ${e.testScript}`);
    assert.ok(script.includes(`test/conformance/${e.name}.test.ts`), `${e.testScript} runs test/conformance/${e.name}.test.ts`);
    assert.ok(existsSync(join(root, `test/conformance/${e.name}.test.ts`)));
    assert.ok(
      pkg.scripts.test?.includes(`npm run ${e.testScript} `) || pkg.scripts.test?.endsWith(`npm run ${e.testScript}`),
      `npm test runs ${e.testScript}`,
    );
    if (e.benchScript !== undefined) assert.ok(pkg.scripts[e.benchScript], `script ${e.benchScript}`);
  }
});

test('server scripts, fault profiles and their test files agree with the manifests', () => {
  for (const e of ENGINES) {
    for (const s of e.servers) assert.ok(existsSync(join(root, `scripts/servers/${s}.ts`)), `scripts/servers/${s}.ts (${e.name})`);
    for (const p of e.faultProfiles) {
      assert.ok(PROFILES[p], `${e.name}'s fault profile ${p} is in test/faults/profiles.ts`);
      assert.ok(existsSync(join(root, `test/faults/${p}.test.ts`)), `test/faults/${p}.test.ts`);
    }
  }
  const named = ENGINES.flatMap((e) => e.faultProfiles);
  assert.deepEqual(Object.keys(PROFILES).sort(), [...named].sort(), 'every fault profile belongs to an engine');
});

test("each engine's docs page exists, names its schemes, and the README's backend table links to it", () => {
  const readme = read('README.md');
  for (const e of ENGINES) {
    const page = docsPageOf(e);
    assert.ok(existsSync(join(root, page)), page);
    const text = read(page);
    for (const s of e.schemes) assert.ok(text.includes(`${s}://`), `${page} names ${s}://`);
    assert.ok(readme.includes(`](${page})`), `README links ${page}`);
  }
});
