/**
 * A process that closes its locker shortly after its Cassandra node came back from a reset
 * partition exits by itself: the driver's orphaned host and late control connection
 * (docs/backends/cassandra.md, "Running it here") are shut down. Each run is a real child
 * process behind the fault proxy; before the workaround most of them stayed alive.
 */
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import { after, before, test } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { startFaultProxy, type FaultProxy } from '../../src/testing.js';
import type { RunningServer } from '../../scripts/servers/harness.js';
import { startCassandra } from '../../scripts/servers/cassandra.js';

const CHILD = fileURLToPath(new URL('./fixtures/close-after-reset.ts', import.meta.url));
/** Delays from the heal to the close: the driver is reconnecting then. */
const HEAL_TO_CLOSE_MS = [200, 250, 300, 250];
/** A process that did not exit this long after its close is kept alive by leftovers. */
const EXIT_BOUND_MS = 10_000;

let server: RunningServer | undefined;
let proxy: FaultProxy | undefined;

before(
  async () => {
    server = await startCassandra({ nodes: 1 });
    const node = server.nodes[0];
    if (!node) throw new Error('no cassandra node');
    proxy = await startFaultProxy({ targetPort: node.port });
  },
  { timeout: 600_000 },
);

after(async () => {
  await proxy?.close();
  await server?.stop();
});

/** One child: hold, reset the proxy, heal, close after `healToCloseMs`; true when it exited by itself. */
async function exitsAfterClose(healToCloseMs: number): Promise<boolean> {
  if (!proxy) throw new Error('no proxy');
  proxy.setMode('pass');
  const child = spawn(process.execPath, ['--import', 'tsx', CHILD, `cassandra://${proxy.address}/locksmith?create=true`], {
    stdio: ['pipe', 'pipe', 'inherit'],
  });
  const exited = once(child, 'exit');
  const lines = createInterface({ input: child.stdout });
  const said = (word: string): Promise<void> => new Promise((resolve) => lines.on('line', (line) => line === word && resolve()));
  try {
    await said('held');
    proxy.setMode('reset');
    await sleep(3_000);
    proxy.setMode('pass');
    await sleep(healToCloseMs);
    const closed = said('closed');
    child.stdin.end('close\n');
    await closed;
    const timer = sleep(EXIT_BOUND_MS).then(() => false);
    return await Promise.race([exited.then(() => true), timer]);
  } finally {
    if (child.exitCode === null) child.kill('SIGKILL');
  }
}

test('a locker closed while the driver reconnects after a reset partition lets its process exit', { timeout: 300_000 }, async () => {
  const results: boolean[] = [];
  for (const ms of HEAL_TO_CLOSE_MS) results.push(await exitsAfterClose(ms));
  assert.deepEqual(
    results,
    HEAL_TO_CLOSE_MS.map(() => true),
    `processes that exited by themselves, per run: ${results.join(', ')}`,
  );
});
