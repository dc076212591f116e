/**
 * The Lua of both Redis backends lives in `.lua` files (src/backends/redis-wire/lua): each file
 * stays short enough to read, compiles on a real Redis as written, and every script built
 * from them (with its includes) compiles to the SHA the command layer sends with EVALSHA.
 */
import assert from 'node:assert/strict';
import { readdirSync } from 'node:fs';
import { after, before, test } from 'node:test';
import { Redis } from 'ioredis';
import { luaFile, type LuaScript } from '../../src/backends/redis-wire/lua.js';
import * as redisScripts from '../../src/backends/redis/scripts.js';
import * as redlockScripts from '../../src/backends/redlock/scripts.js';
import { startRedis } from '../../scripts/servers/redis.js';
import type { RunningServer } from '../../scripts/servers/harness.js';

const T = { timeout: 60_000 };
/** Longest .lua file, in lines: a script longer than this is split into included parts. */
const MAX_LINES = 120;

const FILES = readdirSync(new URL('../../src/backends/redis-wire/lua/', import.meta.url))
  .filter((f) => f.endsWith('.lua'))
  .map((f) => f.slice(0, -'.lua'.length));

const SCRIPTS: LuaScript[] = [...Object.values(redisScripts), ...Object.values(redlockScripts)].filter(
  (v): v is LuaScript => typeof v === 'object' && v !== null && 'sha' in v,
);

let server: RunningServer;
let client: Redis;

before(async () => {
  server = await startRedis();
  client = new Redis(server.url);
});

after(async () => {
  client.disconnect();
  await server.stop();
});

test(`every .lua file is at most ${MAX_LINES} lines`, () => {
  assert.ok(FILES.length >= 10, `found ${FILES.length} .lua files`);
  for (const f of FILES) {
    const lines = luaFile(f).split('\n').length - 1;
    assert.ok(lines <= MAX_LINES, `${f}.lua has ${lines} lines (at most ${MAX_LINES})`);
  }
});

test('every .lua file passes the Lua lint: a header comment, locals only, no tabs or trailing blanks, used by a script', () => {
  const used = new Set(SCRIPTS.map((s) => s.name));
  for (const f of FILES) for (const m of luaFile(f).matchAll(/^--@include ([a-z0-9-]+)$/gm)) used.add(m[1] ?? '');
  for (const f of FILES) {
    const text = luaFile(f);
    assert.match(text, /^-- \S/, `${f}.lua starts with a comment saying what it is`);
    // Redis refuses a global at run time only: catch a forgotten `local` here.
    assert.doesNotMatch(text, /^function /m, `${f}.lua defines a global function`);
    assert.doesNotMatch(text, /\t|[ \t]$/m, `${f}.lua has a tab or a trailing blank`);
    assert.ok(used.has(f), `${f}.lua is neither a script nor included by one`);
  }
});

test('every .lua file compiles on Redis as written (SCRIPT LOAD)', T, async () => {
  for (const f of FILES) {
    const sha = await client.script('LOAD', luaFile(f));
    assert.match(String(sha), /^[0-9a-f]{40}$/, `${f}.lua`);
  }
  // The check can fail: a syntax error is refused at load.
  await assert.rejects(client.script('LOAD', 'local x = = 1'), /Error compiling script/);
});

test('every script compiles to the SHA the command layer sends', T, async () => {
  assert.equal(SCRIPTS.length, 16);
  for (const s of SCRIPTS) {
    assert.doesNotMatch(s.source, /^--@include/m, `${s.name}: an include was left unexpanded`);
    assert.equal(await client.script('LOAD', s.source), s.sha, s.name);
  }
});
