/**
 * Credentials never shown: a URL with its password and secret-like parameters hidden, and
 * any text with a list of secrets hidden.
 */
import { InvalidArgumentError } from '../errors.js';
import { decodeHostList, encodeHostList } from './host-list.js';

/**
 * A URL for messages and `context`: the password (and any `password`/`token`-like query
 * parameter) replaced by `***`. Accepts a URL or a string that may not even parse.
 */
export function redact(url: URL | string): string {
  let parsed: URL;
  try {
    parsed = typeof url === 'string' ? new URL(encodeHostList(url)) : new URL(url.href);
  } catch {
    // Not a URL: hide anything between `//user:` and `@`.
    return String(url).replace(/(\/\/[^/@:]*:)[^/@]*@/, '$1***@');
  }
  if (parsed.password) parsed.password = '***';
  for (const key of [...parsed.searchParams.keys()]) {
    if (/pass|secret|token|key/i.test(key)) parsed.searchParams.set(key, '***');
  }
  return decodeHostList(parsed.href);
}

/** The secrets of a URL (decoded password, secret-like parameters), for {@link redactText}. */
export function secretsOf(url: URL): string[] {
  const out: string[] = [];
  if (url.password) out.push(url.password, urlUserInfo(url, { lenient: true }).password ?? '');
  for (const [key, value] of url.searchParams) if (/pass|secret|token|key/i.test(key) && value !== '') out.push(value);
  return [...new Set(out)].filter((s) => s.length > 0);
}

/** `text` with every occurrence of each secret replaced by `***`. */
export function redactText(text: string, secrets: readonly string[]): string {
  let out = text;
  for (const s of secrets) if (s.length > 0) out = out.split(s).join('***');
  return out;
}

/**
 * The user name and password of `url`, percent-decoded (`undefined` when absent). The URL
 * parser accepts a malformed escape (`redis://:a%ZZb@host`) that `decodeURIComponent`
 * rejects with a bare `URIError`; this answers an `InvalidArgumentError` (argument `url`)
 * instead, whose message, context and cause never contain the password. `lenient` returns
 * the raw text of a part that does not decode.
 */
export function urlUserInfo(
  url: URL,
  { lenient = false }: { lenient?: boolean } = {},
): { readonly username: string | undefined; readonly password: string | undefined } {
  const decode = (raw: string, part: 'user name' | 'password'): string | undefined => {
    if (raw === '') return undefined;
    try {
      return decodeURIComponent(raw);
    } catch {
      // Lenient (for redaction, where an error would hide the real one): the raw text.
      if (lenient) return raw;
      // No cause: the URIError's message quotes the malformed text, i.e. the secret.
      throw new InvalidArgumentError(
        'url',
        `${url.protocol}// URL: the ${part} has a malformed %-escape (write a literal '%' as %25) in ${redact(url)}`,
      );
    }
  };
  return { username: decode(url.username, 'user name'), password: decode(url.password, 'password') };
}
