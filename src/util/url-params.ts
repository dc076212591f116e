/**
 * Reading a backend URL: its host list, and query parameters that reject what the backend
 * does not know.
 */
import { InvalidArgumentError } from '../errors.js';
import { redact } from './redact.js';

/** One host of a backend URL's host list. */
export interface HostPort {
  readonly host: string;
  readonly port: number;
}

/**
 * The hosts of `url` (`h1:p1,h2:p2` or `h1,h2:port`), each with its port or `defaultPort`.
 * Throws `InvalidArgumentError` for an empty host or a bad port.
 */
export function hostList(url: URL, defaultPort: number): HostPort[] {
  const raw = decodeURIComponent(url.host);
  const fallbackPort = url.port === '' ? defaultPort : Number(url.port);
  return raw.split(',').map((part) => {
    const m = /^\s*(\[[^\]]+\]|[^:\s]+)(?::(\d+))?\s*$/.exec(part);
    if (!m || m[1] === undefined) throw new InvalidArgumentError('url', `malformed host '${part}' in '${redact(url)}'`);
    const port = m[2] === undefined ? fallbackPort : Number(m[2]);
    if (!Number.isInteger(port) || port < 1 || port > 65_535) throw new InvalidArgumentError('url', `bad port in host '${part}'`);
    return { host: m[1].replace(/^\[|\]$/g, ''), port };
  });
}

/** Bounds of a numeric URL parameter. */
export interface NumberBounds {
  readonly min?: number;
  readonly max?: number;
}

/**
 * The query parameters of a backend URL, checked: a parameter the backend does not know,
 * or one given twice, is an `InvalidArgumentError` (a typo must not be silently ignored).
 *
 * ```ts
 * const q = new UrlParams(url, ['prefix', 'commandTimeoutMs']);
 * const timeout = q.int('commandTimeoutMs', 5_000, { min: 1 });
 * ```
 */
export class UrlParams {
  readonly #url: URL;
  readonly #params: URLSearchParams;

  /** Check `url`'s parameters against `known` (throws for anything else). */
  constructor(url: URL, known: readonly string[]) {
    this.#url = url;
    this.#params = url.searchParams;
    const seen = new Set<string>();
    for (const key of this.#params.keys()) {
      if (!known.includes(key)) {
        const hint = known.length > 0 ? ` (known: ${known.join(', ')})` : ' (it takes none)';
        throw new InvalidArgumentError('url', `unknown parameter '${key}' in ${url.protocol}// URL${hint}`, {
          context: { parameter: key },
        });
      }
      if (seen.has(key)) throw new InvalidArgumentError('url', `parameter '${key}' given twice in ${redact(url)}`);
      seen.add(key);
    }
  }

  /** The raw value, or undefined when absent. */
  string(name: string): string | undefined {
    return this.#params.get(name) ?? undefined;
  }

  /** An integer parameter within bounds, or `fallback` when absent. */
  int<F extends number | undefined>(name: string, fallback: F, bounds: NumberBounds = {}): number | F {
    const raw = this.#params.get(name);
    if (raw === null) return fallback;
    const n = /^-?\d+$/.test(raw.trim()) ? Number(raw) : Number.NaN;
    const { min = Number.MIN_SAFE_INTEGER, max = Number.MAX_SAFE_INTEGER } = bounds;
    if (!Number.isSafeInteger(n) || n < min || n > max) {
      throw new InvalidArgumentError(
        'url',
        `parameter '${name}' must be an integer in [${min}, ${max}], got '${raw}' in ${redact(this.#url)}`,
        {
          context: { parameter: name },
        },
      );
    }
    return n;
  }

  /** `true`/`false`/`1`/`0`, or `fallback` when absent. */
  bool(name: string, fallback: boolean): boolean {
    const raw = this.#params.get(name);
    if (raw === null) return fallback;
    if (raw === 'true' || raw === '1') return true;
    if (raw === 'false' || raw === '0') return false;
    throw new InvalidArgumentError('url', `parameter '${name}' must be true or false, got '${raw}'`, { context: { parameter: name } });
  }

  /** One of `values`, or `fallback` when absent. */
  oneOf<V extends string>(name: string, values: readonly V[], fallback: V): V {
    const raw = this.#params.get(name);
    if (raw === null) return fallback;
    const v = values.find((x) => x === raw);
    if (v === undefined) {
      throw new InvalidArgumentError('url', `parameter '${name}' must be one of ${values.join(', ')}, got '${raw}'`, {
        context: { parameter: name },
      });
    }
    return v;
  }
}
