/**
 * One library watch per path and kind, fanned out to every listener of this session. The
 * server keeps one watch per path and connection anyway, and the library would fire a
 * duplicate per registration; so N waiters watching one path in one session cost one
 * server watch. See docs/backends/zookeeper.md ("Client library").
 */
import { EVENT, safe, type LibEvent, type LibWatcher } from './driver.js';

/** A listener gets the event type (`EVENT.SESSION_ENDED`: the watch will never fire). */
export type WatchListener = (type: number) => void;

/** The listeners of one kind of watch (data or children), by path. */
export class WatchTable {
  readonly #byPath = new Map<string, Set<WatchListener>>();

  /**
   * Add `listener` to the listeners of `path`; returns the library watcher to pass with
   * the request, or undefined when one is already registered for the path.
   */
  add(path: string, listener: WatchListener): LibWatcher | undefined {
    let set = this.#byPath.get(path);
    const first = set === undefined;
    if (!set) {
      set = new Set();
      this.#byPath.set(path, set);
    }
    set.add(listener);
    if (!first) return undefined;
    return (event: LibEvent) => {
      const listeners = this.#byPath.get(path);
      this.#byPath.delete(path);
      const type = eventType(event);
      for (const l of listeners ? [...listeners] : []) safe(() => l(type));
    };
  }

  /**
   * A watch request failed. If it was the one carrying the library watcher, no watch is
   * registered for anyone on that path: wake the others ("check again").
   */
  failed(path: string, listener: WatchListener, carried: boolean): void {
    const set = this.#byPath.get(path);
    if (!set) return;
    set.delete(listener);
    if (!carried) return;
    this.#byPath.delete(path);
    for (const l of [...set]) safe(() => l(EVENT.SESSION_ENDED));
  }

  /** Stop telling `listener` about `path` (the watch itself stays until the server fires it). */
  remove(path: string, listener: WatchListener): void {
    this.#byPath.get(path)?.delete(listener);
  }

  /** The session died: its watches never fire, so wake every listener now. */
  endAll(): void {
    const all = [...this.#byPath.values()];
    this.#byPath.clear();
    for (const set of all) for (const l of [...set]) safe(() => l(EVENT.SESSION_ENDED));
  }
}

function eventType(event: LibEvent): number {
  try {
    return event.getType();
  } catch {
    return EVENT.SESSION_ENDED;
  }
}
