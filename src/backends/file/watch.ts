/**
 * One `fs.watch` (inotify on Linux) on a backend's `locks/` directory, shared by every
 * waiter of that backend: an event names the state file that was replaced, and only the
 * waiters of that lock id look again. A watcher that fails leaves the waiters on their
 * bounded fallback poll (docs/backends/file.md, "Waking waiters").
 */
import { watch, type FSWatcher } from 'node:fs';

/** Listeners per file name on one directory. */
export class DirectoryWatch {
  readonly #dir: string;
  readonly #listeners = new Map<string, Set<() => void>>();
  #watcher: FSWatcher | undefined;
  #failed = false;

  constructor(dir: string) {
    this.#dir = dir;
  }

  /** Call `listener` whenever the file `name` is replaced; returns the unsubscribe. */
  on(name: string, listener: () => void): () => void {
    this.#start();
    let set = this.#listeners.get(name);
    if (!set) {
      set = new Set();
      this.#listeners.set(name, set);
    }
    set.add(listener);
    return () => {
      const s = this.#listeners.get(name);
      if (!s) return;
      s.delete(listener);
      if (s.size === 0) this.#listeners.delete(name);
      if (this.#listeners.size === 0) this.close();
    };
  }

  /** Stop watching (a later `on` starts again). */
  close(): void {
    this.#watcher?.close();
    this.#watcher = undefined;
  }

  #start(): void {
    if (this.#watcher || this.#failed) return;
    try {
      const w = watch(this.#dir, { persistent: false }, (_event, filename) => {
        const name = filename === null ? undefined : String(filename);
        if (name === undefined) {
          // The platform did not say which file: everyone looks.
          for (const set of [...this.#listeners.values()]) for (const l of [...set]) l();
          return;
        }
        for (const l of [...(this.#listeners.get(name) ?? [])]) l();
      });
      w.on('error', () => {
        this.#failed = true;
        this.close();
      });
      this.#watcher = w;
    } catch {
      // No watcher (inotify limits, an unsupported file system): the fallback poll remains.
      this.#failed = true;
    }
  }
}
