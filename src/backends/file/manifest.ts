/**
 * The file engine's manifest: what connect.ts, package.json, the servers, the fault suite
 * and the docs need to know about it (docs/architecture.md, "Adding an engine"). It must
 * not import the engine: the loader imports it when a URL needs it.
 */
import type { EngineManifest } from '../kit.js';

/** The file engine: one machine, many processes, no server. */
export const manifest: EngineManifest = {
  name: 'file',
  schemes: ['file'],
  load: () => import('./index.js'),
  testScript: 'test:file',
  servers: [],
  faultProfiles: ['file'],
};
