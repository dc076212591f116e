/**
 * `locksmith serve` as a child process, through the real command line (docs/serve.md): for
 * the examples in other languages and for killing a replica.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';

const MAIN = fileURLToPath(new URL('../../src/cli/main.ts', import.meta.url));

/** A service process. */
export interface ServiceProcess {
  readonly base: string;
  readonly child: ChildProcess;
  /** SIGKILL, and wait until it is gone. */
  kill(): Promise<void>;
}

/** Start `locksmith serve --backend URL --listen 127.0.0.1:0 …` and wait for its address. */
export async function spawnService(backend: string, args: readonly string[] = ['--insecure-local']): Promise<ServiceProcess> {
  const child = spawn(process.execPath, ['--import', 'tsx', MAIN, 'serve', '--backend', backend, '--listen', '127.0.0.1:0', ...args], {
    stdio: ['ignore', 'pipe', 'inherit'],
    env: { ...process.env, NODE_OPTIONS: '' },
  });
  const base = await new Promise<string>((resolve, reject) => {
    const lines = createInterface({ input: child.stdout! });
    lines.on('line', (line) => {
      const m = /^listening on (\S+)/.exec(line);
      if (m?.[1]) resolve(m[1]);
    });
    child.once('exit', (code) => reject(new Error(`locksmith serve exited with ${String(code)}`)));
  });
  return {
    base,
    child,
    kill: async () => {
      if (child.exitCode !== null || child.signalCode !== null) return;
      const gone = new Promise((r) => child.once('exit', r));
      child.kill('SIGKILL');
      await gone;
    },
  };
}
