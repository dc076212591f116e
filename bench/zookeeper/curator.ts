/**
 * Apache Curator's InterProcessMutex as a matrix contender: one JVM (CuratorBench.java, run
 * in source-file mode with Debian's Curator jars, installed by the harness like the interop
 * test's peer) holds every Curator client; each matrix client is one Curator client (its own
 * session). Requests and answers are lines over the JVM's stdin/stdout: one more hop each
 * way, which Curator's figures include.
 */
import { spawn, type ChildProcessWithoutNullStreams } from 'node:child_process';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import type { BenchClient, Contender } from '../../src/bench-matrix/index.js';

const SOURCE = fileURLToPath(new URL('./CuratorBench.java', import.meta.url));

interface Pending {
  resolve(): void;
  reject(err: unknown): void;
  cancelled?: unknown;
}

/** The JVM and its line protocol. */
export class CuratorJvm {
  readonly #proc: ChildProcessWithoutNullStreams;
  readonly #pending = new Map<string, Pending>();
  #next = 0;
  readonly ready: Promise<void>;

  constructor(classpath: string, connectString: string) {
    this.#proc = spawn('java', ['-Xmx512m', '-Xss256k', '-cp', classpath, SOURCE, connectString], { stdio: 'pipe' });
    this.#proc.stderr.setEncoding('utf8');
    this.#proc.stderr.on('data', (d: string) => process.env.BENCH_DEBUG && process.stderr.write(`curator: ${d}`));
    this.ready = this.#expect('READY');
    this.#proc.on('exit', (code) => {
      for (const p of this.#pending.values()) p.reject(new Error(`the Curator JVM exited (${code ?? 'signal'})`));
      this.#pending.clear();
    });
    createInterface({ input: this.#proc.stdout }).on('line', (line) => this.#line(line.trim()));
  }

  #expect(key: string): Promise<void> {
    return new Promise((resolve, reject) => this.#pending.set(key, { resolve, reject }));
  }

  #line(line: string): void {
    const [word, id = '', ...why] = line.split(' ');
    const key = word === 'READY' ? 'READY' : `${word === 'FAILED' ? 'ACQUIRED' : word} ${id}`;
    const p = this.#pending.get(key);
    if (!p) return;
    this.#pending.delete(key);
    if (p.cancelled !== undefined) p.reject(p.cancelled);
    else if (word === 'FAILED') p.reject(new Error(`Curator: ${why.join(' ')}`));
    else p.resolve();
  }

  #send(line: string): void {
    this.#proc.stdin.write(`${line}\n`);
  }

  /** A new Curator client (session). */
  async client(): Promise<BenchClient> {
    const c = `c${++this.#next}`;
    const opened = this.#expect(`OPEN ${c}`);
    this.#send(`open ${c}`);
    await opened;
    return {
      acquire: async (lockId, o = {}) => {
        o.signal?.throwIfAborted();
        const r = `r${++this.#next}`;
        const acquired = this.#expect(`ACQUIRED ${r}`);
        const onAbort = (): void => {
          const p = this.#pending.get(`ACQUIRED ${r}`);
          if (p) p.cancelled = o.signal?.reason;
          this.#send(`cancel ${r}`);
        };
        o.signal?.addEventListener('abort', onAbort, { once: true });
        this.#send(`acquire ${c} ${r} /curator-bench/${lockId.replace(/[^\w.:-]/g, '_')}`);
        try {
          await acquired;
        } finally {
          o.signal?.removeEventListener('abort', onAbort);
        }
        return {
          release: async () => {
            const released = this.#expect(`RELEASED ${r}`);
            this.#send(`release ${r}`);
            await released;
          },
        };
      },
      close: async () => {
        const closed = this.#expect(`CLOSED ${c}`);
        this.#send(`close ${c}`);
        await closed;
      },
    };
  }

  /** End the JVM. */
  stop(): void {
    this.#proc.kill('SIGKILL');
  }
}

/** Curator's InterProcessMutex as a peer contender (no queued event: the hand-off row assumes a delay). */
export function curatorContender(jvm: CuratorJvm): Contender {
  return { name: 'Curator InterProcessMutex', peer: true, fair: true, reportsQueued: false, client: () => jvm.client() };
}
