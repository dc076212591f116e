/**
 * The zookeeper engine's manifest: what connect.ts, package.json, the servers, the fault suite
 * and the docs need to know about it (docs/architecture.md, "Adding an engine"). It must
 * not import the engine or its driver: the loader imports them when a URL needs them.
 */
import type { EngineManifest } from '../kit.js';

/** The zookeeper engine. */
export const manifest: EngineManifest = {
  name: 'zookeeper',
  schemes: ['zookeeper'],
  driver: 'node-zookeeper-client',
  load: () => import('./index.js'),
  testScript: 'test:zookeeper',
  servers: ['zookeeper'],
  faultProfiles: ['zookeeper'],
  benchScript: 'bench:zookeeper',
};
