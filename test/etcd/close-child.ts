/**
 * Child process of close.test.ts: an etcd locker pointed at a server that accepts and never
 * answers (argv[2]: its port) tries a lock, gives up, and closes; then nothing may keep the
 * process alive. A watchdog that does not itself keep it alive exits with status 3 (and
 * prints what is still open) if the process is still there 800 ms after `close()`: the
 * package's own close left a channel still connecting to a one-second `waitForReady`, due
 * after the watchdog.
 */
import { createLocker, LockTimeoutError } from '../../src/index.js';

const port = process.argv[2];
const locker = createLocker(`etcd://127.0.0.1:${port}`, { connectTimeoutMs: 60_000 });
try {
  await locker.lock('close-child', { timeoutMs: 300 });
} catch (err) {
  if (!(err instanceof LockTimeoutError)) throw err;
}
await locker.close();
setTimeout(() => {
  process.stdout.write(`still alive after close: ${process.getActiveResourcesInfo().join(', ')}\n`);
  process.exit(3);
}, 800).unref();
