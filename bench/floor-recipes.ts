/**
 * The least a queue lock can do on etcd and on ZooKeeper, with the raw clients, as matrix
 * contenders (bench/etcd-handoff.ts runs them in the same alternating rounds as locksmith):
 * a waiter adds its key (etcd: a put and a listing in one transaction; ZooKeeper: a
 * sequential ephemeral znode, then the children), watches the key just before its own and
 * holds on that key's deletion, with no request in between; a release is one delete (etcd:
 * guarded by the key's create revision, as any safe client sends it). No lease, no session
 * checks, no ttl, no retries: a floor for the hand-off, not a lock to use.
 */
import { randomUUID } from 'node:crypto';
import { Etcd3 } from 'etcd3';
import type { BenchClient, Contender } from '../src/bench-matrix/index.js';
import { loadLib, type LibClient } from '../src/backends/zookeeper/driver.js';
import { rangeEnd } from '../src/backends/etcd/layout.js';

/** The raw etcd recipe on the members of an `etcd://h:p,h:p` URL. */
export function rawEtcdContender(url: string): Contender {
  const hosts =
    url
      .replace(/^etcd:\/\//, '')
      .split(/[/?]/)[0]
      ?.split(',') ?? [];
  return { name: 'raw etcd recipe', fair: true, reportsQueued: true, client: () => rawEtcdClient(hosts) };
}

async function rawEtcdClient(hosts: string[]): Promise<BenchClient> {
  const c = new Etcd3({ hosts });
  // One idle watch keeps the watch stream open, as locksmith does.
  const keeper = await c.watch().key('\u0000floor-keeper').create();
  return {
    async acquire(lockId, o) {
      const prefix = Buffer.from(`floor-recipe/${lockId}/`);
      const key = Buffer.from(`floor-recipe/${lockId}/${randomUUID()}`);
      const res = await c.kv.txn({
        compare: [],
        success: [
          { request_put: { key, value: Buffer.from('x') } },
          { request_range: { key: prefix, range_end: rangeEnd(prefix), sort_order: 'Ascend', sort_target: 'Create', keys_only: true } },
        ],
      });
      const rev = BigInt(res.header.revision);
      const keys = (res.responses[1]?.response_range?.kvs ?? []).map((kv) => kv.key.toString());
      const before = keys[keys.indexOf(key.toString()) - 1];
      const release = async (): Promise<void> => {
        await c.kv.txn({
          compare: [{ key, target: 'Create', result: 'Equal', create_revision: rev.toString() }],
          success: [{ request_delete_range: { key } }],
        });
      };
      if (before === undefined) return { release };
      const w = c
        .watch()
        .key(before)
        .startRevision((rev + 1n).toString())
        .only('delete')
        .watcher();
      o?.onQueued?.();
      await new Promise<void>((resolve) => w.once('delete', () => resolve()));
      setImmediate(() => void w.cancel());
      return { release };
    },
    async close() {
      await keeper.cancel();
      c.close();
    },
  };
}

/** The raw ZooKeeper recipe on the ensemble of a `zookeeper://h:p,h:p/...` URL. */
export function rawZooKeeperContender(url: string): Contender {
  const connect = decodeURIComponent(url.replace(/^zookeeper:\/\//, '').split(/[/?]/)[0] ?? '');
  return { name: 'raw zookeeper recipe', fair: true, reportsQueued: true, client: () => rawZkClient(connect) };
}

const call = <T>(f: (cb: (err: unknown, v: T) => void) => void): Promise<T> =>
  new Promise((resolve, reject) => f((err, v) => (err ? reject(err as Error) : resolve(v))));

/** Create `path` (persistent) unless it exists. */
async function ensure(c: LibClient, path: string): Promise<void> {
  await call<string>((cb) => c.create(path, Buffer.alloc(0), 0, cb)).catch((err: unknown) => {
    if ((err as { code?: number }).code !== -110) throw err;
  });
}

async function rawZkClient(connect: string): Promise<BenchClient> {
  const c = loadLib().createClient(connect, { sessionTimeout: 10_000, retries: 0 });
  await new Promise<void>((resolve) => {
    c.on('connected', () => resolve());
    c.connect();
  });
  await ensure(c, '/floor-recipe');
  const made = new Set<string>();
  return {
    async acquire(lockId, o) {
      const dir = `/floor-recipe/${encodeURIComponent(lockId)}`;
      if (!made.has(dir)) await ensure(c, dir);
      made.add(dir);
      const path = await call<string>((cb) => c.create(`${dir}/n-`, Buffer.alloc(0), 3, cb));
      const release = (): Promise<void> => call<undefined>((cb) => c.remove(path, -1, (err) => cb(err, undefined)));
      for (;;) {
        const children = (await call<string[]>((cb) => c.getChildren(dir, undefined, (err, ch) => cb(err, ch)))).sort();
        const before = children[children.indexOf(path.slice(dir.length + 1)) - 1];
        if (before === undefined) return { release };
        let deleted!: () => void;
        const gone = new Promise<void>((resolve) => (deleted = resolve));
        const there = await call<boolean>((cb) =>
          c.getData(
            `${dir}/${before}`,
            () => deleted(),
            (err) => cb((err as { code?: number } | null)?.code === -101 ? null : err, !err),
          ),
        );
        if (!there) continue;
        o?.onQueued?.();
        await gone;
        return { release };
      }
    },
    close() {
      c.close();
      return Promise.resolve();
    },
  };
}
