/**
 * The nemesis: faults injected against the CURRENT holder (random pauses of random processes
 * provoke nothing — docs/guarantees.md) or the engine's servers, each one recorded in the
 * store's history as `fault <name> <target>` … `heal <name>` (a crashed client as `kill <client>`).
 */
import { writeFileSync } from 'node:fs';
import { setTimeout as sleep } from 'node:timers/promises';
import type { ChildProcess } from 'node:child_process';
import type { FaultMode, FaultProxy, FencedStore } from '../../src/testing.js';
import type { RunningServer, ServerClock } from '../../scripts/servers/harness.js';
import type { FaultProfile } from './profiles.js';
import { serverClockSkip } from './server-clock.js';

/** A worker process as the nemesis sees it. */
export interface WorkerHandle {
  readonly name: string;
  readonly child: ChildProcess;
  /** This worker's proxies, one per engine endpoint. */
  readonly proxies: readonly FaultProxy[];
  /** Its libfaketime timestamp file and base offset (clock faults only). */
  readonly clock?: { readonly file: string; readonly baseMs: number; jumped: boolean };
}

/** What a fault can act on. */
export interface NemesisContext {
  readonly profile: FaultProfile;
  /** The engine, when this run started it (a URL given from outside cannot be killed). */
  readonly server: RunningServer | undefined;
  readonly store: FencedStore;
  /** The engine's own clock (server-clock faults: the run started the engine on it). */
  readonly serverClock?: ServerClock;
  /** The live worker that holds (or last held) the lock; waits for one. */
  holder(): Promise<WorkerHandle | undefined>;
  /** Replace a killed worker by a fresh process with a new name. */
  replace(worker: WorkerHandle): Promise<void>;
  running(): boolean;
}

/** One kind of fault. */
export interface Fault {
  /** Undefined when the fault applies to the profile, else why it is not run (`managed`: this run started the engine). */
  skip(profile: FaultProfile, managed: boolean): string | undefined;
  /** Set (the reason) when the fault applies but is too slow for `npm test`: only the soak runs it. */
  soakOnly?(profile: FaultProfile): string | undefined;
  /** Per-worker clock offset in ms (clock faults start workers under libfaketime). */
  readonly clockOffsetMs?: (index: number, profile: FaultProfile) => number;
  /**
   * Server-clock faults: the run starts its own engine on a clock the fault steps
   * (test/faults/server-clock.ts); `fakeMonotonic` also moves the server's monotonic clock.
   */
  readonly serverClock?: { readonly fakeMonotonic: boolean };
  /**
   * Set (why) when the lock's own promise legitimately breaks under this fault: double grants
   * are then a figure, not asserted to be zero; the fence must still refuse every stale write.
   */
  readonly mayDoubleGrant?: string;
  /** The critical section of this fault's runs in ms (default the profile's). */
  readonly criticalMs?: (profile: FaultProfile) => number;
  /** Inject once and heal; the runner repeats it while the run lasts. */
  inject(ctx: NemesisContext): Promise<void>;
}

const note = (ctx: NemesisContext, text: string): void => ctx.store.note('nemesis', text);

function signal(w: WorkerHandle, sig: NodeJS.Signals): void {
  try {
    if (w.child.pid !== undefined) process.kill(w.child.pid, sig);
  } catch {
    /* already exited */
  }
}

function partition(mode: FaultMode, latency?: (p: FaultProfile) => number): Fault {
  return {
    skip: (profile) => (profile.network === false ? 'no network between the clients and the locks' : undefined),
    async inject(ctx) {
      const w = await ctx.holder();
      if (!w) return;
      const ms = latency?.(ctx.profile);
      note(ctx, `fault partition-${mode} ${w.name}`);
      for (const p of w.proxies) p.setMode(mode, ms);
      await sleep(mode === 'latency' ? ctx.profile.faultMs * 2 : ctx.profile.faultMs);
      for (const p of w.proxies) p.setMode('pass');
      note(ctx, `heal partition-${mode}`);
    },
  };
}

/** How fast the server's clock runs during a `server-clock-rate` fault. */
export const SERVER_CLOCK_RATE = 3;

/**
 * A fault on the engine's own clock: skipped where the server's clock cannot be moved, with
 * critical sections a ttl long so that a lease the server ends early is still held by a
 * worker that goes on to write (what the fence must refuse).
 */
function serverClockFault(fakeMonotonic: boolean, step: (ctx: NemesisContext, clock: ServerClock) => Promise<void>): Fault {
  return {
    skip: (profile, managed) => (managed ? serverClockSkip(profile) : 'the engine was not started by this run'),
    serverClock: { fakeMonotonic },
    mayDoubleGrant: `a server that ends leases by its own clock ends them early when that clock runs ahead (docs/guarantees.md, "When a server's clock jumps")`,
    criticalMs: (profile) => profile.ttlMs,
    async inject(ctx) {
      const w = await ctx.holder();
      if (!w || !ctx.serverClock) return;
      await step(ctx, ctx.serverClock);
    },
  };
}

/**
 * The holder, once another live worker is in its lock loop (it has begun a section; nothing
 * killed it since), so that someone asks for the lock when it frees. Killed sooner (the run's
 * first holder while the others still start), the next section waits for a process's start-up
 * (over a second on a loaded machine), and the recovery measures that, not the freeing that
 * the profile's bound is about (docs/guarantees.md, "Fault tests"). Undefined once the run ends.
 */
