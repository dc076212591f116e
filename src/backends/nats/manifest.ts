/**
 * The NATS engine's manifest: what connect.ts, package.json, the servers, the fault suite
 * and the docs need to know about it (docs/architecture.md, "Adding an engine"). It must
 * not import the engine or its driver: the loader imports them when a URL needs them.
 */
import type { EngineManifest } from '../kit.js';

/** The NATS JetStream key-value engine. */
export const manifest: EngineManifest = {
  name: 'nats',
  schemes: ['nats'],
  driver: '@nats-io/transport-node',
  load: () => import('./index.js'),
  testScript: 'test:nats',
  servers: ['nats'],
  faultProfiles: ['nats'],
  benchScript: 'bench:nats',
};
