/**
 * The nemesis against the service (docs/guarantees.md, "Through the lock service"): two
 * replicas of `locksmith serve` over one engine, each reaching it through its own fault proxy
 * (service↔backend); worker processes (fault-worker.ts) reach each replica through their own
 * fault proxies (client↔service) and increment a counter in a fenced store with the tokens the
 * service gave them. One kind of fault is injected again and again against the current holder;
 * the checker of the library's fault tests (test/faults/checker.ts) reads the store's history.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { setTimeout as sleep } from 'node:timers/promises';
import { startFaultProxy, startFencedStore, type FaultMode, type FaultProxy, type FencedStore } from '../../src/testing.js';
import { check, type Figures } from '../faults/checker.js';
import { spawnService, type ServiceProcess } from './process.js';
import type { ServeWorkerConfig } from './fault-worker.js';

const here = dirname(fileURLToPath(import.meta.url));

/** The faults, by name. */
export type ServeFault = 'replica-kill' | 'partition-client' | 'partition-backend' | 'pause';

/**
 * Lease and fault lengths: the session ttl (1 s is the service's least), faults past it, and
 * critical sections longer than a ttl plus a keepalive period, so that a holder cut off (or
 * paused) inside its section writes after its lease ended: what the fence must refuse.
 */
export const SERVE_FAULTS = { ttlMs: 1_500, faultMs: 2_500, criticalMs: 2_200 } as const;

/** One replica: its process, restartable on the same port, behind its backend proxy. */
interface Replica {
  proc: ServiceProcess;
  readonly port: number;
  readonly backendProxy: FaultProxy;
}

