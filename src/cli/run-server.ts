/**
 * `locksmith run --server URL`: the hold of `run` taken through a `locksmith serve` service
 * instead of a backend (docs/cli.md, "run through a service"; the API is docs/serve.md). A
 * session is opened with the `--ttl`, kept alive at a third of it, the lock acquired by
 * long polls of one request id (a retry never makes a second hold), and released with the
 * session when the command ends. The hold is lost, and the command stopped as the ordinary
 * `run` does, when a keepalive says so or none succeeded for a whole ttl.
 */
import { randomBytes } from 'node:crypto';
import { BackendUnavailableError, InvalidArgumentError, LockLostError, LocksmithError, LockTimeoutError } from '../index.js';
import { processOwner, type Acquirer, type RunHandle, type RunOptions } from './run.js';

/** One long poll's wait: well under the 300 s both the service and fetch() allow. */
const POLL_MS = 60_000;
/** The shortest session ttl the service accepts. */
const MIN_TTL_MS = 1_000;

/** Where `run --server` goes. */
export interface ServerTarget {
  /** The service's base URL, e.g. `http://127.0.0.1:7070`. */
  readonly url: string;
  /** The bearer token (docs/serve.md, "Security"), when the service checks tokens. */
  readonly token?: string;
}

type Answer = { status: number; body: Record<string, unknown> };

/** A JSON client of the service; network failures are BACKEND_UNAVAILABLE. */
class ServiceClient {
  readonly #base: string;
  readonly #headers: Record<string, string>;

  constructor(target: ServerTarget) {
    this.#base = target.url.replace(/\/+$/, '');
    this.#headers = target.token === undefined ? {} : { authorization: `Bearer ${target.token}` };
  }

  async call(method: string, path: string, body?: unknown, signal?: AbortSignal): Promise<Answer> {
    const headers = { ...this.#headers, ...(body === undefined ? {} : { 'content-type': 'application/json' }) };
    let res: Response;
    try {
      res = await fetch(this.#base + path, {
        method,
        headers,
        ...(body === undefined ? {} : { body: JSON.stringify(body) }),
        ...(signal ? { signal } : {}),
      });
    } catch (err) {
      if (signal?.aborted) throw signal.reason;
      throw new BackendUnavailableError('serve', `the service at ${this.#base} did not answer: ${(err as Error).message}`, { cause: err });
    }
    const text = await res.text();
    try {
      return { status: res.status, body: JSON.parse(text) as Record<string, unknown> };
    } catch {
      return { status: res.status, body: { code: 'INTERNAL', message: `not JSON (HTTP ${res.status})` } };
    }
  }
}

/** The library error of a service's error answer (so `run` exits as it does over a backend). */
export function errorOf(a: Answer, lockId: string, waitMs: number): LocksmithError {
  const code = typeof a.body.code === 'string' ? a.body.code : 'INTERNAL';
  const message = `the service answered ${a.status} ${code}: ${typeof a.body.message === 'string' ? a.body.message : ''}`;
  if (code === 'LOCK_TIMEOUT') return new LockTimeoutError(lockId, waitMs);
  if (code === 'UNSUPPORTED') return new LocksmithError('UNSUPPORTED', message);
  if (code === 'INVALID_ARGUMENT') return new InvalidArgumentError('lockId', message);
  // Refused credentials are configuration (exit 78), as a backend's refused password is.
  if (a.status === 401 || a.status === 403) return new BackendUnavailableError('serve', message, { context: { causeCode: 'AUTH_FAILED' } });
  return new BackendUnavailableError('serve', message);
}

function holdBody(o: RunOptions): Record<string, unknown> {
  const hold = o.hold ?? { kind: 'mutex' };
  return { kind: hold.kind, ...(hold.kind === 'semaphore' ? { permits: hold.permits } : {}), ...(o.fair ? { fair: true } : {}) };
}

