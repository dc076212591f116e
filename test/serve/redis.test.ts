/** The service over a real Redis (docs/serve.md): the API and election cases, and where its records live. */
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { startRedis } from '../../scripts/servers/redis.js';
import { createLocker } from '../../src/index.js';
import { recordsUrl, RESERVED_PREFIX } from '../../src/serve/records.js';
import { useServer } from '../helpers.js';
import { apiCases } from './api-cases.js';
import { electionCases } from './election-cases.js';
import { client, startService, type Service } from './service.js';
import { stateCases } from './stream-cases.js';

const redis = await useServer(() => startRedis());
let service: Service;
before(async () => {
  service = await startService(redis.url);
});
after(async () => {
  await service.close();
});
apiCases(() => service.base);
electionCases(() => service);
stateCases(() => service);

test("the service's records are kept under their own key prefix: the locks' change channel carries none of them", async () => {
  const backend = await service.locker.backend();
  const stop = new AbortController();
  const heard: string[] = [];
  let subscribed!: () => void;
  const ready = new Promise<void>((resolve) => (subscribed = resolve));
  const end = 'apart/zz-end';
  const listening = (async () => {
    for await (const id of backend.changes?.({ prefix: '', signal: stop.signal }) ?? []) {
      if (id === null) subscribed();
      else heard.push(id);
      if (id === end) stop.abort();
    }
  })();
  await ready;
  const api = client(service.base);
  const s = await api.session(5_000, 'apart');
  const got = await api.acquire('apart/a', { session: s });
  assert.equal(got.status, 200);
  assert.equal((await api.keepalive(s)).status, 200);
  const records = createLocker(recordsUrl(redis.url) ?? 'memory://');
  const index = await records.inspect(`${RESERVED_PREFIX}i/${s}`);
  await records.close();
  assert.equal((await api.release('apart/a', s, got.body.token)).status, 200);
  assert.equal((await api.end(s)).status, 200);
  // Notices on one channel arrive in order: once this one is heard, every earlier one was.
  await (await service.locker.lock(end)).release();
  await listening;
  assert.ok(heard.includes('apart/a'), heard.join(', '));
  assert.deepEqual(
    heard.filter((id) => id.startsWith(RESERVED_PREFIX)),
    [],
  );
  assert.ok(index.holders.length >= 2, 'the session and its hold are recorded under the records prefix');
});
