/**
 * `npm run bench:etcd-floor` — the engines' own floor under a lock hand-off, outside
 * locksmith: with the raw clients (`etcd3`'s gRPC stubs, `node-zookeeper-client`), the time
 * from process A's delete of a key to process B's watch on that key firing, and the round
 * trip of one write, for etcd (a plain delete and a delete in a transaction guarded by the
 * key's create revision, what a release sends) and for ZooKeeper (a delete of a znode B
 * holds a data watch on). B's watch is placed, then B is left idle 20–50 ms like a real
 * waiter; the clock is the machine's monotonic clock, shared by both processes.
 *
 * Each client talks to the whole cluster as locksmith does (`pool`: etcd3 picks a member per
 * call, ZooKeeper one per session) and, in the same rounds, only to the leader (`leader`).
 * Every round runs every variant, the order rotating. Both engines are of one durability
 * class: by default etcd syncs every write to disk and ZooKeeper runs with `forceSync=yes`;
 * `BENCH_ETCD_TMPFS=1` puts etcd's data on tmpfs and ZooKeeper runs with `forceSync=no`.
 * BENCH_FLOOR_ROUNDS (default 100) sets the rounds, BENCH_FLOOR_WARMUP (default 1000) the
 * create + delete pairs each client sends first, unmeasured (a JVM just started is slow). See docs/benchmarks.md.
 */
import { fork, type ChildProcess } from 'node:child_process';
import { Etcd3 } from 'etcd3';
import { percentiles } from '../src/bench-matrix/index.js';
import { loadLib, type LibClient } from '../src/backends/zookeeper/driver.js';
import { startEtcd } from '../scripts/servers/etcd.js';
import { startZooKeeper } from '../scripts/servers/zookeeper.js';
import { machineInfo } from '../src/bench-matrix/index.js';

const CHILD = 'LOCKSMITH_FLOOR_CHILD';
const ns = (): bigint => process.hrtime.bigint();
const ms = (a: bigint, b: bigint): number => Number(b - a) / 1e6;
const sleep = (t: number): Promise<void> => new Promise((r) => setTimeout(r, t));

/** Where each side connects: etcd hosts and ZooKeeper connect strings, per placement. */
interface Targets {
  readonly etcd: Record<string, string[]>;
  readonly zk: Record<string, string>;
}

/** A → B: place a watch. B → A: `ready`, then `fired` with the monotonic time of the event. */
type ToChild = { op: 'etcd'; place: string; key: string; rev: string } | { op: 'zk'; place: string; path: string };
type ToParent = { op: 'ready' } | { op: 'fired'; at: string } | { op: 'up' };

function zkConnect(connect: string): Promise<LibClient> {
  const c = loadLib().createClient(connect, { sessionTimeout: 10_000, retries: 0 });
  return new Promise((resolve) => {
    c.on('connected', () => resolve(c));
    c.connect();
  });
}

const etcdClients = (t: Targets): Record<string, Etcd3> =>
  Object.fromEntries(Object.entries(t.etcd).map(([place, hosts]) => [place, new Etcd3({ hosts })]));

async function zkClients(t: Targets): Promise<Record<string, LibClient>> {
  const out: Record<string, LibClient> = {};
  for (const [place, connect] of Object.entries(t.zk)) out[place] = await zkConnect(connect);
  return out;
}

/** Process B: place each watch asked for, answer `ready`, and report when it fires. */
async function child(): Promise<void> {
  const targets = JSON.parse(process.env[CHILD] ?? '{}') as Targets;
  const etcd = etcdClients(targets);
  const zk = await zkClients(targets);
  // Like locksmith (client.ts, "Watch stream"): one idle watch keeps each watch stream open.
  for (const c of Object.values(etcd)) await c.watch().key('\u0000floor-keeper').create();
  const send = (m: ToParent): void => void process.send?.(m);
  process.on('message', (m: ToChild) => {
    if (m.op === 'etcd') {
      const c = etcd[m.place] as Etcd3;
      void c
        .watch()
        .key(m.key)
        .startRevision((BigInt(m.rev) + 1n).toString())
        .only('delete')
        .create()
        .then((w) => {
          w.on('delete', () => {
            send({ op: 'fired', at: ns().toString() });
            void w.cancel();
          });
          send({ op: 'ready' });
        });
    } else {
      const c = zk[m.place] as LibClient;
      c.getData(
        m.path,
        () => send({ op: 'fired', at: ns().toString() }),
        () => send({ op: 'ready' }),
      );
    }
  });
  send({ op: 'up' });
}

