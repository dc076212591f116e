/**
 * Server clocks: the engines whose server the server-clock faults can run on, each started on
 * its own clock (libfaketime, scripts/servers/harness.ts `startServerClock`), and for the
 * others why not (docs/guarantees.md, "When a server's clock jumps"). A server-clock run
 * starts its own engine: the clock has to be in place before the server's first time read.
 */
import { startServerClock, waitFor, type RunningServer, type ServerClock } from '../../scripts/servers/harness.js';
import { startPostgres } from '../../scripts/servers/postgres.js';
import { startMariaDb } from '../../scripts/servers/mariadb.js';
import { startZooKeeper } from '../../scripts/servers/zookeeper.js';
import { prepare, type FaultProfile } from './profiles.js';

/** How a profile's engine starts on a clock of its own, or why it cannot. */
export type ClockedStart =
  | {
      readonly start: (clock: ServerClock) => Promise<RunningServer>;
      /** libfaketime's cache (scripts/servers/harness.ts, ServerClockOptions). */
      readonly cacheSeconds?: number;
    }
  | { readonly why: string };

const REDIS =
  "Debian's redis-server aborts under libfaketime at start (libfaketime: unexpected recursive calls to clock_gettime(): " +
  'jemalloc, linked in, reads the clock while libfaketime initialises; preloading jemalloc first, MALLOC_CONF and ' +
  'every FAKETIME_* switch tried change nothing)';
const go = (binary: string): string =>
  `${binary} is a Go program: Go reads the time through the vDSO, not through libc, so libfaketime cannot move its ` +
  'clock (checked: its log kept the real time under a +3600 s offset)';

/** Every profile's server-clock start, by profile name. */
export const SERVER_CLOCKS: Readonly<Record<string, ClockedStart>> = {
  postgres: { start: (clock) => startPostgres({ clock }) },
  mysql: { start: (clock) => startMariaDb({ clock }) },
  // One node: the server that times the sessions (a standalone server is its own leader).
  // A 1 s cache: a JVM reading the offset file on every clock read starts in ~19 s instead of
  // ~1 s here and burns a quarter of a core idle; steps are then seen within a second.
  zookeeper: { start: (clock) => startZooKeeper({ nodes: 1, clock }), cacheSeconds: 1 },
  redis: { why: REDIS },
  'redis-fair': { why: REDIS },
  redlock: { why: REDIS },
  etcd: { why: go('etcd') },
  nats: { why: go('nats-server') },
  cassandra: {
    why: 'not run: a Cassandra JVM is too heavy beside the other engines on this machine (its JVM reads time through libc as ZooKeeper does)',
  },
  file: { why: "no server: the locks are files of this machine (clock-skew moves the lockers' clocks)" },
};

/** Why the server-clock faults do not run on `profile`, or undefined when they do. */
export function serverClockSkip(profile: FaultProfile): string | undefined {
  const entry = SERVER_CLOCKS[profile.name];
  if (!entry) return `no server-clock start for ${profile.name} (test/faults/server-clock.ts)`;
  return 'why' in entry ? entry.why : undefined;
}

/** An engine running on a clock the nemesis steps. */
export interface ClockedServer {
  readonly server: RunningServer;
  readonly clock: ServerClock;
  stop(): Promise<void>;
}

/** Start `profile`'s engine on a fresh clock (offset 0), its schema created. */
export async function startClockedServer(profile: FaultProfile, fakeMonotonic: boolean): Promise<ClockedServer> {
  const entry = SERVER_CLOCKS[profile.name];
  if (!entry || 'why' in entry) throw new Error(serverClockSkip(profile));
  const clock = await startServerClock({
    fakeMonotonic,
    ...(entry.cacheSeconds === undefined ? {} : { cacheSeconds: entry.cacheSeconds }),
  });
  let server: RunningServer | undefined;
  try {
    server = await entry.start(clock);
    // A server just started (a cold JVM) may miss the first short operation timeouts.
    const url = profile.tune(server.url);
    await waitFor(`${profile.name} to take a first lock`, async () => (await prepare(url), true), { timeoutMs: 120_000, intervalMs: 500 });
  } catch (err) {
    await server?.stop();
    await clock.close();
    throw err;
  }
  const running = server;
  return {
    server: running,
    clock,
    async stop() {
      await running.stop();
      await clock.close();
    },
  };
}
