/**
 * The fault runner: W worker processes contend for one lock on a real engine, each through its
 * own fault proxies, and increment a counter in a fenced store kept in this process; the
 * nemesis injects one kind of fault again and again against the current holder (or the
 * servers); the checker reads the store's history. Used by the fault tests (short runs) and by
 * the soak (`npm run faults`).
 */
import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { setTimeout as sleep } from 'node:timers/promises';
import { startFaultProxy, startFencedStore, type FaultProxy, type FenceMode, type FencedStore } from '../../src/testing.js';
import { faketimeLibrary, type RunningServer, type ServerClock } from '../../scripts/servers/harness.js';
import { check, type Figures } from './checker.js';
import { FAULTS, faketimeOffset, type Fault, type FaultName, type NemesisContext, type WorkerHandle } from './nemesis.js';
import { endpointsOf, withEndpoints, type FaultProfile } from './profiles.js';
import { startClockedServer } from './server-clock.js';
import type { WorkerConfig } from './worker.js';
import type { GuardConfig } from './guard.js';

/** One run. */
export interface RunSpec {
  readonly profile: FaultProfile;
  /** The engine's URL (from the harness or from the command line). */
  readonly url: string;
  /** The engine, when this process started it (server kills need it). */
  readonly server?: RunningServer;
  readonly fault: FaultName;
  readonly mode: FenceMode;
  readonly clients: number;
  /** How long the nemesis keeps injecting; workers then finish their current operation. */
  readonly durationMs: number;
  /**
   * Critical section (between the fenced read and the fenced write) in ms. @default the
   * profile's. The soak's unfenced runs make it as long as a pause, so that a paused holder
   * wakes inside its successor's section: what write-only fencing cannot catch.
   */
  readonly criticalMs?: number;
  /** Cap on increments tried per worker process. @default unlimited */
  readonly maxOps?: number;
  /** A `locksmith-dlm/fenced` helper each worker also writes through (./guard.ts). */
  readonly guard?: GuardConfig;
}

/** A run's figures, or why the fault does not apply. */
export type RunResult =
  (Figures & { readonly skipped?: undefined; readonly clients: number; readonly wallMs: number }) | { readonly skipped: string };

const here = dirname(fileURLToPath(import.meta.url));

// libfaketime's preload library now lives in the server harness (servers start on fake clocks
// too); re-exported for the tests that take it from here.

interface Fleet {
  readonly workers: WorkerHandle[];
  readonly exited: Promise<unknown>[];
  spawnWorker(index: number, proxies: readonly FaultProxy[], name: string): WorkerHandle;
}

function fleet(spec: RunSpec, store: FencedStore, lockId: string, clockDir: string | undefined, libfaketime: string | undefined): Fleet {
  const workers: WorkerHandle[] = [];
  const exited: Promise<unknown>[] = [];
  const offset: Fault = FAULTS[spec.fault];
  return {
    workers,
    exited,
    spawnWorker(index, proxies, name) {
      const p = spec.profile;
      const url = p.tune(
        withEndpoints(
          spec.url,
          proxies.map((x) => x.address),
        ),
      );
      const config: WorkerConfig = {
        url,
        lockId,
        client: name,
        storePort: store.port,
        ttlMs: p.ttlMs,
        lockDelayMs: p.lockDelayMs,
        fair: p.fair ?? false,
        criticalMs: spec.criticalMs ?? offset.criticalMs?.(p) ?? p.criticalMs,
        maxOps: spec.maxOps ?? Number.MAX_SAFE_INTEGER,
        ...(spec.guard ? { guard: spec.guard } : {}),
      };
      let clock: WorkerHandle['clock'];
      const env = { ...process.env };
      if (clockDir && libfaketime && offset.clockOffsetMs) {
        const baseMs = offset.clockOffsetMs(index, p);
        const file = join(clockDir, `${name}.time`);
        writeFileSync(file, faketimeOffset(baseMs));
        clock = { file, baseMs, jumped: false };
        Object.assign(env, {
          LD_PRELOAD: libfaketime,
          FAKETIME_TIMESTAMP_FILE: file,
          FAKETIME_CACHE_DURATION: '1',
          FAKETIME_DONT_FAKE_MONOTONIC: '1',
        });
      }
      const child = spawn(process.execPath, ['--import', 'tsx', join(here, 'worker.ts'), JSON.stringify(config)], {
        stdio: ['pipe', 'ignore', 'inherit'],
        env,
      });
      child.stdin.on('error', () => undefined);
      exited.push(new Promise((resolve) => child.once('exit', resolve)));
      const w: WorkerHandle = { name, child, proxies, ...(clock ? { clock } : {}) };
      workers.push(w);
      return w;
    },
  };
}

