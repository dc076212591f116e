#!/usr/bin/env node
/**
 * The `locksmith` command: a thin layer over the public API (and, for `migrate --print`,
 * the schema modules, which load no driver). See `locksmith --help` and docs/cli.md.
 */
import { readFileSync, realpathSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { Command, CommanderError } from 'commander';
import { createLocker, LocksmithError } from '../index.js';
import { formatMatrix, runMatrix } from '../bench-matrix/index.js';
import { chooseBackend, DEFAULT_BACKEND, shownUrl } from './backend.js';
import { parseCount, parseDuration } from './duration.js';
import { runDemo } from './demo.js';
import { EXIT, exitHelp, exitStatusOf } from './exit.js';
import { applyMigration, migrationDdl } from './migrate.js';
import { addRun, backendOption } from './run-command.js';
import { splitRunArgs } from './run-args.js';
import { formatStatus } from './status.js';
import { addLs } from './ls.js';
import { addBreak } from './break.js';
import { addServe } from './serve.js';

function version(): string {
  const pkg: unknown = JSON.parse(readFileSync(new URL('../../package.json', import.meta.url), 'utf8'));
  return typeof pkg === 'object' && pkg !== null && 'version' in pkg ? String(pkg.version) : 'unknown';
}

function addStatus(cmd: Command, out: Output): void {
  cmd
    .command('status')
    .description('show holders (who, token, expiry) and waiters of a lock; exits 0 when held, 1 when free')
    .argument('<lockId>', 'the lock name')
    .addOption(backendOption())
    .option('--json', 'print JSON', false)
    .action(async (lockId: string, opts: { backend?: string; json: boolean }) => {
      const locker = createLocker(chooseBackend(opts.backend));
      try {
        const state = await locker.inspect(lockId);
        out(formatStatus(state, opts.json));
        process.exitCode = state.holders.length > 0 ? 0 : EXIT.CONFLICT;
      } finally {
        await locker.close();
      }
    });
}

function addDemo(cmd: Command): void {
  cmd
    .command('demo')
    .description(
      'the ATM scenario (without a lock the balance goes negative, with one it never does), then ATM processes on file:// and a paused holder refused by the fence',
    )
    .option('-b, --backend <url>', 'backend for the locked in-process run', 'memory://demo')
    .action(async (opts: { backend: string }) => {
      const { unlocked, locked, processes, paused } = await runDemo({ backend: opts.backend });
      const shown = unlocked.finalBalance < 0 && locked.finalBalance >= 0;
      const distributed = (processes?.finalBalance ?? 0) >= 0 && (paused === undefined || paused.refusal !== undefined);
      if (!shown || !distributed) process.exitCode = 1;
    });
}

interface BenchFlags {
  backend: string;
  iterations: string;
  contenders: string;
  duration: string;
  critical: string;
  keys: string;
  waiters: string;
  idle: string;
  fair: boolean;
  json: boolean;
}

function addBench(cmd: Command, out: Output): void {
  cmd
    .command('bench')
    .description('the benchmark matrix: uncontended, hand-off, hot lock at several contender counts, many keys, many waiters')
    .addOption(backendOption('memory://bench'))
    .option('--iterations <n>', 'uncontended cycles per round (10 rounds, then 60 hand-offs)', '200')
    .option('--contenders <list>', 'contender counts of the hot-lock rows', '1,2,8,32,64')
    .option('--duration <duration>', 'length of each hot-lock row', '3s')
    .option('--critical <duration>', 'critical section in the hot-lock rows', '2ms')
    .option('--keys <n>', 'distinct keys of the keys row (0: skip)', '10000')
    .option('--waiters <n>', 'waiters of the waiters row (0: skip)', '1000')
    .option('--idle <duration>', 'idle window of the waiters row', '3s')
    .option('--fair', 'fair mode', false)
    .option('--json', 'print the result as JSON', false)
    .action(async (f: BenchFlags) => {
      const contenders = f.contenders.split(',').map((c) => parseCount(c, '--contenders', 1, 10_000));
      const result = await runMatrix((o) => createLocker(f.backend, { ...o }), {
        iterations: parseCount(f.iterations, '--iterations', 1, 1_000_000),
        contenders,
        durationMs: parseDuration(f.duration, '--duration'),
        criticalMs: parseDuration(f.critical, '--critical', true),
        keys: parseCount(f.keys, '--keys', 0, 10_000_000),
        waiters: parseCount(f.waiters, '--waiters', 0, 1_000_000),
        idleMs: parseDuration(f.idle, '--idle'),
        fair: f.fair,
        onRow: (label) => process.stderr.write(`locksmith bench: ${label}\n`),
      });
      // The URL may carry a password: results name the backend without it.
      const backend = shownUrl(f.backend);
      if (f.json) out(`${JSON.stringify({ backend, ...result })}\n`);
      else out(`${[`backend: ${backend}`, ...formatMatrix(result)].join('\n')}\n`);
    });
}

/** Where a command's results go (stdout unless a test captures them). */
export type Output = (text: string) => void;

const toStdout: Output = (text) => void process.stdout.write(text);

function addMigrate(cmd: Command, out: Output): void {
  cmd
    .command('migrate')
    .description('create the tables the postgres://, mysql:// and cassandra:// backends need (idempotent); others need none')
    .addOption(backendOption())
    .option('--print', 'print the DDL instead of applying it (does not connect)', false)
    .action(async (opts: { backend?: string; print: boolean }) => {
      const url = chooseBackend(opts.backend);
      if (opts.print) {
        const ddl = migrationDdl(url);
        if (ddl === undefined) process.stderr.write(`locksmith: ${shownUrl(url)} keeps no schema; nothing to create\n`);
        else out(ddl);
        return;
      }
      if (await applyMigration(url)) process.stderr.write(`locksmith: the lock tables exist on ${shownUrl(url)}\n`);
      else process.stderr.write(`locksmith: ${shownUrl(url)} keeps no schema; nothing to create\n`);
    });
}

const ENVIRONMENT = `
Environment:
  LOCKSMITH_BACKEND    backend URL when --backend is not given (run, status and migrate; default ${DEFAULT_BACKEND})
  LOCKSMITH_SERVER     run: a locksmith serve URL to lock through, when --server is not given (docs/cli.md)
  LOCKSMITH_SERVER_TOKEN  run --server: the bearer token, when --token is not given
  LOCKSMITH_TOKEN      (set for the command of run) the fencing token; pass it to what the command writes to
  LOCKSMITH_LOCK_ID    (set for the command of run) the lock id
  LOCKSMITH_OWNER      (set for the command of run) the holder id, host:pid:random unless --owner was given`;

/** Build the program (exported for tests). */
export function program(out: Output = toStdout): Command {
  const cmd = new Command('locksmith')
    .description('Distributed locks over Redis, ZooKeeper, etcd, Cassandra, MySQL and PostgreSQL, with fencing tokens and fair queues.')
    .version(version(), '-V, --version')
    .exitOverride()
    .configureOutput({ writeOut: out })
    .showHelpAfterError()
    .addHelpText('after', `\n${exitHelp()}\n${ENVIRONMENT}\n`);
  addRun(cmd);
  addStatus(cmd, out);
  addLs(cmd, out);
  addBreak(cmd, out);
  addServe(cmd, out);
  addDemo(cmd);
  addBench(cmd, out);
  addMigrate(cmd, out);
  return cmd;
}

/** The exit status of an error thrown by a command, after saying what it was on stderr. */
function statusOf(err: unknown): number {
  if (err instanceof CommanderError) return err.exitCode === 0 ? 0 : EXIT.USAGE;
  const text = `locksmith: ${err instanceof LocksmithError ? `${err.code}: ` : ''}${err instanceof Error ? err.message : String(err)}\n`;
  process.stderr.write(text);
  if (err instanceof LocksmithError && err.context.causeCode === 'MISSING_TABLE') {
    process.stderr.write('locksmith: create the tables with: locksmith migrate --backend URL (or print them with --print)\n');
  }
  return exitStatusOf(err);
}

/** `run`'s words rewritten so that options end where the command starts (run-args.ts). */
function normalized(prog: Command, argv: readonly string[]): string[] {
  const run = prog.commands.find((c) => c.name() === 'run');
  if (argv[0] !== 'run' || run === undefined) return [...argv];
  return ['run', ...splitRunArgs(argv.slice(1), run.options)];
}

/** Run the CLI with `argv` (without node and script); resolves with the exit code. */
export async function main(argv: readonly string[], out: Output = toStdout): Promise<number> {
  process.exitCode = 0;
  try {
    const prog = program(out);
    await prog.parseAsync(normalized(prog, argv), { from: 'user' });
    return typeof process.exitCode === 'number' ? process.exitCode : 0;
  } catch (err) {
    return statusOf(err);
  }
}

/** True when this module is the program being run (also through npm's `bin` symlink). */
function invokedDirectly(): boolean {
  const script = process.argv[1];
  if (script === undefined) return false;
  try {
    return realpathSync(script) === realpathSync(fileURLToPath(import.meta.url));
  } catch {
    return false;
  }
}

if (invokedDirectly()) {
  main(process.argv.slice(2)).then((code) => {
    process.exitCode = code;
  });
}
