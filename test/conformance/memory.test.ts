import { createLocker } from '../../src/index.js';
import { conformance } from './suite.js';

// Every client opens the same named table: several lockers model several clients of one server.
await conformance({
  name: 'memory',
  createLocker: (options) => createLocker('memory://conformance', options),
  shortTtlMs: 300,
});
