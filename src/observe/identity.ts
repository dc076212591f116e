/**
 * Who holds and who waits: every hold and queue entry carries the host, pid, application
 * name and an optional small `meta` object of the locker that wrote it, so that an operator
 * can answer "which process holds this lock?" (docs/observability.md, "Identity").
 *
 * The identity is encoded ONCE per locker into compact JSON and handed to the backend as an
 * opaque string with every acquisition (`AcquireRequest.identity`): backends store it beside
 * what they write anyway and never parse it.
 */
import { existsSync, readFileSync } from 'node:fs';
import { hostname } from 'node:os';
import { dirname, join } from 'node:path';
import { MAX_IDENTITY_BYTES } from '../backend.js';
import { InvalidArgumentError } from '../errors.js';

/** A JSON value, as `meta` may hold. */
export type JsonValue = string | number | boolean | null | readonly JsonValue[] | { readonly [key: string]: JsonValue };

/** Who holds or waits, as listings and `locksmith ls` show it (`name pid@host`). */
export interface Identity {
  readonly host: string;
  readonly pid: number;
  /** The application's name: the locker's `name` option, else the nearest package.json's, else the process title. */
  readonly name: string;
  /** The locker's `meta` option, when given. */
  readonly meta?: { readonly [key: string]: JsonValue };
}

/** Upper bound on `meta`'s JSON length in UTF-8 bytes (the rest of the identity needs the remainder). */
export const MAX_META_BYTES = 512;
/** Upper bound on `name`'s UTF-8 length. */
export const MAX_NAME_BYTES = 128;

/** The compact wire form: short keys keep every hold's extra bytes small. */
interface WireIdentity {
  readonly h: string;
  readonly p: number;
  readonly n: string;
  readonly m?: { readonly [key: string]: JsonValue };
}

/** Validate `name` / `meta` and build the locker's identity and its encoded form. */
export function makeIdentity(name: string | undefined, meta: unknown): { identity: Identity; encoded: string } {
  const resolvedName = name === undefined ? defaultName() : validateName(name);
  const checkedMeta = meta === undefined ? undefined : validateMeta(meta);
  const identity: Identity = {
    host: hostname(),
    pid: process.pid,
    name: resolvedName,
    ...(checkedMeta === undefined ? {} : { meta: checkedMeta }),
  };
  const wire: WireIdentity = { h: identity.host, p: identity.pid, n: identity.name, ...(checkedMeta ? { m: checkedMeta } : {}) };
  const encoded = JSON.stringify(wire);
  if (Buffer.byteLength(encoded) > MAX_IDENTITY_BYTES) {
    throw new InvalidArgumentError('meta', `the identity (host, name, meta) must fit in ${MAX_IDENTITY_BYTES} bytes`);
  }
  return { identity, encoded };
}

/** The identity a backend handed back; undefined when absent or unreadable (an older writer). */
export function decodeIdentity(encoded: string | undefined): Identity | undefined {
  if (encoded === undefined || encoded === '') return undefined;
  try {
    const w = JSON.parse(encoded) as Partial<WireIdentity>;
    if (typeof w.h !== 'string' || typeof w.p !== 'number' || typeof w.n !== 'string') return undefined;
    return { host: w.h, pid: w.p, name: w.n, ...(isPlainObject(w.m) ? { meta: w.m } : {}) };
  } catch {
    return undefined;
  }
}

/** `name pid@host`, the way `ps`-like listings show a holder. */
export function formatIdentity(identity: Identity | undefined, fallback = '?'): string {
  return identity ? `${identity.name} ${identity.pid}@${identity.host}` : fallback;
}

function validateName(name: unknown): string {
  if (typeof name !== 'string' || name === '') throw new InvalidArgumentError('name', 'name must be a non-empty string');
  if (Buffer.byteLength(name) > MAX_NAME_BYTES) throw new InvalidArgumentError('name', `name must be at most ${MAX_NAME_BYTES} bytes`);
  return name;
}

function validateMeta(meta: unknown): { readonly [key: string]: JsonValue } {
  if (!isPlainObject(meta)) throw new InvalidArgumentError('meta', 'meta must be a plain JSON object');
  let json: string;
  try {
    json = JSON.stringify(meta);
  } catch (cause) {
    throw new InvalidArgumentError('meta', 'meta must be JSON-serialisable', { cause });
  }
  if (Buffer.byteLength(json) > MAX_META_BYTES) {
    throw new InvalidArgumentError('meta', `meta must be at most ${MAX_META_BYTES} bytes as JSON`);
  }
  // What JSON.stringify drops silently (functions, undefined) or changes (NaN) is refused.
  const round = JSON.parse(json) as unknown;
  if (!sameJson(round, meta)) throw new InvalidArgumentError('meta', 'meta must hold only JSON values');
  return round as { readonly [key: string]: JsonValue };
}

function isPlainObject(v: unknown): v is { readonly [key: string]: JsonValue } {
  if (typeof v !== 'object' || v === null || Array.isArray(v)) return false;
  const proto = Object.getPrototypeOf(v) as unknown;
  return proto === Object.prototype || proto === null;
}

function sameJson(a: unknown, b: unknown): boolean {
  if (typeof b === 'number') return a === b && Number.isFinite(b);
  if (typeof b !== 'object' || b === null) return a === b;
  if (typeof a !== 'object' || a === null || Array.isArray(a) !== Array.isArray(b)) return false;
  const ka = Object.keys(a);
  const kb = Object.keys(b);
  if (ka.length !== kb.length) return false;
  return kb.every((k) => sameJson((a as Record<string, unknown>)[k], (b as Record<string, unknown>)[k]));
}

let cachedDefault: string | undefined;

/** The nearest package.json's `name` from the main script's folder up, else the process title. */
function defaultName(): string {
  if (cachedDefault !== undefined) return cachedDefault;
  cachedDefault = packageName(process.argv[1] ? dirname(process.argv[1]) : process.cwd()) ?? process.title;
  return cachedDefault;
}

function packageName(start: string): string | undefined {
  let dir = start;
  for (let i = 0; i < 32; i++) {
    const file = join(dir, 'package.json');
    if (existsSync(file)) {
      try {
        const name = (JSON.parse(readFileSync(file, 'utf8')) as { name?: unknown }).name;
        if (typeof name === 'string' && name !== '' && Buffer.byteLength(name) <= MAX_NAME_BYTES) return name;
      } catch {
        // An unreadable package.json is no name; keep looking up.
      }
    }
    const up = dirname(dir);
    if (up === dir) return undefined;
    dir = up;
  }
  return undefined;
}