/** Two replicas of the service over one engine, each through its own proxy to the engine. */
export class ServiceCluster {
  readonly replicas: Replica[] = [];
  #backendUrl(proxy: FaultProxy): string {
    return `${this.scheme}://${proxy.address}${this.suffix}`;
  }
  constructor(
    readonly scheme: string,
    readonly suffix: string,
  ) {}

  /** Start `n` replicas over the engine at `host:port` (`scheme://…suffix`). */
  static async start(url: string, n = 2): Promise<ServiceCluster> {
    const u = new URL(url);
    const suffix = `${u.pathname === '/' ? '' : u.pathname}${u.search}`;
    const cluster = new ServiceCluster(u.protocol.replace(':', ''), suffix);
    for (let i = 0; i < n; i++) {
      const backendProxy = await startFaultProxy({ targetHost: u.hostname, targetPort: Number(u.port) });
      const proc = await spawnService(cluster.#backendUrl(backendProxy));
      cluster.replicas.push({ proc, port: Number(new URL(proc.base).port), backendProxy });
    }
    return cluster;
  }

  /** kill -9 replica `i` (its long polls and connections die with it). */
  async kill(i: number): Promise<void> {
    await this.replicas[i]?.proc.kill();
  }

  /** Start replica `i` again on its port. */
  async restart(i: number): Promise<void> {
    const r = this.replicas[i];
    if (!r) return;
    r.proc = await spawnService(this.#backendUrl(r.backendProxy), ['--insecure-local', '--listen', `127.0.0.1:${r.port}`]);
  }

  async close(): Promise<void> {
    await Promise.all(this.replicas.map((r) => r.proc.kill()));
    await Promise.all(this.replicas.map((r) => r.backendProxy.close()));
  }
}

/** A worker process and its proxies to each replica. */
interface Worker {
  readonly name: string;
  readonly index: number;
  readonly child: ChildProcess;
  readonly proxies: readonly FaultProxy[];
  readonly exited: Promise<unknown>;
}

interface Ctx {
  readonly cluster: ServiceCluster;
  readonly store: FencedStore;
  readonly workers: readonly Worker[];
  /** How many times this fault was injected so far (alternates the variants). */
  readonly n: number;
}

const note = (ctx: Ctx, text: string): void => ctx.store.note('nemesis', text);

function holder(ctx: Ctx): Worker | undefined {
  const name = ctx.store.currentHolder();
  return ctx.workers.find((w) => w.name === name);
}

function setModes(proxies: readonly FaultProxy[], mode: FaultMode): void {
  for (const p of proxies) p.setMode(mode);
}

/** Inject one fault against the current holder (or its replica), and heal it. */
const INJECT: Record<ServeFault, (ctx: Ctx) => Promise<void>> = {
  /** kill -9 the replica the holder (and half the waiters) started on; restart it on its port. */
  async 'replica-kill'(ctx) {
    const i = (holder(ctx)?.index ?? 0) % ctx.cluster.replicas.length;
    note(ctx, `fault replica-kill r${i}`);
    await ctx.cluster.kill(i);
    await sleep(SERVE_FAULTS.faultMs);
    await ctx.cluster.restart(i);
    note(ctx, 'heal replica-kill');
  },
  /** The holder's connections to every replica hang (then, next time, are reset), past its ttl. */
  async 'partition-client'(ctx) {
    const w = holder(ctx);
    if (!w) return;
    const mode = ctx.n % 2 === 0 ? 'blackhole' : 'reset';
    note(ctx, `fault partition-client-${mode} ${w.name}`);
    setModes(w.proxies, mode);
    await sleep(SERVE_FAULTS.faultMs);
    setModes(w.proxies, 'pass');
    note(ctx, 'heal partition-client');
  },
  /** The holder's replica (then, next time, every replica) loses the engine, past the ttl. */
  async 'partition-backend'(ctx) {
    const all = ctx.n % 2 === 1;
    const i = (holder(ctx)?.index ?? 0) % ctx.cluster.replicas.length;
    const proxies = ctx.cluster.replicas.filter((_r, j) => all || j === i).map((r) => r.backendProxy);
    const mode = ctx.n % 4 < 2 ? 'blackhole' : 'reset';
    note(ctx, `fault partition-backend-${mode} ${all ? 'every replica' : `r${i}`}`);
    setModes(proxies, mode);
    await sleep(SERVE_FAULTS.faultMs);
    setModes(proxies, 'pass');
    note(ctx, 'heal partition-backend');
  },
  /** SIGSTOP the holder (an HTTP client) past its session's ttl, then SIGCONT. */
  async pause(ctx) {
    const w = holder(ctx);
    if (!w?.child.pid) return;
    note(ctx, `fault pause ${w.name}`);
    process.kill(w.child.pid, 'SIGSTOP');
    await sleep(SERVE_FAULTS.faultMs);
    process.kill(w.child.pid, 'SIGCONT');
    note(ctx, 'heal pause');
  },
};

async function spawnWorker(cluster: ServiceCluster, store: FencedStore, lockId: string, index: number): Promise<Worker> {
  const proxies = await Promise.all(cluster.replicas.map((r) => startFaultProxy({ targetPort: r.port })));
  const name = `w${index}`;
  const config: ServeWorkerConfig = {
    bases: proxies.map((p) => `http://${p.address}`),
    lockId,
    client: name,
    storePort: store.port,
    ttlMs: SERVE_FAULTS.ttlMs,
    criticalMs: SERVE_FAULTS.criticalMs,
  };
  const child = spawn(process.execPath, ['--import', 'tsx', join(here, 'fault-worker.ts'), JSON.stringify(config)], {
    stdio: ['pipe', 'ignore', 'inherit'],
    env: { ...process.env, NODE_OPTIONS: '' },
  });
  child.stdin.on('error', () => undefined);
  return { name, index, child, proxies, exited: new Promise((r) => child.once('exit', r)) };
}

/** A run's figures (the checker's), with its wall time. */
export type ServeRun = Figures & { readonly clients: number; readonly wallMs: number };

/** Run `fault` against the cluster for `durationMs` with `clients` workers, and check the history. */
export async function runServeFault(cluster: ServiceCluster, fault: ServeFault, clients: number, durationMs: number): Promise<ServeRun> {
  const store = await startFencedStore({ mode: 'reads-and-writes' });
  const started = performance.now();
  const workers: Worker[] = [];
  try {
    const lockId = `serve-fault/${fault}/${Date.now()}`;
    for (let i = 0; i < clients; i++) workers.push(await spawnWorker(cluster, store, lockId, i));
    // Workers take a second or more to start (tsx): the clock starts at the first section.
    while (store.history().every((e) => e.op !== 'begin') && performance.now() - started < 30_000) await sleep(50);
    const until = performance.now() + durationMs;
    for (let n = 0; performance.now() < until; n++) {
      await INJECT[fault]({ cluster, store, workers, n });
      await sleep(300);
    }
    for (const w of workers) w.child.stdin?.end();
    const late = sleep(20_000, 'late', { ref: false });
    if ((await Promise.race([Promise.all(workers.map((w) => w.exited)), late])) === 'late') {
      for (const w of workers) if (w.child.exitCode === null) store.note('nemesis', `stuck ${w.name}`);
    }
    return { ...check(store.history(), store.value()), clients, wallMs: Math.round(performance.now() - started) };
  } finally {
    for (const w of workers) if (w.child.exitCode === null && w.child.signalCode === null) w.child.kill('SIGKILL');
    await Promise.all(workers.flatMap((w) => w.proxies.map((p) => p.close())));
    await store.close();
  }
}
