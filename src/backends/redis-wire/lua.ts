/**
 * Loading the Lua scripts of the Redis backends from the `.lua` files next to this module
 * (`lua/`, copied into `dist/` by `npm run build`). A line `--@include <name>` is replaced by
 * the text of `lua/<name>.lua`, so the shared helpers live in one file and every script is
 * sent whole (a script cannot load another on the server). See docs/backends/redis.md,
 * "Lua scripts".
 */
import { createHash } from 'node:crypto';
import { readFileSync } from 'node:fs';

/** A script with its SHA-1, for EVALSHA. */
export interface LuaScript {
  readonly name: string;
  readonly source: string;
  readonly sha: string;
}

/** Where the `.lua` files are, beside this module in `src/` and in `dist/` alike. */
const LUA_DIR = new URL('./lua/', import.meta.url);

const INCLUDE = /^--@include ([a-z][a-z0-9-]*)[ \t]*$/gm;

/** The text of `lua/<file>.lua` as written, without expanding its includes. */
export function luaFile(file: string): string {
  return readFileSync(new URL(`${file}.lua`, LUA_DIR), 'utf8');
}

/** The text of `lua/<file>.lua` with every `--@include` expanded (an include cycle throws). */
export function luaSource(file: string, including: readonly string[] = []): string {
  if (including.includes(file)) throw new Error(`Lua include cycle: ${[...including, file].join(' -> ')}`);
  return luaFile(file).replace(INCLUDE, (_line, name: string) => luaSource(name, [...including, file]).replace(/\n$/, ''));
}

/** The script built from `lua/<file>.lua` (default: its name), named `name` in errors. */
export function loadScript(name: string, file: string = name): LuaScript {
  const source = luaSource(file);
  return { name, source, sha: createHash('sha1').update(source).digest('hex') };
}
