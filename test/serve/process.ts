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
  /** SIGTERM (the service closes, and a `--cpu-prof` profile is written), and wait until it is gone. */
  stop(): Promise<void>;
}

/** How the process is started beyond `serve --backend URL --listen 127.0.0.1:0`. */
export interface SpawnOptions {
  /** Node flags before the script (e.g. `--cpu-prof`). */
  readonly nodeFlags?: readonly string[];
  /** The CLI's entry point (another checkout's `src/cli/main.ts`, for before/after runs). */
  readonly main?: string;
}

/** Start `locksmith serve --backend URL --listen 127.0.0.1:0 …` and wait for its address. */
export async function spawnService(
  backend: string,
  args: readonly string[] = ['--insecure-local'],
  { nodeFlags = [], main = MAIN }: SpawnOptions = {},
): Promise<ServiceProcess> {
  // A built entry point runs as users run it, on plain Node: the tsx loader left in a built
  // service's process costs it time on every request (docs/benchmarks.md, "The lock service").
  const loader = main.endsWith('.ts') ? ['--import', 'tsx'] : [];
  const argv = [...nodeFlags, ...loader, main, 'serve', '--backend', backend, '--listen', '127.0.0.1:0', ...args];
  const child = spawn(process.execPath, argv, { stdio: ['ignore', 'pipe', 'inherit'], env: { ...process.env, NODE_OPTIONS: '' } });
  const base = await new Promise<string>((resolve, reject) => {
    const lines = createInterface({ input: child.stdout! });
    lines.on('line', (line) => {
      const m = /^listening on (\S+)/.exec(line);
      if (m?.[1]) resolve(m[1]);
    });
    child.once('exit', (code) => reject(new Error(`locksmith serve exited with ${String(code)}`)));
  });
  const end = async (signal: NodeJS.Signals): Promise<void> => {
    if (child.exitCode !== null || child.signalCode !== null) return;
    const gone = new Promise((r) => child.once('exit', r));
    child.kill(signal);
    await gone;
  };
  return { base, child, kill: () => end('SIGKILL'), stop: () => end('SIGTERM') };
}
