/**
 * `locksmith ls [prefix]`: the locks that exist, like `ps` (lock, holder `name pid@host`,
 * held for, lease left, token, waiters). `--json` prints one JSON document; `--watch`
 * redraws the table on a terminal and streams the changes as JSON lines otherwise.
 * docs/observability.md, "The command line".
 */
import { Option, type Command } from 'commander';
import { createLocker, type Locker, type LockInfo, type WatchEvent } from '../index.js';
import { parseDuration } from './duration.js';
import { describeWho } from './status.js';

import { chooseBackend } from './backend.js';

/** Where a command's results go. */
export type Output = (text: string) => void;

/** `--backend`, or `$LOCKSMITH_BACKEND`; without either, the embedded `file://` backend, as `run` uses. */
export const backendOption = (): Option =>
  new Option('-b, --backend <url>', 'backend URL (e.g. redis://127.0.0.1:6379)').env('LOCKSMITH_BACKEND');

/** JSON with bigints (tokens) as strings. */
export const toJson = (v: unknown, indent?: number): string =>
  JSON.stringify(v, (_k, x: unknown) => (typeof x === 'bigint' ? x.toString() : x), indent);

/** A duration as `ps` would print it: 850ms, 3.2s, 4m05s, 2h10m. */
export function formatSpan(ms: number | undefined): string {
  if (ms === undefined || !Number.isFinite(ms)) return '-';
  const v = Math.max(0, ms);
  if (v < 1_000) return `${Math.round(v)}ms`;
  if (v < 60_000) return `${(v / 1_000).toFixed(1)}s`;
  const s = Math.floor(v / 1_000);
  if (s < 3_600) return `${Math.floor(s / 60)}m${String(s % 60).padStart(2, '0')}s`;
  return `${Math.floor(s / 3_600)}h${String(Math.floor((s % 3_600) / 60)).padStart(2, '0')}m`;
}

const HEAD = ['LOCK', 'KIND', 'HOLDER', 'HELD FOR', 'LEASE LEFT', 'TOKEN', 'WAITERS'] as const;

/** The rows of the table: one per holder (a free lock with waiters gets one row too). */
export function tableRows(locks: readonly LockInfo[], now: number): string[][] {
  const rows: string[][] = [];
  for (const l of locks) {
    const waiters = String(l.waiters);
    if (l.holders.length === 0)
      rows.push([l.lockId, l.kind, '-', '-', '-', l.lastToken === undefined ? '-' : String(l.lastToken), waiters]);
    l.holders.forEach((h, i) => {
      const left = h.leaseEndsAt !== undefined ? h.leaseEndsAt - now : h.expiresInMs;
      // A weighted semaphore hold says how many permits it takes: the pool's use is their sum.
      const permits = h.weight !== undefined && h.weight > 1 ? ` (${h.weight} permits)` : '';
      const who = `${describeWho(h)}${h.count > 1 ? ` ×${h.count}` : ''}${permits}`;
      const held = h.acquiredAt === undefined ? '-' : formatSpan(now - h.acquiredAt);
      rows.push([i === 0 ? l.lockId : '', i === 0 ? l.kind : '', who, held, formatSpan(left), String(h.token), i === 0 ? waiters : '']);
    });
  }
  return rows;
}

/** The `ps`-like table (columns padded to their widest cell; the waiters column last). */
export function formatTable(locks: readonly LockInfo[], now = Date.now()): string {
  const rows = [[...HEAD], ...tableRows(locks, now)];
  const widths = HEAD.map((_, c) => Math.max(...rows.map((r) => (r[c] ?? '').length)));
  const lines = rows.map((r) =>
    r
      .map((cell, c) => (c === r.length - 1 ? cell : cell.padEnd(widths[c] ?? 0)))
      .join('  ')
      .trimEnd(),
  );
  return `${lines.join('\n')}\n`;
}

/** Every lock under `prefix`, page after page. */
export async function listEverything(locker: Locker, prefix: string, signal?: AbortSignal): Promise<LockInfo[]> {
  const all: LockInfo[] = [];
  let cursor: string | undefined;
  do {
    const page = await locker.list({ prefix, limit: 1000, ...(cursor === undefined ? {} : { cursor }), ...(signal ? { signal } : {}) });
    all.push(...page.locks);
    cursor = page.cursor;
  } while (cursor !== undefined);
  return all;
}

/** How `ls` runs (the CLI's flags, plus what tests inject). */
export interface LsRun {
  readonly prefix: string;
  readonly json: boolean;
  readonly watch: boolean;
  /** Redraw on a terminal (true) or stream JSON lines (false), with `watch`. */
  readonly tty: boolean;
  readonly everyMs: number;
  readonly out: Output;
  readonly signal: AbortSignal;
}

/** One JSON line of `ls --watch` when not on a terminal. */
export function watchLine(e: WatchEvent): string {
  return `${toJson(e)}\n`;
}

/** `ls`: print once, or watch until `signal` aborts. */
export async function runLs(locker: Locker, run: LsRun): Promise<void> {
  if (run.watch && !run.tty) {
    for await (const e of locker.watch({ prefix: run.prefix, signal: run.signal, everyMs: run.everyMs })) run.out(watchLine(e));
    return;
  }
  for (;;) {
    const locks = await listEverything(locker, run.prefix, run.signal).catch((err: unknown) => {
      if (run.signal.aborted) return undefined;
      throw err;
    });
    if (!locks) return;
    const text = run.json ? `${toJson({ prefix: run.prefix, locks }, 2)}\n` : formatTable(locks);
    run.out(run.watch ? `\x1b[H\x1b[2J${text}` : text);
    if (!run.watch) return;
    const stop = await new Promise<boolean>((resolve) => {
      const t = setTimeout(() => resolve(false), run.everyMs);
      run.signal.addEventListener('abort', () => (clearTimeout(t), resolve(true)), { once: true });
    });
    if (stop) return;
  }
}

/** Register `ls` on the program. */
export function addLs(cmd: Command, out: Output): void {
  cmd
    .command('ls')
    .description('list the locks that have a holder or a waiter: holder (name pid@host), held for, lease left, token, waiters')
    .argument('[prefix]', 'only lock ids that start with this', '')
    .addOption(backendOption())
    .option('--json', 'print one JSON document', false)
    .option('-w, --watch', 'redraw on a terminal; stream changes as JSON lines otherwise (until interrupted)', false)
    .option('--every <duration>', 'with --watch: how often to look', '1s')
    .action(async (prefix: string, flags: { backend?: string; json: boolean; watch: boolean; every: string }) => {
      const everyMs = parseDuration(flags.every, '--every');
      const locker = createLocker(chooseBackend(flags.backend));
      const stop = new AbortController();
      const onSignal = (): void => stop.abort();
      process.once('SIGINT', onSignal).once('SIGTERM', onSignal);
      try {
        const tty = process.stdout.isTTY && !flags.json;
        await runLs(locker, { prefix, json: flags.json, watch: flags.watch, tty, everyMs, out, signal: stop.signal });
      } finally {
        process.off('SIGINT', onSignal).off('SIGTERM', onSignal);
        await locker.close();
      }
    });
}
