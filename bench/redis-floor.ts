/**
 * The floor of an uncontended Redis lock cycle, in ONE run on one redis-server, alternating
 * rounds (order rotated every round) so that machine load hits every contender alike:
 * - `redis-semaphore Mutex`: the library (SET NX PX, then a 1-key compare-and-delete script);
 * - `floor SET NX PX`: the same two commands straight on ioredis, no library (no fencing);
 * - `floor fenced`: the leanest fenced, leased lock on ioredis: one EVALSHA (SET NX PX, then a
 *   server-time fencing token kept in a second key), one EVALSHA compare-and-delete;
 * - `floor locksmith scripts`: locksmith's own uncontended scripts (ACQUIRE_SOLO, RELEASE) sent
 *   straight on ioredis: the floor of its data layout, with no library around them;
 * - `locksmith lock+release` and `locksmith fair lock+release`: `createLocker(redis)`, defaults;
 * - `…, no network`: the scripts raw, and locksmith, on a client that answers in the next
 *   macrotask without a network (noNetwork below): their CPU per cycle is the library's own.
 * Wall time p50 per cycle (µs) and this process's CPU time per cycle (median of the rounds).
 * Run: `npx tsx --expose-gc bench/redis-floor.ts` (figures: docs/benchmarks.md, "Redis: the
 * uncontended floor"). `BASE=<dir with an older src/>` adds that tree's locksmith rows,
 * prefixed `base `; `ONLY=<regex>` keeps the rows it matches; `CYCLES` per round (300), `ROUNDS` (12).
 * `DIST=1` takes locksmith from the built `dist/` (of this tree and of BASE: `npm run build` first),
 * as a user runs it: under tsx every closure of `src/` also pays esbuild's `__name` helper.
 */
import { createHash, randomUUID } from 'node:crypto';
import { Redis } from 'ioredis';
import { Mutex as OriginalMutex } from 'redis-semaphore';
import type { RedisBackend } from '../src/backends/redis/index.js';
import type { RedisClientLike } from '../src/backends/redis-wire/clients.js';
import type { LuaScript } from '../src/backends/redis-wire/lua.js';
import { ACQUIRE_SOLO, RELEASE } from '../src/backends/redis/scripts.js';
import { lockKeys } from '../src/backends/redis-wire/keys.js';
import type { createLocker } from '../src/locker.js';
import { startRedis } from '../scripts/servers/redis.js';
import { runCycleRounds, type CycleContender } from './cycle-rounds.js';

const CYCLES = Number(process.env.CYCLES ?? 300);
const ROUNDS = Number(process.env.ROUNDS ?? 12);

/** Acquire: SET NX PX, then the fencing token max(last + 1, server µs) in a second key. */
const FENCED_ACQUIRE = `
if not redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) then return false end
local tm = redis.call('TIME')
local tok = tm[1] .. string.sub('00000' .. tm[2], -6)
local last = redis.call('SET', KEYS[2], tok, 'GET')
if last and tonumber(last) >= tonumber(tok) then
  tok = string.format('%.0f', tonumber(last) + 1)
  redis.call('SET', KEYS[2], tok)
end
return tok`;
const CAD = `if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end return 0`;
const sha = (s: string): string => createHash('sha1').update(s).digest('hex');

interface Tree {
  readonly RedisBackend: typeof RedisBackend;
  readonly createLocker: typeof createLocker;
  readonly scripts: { readonly ACQUIRE_SOLO: LuaScript; readonly RELEASE: LuaScript };
}

function locksmith(tree: Tree, client: Redis, prefix: string): CycleContender[] {
  const locker = tree.createLocker(new tree.RedisBackend(client));
  const offline = tree.createLocker(new tree.RedisBackend(noNetwork(tree.scripts)));
  return [
    { name: `${prefix}locksmith lock+release`, cycle: async (k) => (await locker.lock(k)).release() },
    { name: `${prefix}locksmith fair lock+release`, cycle: async (k) => (await locker.lock(k, { fair: true })).release() },
    { name: `${prefix}locksmith, no network`, cycle: async (k) => (await offline.lock(k)).release() },
  ];
}

let noNetworkToken = 1_700_000_000_000_000n;

/**
 * A client that answers ACQUIRE_SOLO with a token and RELEASE with 1 in the next macrotask
 * (as a reply read from a socket would come), with no network and no ioredis: the CPU per
 * cycle of a row on it is the library's own (core, backend, command layer).
 */
