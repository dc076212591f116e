/**
 * The `file://` backend: locks shared by the processes of one machine through a directory.
 * Each lock id has a state file (holders, queue, last token) changed only inside a short
 * critical section across processes (mutex.ts); leases are measured on the system-wide
 * monotonic clock. The rules are the memory reference backend's (state.ts). See
 * docs/backends/file.md.
 */
import { randomBytes } from 'node:crypto';
import { existsSync, readFileSync, renameSync, unlinkSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import {
  backendLog,
  EVERY_CAPABILITY,
  InvalidArgumentError,
  logRoundTrips,
  LockLostError,
  logWake,
  wakeClock,
  type WakeCause,
  kindsCompatible,
  queueAllows,
  sleep,
  unavailable,
  type AcquireRequest,
  type AcquireResult,
  type Backend,
  type Capabilities,
  type Extension,
  type Grant,
  type LockState,
} from '../kit.js';
import { bootId, lockPaths, monotonicMs, prepareDirectory, processAlive, type LockPaths } from './layout.js';
import { leave, stillHeld, tryEnter } from './mutex.js';
import type { ListPage, ListRequest } from '../../backend.js';
import { listPage } from './list.js';
import {
  emptyState,
  grantable,
  nextExpiry,
  newHolder,
  parseState,
  purge,
  queued,
  reenter,
  serialize,
  stretch,
  type FileHolder,
  type FileState,
} from './state.js';
import { clocksNow, viewOf } from './view.js';
import { DirectoryWatch } from './watch.js';
import { changes, type ChangesRequest } from './changes.js';

/** The ticket a contended attempt leaves behind: the waiter's id in the lock's queue. */
export interface FileTicket {
  readonly waiterId: string;
}

/** Tuning of a {@link FileBackend}. */
export interface FileBackendOptions {
  /** Longest a waiter sleeps without looking at the state (the fallback when no event comes). @default 1000 */
  readonly pollMs?: number;
  /** A critical section whose owner is alive but has not finished after this long is broken. @default 2000 */
  readonly staleMs?: number;
  /**
   * The directory is the shared default one: when it has to be recreated (cleaned away
   * while in use), it must again be this user's with mode 0700 (`prepareDirectory`). @default false
   */
  readonly isDefault?: boolean;
}

/** Without a queue position there is nothing to be woken for: look again after this long. */
const UNQUEUED_RETRY_MS = 25;
const log = backendLog('file');
/** A waiter that stops attempting is dropped after this many polls (its process is alive but stuck). */
const WAITER_GRACE_POLLS = 4;
/** Back-off between tries of a busy critical section (ms, doubled up to the cap). */
const BUSY_FIRST_MS = 0.5;
const BUSY_CAP_MS = 16;

/** The outcome of a section: a value, and whether the state must be written. */
interface Change<T> {
  readonly value: T;
  readonly changed: boolean;
}

const NEVER = new AbortController().signal;

/**
 * Every backend of this process with waiters asleep on a state file, by the file's path:
 * a change made here wakes them at once (other processes hear it from their watcher).
 */
const localSleepers = new Map<string, Set<() => void>>();

function wakeLocal(statePath: string): boolean {
  const fires = localSleepers.get(statePath);
  if (!fires) return false;
  for (const fire of [...fires]) fire();
  return true;
}

/** What the file backend can do: everything, like memory, across the processes of one machine. */
export const FILE_CAPABILITIES: Capabilities = EVERY_CAPABILITY;

/** Locks shared through the directory `directory` by every process of this machine. */
export class FileBackend implements Backend<FileTicket, undefined> {
  readonly name = 'file';
  readonly capabilities: Capabilities = FILE_CAPABILITIES;
  /** The directory the locks live in. */
  readonly directory: string;
  readonly #pollMs: number;
  readonly #staleMs: number;
  readonly #isDefault: boolean;
  readonly #watch: DirectoryWatch;
  /** The waiters asleep on each lock's file name, and how to stop watching it. */
  readonly #sleepers = new Map<string, { readonly looks: Set<(read: () => FileState) => void>; readonly off: () => void }>();
  #closed = false;

  /** Use `directory` (which must exist, with `locks/` and `work/` in it: see `createBackend`). */
  constructor(directory: string, options: FileBackendOptions = {}) {
    this.directory = directory;
    this.#pollMs = options.pollMs ?? 1_000;
    this.#staleMs = options.staleMs ?? 2_000;
    this.#isDefault = options.isDefault ?? false;
    this.#watch = new DirectoryWatch(join(directory, 'locks'));
    logRoundTrips(this, log);
  }

  async tryAcquire(req: AcquireRequest<FileTicket>): Promise<AcquireResult<FileTicket, undefined>> {
    return this.#update(req.lockId, req.signal, (s, now) => {
      const waiterId = req.ticket?.waiterId;
      const position = waiterId === undefined ? -1 : s.queue.findIndex((w) => w.id === waiterId);
      const reentered = reenter(s, req, now);
      if (reentered) {
        if (position >= 0) s.queue.splice(position, 1);
        return { changed: true, value: granted(req, reentered.token, true) };
      }
      const ahead = position >= 0 ? s.queue.slice(0, position) : s.queue;
      if (kindsCompatible(s.holders, req) && queueAllows(req, ahead, s.holders.length)) {
        s.last += 1n;
        s.holders.push(newHolder(req, s.last, now));
        if (position >= 0) s.queue.splice(position, 1);
        return { changed: true, value: granted(req, s.last, false) };
      }
      if (!req.wait) return { changed: false, value: { granted: false, contended: { ticket: undefined } } };
      const expiresAt = now + this.#pollMs * WAITER_GRACE_POLLS;
      const mine = position >= 0 ? s.queue[position] : undefined;
      const id = waiterId ?? `${process.pid}.${randomBytes(8).toString('hex')}`;
      const ticket = { waiterId: id };
      // An attempt keeps the waiter's place alive (rewriting the state only once half its
      // grace is gone); a waiter dropped meanwhile queues again at the end.
      if (mine && mine.expiresAt - now > (expiresAt - now) / 2) return { changed: false, value: { granted: false, contended: { ticket } } };
      if (mine) mine.expiresAt = expiresAt;
      else s.queue.push(queued(req, id, expiresAt, now));
      return { changed: true, value: { granted: false, contended: { ticket } } };
    });
  }

  async waitForChange(lockId: string, ticket: FileTicket | undefined, signal: AbortSignal): Promise<void> {
    signal.throwIfAborted();
    const since = wakeClock(log);
    if (!ticket) {
      await sleep(UNQUEUED_RETRY_MS, signal);
      logWake(log, lockId, 'poll', since);
      return;
    }
    const paths = lockPaths(this.directory, lockId);
    await new Promise<void>((resolve, reject) => {
      // A change of the state file (watcher or this process) wakes by notification; the timer polls.
      let cause: WakeCause = 'notification';
      let timer: NodeJS.Timeout | undefined;
      let unsubscribe = (): void => undefined;
      let done = false;
      const finish = (err?: unknown): void => {
        done = true;
        clearTimeout(timer);
        unsubscribe();
        signal.removeEventListener('abort', onAbort);
        if (err !== undefined) reject(err);
        else {
          logWake(log, lockId, cause, since);
          resolve();
        }
      };
      const onAbort = (): void => finish(signal.reason);
      const look = (read: () => FileState): void => {
        // A change being dispatched may still reach a wait that just ended: no timer for it.
        if (done) return;
        try {
          const waitMs = this.#lookAgainIn(read(), ticket.waiterId);
          clearTimeout(timer);
          if (waitMs <= 0) finish();
          else
            timer = setTimeout(
              () => {
                cause = 'poll';
                finish();
              },
              Math.max(1, Math.ceil(waitMs)),
            );
        } catch (err) {
          finish(unavailable(this.name, `read of the state of '${lockId}'`, err));
        }
      };
      // Subscribe before the first look, so that a change between the two is not missed.
      unsubscribe = this.#subscribe(paths, lockId, look);
      signal.addEventListener('abort', onAbort, { once: true });
      look(() => this.#read(paths, lockId));
    });
  }

  /**
   * 0 when the waiter's next attempt could be granted now (or its place is gone, so it must
   * queue again); else how long to sleep before looking again without an event.
   */
  #lookAgainIn(s: FileState, waiterId: string): number {
    const now = monotonicMs();
    purge(s, now, processAlive);
    const mine = s.queue.find((w) => w.id === waiterId);
    if (!mine || grantable(s).has(waiterId)) return 0;
    // Wake before the place would expire too, so that the next attempt keeps it.
    return Math.min(this.#pollMs, nextExpiry(s) - now);
  }

  /**
   * Call `look` on every change of the state of `lockId`, with a reader that reads the file
   * once per change for all the waiters of this backend.
   */
  #subscribe(paths: LockPaths, lockId: string, look: (read: () => FileState) => void): () => void {
    let group = this.#sleepers.get(paths.name);
    if (!group) {
      const looks = new Set<(read: () => FileState) => void>();
      const fire = (): void => {
        let cached: FileState | undefined;
        // One read per change; each waiter purges a copy of it.
        const read = (): FileState => {
          cached ??= this.#read(paths, lockId);
          return { ...cached, holders: cached.holders.map((h) => ({ ...h })), queue: cached.queue.map((w) => ({ ...w })) };
        };
        for (const l of [...looks]) l(read);
      };
      const stopWatching = this.#watch.on(paths.name, fire);
      let fires = localSleepers.get(paths.state);
      if (!fires) localSleepers.set(paths.state, (fires = new Set()));
      const local = fires;
      local.add(fire);
      const off = (): void => {
        stopWatching();
        local.delete(fire);
        if (local.size === 0 && localSleepers.get(paths.state) === local) localSleepers.delete(paths.state);
      };
      group = { looks, off };
      this.#sleepers.set(paths.name, group);
    }
    const g = group;
    g.looks.add(look);
    return () => {
      g.looks.delete(look);
      if (g.looks.size > 0) return;
      g.off();
      if (this.#sleepers.get(paths.name) === g) this.#sleepers.delete(paths.name);
    };
  }

  async cancel(req: AcquireRequest<FileTicket>, ticket: FileTicket | undefined): Promise<void> {
    await this.#update(req.lockId, NEVER, (s) => {
      const before = s.holders.length + s.queue.length;
      if (ticket) s.queue = s.queue.filter((w) => w.id !== ticket.waiterId);
      // An attempt that failed in flight: drop whatever hold or place of this owner it left.
      else if (req.freshOwner) {
        s.holders = s.holders.filter((h) => h.ownerId !== req.ownerId);
        s.queue = s.queue.filter((w) => w.ownerId !== req.ownerId);
      }
      return { changed: s.holders.length + s.queue.length !== before, value: undefined };
    });
  }

  async extend(grant: Grant<undefined>, ttlMs: number): Promise<Extension> {
    return this.#update(grant.lockId, NEVER, (s, now) => {
      const h = find(s, grant);
      if (!h || h.expiresAt <= now) throw new LockLostError(grant.lockId, 'not-held', { context: { backend: this.name } });
      stretch(h, now + ttlMs);
      return { changed: true, value: { ttlMs } };
    });
  }

  async release(grant: Grant<undefined>): Promise<boolean> {
    const released = await this.#update(grant.lockId, NEVER, (s, now) => {
      const h = find(s, grant);
      // A lease that ran out is not ours to release any more, even if lockDelay still keeps it.
      if (!h || h.expiresAt <= now) return { changed: false, value: false };
      h.count -= 1;
      if (h.count <= 0) s.holders.splice(s.holders.indexOf(h), 1);
      return { changed: true, value: true };
    });
    // One event-loop turn before the releaser's next step (typically its next acquire): a
    // woken waiter of this process, and the watcher's event for one of another, go first.
    if (released && localSleepers.has(lockPaths(this.directory, grant.lockId).state))
      await new Promise<void>((resolve) => setImmediate(resolve));
    return released;
  }

  async inspect(lockId: string): Promise<LockState> {
    let s: FileState;
    try {
      s = this.#read(lockPaths(this.directory, lockId), lockId);
    } catch (err) {
      throw unavailable(this.name, `read of the state of '${lockId}'`, err);
    }
    return viewOf(s, clocksNow());
  }

  /** One page of the locks with a holder or a waiter, in file name order (list.ts). */
  async list(req: ListRequest): Promise<ListPage> {
    try {
      return await listPage(this.directory, req);
    } catch (err) {
      if (err instanceof InvalidArgumentError || req.signal.aborted) throw err;
      throw unavailable(this.name, 'listing of the locks', err, { context: { directory: this.directory } });
    }
  }

  /**
   * End every hold of `lockId` at once (lock delay included: breaking is on purpose) and
   * bump the token counter, so that the next grant's token is above the broken ones by more
   * than one and a broken holder's renewal finds no hold. Waiters keep their places; the
   * write wakes them as a release would.
   */
  async forceRelease(lockId: string): Promise<number> {
    return this.#update(lockId, NEVER, (s) => {
      const ended = s.holders.length;
      if (ended === 0) return { changed: false, value: 0 };
      s.holders = [];
      s.last += 1n;
      return { changed: true, value: ended };
    });
  }

  /**
   * The ids under `req.prefix` whose state file is replaced (every acquire, queue, extend,
   * release, cancel and break writes it), heard from this call's own watch of `locks/`;
   * `null` once it stands and again after the directory was re-created and watched again.
   * Expiry writes nothing and is not heard (changes.ts, docs/backends/file.md "Watching").
   */
  changes(req: ChangesRequest): AsyncIterable<string | null> {
    return changes(join(this.directory, 'locks'), req, this.#pollMs);
  }

  async close(): Promise<void> {
    this.#closed = true;
    this.#watch.close();
  }

  /** True after `close()`. */
  get closed(): boolean {
    return this.#closed;
  }

  /** The state of `lockId` as last written (an empty one when it never was). */
  #read(paths: LockPaths, lockId: string): FileState {
    let text: string;
    try {
      text = readFileSync(paths.state, 'utf8');
    } catch (err) {
      if ((err as { code?: unknown }).code === 'ENOENT') return emptyState(lockId, bootId());
      throw err;
    }
    return parseState(text, lockId, bootId());
  }

  /**
   * Run `change` on the state of `lockId` inside its critical section and write the result
   * when it changed; wait (abortably, with back-off) while another process is inside.
   */
  async #update<T>(lockId: string, signal: AbortSignal, change: (s: FileState, now: number) => Change<T>): Promise<T> {
    const paths = lockPaths(this.directory, lockId);
    for (let backoff = BUSY_FIRST_MS; ; backoff = Math.min(BUSY_CAP_MS, backoff * 2)) {
      signal.throwIfAborted();
      const done = this.#section(paths, lockId, change);
      if (done) {
        // This process's waiters need not wait for the watcher's event (other processes get it).
        if (done.wrote) wakeLocal(paths.state);
        return done.value;
      }
      await sleep(backoff * (0.5 + Math.random()), signal);
    }
  }

  /**
   * True when `err` is a missing `work/` or `locks/` (a cleaner of the temporary directory
   * removed them while unused) and they were made again: the section is tried again. False
   * when both exist, so another missing file fails as it is, never in a loop.
   */
  #recreated(err: unknown): boolean {
    if ((err as { code?: unknown }).code !== 'ENOENT') return false;
    if (existsSync(join(this.directory, 'work')) && existsSync(join(this.directory, 'locks'))) return false;
    try {
      prepareDirectory(this.directory, this.#isDefault);
    } catch {
      return false;
    }
    return true;
  }

  /** One try of the section, synchronous from enter to leave: undefined when it was busy. */
  #section<T>(
    paths: LockPaths,
    lockId: string,
    change: (s: FileState, now: number) => Change<T>,
  ): { value: T; wrote: boolean } | undefined {
    let held;
    try {
      held = tryEnter(paths.mutex, this.#staleMs);
    } catch (err) {
      if (this.#recreated(err)) return undefined;
      throw unavailable(this.name, `critical section of '${lockId}'`, err, { context: { directory: this.directory } });
    }
    if (!held) return undefined;
    try {
      const s = this.#read(paths, lockId);
      const now = monotonicMs();
      const purged = purge(s, now, processAlive);
      const out = change(s, now);
      const wrote = out.changed || purged;
      if (wrote) {
        writeFileSync(paths.tmp, serialize(s));
        // Our section was broken (we were stopped inside it past staleMs): write nothing.
        if (!stillHeld(held)) {
          unlinkSync(paths.tmp);
          return undefined;
        }
        renameSync(paths.tmp, paths.state);
      }
      return { value: out.value, wrote };
    } catch (err) {
      if (err instanceof LockLostError) throw err;
      if (this.#recreated(err)) return undefined;
      throw unavailable(this.name, `update of the state of '${lockId}'`, err, { context: { directory: this.directory } });
    } finally {
      leave(held);
    }
  }
}

function granted(req: AcquireRequest<FileTicket>, token: bigint, reentered: boolean): AcquireResult<FileTicket, undefined> {
  const grant: Grant<undefined> = {
    lockId: req.lockId,
    kind: req.kind,
    ownerId: req.ownerId,
    token,
    ttlMs: req.ttlMs,
    reentered,
    data: undefined,
  };
  return { granted: true, grant };
}

function find(s: FileState, grant: Grant<undefined>): FileHolder | undefined {
  return s.holders.find((h) => h.ownerId === grant.ownerId && h.token === grant.token && h.kind === grant.kind);
}
