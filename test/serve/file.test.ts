/** The service over file:// (docs/serve.md): the API and election cases, and a lock's history. */
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { eventually } from '../helpers.js';
import { apiCases } from './api-cases.js';
import { electionCases } from './election-cases.js';
import { call, client, fileUrl, startService, type Service } from './service.js';

let service: Service;
before(async () => {
  service = await startService(fileUrl());
});
after(async () => {
  await service.close();
});
apiCases(() => service.base);
electionCases(() => service);

test('GET /v1/locks/{id}/history: the hand-offs this replica saw since it began watching', { timeout: 30_000 }, async () => {
  const c = client(service.base);
  const path = `/v1/locks/${encodeURIComponent('hist/a')}/history`;
  const first = await call(service.base, 'GET', path);
  assert.deepEqual([first.status, first.body.lockId, first.body.handoffs], [200, 'hist/a', []]);
  assert.equal(typeof first.body.since, 'number');
  const s = await c.session(10_000, 'historian');
  // The first request starts the replica's watch; changes before its first listing are not
  // history. Until a change of another lock shows, the watch is not in place yet.
  const warm = `/v1/locks/${encodeURIComponent('hist/warm')}/history`;
  await eventually('the watch is in place', async () => {
    const h = await c.acquire('hist/warm', { session: s });
    await c.release('hist/warm', s, h.body.token);
    return ((await call(service.base, 'GET', warm)).body.handoffs as unknown[]).length > 0;
  });
  let held = await c.acquire('hist/a', { session: s });
  const entries = async (): Promise<{ type: string; holder: string; token: string }[]> =>
    (await call(service.base, 'GET', path)).body.handoffs as { type: string; holder: string; token: string }[];
  await c.release('hist/a', s, held.body.token);
  held = await c.acquire('hist/a', { session: s });
  await eventually('acquired seen', async () => (await entries()).some((e) => e.type === 'acquired' && e.token === held.body.token));
  const last = (await entries()).at(-1);
  assert.deepEqual([last?.type, last?.holder], ['acquired', 'historian']);
  assert.equal((await call(service.base, 'GET', `/v1/locks/${'x'.repeat(300)}/history`)).status, 400);
});