/** The {@link Acquirer} of `run --server`. */
export function serviceAcquirer(target: ServerTarget): Acquirer {
  const http = new ServiceClient(target);
  return async (o, signal) => {
    if (o.ttlMs < MIN_TTL_MS) throw new InvalidArgumentError('--ttl', `with --server, --ttl must be at least ${MIN_TTL_MS} ms`);
    const opened = await http.call('POST', '/v1/sessions', { ttlMs: o.ttlMs, name: (o.owner ?? processOwner()).slice(0, 128) }, signal);
    if (opened.status !== 200) throw errorOf(opened, o.lockId, 0);
    const session = opened.body.id as string;
    const keeper = new Keeper(http, session, o.lockId, o.ttlMs);
    try {
      const grant = await acquire(http, session, o, signal);
      return keeper.held(BigInt(grant.token as string), grant.requestId as string);
    } catch (err) {
      await keeper.close();
      throw err;
    }
  };
}

/** Long polls of one request id until granted, `waitMs` passed (undefined: never) or aborted. */
async function acquire(http: ServiceClient, session: string, o: RunOptions, signal: AbortSignal): Promise<Record<string, unknown>> {
  const requestId = `run-${randomBytes(9).toString('base64url')}`;
  const deadline = o.waitMs === undefined ? Infinity : performance.now() + o.waitMs;
  const path = `/v1/locks/${encodeURIComponent(o.lockId)}/acquire`;
  for (;;) {
    const waitMs = Math.max(0, Math.min(POLL_MS, Math.ceil(deadline - performance.now())));
    const a = await http.call('POST', path, { session, requestId, waitMs, ...holdBody(o) }, signal);
    if (a.status === 200) return a.body;
    if (a.body.code !== 'LOCK_TIMEOUT' || performance.now() >= deadline) throw errorOf(a, o.lockId, o.waitMs ?? 0);
  }
}

/** Keeps the session alive while `run` waits and holds; aborts `signal` when the hold is lost. */
class Keeper {
  readonly #http: ServiceClient;
  readonly #session: string;
  readonly #lockId: string;
  readonly #ttlMs: number;
  readonly #lost = new AbortController();
  readonly #timer: NodeJS.Timeout;
  #lastOk = performance.now();
  #token: bigint | undefined;

  constructor(http: ServiceClient, session: string, lockId: string, ttlMs: number) {
    this.#http = http;
    this.#session = session;
    this.#lockId = lockId;
    this.#ttlMs = ttlMs;
    this.#timer = setInterval(() => void this.#beat(), ttlMs / 3);
    this.#timer.unref();
  }

  /** The hold, once granted. */
  held(token: bigint, requestId: string): RunHandle {
    this.#token = token;
    return {
      token,
      lockId: this.#lockId,
      ownerId: `${this.#session}.${requestId}`,
      signal: this.#lost.signal,
      release: async () => {
        clearInterval(this.#timer);
        try {
          await this.#http.call('POST', `/v1/locks/${encodeURIComponent(this.#lockId)}/release`, {
            session: this.#session,
            token: token.toString(),
          });
        } finally {
          await this.close();
        }
      },
    };
  }

  /** Stop keeping alive and end the session (which releases what it still holds). */
  async close(): Promise<void> {
    clearInterval(this.#timer);
    await this.#http.call('DELETE', `/v1/sessions/${this.#session}`).catch(() => undefined);
  }

  async #beat(): Promise<void> {
    let a: Answer | undefined;
    try {
      a = await this.#http.call('POST', `/v1/sessions/${this.#session}/keepalive`);
    } catch {
      // Unanswered: the hold is lost only once no keepalive succeeded for a whole ttl.
    }
    const gone =
      a?.status === 404 ||
      (a?.status === 200 && (a.body.lost as { lockId: string; token: string }[]).some((h) => h.lockId === this.#lockId));
    if (a?.status === 200 && !gone) this.#lastOk = performance.now();
    if (this.#token === undefined || this.#lost.signal.aborted) return;
    if (gone || performance.now() - this.#lastOk >= this.#ttlMs) {
      clearInterval(this.#timer);
      this.#lost.abort(new LockLostError(this.#lockId, gone ? 'not-held' : 'expired'));
    }
  }
}
