/**
 * The redlock engine's manifest: what connect.ts, package.json, the servers, the fault suite
 * and the docs need to know about it (docs/architecture.md, "Adding an engine"). It must
 * not import the engine or its driver: the loader imports them when a URL needs them.
 */
import type { EngineManifest } from '../kit.js';

/** The redlock engine. */
export const manifest: EngineManifest = {
  name: 'redlock',
  schemes: ['redlock'],
  driver: 'ioredis',
  load: () => import('./index.js'),
  testScript: 'test:redlock',
  servers: ['redlock'],
  faultProfiles: ['redlock'],
  benchScript: 'bench:redlock',
};
