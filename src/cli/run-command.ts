/**
 * The `run` command's options, as flock, `etcdctl lock` and `consul lock` users write them
 * (docs/cli.md has the table): `-n` nonblock, `-w` wait, `-E` conflict status, `-c` shell
 * command, `-s` shared, `-q` / `-v`, `--permits` for a semaphore.
 */
import { Command, Option } from 'commander';
import { createLocker, InvalidArgumentError, type Locker } from '../index.js';
import { chooseBackend, shownUrl } from './backend.js';
import { parseCount, parseDuration } from './duration.js';
import { EXIT, exitHelp } from './exit.js';
import { runHeld, runWithLock, type RunHold, type Say } from './run.js';
import { serviceAcquirer } from './run-server.js';

interface RunFlags {
  backend?: string;
  server?: string;
  token?: string;
  ttl: string;
  wait?: string;
  timeout?: string;
  nonblock?: boolean;
  exclusive?: boolean;
  fair?: boolean;
  grace: string;
  shared?: boolean;
  permits?: string;
  owner?: string;
  conflictExitCode: string;
  command?: string;
  quiet?: boolean;
  verbose?: boolean;
}

/** The backend option every command shares: `--backend`, else `$LOCKSMITH_BACKEND`. */
export function backendOption(fallback?: string): Option {
  const o = new Option('-b, --backend <url>', 'backend URL (e.g. redis://127.0.0.1:6379)').env('LOCKSMITH_BACKEND');
  return fallback === undefined ? o : o.default(fallback);
}

function holdOf(flags: RunFlags): RunHold {
  if (flags.shared && flags.permits !== undefined) throw new InvalidArgumentError('--shared', '--shared and --permits exclude each other');
  if (flags.shared) return { kind: 'read' };
  if (flags.permits !== undefined) return { kind: 'semaphore', permits: parseCount(flags.permits, '--permits', 1, 1_000_000) };
  return { kind: 'mutex' };
}

/** The command line to run: the words after the lock id, or `sh -c STRING` for -c. */
function commandOf(words: readonly string[], flags: RunFlags): string[] {
  if (flags.command !== undefined) {
    if (words.length > 0) throw new InvalidArgumentError('-c', '-c takes the whole command as one string; give -c or a command, not both');
    return ['sh', '-c', flags.command];
  }
  if (words.length === 0) throw new InvalidArgumentError('command', 'no command given: locksmith run [options] <lockId> <command> [args…]');
  return [...words];
}

/** How long to wait: -n → 0 (one attempt), -w/--wait/--timeout, else forever. */
function waitOf(flags: RunFlags): number | undefined {
  if (flags.wait !== undefined && flags.timeout !== undefined)
    throw new InvalidArgumentError('--wait', 'give -w/--wait or --timeout, not both');
  if (flags.nonblock) return 0;
  const text = flags.wait ?? flags.timeout;
  return text === undefined ? undefined : parseDuration(text, '--wait', true);
}

/** Where `run`'s lines go: progress only with -v or on a terminal, nothing but errors with -q. */
function voice(flags: RunFlags): Say {
  if (flags.quiet && flags.verbose) throw new InvalidArgumentError('--quiet', '-q and -v exclude each other');
  const write = (line: string): void => void process.stderr.write(`${line}\n`);
  return (kind, line) => {
    if (kind === 'error') write(line);
    else if (kind === 'conflict' && !flags.quiet) write(line);
    else if (kind === 'wait' && (flags.verbose || (process.stderr.isTTY && !flags.quiet))) write(line);
    else if (kind === 'info' && flags.verbose) write(line);
  };
}

async function runAction(lockId: string, words: string[], flags: RunFlags, cmd: Command): Promise<void> {
  const command = commandOf(words, flags);
  const ttlMs = parseDuration(flags.ttl, '--ttl');
  const options = {
    lockId,
    command,
    hold: holdOf(flags),
    ttlMs,
    waitMs: waitOf(flags),
    fair: flags.fair === true,
    graceMs: parseDuration(flags.grace, '--grace'),
    ...(flags.owner === undefined ? {} : { owner: flags.owner }),
    conflictExitCode: parseCount(flags.conflictExitCode, '--conflict-exit-code', 0, 255),
    say: voice(flags),
  };
  if (flags.server !== undefined) {
    // --backend from the environment gives way to --server; both on the command line are a mistake.
    if (cmd.getOptionValueSource('backend') === 'cli') throw new InvalidArgumentError('--server', 'give --backend or --server, not both');
    options.say('info', `locksmith: service ${shownUrl(flags.server)}`);
    const target = { url: flags.server, ...(flags.token === undefined ? {} : { token: flags.token }) };
    process.exitCode = await runHeld(serviceAcquirer(target), options);
    return;
  }
  const url = chooseBackend(flags.backend);
  options.say('info', `locksmith: backend ${shownUrl(url)}`);
  const locker: Locker = createLocker(url, { ttlMs });
  try {
    process.exitCode = await runWithLock(locker, options);
  } finally {
    await locker.close();
  }
}

/** Add `run` to the program. */
export function addRun(cmd: Command): Command {
  return cmd
    .command('run')
    .description('run a command while holding the lock, as flock does; exits with its status')
    .usage('[options] <lockId> <command> [args…]   (or: [options] <lockId> -c "shell command")')
    .argument('<lockId>', 'the lock name')
    .argument('[command...]', 'the command: every word after the lock id (options end there; -- also works)')
    .addOption(backendOption())
    .addOption(
      new Option('--server <url>', 'take the lock through a locksmith serve service (docs/serve.md) instead of a backend').env(
        'LOCKSMITH_SERVER',
      ),
    )
    .addOption(new Option('--token <token>', 'bearer token for --server (prefer the environment variable)').env('LOCKSMITH_SERVER_TOKEN'))
    .option('-n, --nonblock', 'fail at once (exit 1, or -E) when the lock is held')
    .option('-w, --wait <seconds>', 'give up after waiting this long (exit 1, or -E); 0 = -n; 10, 0.5, 500ms, 2m (default: forever)')
    .addOption(new Option('--timeout <seconds>', 'the same as --wait').hideHelp())
    .option('-E, --conflict-exit-code <n>', 'exit status when the lock is not obtained', String(EXIT.CONFLICT))
    .option('-c, --command <string>', 'run this string through sh -c')
    .option('-s, --shared', 'a shared (read) hold: many readers together, never with a writer')
    .option('-x, --exclusive', 'an exclusive hold (the default; for flock habits)')
    .addOption(new Option('-e').hideHelp())
    .option('--permits <n>', 'a semaphore with n permits: n holders at once (consul lock -n)')
    .option('--ttl <duration>', 'lease length, renewed while the command runs (10s, 500ms, or seconds)', '10s')
    .option('--fair', 'FIFO order among waiters')
    .option('--owner <id>', 'holder id (the same id re-enters); default host:pid:random')
    .option('--grace <duration>', 'after SIGTERM on loss, SIGKILL after this long', '10s')
    .option('-q, --quiet', 'print nothing when the lock is not obtained')
    .option('-v, --verbose', 'say the backend, each 2 s of waiting, and when the lock was obtained')
    .addHelpText('after', `\n${exitHelp()}\n`)
    .action(runAction);
}
