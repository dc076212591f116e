import { MemoryBackend } from '../../src/backends/memory/index.js';
import { createLocker } from '../../src/index.js';
import { conformance } from './suite.js';

// Every client opens the same named table: several lockers model several clients of one server.
conformance({
  name: 'memory',
  createLocker: (options) => createLocker('memory://conformance', options),
  capabilities: new MemoryBackend('conformance').capabilities,
  shortTtlMs: 300,
});