/** The parent's side of the child: send a request and wait for the next message of a kind. */
function talk(b: ChildProcess): { send(m: ToChild): void; next(op: ToParent['op']): Promise<ToParent> } {
  const waiting: { op: string; resolve: (m: ToParent) => void }[] = [];
  b.on('message', (m: ToParent) => {
    const i = waiting.findIndex((w) => w.op === m.op);
    if (i >= 0) waiting.splice(i, 1)[0]?.resolve(m);
  });
  return {
    send: (m) => void b.send(m),
    // Bounded: a watch that never fires (an engine stalled under load) ends the run with a reason.
    next: (op) =>
      new Promise((resolve, reject) => {
        const w = { op, resolve: (m: ToParent) => (clearTimeout(timer), resolve(m)) };
        const timer = setTimeout(() => {
          waiting.splice(waiting.indexOf(w), 1);
          reject(new Error(`process B sent no '${op}' within 10 s`));
        }, 10_000);
        waiting.push(w);
      }),
  };
}

/** One sample: the write that made the key, the delete's round trip, delete sent → B's watch fired. */
interface Sample {
  readonly write: number;
  readonly del: number;
  readonly fired: number;
}

type Variant = (round: number) => Promise<Sample>;

/** etcd: A puts a key, B watches it from the next revision, A deletes it (plainly or in a txn). */
function etcdVariant(c: Etcd3, place: string, txn: boolean, b: ReturnType<typeof talk>): Variant {
  return async (round) => {
    const key = Buffer.from(`floor/${place}/${txn ? 'txn' : 'del'}/${round}`);
    const w0 = ns();
    const put = await c.kv.put({ key, value: Buffer.from('x') });
    const write = ms(w0, ns());
    const rev = BigInt(put.header.revision);
    const ready = b.next('ready');
    b.send({ op: 'etcd', place, key: key.toString(), rev: rev.toString() });
    await ready;
    await sleep(20 + Math.random() * 30);
    const fired = b.next('fired');
    const t0 = ns();
    if (txn)
      await c.kv.txn({
        compare: [{ key, target: 'Create', result: 'Equal', create_revision: rev.toString() }],
        success: [{ request_delete_range: { key } }],
      });
    else await c.kv.deleteRange({ key });
    const t1 = ns();
    const at = BigInt(((await fired) as { at: string }).at);
    return { write, del: ms(t0, t1), fired: ms(t0, at) };
  };
}

const zkCall = <T>(f: (cb: (err: unknown, v: T) => void) => void): Promise<T> =>
  new Promise((resolve, reject) => f((err, v) => (err ? reject(err as Error) : resolve(v))));

/** ZooKeeper: A creates an ephemeral znode, B sets a data watch on it, A deletes it. */
function zkVariant(c: LibClient, place: string, b: ReturnType<typeof talk>): Variant {
  return async (round) => {
    const path = `/floor-${place}-${round}`;
    const w0 = ns();
    await zkCall<string>((cb) => c.create(path, Buffer.from('x'), 1, cb));
    const write = ms(w0, ns());
    const ready = b.next('ready');
    b.send({ op: 'zk', place, path });
    await ready;
    await sleep(20 + Math.random() * 30);
    const fired = b.next('fired');
    const t0 = ns();
    await zkCall<undefined>((cb) => c.remove(path, -1, (err) => cb(err, undefined)));
    const t1 = ns();
    const at = BigInt(((await fired) as { at: string }).at);
    return { write, del: ms(t0, t1), fired: ms(t0, at) };
  };
}

/** The clients' targets: the whole cluster, and its leader alone. */
async function targetsOf(etcd: Awaited<ReturnType<typeof startEtcd>>, zk: Awaited<ReturnType<typeof startZooKeeper>>): Promise<Targets> {
  const el = await etcd.leader();
  let zl = '';
  for (const n of zk.nodes) if ((await zk.mode(n)) === 'leader') zl = `${n.host}:${n.port}`;
  if (!el || zl === '') throw new Error('no leader found');
  return {
    etcd: { pool: etcd.nodes.map((n) => `${n.host}:${n.port}`), leader: [`${el.host}:${el.port}`] },
    zk: { pool: zk.connectString, leader: zl },
  };
}

