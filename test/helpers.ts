/** Helpers shared by every test file (one copy: conformance, engine tests, fault tests). */
import assert from 'node:assert/strict';
import { after } from 'node:test';
import { connect as netConnect, createServer, type Server, type Socket } from 'node:net';
import { setTimeout as sleep } from 'node:timers/promises';
import type { Lock, Locker } from '../src/index.js';
import type { AcquireRequest, Backend, LockState } from '../src/backend.js';

/**
 * Resolve with `lock.signal.reason` once the lock's signal aborts. Lease timers are
 * unref'd by design, so while it waits this holds a ref'd interval that keeps the test
 * process alive.
 */
export function lossOf(lock: Lock): Promise<unknown> {
  return new Promise((resolve) => {
    if (lock.signal.aborted) {
      resolve(lock.signal.reason);
      return;
    }
    const keepAlive = setInterval(() => undefined, 1_000);
    lock.signal.addEventListener(
      'abort',
      () => {
        clearInterval(keepAlive);
        resolve(lock.signal.reason);
      },
      { once: true },
    );
  });
}

/** Resolve when `locker` emits `waiting` for `lockId` (the acquisition is queued). */
export function waitingOn(locker: Locker, lockId: string): Promise<void> {
  return new Promise((resolve) => {
    const on = (e: { lockId: string }): void => {
      if (e.lockId === lockId) {
        locker.off('waiting', on);
        resolve();
      }
    };
    locker.on('waiting', on);
  });
}

/**
 * Retry `check` until it returns true (or stops throwing), at most `timeoutMs`; then fail
 * with `what`. For conditions a test waits for, never for timings it asserts.
 */
export async function eventually(what: string, check: () => boolean | Promise<boolean>, timeoutMs = 30_000, everyMs = 25): Promise<void> {
  const deadline = performance.now() + timeoutMs;
  let last: unknown;
  for (;;) {
    try {
      if (await check()) return;
      last = undefined;
    } catch (err) {
      last = err;
    }
    if (performance.now() > deadline) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`, { cause: last });
    await sleep(everyMs);
  }
}

/**
 * Start a server for the whole test file (top-level `await`) and stop it when the file's
 * tests are done. The started server is returned directly, so test registration can use it.
 */
export async function useServer<S extends { stop(): Promise<void> }>(start: () => Promise<S>): Promise<S> {
  const server = await start();
  after(async () => {
    await server.stop();
  });
  return server;
}

/** A TCP server on loopback that accepts connections and never answers (a black hole). */
export interface BlackHole {
  readonly port: number;
  close(): Promise<void>;
}

/** Start a {@link BlackHole}. */
export async function blackHole(): Promise<BlackHole> {
  const sockets = new Set<Socket>();
  const server: Server = createServer((s) => {
    sockets.add(s);
    s.on('error', () => undefined);
    s.on('close', () => sockets.delete(s));
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const address = server.address();
  const port = typeof address === 'object' && address !== null ? address.port : 0;
  return {
    port,
    close: () =>
      new Promise<void>((resolve) => {
        for (const s of sockets) s.destroy();
        server.close(() => resolve());
      }),
  };
}

/**
 * A seam request for tests that drive a backend directly (not through a locker): a waiting,
 * fair mutex request with a 10 s ttl and a fresh owner, unless `over` says otherwise.
 */
export function seamRequest<T = unknown>(lockId: string, ownerId: string, over: Partial<AcquireRequest<T>> = {}): AcquireRequest<T> {
  return {
    lockId,
    kind: 'mutex',
    permits: 1,
    weight: 1,
    ownerId,
    identity: '{"h":"test","p":0,"n":"seam"}',
    freshOwner: true,
    ttlMs: 10_000,
    fair: true,
    lockDelayMs: 0,
    wait: true,
    ticket: undefined,
    signal: new AbortController().signal,
    onLost: () => undefined,
    ...over,
  };
}

/** A TCP forwarder to one server that a test can cut off (a partition) and heal. */
export interface FaultProxy {
  readonly port: number;
  /**
   * Partition: every byte in either direction is dropped from now on and new connections
   * are accepted but never forwarded. Nothing is closed, so no side hears of it (no RST).
   */
  cut(): void;
  /** End the partition: frozen connections are closed, new ones are forwarded again. */
  heal(): void;
  close(): Promise<void>;
}

/** Start a {@link FaultProxy} on loopback in front of `targetPort`. */
export async function faultProxy(targetPort: number, targetHost = '127.0.0.1'): Promise<FaultProxy> {
  let cut = false;
  const sockets = new Set<Socket>();
  const track = (s: Socket): void => {
    sockets.add(s);
    s.on('error', () => undefined);
    s.on('close', () => sockets.delete(s));
  };
  const server: Server = createServer((downstream) => {
    track(downstream);
    if (cut) return;
    const upstream = netConnect({ host: targetHost, port: targetPort });
    track(upstream);
    const forward = (from: Socket, to: Socket): void => {
      from.on('data', (chunk: Buffer) => {
        if (!cut) to.write(chunk);
      });
      from.on('close', () => {
        if (!cut) to.destroy();
      });
    };
    forward(downstream, upstream);
    forward(upstream, downstream);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const address = server.address();
  const port = typeof address === 'object' && address !== null ? address.port : 0;
  return {
    port,
    cut: () => {
      cut = true;
    },
    heal: () => {
      cut = false;
      for (const s of sockets) s.destroy();
    },
    close: () =>
      new Promise<void>((resolve) => {
        for (const s of sockets) s.destroy();
        server.close(() => resolve());
      }),
  };
}

/**
 * Every lock under `prefix` through the seam's `list`, page after page with `limit`: each page
 * is checked to hold at most `limit` locks, and the listing must end within 10,000 pages.
 */
export async function listSeam(backend: Backend, prefix: string, limit: number): Promise<{ locks: LockState[]; pages: number }> {
  assert.ok(backend.list, `${backend.name} lists its locks`);
  const locks: LockState[] = [];
  let cursor: string | undefined;
  let pages = 0;
  do {
    const page = await backend.list({ prefix, limit, cursor, signal: new AbortController().signal });
    assert.ok(page.locks.length <= limit, `a page of ${page.locks.length} with limit ${limit}`);
    locks.push(...page.locks);
    cursor = page.cursor;
    pages += 1;
    assert.ok(pages < 10_000, 'the listing ends');
  } while (cursor !== undefined);
  return { locks, pages };
}
