/**
 * `changes()` on ZooKeeper: the lock ids under a prefix whose holders or waiters changed, from
 * child watches instead of a poll. One child watch on the chroot (lock nodes created and
 * reaped) and one on each lock node under the prefix (queue nodes joining and leaving), plus
 * its `locks`/`leases` folders once a semaphore created them. Watches are one-shot: each fire
 * re-reads the children with a new watch in one request, and only then reports the id, so a
 * change after the core's look is always heard. See docs/backends/zookeeper.md, "Watching".
 */
import { EVENT } from './driver.js';
import { GATE_DIR, LEASES_DIR } from './layout.js';
import { lockIdOf } from './list.js';
import type { ZkSession } from './session.js';
import type { WatchListener } from './watches.js';

/** What a feed needs from the backend. */
export interface FeedHost {
  /** The live session (a new one after an expiry). */
  connect(signal: AbortSignal): Promise<ZkSession>;
  /** True once the backend is closed: the feed ends instead of reconnecting. */
  isClosed(): boolean;
  /** The chroot ('' for none). */
  readonly chroot: string;
  /** Counters: the feeds open and the child watches they hold now. */
  readonly stats: { changeFeeds: number; changeWatches: number };
}

/** Pause between two attempts to set the watches up again while the ensemble is unreachable. */
const RETRY_MS = 1_000;

/** The ids that changed under `prefix`, `null` after each (re)subscription, until `signal` aborts. */
export async function* watchChanges(host: FeedHost, prefix: string, signal: AbortSignal): AsyncGenerator<string | null> {
  const feed = new ChangeFeed(host, prefix, signal);
  host.stats.changeFeeds += 1;
  try {
    yield* feed.run();
  } finally {
    feed.close();
    host.stats.changeFeeds -= 1;
  }
}

/** One `changes()` subscription: its watches, and the ids they reported that are not yielded yet. */
class ChangeFeed {
  readonly #host: FeedHost;
  readonly #prefix: string;
  readonly #signal: AbortSignal;
  readonly #pending = new Set<string>();
  /** Encoded names of the lock nodes under the prefix that the last look at the chroot saw. */
  readonly #known = new Set<string>();
  /** Child watch listeners set by this feed, by path. */
  readonly #armed = new Map<string, WatchListener>();
  /** Bumped on every teardown: a listener of an older generation is ignored. */
  #gen = 0;
  #reset = true;
  #rootArmed = false;
  #session: ZkSession | undefined;
  #offState: (() => void) | undefined;
  #offRoot: (() => void) | undefined;
  #wake: (() => void) | undefined;

  constructor(host: FeedHost, prefix: string, signal: AbortSignal) {
    this.#host = host;
    this.#prefix = prefix;
    this.#signal = signal;
  }

