/**
 * The API a user trusts, on the embedded backend: mistyped option keys
 * from JavaScript are rejected, the wait bound has one name and an alias that cannot
 * disagree, a lock serializes (`toJSON`, the token's `toString()`), `remainingMs()` counts
 * down to 0, and every public option documents its default.
 */
import assert from 'node:assert/strict';
import { after, test } from 'node:test';
import { readFile } from 'node:fs/promises';
import { resolve } from 'node:path';
import ts from 'typescript';
import { createLocker, InvalidArgumentError, Lock, type Locker, type LockOptions } from '../../src/index.js';

const root = resolve(import.meta.dirname, '../..');
const lockers: Locker[] = [];
after(async () => {
  await Promise.all(lockers.map((l) => l.close()));
});
function locker(): Locker {
  const l = createLocker(`memory://api-${lockers.length}`);
  lockers.push(l);
  return l;
}

/** The InvalidArgumentError `p` rejects with, checked to name `argument`. */
async function rejectsArgument(p: Promise<unknown>, argument: string): Promise<void> {
  await assert.rejects(p, (err: unknown) => {
    assert.ok(err instanceof InvalidArgumentError, String(err));
    assert.equal(err.argument, argument);
    return true;
  });
}

test('a mistyped option key from JavaScript is an InvalidArgumentError naming it, on every call', async () => {
  const l = locker();
  // What a JavaScript caller can pass: an object the types would refuse.
  const typo = { timeout: 1_000 } as LockOptions;
  await rejectsArgument(l.lock('k', typo), 'timeout');
  await rejectsArgument(l.tryLock('k', typo), 'timeout');
  await rejectsArgument(
    l.withLock('k', () => 1, typo),
    'timeout',
  );
  await rejectsArgument(l.readWriteLock('k').read(typo), 'timeout');
  await rejectsArgument(l.semaphore('s', { permits: 2 }).acquire(typo), 'timeout');
  assert.throws(
    () => createLocker('memory://', { ttl: 5_000 } as object),
    (err: unknown) => err instanceof InvalidArgumentError && err.argument === 'ttl' && err.message.includes('ttlMs'),
  );
  const free = await l.tryLock('k');
  assert.ok(free, 'nothing was left held by the rejected calls');
  await free.release();
});

test('timeoutMs and waitMs are one bound: either name works, both only when equal', async () => {
  const l = locker();
  const held = await l.lock('bound');
  await rejectsArgument(l.lock('bound', { timeoutMs: 10, waitMs: 20 }), 'waitMs');
  assert.equal(await l.tryLock('bound', { timeoutMs: 10 }), null);
  assert.equal(await l.tryLock('bound', { waitMs: 10, timeoutMs: 10 }), null);
  await held.release();
});

test('a lock serializes: JSON.stringify gives the token as a decimal string; token.toString() is the same; toString() for logs', async () => {
  const lock = await locker().lock('json', { ttlMs: 30_000 });
  const json = JSON.parse(JSON.stringify({ lock })) as { lock: Record<string, unknown> };
  assert.deepEqual(Object.keys(json.lock).sort(), ['held', 'kind', 'lockId', 'ownerId', 'remainingMs', 'token']);
  assert.equal(json.lock.token, lock.token.toString());
  assert.equal(BigInt(String(json.lock.token)), lock.token);
  assert.equal(json.lock.lockId, 'json');
  assert.equal(json.lock.kind, 'mutex');
  assert.equal(json.lock.held, true);
  assert.equal(`${lock}`, `lock 'json' (mutex, token ${lock.token}, held)`);
  assert.throws(() => JSON.stringify(lock.token), TypeError, 'a bare bigint has no JSON form, as documented');
  await lock.release();
  assert.equal(lock.toJSON().held, false);
  assert.match(String(lock), /not held\)$/);
});

test('remainingMs() is positive and at most the ttl while held, and 0 after release', async () => {
  const lock: Lock = await locker().lock('remaining', { ttlMs: 30_000 });
  const left = lock.remainingMs();
  assert.ok(left > 0 && left <= 30_000, `remainingMs ${left}`);
  await lock.release();
  assert.equal(lock.remainingMs(), 0);
});

/** Property names of the exported `*Options` interfaces of `file` that lack a `@default` tag. */
async function undocumentedDefaults(file: string): Promise<string[]> {
  const text = await readFile(resolve(root, file), 'utf8');
  const source = ts.createSourceFile(file, text, ts.ScriptTarget.ES2022, true);
  const missing: string[] = [];
  for (const statement of source.statements) {
    if (!ts.isInterfaceDeclaration(statement) || !statement.name.text.endsWith('Options')) continue;
    if (!statement.modifiers?.some((m) => m.kind === ts.SyntaxKind.ExportKeyword)) continue;
    for (const member of statement.members) {
      if (!ts.isPropertySignature(member)) continue;
      const tags = ts.getJSDocTags(member).map((t) => t.tagName.text);
      if (!tags.includes('default')) missing.push(`${statement.name.text}.${member.name.getText(source)}`);
    }
  }
  return missing;
}

test('every public option documents its default (@default)', async () => {
  const files = ['src/options.ts', 'src/election.ts', 'src/metrics.ts', 'src/fencing.ts'];
  const missing = (await Promise.all(files.map(undocumentedDefaults))).flat();
  assert.deepEqual(missing, []);
  // The check sees the interfaces at all (it would pass vacuously otherwise).
  assert.ok((await readFile(resolve(root, 'src/options.ts'), 'utf8')).includes('export interface LockOptions'));
});
