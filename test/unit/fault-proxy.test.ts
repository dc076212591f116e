/**
 * The fault proxy and the fenced store of `locksmith-dlm/testing`, against a plain TCP echo
 * server: every mode switched at run time, and the store's fencing and history per mode.
 */
import assert from 'node:assert/strict';
import { after, test } from 'node:test';
import { connect, createServer, type Socket } from 'node:net';
import { setTimeout as sleep } from 'node:timers/promises';
import { once } from 'node:events';
import { connectFencedStore, startFaultProxy, startFencedStore } from '../../src/testing.js';
import { InvalidArgumentError, StaleTokenError } from '../../src/errors.js';
import { eventually } from '../helpers.js';

const echoSockets = new Set<Socket>();
const echo = createServer((s) => {
  echoSockets.add(s);
  s.on('error', () => undefined);
  s.on('close', () => echoSockets.delete(s));
  s.pipe(s);
});
await new Promise<void>((resolve) => echo.listen(0, '127.0.0.1', resolve));
const echoPort = (echo.address() as { port: number }).port;
after(() => {
  for (const s of echoSockets) s.destroy();
  echo.close();
});

/** A client socket that collects what it receives. */
async function client(port: number): Promise<{ socket: Socket; received: () => string; closed: Promise<unknown> }> {
  const socket = connect(port, '127.0.0.1');
  let got = '';
  socket.setEncoding('utf8');
  socket.on('data', (d: string) => (got += d));
  socket.on('error', () => undefined);
  const closed = new Promise((resolve) => socket.once('close', resolve));
  await once(socket, 'connect');
  return { socket, received: () => got, closed };
}

test('pass forwards both ways', async () => {
  const proxy = await startFaultProxy({ targetPort: echoPort });
  try {
    const c = await client(proxy.port);
    c.socket.write('hello');
    await eventually('the echo', () => c.received() === 'hello', 5_000);
    assert.equal(proxy.connections, 1);
    assert.equal(proxy.address, `127.0.0.1:${proxy.port}`);
    c.socket.destroy();
  } finally {
    await proxy.close();
  }
});

test('blackhole keeps the socket open and forwards nothing; pass delivers the held bytes', async () => {
  const proxy = await startFaultProxy({ targetPort: echoPort });
  try {
    const c = await client(proxy.port);
    proxy.setMode('blackhole');
    c.socket.write('held');
    await sleep(300);
    assert.equal(c.received(), '');
    assert.equal(c.socket.destroyed, false);
    assert.equal(proxy.connections, 1);
    // New connections are accepted too, and hear nothing.
    const late = await client(proxy.port);
    late.socket.write('x');
    await sleep(100);
    assert.equal(late.received(), '');
    proxy.setMode('pass');
    await eventually('the held bytes', () => c.received() === 'held' && late.received() === 'x', 5_000);
    c.socket.destroy();
    late.socket.destroy();
  } finally {
    await proxy.close();
  }
});

test('reset destroys open connections and refuses new ones until pass', async () => {
  const proxy = await startFaultProxy({ targetPort: echoPort });
  try {
    const c = await client(proxy.port);
    c.socket.write('a');
    await eventually('the echo', () => c.received() === 'a', 5_000);
    proxy.setMode('reset');
    await c.closed;
    assert.equal(proxy.connections, 0);
    const refused = connect(proxy.port, '127.0.0.1');
    refused.on('error', () => undefined);
    await new Promise((resolve) => refused.once('close', resolve));
    assert.equal(proxy.connections, 0);
    proxy.setMode('pass');
    const again = await client(proxy.port);
    again.socket.write('b');
    await eventually('the echo after reset', () => again.received() === 'b', 5_000);
    again.socket.destroy();
  } finally {
    await proxy.close();
  }
});

