/**
 * Helpers of the file backend's tests: a throw-away lock directory and child processes
 * (test/file/child.ts) with an IPC channel.
 */
import { fork, type ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { after } from 'node:test';
import { fileURLToPath, pathToFileURL } from 'node:url';
import type { ChildConfig, ChildMessage } from './child.js';

const here = dirname(fileURLToPath(import.meta.url));
const children = new Set<ChildProcess>();

after(() => {
  for (const c of children) {
    // A stopped child cannot die of SIGKILL until it runs again on some systems: wake it first.
    c.kill('SIGCONT');
    c.kill('SIGKILL');
  }
});

/** A fresh lock directory (removed after the file's tests) and its `file:` URL. */
export function lockDirectory(label: string): { dir: string; url: string } {
  const dir = mkdtempSync(join(tmpdir(), `locksmith-${label}-`));
  after(() => rmSync(dir, { recursive: true, force: true }));
  return { dir, url: pathToFileURL(dir).href };
}

/** A child process running `config` (killed after the file's tests if still alive). */
export function spawnChild(config: ChildConfig, env: NodeJS.ProcessEnv = process.env): ChildProcess {
  const child = fork(join(here, 'child.ts'), [JSON.stringify(config)], { execArgv: ['--import', 'tsx'], stdio: 'inherit', env });
  children.add(child);
  child.once('exit', () => children.delete(child));
  return child;
}

/** The next message of `type` from `child` (rejects if it exits first). */
export function nextMessage<T extends ChildMessage['type']>(child: ChildProcess, type: T): Promise<Extract<ChildMessage, { type: T }>> {
  return new Promise((resolve, reject) => {
    const onMessage = (m: ChildMessage): void => {
      if (m.type !== type) return;
      child.off('message', onMessage);
      child.off('exit', onExit);
      resolve(m as Extract<ChildMessage, { type: T }>);
    };
    const onExit = (code: number | null, signal: string | null): void => {
      child.off('message', onMessage);
      reject(new Error(`child exited (${code ?? signal}) before sending '${type}'`));
    };
    child.on('message', onMessage);
    child.once('exit', onExit);
  });
}

/** Resolves when `child` has exited (at once if it already has). */
export function exited(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return Promise.resolve();
  return new Promise((resolve) => child.once('exit', () => resolve()));
}
