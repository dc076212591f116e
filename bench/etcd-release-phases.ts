/**
 * `npx tsx bench/etcd-release-phases.ts` — where the time of locksmith's etcd `release()`
 * goes, against the one guarded delete it sends: in one process, alternating, each sample a
 * fresh key and no waiter. Rows: the raw `etcd3` transaction; the same with the holder's own
 * watch on its key (what locksmith places on a held key); our client's `deleteIf` (client.ts:
 * the bounded call and the pool's per-call options); locksmith's whole `release()`.
 * `BENCH_ETCD_TMPFS=1` puts etcd's data on tmpfs; BENCH_PHASE_SAMPLES (default 300) per row.
 */
import { Metadata } from '@grpc/grpc-js';
import { Etcd3 } from 'etcd3';
import { createLocker } from '../src/index.js';
import { EtcdClient } from '../src/backends/etcd/client.js';
import { machineInfo, percentiles } from '../src/bench-matrix/index.js';
import { startEtcd } from '../scripts/servers/etcd.js';

const now = (): number => Number(process.hrtime.bigint()) / 1e6;
const guarded = (key: Buffer, rev: string) => ({
  compare: [{ key, target: 'Create' as const, result: 'Equal' as const, create_revision: rev }],
  success: [{ request_delete_range: { key } }],
});

type Row = (i: number) => Promise<number>;

function rawRow(c: Etcd3, watched: boolean): Row {
  return async (i) => {
    const key = Buffer.from(`phases/raw${watched ? 'w' : ''}/${i}`);
    const put = await c.kv.put({ key, value: Buffer.from('x') });
    const w = watched ? await c.watch().key(key.toString()).startRevision(put.header.revision).only('delete').create() : undefined;
    const t0 = now();
    await c.kv.txn(guarded(key, put.header.revision));
    const t = now() - t0;
    if (w) setImmediate(() => void w.cancel());
    return t;
  };
}

/** The grpc-js KV client of each member, as the etcd3 pool made it (bypassing its per-call policies). */
type Unary = (req: unknown, md: Metadata, o: object, cb: (err: unknown, res: { header: { revision: string } }) => void) => void;
function kvClients(c: Etcd3): { txn: Unary; put: Unary }[] {
  const hosts = (c as unknown as { pool: { hosts: { getServiceClient(n: string): { txn: Unary; put: Unary } }[] } }).pool.hosts;
  return hosts.map((h) => h.getServiceClient('KV'));
}

function directRow(c: Etcd3): Row {
  const kvs = kvClients(c);
  const md = new Metadata();
  const unary = (f: Unary, req: unknown, self: unknown): Promise<{ header: { revision: string } }> =>
    new Promise((resolve, reject) => f.call(self, req, md, {}, (err, res) => (err ? reject(err as Error) : resolve(res))));
  return async (i) => {
    const kv = kvs[i % kvs.length] as { txn: Unary; put: Unary };
    const key = Buffer.from(`phases/direct/${i}`);
    const put = await unary(kv.put, { key, value: Buffer.from('x') }, kv);
    const t0 = now();
    await unary(kv.txn, guarded(key, put.header.revision), kv);
    return now() - t0;
  };
}

function wrapperRow(c: EtcdClient): Row {
  return async (i) => {
    const key = Buffer.from(`phases/wrapper/${i}`);
    const put = await c.raw.kv.put({ key, value: Buffer.from('x') });
    const t0 = now();
    await c.deleteIf(key.toString(), BigInt(put.header.revision));
    return now() - t0;
  };
}

function lockerRow(locker: ReturnType<typeof createLocker>): Row {
  return async (i) => {
    const hold = await locker.lock(`phases-${i}`);
    // The held key's own watch is placed on the next turn: let it be, as in a real hold.
    await new Promise((r) => setTimeout(r, 2));
    const t0 = now();
    await hold.release();
    return now() - t0;
  };
}

const etcd = await startEtcd({ memory: process.env['BENCH_ETCD_TMPFS'] === '1' });
try {
  const hosts = etcd.nodes.map((n) => `${n.host}:${n.port}`);
  const raw = new Etcd3({ hosts });
  await raw.watch().key('\u0000keeper').create();
  const ours = new EtcdClient({ hosts: etcd.nodes.map((n) => ({ host: n.host, port: n.port })), operationTimeoutMs: 3_000 });
  const locker = createLocker(`${etcd.url}?prefix=phases/`, { ttlMs: 10_000 });
  const rows: [string, Row][] = [
    ['raw etcd3 txn delete', rawRow(raw, false)],
    ['raw etcd3 txn delete, key watched by the deleter', rawRow(raw, true)],
    ['grpc-js KV.txn directly (etcd3 pool bypassed)', directRow(raw)],
    ['EtcdClient.deleteIf (client.ts)', wrapperRow(ours)],
    ['locksmith release()', lockerRow(locker)],
  ];
  const n = Number(process.env['BENCH_PHASE_SAMPLES'] ?? 300);
  const out = new Map<string, number[]>(rows.map(([name]) => [name, []]));
  for (let i = -50; i < n; i++)
    for (let j = 0; j < rows.length; j++) {
      const [name, row] = rows[(j + Math.max(0, i)) % rows.length] as [string, Row];
      const t = await row(i + 100);
      if (i >= 0) out.get(name)?.push(t);
    }
  console.log(`load average ${machineInfo().load.toFixed(2)}; ${n} samples per row, rows alternating`);
  console.log('| release of one key | p50 | p99 |\n|---|---:|---:|');
  for (const [name, xs] of out) {
    const p = percentiles(xs);
    console.log(`| ${name} | ${p.p50.toFixed(3)} | ${p.p99.toFixed(3)} |`);
  }
  await locker.close();
  ours.close();
  raw.close();
} finally {
  await etcd.stop();
}