  async *run(): AsyncGenerator<string | null> {
    while (!this.#signal.aborted) {
      if (this.#reset) {
        if (await this.#subscribe()) yield null;
        else if (this.#host.isClosed()) return;
        else await this.#pause(RETRY_MS);
        continue;
      }
      const next = this.#pending.values().next();
      if (next.done === true) {
        await this.#pause();
        continue;
      }
      this.#pending.delete(next.value);
      yield next.value;
    }
  }

  /** Drop every listener of this feed (the server's watches fire once more, into nothing). */
  close(): void {
    this.#teardown();
    this.#wake?.();
  }

  /** Set every watch up from scratch; false when it failed or was overtaken by another loss. */
  async #subscribe(): Promise<boolean> {
    this.#reset = false;
    try {
      this.#teardown();
      const gen = this.#gen;
      const s = await this.#host.connect(this.#signal);
      if (gen !== this.#gen) throw new Error('superseded');
      this.#session = s;
      // Watches survive a reconnect of the same session, but a change while disconnected may
      // have been missed by the core's last look: reporting `null` makes it look again.
      this.#offState = s.onState((state) => {
        if (state !== 'connecting' && state !== 'disconnected') this.#lost(gen);
      });
      await this.#watchRoot(s, gen);
      // Everything reported so far is covered by the full look that `null` asks for.
      this.#pending.clear();
      if (gen !== this.#gen) this.#reset = true;
      return !this.#reset;
    } catch {
      this.#reset = true;
      return false;
    }
  }

  #teardown(): void {
    this.#gen += 1;
    this.#offState?.();
    this.#offState = undefined;
    this.#offRoot?.();
    this.#offRoot = undefined;
    for (const [path, listener] of this.#armed) this.#session?.unwatchChildren(path, listener);
    this.#host.stats.changeWatches -= this.#armed.size + (this.#rootArmed ? 1 : 0);
    this.#rootArmed = false;
    this.#armed.clear();
    this.#known.clear();
  }

  /** A watch of generation `gen` fired: re-arm through `work`, or start over if that fails. */
  #on(gen: number, type: number, work: () => Promise<void>): void {
    if (gen !== this.#gen) return;
    if (type === EVENT.SESSION_ENDED) return this.#lost(gen);
    work().catch(() => this.#lost(gen));
  }

  #lost(gen: number): void {
    if (gen !== this.#gen) return;
    this.#reset = true;
    this.#wake?.();
  }

  #report(name: string): void {
    const lockId = lockIdOf(name);
    if (lockId === undefined) return;
    this.#pending.add(lockId);
    this.#wake?.();
  }

  /** Watch the chroot's children; arm the lock nodes that appeared, report them and those that went. */
  async #watchRoot(s: ZkSession, gen: number): Promise<void> {
    const root = this.#host.chroot === '' ? '/' : this.#host.chroot;
    const listener: WatchListener = (type) => this.#on(gen, type, () => this.#watchRoot(s, gen));
    const { children, off } = await s.watchChildrenOrCreation(root, listener);
    if (gen !== this.#gen) return off();
    if (!this.#rootArmed) this.#host.stats.changeWatches += 1;
    this.#rootArmed = true;
    this.#offRoot = off;
    const names = new Set((children ?? []).filter((n) => this.#ours(n)));
    const fresh = [...names].filter((n) => !this.#known.has(n));
    const gone = [...this.#known].filter((n) => !names.has(n));
    for (const n of fresh) this.#known.add(n);
    for (const n of gone) this.#known.delete(n);
    await Promise.all(fresh.map((n) => this.#watchLock(s, gen, n, `${this.#host.chroot}/${n}`)));
    if (gen !== this.#gen) return;
    for (const n of [...fresh, ...gone]) this.#report(n);
  }

  #ours(name: string): boolean {
    const lockId = lockIdOf(name);
    return lockId !== undefined && lockId.startsWith(this.#prefix);
  }

  /**
   * Watch the children of a lock node (or of its `locks`/`leases` folder); on the lock node,
   * also arm the folders it has. A node that is gone is dropped: the chroot's watch sees it
   * come back.
   */
  async #watchLock(s: ZkSession, gen: number, name: string, path: string): Promise<void> {
    const listener: WatchListener = (type) =>
      this.#on(gen, type, async () => {
        this.#disarm(path);
        await this.#watchLock(s, gen, name, path);
        if (gen === this.#gen) this.#report(name);
      });
    this.#arm(path, listener);
    const children = await s.watchChildren(path, listener);
    if (gen !== this.#gen) return;
    if (children === null) return this.#disarm(path);
    if (path === `${this.#host.chroot}/${name}`) {
      const dirs = [GATE_DIR, LEASES_DIR].filter((d) => children.includes(d) && !this.#armed.has(`${path}/${d}`));
      await Promise.all(dirs.map((d) => this.#watchLock(s, gen, name, `${path}/${d}`)));
    }
  }

  #arm(path: string, listener: WatchListener): void {
    if (!this.#armed.has(path)) this.#host.stats.changeWatches += 1;
    this.#armed.set(path, listener);
  }

  #disarm(path: string): void {
    const listener = this.#armed.get(path);
    if (listener === undefined) return;
    this.#armed.delete(path);
    this.#host.stats.changeWatches -= 1;
    this.#session?.unwatchChildren(path, listener);
  }

  /** Until something is reported, the subscription is lost, `signal` aborts, or `ms` pass. */
  #pause(ms?: number): Promise<void> {
    return new Promise<void>((resolve) => {
      const done = (): void => {
        clearTimeout(timer);
        this.#signal.removeEventListener('abort', done);
        this.#wake = undefined;
        resolve();
      };
      const timer = ms === undefined ? undefined : setTimeout(done, ms);
      this.#wake = done;
      this.#signal.addEventListener('abort', done, { once: true });
      if (this.#signal.aborted) done();
    });
  }
}
