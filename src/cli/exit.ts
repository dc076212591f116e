/**
 * The exit statuses of the `locksmith` command: one table, used by the code, printed by
 * `--help` and copied in docs/cli.md. Every library error code maps into it (`ERROR_EXITS`
 * is a `Record<ErrorCode, …>`, so a new code does not compile until it has a row).
 */
import { constants } from 'node:os';
import { InvalidArgumentError, LocksmithError, type ErrorCode } from '../index.js';

/** Exit statuses that are not a child's own (sysexits.h numbers where one fits). */
export const EXIT = Object.freeze({
  /** `run`: the lock is held by another (-n, or -w ran out), as flock; `-E` changes it. `status`: the lock is free. */
  CONFLICT: 1,
  /** `status`, `break`: the lock is free (the same status as a conflict, as flock has one "not done"). */
  FREE: 1,
  /** EX_USAGE: bad arguments (unknown option, bad duration, no lock id or command). */
  USAGE: 64,
  /** EX_UNAVAILABLE: the backend could not be reached, or a Redlock majority gave no usable answer. */
  UNAVAILABLE: 69,
  /** EX_SOFTWARE: a bug inside locksmith (never an expected condition). */
  SOFTWARE: 70,
  /** `run`: the lock was lost while the command ran; the command was stopped. */
  LOST: 76,
  /** EX_CONFIG: wrong credentials, a malformed or unknown backend URL, a missing driver, an unsupported feature, missing tables. */
  CONFIG: 78,
  /** `run`: the command was found but could not be executed (as a shell reports it). */
  CANNOT_EXECUTE: 126,
  /** `run`: the command was not found (as a shell reports it). */
  NOT_FOUND: 127,
});

/** The exit status of each library error code, and why. */
export const ERROR_EXITS: Readonly<Record<ErrorCode, { readonly status: number; readonly why: string }>> = Object.freeze({
  INVALID_ARGUMENT: { status: EXIT.USAGE, why: `bad usage; ${EXIT.CONFIG} when it is about the backend URL` },
  LOCK_TIMEOUT: { status: EXIT.CONFLICT, why: 'held by another (-n, or -w ran out); -E sets the status' },
  LOCK_LOST: { status: EXIT.LOST, why: 'lost while the command ran' },
  LOCK_NOT_HELD: { status: EXIT.LOST, why: 'the hold was gone when locksmith used it: lost' },
  BACKEND_UNAVAILABLE: {
    status: EXIT.UNAVAILABLE,
    why: `unreachable; ${EXIT.CONFIG} when the server refused the credentials or the lock tables are missing`,
  },
  QUORUM_FAILED: {
    status: EXIT.UNAVAILABLE,
    why: 'no majority of the Redlock nodes answered usably (down, partitioned, erroring): the service is unavailable and a later try may succeed',
  },
  UNSUPPORTED: {
    status: EXIT.CONFIG,
    why: 'the backend lacks the feature asked for (e.g. --fair, -s, --permits): choose another backend or option',
  },
  DRIVER_MISSING: { status: EXIT.CONFIG, why: "the backend's driver package is not installed (the message says what to npm i)" },
  LOCKER_CLOSED: { status: EXIT.SOFTWARE, why: 'the CLI closed its locker while using it: a bug' },
  STALE_TOKEN: { status: EXIT.SOFTWARE, why: 'the CLI fences nothing itself: a bug' },
});

/** `argument`s of InvalidArgumentError that name the backend URL (configuration, not usage). */
const URL_ARGUMENTS = new Set(['url', 'urlOrBackend', 'table']);

/**
 * What a server says when it refuses credentials: Redis (WRONGPASS, NOAUTH, "invalid
 * password"), PostgreSQL (SQLSTATE 28P01 / 28000), MySQL (ER_ACCESS_DENIED_ERROR, 1045),
 * etcd and ZooKeeper ("authentication failed", AUTH_FAILED), Cassandra (AuthenticationError);
 * and the SQL backends' MISSING_TABLE (the tables were never created: `locksmith migrate`).
 */
const CONFIG_CODES = /^(WRONGPASS|NOAUTH|28P01|28000|ER_ACCESS_DENIED_ERROR|ER_DBACCESS_DENIED_ERROR|AUTH_FAILED|MISSING_TABLE)$/;
const AUTH_TEXT =
  /WRONGPASS|NOAUTH|invalid password|password authentication failed|access denied for user|authentication failed|AuthenticationError/i;

