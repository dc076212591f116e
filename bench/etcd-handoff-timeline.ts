/**
 * `npx tsx bench/etcd-handoff-timeline.ts` — locksmith's etcd hand-off split into phases, in
 * one process (a holder and a waiter, each its own backend and connections; the waiter idle
 * 20–50 ms): `release()` called → the delete transaction handed to the `etcd3` client →
 * its answer → `release()` resolved; and on the waiter's side the watch event's arrival →
 * `lock()` resolved. The timestamps come from wrappers around the backend's own client
 * objects (nothing else changes). `BENCH_ETCD_TMPFS=1` puts etcd's data on tmpfs;
 * BENCH_HANDOFF_ROUNDS (default 100).
 */
import { createLocker } from '../src/index.js';
import { EtcdBackend } from '../src/backends/etcd/index.js';
import { machineInfo, percentiles } from '../src/bench-matrix/index.js';
import { startEtcd } from '../scripts/servers/etcd.js';

const now = (): number => Number(process.hrtime.bigint()) / 1e6;
const marks = new Map<string, number>();
const mark = (k: string): void => void (marks.has(k) || marks.set(k, now()));

/** Stamp the holder's transactions: when each is handed to etcd3 and when it is answered. */
function stampTxns(b: EtcdBackend): void {
  const kv = b.client.raw.kv;
  const txn = kv.txn.bind(kv);
  kv.txn = async (...args: Parameters<typeof txn>) => {
    mark('sent');
    const res = await txn(...args);
    mark('answered');
    return res;
  };
}

/** Stamp the waiter's watch events as they arrive, before any listener of ours runs. */
function stampWatches(b: EtcdBackend): void {
  const client = b.client;
  const watch = client.watch.bind(client);
  client.watch = () => {
    const builder = watch();
    const make = builder.watcher.bind(builder);
    builder.watcher = () => {
      const w = make();
      w.prependListener('delete', () => mark('event'));
      return w;
    };
    return builder;
  };
}

/** Stamp when a backend method is entered and when its promise settles, as `name` and `name done`. */
function stampMethod(b: EtcdBackend, method: 'release' | 'tryAcquire' | 'waitForChange', name: string): void {
  const f = (b[method] as (...a: unknown[]) => Promise<unknown>).bind(b);
  (b as unknown as Record<string, unknown>)[method] = async (...a: unknown[]) => {
    mark(name);
    const res = await f(...a);
    mark(`${name} done`);
    return res;
  };
}

const etcd = await startEtcd({ memory: process.env['BENCH_ETCD_TMPFS'] === '1' });
try {
  const hosts = etcd.nodes.map((n) => ({ host: n.host, port: n.port }));
  const hb = new EtcdBackend({ hosts, prefix: 'timeline/' });
  const wb = new EtcdBackend({ hosts, prefix: 'timeline/' });
  stampTxns(hb);
  stampWatches(wb);
  stampMethod(hb, 'release', 'backend release');
  stampMethod(wb, 'waitForChange', 'wait');
  stampMethod(wb, 'tryAcquire', 'attempt');
  const holder = createLocker(hb, { ttlMs: 10_000 });
  const waiter = createLocker(wb, { ttlMs: 10_000 });
  const phases: Record<string, number[]> = {};
  const add = (name: string, v: number): void => void (phases[name] ??= []).push(v);
  const n = Number(process.env['BENCH_HANDOFF_ROUNDS'] ?? 100);
  for (let r = -10; r < n; r++) {
    const held = await holder.lock('t');
    const next = waiter.lock('t').then((h) => ({ h, at: now() }));
    await new Promise((res) => setTimeout(res, 20 + Math.random() * 30));
    const t0 = now();
    marks.clear();
    await held.release();
    const released = now();
    const { h, at } = await next;
    const m = Object.fromEntries(marks);
    await h.release();
    if (r < 0 || m['sent'] === undefined || m['answered'] === undefined || m['event'] === undefined) continue;
    const at2 = (k: string): number => m[k] ?? Number.NaN;
    add('release() called → backend release() entered', at2('backend release') - t0);
    add('backend release() entered → delete handed to etcd3', m['sent'] - at2('backend release'));
    add('waiter watch event → waitForChange resolved', at2('wait done') - m['event']);
    add('waitForChange resolved → tryAcquire entered', at2('attempt') - at2('wait done'));
    add('tryAcquire entered → resolved (the grant)', at2('attempt done') - at2('attempt'));
    add('tryAcquire resolved → lock() resolved', at - at2('attempt done'));
    add('delete handed to etcd3 → answered', m['answered'] - m['sent']);
    add('delete answered → release() resolved', released - m['answered']);
    add('release() called → waiter watch event', m['event'] - t0);
    add('waiter watch event → lock() resolved', at - m['event']);
    add('release() called → lock() resolved (the hand-off)', at - t0);
  }
  console.log(
    `load average ${machineInfo().load.toFixed(2)} at the end; etcd on ${process.env['BENCH_ETCD_TMPFS'] === '1' ? 'tmpfs' : 'disk'}`,
  );
  console.log('| phase | p50 (ms) | p99 (ms) | n |\n|---|---:|---:|---:|');
  for (const [name, xs] of Object.entries(phases)) {
    const p = percentiles(xs);
    console.log(`| ${name} | ${p.p50.toFixed(3)} | ${p.p99.toFixed(3)} | ${p.n} |`);
  }
  await holder.close();
  await waiter.close();
} finally {
  await etcd.stop();
}
