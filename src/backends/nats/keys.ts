/**
 * How a lock id maps to a key of the bucket (docs/backends/nats.md, "The record"). A NATS
 * key allows only `[-/_=.A-Za-z0-9]` and its dots separate subject tokens, so the id becomes
 * one token: letters, digits and `-` stay, every other UTF-8 byte is `_XX` (hex). The
 * escape works byte by byte, so a lock-id prefix maps to a key prefix (listing by prefix).
 */
import { InvalidArgumentError } from '../kit.js';

const PLAIN = /^[-A-Za-z0-9]$/;

/** The key segment of a lock id. */
export function escapeId(lockId: string): string {
  let out = '';
  for (const byte of Buffer.from(lockId, 'utf8')) {
    const ch = String.fromCharCode(byte);
    out += byte < 0x80 && PLAIN.test(ch) ? ch : `_${byte.toString(16).toUpperCase().padStart(2, '0')}`;
  }
  return out;
}

/** The lock id of a key segment, or undefined when the segment is not one {@link escapeId} writes. */
export function unescapeId(segment: string): string | undefined {
  const bytes: number[] = [];
  for (let i = 0; i < segment.length; i++) {
    const ch = segment[i] ?? '';
    if (ch !== '_') {
      if (!PLAIN.test(ch)) return undefined;
      bytes.push(ch.charCodeAt(0));
      continue;
    }
    const hex = segment.slice(i + 1, i + 3);
    if (!/^[0-9A-F]{2}$/.test(hex)) return undefined;
    bytes.push(parseInt(hex, 16));
    i += 2;
  }
  const id = Buffer.from(bytes).toString('utf8');
  return escapeId(id) === segment && id !== '' ? id : undefined;
}

/** A key prefix is '' or subject tokens each followed by a dot (`app.locks.`). */
export function checkPrefix(prefix: string): string {
  if (prefix !== '' && !/^([-/_=A-Za-z0-9]+\.)+$/.test(prefix)) {
    throw new InvalidArgumentError('url', `nats: prefix must be '' or dot-terminated key tokens, got '${prefix}'`);
  }
  return prefix;
}

/** The key of `lockId` under `prefix`. */
export const keyOf = (prefix: string, lockId: string): string => `${prefix}${escapeId(lockId)}`;

/** The subject filter of every lock key under `prefix` (one token after it). */
export const keysFilter = (prefix: string): string => `${prefix}*`;
