/**
 * `locksmith serve --backend URL --listen HOST:PORT`: the HTTP/JSON lock service over any
 * backend (docs/serve.md). It prints `listening on http://HOST:PORT` once it serves and
 * stops on SIGINT / SIGTERM; held locks stay held (they are records in the backend).
 */
import { readFileSync } from 'node:fs';
import { isIP } from 'node:net';
import type { Command } from 'commander';
import { createLocker } from '../index.js';
import { buildServer } from '../serve/app.js';
import { recordsUrl } from '../serve/records.js';
import { chooseBackend, shownUrl } from './backend.js';
import { backendOption, type Output } from './ls.js';

interface ServeFlags {
  backend?: string;
  listen: string;
  tokens?: string;
  insecureLocal: boolean;
  tlsCert?: string;
  tlsKey?: string;
  log: boolean;
}

/** `HOST:PORT` (`[::1]:8080` for IPv6) as host and port. */
export function parseListen(text: string): { host: string; port: number } {
  const m = /^(?:\[([^\]]+)\]|([^:]+)):([0-9]{1,5})$/.exec(text.trim());
  const port = Number(m?.[3]);
  const host = m?.[1] ?? m?.[2];
  if (!m || host === undefined || port > 65_535) throw new Error(`--listen wants HOST:PORT (e.g. 127.0.0.1:7070), got '${text}'`);
  return { host, port };
}

/** True for addresses only this machine reaches. */
export function isLoopback(host: string): boolean {
  if (host === 'localhost' || host === '::1') return true;
  return isIP(host) === 4 && host.startsWith('127.');
}

/** The certificate and key of --tls-cert / --tls-key (both or neither). */
function readTls(flags: ServeFlags): { cert: Buffer; key: Buffer } | undefined {
  if (flags.tlsCert === undefined && flags.tlsKey === undefined) return undefined;
  if (flags.tlsCert === undefined || flags.tlsKey === undefined) throw new Error('--tls-cert and --tls-key go together');
  return { cert: readFileSync(flags.tlsCert), key: readFileSync(flags.tlsKey) };
}

/** Register `serve`. */
export function addServe(cmd: Command, out: Output): void {
  cmd
    .command('serve')
    .description('the HTTP/JSON lock service over a backend, with a live web view at / (docs/serve.md)')
    .addOption(backendOption())
    .option('--listen <host:port>', 'where to listen', '127.0.0.1:7070')
    .option('--tokens <file>', 'bearer tokens with scopes (JSON, docs/serve.md "Security")')
    .option('--tls-cert <file>', 'serve HTTPS with this certificate (PEM; with --tls-key)')
    .option('--tls-key <file>', 'the private key of --tls-cert (PEM)')
    .option('--insecure-local', 'serve without credentials (only on a loopback address)', false)
    .option('--log', 'log one JSON line per request (never a header or a body)', false)
    .action(async (flags: ServeFlags) => {
      const { host, port } = parseListen(flags.listen);
      const tokens = flags.tokens === undefined ? undefined : readFileSync(flags.tokens, 'utf8');
      if (tokens === undefined && !(flags.insecureLocal && isLoopback(host))) {
        throw new Error('serve needs --tokens FILE, or --insecure-local with a loopback --listen address');
      }
      const backend = chooseBackend(flags.backend);
      const locker = createLocker(backend, { name: 'locksmith-serve' });
      // The service's records on the same server under another key prefix, where that keeps them off the locks' change channel.
      const recordsAt = recordsUrl(backend);
      const records = recordsAt === undefined ? undefined : createLocker(recordsAt, { name: 'locksmith-serve' });
      const insecure = tokens === undefined;
      const tls = readTls(flags);
      const app = await buildServer({
        locker,
        ...(records ? { records } : {}),
        logger: flags.log,
        insecure,
        ...(tokens === undefined ? {} : { tokens }),
        ...(tls ? { tls } : {}),
      });
      const address = await app.listen({ host, port });
      out(`listening on ${address} (backend ${shownUrl(backend)})\n`);
      await new Promise<void>((resolve) => {
        process.once('SIGINT', resolve).once('SIGTERM', resolve);
      });
      await app.close();
      await Promise.all([locker.close(), records?.close()]);
    });
}
