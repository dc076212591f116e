/**
 * The nemesis: faults injected against the CURRENT holder (random pauses of random processes
 * provoke nothing — docs/guarantees.md) or the engine's servers, each one recorded in the
 * store's history as `fault <name> <target>` … `heal <name>` (a crashed client as `kill <client>`).
 */
import { writeFileSync } from 'node:fs';
import { setTimeout as sleep } from 'node:timers/promises';
import type { ChildProcess } from 'node:child_process';
import type { FaultMode, FaultProxy, FencedStore } from '../../src/testing.js';
import type { RunningServer } from '../../scripts/servers/harness.js';
import type { FaultProfile } from './profiles.js';

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
      const w = await ctx.holder();
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
} satisfies Record<string, Fault>;

/** A fault's name. */
export type FaultName = keyof typeof FAULTS;

/** libfaketime's relative offset syntax, e.g. `+0.150s`. */
export function faketimeOffset(ms: number): string {
  return `${ms >= 0 ? '+' : '-'}${(Math.abs(ms) / 1000).toFixed(3)}s\n`;
}
