/**
 * The shared conformance suite against a real Cassandra 5.0 node started by the harness.
 */
import { createLocker } from '../../src/index.js';
import { startCassandra } from '../../scripts/servers/cassandra.js';
import { useServer } from '../helpers.js';
import { conformance } from './suite.js';

const server = await useServer(() => startCassandra({ nodes: 1 }));
const url = `${server.url}?create=true`;

await conformance({
  name: 'cassandra',
  createLocker: (options) => createLocker(url, options),
  url,
  // Cells live in whole seconds (ttl rounded up, plus one): expiry cases need ≥ 1 s to mean anything.
  shortTtlMs: 1000,
  blackHoleUrl: (port) => `cassandra://127.0.0.1:${port}/locksmith`,
});
