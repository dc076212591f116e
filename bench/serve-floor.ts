/**
 * The floor under row (a) of bench/serve.ts (docs/benchmarks.md, "The lock service"): a bare
 * `node:http` server that runs the library for each request, with no Fastify, no sessions, no
 * schemas and no markers. It answers the routes rows (a) and (b) send (a session, acquire
 * with `waitMs`, release), with the service's paths and bodies, so the same client measures
 * both: what is left between this and the library is the HTTP exchanges on loopback, which
 * no service over HTTP can avoid.
 *
 * Started like the service (`<this file> serve --backend URL --listen 127.0.0.1:0 …`), it
 * prints the same `listening on URL` line.
 */
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { createLocker, type Lock } from '../src/index.js';

const arg = (name: string): string => process.argv[process.argv.indexOf(name) + 1] ?? '';
const locker = createLocker(arg('--backend'));
const held = new Map<string, Lock>();
let sessions = 0;
let acquisitions = 0;

function answer(res: ServerResponse, status: number, body: unknown): void {
  const text = JSON.stringify(body);
  res.writeHead(status, { 'content-type': 'application/json; charset=utf-8', 'content-length': Buffer.byteLength(text) });
  res.end(text);
}

function route(req: IncomingMessage, res: ServerResponse, body: Record<string, unknown>): void {
  const url = req.url ?? '';
  const fail = (err: unknown): void => answer(res, 500, { code: 'INTERNAL', message: String(err) });
  if (url === '/v1/sessions') return answer(res, 200, { id: `s${++sessions}`, ttlMs: body.ttlMs });
  const lockId = decodeURIComponent(url.split('/')[3] ?? '');
  if (url.endsWith('/acquire')) {
    // Each acquisition its own owner, as the service's `<session>.<request>`: two sessions are two holders.
    const options = { owner: `${String(body.session)}.${++acquisitions}`, waitMs: Number(body.waitMs ?? 0) };
    locker.tryLock(lockId, options).then((lock) => {
      if (!lock) return answer(res, 409, { code: 'LOCK_TIMEOUT', message: 'held' });
      held.set(lock.token.toString(), lock);
      answer(res, 200, { token: lock.token.toString(), leaseEndsAt: Date.now() + lock.remainingMs() });
    }, fail);
  } else if (url.endsWith('/release')) {
    const lock = held.get(String(body.token));
    held.delete(String(body.token));
    if (!lock) return answer(res, 409, { code: 'LOCK_NOT_HELD', message: 'not held' });
    lock.release().then(() => answer(res, 200, {}), fail);
  } else answer(res, 404, { code: 'NOT_FOUND', message: url });
}

const server = createServer((req, res) => {
  const chunks: Buffer[] = [];
  req.on('data', (c: Buffer) => chunks.push(c));
  req.on('end', () => route(req, res, JSON.parse(Buffer.concat(chunks).toString() || '{}') as Record<string, unknown>));
});
const [host, port] = arg('--listen').split(':');
server.listen(Number(port), host, () => {
  console.log(`listening on http://${host}:${(server.address() as AddressInfo).port}`);
});
process.on('SIGTERM', () => {
  server.close();
  void locker.close().then(() => process.exit(0));
});
