import { startRedis } from '../../scripts/servers/redis.js';
import { createLocker } from '../../src/index.js';
import { createBackend } from '../../src/backends/redis/index.js';
import { setTimeout as sleep } from 'node:timers/promises';
const s = await startRedis();
const mk = async () => {
  const b = await createBackend(new URL(s.url), {});
  const marks: Record<string, number> = {};
  const w = b.waitForChange.bind(b);
  b.waitForChange = async (...a) => { await w(...a); marks.woke = performance.now(); };
  const t = b.tryAcquire.bind(b);
  b.tryAcquire = async (r) => { marks.tryStart = performance.now(); const x = await t(r); marks.tryEnd = performance.now(); return x; };
  const rel = b.release.bind(b);
  b.release = async (g) => { marks.relStart = performance.now(); const x = await rel(g); marks.relEnd = performance.now(); return x; };
  return { l: createLocker(b, { ttlMs: 10000, fair: true }), marks };
};
const A = await mk(); const B = await mk();
const rows: number[][] = [];
for (let i = 0; i < 300; i++) {
  const held = await A.l.lock('k');
  let got = 0;
  const p = B.l.lock('k').then((h) => { got = performance.now(); return h; });
  await sleep(20);
  const t0 = performance.now();
  await held.release();
  const h = await p;
  rows.push([A.marks.relStart! - t0, A.marks.relEnd! - t0, B.marks.woke! - t0, B.marks.tryStart! - t0, B.marks.tryEnd! - t0, got - t0]);
  await h.release();
}
const med = (k: number) => { const xs = rows.slice(20).map((r) => r[k]!).sort((a, b) => a - b); return xs[Math.floor(xs.length / 2)]!.toFixed(3); };
import { Redis } from 'ioredis';
const u = new URL(s.url);
const r = new Redis({ host: u.hostname, port: Number(u.port) });
const pings: number[] = [];
for (let i = 0; i < 200; i++) { await sleep(20); const t = performance.now(); await r.ping(); pings.push(performance.now() - t); }
pings.sort((a, b) => a - b);
console.log('ping after idle p50', pings[100]!.toFixed(3));
await r.config('RESETSTAT');
for (let i = 0; i < 200; i++) { const held = await A.l.lock('k'); const p = B.l.lock('k'); await sleep(20); await held.release(); await (await p).release(); }
console.log((await r.info('commandstats')).split('\n').filter((l) => /evalsha|publish/.test(l)).join('\n'));
r.disconnect();
console.log('relStart', med(0), 'relEnd', med(1), 'B woke', med(2), 'B tryStart', med(3), 'B tryEnd', med(4), 'B holds', med(5));
await A.l.close(); await B.l.close(); await s.stop();
