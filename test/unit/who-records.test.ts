/**
 * The holder records the Redis and Redlock backends keep built (src/backends/redis-wire/keys.ts,
 * src/backends/redlock/keys.ts): one cache per backend, right for every identity that asks,
 * in whatever order they ask.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { LockKeyCache, readWho, whoRecord, WhoRecords } from '../../src/backends/redis-wire/keys.js';
import { RedlockKeyCache } from '../../src/backends/redlock/keys.js';

const identities = ['{"h":"a","p":1,"n":"one"}', '{"h":"b","p":2,"n":"two"}', '{"h":"c","p":3,"n":"three"}'];
const ids = ['plain', 'x{braced}y'];

/** The asks of identities taking turns (1 2 1 2 …, then 3 and back), at each id. */
function* turns(): Generator<[string, string]> {
  for (const i of [0, 1, 0, 1, 2, 0, 2, 1, 1, 0]) for (const id of ids) yield [id, identities[i] ?? ''];
}

test('whoRecord reads back as the identity, with the lock id when its keys cannot give it back', () => {
  assert.deepEqual(readWho(whoRecord('plain', 'me')), { identity: 'me' });
  assert.deepEqual(readWho(whoRecord('x{braced}y', 'me')), { lockId: 'x{braced}y', identity: 'me' });
});

test('the record caches give each identity its own record, whatever the order of the asks', () => {
  const caches: [string, (lockId: string, identity: string) => string][] = [];
  const who = new WhoRecords();
  const keys = new LockKeyCache('p:');
  const redlock = new RedlockKeyCache('p:');
  caches.push(['WhoRecords', (l, i) => who.of(l, i)], ['LockKeyCache', (l, i) => keys.who(l, i)]);
  caches.push(['RedlockKeyCache', (l, i) => redlock.who(l, i)]);
  for (const [name, of] of caches) {
    for (const [lockId, identity] of turns())
      assert.equal(of(lockId, identity), whoRecord(lockId, identity), `${name} ${lockId} ${identity}`);
  }
});

test('two record caches share nothing: each backend keeps its own', () => {
  const [one, two] = [new WhoRecords(), new WhoRecords()];
  for (const [lockId, identity] of turns()) {
    const other = identities.find((i) => i !== identity) ?? '';
    assert.equal(one.of(lockId, identity), whoRecord(lockId, identity));
    assert.equal(two.of(lockId, other), whoRecord(lockId, other));
  }
});

test('a record cache stays right past its bound (many lockers over one backend)', () => {
  const who = new WhoRecords();
  for (let round = 0; round < 2; round++) {
    for (let n = 0; n < 200; n++) assert.equal(who.of('plain', `id-${n}`), `:id-${n}`);
  }
});
