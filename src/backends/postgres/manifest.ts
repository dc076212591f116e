/**
 * The postgres engine's manifest: what connect.ts, package.json, the servers, the fault suite
 * and the docs need to know about it (docs/architecture.md, "Adding an engine"). It must
 * not import the engine or its driver: the loader imports them when a URL needs them.
 */
import type { EngineManifest } from '../kit.js';

/** The postgres engine. */
export const manifest: EngineManifest = {
  name: 'postgres',
  schemes: ['postgres', 'postgresql'],
  driver: 'pg',
  load: () => import('./index.js'),
  testScript: 'test:postgres',
  servers: ['postgres'],
  faultProfiles: ['postgres'],
  benchScript: 'bench:sql',
};
