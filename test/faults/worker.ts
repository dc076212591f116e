/**
 * A fault-test worker process: `tsx worker.ts <backendUrl> <lockId> <ops> <ttlMs> <storePort> <criticalMs>`.
 * Loops lock → fenced read → critical section → fenced write of value+1 → release, and
 * prints one JSON line with what it did. Like a naive client (or one hit by a GC pause
 * between its check and its write) it does not look at lock.signal before writing: the
 * fence is what must catch it.
 */
import { connect, type Socket } from 'node:net';
import { setTimeout as sleep } from 'node:timers/promises';
import { BackendUnavailableError, createLocker } from '../../src/index.js';
import type { StoreReply } from './fenced-store.js';

const [url, lockId, opsArg, ttlArg, portArg, criticalArg] = process.argv.slice(2);
if (!url || !lockId || !opsArg || !ttlArg || !portArg || !criticalArg) {
  process.stderr.write('usage: worker.ts <url> <lockId> <ops> <ttlMs> <storePort> <criticalMs>\n');
  process.exit(64);
}
const ops = Number(opsArg);
const ttlMs = Number(ttlArg);
const criticalMs = Number(criticalArg);

const socket: Socket = connect(Number(portArg), '127.0.0.1');
await new Promise<void>((resolve, reject) => socket.once('connect', resolve).once('error', reject));
socket.setEncoding('utf8');
let nextId = 1;
const waiting = new Map<number, (r: StoreReply) => void>();
let buf = '';
socket.on('data', (chunk: string) => {
  buf += chunk;
  let nl: number;
  while ((nl = buf.indexOf('\n')) >= 0) {
    const reply = JSON.parse(buf.slice(0, nl)) as StoreReply;
    buf = buf.slice(nl + 1);
    waiting.get(reply.id)?.(reply);
    waiting.delete(reply.id);
  }
});
const call = (req: Record<string, unknown>): Promise<StoreReply> =>
  new Promise((resolve) => {
    const id = nextId++;
    waiting.set(id, resolve);
    socket.write(`${JSON.stringify({ ...req, id, pid: process.pid })}\n`);
  });

const locker = createLocker(url, { ttlMs });
let committed = 0;
let rejected = 0;
let unavailable = 0;
for (let i = 0; i < ops; i++) {
  let lock;
  try {
    lock = await locker.lock(lockId, { timeoutMs: 120_000 });
  } catch (err) {
    // A paused waiter can come back to an expired session (ZooKeeper): a typed error, then retry.
    if (!(err instanceof BackendUnavailableError) || unavailable >= 20) throw err;
    unavailable += 1;
    i -= 1;
    continue;
  }
  const token = String(lock.token);
  const read = await call({ op: 'read', token });
  if (read.ok && read.value !== undefined) {
    if (criticalMs > 0) await sleep(criticalMs);
    const write = await call({ op: 'write', token, value: read.value + 1 });
    if (write.ok) committed += 1;
    else rejected += 1;
  } else {
    rejected += 1;
  }
  await lock.release().catch(() => undefined);
}
await locker.close();
socket.end();
process.stdout.write(`${JSON.stringify({ committed, rejected, unavailable })}\n`);