async function contendedHolder(ctx: NemesisContext): Promise<WorkerHandle | undefined> {
  for (;;) {
    const w = await ctx.holder();
    if (!w || !ctx.running()) return undefined;
    const begun = new Set<string>();
    const killed = new Set<string>();
    for (const e of ctx.store.history()) {
      if (e.op === 'begin') begun.add(e.client);
      const name = e.op === 'note' ? /^kill (\S+)$/.exec(e.text ?? '')?.[1] : undefined;
      if (name !== undefined) killed.add(name);
    }
    if ([...begun].some((c) => c !== w.name && !killed.has(c))) return w;
    await sleep(20);
  }
}

/** Every fault, by name (the order the tests and the soak run them in). */
export const FAULTS = {
  /** SIGSTOP the holder past its lease, then SIGCONT: a GC pause, a hung VM. */
  pause: {
    skip: () => undefined,
    async inject(ctx) {
      const w = await ctx.holder();
      if (!w) return;
      note(ctx, `fault pause ${w.name}`);
      signal(w, 'SIGSTOP');
      await sleep(ctx.profile.faultMs);
      signal(w, 'SIGCONT');
      note(ctx, `heal pause`);
    },
  },
  /** kill -9 the holder; a fresh client takes its place. Its lock must free within the profile's bound. */
  'client-kill': {
    skip: () => undefined,
    async inject(ctx) {
      const w = await contendedHolder(ctx);
      if (!w) return;
      note(ctx, `fault client-kill ${w.name}`);
      signal(w, 'SIGKILL');
      note(ctx, `kill ${w.name}`);
      await ctx.replace(w);
      await sleep(ctx.profile.freeBoundMs());
    },
  },
  /** kill -9 a server node, restart it after a while. */
  'server-kill': {
    skip(profile, managed) {
      if (!managed) return 'the engine was not started by this run';
      return profile.serverKill.kind === 'skip' ? profile.serverKill.why : undefined;
    },
    soakOnly: (profile) => (profile.serverKill.kind === 'single' ? profile.serverKill.soakOnly : undefined),
    async inject(ctx) {
      const nodes = ctx.server?.nodes ?? [];
      const kill = ctx.profile.serverKill;
      const node = nodes[Math.floor(Math.random() * nodes.length)];
      if (!node || kill.kind === 'skip') return;
      note(ctx, `fault server-kill ${node.name}`);
      await node.kill();
      await sleep(kill.kind === 'single' ? kill.downMs : ctx.profile.faultMs);
      await node.restart();
      note(ctx, `heal server-kill`);
      await sleep(ctx.profile.faultMs);
    },
  },
  /** The holder's connections to the engine hang (a partition that drops nothing visibly). */
  'partition-blackhole': partition('blackhole'),
  /** The holder's connections are reset and new ones refused. */
  'partition-reset': partition('reset'),
  /** The holder's traffic is delayed by a third of the ttl each way. */
  'partition-latency': partition('latency', (p) => Math.round(p.ttlMs / 3)),
  /**
   * Wall clocks skewed by ±ttl/2 per worker (libfaketime), and the holder's clock jumped by a
   * ttl forward, then back. Monotonic clocks are left alone, as NTP steps leave them.
   */
  'clock-skew': {
    skip: (profile) => profile.wallClockLeases,
    clockOffsetMs: (i, p) => (i % 2 === 0 ? 1 : -1) * Math.round(p.ttlMs / 2),
    async inject(ctx) {
      const w = await ctx.holder();
      if (!w?.clock) return;
      note(ctx, `fault clock-jump ${w.name}`);
      w.clock.jumped = !w.clock.jumped;
      writeFileSync(w.clock.file, faketimeOffset(w.clock.baseMs + (w.clock.jumped ? ctx.profile.ttlMs : 0)));
      // libfaketime re-reads the file at most once a second.
      await sleep(Math.max(1_500, ctx.profile.faultMs));
      note(ctx, `heal clock-jump`);
    },
  },
  /**
   * The server's wall clock stepped forward by two ttls while a worker holds (an NTP step: its
   * monotonic clock left alone); steps add up, the clock never goes back.
   */
  'server-clock-jump': serverClockFault(false, async (ctx, clock) => {
    const ms = 2 * ctx.profile.ttlMs;
    note(ctx, `fault server-clock-jump +${ms} ms (server ${clock.offsetMs + ms} ms ahead)`);
    clock.jump(ms);
    await sleep(ctx.profile.faultMs);
    note(ctx, `heal server-clock-jump`);
  }),
  /**
   * The server's clocks (wall and monotonic: a fast oscillator moves both) run at
   * SERVER_CLOCK_RATE × real time for a fault's length, as steps of (rate − 1) × 100 ms every
   * 100 ms (libfaketime's own rate setting jumps by the whole run's time when it changes).
   */
  'server-clock-rate': serverClockFault(true, async (ctx, clock) => {
    note(ctx, `fault server-clock-rate x${SERVER_CLOCK_RATE}`);
    const until = performance.now() + ctx.profile.faultMs;
    while (performance.now() < until) {
      await sleep(100);
      clock.jump((SERVER_CLOCK_RATE - 1) * 100);
    }
    note(ctx, `heal server-clock-rate (server ${clock.offsetMs} ms ahead)`);
  }),
} satisfies Record<string, Fault>;

/** A fault's name. */
export type FaultName = keyof typeof FAULTS;

/** libfaketime's relative offset syntax, e.g. `+0.150s`. */
export function faketimeOffset(ms: number): string {
  return `${ms >= 0 ? '+' : '-'}${(Math.abs(ms) / 1000).toFixed(3)}s\n`;
}
