/**
 * The engines locksmith ships, one line each: their manifests (`<engine>/manifest.ts`).
 * Importing this loads no engine and no driver; `connect.ts` loads one when a URL names it.
 * See docs/architecture.md, "Adding an engine".
 */
import type { EngineManifest } from '../util/engine-manifest.js';
import { manifest as memory } from './memory/manifest.js';
import { manifest as file } from './file/manifest.js';
import { manifest as redis } from './redis/manifest.js';
import { manifest as redlock } from './redlock/manifest.js';
import { manifest as zookeeper } from './zookeeper/manifest.js';
import { manifest as cassandra } from './cassandra/manifest.js';
import { manifest as etcd } from './etcd/manifest.js';
import { manifest as postgres } from './postgres/manifest.js';
import { manifest as mysql } from './mysql/manifest.js';
import { manifest as nats } from './nats/manifest.js';

/** Every engine, in the order `supportedSchemes()` lists their schemes. */
export const ENGINES: readonly EngineManifest[] = Object.freeze([
  memory,
  file,
  redis,
  redlock,
  zookeeper,
  cassandra,
  etcd,
  postgres,
  mysql,
  nats,
]);
