/**
 * The API report: every entry point in package.json `exports` exports exactly the names in
 * api/exports.json. A change to the public surface is deliberate: rerun `npm run api:report`
 * and commit the snapshot with the change, so that review sees it.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { apiReport, differences, entryPoints, readSnapshot, SNAPSHOT } from '../../scripts/api-report.js';

test(`the exports of every entry point match ${SNAPSHOT}`, () => {
  const diff = differences(readSnapshot(), apiReport());
  assert.deepEqual(
    diff,
    [],
    `the exports differ from ${SNAPSHOT}; if intended, run \`npm run api:report\` and commit it:\n  ${diff.join('\n  ')}`,
  );
});

test('the main entry exports what an application uses, not the seam a backend implements', () => {
  const main = readSnapshot()['locksmith-dlm'] ?? {};
  for (const seam of [
    'Backend',
    'AcquireRequest',
    'AcquireResult',
    'Grant',
    'Contended',
    'Extension',
    'BackendFactory',
    'ConnectOptions',
  ]) {
    assert.equal(main[seam], undefined, `${seam} belongs to locksmith-dlm/backend`);
    assert.notEqual(readSnapshot()['locksmith-dlm/backend']?.[seam], undefined, `locksmith-dlm/backend exports ${seam}`);
  }
});

test('every entry point is in the report, and the report reads them from their sources', () => {
  assert.deepEqual(Object.keys(readSnapshot()).sort(), [...entryPoints().keys()].sort());
});
