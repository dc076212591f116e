/**
 * The shared conformance suite against a real Cassandra 5.0 node started by the harness:
 * once for the fair algorithm (the default) and once for the old shadow-table algorithm
 * (`?algorithm=shadow`), which registers only the cases it can do (not fair).
 */
import { createLocker } from '../../src/index.js';
import { startCassandra } from '../../scripts/servers/cassandra.js';
import { useServer } from '../helpers.js';
import { conformance } from './suite.js';

const server = await useServer(() => startCassandra({ nodes: 1 }));
const url = (query: string): string => `${server.url}?create=true&${query}`;

for (const algorithm of ['fair', 'shadow']) {
  await conformance({
    name: `cassandra (${algorithm})`,
    createLocker: (options) => createLocker(url(`algorithm=${algorithm}`), options),
    // Cells live in whole seconds (ttl rounded up, plus one): expiry cases need ≥ 1 s to mean anything.
    shortTtlMs: 1000,
    blackHoleUrl: (port) => `cassandra://127.0.0.1:${port}/locksmith?algorithm=${algorithm}`,
  });
}