const fmt = (xs: number[]): string => {
  const p = percentiles(xs);
  return `${p.p50.toFixed(3)} / ${p.p99.toFixed(3)}`;
};

/**
 * Warm both engines (a JVM just started compiles its hot paths for its first thousands of
 * requests): `n` create + delete pairs through every client, before anything is measured.
 */
async function warm(ec: Record<string, Etcd3>, zc: Record<string, LibClient>, n: number): Promise<void> {
  for (let i = 0; i < n; i++) {
    for (const c of Object.values(ec)) {
      const key = Buffer.from(`floor/warm/${i}`);
      await c.kv.put({ key, value: Buffer.from('x') });
      await c.kv.deleteRange({ key });
    }
    for (const c of Object.values(zc)) {
      await zkCall<string>((cb) => c.create(`/warm-${i}`, Buffer.from('x'), 1, cb));
      await zkCall<undefined>((cb) => c.remove(`/warm-${i}`, -1, (err) => cb(err, undefined)));
    }
  }
}

/** Every variant once per round, in an order that rotates; one warm-up round first. */
async function rounds(variants: [string, Variant][], n: number): Promise<Map<string, Sample[]>> {
  const out = new Map<string, Sample[]>(variants.map(([name]) => [name, []]));
  for (let r = -1; r < n; r++) {
    for (let i = 0; i < variants.length; i++) {
      const [name, run] = variants[(i + Math.max(0, r)) % variants.length] as [string, Variant];
      const s = await run(r + 1);
      if (r >= 0) out.get(name)?.push(s);
    }
  }
  return out;
}

async function main(): Promise<void> {
  const n = Number(process.env['BENCH_FLOOR_ROUNDS'] ?? 100);
  const tmpfs = process.env['BENCH_ETCD_TMPFS'] === '1';
  const etcd = await startEtcd({ memory: tmpfs });
  const zk = await startZooKeeper({ nodes: 3, forceSync: !tmpfs });
  let b: ChildProcess | undefined;
  try {
    const targets = await targetsOf(etcd, zk);
    b = fork(import.meta.filename, [], { env: { ...process.env, [CHILD]: JSON.stringify(targets) }, execArgv: process.execArgv });
    const ch = talk(b);
    await ch.next('up');
    const ec = etcdClients(targets);
    const zc = await zkClients(targets);
    const variants: [string, Variant][] = [];
    for (const place of ['pool', 'leader']) {
      variants.push([`etcd ${place}, delete`, etcdVariant(ec[place] as Etcd3, place, false, ch)]);
      variants.push([`etcd ${place}, txn delete (create-revision compare)`, etcdVariant(ec[place] as Etcd3, place, true, ch)]);
      variants.push([`zookeeper ${place}, delete`, zkVariant(zc[place] as LibClient, place, ch)]);
    }
    const m = machineInfo();
    console.log(`machine: ${m.cpus} CPUs, ${m.cpu}, node ${m.node}, load average ${m.load.toFixed(2)} at the start`);
    console.log(
      `etcd 3 members, data on ${tmpfs ? 'tmpfs' : 'disk (fsync per write)'}; ZooKeeper 3 nodes, forceSync=${tmpfs ? 'no' : 'yes'}; ${n} rounds, variants alternating`,
    );
    await warm(ec, zc, Number(process.env['BENCH_FLOOR_WARMUP'] ?? 1000));
    const results = await rounds(variants, n);
    console.log(
      '| engine, clients, operation | one write (create) p50 / p99 | delete answered p50 / p99 | delete sent → B watch fired p50 / p99 |',
    );
    console.log('|---|---:|---:|---:|');
    for (const [name, s] of results)
      console.log(`| ${name} | ${fmt(s.map((x) => x.write))} | ${fmt(s.map((x) => x.del))} | ${fmt(s.map((x) => x.fired))} |`);
    console.log(`load average ${machineInfo().load.toFixed(2)} at the end`);
    for (const c of Object.values(ec)) c.close();
    for (const c of Object.values(zc)) c.close();
  } finally {
    b?.kill();
    await etcd.stop();
    await zk.stop();
  }
}

if (process.env[CHILD]) await child();
else await main();
