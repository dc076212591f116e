/**
 * The ATM scenario of the README: an account holds 200, several ATMs withdraw 150
 * at the same moment. Without a lock each ATM sees enough money and the balance goes
 * negative; with `locker.lock` exactly one withdrawal succeeds, fenced by its token.
 * Then the distributed scenes (src/cli/demo-scenes.ts): ATM processes on `file://`, and a
 * paused holder whose late write the fenced resource refuses.
 */
import { setTimeout as sleep } from 'node:timers/promises';
import { createLocker, FencedResource } from '../index.js';
import { shownUrl } from './backend.js';
import { atmProcesses, pausedHolder, type PausedOutcome, type ProcessesOutcome } from './demo-scenes.js';

/** Outcome of one run of the scenario. */
export interface DemoOutcome {
  readonly finalBalance: number;
  readonly withdrawals: number;
  readonly refusals: number;
  /** Fencing tokens of the successful withdrawals (empty without a lock). */
  readonly tokens: readonly bigint[];
}

/** Options of {@link runDemo}. */
export interface DemoOptions {
  readonly atms?: number;
  readonly initial?: number;
  readonly amount?: number;
  /** Backend URL for the locked run (default: the embedded `memory://`). */
  readonly backend?: string;
  readonly write?: (line: string) => void;
  /** Run the distributed scenes (child processes on `file://`). @default true */
  readonly scenes?: boolean;
}

/** Outcomes of {@link runDemo}; the scenes' are absent when `scenes` is false. */
export interface DemoResult {
  readonly unlocked: DemoOutcome;
  readonly locked: DemoOutcome;
  readonly processes?: ProcessesOutcome;
  readonly paused?: PausedOutcome;
}

/** Simulated round trip to the bank's database: the window in which races happen. */
const DB_LATENCY_MS = 20;

async function withoutLock(atms: number, initial: number, amount: number): Promise<DemoOutcome> {
  let balance = initial;
  let withdrawals = 0;
  let refusals = 0;
  await Promise.all(
    Array.from({ length: atms }, async () => {
      const seen = balance;
      await sleep(DB_LATENCY_MS);
      if (seen >= amount) {
        // The debit itself is atomic (UPDATE … SET balance = balance - 150); the check was not.
        balance -= amount;
        withdrawals += 1;
      } else {
        refusals += 1;
      }
    }),
  );
  return { finalBalance: balance, withdrawals, refusals, tokens: [] };
}

async function withLock(atms: number, initial: number, amount: number, backend: string): Promise<DemoOutcome> {
  const account = new FencedResource(initial);
  const tokens: bigint[] = [];
  let refusals = 0;
  // One locker per ATM: each models a separate machine.
  const lockers = Array.from({ length: atms }, () => createLocker(backend, { ttlMs: 5_000 }));
  try {
    await Promise.all(
      lockers.map((locker) =>
        locker.withLock('account:42', async (lock) => {
          const seen = account.read(lock.token);
          await sleep(DB_LATENCY_MS);
          if (seen >= amount) {
            account.write(lock.token, seen - amount);
            tokens.push(lock.token);
          } else {
            refusals += 1;
          }
        }),
      ),
    );
  } finally {
    await Promise.all(lockers.map((l) => l.close()));
  }
  return { finalBalance: account.peek(), withdrawals: tokens.length, refusals, tokens };
}

/** Run the scenario without and with a lock, then the distributed scenes, and print the outcomes. */
export async function runDemo(options: DemoOptions = {}): Promise<DemoResult> {
  const atms = options.atms ?? 4;
  const initial = options.initial ?? 200;
  const amount = options.amount ?? 150;
  const backend = options.backend ?? 'memory://demo';
  const write = options.write ?? ((line: string) => process.stdout.write(`${line}\n`));

  write(`ATM demo: the account holds ${initial}; ${atms} ATMs withdraw ${amount} at the same moment.`);
  write('');
  const unlocked = await withoutLock(atms, initial, amount);
  write('Without a lock:');
  write(`  withdrawals paid out: ${unlocked.withdrawals}, refused: ${unlocked.refusals}`);
  write(`  final balance: ${unlocked.finalBalance}${unlocked.finalBalance < 0 ? '   <-- NEGATIVE: every ATM saw 200 and paid' : ''}`);
  write('');
  const locked = await withLock(atms, initial, amount, backend);
  write(`With locker.lock('account:42') on ${shownUrl(backend)}:`);
  write(`  withdrawals paid out: ${locked.withdrawals}, refused: ${locked.refusals}`);
  write(`  final balance: ${locked.finalBalance}${locked.finalBalance >= 0 ? '   <-- never negative' : '   <-- NEGATIVE (a bug!)'}`);
  write(`  fencing tokens of the successful withdrawals: ${locked.tokens.map(String).join(', ') || '(none)'}`);
  if (options.scenes === false) return { unlocked, locked };
  write('');
  const processes = await atmProcesses(6, 500, amount, write);
  write('');
  // SIGSTOP is how a GC pause or a frozen VM looks from outside; Windows has no such signal.
  if (process.platform === 'win32') return { unlocked, locked, processes };
  const paused = await pausedHolder(300, write);
  return { unlocked, locked, processes, paused };
}
