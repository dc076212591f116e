/**
 * `npm run bench:core`: what the core itself costs per uncontended lock + release cycle
 * (validation, lease and its timer, events, the handle), measured on the memory backend
 * against the same backend called directly through the seam. Wall time and CPU time per
 * cycle: on a machine that other processes load, the CPU time is the steadier figure.
 * Under tsx every closure also pays esbuild's `__name` helper, which the published build
 * (tsc) does not have.
 */
import { createLocker } from '../src/index.js';
import { MemoryBackend } from '../src/backends/memory/index.js';

const N = Number(process.env.BENCH_ITERATIONS ?? 20_000);
const locker = createLocker('memory://bench-core');
const backend = new MemoryBackend('bench-core-raw');
const never = new AbortController();
const cpuMicros = (since: NodeJS.CpuUsage): number => {
  const c = process.cpuUsage(since);
  return (c.user + c.system) / N;
};
for (let round = 1; round <= 3; round++) {
  let t0 = performance.now();
  let c0 = process.cpuUsage();
  for (let i = 0; i < N; i++) {
    const lock = await locker.lock('x');
    await lock.release();
  }
  const core = ((performance.now() - t0) / N) * 1000;
  const coreCpu = cpuMicros(c0);
  t0 = performance.now();
  c0 = process.cpuUsage();
  for (let i = 0; i < N; i++) {
    const r = await backend.tryAcquire({
      lockId: 'x',
      kind: 'mutex',
      permits: 1,
      weight: 1,
      ownerId: `o${i}`,
      freshOwner: true,
      identity: '',
      ticket: undefined,
      signal: never.signal,
      ttlMs: 10_000,
      fair: false,
      lockDelayMs: 0,
      wait: true,
      onLost: () => undefined,
    });
    if (r.granted) await backend.release(r.grant);
  }
  const raw = ((performance.now() - t0) / N) * 1000;
  const rawCpu = cpuMicros(c0);
  console.log(
    `round ${round}: locker.lock+release ${core.toFixed(1)} µs (CPU ${coreCpu.toFixed(1)}), backend alone ${raw.toFixed(1)} µs (CPU ${rawCpu.toFixed(1)}), core overhead ${(core - raw).toFixed(1)} µs (CPU ${(coreCpu - rawCpu).toFixed(1)})`,
  );
}
await locker.close();
