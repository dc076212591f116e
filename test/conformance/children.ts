/**
 * Lockers in other processes for the conformance cases (test/conformance/child.ts). A child
 * never outlives its test: it lets go when told (dispose), when its stdin closes, and is
 * started under `setpriv --pdeathsig KILL` where Linux has it; any child still running when
 * the test process exits is killed.
 */
import { spawn, type ChildProcessByStdio } from 'node:child_process';
import { dirname, join } from 'node:path';
import { createInterface } from 'node:readline';
import type { Readable, Writable } from 'node:stream';
import { fileURLToPath } from 'node:url';
import { diesWithParent } from '../../src/cli/deathsig.js';
import type { ChildConfig, ChildReport } from './child.js';

const childModule = join(dirname(fileURLToPath(import.meta.url)), 'child.ts');
const running = new Set<ChildProcessByStdio<Writable, Readable, null>>();
process.once('exit', () => {
  for (const c of running) c.kill('SIGKILL');
});

/** A locker in another process, released and ended by `await using`. */
export interface OtherProcess extends AsyncDisposable {
  readonly pid: number;
  /** The next report of `type` (rejects if the child exits first). */
  next<T extends ChildReport['type']>(type: T): Promise<Extract<ChildReport, { type: T }>>;
  /** Tell the child to let go (release or stop waiting), and wait until it has exited. */
  end(): Promise<void>;
}

/** Start a locker in another process doing `config.action` (see child.ts). */
export function otherProcess(config: ChildConfig): OtherProcess {
  const [file, args] = diesWithParent(process.execPath, ['--import', 'tsx', childModule, JSON.stringify(config)]);
  const child = spawn(file, args, { stdio: ['pipe', 'pipe', 'inherit'] });
  running.add(child);
  // A child that died already makes `end()`'s write fail with EPIPE: nothing to tell it then.
  child.stdin.on('error', () => undefined);
  // 'close', not 'exit': every line the child wrote has been read by then.
  const exit = new Promise<string>((resolve) =>
    child.once('close', (code, signal) => {
      running.delete(child);
      resolve(`child exited (${code ?? signal})`);
    }),
  );
  const reports: ChildReport[] = [];
  const seen: Array<() => void> = [];
  createInterface({ input: child.stdout }).on('line', (line) => {
    reports.push(JSON.parse(line) as ChildReport);
    for (const wake of seen.splice(0)) wake();
  });
  const next = async <T extends ChildReport['type']>(type: T): Promise<Extract<ChildReport, { type: T }>> => {
    for (;;) {
      const found = reports.find((r): r is Extract<ChildReport, { type: T }> => r.type === type);
      if (found) return found;
      const more = new Promise<void>((resolve) => seen.push(resolve));
      const why = await Promise.race([more.then(() => undefined), exit]);
      if (why !== undefined && !reports.some((r) => r.type === type)) throw new Error(`${why} before reporting '${type}'`);
    }
  };
  const end = async (): Promise<void> => {
    if (child.exitCode === null && child.signalCode === null) child.stdin.end('let go\n');
    const bound = setTimeout(() => child.kill('SIGKILL'), 30_000);
    await exit;
    clearTimeout(bound);
  };
  return { pid: child.pid ?? -1, next, end, [Symbol.asyncDispose]: end };
}
