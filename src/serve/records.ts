/**
 * Bookkeeping records of the service, kept in the backend as locks under a reserved prefix
 * (docs/serve.md, "Design"): a session is a lock whose lease is its keepalive, and every
 * hold a session made is a marker lock that remembers what any replica needs to extend or
 * release it. A record carries its data in its holder identity, so that it is read back by
 * `inspect` / `list` from any replica, and it is renewed by ROLLING: a second holder is
 * written, then the first removed by owner. Rolling needs no backend-private grant data
 * (which cannot be read back), so a replica that never saw the record can renew it.
 */
import { randomBytes } from 'node:crypto';
import { hostname } from 'node:os';
import type { AcquireRequest, Backend, Grant, ListRequest } from '../backend.js';
import { MAX_IDENTITY_BYTES } from '../backend.js';
import { InvalidArgumentError } from '../errors.js';
import { BoundedMap } from '../util/bounded-map.js';
import type { JsonValue } from '../observe/identity.js';

/** How many record holders' grants a replica keeps (Records.#mine). */
const MAX_REMEMBERED = 100_000;

/** This machine's name, read once (os.hostname() is a system call). */
const HOST = hostname();

/** Lock ids under this prefix belong to the service; clients may not lock or list them. */
export const RESERVED_PREFIX = 'locksmith-serve/';

/**
 * Where the service keeps its records apart from the user's locks, on the same server: the
 * backend URL with another key prefix (`<prefix>serve:`), for the engines that publish every
 * change of a key prefix on one channel (Redis: `<prefix>changes`). Every watcher of the
 * user's locks (a web view's feed, a raw `/v1/events` stream, another program's
 * `locker.watch()`) then hears nothing of the service's own writes, a marker written and
 * removed per hold (docs/serve.md, "Design"). Undefined elsewhere: the records stay beside
 * the locks under {@link RESERVED_PREFIX}, and watchers skip them.
 */
