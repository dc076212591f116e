/** Durations on the command line: `500ms`, `10s`, `2m`, `1h`, or a bare number of seconds (`30`, `0.5`). */
import { InvalidArgumentError } from '../index.js';

const UNITS: Readonly<Record<string, number>> = { ms: 1, s: 1_000, m: 60_000, h: 3_600_000 };

/** Parse a duration such as `10s` or `10` (seconds) into milliseconds; `allowZero` accepts `0`. */
export function parseDuration(text: string, argument: string, allowZero = false): number {
  const m = /^\s*(\d+(?:\.\d+)?)\s*(ms|s|m|h)?\s*$/.exec(text);
  if (!m) {
    throw new InvalidArgumentError(
      argument,
      `${argument} must be a duration like 500ms, 10s, 2m, 1h or a number of seconds; got '${text}'`,
    );
  }
  const value = Number(m[1]) * (UNITS[m[2] ?? 's'] ?? Number.NaN);
  if (!Number.isFinite(value) || value < 0 || (value === 0 && !allowZero)) {
    throw new InvalidArgumentError(argument, `${argument} must be ${allowZero ? '≥ 0' : '> 0'}, got '${text}'`);
  }
  return Math.ceil(value);
}

/** A whole number option (`--permits 4`), within bounds. */
export function parseCount(text: string, argument: string, min: number, max: number): number {
  const n = /^\s*\d+\s*$/.test(text) ? Number(text) : Number.NaN;
  if (!Number.isSafeInteger(n) || n < min || n > max) {
    throw new InvalidArgumentError(argument, `${argument} must be a whole number in [${min}, ${max}], got '${text}'`);
  }
  return n;
}