function noNetwork(scripts: Tree['scripts']): RedisClientLike {
  const reply = (v: unknown): Promise<unknown> => new Promise((resolve) => setImmediate(resolve, v));
  return {
    evalsha: (sha) =>
      sha === scripts.ACQUIRE_SOLO.sha
        ? reply(String(++noNetworkToken))
        : sha === scripts.RELEASE.sha
          ? reply(1)
          : Promise.reject(new Error('not an uncontended script')),
    eval: () => Promise.reject(new Error('EVAL: not an uncontended script')),
    duplicate: () => {
      throw new Error('no subscriber without a network');
    },
  };
}

/** The locksmith of the tree at `root` (this one: `..`), from `src/` or (DIST=1) from `dist/`. */
async function tree(root: string): Promise<Tree> {
  const [dir, ext] = process.env.DIST ? ['dist', 'js'] : ['src', 'ts'];
  const backend = (await import(`${root}/${dir}/backends/redis/index.${ext}`)) as { RedisBackend: typeof RedisBackend };
  const locker = (await import(`${root}/${dir}/locker.${ext}`)) as { createLocker: typeof createLocker };
  const scripts = (await import(`${root}/${dir}/backends/redis/scripts.${ext}`)) as Tree['scripts'];
  return { RedisBackend: backend.RedisBackend, createLocker: locker.createLocker, scripts };
}

/** locksmith's uncontended scripts (ACQUIRE_SOLO, RELEASE) sent straight on `client`, no library. */
function scriptRows(client: Pick<RedisClientLike, 'evalsha'>, name: string): CycleContender[] {
  const keys: Record<string, ReturnType<typeof lockKeys>> = {};
  return [
    {
      name,
      cycle: async (k) => {
        const ks = (keys[k] ??= lockKeys('locksmith:', k));
        const [h, x, t, q] = ks;
        const id = randomUUID();
        const tok = await client.evalsha(ACQUIRE_SOLO.sha, 4, h, q, x, t, 'm', id, 10_000, 0, '', ':{}', 'locksmith:w:');
        BigInt(tok as string);
        await client.evalsha(RELEASE.sha, 7, ...ks, id, 'm', tok as string, 'locksmith:w:');
      },
    },
  ];
}

async function contenders(port: number, clients: Redis[]): Promise<CycleContender[]> {
  const client = (): Redis => {
    const c = new Redis({ port, host: '127.0.0.1' });
    clients.push(c);
    return c;
  };
  const rs = client();
  const raw = client();
  const fenced = client();
  await fenced.script('LOAD', FENCED_ACQUIRE);
  await fenced.script('LOAD', CAD);
  for (const s of [ACQUIRE_SOLO, RELEASE]) await fenced.script('LOAD', s.source);
  const [acq, cad] = [sha(FENCED_ACQUIRE), sha(CAD)];
  const list: CycleContender[] = [
    {
      name: 'redis-semaphore Mutex',
      cycle: async (k) => {
        const m = new OriginalMutex(rs, k);
        await m.acquire();
        await m.release();
      },
    },
    {
      name: 'floor SET NX PX + CAD (no fence)',
      cycle: async (k) => {
        const id = randomUUID();
        if ((await raw.set(k, id, 'PX', 10_000, 'NX')) !== 'OK') throw new Error('held');
        await raw.evalsha(cad, 1, k, id);
      },
    },
    {
      name: 'floor fenced (2 EVALSHA)',
      cycle: async (k) => {
        const id = randomUUID();
        const tok = await fenced.evalsha(acq, 2, `f{${k}}`, `f{${k}}:t`, id, 10_000);
        if (tok === null) throw new Error('held');
        BigInt(tok as string);
        await fenced.evalsha(cad, 1, `f{${k}}`, id);
      },
    },
    ...scriptRows(fenced, 'floor locksmith scripts'),
    ...scriptRows(noNetwork({ ACQUIRE_SOLO, RELEASE }), 'floor locksmith scripts, no network'),
    ...locksmith(await tree(new URL('..', import.meta.url).pathname.replace(/\/$/, '')), client(), ''),
  ];
  if (process.env.BASE) list.push(...locksmith(await tree(process.env.BASE), client(), 'base '));
  return list;
}

const server = await startRedis();
const clients: Redis[] = [];
try {
  const list = await contenders(server.nodes[0]!.port, clients);
  await runCycleRounds(list, { cycles: CYCLES, rounds: ROUNDS, keyPrefix: 'floor', reference: 'redis-semaphore Mutex' });
} finally {
  await Promise.allSettled(clients.map((c) => c.quit()));
  await server.stop();
}
process.exit(0);
