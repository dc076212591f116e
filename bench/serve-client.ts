/**
 * What bench/serve.ts needs to drive `locksmith serve` as a client in another process would:
 * the service started as its own process through the command line, a keep-alive HTTP/JSON
 * client (node:http, the lightest Node has), and CPU time read from /proc.
 */
import { readFileSync } from 'node:fs';
import { Agent, request } from 'node:http';
import { spawnService, type ServiceProcess } from '../test/serve/process.js';

export type { ServiceProcess } from '../test/serve/process.js';

/** Start `locksmith serve --backend URL` on a free loopback port (extra Node flags first, e.g. --cpu-prof; `main`: another checkout's CLI). */
export function startServiceProcess(backend: string, nodeFlags: readonly string[] = [], main?: string): Promise<ServiceProcess> {
  return spawnService(backend, ['--insecure-local'], { nodeFlags, ...(main === undefined ? {} : { main }) });
}

/** CPU time (user + system) of process `pid` so far, in ms, from /proc/<pid>/stat. */
export function cpuMsOf(pid: number): number {
  const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
  // Fields after the command (which may hold spaces) in parentheses: utime is the 14th, stime the 15th.
  const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  const ticks = Number(fields[11]) + Number(fields[12]);
  return (ticks * 1000) / 100; // USER_HZ is 100 on Linux
}

/** A keep-alive JSON client of one service. */
export class Http {
  readonly #agent = new Agent({ keepAlive: true, maxSockets: 2048 });
  readonly #url: URL;
  constructor(base: string) {
    this.#url = new URL(base);
  }

  /** One call; resolves with the status and the parsed body. */
  call(method: string, path: string, body?: unknown): Promise<{ status: number; body: Record<string, unknown> }> {
    const data = body === undefined ? undefined : JSON.stringify(body);
    return new Promise((resolve, reject) => {
      const req = request(
        {
          agent: this.#agent,
          host: this.#url.hostname,
          port: this.#url.port,
          method,
          path,
          headers: data === undefined ? {} : { 'content-type': 'application/json', 'content-length': Buffer.byteLength(data) },
        },
        (res) => {
          const chunks: Buffer[] = [];
          res.on('data', (c: Buffer) => chunks.push(c));
          res.on('end', () =>
            resolve({ status: res.statusCode ?? 0, body: JSON.parse(Buffer.concat(chunks).toString() || '{}') as Record<string, unknown> }),
          );
          res.on('error', reject);
        },
      );
      req.on('error', reject);
      req.end(data);
    });
  }

  /** Open a session of `ttlMs`; its id. */
  async session(ttlMs: number): Promise<string> {
    const r = await this.call('POST', '/v1/sessions', { ttlMs });
    if (r.status !== 200) throw new Error(`session: ${r.status} ${JSON.stringify(r.body)}`);
    return r.body.id as string;
  }

  /** Acquire `lockId` for `session` (waitMs 0: one attempt); the token, or undefined when refused. */
  async acquire(lockId: string, session: string, waitMs = 0): Promise<string | undefined> {
    const r = await this.call('POST', `/v1/locks/${encodeURIComponent(lockId)}/acquire`, { session, waitMs });
    if (r.status === 200) return r.body.token as string;
    if (r.status === 409) return undefined;
    throw new Error(`acquire: ${r.status} ${JSON.stringify(r.body)}`);
  }

  async release(lockId: string, session: string, token: string): Promise<void> {
    const r = await this.call('POST', `/v1/locks/${encodeURIComponent(lockId)}/release`, { session, token });
    if (r.status !== 200) throw new Error(`release: ${r.status} ${JSON.stringify(r.body)}`);
  }

  close(): void {
    this.#agent.destroy();
  }
}
