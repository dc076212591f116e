/**
 * The shared conformance suite against a real 3-member etcd cluster on loopback.
 *
 * A crash is the default `abandon()` (the backend's testing-only `Abandonable` hook): the
 * client stops keeping its lease alive without revoking it, so its keys go only when etcd
 * expires the lease.
 */
import { createLocker } from '../../src/index.js';
import { startEtcd } from '../../scripts/servers/etcd.js';
import { useServer } from '../helpers.js';
import { conformance } from './suite.js';

/** Short leases keep the crash cases quick; long enough for a loaded 2-core machine. */
const LEASE_TTL_MS = 3_000;

const server = await useServer(() => startEtcd());
const url = `${server.url}?prefix=locksmith-conformance/&leaseTtlMs=${LEASE_TTL_MS}`;

await conformance({
  name: 'etcd',
  createLocker: (options) => createLocker(url, options),
  url,
  blackHoleUrl: (port) => `etcd://127.0.0.1:${port}`,
  shortTtlMs: 1_000,
});
