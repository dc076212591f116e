/**
 * A benchmark client in a second process, so that the hand-off row measures a waiter in
 * another process too (its wake-up then crosses the engine, not this process's event loop).
 * The bench script forks itself: the child finds its contender by name, opens one client and
 * runs the parent's acquire / release requests over the IPC channel, reporting when it held
 * on the machine's monotonic clock. See docs/benchmarks.md.
 */
import { fork, type ChildProcess } from 'node:child_process';
import type { BenchClient, BenchHold, Contender } from './client.js';
import { monoMs } from './latency.js';

const CHILD = 'LOCKSMITH_BENCH_CHILD';
const URL_VAR = 'LOCKSMITH_BENCH_URL';

type ToChild = { op: 'acquire'; id: number; lockId: string } | { op: 'release'; id: number } | { op: 'close' };
type ToParent =
  | { op: 'queued'; id: number }
  | { op: 'held'; id: number; at: number }
  | { op: 'released'; id: number }
  | { op: 'failed'; id: number; message: string };

/** The URL a forked child should use, when this process is one (else undefined). */
export function forkedUrl(): string | undefined {
  return process.env[CHILD] ? process.env[URL_VAR] : undefined;
}

/** Give `c` a {@link Contender.remote}: clients made by forking `script` with `url`. */
export function forkedContender(c: Contender, script: string, url: string): Contender {
  return { ...c, remote: () => forkedClient(script, c.name, url) };
}

async function forkedClient(script: string, name: string, url: string): Promise<BenchClient> {
  const child = fork(script, [], { env: { ...process.env, [CHILD]: name, [URL_VAR]: url }, execArgv: process.execArgv, stdio: 'inherit' });
  await new Promise<void>((resolve, reject) => {
    child.once('message', () => resolve());
    child.once('exit', (code) => reject(new Error(`bench child for ${name} exited (${code})`)));
  });
  let seq = 0;
  const pending = new Map<number, { resolve: (m: ToParent) => void; reject: (e: Error) => void; onQueued?: () => void }>();
  child.on('message', (m: ToParent) => {
    const p = pending.get(m.id);
    if (!p) return;
    if (m.op === 'queued') return p.onQueued?.();
    pending.delete(m.id);
    if (m.op === 'failed') p.reject(new Error(m.message));
    else p.resolve(m);
  });
  const call = (msg: ToChild & { id: number }, onQueued?: () => void): Promise<ToParent> =>
    new Promise((resolve, reject) => {
      pending.set(msg.id, { resolve, reject, ...(onQueued ? { onQueued } : {}) });
      child.send(msg);
    });
  return {
    async acquire(lockId, o = {}): Promise<BenchHold> {
      const id = ++seq;
      const got = await call({ op: 'acquire', id, lockId }, o.onQueued);
      const heldAtMs = got.op === 'held' ? got.at : monoMs();
      return { heldAtMs, release: async () => void (await call({ op: 'release', id })) };
    },
    close: () => closeChild(child),
  };
}

function closeChild(child: ChildProcess): Promise<void> {
  return new Promise((resolve) => {
    if (child.exitCode !== null) return resolve();
    const timer = setTimeout(() => child.kill(), 5_000);
    child.once('exit', () => {
      clearTimeout(timer);
      resolve();
    });
    child.send({ op: 'close' } satisfies ToChild);
  });
}

/** In a forked child: serve the parent with one client of the contender it names, then exit. */
export async function serveForked(contenders: readonly Contender[]): Promise<void> {
  const name = process.env[CHILD];
  const c = contenders.find((x) => x.name === name);
  if (!c) throw new Error(`no contender named ${name}`);
  const client = await c.client();
  const holds = new Map<number, BenchHold>();
  const send = (m: ToParent): void => void process.send?.(m);
  process.on('message', (m: ToChild) => {
    if (m.op === 'close') {
      void client.close().finally(() => process.exit(0));
    } else if (m.op === 'acquire') {
      const onQueued = (): void => send({ op: 'queued', id: m.id });
      client.acquire(m.lockId, c.reportsQueued ? { onQueued } : {}).then(
        (h) => {
          const at = monoMs();
          holds.set(m.id, h);
          send({ op: 'held', id: m.id, at });
        },
        (err: unknown) => send({ op: 'failed', id: m.id, message: String(err) }),
      );
    } else {
      const h = holds.get(m.id);
      holds.delete(m.id);
      void h?.release().then(
        () => send({ op: 'released', id: m.id }),
        (err: unknown) => send({ op: 'failed', id: m.id, message: String(err) }),
      );
    }
  });
  process.send?.({ op: 'ready' });
}
