/**
 * A fault-test client of the service, as a process (`tsx fault-worker.ts '<json>'`): any
 * language's HTTP client, written in TypeScript. It opens a session, keeps it alive at a third
 * of its ttl, and loops acquire → begin → fenced read → critical section → fenced write of
 * value+1 → end → release until its stdin closes (the runner's stop). Like the library's fault
 * worker (test/faults/worker.ts) it does not look at its lease before writing: the fence must
 * catch a late write. It talks to the replicas through its own fault proxies, moving to the
 * next replica when one does not answer (a client of a replicated service).
 *
 * After each `end` it notes whether its lease was surely still valid, for the checker's
 * double-grant count: valid until (send time of the acquire or of the last keepalive that kept
 * the hold) + ttl, a lower bound of the lease's end as the backend counts it.
 */
import { setTimeout as sleep } from 'node:timers/promises';
import { StaleTokenError } from '../../src/index.js';
import { connectFencedStore } from '../../src/testing.js';

/** What the runner passes to a worker. */
export interface ServeWorkerConfig {
  /** The service's replicas, each through this worker's proxy. */
  readonly bases: readonly string[];
  readonly lockId: string;
  readonly client: string;
  readonly storePort: number;
  readonly ttlMs: number;
  readonly criticalMs: number;
}

const config = JSON.parse(process.argv[2] ?? '{}') as ServeWorkerConfig;
const store = await connectFencedStore(config.storePort, config.client);
process.on('unhandledRejection', (reason) => {
  console.error(`${config.client}: unhandled rejection:`, reason);
  void store.note(`unhandled rejection: ${String(reason)}`).catch(() => undefined);
});
let stopping = false;
process.stdin.on('data', () => undefined);
process.stdin.on('end', () => (stopping = true));
process.stdin.on('close', () => (stopping = true));

let replica = Number(/\d+$/.exec(config.client)?.[0] ?? 0) % config.bases.length;
const path = `/v1/locks/${encodeURIComponent(config.lockId)}`;

/** One call to the current replica; a network error, a timeout or a 503 moves to the next. */
async function call(
  method: string,
  route: string,
  body: unknown,
  timeoutMs: number,
): Promise<{ status: number; body: Record<string, unknown> }> {
  const base = config.bases[replica] ?? '';
  try {
    const res = await fetch(base + route, {
      method,
      signal: AbortSignal.timeout(timeoutMs),
      ...(body === undefined ? {} : { body: JSON.stringify(body), headers: { 'content-type': 'application/json' } }),
    });
    const parsed = (await res.json()) as Record<string, unknown>;
    if (res.status === 503) replica = (replica + 1) % config.bases.length;
    return { status: res.status, body: parsed };
  } catch {
    replica = (replica + 1) % config.bases.length;
    return { status: 0, body: {} };
  }
}

/** The session and the hold it has now (what the keepalive loop keeps). */
const state: { session?: string; token?: string; validUntil: number } = { validUntil: 0 };

async function openSession(): Promise<string> {
  for (;;) {
    const r = await call('POST', '/v1/sessions', { ttlMs: config.ttlMs, name: config.client }, config.ttlMs);
    if (r.status === 200) return r.body.id as string;
    await sleep(50);
  }
}

/** Keep the session alive every ttl/3; a keepalive that kept the hold moves its validity on. */
async function keepAlive(): Promise<void> {
  while (!stopping) {
    await sleep(config.ttlMs / 3);
    const { session, token } = state;
    if (session === undefined) continue;
    const sent = Date.now();
    const r = await call('POST', `/v1/sessions/${session}/keepalive`, undefined, config.ttlMs / 3);
    if (r.status === 404 && state.session === session) state.session = undefined;
    const lost = (r.body.lost as { token: string }[] | undefined) ?? [];
    if (r.status === 200 && token !== undefined && state.token === token && !lost.some((l) => l.token === token))
      state.validUntil = Math.max(state.validUntil, sent + config.ttlMs);
  }
}

/** Acquire in long polls of ttl/2 (so that send + ttl bounds the lease from below well after the answer). */
async function acquire(session: string): Promise<string | undefined> {
  const requestId = `r${Math.random().toString(36).slice(2, 12)}`;
  for (;;) {
    if (stopping) return undefined;
    const sent = Date.now();
    const r = await call('POST', `${path}/acquire`, { session, waitMs: config.ttlMs / 2, requestId }, config.ttlMs);
    if (r.status === 200) {
      state.token = r.body.token as string;
      state.validUntil = sent + config.ttlMs;
      return state.token;
    }
    if (r.status === 404) return undefined; // the session ended: open another
    if (r.status !== 409) {
      await store.note(`acquire failed: ${r.status} ${String(r.body.code ?? 'network')}`).catch(() => undefined);
      await sleep(50);
    }
  }
}

async function increment(token: bigint): Promise<void> {
  await store.begin(token);
  try {
    const value = await store.read(token);
    if (config.criticalMs > 0) await sleep(config.criticalMs);
    await store.write(token, value + 1);
  } catch (err) {
    if (!(err instanceof StaleTokenError)) throw err;
  } finally {
    await store.end(token);
    await store.note(`${Date.now() < state.validUntil ? 'valid' : 'lost'} ${token}`);
  }
}

/** Release, again while no replica answers (the hold would stay while the session lives). */
async function release(session: string, token: string): Promise<void> {
  for (let i = 0; i < 20; i++) {
    const r = await call('POST', `${path}/release`, { session, token }, config.ttlMs);
    if (r.status !== 0 && r.status !== 503) return;
    await sleep(50);
  }
}

const keeper = keepAlive();
while (!stopping) {
  state.session ??= await openSession();
  const token = await acquire(state.session);
  if (token === undefined) {
    state.session = undefined;
    continue;
  }
  await increment(BigInt(token));
  const session = state.session;
  state.token = undefined;
  if (session !== undefined) await release(session, token);
}
await keeper;
if (state.session !== undefined) await call('DELETE', `/v1/sessions/${state.session}`, undefined, config.ttlMs);
await store.note('closing');
store.close();
