/**
 * `npm run bench:etcd` — the benchmark matrix (src/bench-matrix/) on a real 3-member etcd cluster
 * started by the harness: locksmith's etcd backend (the Go `concurrency.Mutex` recipe, FIFO)
 * next to `etcdctl lock`, the Go client's own lock, on the same cluster in the same run, with
 * ratios against it. `etcdctl lock` is a process per acquisition (it prints the key once it
 * holds, and releases on SIGINT), so its rows include a process start; it runs the hot-lock
 * rows up to 8 contenders and skips the keys and waiters rows. Knobs: bench/common.ts
 * (BENCH_QUICK=1 for a smoke run), plus BENCH_ETCD_TMPFS=1 to put etcd's data on tmpfs (no
 * fsync cost). See docs/benchmarks.md.
 */
import { execFile, spawn, type ChildProcess } from 'node:child_process';
import { promisify } from 'node:util';
import { createLocker } from '../src/index.js';
import { lockerContender, type BenchClient, type BenchHold, type Contender } from '../src/bench-matrix/index.js';
import { startEtcd } from '../scripts/servers/etcd.js';
import { childOrMain, runEngine } from './common.js';

const TTL_MS = 10_000;

/** One `etcdctl lock` process per acquisition: held once it prints its key, released by SIGINT. */
function etcdctlAcquire(endpoints: string, lockId: string, running: Set<ChildProcess>, signal?: AbortSignal): Promise<BenchHold> {
  return new Promise((resolve, reject) => {
    const child = spawn('etcdctl', [`--endpoints=${endpoints}`, 'lock', lockId], { stdio: ['ignore', 'pipe', 'ignore'] });
    running.add(child);
    const exited = new Promise<void>((done) => child.once('exit', () => done()));
    const onAbort = (): void => void child.kill('SIGKILL');
    signal?.addEventListener('abort', onAbort, { once: true });
    void exited.then(() => {
      running.delete(child);
      signal?.removeEventListener('abort', onAbort);
      reject(new Error('etcdctl lock exited before it held the lock'));
    });
    child.stdout.once('data', () => {
      signal?.removeEventListener('abort', onAbort);
      resolve({
        release: async () => {
          child.kill('SIGINT');
          await exited;
        },
      });
    });
  });
}

function etcdctl(endpoints: string): Contender {
  return {
    name: 'etcdctl lock (Go client)',
    peer: true,
    fair: true,
    reportsQueued: false,
    limits: { maxContenders: 8, keys: false, waiters: false },
    client(): BenchClient {
      const running = new Set<ChildProcess>();
      return {
        acquire: (lockId, o = {}) => etcdctlAcquire(endpoints, lockId, running, o.signal),
        close: async () => {
          for (const c of running) c.kill('SIGKILL');
        },
      };
    },
  };
}

/** `etcdctl version`'s first line's number (the server is the same Debian package). */
async function etcdVersion(): Promise<string> {
  const { stdout } = await promisify(execFile)('etcdctl', ['version']);
  return /version:\s*(\S+)/.exec(stdout)?.[1] ?? '?';
}

/** Every library of the run on the cluster at `url` (also what a forked hand-off waiter makes). */
function contenders(url: string): Contender[] {
  const endpoints = url
    .replace(/^etcd:\/\//, '')
    .split(',')
    .map((h) => `http://${h}`)
    .join(',');
  const locksmith = lockerContender('locksmith', () => createLocker(`${url}?prefix=bench/`, { ttlMs: TTL_MS }), true);
  return [locksmith, etcdctl(endpoints)];
}

childOrMain(contenders, async () => {
  const tmpfs = process.env['BENCH_ETCD_TMPFS'] === '1';
  const etcd = await startEtcd({ memory: tmpfs });
  try {
    await runEngine({
      engine: `etcd ${await etcdVersion()} 3-member cluster, data on ${tmpfs ? 'tmpfs (no fsync)' : 'disk (fsync per write)'}`,
      contenders: contenders(etcd.url),
      fork: { script: import.meta.filename, url: etcd.url },
      notes: [
        `ttl ${TTL_MS} ms; locksmith's recipe is FIFO; etcdctl lock: a process per acquisition, hot-lock rows up to 8, no keys or waiters row`,
      ],
    });
  } finally {
    await etcd.stop();
  }
});
