/**
 * What storing the holder's identity costs an uncontended lock + release (docs/benchmarks.md,
 * "Seeing locks"). `npm run bench:identity -- [postgres|redis|mysql|etcd|zookeeper]` starts
 * the engine with the server harness and times three roles played by lockers of this code,
 * each on its own backend: `with` stores the identity as shipped; `without` and `control`
 * send their requests with an empty identity (what a row written before identities holds).
 * `with` / `without` is the identity's cost; `control` / `without` (the same thing twice) is
 * the noise floor of the run. The empty identity is set by a switch in a wrapper around the
 * backend, which every locker goes through alike: the shipped code is unchanged.
 *
 * Rounds: ROUNDS (24) rounds of OPS (300) lock+release cycles per role. Each round the roles
 * move on to the next locker (a locker's own connection or rows cannot favour a role) and
 * the order of play turns around every three rounds; the ratio of a round's `with` to the
 * `without` of the same round, then the median over rounds. Then the same number of cycles
 * op by op (each role's lock+release next to the others'), compared by per-op medians.
 */
import { createLocker, type Locker } from '../src/index.js';
import type { AcquireRequest, Backend } from '../src/backend.js';
import { startPostgres } from '../scripts/servers/postgres.js';
import { startRedis } from '../scripts/servers/redis.js';
import { startMariaDb } from '../scripts/servers/mariadb.js';
import { startEtcd } from '../scripts/servers/etcd.js';
import { startZooKeeper } from '../scripts/servers/zookeeper.js';

const engine = process.argv[2] ?? 'postgres';
const ROUNDS = Number(process.env['ROUNDS'] ?? 24);
const OPS = Number(process.env['OPS'] ?? 300);

type Role = 'with' | 'without' | 'control';

interface Server {
  readonly url: string;
  stop(): Promise<void>;
}

const servers: Record<string, () => Promise<Server>> = {
  postgres: async () => {
    const s = await startPostgres();
    return { url: `${s.url}?migrate=true`, stop: () => s.stop() };
  },
  mysql: async () => {
    const s = await startMariaDb();
    return { url: `${s.url}?migrate=true`, stop: () => s.stop() };
  },
  redis: () => startRedis(),
  etcd: () => startEtcd(),
  zookeeper: () => startZooKeeper({ nodes: 1 }),
};

/** A switch per locker: whether its backend gets the identity the locker sends, or ''. */
interface Switch {
  blank: boolean;
}

/** `backend` with every acquisition's identity replaced by '' while `sw.blank`; the same indirection either way. */
function switched(backend: Backend, sw: Switch): Backend {
  return new Proxy(backend, {
    get(target, key) {
      if (key === 'tryAcquire') {
        return (req: AcquireRequest<unknown>) => target.tryAcquire(sw.blank ? { ...req, identity: '' } : { ...req });
      }
      const v: unknown = Reflect.get(target, key, target);
      return typeof v === 'function' ? (v as (...a: unknown[]) => unknown).bind(target) : v;
    },
  });
}

/** ms for `OPS` sequential lock+release on ids of `tag` (uncontended: nobody else uses them). */
async function round(l: Locker, tag: string): Promise<number> {
  const t0 = performance.now();
  for (let i = 0; i < OPS; i++) await (await l.lock(`bench:${tag}:${i % 50}`)).release();
  return performance.now() - t0;
}

/**
 * The same three roles op by op: each lock+release of one role is followed by one of each
 * other role (the order rotating), so a load spike falls on all three; per-op medians.
 */
async function interleaved(lockers: readonly { locker: Locker; sw: Switch }[], roles: readonly Role[]): Promise<Record<Role, number>> {
  const t: Record<Role, number[]> = { with: [], without: [], control: [] };
  for (let i = 0; i < ROUNDS * OPS; i++) {
    for (let k = 0; k < 3; k++) {
      const j = (i + k) % 3;
      const l = lockers[j];
      const role = roles[(j + Math.floor(i / OPS)) % 3];
      if (!l || !role) continue;
      l.sw.blank = role !== 'with';
      const t0 = performance.now();
      await (await l.locker.lock(`bench:op${j}:${i % 50}`)).release();
      t[role].push(performance.now() - t0);
    }
  }
  return { with: median(t.with), without: median(t.without), control: median(t.control) };
}

const median = (xs: readonly number[]): number => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)] ?? NaN;
const pct = (ratio: number): string => `${ratio >= 1 ? '+' : ''}${((ratio - 1) * 100).toFixed(1)} %`;

async function main(): Promise<void> {
  const start = servers[engine];
  if (!start) throw new Error(`engine: one of ${Object.keys(servers).join(', ')}`);
  const server = await start();
  const roles: readonly Role[] = ['with', 'without', 'control'];
  const owners: Locker[] = [];
  const lockers: { locker: Locker; sw: Switch }[] = [];
  try {
    for (let i = 0; i < 3; i++) {
      const owner = createLocker(server.url);
      owners.push(owner);
      const sw = { blank: false };
      lockers.push({ locker: createLocker(switched(await owner.backend(), sw), { name: 'identity-bench' }), sw });
    }
    for (const [i, l] of lockers.entries()) await round(l.locker, `warm${i}`);
    const t = { with: [] as number[], without: [] as number[], control: [] as number[] };
    for (let r = 0; r < ROUNDS; r++) {
      // Every locker plays every role, and the order of play turns around every three rounds.
      const order = Math.floor(r / 3) % 2 === 0 ? [0, 1, 2] : [2, 1, 0];
      for (const i of order) {
        const role = roles[(i + r) % 3] ?? 'with';
        const l = lockers[i];
        if (!l) continue;
        l.sw.blank = role !== 'with';
        t[role].push(await round(l.locker, `l${i}`));
      }
    }
    const paired = (a: readonly number[]): number => median(a.map((x, i) => x / (t.without[i] ?? NaN)));
    const us = (xs: readonly number[]): string => `${((median(xs) / OPS) * 1000).toFixed(0)} µs`;
    console.log(`${engine}: uncontended lock+release, ${ROUNDS} rounds of ${OPS} per locker, roles rotating over three lockers`);
    console.log(`  per cycle, median of rounds: without ${us(t.without)}, with ${us(t.with)}, control ${us(t.control)}`);
    console.log(
      `  with / without, median of paired rounds: ${pct(paired(t.with))} (noise floor, control / without: ${pct(paired(t.control))})`,
    );
    const op = await interleaved(lockers, roles);
    const usOf = (x: number): string => `${(x * 1000).toFixed(0)} µs`;
    console.log(
      `  op by op (${ROUNDS * OPS} interleaved per role), per-op median: without ${usOf(op.without)}, with ${usOf(op.with)}, control ${usOf(op.control)}`,
    );
    console.log(`  with / without: ${pct(op.with / op.without)} (noise floor, control / without: ${pct(op.control / op.without)})`);
  } finally {
    await Promise.allSettled(lockers.map((l) => l.locker.close()));
    await Promise.allSettled(owners.map((l) => l.close()));
    await server.stop();
  }
}

await main();
