/**
 * The mysql engine's manifest: what connect.ts, package.json, the servers, the fault suite
 * and the docs need to know about it (docs/architecture.md, "Adding an engine"). It must
 * not import the engine or its driver: the loader imports them when a URL needs them.
 */
import type { EngineManifest } from '../kit.js';

/** The mysql engine. */
export const manifest: EngineManifest = {
  name: 'mysql',
  schemes: ['mysql', 'mariadb'],
  driver: 'mysql2',
  load: () => import('./index.js'),
  testScript: 'test:mysql',
  servers: ['mariadb'],
  faultProfiles: ['mysql'],
  benchScript: 'bench:sql',
};
