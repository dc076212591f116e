/** Exit statuses of the `locksmith` command (also listed in `locksmith --help`). */
import { constants } from 'node:os';

/** Exit statuses that are not a child's own. */
export const EXIT = Object.freeze({
  /** `status`: the lock is free. */
  FREE: 1,
  /** Bad arguments, or no backend given to a command that needs one. */
  USAGE: 64,
  /** The backend could not be reached, or its driver is not installed. */
  UNAVAILABLE: 69,
  /** Anything else that went wrong inside locksmith. */
  SOFTWARE: 70,
  /** `run`: the lock was not obtained (held with --no-wait / --wait 0, or --wait ran out); see --conflict-exit-code. */
  NOT_OBTAINED: 75,
  /** `run`: the lock was lost while the command ran; the command was stopped. */
  LOST: 76,
  /** `run`: the command could not be started. */
  NOT_FOUND: 127,
});

/** 128 + the signal's number, as shells report a death by signal. */
export function signalStatus(signal: NodeJS.Signals): number {
  return 128 + (constants.signals[signal] ?? 0);
}

/** The text `--help` ends with. */
export const EXIT_HELP = `
Exit statuses:
  run     the command's own status; ${EXIT.NOT_OBTAINED} lock not obtained (--conflict-exit-code), ${EXIT.LOST} lock lost
          (the command was stopped), ${EXIT.NOT_FOUND} command not found, 130/143 interrupted (SIGINT/SIGTERM) while waiting
  status  0 held, ${EXIT.FREE} free
  break   0 holds ended, ${EXIT.FREE} the lock was free
  all     ${EXIT.USAGE} usage error or no backend given, ${EXIT.UNAVAILABLE} backend unreachable or driver missing, ${EXIT.SOFTWARE} internal error

Environment:
  LOCKSMITH_BACKEND    backend URL when --backend is not given (run and status need one of the two)
  LOCKSMITH_TOKEN      (set for the command of run) the fencing token; pass it to what the command writes to
  LOCKSMITH_LOCK_ID    (set for the command of run) the lock id
  LOCKSMITH_OWNER      (set for the command of run) the holder id, host:pid:random unless --owner was given
`;
