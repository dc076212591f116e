/**
 * The soak: `npm run faults -- --minutes N --backend <name|URL> [--clients 8] [--faults a,b]
 * [--no-comparison]`. For each backend, every applicable fault with a read+write fence, then
 * the holder-pause fault with no fence and with a write-only fence (the losses a user gets
 * without fencing reads; `--no-comparison` leaves these out), the time split evenly between
 * the runs. Prints each run's figures and timeline, then a markdown table (docs/guarantees.md). A backend named (`redis`, `zookeeper`, `cassandra`)
 * is started by the harness; a URL is used as is (server kills then do not apply).
 */
import { parseArgs } from 'node:util';
import { cpus } from 'node:os';
import type { RunningServer } from '../../scripts/servers/harness.js';
import type { FenceMode } from '../../src/testing.js';
import { FAULTS, type FaultName } from './nemesis.js';
import { PROFILES, prepare, profileForUrl, type FaultProfile } from './profiles.js';
import { runFault, type RunResult } from './run.js';

const { values } = parseArgs({
  options: {
    minutes: { type: 'string', default: '2' },
    backend: { type: 'string', multiple: true },
    clients: { type: 'string', default: '8' },
    faults: { type: 'string' },
    'no-comparison': { type: 'boolean', default: false },
  },
});
const minutes = Number(values.minutes);
const clients = Number(values.clients);
const backends = values.backend ?? Object.keys(PROFILES);
const only = values.faults?.split(',') as FaultName[] | undefined;

const rows: string[] = [];
const row = (cells: readonly (string | number)[]): string => `| ${cells.join(' | ')} |`;

async function soak(backend: string): Promise<void> {
  const named = PROFILES[backend];
  const profile: FaultProfile = named ?? profileForUrl(backend);
  const server: RunningServer | undefined = named ? await named.start() : undefined;
  const url = server?.url ?? backend;
  try {
    await prepare(profile.tune(url));
    const runs: [FaultName, FenceMode, number?][] = [];
    for (const f of (only ?? Object.keys(FAULTS)) as FaultName[]) {
      const why = FAULTS[f].skip(profile, server !== undefined);
      if (why) rows.push(row([profile.name, f, 'read+write', `not run: ${why}`, '', '', '', '', '', '', '', '', '', '']));
      else runs.push([f, 'reads-and-writes']);
    }
    // The fence comparison: a critical section as long as a pause, so that a paused holder
    // wakes inside its successor's section (what write-only fencing lets through).
    const long = profile.faultMs;
    if (!values['no-comparison'] && (!only || only.includes('pause')))
      runs.push(['pause', 'reads-and-writes', long], ['pause', 'writes', long], ['pause', 'none', long]);
    // What the fence catches when a server's clock jumps: the same fault with no fence.
    const jump = FAULTS['server-clock-jump'];
    if (!values['no-comparison'] && (!only || only.includes('server-clock-jump')) && jump.skip(profile, server !== undefined) === undefined)
      runs.push(['server-clock-jump', 'none']);
    const durationMs = Math.max(5_000, (minutes * 60_000) / runs.length);
    for (const [fault, mode, criticalMs] of runs) {
      const r = await runFault({ profile, url, server, fault, mode, clients, durationMs, ...(criticalMs ? { criticalMs } : {}) });
      report(profile, criticalMs ? `${fault} (${criticalMs} ms sections)` : fault, mode, r);
    }
  } finally {
    await server?.stop();
  }
}

function report(profile: FaultProfile, fault: string, mode: FenceMode, r: RunResult): void {
  if (r.skipped !== undefined) return;
  const { timeline, ...figures } = r;
  console.log(`\n${profile.name} · ${fault} · fence: ${mode}`);
  console.log(JSON.stringify(figures));
  console.log(timeline);
  const max = r.recoveriesMs.length ? Math.max(...r.recoveriesMs) : undefined;
  // After a client kill, against the profile's bound; after a server restart, as measured.
  const recovery =
    max === undefined ? '–' : fault === 'client-kill' ? `${max} ms (bound ${profile.freeBoundMs()} ms)` : `${max} ms after restart`;
  rows.push(
    row([
      profile.name,
      fault,
      mode === 'reads-and-writes' ? 'read+write' : mode === 'writes' ? 'writes only' : 'none',
      `${r.clients} × ${r.sections} (${Math.round(r.wallMs / 1000)} s)`,
      r.faults,
      r.acceptedWrites,
      r.staleWrites,
      r.lostUpdates,
      r.overlappingSections,
      r.doubleGrants,
      fault === 'client-kill' || fault === 'server-kill' ? recovery : '–',
      r.unhandled,
      r.stuck.length,
      r.acquireFailures,
    ]),
  );
}

console.log(
  `machine: ${cpus().length} × ${cpus()[0]?.model ?? 'cpu'}, node ${process.version}; ${minutes} min per backend, ${clients} clients`,
);
for (const b of backends) await soak(b);
console.log(
  `\n${row(['backend', 'fault', 'fence', 'clients × sections (wall)', 'faults', 'acked writes', 'stale writes accepted', 'lost updates', 'overlapping sections', 'double grants', 'max recovery', 'unhandled rejections', 'stuck workers', 'typed acquire failures'])}`,
);
console.log(row(new Array<string>(14).fill('---')));
for (const r of rows) console.log(r);
