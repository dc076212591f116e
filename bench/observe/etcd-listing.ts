/**
 * Figures for docs/backends/etcd.md, "Listing" (not a test: `npx tsx bench/observe/etcd-listing.ts`).
 * 1. The uncontended lock + release cost with no identity, a typical one and the largest
 *    allowed, in alternating rounds through the seam; with `BEFORE=<a checkout of the code
 *    before identities were stored>` also that code's backend (its value has no `id`/`at`).
 * 2. The time to page through 10,000 held locks with limit 1000.
 */
import { randomBytes } from 'node:crypto';
import { performance } from 'node:perf_hooks';
import { Etcd3 } from 'etcd3';
import { createEtcdBackend, type EtcdBackend } from '../../src/backends/etcd/index.js';
import { encodeValue } from '../../src/backends/etcd/layout.js';
import { makeIdentity } from '../../src/observe/identity.js';
import { startEtcd } from '../../scripts/servers/etcd.js';
import { seamRequest } from '../../test/helpers.js';

const ROUNDS = Number(process.env['ROUNDS'] ?? 8);
const OPS = Number(process.env['OPS'] ?? 200);
const signal = new AbortController().signal;

async function lockRelease(backend: EtcdBackend, identity: string): Promise<number> {
  const started = performance.now();
  for (let i = 0; i < OPS; i++) {
    const r = await backend.tryAcquire(seamRequest(`ab-${i % 16}`, `o${i}`, { identity, wait: false }));
    if (!r.granted) throw new Error('contended in an uncontended run');
    await backend.release(r.grant);
  }
  return (performance.now() - started) / OPS;
}

/** The backend of an older checkout, when `BEFORE` names one. */
async function beforeBackend(url: string): Promise<EtcdBackend | undefined> {
  const dir = process.env['BEFORE'];
  if (!dir) return undefined;
  const mod = (await import(`${dir}/src/backends/etcd/index.ts`)) as { createEtcdBackend: (raw: string) => EtcdBackend };
  return mod.createEtcdBackend(url);
}

async function identityCost(url: string): Promise<void> {
  const backend = createEtcdBackend(url);
  const old = await beforeBackend(url);
  const arms: Record<string, string> = {
    none: '',
    typical: makeIdentity('billing-worker', undefined).encoded,
    max: makeIdentity('n', { pad: 'x'.repeat(480) }).encoded.padEnd(1024, ' '),
  };
  const times: Record<string, number[]> = { ...(old ? { before: [] } : {}), none: [], typical: [], max: [] };
  await lockRelease(backend, ''); // warm-up
  if (old) await lockRelease(old, '');
  const names = Object.keys(times);
  for (let round = 0; round < ROUNDS; round++) {
    const order = round % 2 === 0 ? names : [...names].reverse();
    for (const arm of order)
      times[arm]?.push(await lockRelease(arm === 'before' && old ? old : backend, arms[arm] ?? arms['typical'] ?? ''));
  }
  const median = (xs: number[]): number => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)] ?? NaN;
  const base = median(times[old ? 'before' : 'none'] ?? []);
  for (const arm of Object.keys(times)) {
    const m = median(times[arm] ?? []);
    console.log(
      `${arm.padEnd(8)} ${arm === 'before' ? '(no id, no at)' : `${(arms[arm] ?? '').length} B`}  median ${m.toFixed(3)} ms/op  ${(((m - base) / base) * 100).toFixed(1)} %`,
    );
  }
  await backend.close();
  await old?.close();
}

/** 10,000 locksmith-shaped keys on one lease (what 10,000 held locks of one backend look like). */
async function fill(hosts: string[], prefix: string, n: number): Promise<Etcd3> {
  const raw = new Etcd3({ hosts });
  const lease = await raw.leaseClient.leaseGrant({ TTL: 600 });
  const identity = makeIdentity('bench-holder', undefined).encoded;
  for (let i = 0; i < n; i += 100) {
    const success = Array.from({ length: Math.min(100, n - i) }, (_, j) => ({
      request_put: {
        key: Buffer.from(`${prefix}lock-${String(i + j).padStart(5, '0')}/${BigInt(lease.ID).toString(16)}`),
        value: encodeValue({ kind: 'mutex', owner: randomBytes(8).toString('hex'), nonce: 'n', permits: 1, identity, at: Date.now() }),
        lease: lease.ID,
      },
    }));
    await raw.kv.txn({ compare: [], success, failure: [] });
  }
  return raw;
}

async function paging(url: string, hosts: string[], prefix: string): Promise<void> {
  const raw = await fill(hosts, prefix, 10_000);
  const backend = createEtcdBackend(url);
  for (let run = 0; run < 3; run++) {
    const started = performance.now();
    let cursor: string | undefined;
    let locks = 0;
    let pages = 0;
    do {
      const page = await backend.list({ prefix: '', limit: 1000, cursor, signal });
      locks += page.locks.length;
      cursor = page.cursor;
      pages += 1;
    } while (cursor !== undefined);
    console.log(`paging: ${locks} locks in ${pages} pages, ${(performance.now() - started).toFixed(0)} ms`);
  }
  await backend.close();
  raw.close();
}

const server = await startEtcd();
try {
  const prefix = `bench-${randomBytes(3).toString('hex')}/`;
  await identityCost(`${server.url}?prefix=${prefix}ab/`);
  await paging(`${server.url}?prefix=${prefix}list/`, server.endpoints.split(','), `${prefix}list/`);
} finally {
  await server.stop();
}
