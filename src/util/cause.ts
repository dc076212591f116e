/**
 * Failures that keep their real cause: the code worth naming (`ECONNREFUSED`, `WRONGPASS`,
 * `28P01`…), a one-line description of an error and its causes, and the wrap into a
 * `BackendUnavailableError` that the core and every backend use.
 */
import { BackendUnavailableError, LocksmithError } from '../errors.js';
import { redactText } from './redact.js';

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