test('latency delays every chunk in both directions and keeps their order', async () => {
  const proxy = await startFaultProxy({ targetPort: echoPort, mode: 'latency', latencyMs: 150 });
  try {
    const c = await client(proxy.port);
    const sent = performance.now();
    for (const part of ['1', '2', '3', '4']) c.socket.write(part);
    await eventually('the delayed echo', () => c.received() === '1234', 10_000, 5);
    // One delay up and one down: timers never fire early, so this lower bound always holds.
    assert.ok(performance.now() - sent >= 2 * 150 - 5, `round trip ${performance.now() - sent} ms`);
    proxy.setMode('pass');
    c.socket.write('5');
    await eventually('the echo after latency', () => c.received() === '12345', 5_000);
    c.socket.destroy();
  } finally {
    await proxy.close();
  }
});

test('bad modes and delays are typed errors; close is idempotent', async () => {
  const proxy = await startFaultProxy({ targetPort: echoPort });
  assert.throws(() => proxy.setMode('drop' as 'pass'), InvalidArgumentError);
  assert.throws(() => proxy.setMode('latency', -1), InvalidArgumentError);
  await Promise.all([proxy.close(), proxy.close()]);
  await assert.rejects(startFaultProxy({ targetPort: echoPort, latencyMs: Number.NaN }), InvalidArgumentError);
});

test('fenced store: a read+write fence refuses the stale read-modify-write; history keeps the serial order', async () => {
  const store = await startFencedStore({ mode: 'reads-and-writes' });
  const a = await connectFencedStore(store.port, 'a');
  const b = await connectFencedStore(store.port, 'b');
  try {
    await a.begin(33n);
    assert.equal(await a.read(33n), 0);
    assert.equal(await b.read(34n), 0);
    await assert.rejects(a.write(33n, 1), StaleTokenError);
    await b.write(34n, 1);
    await a.note('done');
    assert.equal(store.value(), 1);
    assert.equal(store.accepted(), 1);
    assert.equal(store.rejected(), 1);
    assert.equal(store.currentHolder(), 'b');
    const h = store.history();
    assert.deepEqual(
      h.map((e) => `${e.client}:${e.op}:${e.ok}`),
      ['a:begin:true', 'a:read:true', 'b:read:true', 'a:write:false', 'b:write:true', 'a:note:true'],
    );
    assert.deepEqual(
      h.map((e) => e.seq),
      [0, 1, 2, 3, 4, 5],
    );
  } finally {
    a.close();
    b.close();
    await store.close();
  }
});

test('fenced store: write-only fencing and no fencing accept the stale write (the losses they show)', async () => {
  for (const mode of ['writes', 'none'] as const) {
    const store = await startFencedStore({ mode });
    const a = await connectFencedStore(store.port, 'a');
    const b = await connectFencedStore(store.port, 'b');
    try {
      const ra = await a.read(33n);
      const rb = await b.read(34n);
      await a.write(33n, ra + 1);
      await b.write(34n, rb + 1);
      assert.equal(store.accepted(), 2, mode);
      assert.equal(store.value(), 1, `${mode}: two acknowledged increments, one survives`);
      if (mode === 'writes') await assert.rejects(a.write(33n, 5), StaleTokenError);
    } finally {
      a.close();
      b.close();
      await store.close();
    }
  }
  await assert.rejects(startFencedStore({ mode: 'sometimes' as 'none' }), InvalidArgumentError);
});

test('fenced store client: calls on a closed store reject instead of hanging', async () => {
  const store = await startFencedStore();
  const a = await connectFencedStore(store.port, 'a');
  await store.close();
  await assert.rejects(a.read(1n));
  a.close();
});

test('fenced store: a malformed request closes that connection and nothing else', async () => {
  const store = await startFencedStore();
  try {
    const raw = connect(store.port, '127.0.0.1');
    raw.on('error', () => undefined);
    await once(raw, 'connect');
    const closed = new Promise((resolve) => raw.once('close', resolve));
    raw.write('{"id":1,"op":"read","client":"x","token":"not-a-number"}\n');
    await closed;
    const good = await connectFencedStore(store.port, 'good');
    assert.equal(await good.read(1n), 0);
    good.close();
  } finally {
    await store.close();
  }
});
