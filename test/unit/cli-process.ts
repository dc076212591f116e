/**
 * The real `locksmith` command in a child process (through tsx, from the sources), for the
 * CLI tests that need what only a process has: its exit status, its stderr, signals, kill -9.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { resolve } from 'node:path';

const MAIN = resolve(import.meta.dirname, '../../src/cli/main.ts');

/** What a finished `locksmith` printed and how it ended. */
export interface CliResult {
  readonly code: number | null;
  readonly signal: NodeJS.Signals | null;
  readonly stdout: string;
  readonly stderr: string;
}

/** Start `locksmith args…` (stdin closed); `env` is added to this process's environment. */
export function startCli(args: readonly string[], env: Record<string, string | undefined> = {}): ChildProcess {
  return spawn(process.execPath, ['--import', 'tsx', MAIN, ...args], {
    env: { ...process.env, ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
}

/** Collect a started process's output until it exits. */
export function finished(child: ChildProcess): Promise<CliResult> {
  let stdout = '';
  let stderr = '';
  child.stdout?.on('data', (d: Buffer) => (stdout += d.toString('utf8')));
  child.stderr?.on('data', (d: Buffer) => (stderr += d.toString('utf8')));
  return new Promise((done, fail) => {
    child.once('error', fail);
    child.once('close', (code, signal) => done({ code, signal, stdout, stderr }));
  });
}

/** Run `locksmith args…` to its end. */
export function cli(args: readonly string[], env: Record<string, string | undefined> = {}): Promise<CliResult> {
  return finished(startCli(args, env));
}
