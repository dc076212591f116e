/**
 * A `locksmith run` wrapper killed with SIGKILL cannot stop its command, and its lock frees
 * when the lease runs out: the command would go on without the lock. On Linux the command is
 * started through util-linux's `setpriv --pdeathsig KILL`, so the kernel kills it when the
 * wrapper dies. What remains is in docs/cli.md ("When locksmith itself is killed").
 */
import { spawnSync } from 'node:child_process';

/** The words to put before the command: `setpriv --pdeathsig KILL --`, or none where it is not available. */
const PREFIX = ['setpriv', '--pdeathsig', 'KILL', '--'] as const;

let available: boolean | undefined;

/** `[file, args]` to spawn so that `cmd args…` dies with this process where the OS allows. */
export function diesWithParent(cmd: string, args: readonly string[]): [string, string[]] {
  if (process.platform === 'linux') {
    // One probe per process: util-linux may be missing (Alpine's busybox) or too old for --pdeathsig.
    available ??= spawnSync(PREFIX[0], [...PREFIX.slice(1), 'true'], { stdio: 'ignore' }).status === 0;
    if (available) return [PREFIX[0], [...PREFIX.slice(1), cmd, ...args]];
  }
  return [cmd, [...args]];
}
