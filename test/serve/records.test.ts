/**
 * Records of the service (docs/serve.md, "Design"): a roll renews a record whatever holders
 * earlier rolls left, and never leaves it without a holder; where the records are kept.
 */
import assert from 'node:assert/strict';
import { after, test } from 'node:test';
import { createLocker } from '../../src/index.js';
import { encodeIdentity, Records, recordsUrl, RESERVED_PREFIX } from '../../src/serve/records.js';
import { client, fileUrl, startService } from './service.js';

const locker = createLocker(fileUrl());
after(() => locker.close());

const owners = async (id: string): Promise<string[]> => (await locker.inspect(id)).holders.map((h) => h.ownerId);

test('a roll of a full record (two rolls at once left two holders) removes the older, writes, keeps one', async () => {
  const records = new Records(await locker.backend());
  const id = 'locksmith-serve/s/test-full';
  const identity = encodeIdentity('t', { t: 1 });
  assert.equal(await records.write(id, 'a', 30_000, identity), true);
  assert.equal(await records.write(id, 'b', 30_000, identity), true);
  const before = await owners(id);
  assert.equal(before.length, 2);
  await records.roll(id, 'c', 30_000, identity, before);
  const afterRoll = await owners(id);
  assert.equal(afterRoll.length, 1);
  assert.ok(afterRoll[0]?.startsWith('c~'));
  await records.roll(id, 'd', 30_000, identity, afterRoll);
  assert.deepEqual(
    (await owners(id)).map((o) => o.slice(0, 2)),
    ['d~'],
  );
});

test('the records URL: the same Redis under the key prefix `<prefix>serve:`; none for engines without one channel per prefix', () => {
  assert.equal(recordsUrl('redis://127.0.0.1:6379'), 'redis://127.0.0.1:6379?prefix=locksmith%3Aserve%3A');
  assert.equal(
    recordsUrl('rediss://:pw@h:1/2?prefix=app:&commandTimeoutMs=5'),
    'rediss://:pw@h:1/2?prefix=app%3Aserve%3A&commandTimeoutMs=5',
  );
  assert.equal(
    recordsUrl('redis-sentinel://s1:26379,s2:26379/main'),
    'redis-sentinel://s1:26379,s2:26379/main?prefix=locksmith%3Aserve%3A',
  );
  for (const url of ['memory://', fileUrl(), 'postgres://u@h/db', 'redlock://a:1,b:2,c:3']) assert.equal(recordsUrl(url), undefined);
});

test('records given their own store (ServeOptions.records): sessions and markers there, the locks alone in theirs', async () => {
  const records = createLocker(fileUrl());
  const service = await startService(fileUrl(), { records });
  try {
    const api = client(service.base);
    const s = await api.session(5_000, 'apart');
    const got = await api.acquire('apart/a', { session: s });
    assert.equal(got.status, 200);
    assert.equal((await api.keepalive(s)).body.holds, 1);
    const mine = await records.list({ prefix: RESERVED_PREFIX, limit: 1000 });
    assert.ok(
      mine.locks.some((l) => l.holders.length > 0),
      'the session is recorded in the records store',
    );
    const theirs = await service.locker.list({ prefix: '', limit: 1000 });
    assert.deepEqual(
      theirs.locks.filter((l) => l.holders.length > 0).map((l) => l.lockId),
      ['apart/a'],
    );
    assert.equal((await api.release('apart/a', s, got.body.token)).status, 200);
    assert.equal((await api.end(s)).status, 200);
    assert.equal((await service.locker.inspect('apart/a')).holders.length, 0);
  } finally {
    await service.close();
    await records.close();
  }
});
