/**
 * The redis engine's manifest: what connect.ts, package.json, the servers, the fault suite
 * and the docs need to know about it (docs/architecture.md, "Adding an engine"). It must
 * not import the engine or its driver: the loader imports them when a URL needs them.
 */
import type { EngineManifest } from '../kit.js';

/** The redis engine. */
export const manifest: EngineManifest = {
  name: 'redis',
  schemes: ['redis', 'rediss', 'redis-sentinel'],
  driver: 'ioredis',
  load: () => import('./index.js'),
  testScript: 'test:redis',
  servers: ['redis', 'redis-sentinel'],
  faultProfiles: ['redis', 'redis-fair'],
  benchScript: 'bench:redis',
};
