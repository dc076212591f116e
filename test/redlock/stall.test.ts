/**
 * A client-side stall (GC, a loaded machine) must not turn replies that already arrived into
 * per-node timeouts: Redlock would then see every master "time out" at once and report a
 * quorum failure that never happened. The per-node command layer checks its deadlines after
 * the pending I/O is read.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { setTimeout as sleep } from 'node:timers/promises';
import { Redis } from 'ioredis';
import { RedisCommands } from '../../src/backends/redis-wire/commands.js';
import { RELEASE } from '../../src/backends/redlock/scripts.js';
import { startRedis } from '../../scripts/servers/redis.js';
import { useServer } from '../helpers.js';

const server = await useServer(() => startRedis());

test('a reply that arrived during an event-loop stall longer than the timeout is a reply, not a timeout', { timeout: 60_000 }, async () => {
  const u = new URL(server.url);
  const client = new Redis({ host: u.hostname, port: Number(u.port) });
  const commands = new RedisCommands(client, { timeoutMs: 100, engine: 'redlock', label: 'stall' });
  try {
    await commands.eval(RELEASE, ['k', 'i'], ['v', 'c']);
    for (let i = 0; i < 5; i++) {
      const pending = commands.eval(RELEASE, ['k', 'i'], ['v', 'c']);
      const until = performance.now() + 300;
      while (performance.now() < until) {
        // A synchronous stall: the reply arrives in the socket meanwhile.
      }
      assert.equal(await pending, 0);
      // Stalls come and go: the loop runs freely between two.
      await sleep(5);
    }
  } finally {
    commands.close();
    client.disconnect();
  }
});
