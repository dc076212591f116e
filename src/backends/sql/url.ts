/**
 * What the PostgreSQL and MySQL URLs share: the user info (through the kit) and the
 * database name, both percent-decoded into an `InvalidArgumentError` when malformed.
 */
import { InvalidArgumentError, redact, urlUserInfo } from '../kit.js';

/** The decoded user, password and database of an SQL URL (`undefined` parts are absent). */
export function sqlUrlParts(url: URL, engine: string): { user?: string; password?: string; database?: string } {
  const { username, password } = urlUserInfo(url);
  let database: string;
  try {
    database = decodeURIComponent(url.pathname.replace(/^\//, ''));
  } catch {
    throw new InvalidArgumentError('url', `${engine}: the database name has a malformed %-escape in ${redact(url)}`);
  }
  if (database.includes('/')) throw new InvalidArgumentError('url', `${engine}: malformed database name in ${redact(url)}`);
  return {
    ...(username === undefined ? {} : { user: username }),
    ...(password === undefined ? {} : { password }),
    ...(database ? { database } : {}),
  };
}
