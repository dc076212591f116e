/**
 * `locksmith serve --tls-cert --tls-key` serves HTTPS (docs/serve.md, "Security"): a client
 * that trusts the certificate gets its answers, a plain HTTP request gets none.
 */
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync } from 'node:fs';
import { request } from 'node:https';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, test } from 'node:test';
import { spawnService, type ServiceProcess } from './process.js';
import { fileUrl } from './service.js';

const T = { timeout: 60_000 };
let service: ServiceProcess | undefined;
after(async () => {
  await service?.kill();
});

function get(url: string, ca: Buffer): Promise<{ status: number; body: string }> {
  return new Promise((resolve, reject) => {
    const req = request(url, { ca }, (res) => {
      let body = '';
      res.on('data', (c: Buffer) => (body += c.toString()));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, body }));
    });
    req.on('error', reject);
    req.end();
  });
}

test('HTTPS with --tls-cert and --tls-key; plain HTTP is refused', T, async () => {
  const dir = mkdtempSync(join(tmpdir(), 'locksmith-tls-'));
  const [cert, key] = [join(dir, 'cert.pem'), join(dir, 'key.pem')];
  execFileSync(
    'openssl',
    [
      'req',
      '-x509',
      '-newkey',
      'rsa:2048',
      '-nodes',
      '-days',
      '1',
      '-subj',
      '/CN=127.0.0.1',
      '-addext',
      'subjectAltName=IP:127.0.0.1',
      '-keyout',
      key,
      '-out',
      cert,
    ],
    { stdio: 'ignore' },
  );
  service = await spawnService(fileUrl(), ['--insecure-local', '--tls-cert', cert, '--tls-key', key]);
  assert.match(service.base, /^https:\/\//);
  const r = await get(`${service.base}/healthz`, readFileSync(cert));
  assert.equal(r.status, 200);
  assert.equal(JSON.parse(r.body).ok, true);
  await assert.rejects(fetch(service.base.replace('https:', 'http:') + '/healthz'));
});
