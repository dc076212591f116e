#!/usr/bin/env node
/**
 * The `locksmith` command: a thin layer over the public API (it imports only the public
 * entries `locksmith` and `locksmith-dlm/bench`). See `locksmith --help` and the README.
 */
import { readFileSync, realpathSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { Command, CommanderError, Option } from 'commander';
import { BackendUnavailableError, createLocker, DriverMissingError, InvalidArgumentError, LocksmithError } from '../index.js';
import { formatMatrix, runMatrix } from '../bench-matrix/index.js';
import { parseCount, parseDuration } from './duration.js';
import { runDemo } from './demo.js';
import { EXIT, EXIT_HELP } from './exit.js';
import { runWithLock, type RunHold } from './run.js';
import { formatStatus } from './status.js';
import { addLs } from './ls.js';
import { addBreak } from './break.js';

/** `--backend`, or `$LOCKSMITH_BACKEND`; `run` and `status` refuse to guess (memory:// coordinates nothing across processes). */
const backendOption = (fallback?: string): Option => {
  const o = new Option('-b, --backend <url>', 'backend URL (e.g. redis://127.0.0.1:6379)').env('LOCKSMITH_BACKEND');
  return fallback ? o.default(fallback) : o;
};

function requireBackend(url: string | undefined): string {
  if (url) return url;
  throw new InvalidArgumentError(
    '--backend',
    'no backend given: pass --backend URL or set LOCKSMITH_BACKEND (an in-process memory:// lock would coordinate nothing between processes)',
  );
}

function version(): string {
  const pkg: unknown = JSON.parse(readFileSync(new URL('../../package.json', import.meta.url), 'utf8'));
  return typeof pkg === 'object' && pkg !== null && 'version' in pkg ? String(pkg.version) : 'unknown';
}

interface RunFlags {
  backend?: string;
  ttl: string;
  wait?: string | boolean;
  fair: boolean;
  grace: string;
  shared: boolean;
  permits?: string;
  owner?: string;
  conflictExitCode: string;
}

function holdOf(flags: RunFlags): RunHold {
  if (flags.shared && flags.permits !== undefined) throw new InvalidArgumentError('--shared', '--shared and --permits exclude each other');
  if (flags.shared) return { kind: 'read' };
  if (flags.permits !== undefined) return { kind: 'semaphore', permits: parseCount(flags.permits, '--permits', 1, 1_000_000) };
  return { kind: 'mutex' };
}

function addRun(cmd: Command): void {
  cmd
    .command('run')
    .description('run a command while holding the lock; exits with its status (75: not obtained, 76: lock lost)')
    .argument('<lockId>', 'the lock name')
    .argument('<command...>', 'the command to run (after --)')
    .addOption(backendOption())
    .option('--ttl <duration>', 'lease length (10s, 500ms, or seconds)', '10s')
    .option('-w, --wait <duration>', 'give up after waiting this long; 0 = one attempt (default: wait forever)')
    .option('--no-wait', 'one attempt: exit at once if the lock is held (same as --wait 0)')
    .option('--fair', 'FIFO order among waiters', false)
    .option('-s, --shared', 'a shared (read) hold: many readers together, never with a writer', false)
    .option('-n, --permits <n>', 'a semaphore with n permits (n holders at once), as consul lock -n')
    .option('--owner <id>', 'holder id (the same id re-enters); default host:pid:random')
    .option('-E, --conflict-exit-code <n>', 'exit status when the lock is not obtained', String(EXIT.NOT_OBTAINED))
    .option('--grace <duration>', 'after SIGTERM on loss, SIGKILL after this long', '10s')
    .action(async (lockId: string, command: string[], flags: RunFlags) => {
      const waitMs = flags.wait === false ? 0 : typeof flags.wait === 'string' ? parseDuration(flags.wait, '--wait', true) : undefined;
      const ttlMs = parseDuration(flags.ttl, '--ttl');
      const locker = createLocker(requireBackend(flags.backend), { ttlMs });
      try {
        process.exitCode = await runWithLock(locker, {
          lockId,
          command,
          hold: holdOf(flags),
          ttlMs,
          waitMs,
          fair: flags.fair,
          graceMs: parseDuration(flags.grace, '--grace'),
          ...(flags.owner === undefined ? {} : { owner: flags.owner }),
          conflictExitCode: parseCount(flags.conflictExitCode, '--conflict-exit-code', 0, 255),
          progress: (line) => process.stderr.write(`${line}\n`),
        });
      } finally {
        await locker.close();
      }
    });
}

function addStatus(cmd: Command, out: Output): void {
  cmd
    .command('status')
    .description('show holders (who, token, expiry) and waiters of a lock; exits 0 when held, 1 when free')
    .argument('<lockId>', 'the lock name')
    .addOption(backendOption())
    .option('--json', 'print JSON', false)
    .action(async (lockId: string, opts: { backend?: string; json: boolean }) => {
      const locker = createLocker(requireBackend(opts.backend));
      try {
        const state = await locker.inspect(lockId);
        out(formatStatus(state, opts.json));
        process.exitCode = state.holders.length > 0 ? 0 : EXIT.FREE;
      } finally {
        await locker.close();
      }
    });
}

function addDemo(cmd: Command): void {
  cmd
    .command('demo')
    .description('the ATM scenario: withdrawals without a lock (the balance goes negative) and with one')
    .option('-b, --backend <url>', 'backend for the locked run', 'memory://demo')
    .action(async (opts: { backend: string }) => {
      const { unlocked, locked } = await runDemo({ backend: opts.backend });
      if (!(unlocked.finalBalance < 0 && locked.finalBalance >= 0)) process.exitCode = 1;
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
    .option('--iterations <n>', 'samples for the latency rows', '200')
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
      if (f.json) out(`${JSON.stringify({ backend: f.backend, ...result })}\n`);
      else out(`${[`backend: ${f.backend}`, ...formatMatrix(result)].join('\n')}\n`);
    });
}

/** Where a command's results go (stdout unless a test captures them). */
export type Output = (text: string) => void;

const toStdout: Output = (text) => void process.stdout.write(text);

/** Build the program (exported for tests). */
export function program(out: Output = toStdout): Command {
  const cmd = new Command('locksmith')
    .description('Distributed locks over Redis, ZooKeeper, etcd, Cassandra, MySQL and PostgreSQL, with fencing tokens and fair queues.')
    .version(version(), '-V, --version')
    .exitOverride()
    .configureOutput({ writeOut: out })
    .showHelpAfterError()
    .addHelpText('after', EXIT_HELP);
  addRun(cmd);
  addStatus(cmd, out);
  addLs(cmd, out);
  addBreak(cmd, out);
  addDemo(cmd);
  addBench(cmd, out);
  return cmd;
}

/** The exit status of an error thrown by a command. */
function statusOf(err: unknown): number {
  if (err instanceof CommanderError) return err.exitCode === 0 ? 0 : EXIT.USAGE;
  const text = `locksmith: ${err instanceof LocksmithError ? `${err.code}: ` : ''}${err instanceof Error ? err.message : String(err)}\n`;
  process.stderr.write(text);
  if (err instanceof InvalidArgumentError) return EXIT.USAGE;
  if (err instanceof BackendUnavailableError || err instanceof DriverMissingError) return EXIT.UNAVAILABLE;
  return EXIT.SOFTWARE;
}

/** Run the CLI with `argv` (without node and script); resolves with the exit code. */
export async function main(argv: readonly string[], out: Output = toStdout): Promise<number> {
  process.exitCode = 0;
  try {
    await program(out).parseAsync([...argv], { from: 'user' });
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