export function recordsUrl(url: string): string | undefined {
  if (!/^(redis|rediss|redis-sentinel):\/\//i.test(url)) return undefined;
  // Only the query is touched: a host list (`s1:26379,s2:26379`) is no WHATWG URL host.
  const at = url.indexOf('?');
  const query = new URLSearchParams(at < 0 ? '' : url.slice(at + 1));
  // The backend's default prefix (docs/backends/redis.md); a key of the records never matches
  // the user's listing pattern `<prefix>{…`, since `serve:` follows the prefix instead of `{`.
  query.set('prefix', `${query.get('prefix') ?? 'locksmith:'}serve:`);
  return `${at < 0 ? url : url.slice(0, at)}?${query.toString()}`;
}

/**
 * One backend for the service's sessions: the calls on a record (a lock id under
 * {@link RESERVED_PREFIX}) go to `records`, every other call (the holds' own grants, which
 * sessions extend and release) to `locks`. Its `close` closes neither: their lockers own them.
 */
export function routedBackend(locks: Backend, records: Backend): Backend {
  const to = (lockId: string): Backend => (lockId.startsWith(RESERVED_PREFIX) ? records : locks);
  return {
    name: locks.name,
    capabilities: locks.capabilities,
    tryAcquire: (req) => to(req.lockId).tryAcquire(req),
    waitForChange: (lockId, ticket, signal) => to(lockId).waitForChange(lockId, ticket, signal),
    cancel: (req, ticket) => to(req.lockId).cancel(req, ticket),
    extend: (grant, ttlMs) => to(grant.lockId).extend(grant, ttlMs),
    release: (grant) => to(grant.lockId).release(grant),
    inspect: (lockId) => to(lockId).inspect(lockId),
    // Both are the same engine: both list, or neither does (the locker then says so).
    ...(locks.list && records.list ? { list: (req: ListRequest) => listOf(to(req.prefix), req) } : {}),
    close: async () => undefined,
  };
}

async function listOf(backend: Backend, req: ListRequest): ReturnType<NonNullable<Backend['list']>> {
  const page = await backend.list?.(req);
  if (page === undefined) throw new InvalidArgumentError('prefix', `${backend.name} cannot list locks`);
  return page;
}

/** Random bytes drawn 4 KiB at a time: each draw is a system call, and ids are made per request. */
const POOL_BYTES = 4096;
let pool = Buffer.alloc(0);
let used = POOL_BYTES;

/** A random id for sessions and owners: 16 bytes, base64url. */
export function randomId(bytes = 16): string {
  if (used + bytes > pool.length) {
    pool = randomBytes(Math.max(POOL_BYTES, bytes));
    used = 0;
  }
  used += bytes;
  return pool.toString('base64url', used - bytes, used);
}

/** The identity string a record or a hold is written with (the wire form of observe/identity.ts). */
export function encodeIdentity(name: string, meta: { readonly [key: string]: JsonValue }, host = HOST): string {
  const encoded = JSON.stringify({ h: host, p: 0, n: name, m: meta });
  if (Buffer.byteLength(encoded) > MAX_IDENTITY_BYTES) {
    throw new InvalidArgumentError('meta', `the record (name, meta, lock id) must fit in ${MAX_IDENTITY_BYTES} bytes`);
  }
  return encoded;
}

/** A request of one attempt that leaves nothing behind when refused. */
export function oneShot(lockId: string, ownerId: string, ttlMs: number, identity: string, semaphore: boolean, permits = 2): AcquireRequest {
  return {
    lockId,
    kind: semaphore ? 'semaphore' : 'mutex',
    permits: semaphore ? permits : 1,
    ownerId,
    freshOwner: true,
    ttlMs,
    fair: false,
    lockDelayMs: 0,
    wait: false,
    ticket: undefined,
    signal: new AbortController().signal,
    onLost: () => undefined,
    identity,
  };
}

/**
 * Keeps records: write, roll (renew) and remove. Where the backend has semaphores a record
 * is a 2-permit semaphore, so a roll never leaves a moment without a holder; elsewhere it
 * is a mutex removed and written again (a short gap, docs/serve.md).
 */
export class Records {
  readonly #backend: Backend;
  readonly #semaphore: boolean;
  /** The grants of the record holders this replica wrote, by owner id (for their removal). */
  readonly #mine = new BoundedMap<string, Grant>(MAX_REMEMBERED);

  constructor(backend: Backend) {
    this.#backend = backend;
    this.#semaphore = backend.capabilities.permits;
  }

  /** Write a new record; false when a record of that id is already there (a mutex backend). */
  async write(lockId: string, ownerPrefix: string, ttlMs: number, identity: string, permits = 2): Promise<boolean> {
    return (await this.writeGrant(lockId, ownerPrefix, ttlMs, identity, permits)) !== undefined;
  }

  /** Write a new record holder and remember its grant on this replica; undefined when refused. */
  async writeGrant(lockId: string, ownerPrefix: string, ttlMs: number, identity: string, permits = 2): Promise<Grant | undefined> {
    const req = oneShot(lockId, `${ownerPrefix}~${randomId(6)}`, ttlMs, identity, this.#semaphore, permits);
    const got = await this.#backend.tryAcquire(req);
    if (!got.granted) return undefined;
    // Bounded: an entry only saves a round trip's cost, the removal works without it.
    this.#mine.set(got.grant.ownerId, got.grant);
    return got.grant;
  }

  /**
   * Renew: write a fresh holder, then remove the holders seen before (`oldOwners`, the one
   * whose lease ends first first). Rolls at once (two replicas) may leave two fresh holders:
   * the next roll then finds the record full, removes the older one and writes again.
   */
  async roll(
    lockId: string,
    ownerPrefix: string,
    ttlMs: number,
    identity: string,
    oldOwners: readonly string[],
    permits = 2,
  ): Promise<void> {
    if (!this.#semaphore) {
      await this.removeOwners(lockId, oldOwners);
      // Refused: another roll wrote the record in between, which renews it just as well.
      await this.write(lockId, ownerPrefix, ttlMs, identity);
      return;
    }
    let wrote = await this.write(lockId, ownerPrefix, ttlMs, identity, permits);
    if (!wrote && oldOwners.length > 1) {
      await this.removeOwners(lockId, oldOwners.slice(0, 1), permits);
      wrote = await this.write(lockId, ownerPrefix, ttlMs, identity, permits);
    }
    if (wrote) await this.removeOwners(lockId, oldOwners, permits);
  }

  /**
   * Remove the holders `owners` of the record (idempotent). A holder this replica wrote is
   * released by its grant (a short script); any other is removed by owner id (`cancel`,
   * on Redis a script sent as source: docs/benchmarks.md, "The lock service").
   */
  async removeOwners(lockId: string, owners: readonly string[], permits = 2): Promise<void> {
    await Promise.all(
      owners.map(async (owner) => {
        const grant = this.#mine.get(owner);
        this.#mine.delete(owner);
        if (grant !== undefined && grant.lockId === lockId) {
          await this.#backend.release(grant);
          return;
        }
        await this.#backend.cancel(oneShot(lockId, owner, 1, '', this.#semaphore, permits), undefined);
      }),
    );
  }
}
