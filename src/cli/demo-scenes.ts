/**
 * The two distributed scenes of `locksmith demo`: ATM *processes* withdrawing under a lock on
 * the `file://` backend (docs/backends/file.md), and a holder paused past its lease whose late
 * write the resource refuses by its fencing token (docs/guarantees.md). The children are
 * src/cli/demo-child.ts, forked with the same Node and loader as this process.
 */
import { fork, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, extname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { createLocker, FencedResource, StaleTokenError } from '../index.js';
import type { AccountFile, HoldMessage } from './demo-child.js';

/** Outcome of the ATM processes scene. */
export interface ProcessesOutcome {
  readonly finalBalance: number;
  readonly withdrawals: number;
  readonly refusals: number;
  /** Fencing tokens in the order the processes held the lock. */
  readonly tokens: readonly bigint[];
}

/** Outcome of the paused holder scene. */
export interface PausedOutcome {
  readonly staleToken: bigint;
  readonly newToken: bigint;
  /** The refusal of the paused holder's late write (undefined: it was accepted, a bug). */
  readonly refusal: StaleTokenError | undefined;
  /** What the resource holds at the end. */
  readonly value: string;
}

const here = fileURLToPath(import.meta.url);
/** `.ts` under tsx (npm run demo), `.js` in dist/cli/ of the built package. */
const childModule = join(dirname(here), `demo-child${extname(here)}`);

/** Fork a child with this process's loader flags (tsx's) but not its other flags (--test…). */
function forkChild(args: string[], children: Set<ChildProcess>): ChildProcess {
  const execArgv: string[] = [];
  const own = process.execArgv;
  for (let i = 0; i < own.length; i += 1) {
    const flag = own[i] ?? '';
    if (['--import', '--require', '--loader', '--experimental-loader'].includes(flag)) {
      execArgv.push(flag, own[i + 1] ?? '');
      i += 1;
    } else if (/^--(import|require|loader|experimental-loader)=/.test(flag)) execArgv.push(flag);
  }
  const child = fork(childModule, args, { execArgv, stdio: ['ignore', 'ignore', 'inherit', 'ipc'] });
  children.add(child);
  child.once('exit', () => children.delete(child));
  return child;
}

async function exited(child: ChildProcess): Promise<number | null> {
  if (child.exitCode !== null || child.signalCode !== null) return child.exitCode;
  const [code] = (await once(child, 'exit')) as [number | null];
  return code;
}

/** Run `body` with a fresh temp dir and a set of children; both are gone afterwards. */
export async function withScratch<T>(body: (dir: string, children: Set<ChildProcess>) => Promise<T>): Promise<T> {
  const dir = mkdtempSync(join(tmpdir(), 'locksmith-demo-'));
  const children = new Set<ChildProcess>();
  try {
    return await body(dir, children);
  } finally {
    for (const child of children) {
      child.kill('SIGCONT');
      child.kill('SIGKILL');
    }
    await Promise.all([...children].map(exited));
    rmSync(dir, { recursive: true, force: true });
  }
}

/** Scene: `atms` processes withdraw `amount` each from one account file under a `file://` lock. */
export async function atmProcesses(
  atms: number,
  initial: number,
  amount: number,
  write: (line: string) => void,
): Promise<ProcessesOutcome> {
  return withScratch(async (dir, children) => {
    const path = join(dir, 'account.json');
    writeFileSync(path, JSON.stringify({ balance: initial, journal: [] } satisfies AccountFile));
    write(`Several processes: ${atms} ATM processes withdraw ${amount} from an account file holding ${initial},`);
    write(`each under locker.lock('account:42') on file://<temp dir>:`);
    const procs = Array.from({ length: atms }, (_, i) => forkChild(['withdraw', dir, String(i + 1), String(amount)], children));
    const codes = await Promise.all(procs.map(exited));
    if (codes.some((c) => c !== 0)) throw new Error(`an ATM process failed (exit codes ${codes.join(', ')})`);
    const account = JSON.parse(readFileSync(path, 'utf8')) as AccountFile;
    for (const e of account.journal) {
      write(`  ATM ${e.atm} (pid ${e.pid}) token ${e.token}: ${e.paid ? 'paid   ' : 'refused'} -> balance ${e.balance}`);
    }
    const tokens = account.journal.map((e) => BigInt(e.token));
    const grow = tokens.every((t, i) => i === 0 || t > (tokens[i - 1] ?? t));
    const paid = account.journal.filter((e) => e.paid).length;
    write(
      `  final balance: ${account.balance}${account.balance >= 0 ? '   <-- never negative' : '   <-- NEGATIVE (a bug!)'}; tokens ${grow ? 'grow with every holder' : 'DO NOT GROW (a bug!)'}`,
    );
    return { finalBalance: account.balance, withdrawals: paid, refusals: account.journal.length - paid, tokens };
  });
}

function nextMessage(child: ChildProcess): Promise<HoldMessage> {
  return new Promise((resolve, reject) => {
    child.once('message', (m) => resolve(m as HoldMessage));
    child.once('exit', (code) => reject(new Error(`the holder process exited (${String(code)}) before it answered`)));
  });
}

/** Scene: a holder process is paused (SIGSTOP) past its lease; its late write is refused. */
export async function pausedHolder(ttlMs: number, write: (line: string) => void): Promise<PausedOutcome> {
  return withScratch(async (dir, children) => {
    const report = new FencedResource('(empty)');
    const holder = forkChild(['hold', dir, String(ttlMs)], children);
    const first = await nextMessage(holder);
    const staleToken = BigInt(first.token);
    report.write(staleToken, 'draft by A');
    write('A paused holder, fenced:');
    write(
      `  process A (pid ${holder.pid}) holds 'report' with token ${staleToken} and writes; then it is paused (SIGSTOP) past its ${ttlMs} ms lease`,
    );
    holder.kill('SIGSTOP');
    const locker = createLocker(`file://${dir}`, { ttlMs: 5_000 });
    try {
      const lock = await locker.lock('report', { waitMs: 10_000 });
      report.write(lock.token, 'final by B');
      write(`  process B takes 'report' when the lease ends: token ${lock.token}, writes`);
      holder.kill('SIGCONT');
      const late = nextMessage(holder);
      holder.send('resume');
      const stale = BigInt((await late).token);
      let refusal: StaleTokenError | undefined;
      try {
        report.write(stale, 'late overwrite by A');
        write(`  A resumes and writes with token ${stale}: ACCEPTED (a bug!)`);
      } catch (err) {
        if (!(err instanceof StaleTokenError)) throw err;
        refusal = err;
        write(`  A resumes and writes with its old token ${stale}: refused, StaleTokenError: ${err.message}`);
      }
      write(`  the report still reads: "${report.peek()}"`);
      await lock.release();
      await exited(holder);
      return { staleToken, newToken: lock.token, refusal, value: report.peek() };
    } finally {
      await locker.close();
    }
  });
}
