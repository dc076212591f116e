/**
 * Fault scenario runner: W worker processes contend for one lock on a real backend and
 * increment a fenced counter; a pauser SIGSTOPs the *current holder* past its ttl (random
 * pauses of random processes provoke nothing — the fault-injection notes) and resumes it.
 * The checker: every acknowledged increment must be in the final value.
 */
import { spawn } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { dirname, join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { startFencedStore, type FenceMode } from './fenced-store.js';

/** Scenario settings. */
export interface FaultScenario {
  readonly url: string;
  readonly mode: FenceMode;
  readonly workers: number;
  readonly opsPerWorker: number;
  readonly ttlMs: number;
  readonly criticalMs: number;
  /** Pause the current holder this long (should exceed the ttl) … */
  readonly pauseMs: number;
  /** … this many times during the run. */
  readonly pauses: number;
  readonly lockId?: string;
}

/** What the checker found. */
export interface FaultResult {
  readonly mode: FenceMode;
  /** Increments the store acknowledged. */
  readonly committed: number;
  /** The counter's final value. */
  readonly final: number;
  /** Acknowledged increments missing from the final value (a safety violation). */
  readonly lostUpdates: number;
  /** Operations the fence rejected (the fence doing its job). */
  readonly rejected: number;
  readonly pausesDone: number;
}

const here = dirname(fileURLToPath(import.meta.url));

/** Run one scenario and check it. */
export async function runFaultScenario(s: FaultScenario): Promise<FaultResult> {
  const store = await startFencedStore(s.mode);
  const lockId = s.lockId ?? `fault:${s.mode}:${Date.now()}`;
  const children = Array.from({ length: s.workers }, () =>
    spawn(
      process.execPath,
      [
        '--import',
        'tsx',
        join(here, 'worker.ts'),
        s.url,
        lockId,
        String(s.opsPerWorker),
        String(s.ttlMs),
        String(store.port),
        String(s.criticalMs),
      ],
      { stdio: ['ignore', 'pipe', 'inherit'] },
    ),
  );
  const outputs = children.map(
    (child) =>
      new Promise<{ committed: number; rejected: number }>((resolve, reject) => {
        let out = '';
        child.stdout.setEncoding('utf8');
        child.stdout.on('data', (c: string) => (out += c));
        child.once('exit', (code) => {
          if (code === 0) resolve(JSON.parse(out.trim().split('\n').pop() ?? '{}') as { committed: number; rejected: number });
          else reject(new Error(`worker exited with ${code}`));
        });
      }),
  );
  let running = true;
  let pausesDone = 0;
  const pauser = (async () => {
    await sleep(300);
    while (running && pausesDone < s.pauses) {
      const pid = store.currentHolder();
      const child = children.find((c) => c.pid === pid && c.exitCode === null);
      if (child?.pid !== undefined) {
        try {
          process.kill(child.pid, 'SIGSTOP');
          await sleep(s.pauseMs);
        } finally {
          try {
            process.kill(child.pid, 'SIGCONT');
          } catch {
            /* exited */
          }
        }
        pausesDone += 1;
      }
      await sleep(50 + Math.random() * 100);
    }
  })();
  try {
    const results = await Promise.all(outputs);
    const committed = results.reduce((a, r) => a + r.committed, 0);
    const final = store.value();
    return { mode: s.mode, committed, final, lostUpdates: committed - final, rejected: store.rejected(), pausesDone };
  } finally {
    running = false;
    await pauser;
    for (const c of children) if (c.exitCode === null) c.kill('SIGKILL');
    await store.close();
  }
}