/** True when `err` (or anything it wraps: causes, aggregated errors, Redlock's node results) is a refusal of credentials or missing tables. */
export function isConfigurationFailure(err: unknown, depth = 0): boolean {
  if (depth > 6 || typeof err !== 'object' || err === null) return false;
  const e = err as { code?: unknown; name?: unknown; message?: unknown; cause?: unknown; errors?: unknown; context?: unknown };
  if (typeof e.code === 'string' && CONFIG_CODES.test(e.code)) return true;
  const context = (e.context ?? {}) as { causeCode?: unknown; nodes?: unknown };
  if (typeof context.causeCode === 'string' && CONFIG_CODES.test(context.causeCode)) return true;
  if (!(err instanceof LocksmithError) && AUTH_TEXT.test(`${String(e.name)} ${String(e.message)}`)) return true;
  const inner = [e.cause, ...(Array.isArray(e.errors) ? (e.errors as unknown[]) : [])];
  if (Array.isArray(context.nodes)) {
    // A Redlock majority that failed on credentials is a configuration failure, not an outage.
    const failed = (context.nodes as { ok?: unknown; error?: unknown }[]).filter((n) => n.ok !== true && n.error !== undefined);
    if (failed.length > 0 && failed.every((n) => isConfigurationFailure(n.error, depth + 1))) return true;
  }
  return inner.some((c) => isConfigurationFailure(c, depth + 1));
}

/** The exit status of an error a command threw (the table above); `conflict` is `run`'s -E. */
export function exitStatusOf(err: unknown, conflict: number = EXIT.CONFLICT): number {
  if (!(err instanceof LocksmithError)) return EXIT.SOFTWARE;
  if (err instanceof InvalidArgumentError) return URL_ARGUMENTS.has(err.argument) ? EXIT.CONFIG : EXIT.USAGE;
  if (err.code === 'LOCK_TIMEOUT') return conflict;
  if ((err.code === 'BACKEND_UNAVAILABLE' || err.code === 'QUORUM_FAILED') && isConfigurationFailure(err)) return EXIT.CONFIG;
  return ERROR_EXITS[err.code].status;
}

/** 128 + the signal's number, as shells report a death by signal. */
export function signalStatus(signal: NodeJS.Signals): number {
  return 128 + (constants.signals[signal] ?? 0);
}

/** The rows of the exit-status table: status, meaning. */
export const EXIT_ROWS: readonly (readonly [string, string])[] = [
  ['0-255', "run: the command's own status (it ran under the lock)"],
  [
    String(EXIT.CONFLICT),
    'run: the lock is held by another (-n, or -w ran out); -E/--conflict-exit-code N sets it. status, break: the lock is free',
  ],
  [String(EXIT.USAGE), 'bad usage: unknown option, bad duration or count, no lock id or command'],
  [String(EXIT.UNAVAILABLE), 'the backend is unreachable; a Redlock majority gave no usable answer (QUORUM_FAILED)'],
  [String(EXIT.SOFTWARE), 'a bug inside locksmith'],
  [String(EXIT.LOST), 'run: the lock was lost while the command ran; it was stopped (SIGTERM, SIGKILL after --grace)'],
  [
    String(EXIT.CONFIG),
    'configuration: credentials refused, malformed or unknown backend URL, driver not installed (DRIVER_MISSING), ' +
      'feature the backend lacks (UNSUPPORTED), lock tables missing (run locksmith migrate)',
  ],
  [String(EXIT.CANNOT_EXECUTE), 'run: the command was found but could not be executed (not executable)'],
  [String(EXIT.NOT_FOUND), 'run: the command was not found'],
  ['128+n', 'the command was killed by signal n, or locksmith was interrupted while waiting (130 SIGINT, 143 SIGTERM)'],
];

/** `text` in lines of at most `width` characters, each after the first indented by `indent`. */
function wrap(text: string, width: number, indent: string): string {
  const lines: string[] = [];
  let line = '';
  for (const word of text.split(' ')) {
    if (line !== '' && line.length + 1 + word.length > width) {
      lines.push(line);
      line = word;
    } else line = line === '' ? word : `${line} ${word}`;
  }
  lines.push(line);
  return lines.join(`\n${indent}`);
}

/** The exit-status table and the error-code map, as `--help` prints them. */
export function exitHelp(): string {
  const indent = ' '.repeat(9);
  const rows = EXIT_ROWS.map(([status, text]) => `  ${status.padEnd(7)}${wrap(text, 80, indent)}`);
  const codes = Object.entries(ERROR_EXITS).map(([code, { status }]) => `${code} ${status}`);
  return ['Exit statuses:', ...rows, `  ${wrap(`Error codes: ${codes.join(', ')} (docs/cli.md says why).`, 87, '  ')}`].join('\n');
}
