/**
 * The shared conformance suite against a real Cassandra 5.0 node started by the harness:
 * once for the fair algorithm (seed 000 §5, the default) and once for the old shadow-table
 * algorithm (§4, `?algorithm=shadow`), which registers only the cases it can do (not fair).
 */
import { after, before } from 'node:test';
import { createLocker, type Capabilities } from '../../src/index.js';
import { startCassandra } from '../../scripts/servers/cassandra.js';
import type { RunningServer } from '../../scripts/servers/harness.js';
import { conformance } from './suite.js';

let server: RunningServer | undefined;

before(async () => {
  server = await startCassandra({ nodes: 1 });
}, { timeout: 600_000 });

after(async () => {
  await server?.stop();
});

function url(query: string): string {
  if (!server) throw new Error('cassandra did not start');
  return `${server.url}?create=true&${query}`;
}

const base: Omit<Capabilities, 'fair'> = { shared: false, permits: false, notify: false, lockDelay: false, reentrant: false };

conformance({
  name: 'cassandra (fair)',
  createLocker: (options) => createLocker(url('algorithm=fair'), options),
  capabilities: { ...base, fair: true },
  // Cells live in whole seconds (ttl rounded up, plus one): expiry cases need ≥ 1 s to mean anything.
  shortTtlMs: 1000,
});

conformance({
  name: 'cassandra (shadow)',
  createLocker: (options) => createLocker(url('algorithm=shadow'), options),
  capabilities: { ...base, fair: false },
  shortTtlMs: 1000,
});
