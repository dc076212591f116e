/**
 * Bearer tokens with scopes (docs/serve.md, "Security"). The tokens file is JSON:
 * `{ "tokens": [{ "name": "ci", "token": "…", "scopes": ["read", "lock:jobs/", "admin"] }] }`.
 * `read` lists, inspects and watches; `lock:<prefix>` (or `lock` for every id) opens
 * sessions and acquires, releases and extends the locks under the prefix; `admin` breaks
 * locks and implies the others. Tokens are kept as SHA-256 digests and compared as such;
 * a token never appears in an answer or a log line, only its name does.
 */
import { createHash, timingSafeEqual } from 'node:crypto';
import type { FastifyRequest } from 'fastify';
import { InvalidArgumentError } from '../errors.js';
import { ServeError } from './sessions.js';

/** What a route needs. */
export type Need = 'none' | 'read' | 'lock' | 'admin';

/** One configured client. */
interface Client {
  readonly name: string;
  readonly digest: Buffer;
  readonly read: boolean;
  readonly admin: boolean;
  /** Lock id prefixes it may lock ('' = every id). */
  readonly lockPrefixes: readonly string[];
}

const digest = (token: string): Buffer => createHash('sha256').update(token).digest();

/** Parse the tokens file; InvalidArgumentError names what is wrong (never the token itself). */
export function parseTokens(text: string): Client[] {
  let doc: unknown;
  try {
    doc = JSON.parse(text);
  } catch {
    throw new InvalidArgumentError('tokens', 'the tokens file is not JSON');
  }
  const list = (doc as { tokens?: unknown } | null)?.tokens;
  if (!Array.isArray(list) || list.length === 0) throw new InvalidArgumentError('tokens', 'the tokens file needs { "tokens": [ … ] }');
  return list.map((t: unknown, i) => parseClient(t, i));
}

function parseClient(t: unknown, i: number): Client {
  const e = t as { name?: unknown; token?: unknown; scopes?: unknown } | null;
  if (typeof e?.name !== 'string' || e.name === '' || e.name.length > 64)
    throw new InvalidArgumentError('tokens', `tokens[${i}].name must be a string of 1..64 chars`);
  if (typeof e.token !== 'string' || e.token.length < 16)
    throw new InvalidArgumentError('tokens', `tokens[${i}].token must be a string of at least 16 chars`);
  if (!Array.isArray(e.scopes) || !e.scopes.every((s) => typeof s === 'string' && /^(read|admin|lock(:.*)?)$/s.test(s))) {
    throw new InvalidArgumentError('tokens', `tokens[${i}].scopes must be a list of "read", "admin", "lock" or "lock:<prefix>"`);
  }
  const scopes = e.scopes as string[];
  const admin = scopes.includes('admin');
  const lockPrefixes = admin ? [''] : scopes.filter((s) => s.startsWith('lock')).map((s) => (s === 'lock' ? '' : s.slice(5)));
  return { name: e.name, digest: digest(e.token), read: admin || scopes.includes('read'), admin, lockPrefixes };
}

/** Who may do what: the tokens, or nobody checked at all (insecure local mode). */
export class Access {
  readonly #clients: readonly Client[] | undefined;

  /** `tokens`: the file's text; undefined with `insecure`: every request is allowed. */
  constructor(tokens: string | undefined, insecure: boolean) {
    this.#clients = tokens === undefined ? (insecure ? undefined : []) : parseTokens(tokens);
  }

  /** Whether requests are checked at all (false in insecure local mode: every request is allowed). */
  get checks(): boolean {
    return this.#clients !== undefined;
  }

  /** The client name of the request, checked against what the route needs. */
  check(request: FastifyRequest, need: Need): string | undefined {
    if (need === 'none' || this.#clients === undefined) return undefined;
    const client = this.#identify(request);
    // An election's name is its lock's id (docs/serve.md, "Elections").
    const params = request.params as { lockId?: string; name?: string } | undefined;
    const lockId = params?.lockId ?? params?.name;
    const ok =
      client.admin ||
      (need === 'read' && client.read) ||
      (need === 'lock' && client.lockPrefixes.some((p) => lockId === undefined || lockId.startsWith(p)));
    if (!ok) throw new ServeError(403, 'FORBIDDEN', `token '${client.name}' may not ${need}${lockId === undefined ? '' : ` '${lockId}'`}`);
    return client.name;
  }

  /** The client a request names, or 401. */
  #identify(request: FastifyRequest): Client {
    const header = request.headers.authorization;
    const m = typeof header === 'string' ? /^Bearer ([\x21-\x7e]{1,512})$/.exec(header) : null;
    if (!m?.[1]) throw new ServeError(401, 'UNAUTHORIZED', 'this service needs "Authorization: Bearer <token>"');
    const d = digest(m[1]);
    const found = this.#clients?.find((c) => timingSafeEqual(c.digest, d));
    if (!found) throw new ServeError(401, 'UNAUTHORIZED', 'unknown bearer token');
    return found;
  }
}

/** Requests per second per token on this replica: a bucket of `perSecond`, refilled continuously. */
export class RateLimit {
  readonly #perSecond: number;
  readonly #buckets = new Map<string, { tokens: number; at: number }>();

  constructor(perSecond: number) {
    this.#perSecond = perSecond;
  }

  /** Take one request of `client`'s bucket, or 429 LIMIT_EXCEEDED. */
  take(client: string): void {
    const now = performance.now();
    const b = this.#buckets.get(client) ?? { tokens: this.#perSecond, at: now };
    b.tokens = Math.min(this.#perSecond, b.tokens + ((now - b.at) / 1000) * this.#perSecond);
    b.at = now;
    this.#buckets.set(client, b);
    if (b.tokens < 1) throw new ServeError(429, 'LIMIT_EXCEEDED', `token '${client}' makes more than ${this.#perSecond} requests a second`);
    b.tokens -= 1;
  }
}
