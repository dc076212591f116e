/**
 * The shared conformance suite against the file backend: every client is its own locker
 * (its own backend, as a separate process would have) on one throw-away directory.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after } from 'node:test';
import { pathToFileURL } from 'node:url';
import { createLocker } from '../../src/index.js';
import { conformance } from './suite.js';

const dir = mkdtempSync(join(tmpdir(), 'locksmith-file-conf-'));
after(() => rmSync(dir, { recursive: true, force: true }));
const url = pathToFileURL(dir).href;

await conformance({
  name: 'file',
  createLocker: (options) => createLocker(url, options),
  url,
  shortTtlMs: 300,
});
