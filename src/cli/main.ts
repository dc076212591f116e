#!/usr/bin/env node
/**
 * The `locksmith` command: a thin layer over the public API.
 *   locksmith run <lockId> [--backend URL] [--ttl 10s] [--wait 30s | --no-wait] [--fair] -- cmd args…
 *   locksmith status <lockId> [--backend URL] [--json]
 *   locksmith demo
 *   locksmith bench [--backend URL]
 * The backend URL also comes from LOCKSMITH_BACKEND.
 */
import { realpathSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { Command, CommanderError, Option } from 'commander';
import { createLocker } from '../locker.js';
import { BackendUnavailableError, InvalidArgumentError, LocksmithError } from '../errors.js';
import { parseDuration } from './duration.js';
import { runDemo } from './demo.js';
import { EXIT, runWithLock } from './run.js';
import { benchHandoff, benchHot, benchUncontended } from './bench.js';

const backendOption = (): Option =>
  new Option('-b, --backend <url>', 'backend URL').env('LOCKSMITH_BACKEND').default('memory://', 'memory:// (in-process)');

const stringify = (v: unknown): string => JSON.stringify(v, (_k, x: unknown) => (typeof x === 'bigint' ? x.toString() : x), 2);

/** Build the program (exported for tests). */
export function program(): Command {
  const cmd = new Command('locksmith')
    .description('Distributed locks over Redis, ZooKeeper, Cassandra and more, with fencing tokens and fair queues.')
    .exitOverride()
    .showHelpAfterError();

  cmd
    .command('run')
    .description('run a command while holding the lock; exits with its status (75: not obtained, 76: lock lost)')
    .argument('<lockId>', 'the lock name')
    .argument('<command...>', 'the command to run (after --)')
    .addOption(backendOption())
    .option('--ttl <duration>', 'lease length', '10s')
    .option('--wait <duration>', 'give up after waiting this long (default: wait forever)')
    .option('--no-wait', 'one attempt: exit 75 at once if the lock is held')
    .option('--fair', 'FIFO order among waiters', false)
    .option('--grace <duration>', 'after SIGTERM on loss, SIGKILL after this long', '10s')
    .action(
      async (
        lockId: string,
        command: string[],
        opts: { backend: string; ttl: string; wait: string | boolean; fair: boolean; grace: string },
      ) => {
        const waitMs = opts.wait === false ? 0 : typeof opts.wait === 'string' ? parseDuration(opts.wait, '--wait') : undefined;
        const ttlMs = parseDuration(opts.ttl, '--ttl');
        const graceMs = parseDuration(opts.grace, '--grace');
        const locker = createLocker(opts.backend, { ttlMs });
        try {
          process.exitCode = await runWithLock(locker, {
            lockId,
            command,
            ttlMs,
            waitMs,
            fair: opts.fair,
            graceMs,
            progress: (line) => process.stderr.write(`${line}\n`),
          });
        } finally {
          await locker.close();
        }
      },
    );

  cmd
    .command('status')
    .description('show holders, tokens, expiry and waiters of a lock')
    .argument('<lockId>', 'the lock name')
    .addOption(backendOption())
    .option('--json', 'print JSON', false)
    .action(async (lockId: string, opts: { backend: string; json: boolean }) => {
      const locker = createLocker(opts.backend);
      try {
        const state = await locker.inspect(lockId);
        if (opts.json) {
          process.stdout.write(`${stringify(state)}\n`);
          return;
        }
        process.stdout.write(`lock: ${state.lockId}\n`);
        if (state.holders.length === 0) process.stdout.write('holder: (free)\n');
        for (const h of state.holders) {
          const exp = h.expiresInMs === undefined ? '' : `, expires in ${h.expiresInMs} ms`;
          process.stdout.write(
            `holder: ${h.ownerId} (${h.kind}), token ${h.token}${exp}${h.count && h.count > 1 ? `, count ${h.count}` : ''}\n`,
          );
        }
        process.stdout.write(`waiters: ${state.waiters}\n`);
        if (state.lastToken !== undefined) process.stdout.write(`last token: ${state.lastToken}\n`);
      } finally {
        await locker.close();
      }
    });

  cmd
    .command('demo')
    .description('the ATM scenario: withdrawals without a lock (the balance goes negative) and with one')
    .option('-b, --backend <url>', 'backend for the locked run', 'memory://demo')
    .action(async (opts: { backend: string }) => {
      const { unlocked, locked } = await runDemo({ backend: opts.backend });
      if (!(unlocked.finalBalance < 0 && locked.finalBalance >= 0)) process.exitCode = 1;
    });

  cmd
    .command('bench')
    .description('uncontended latency, hand-off latency and a hot lock with N contenders against a backend')
    .addOption(backendOption())
    .option('--iterations <n>', 'samples for the latency figures', '200')
    .option('--contenders <n>', 'clients on the hot lock', '16')
    .option('--duration <duration>', 'length of the hot-lock run', '5s')
    .option('--critical <duration>', 'critical section length', '2ms')
    .option('--fair', 'fair mode', false)
    .action(
      async (opts: { backend: string; iterations: string; contenders: string; duration: string; critical: string; fair: boolean }) => {
        const n = Number(opts.iterations);
        const c = Number(opts.contenders);
        if (!Number.isInteger(n) || n < 1) throw new InvalidArgumentError('--iterations', '--iterations must be an integer ≥ 1');
        if (!Number.isInteger(c) || c < 1) throw new InvalidArgumentError('--contenders', '--contenders must be an integer ≥ 1');
        const make = (o?: object) => createLocker(opts.backend, { ...o });
        const unc = await benchUncontended(make, n);
        const hand = await benchHandoff(make, Math.min(n, 100), opts.fair);
        const hot = await benchHot(
          make,
          c,
          parseDuration(opts.duration, '--duration'),
          parseDuration(opts.critical, '--critical'),
          opts.fair,
        );
        const row = { backend: opts.backend, fair: opts.fair, uncontended: unc, handoff: hand, hot };
        process.stdout.write(`uncontended acquire+release: p50 ${unc.p50.toFixed(3)} ms, p99 ${unc.p99.toFixed(3)} ms\n`);
        process.stdout.write(`hand-off: p50 ${hand.p50.toFixed(3)} ms, p99 ${hand.p99.toFixed(3)} ms\n`);
        process.stdout.write(
          `hot lock, ${c} contenders: ${hot.opsPerSec.toFixed(1)} ops/s, Jain ${hot.jain.toFixed(3)}, longest streak ${hot.longestStreak}\n`,
        );
        process.stdout.write(`${JSON.stringify(row, (_k, x: unknown) => (typeof x === 'number' ? Math.round(x * 1000) / 1000 : x))}\n`);
      },
    );
  return cmd;
}

/** Run the CLI with `argv` (without node and script); resolves with the exit code. */
export async function main(argv: readonly string[]): Promise<number> {
  process.exitCode = 0;
  try {
    await program().parseAsync([...argv], { from: 'user' });
    return typeof process.exitCode === 'number' ? process.exitCode : 0;
  } catch (err) {
    if (err instanceof CommanderError) return err.exitCode === 0 ? 0 : EXIT.USAGE;
    if (err instanceof InvalidArgumentError) {
      process.stderr.write(`locksmith: ${err.message}\n`);
      return EXIT.USAGE;
    }
    if (err instanceof BackendUnavailableError) {
      process.stderr.write(`locksmith: ${err.message}\n`);
      return EXIT.UNAVAILABLE;
    }
    process.stderr.write(
      `locksmith: ${err instanceof LocksmithError ? `${err.code}: ` : ''}${err instanceof Error ? err.message : String(err)}\n`,
    );
    return 1;
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
