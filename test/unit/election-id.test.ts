/**
 * The default election participant id names the machine (`os.hostname()`) and the process,
 * so `leader()` tells an operator where the leader runs, and stays an id every backend
 * stores: no `#`, no NUL, no lone surrogate, at most 200 UTF-8 bytes.
 */
import assert from 'node:assert/strict';
import { hostname } from 'node:os';
import { test } from 'node:test';
import { createLocker } from '../../src/index.js';
import { defaultParticipantId } from '../../src/election.js';

test('the default participant id is hostname:pid, whatever HOSTNAME says', async () => {
  const saved = process.env['HOSTNAME'];
  process.env['HOSTNAME'] = 'not-this-machine';
  await using locker = createLocker('memory://');
  try {
    const election = locker.election('default-id');
    assert.equal(election.id, `${hostname()}:${process.pid}`);
    const term = await election.campaign();
    assert.ok(term.token > 0n);
    assert.equal((await election.leader())?.id, `${hostname()}:${process.pid}`);
    await term.resign();
  } finally {
    if (saved === undefined) delete process.env['HOSTNAME'];
    else process.env['HOSTNAME'] = saved;
  }
});

test('a host name no backend could store still gives a valid id', async () => {
  await using locker = createLocker('memory://');
  const cases: [string, (id: string) => void][] = [
    ['', (id) => assert.equal(id, 'localhost:42')],
    ['a#b\u0000c', (id) => assert.equal(id, 'a_b_c:42')],
    ['x\ud800y', (id) => assert.equal(id, 'x_y:42')],
    ['h'.repeat(500), (id) => assert.ok(id.endsWith(':42') && Buffer.byteLength(id) <= 200)],
    ['é'.repeat(300), (id) => assert.ok(id.endsWith(':42') && Buffer.byteLength(id) <= 200)],
    ['😀'.repeat(120), (id) => assert.ok(id.endsWith(':42') && Buffer.byteLength(id) <= 200 && !/\p{Cs}/u.test(id))],
  ];
  for (const [host, check] of cases) {
    const id = defaultParticipantId(host, 42);
    check(id);
    // Accepted as an explicit id too: the election validates it like any other.
    assert.equal(locker.election('valid', { id }).id, id);
  }
});
