/**
 * The backend kit (`locksmith/backend`): everything a backend needs besides its driver.
 * One copy of the helpers every engine would otherwise re-write: an abortable sleep, one
 * deadline race, error wrapping that keeps the real cause, host lists, URL parameters that
 * reject what they do not know, and credential redaction. See docs/architecture.md,
 * "Writing a backend".
 */
import { setTimeout as delay } from 'node:timers/promises';
import { BackendUnavailableError, InvalidArgumentError, LocksmithError } from '../errors.js';
import type { Capabilities, LockKind } from '../backend.js';

export type {
  AcquireRequest,
  AcquireResult,
  AsyncLossReason,
  Backend,
  BackendFactory,
  Capabilities,
  ConnectOptions,
  Contended,
  Extension,
  Grant,
  HolderState,
  LockKind,
  LockState,
  ListPage,
  ListRequest,
  WaiterState,
  WatchChange,
  WatchChangeType,
  WatchRequest,
} from '../backend.js';
export { MAX_LOCK_ID_BYTES } from '../backend.js';
export { BackendUnavailableError, InvalidArgumentError, LockLostError, QuorumError, type NodeResult } from '../errors.js';
/** How long before its deadline the core aborts a holder's signal: a backend that signals loss itself keeps the same margin. */
export { lossGuardMs } from '../validity.js';
export { HoldTable, type HoldTableOptions, type TrackedHold } from './hold-table.js';

/** Every capability of the seam: what the memory reference backend and Redis have. */
export const EVERY_CAPABILITY: Capabilities = Object.freeze({
  fair: true,
  shared: true,
  permits: true,
  notify: true,
  lockDelay: true,
  reentrant: true,
});

// ---------------------------------------------------------------- one lock across kinds

/** What an acquisition asks, as far as sharing goes. */
export interface KindAsk {
  readonly kind: LockKind;
  readonly permits: number;
  readonly fair: boolean;
}

/** True for the kinds that hold alone (mutex, write). */
export const exclusiveKind = (k: LockKind): boolean => k === 'mutex' || k === 'write';

/**
 * Can `ask` hold beside `holders`? One id is one lock across kinds: a mutex or a writer
 * alone, readers together, semaphore holders up to the permits (docs/architecture.md).
 */
export function kindsCompatible(holders: readonly { readonly kind: LockKind }[], ask: Pick<KindAsk, 'kind' | 'permits'>): boolean {
  switch (ask.kind) {
    case 'mutex':
    case 'write':
      return holders.length === 0;
    case 'read':
      return holders.every((h) => h.kind === 'read');
    case 'semaphore':
      return holders.every((h) => h.kind === 'semaphore') && holders.length < ask.permits;
  }
}

/**
 * May `ask` pass the waiters `ahead` of it? Readers never pass a waiting writer, fair or not
 * (a stream of readers must not starve it); fair asks pass nobody (a semaphore: as many as
 * there are free permits).
 */
export function queueAllows(ask: KindAsk, ahead: readonly { readonly kind: LockKind }[], holders: number): boolean {
  if (ask.kind === 'read') return !ahead.some((w) => exclusiveKind(w.kind));
  if (!ask.fair) return true;
  if (ask.kind === 'semaphore') return ahead.length < ask.permits - holders;
  return ahead.length === 0;
}

/** setTimeout's limit; a longer delay would fire at once. */
export const MAX_TIMER_MS = 2_147_483_647;

// ---------------------------------------------------------------- time

/**
 * Sleep `ms`, or reject with `signal.reason` (unchanged) as soon as it aborts. `ref: false`
 * for background waits that must not keep the process alive; a wait a caller awaits stays
 * ref'd (the default).
 */
export async function sleep(ms: number, signal?: AbortSignal, { ref = true }: { ref?: boolean } = {}): Promise<void> {
  signal?.throwIfAborted();
  try {
    await delay(Math.min(MAX_TIMER_MS, Math.max(0, ms)), undefined, { ref, ...(signal ? { signal } : {}) });
  } catch (err) {
    // timers/promises rejects with its own AbortError; callers expect the signal's reason.
    if (signal?.aborted) throw signal.reason;
    throw err;
  }
}

/** Options of {@link withDeadline}. */
export interface DeadlineOptions<T> {
  /** Give up after this long (undefined: no time limit). */
  readonly timeoutMs?: number;
  /** The error a timeout rejects with. */
  readonly onTimeout?: () => Error;
  /** Give up when this aborts (rejects with its reason, unchanged). */
  readonly signal?: AbortSignal;
  /**
   * Called with the value if `work` settles after we gave up, so that a late connection
   * or a late grant is closed or handed back instead of leaking.
   */
  readonly onLate?: (value: T) => void;
}

/**
 * The one deadline race: `work`, or a timeout, or an abort, whichever comes first. The
 * timer is unref'd and cleared, the listener removed, and a late rejection of `work` is
 * never left unhandled.
 */
export function withDeadline<T>(work: Promise<T>, options: DeadlineOptions<T>): Promise<T> {
  const { timeoutMs, signal, onLate } = options;
  let gaveUp = false;
  work.then(
    (v) => {
      if (gaveUp) onLate?.(v);
    },
    () => undefined,
  );
  if (signal?.aborted) {
    gaveUp = true;
    return Promise.reject(signal.reason);
  }
  if (timeoutMs === undefined && !signal) return work;
  return new Promise<T>((resolve, reject) => {
    let timer: NodeJS.Timeout | undefined;
    const finish = (): void => {
      clearTimeout(timer);
      signal?.removeEventListener('abort', onAbort);
    };
    const giveUp = (err: unknown): void => {
      gaveUp = true;
      finish();
      reject(err);
    };
    const onAbort = (): void => giveUp(signal?.reason);
    if (timeoutMs !== undefined) {
      timer = setTimeout(
        () => giveUp(options.onTimeout ? options.onTimeout() : new Error(`timed out after ${timeoutMs} ms`)),
        Math.min(MAX_TIMER_MS, Math.max(0, timeoutMs)),
      );
      timer.unref();
    }
    signal?.addEventListener('abort', onAbort, { once: true });
    work.then(
      (v) => {
        if (gaveUp) return;
        finish();
        resolve(v);
      },
      (err: unknown) => {
        if (gaveUp) return;
        finish();
        reject(err);
      },
    );
  });
}

