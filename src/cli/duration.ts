/** Durations on the command line: `500ms`, `10s`, `2m`, `1h` (a unit is required). */
import { InvalidArgumentError } from '../errors.js';

const UNITS: Readonly<Record<string, number>> = { ms: 1, s: 1_000, m: 60_000, h: 3_600_000 };

/** Parse a duration such as `10s` into milliseconds. */
export function parseDuration(text: string, argument: string): number {
  const m = /^\s*(\d+(?:\.\d+)?)\s*(ms|s|m|h)\s*$/.exec(text);
  if (!m) {
    throw new InvalidArgumentError(argument, `${argument} must be a duration with a unit, like 500ms, 10s, 2m or 1h; got '${text}'`);
  }
  const value = Number(m[1]) * (UNITS[m[2] ?? ''] ?? Number.NaN);
  if (!Number.isFinite(value) || value <= 0) throw new InvalidArgumentError(argument, `${argument} must be > 0, got '${text}'`);
  return Math.ceil(value);
}