async function nemesisLoop(ctx: NemesisContext, spec: RunSpec, until: number): Promise<void> {
  // Let the workers start (a tsx process takes a second or more on a loaded machine; a fresh
  // engine, as a server-clock run starts, longer): the faults get at least half the run after
  // the first section began, not none when the start took the whole run.
  while (performance.now() < until + 60_000 && ctx.store.history().every((e) => e.op !== 'begin')) await sleep(50);
  const end = Math.max(until, performance.now() + spec.durationMs / 2);
  while (performance.now() < end) {
    await FAULTS[spec.fault].inject(ctx);
    await sleep(100 + Math.random() * 200);
  }
}

/**
 * Workers still running a minute after the stop are a liveness failure (every waiting call
 * has a timeout): record each with its last recorded step, for the checker and the reader.
 */
function noteStuck(store: FencedStore, workers: readonly WorkerHandle[]): void {
  const history = store.history();
  for (const w of workers) {
    if (w.child.exitCode !== null || w.child.signalCode !== null) continue;
    const last = history.findLast((e) => e.client === w.name);
    const step = last ? `${last.op}${last.text ? ` ${last.text}` : ''}${last.token === undefined ? '' : ` ${last.token}`}` : 'nothing';
    store.note('nemesis', `stuck ${w.name}: last step ${step}`);
  }
}

/**
 * Run one fault against one backend and check the history. A server-clock fault runs on an
 * engine of its own, started on a clock it can step (test/faults/server-clock.ts).
 */
export async function runFault(spec: RunSpec): Promise<RunResult> {
  const fault: Fault = FAULTS[spec.fault];
  const why = fault.skip(spec.profile, spec.server !== undefined);
  if (why) return { skipped: why };
  if (!fault.serverClock) return runChecked(spec, fault, undefined);
  const clocked = await startClockedServer(spec.profile, fault.serverClock.fakeMonotonic);
  try {
    return await runChecked({ ...spec, url: clocked.server.url, server: clocked.server }, fault, clocked.clock);
  } finally {
    await clocked.stop();
  }
}

/** Workers, the nemesis and the checker, once `spec`'s engine serves. */
async function runChecked(spec: RunSpec, fault: Fault, serverClock: ServerClock | undefined): Promise<RunResult> {
  const clockDir = fault.clockOffsetMs ? mkdtempSync(join(tmpdir(), 'locksmith-clock-')) : undefined;
  const libfaketime = clockDir ? await faketimeLibrary() : undefined;
  const store = await startFencedStore({ mode: spec.mode });
  // The store's clock on the wall clock, for the workers' grant times (test/faults/checker.ts).
  store.note('runner', `epoch ${(performance.timeOrigin + performance.now()).toFixed(1)}`);
  const lockId = `fault:${spec.fault}:${spec.mode}:${Date.now()}`;
  const endpoints = endpointsOf(spec.url, spec.profile.defaultPort);
  const f = fleet(spec, store, lockId, clockDir, libfaketime);
  const allProxies: FaultProxy[] = [];
  const started = performance.now();
  let stopped = false;
  let replaced = 0;
  try {
    for (let i = 0; i < spec.clients; i++) {
      const proxies = await Promise.all(
        endpoints.map((ep) => {
          const [host, port] = [ep.slice(0, ep.lastIndexOf(':')), Number(ep.slice(ep.lastIndexOf(':') + 1))];
          return startFaultProxy({ targetHost: host, targetPort: port });
        }),
      );
      allProxies.push(...proxies);
      f.spawnWorker(i, proxies, `w${i}`);
    }
    const ctx: NemesisContext = {
      profile: spec.profile,
      server: spec.server,
      store,
      ...(serverClock ? { serverClock } : {}),
      running: () => !stopped,
      async holder() {
        const name = store.currentHolder();
        return f.workers.find((w) => w.name === name && w.child.exitCode === null && w.child.signalCode === null);
      },
      async replace(w) {
        replaced += 1;
        f.spawnWorker(f.workers.indexOf(w), w.proxies, `${w.name}.${replaced}`);
      },
    };
    await nemesisLoop(ctx, spec, started + spec.durationMs);
    stopped = true;
    for (const w of f.workers) w.child.stdin?.end();
    const deadline = sleep(60_000, 'late', { ref: false });
    if ((await Promise.race([Promise.all(f.exited), deadline])) === 'late') noteStuck(store, f.workers);
    const figures = check(store.history(), store.value());
    return { ...figures, clients: spec.clients, wallMs: Math.round(performance.now() - started) };
  } finally {
    stopped = true;
    for (const w of f.workers) if (w.child.exitCode === null && w.child.signalCode === null) w.child.kill('SIGKILL');
    await Promise.all(allProxies.map((p) => p.close()));
    await store.close();
    if (clockDir) rmSync(clockDir, { recursive: true, force: true });
  }
}
