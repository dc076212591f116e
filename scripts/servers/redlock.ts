/**
 * Redlock in the server harness: N independent redis-servers (no persistence, no
 * replication), each on its own free loopback port. A killed node restarts empty — the
 * "restart without fsync" case of docs/backends/redlock.md.
 */
import { startRedis } from './redis.js';
import type { RunningServer, ServerNode } from './harness.js';

/** Options of {@link startRedlock}. */
export interface StartRedlockOptions {
  /** Number of masters (default 5). */
  readonly count?: number;
  /** URL query appended to the `redlock://` URL, e.g. `nodeTimeoutMs=50`. */
  readonly query?: string;
}

/** Start N masters; `url` is `redlock://h1:p1,…`, `stop()` stops them all. */
export async function startRedlock(opts: StartRedlockOptions = {}): Promise<RunningServer & { readonly nodes: readonly ServerNode[] }> {
  const count = opts.count ?? 5;
  const started: Awaited<ReturnType<typeof startRedis>>[] = [];
  try {
    // One after another: the first may install the package.
    for (let i = 0; i < count; i++) started.push(await startRedis());
  } catch (err) {
    await Promise.allSettled(started.map((s) => s.stop()));
    throw err;
  }
  const nodes = started.flatMap((s) => s.nodes);
  const hosts = nodes.map((n) => `${n.host}:${n.port}`).join(',');
  return {
    engine: 'redlock',
    url: `redlock://${hosts}${opts.query ? `?${opts.query}` : ''}`,
    nodes,
    async stop() {
      await Promise.allSettled(started.map((s) => s.stop()));
    },
  };
}
