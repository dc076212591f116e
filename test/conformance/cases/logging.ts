import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { format } from 'node:util';
import { test } from 'node:test';
import debug from 'debug';
import { waitingOn } from '../../helpers.js';
import { T, type SuiteContext } from '../suite.js';

/**
 * `DEBUG=locksmith*`: the engine's own namespace says what its round trips did (an attempt
 * granted, one contended, a waiter woken, a release) with the lock id, and no line shows the
 * URL's password or an identity's `meta` (docs/observability.md, "Logging").
 */
export function loggingCases(ctx: SuiteContext): void {
  test('DEBUG logging: the backend namespace shows attempts, a wake-up and a release, never a password or meta', T, () =>
    backendNamespaceLogs(ctx),
  );
}

/** Run `body` with every locksmith namespace on, writing into the returned lines. */
export async function captured(body: () => Promise<void>): Promise<string[]> {
  const lines: string[] = [];
  const before = debug.disable();
  const sink = debug.log;
  debug.log = (...args: unknown[]) => lines.push(format(...args));
  debug.enable('locksmith:*');
  try {
    await body();
  } finally {
    debug.log = sink;
    debug.disable();
    if (before) debug.enable(before);
  }
  return lines;
}

async function backendNamespaceLogs(ctx: SuiteContext): Promise<void> {
  const meta = `meta-${randomBytes(8).toString('hex')}`;
  const holder = ctx.client({ meta: { note: meta } });
  const waiter = ctx.client({ meta: { note: meta } });
  const lockId = ctx.id('logging');
  const name = (await holder.backend()).name;
  const lines = await captured(async () => {
    const held = await holder.lock(lockId, { ttlMs: 10_000 });
    const queued = waitingOn(waiter, lockId);
    const second = waiter.lock(lockId, { ttlMs: 10_000, timeoutMs: 60_000 });
    await queued;
    await held.release();
    await (await second).release();
  });
  const mine = lines.filter((l) => l.includes(`locksmith:backend:${name} `) && l.includes(lockId));
  const shown = `\n${mine.join('\n')}`;
  assert.ok(
    mine.some((l) => /attempt mutex granted token \d+/.test(l)),
    `no granted attempt logged:${shown}`,
  );
  assert.ok(
    mine.some((l) => /attempt mutex contended/.test(l)),
    `no contended attempt logged:${shown}`,
  );
  assert.ok(
    mine.some((l) => /woken by (notification|poll) after/.test(l)),
    `no wake-up logged:${shown}`,
  );
  assert.ok(
    mine.some((l) => /release token \d+ released in/.test(l)),
    `no release logged:${shown}`,
  );
  for (const line of lines) {
    assert.ok(!line.includes(meta), `a log line shows the meta value: ${line}`);
    if (ctx.target.secret !== undefined) assert.ok(!line.includes(ctx.target.secret), `a log line shows the password: ${line}`);
  }
}
