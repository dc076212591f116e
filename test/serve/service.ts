/**
 * The service under test: started in-process on a free loopback port over a backend URL,
 * and a small fetch() client (docs/serve.md).
 */
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createLocker, type Locker } from '../../src/index.js';
import { buildServer, type ServeOptions } from '../../src/serve/app.js';
import { recordsUrl } from '../../src/serve/records.js';

/** A running service. */
export interface Service {
  readonly base: string;
  readonly locker: Locker;
  close(): Promise<void>;
}

/** A fresh file:// backend directory. */
export function fileUrl(): string {
  return `file://${mkdtempSync(join(tmpdir(), 'locksmith-serve-'))}`;
}

/** Start the service over `url` on 127.0.0.1:0. */
export async function startService(url: string, options: Omit<ServeOptions, 'locker'> = {}): Promise<Service> {
  const locker = createLocker(url, { name: 'serve-test' });
  // As the CLI does: the records apart from the locks where the engine allows (records.ts).
  const at = recordsUrl(url);
  const records = at === undefined ? undefined : createLocker(at, { name: 'serve-test' });
  const app = await buildServer({ insecure: options.tokens === undefined, ...(records ? { records } : {}), ...options, locker });
  const address = await app.listen({ host: '127.0.0.1', port: 0 });
  return {
    base: address,
    locker,
    close: async () => {
      await app.close();
      await Promise.all([locker.close(), records?.close()]);
    },
  };
}

/** One JSON call: status and parsed body. */
export async function call(
  base: string,
  method: string,
  path: string,
  body?: unknown,
  headers: Record<string, string> = {},
  signal?: AbortSignal,
): Promise<{ status: number; body: Record<string, unknown> }> {
  const init: RequestInit = { method, headers: { ...headers }, ...(signal ? { signal } : {}) };
  if (body !== undefined) {
    init.body = typeof body === 'string' ? body : JSON.stringify(body);
    (init.headers as Record<string, string>)['content-type'] = 'application/json';
  }
  const res = await fetch(base + path, init);
  const text = await res.text();
  let parsed: Record<string, unknown>;
  try {
    parsed = JSON.parse(text) as Record<string, unknown>;
  } catch {
    parsed = { text };
  }
  return { status: res.status, body: parsed };
}

/** A client of one service: sessions and locks by name. */
export function client(base: string, headers: Record<string, string> = {}) {
  const lockPath = (id: string, action = ''): string => `/v1/locks/${encodeURIComponent(id)}${action ? `/${action}` : ''}`;
  return {
    session: async (ttlMs = 5_000, name?: string): Promise<string> => {
      const r = await call(base, 'POST', '/v1/sessions', { ttlMs, ...(name ? { name } : {}) }, headers);
      if (r.status !== 200) throw new Error(`session: ${r.status} ${JSON.stringify(r.body)}`);
      return r.body.id as string;
    },
    acquire: (id: string, body: Record<string, unknown>, signal?: AbortSignal) =>
      call(base, 'POST', lockPath(id, 'acquire'), body, headers, signal),
    release: (id: string, session: string, token: unknown) => call(base, 'POST', lockPath(id, 'release'), { session, token }, headers),
    extend: (id: string, session: string, token: unknown) => call(base, 'POST', lockPath(id, 'extend'), { session, token }, headers),
    inspect: (id: string) => call(base, 'GET', lockPath(id), undefined, headers),
    keepalive: (session: string) => call(base, 'POST', `/v1/sessions/${session}/keepalive`, undefined, headers),
    end: (session: string) => call(base, 'DELETE', `/v1/sessions/${session}`, undefined, headers),
  };
}

/** One Server-Sent Event. */
export interface Sse {
  readonly event: string;
  readonly data: Record<string, unknown>;
}

/** The events of `GET path` until `signal` aborts. */
export async function* sse(base: string, path: string, signal: AbortSignal, headers: Record<string, string> = {}): AsyncGenerator<Sse> {
  const res = await fetch(base + path, { signal, headers });
  if (!res.ok || !res.body) throw new Error(`events: ${res.status} ${await res.text()}`);
  const decoder = new TextDecoder();
  let buffer = '';
  try {
    for await (const chunk of res.body) {
      buffer += decoder.decode(chunk as Uint8Array, { stream: true });
      let end: number;
      while ((end = buffer.indexOf('\n\n')) >= 0) {
        const block = buffer.slice(0, end);
        buffer = buffer.slice(end + 2);
        const event = /^event: (.*)$/m.exec(block)?.[1];
        const data = /^data: (.*)$/m.exec(block)?.[1];
        if (event !== undefined && data !== undefined) yield { event, data: JSON.parse(data) as Record<string, unknown> };
      }
    }
  } catch (err) {
    if (!signal.aborted) throw err;
  }
}
