/**
 * `locksmith break <lockId> --reason …`: break a lock on purpose and on the record. Every
 * hold ends as if its lease had run out (each holder hears of it at its next renewal) and
 * the fencing token moves on. docs/observability.md, "Breaking a lock".
 */
import type { Command } from 'commander';
import { createLocker, formatIdentity } from '../index.js';
import { EXIT } from './exit.js';
import { chooseBackend } from './backend.js';
import { backendOption, type Output } from './ls.js';

/** Register `break` on the program. */
export function addBreak(cmd: Command, out: Output): void {
  cmd
    .command('break')
    .description('end every hold of a lock now and move its token on (holders lose it at their next renewal); exit 0 broken, 1 was free')
    .argument('<lockId>', 'the lock name')
    .requiredOption('-r, --reason <text>', 'why (recorded in the event and the log with who broke it)')
    .addOption(backendOption())
    .option('--name <name>', 'who breaks it, as the log and the event show (default: this package name)')
    .action(async (lockId: string, flags: { backend?: string; reason: string; name?: string }) => {
      const locker = createLocker(chooseBackend(flags.backend), flags.name === undefined ? {} : { name: flags.name });
      try {
        const holds = await locker.forceRelease(lockId, { reason: flags.reason });
        out(`${lockId}: ${holds} hold(s) ended by ${formatIdentity(locker.identity)}: ${flags.reason}\n`);
        process.exitCode = holds > 0 ? 0 : EXIT.FREE;
      } finally {
        await locker.close();
      }
    });
}
