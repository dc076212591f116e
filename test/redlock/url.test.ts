/**
 * `redlock://` URLs: parameters checked, hosts listed, credentials never shown; a quorum that
 * cannot be reached at connect time is a QuorumError naming every master. No server needed:
 * nothing listens on the ports used here.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { freePorts } from '../../scripts/servers/harness.js';
import { createLocker, InvalidArgumentError, QuorumError } from '../../src/index.js';
import { redlockOptions } from '../../src/backends/redlock/index.js';
import { encodeHostList } from '../../src/backends/kit.js';

const parse = (raw: string): ReturnType<typeof redlockOptions> => redlockOptions(new URL(encodeHostList(raw)));

test('redlock URL: one client per host, shared credentials and database, parameters checked', () => {
  const o = parse('redlock://u:s3cret@a:7001,b:7002,c/2?nodeTimeoutMs=50&maxExtensions=3&driftFactor=0.02');
  assert.deepEqual(
    o.clients.map((c) => `${c.host}:${c.port}/${c.db}`),
    ['a:7001/2', 'b:7002/2', 'c:6379/2'],
  );
  assert.ok(o.clients.every((c) => c.password === 's3cret' && c.username === 'u'));
  assert.deepEqual(o.backend.labels, ['a:7001', 'b:7002', 'c:6379']);
  assert.equal(o.backend.nodeTimeoutMs, 50);
  assert.equal(o.backend.maxExtensions, 3);
  assert.equal(o.backend.driftFactor, 0.02);
  assert.throws(() => parse('redlock://a:1,b:2?bogus=1'), InvalidArgumentError);
  assert.throws(() => parse('redlock://a:1,b:2?driftFactor=2'), InvalidArgumentError);
  assert.throws(() => parse('redlock://a:1,b:2/x'), InvalidArgumentError);
  assert.throws(() => parse('redlock://a:1,b:2?nodeTimeoutMs=0'), InvalidArgumentError);
});

test('redlock: no majority reachable at connect is a QuorumError naming every master, without the password', async () => {
  const ports = await freePorts(3);
  const locker = createLocker(`redlock://u:pw-s3cret@${ports.map((p) => `127.0.0.1:${p}`).join(',')}`);
  const err = await locker.lock('x', { timeoutMs: 30_000 }).then(
    () => assert.fail('granted without any master'),
    (e: unknown) => e,
  );
  assert.ok(err instanceof QuorumError, String(err));
  assert.deepEqual(
    err.nodes.map((n) => [n.node, n.outcome]),
    ports.map((p) => [`127.0.0.1:${p}`, 'error']),
  );
  assert.ok(!err.message.includes('pw-s3cret'), err.message);
  assert.ok(err.message.includes('ECONNREFUSED'), err.message);
  await locker.close();
});
