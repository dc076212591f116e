/**
 * The child processes of `locksmith demo` (src/cli/demo-scenes.ts forks this module): each
 * is a separate machine's ATM or report writer meeting the others through the `file://`
 * backend (docs/backends/file.md), so the locks really cross process boundaries.
 *
 * `withdraw <dir> <atm> <amount>`: withdraw once from `<dir>/account.json` under the lock.
 * `hold <dir> <ttlMs>`: take the lock, tell the parent its token, and, when the parent asks
 * (after it was paused and resumed), send a write with that token (by then stale).
 */
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { createLocker } from '../index.js';

/** One line of the account's journal, written by the ATM that held the lock. */
export interface JournalEntry {
  readonly atm: number;
  readonly pid: number;
  readonly token: string;
  readonly paid: boolean;
  readonly balance: number;
}

/** The account file shared by the ATM processes. */
export interface AccountFile {
  readonly balance: number;
  readonly journal: readonly JournalEntry[];
}

/** Messages between the parent and a `hold` child. */
export type HoldMessage = { type: 'locked'; token: string } | { type: 'write'; token: string };

async function withdraw(dir: string, atm: number, amount: number): Promise<void> {
  const locker = createLocker(`file://${dir}`, { ttlMs: 5_000 });
  const path = join(dir, 'account.json');
  try {
    await locker.withLock('account:42', async (lock) => {
      const account = JSON.parse(readFileSync(path, 'utf8')) as AccountFile;
      // The window in which an unlocked ATM would race: the check and the debit are apart.
      await sleep(20);
      const paid = account.balance >= amount;
      const balance = paid ? account.balance - amount : account.balance;
      const entry: JournalEntry = { atm, pid: process.pid, token: String(lock.token), paid, balance };
      writeFileSync(path, JSON.stringify({ balance, journal: [...account.journal, entry] }));
    });
  } finally {
    await locker.close();
  }
}

async function hold(dir: string, ttlMs: number): Promise<void> {
  const send = (m: HoldMessage): void => void process.send?.(m);
  const locker = createLocker(`file://${dir}`, { ttlMs });
  const lock = await locker.lock('report');
  send({ type: 'locked', token: String(lock.token) });
  await new Promise<void>((resolve) => process.once('message', () => resolve()));
  // Resumed: this process still believes it holds the lock and writes with its old token.
  send({ type: 'write', token: String(lock.token) });
  await lock.release().catch(() => undefined);
  await locker.close().catch(() => undefined);
  process.disconnect?.();
}

const [mode, dir = '', a = '0', b = '0'] = process.argv.slice(2);
if (mode === 'withdraw') await withdraw(dir, Number(a), Number(b));
else if (mode === 'hold') await hold(dir, Number(a));
else throw new Error(`demo-child: unknown mode ${String(mode)}`);
