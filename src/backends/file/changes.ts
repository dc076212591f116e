/**
 * `changes()` of the file backend: the lock ids whose state file was replaced, heard from an
 * `fs.watch` (inotify on Linux) on `<dir>/locks/` (docs/backends/file.md, "Watching").
 *
 * Every change of a lock renames its next state over `locks/<name>`, so an event there names
 * the lock: a short id is spelled out in hex in the name, a long one (`h` + its SHA-256) is
 * read back from the file, which stores the full id. Nothing is added to the acquire or
 * release path: the watch hears the renames they already make. Expiry writes nothing and is
 * not heard; the core re-inspects a hold when its lease ends.
 */
import { statSync, watch, type FSWatcher } from 'node:fs';
import { readFile } from 'node:fs/promises';
import { basename, join } from 'node:path';
import { sleep } from '../kit.js';
import { bootId, fileName } from './layout.js';
import { parseState } from './state.js';

/** A state file's name (layout.ts): anything else in `locks/` is not a lock. */
const NAME = /^(?:h[0-9a-f]{64}|x(?:[0-9a-f]{2}){1,100})$/;
/** Hashed names whose id is remembered (a name always stands for the same id). */
const HASHED_CACHE = 10_000;

/** What a {@link changes} call watches. */
export interface ChangesRequest {
  readonly prefix: string;
  readonly signal: AbortSignal;
}

/**
 * One watch of a `locks/` directory: the names changed since the last {@link take}, and
 * whether the watch still stands (the directory removed or replaced ends it).
 */
class DirectoryFeed {
  readonly #dir: string;
  #watcher: FSWatcher | undefined;
  #inode = 0;
  #names = new Set<string>();
  /** An event that named no file: every lock may have changed. */
  #everything = false;
  #wake: (() => void) | undefined;

  constructor(dir: string) {
    this.#dir = dir;
  }

  get watching(): boolean {
    return this.#watcher !== undefined;
  }

  /** Watch the directory; false when it cannot be (missing, no inotify watch left). */
  start(): boolean {
    try {
      const inode = statSync(this.#dir).ino;
      const w = watch(this.#dir, (_event, filename) => this.#heard(filename === null ? undefined : String(filename)));
      w.on('error', () => this.#lost());
      this.#watcher = w;
      this.#inode = inode;
      return true;
    } catch {
      return false;
    }
  }

  #heard(name: string | undefined): void {
    if (name === undefined) this.#everything = true;
    else if (NAME.test(name)) this.#names.add(name);
    // The directory's own name: it was removed or moved away (inotify's IN_DELETE_SELF or
    // IN_MOVE_SELF), after which this watch hears nothing more.
    else if (name === basename(this.#dir) && !this.#stillThere()) this.#lost();
    this.#wake?.();
  }

  #stillThere(): boolean {
    try {
      return statSync(this.#dir).ino === this.#inode;
    } catch {
      return false;
    }
  }

  #lost(): void {
    this.close();
    this.#wake?.();
  }

  /** Resolves when something was heard, the watch was lost, or `signal` aborted. */
  async next(signal: AbortSignal): Promise<void> {
    if (this.#names.size > 0 || this.#everything || !this.watching || signal.aborted) return;
    await new Promise<void>((resolve) => {
      const done = (): void => {
        this.#wake = undefined;
        signal.removeEventListener('abort', done);
        resolve();
      };
      this.#wake = done;
      signal.addEventListener('abort', done, { once: true });
    });
  }

  /** The names heard since the last call, and whether an event named none. */
  take(): { readonly names: string[]; readonly everything: boolean } {
    const out = { names: [...this.#names], everything: this.#everything };
    this.#names = new Set();
    this.#everything = false;
    return out;
  }

  close(): void {
    this.#watcher?.close();
    this.#watcher = undefined;
  }
}

/** The lock id of each state file name: decoded for short ids, read from the file for hashed ones. */
class IdsOfNames {
  readonly #dir: string;
  readonly #hashed = new Map<string, string>();

  constructor(dir: string) {
    this.#dir = dir;
  }

  /** The id `name` stands for, or undefined when it cannot be known (a hashed file gone or unreadable). */
  async of(name: string): Promise<string | undefined> {
    // The API refuses ids with a lone surrogate, so the UTF-8 in the name decodes exactly.
    if (name.startsWith('x')) return Buffer.from(name.slice(1), 'hex').toString('utf8');
    const known = this.#hashed.get(name);
    if (known !== undefined) return known;
    try {
      const s = parseState(await readFile(join(this.#dir, name), 'utf8'), undefined, bootId());
      if (fileName(s.lockId) !== name) return undefined;
      if (this.#hashed.size >= HASHED_CACHE) this.#hashed.clear();
      this.#hashed.set(name, s.lockId);
      return s.lockId;
    } catch {
      // Gone or hand-edited: inspect() of its id reports the error; nothing to name here.
      return undefined;
    }
  }
}

/**
 * The ids under `req.prefix` whose state file in `locksDir` is replaced, as heard; `null`
 * once the watch stands, and again after it was lost (the directory removed or replaced)
 * and stands again, or when an event named no file. A directory that cannot be watched is
 * tried again every `retryMs`. Ends when `req.signal` aborts, never throwing after that.
 */
export async function* changes(locksDir: string, req: ChangesRequest, retryMs: number): AsyncGenerator<string | null> {
  const { prefix, signal } = req;
  const feed = new DirectoryFeed(locksDir);
  const ids = new IdsOfNames(locksDir);
  try {
    while (!signal.aborted) {
      if (!feed.watching) {
        if (feed.start()) yield null;
        else if (!(await pause(retryMs, signal))) return;
        continue;
      }
      await feed.next(signal);
      const heard = feed.take();
      if (signal.aborted) return;
      if (heard.everything) yield null;
      for (const name of heard.names) {
        const id = await ids.of(name);
        if (signal.aborted) return;
        if (id !== undefined && id.startsWith(prefix)) yield id;
      }
    }
  } finally {
    feed.close();
  }
}

/** Sleep `ms` (the timer is cleared on abort); false when `signal` aborted. */
async function pause(ms: number, signal: AbortSignal): Promise<boolean> {
  try {
    await sleep(ms, signal);
    return true;
  } catch {
    return false;
  }
}
