/**
 * A locker in another process, for the conformance cases about other processes:
 * `child.ts '<json ChildConfig>'`, spawned by test/conformance/children.ts. `hold` takes the
 * lock; `wait` queues behind its holder. It reports on stdout, one JSON line each, when it
 * waits (`waiting`), when it holds (`held`, with the token) and when it let go (`released`),
 * then exits. It lets go on a line on stdin, on SIGTERM, and when stdin ends (the test
 * process is gone), so that it never outlives the test.
 */
import { createInterface } from 'node:readline';
import { createLocker, type Lock } from '../../src/index.js';

/** What a test asks of a child. */
export interface ChildConfig {
  readonly url: string;
  readonly lockId: string;
  readonly name: string;
  readonly action: 'hold' | 'wait';
  readonly fair?: boolean;
  readonly meta?: Record<string, string>;
}

/** One line a child writes on stdout. */
export type ChildReport =
  | { readonly type: 'waiting'; readonly pid: number }
  | { readonly type: 'held'; readonly pid: number; readonly token: string }
  | { readonly type: 'released'; readonly pid: number };

const config = JSON.parse(process.argv[2] ?? '{}') as ChildConfig;
const report = (r: ChildReport): void => void process.stdout.write(`${JSON.stringify(r)}\n`);
const locker = createLocker(config.url, { name: config.name, ...(config.meta ? { meta: config.meta } : {}) });
const stop = new AbortController();
let lock: Lock | undefined;

async function letGo(): Promise<void> {
  if (stop.signal.aborted) return;
  stop.abort(new Error('told to let go'));
  await lock?.release().catch(() => undefined);
  await locker.close().catch(() => undefined);
  report({ type: 'released', pid: process.pid });
  process.exit(0);
}

createInterface({ input: process.stdin })
  .once('line', () => void letGo())
  .once('close', () => void letGo());
process.once('SIGTERM', () => void letGo());

locker.on('waiting', (e: { lockId: string }) => {
  if (e.lockId === config.lockId) report({ type: 'waiting', pid: process.pid });
});
try {
  lock = await locker.lock(config.lockId, { signal: stop.signal, timeoutMs: 120_000, ...(config.fair ? { fair: true } : {}) });
  report({ type: 'held', pid: process.pid, token: lock.token.toString() });
} catch (err) {
  // A wait cut short by letGo() is the normal end of a `wait` child.
  if (!stop.signal.aborted) throw err;
}