/** Resolve or reject with `work`, or reject with `signal.reason` as soon as it aborts. */
export function raceAbort<T>(work: Promise<T>, signal: AbortSignal): Promise<T> {
  return withDeadline(work, { signal });
}

// ---------------------------------------------------------------- errors

/** Error codes worth naming in a message: errno codes, Redis and SQL error prefixes. */
const CODE_PATTERN = /^[A-Z][A-Z0-9_]{2,}$/;

/**
 * The most telling code of an error or its causes: `ECONNREFUSED`, `ENOTFOUND`,
 * `WRONGPASS`, `NOAUTH`, `ER_ACCESS_DENIED_ERROR`, `28P01`… (undefined when none).
 */
export function causeCode(err: unknown, depth = 0): string | undefined {
  if (depth > 4 || typeof err !== 'object' || err === null) return undefined;
  const e = err as { code?: unknown; errno?: unknown; message?: unknown; cause?: unknown; errors?: unknown };
  if (typeof e.code === 'string' && e.code !== '' && !e.code.startsWith('ERR_')) return e.code;
  if (typeof e.message === 'string') {
    const first = e.message.split(/\s/, 1)[0] ?? '';
    if (CODE_PATTERN.test(first) && first !== 'ERR') return first;
  }
  if (Array.isArray(e.errors)) {
    for (const inner of e.errors as unknown[]) {
      const c = causeCode(inner, depth + 1);
      if (c) return c;
    }
  }
  return causeCode(e.cause, depth + 1);
}

/**
 * A one-line description of `err` and its causes, for messages: the message of the error
 * and of each distinct cause (an AggregateError's inner errors too), joined by `: `.
 * Connection errors of several addresses become one line with each address once.
 */
export function describeCause(err: unknown): string {
  const parts: string[] = [];
  const seen = new Set<unknown>();
  const visit = (e: unknown, depth: number): void => {
    if (depth > 4 || e === undefined || e === null || seen.has(e)) return;
    seen.add(e);
    if (e instanceof LocksmithError && depth > 0) {
      parts.push(e.message);
      return;
    }
    if (e instanceof Error || (typeof e === 'object' && 'message' in e)) {
      const msg = String((e as { message: unknown }).message ?? '').trim();
      if (msg !== '' && !parts.some((p) => p.includes(msg))) parts.push(msg);
      const errors = (e as { errors?: unknown }).errors;
      if (Array.isArray(errors)) for (const inner of errors as unknown[]) visit(inner, depth + 1);
      visit((e as { cause?: unknown }).cause, depth + 1);
      return;
    }
    parts.push(String(e));
  };
  visit(err, 0);
  const text = parts.join(': ') || 'unknown error';
  const code = causeCode(err);
  return code && !text.includes(code) ? `${code}: ${text}` : text;
}

/**
 * Wrap any failure of `what` into a `BackendUnavailableError` that names the backend, says
 * what failed and why (the real cause, with its code), keeps `cause`, and never shows a
 * secret. A locksmith error passes through unchanged.
 */
export function unavailable(
  backend: string,
  what: string,
  err: unknown,
  options: { context?: Record<string, unknown>; secrets?: readonly string[] } = {},
): LocksmithError {
  if (err instanceof LocksmithError) return err;
  const detail = redactText(describeCause(err), options.secrets ?? []);
  const code = causeCode(err);
  return new BackendUnavailableError(backend, `${backend} ${what} failed: ${detail}`, {
    cause: err,
    context: { ...(options.context ?? {}), ...(code ? { causeCode: code } : {}) },
  });
}

// ---------------------------------------------------------------- URLs

/**
 * `zookeeper://h1:2181,h2:2181/x` is how every ZooKeeper and Cassandra user writes a
 * cluster, but a host list with ports is not a valid WHATWG URL. Percent-encode the colons
 * inside such a list, so the URL parses with the whole list as its (opaque) host; a backend
 * reads it back with {@link hostList}.
 */
export function encodeHostList(raw: string): string {
  const m = /^([a-z][a-z0-9+.-]*:\/\/)((?:[^@/?#]*@)?)([^/?#]*)(.*)$/is.exec(raw);
  if (!m || !m[3]?.includes(',')) return raw;
  return `${m[1]}${m[2]}${m[3].replace(/:/g, '%3A')}${m[4]}`;
}

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

// ---------------------------------------------------------------- redaction

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
  if (url.password) out.push(url.password, decodeURIComponent(url.password));
  for (const [key, value] of url.searchParams) if (/pass|secret|token|key/i.test(key) && value !== '') out.push(value);
  return [...new Set(out)].filter((s) => s.length > 0);
}

/** `text` with every occurrence of each secret replaced by `***`. */
export function redactText(text: string, secrets: readonly string[]): string {
  let out = text;
  for (const s of secrets) if (s.length > 0) out = out.split(s).join('***');
  return out;
}

function decodeHostList(href: string): string {
  return href.replace(
    /^([a-z][a-z0-9+.-]*:\/\/(?:[^@/?#]*@)?)([^/?#]*)/i,
    (_all, head: string, host: string) => `${head}${host.replace(/%3A/gi, ':')}`,
  );
}
