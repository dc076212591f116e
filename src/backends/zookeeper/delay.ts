/**
 * Lock-delay on ZooKeeper (docs/backends/zookeeper.md, "Lock-delay"). The only server-side
 * timer ZooKeeper has is a session's expiry, so the delay rides on a second, longer session:
 * a holder granted with `lockDelayMs` creates a *marker* `<lock>/_delay_x_<uuid>` (EPHEMERAL;
 * `_delay_r_` for a read hold) on a delay session whose timeout outlasts the main one by at
 * least the delay. A clean release deletes the marker with the lock node; a holder that
 * vanishes leaves it, and a marker whose lock node (same protected uuid) is gone blocks the
 * holds its own hold excluded:
 *
 * - the process crashed: the ensemble expires both sessions, the marker's last;
 * - the main session expired under a live process (a partition): the marker is deleted by
 *   its own client the delay after the loss was learned (which is after the expiry);
 * - the hold's ttl lapsed without renewal: the same, the delay after its client deleted it.
 *
 * An acquisition that asks for a delay says so in its uuid (version nibble `d`), so that a
 * waiter behind it knows that the deletion of its node is not a hand-off by itself and looks
 * for a marker before it holds.
 */
import { randomUUID } from 'node:crypto';
import { InvalidArgumentError, unavailable, type AcquireRequest, type AcquireResult, type Grant, type LockKind } from '../kit.js';
import { UnsupportedError } from '../../errors.js';
import { MODE, RC, ZkError, isConnectionLoss } from './driver.js';
import { protectedPrefix, uuidOf } from './layout.js';
import { Deleter } from './nodes.js';
import type { ZkGrantData, ZkTicket } from './recipe.js';
import { ZkSession } from './session.js';

type Result = AcquireResult<ZkTicket, ZkGrantData>;

/**
 * One attempt of an acquisition with `req.lockDelayMs`: the delay session is checked before
 * the first node is created, a loss of the hold reaches the markers, and a grant is marked
 * before it is handed out (a grant that cannot be marked is given back).
 */
export async function attemptWithDelay(
  markers: DelayMarkers,
  req: AcquireRequest<ZkTicket>,
  t: ZkTicket,
  attempt: (req: AcquireRequest<ZkTicket>) => Promise<Result>,
  giveBack: (grant: Grant<ZkGrantData>) => Promise<unknown>,
): Promise<Result> {
  if (req.lockDelayMs <= 0) return attempt(req);
  if (req.kind === 'semaphore') throw new UnsupportedError('zookeeper', 'lockDelayMs on semaphores');
  if (!req.ticket) await markers.prepare(t.session.sessionTimeoutMs, req.lockDelayMs);
  const box: { data?: ZkGrantData; lost?: boolean } = {};
  const onLost: AcquireRequest['onLost'] = (reason, cause) => {
    if (box.data) markers.lost(box.data);
    else box.lost = true;
    req.onLost(reason, cause);
  };
  const r = await attempt({ ...req, onLost });
  if (!r.granted) return r;
  box.data = r.grant.data;
  if (box.lost) markers.lost(box.data);
  try {
    await markers.mark(r.grant, t.uuid, t.paths.base, req.lockDelayMs);
  } catch (err) {
    await giveBack(r.grant).catch(() => undefined);
    throw err;
  }
  return r;
}

/** The name of a marker starts with this (no Curator lock name in it: Curator sorts it last). */
export const DELAY_PREFIX = '_delay_';

/** The uuid of an acquisition that asks for a lock-delay: a v4 uuid with its version nibble `d`. */
export function delayUuid(): string {
  const u = randomUUID();
  return `${u.slice(0, 14)}d${u.slice(15)}`;
}

/** Whether the queue node `name` was created by an acquisition that asked for a lock-delay. */
export function asksDelay(name: string): boolean {
  return uuidOf(name)?.[14] === 'd';
}

/** The marker's name: `_delay_r_<uuid>` for a read hold (readers still share), `_delay_x_<uuid>` for any other. */
export function markerName(kind: LockKind, uuid: string): string {
  return `${DELAY_PREFIX}${kind === 'read' ? 'r' : 'x'}_${uuid}`;
}

/**
 * The first marker among a lock node's `children` whose holder's node is gone and whose hold
 * excludes a hold of `kind`: it blocks the lock for that hold.
 */
export function orphanMarker(children: readonly string[], kind: LockKind): string | undefined {
  for (const c of children) {
    if (!c.startsWith(DELAY_PREFIX)) continue;
    const mode = c.slice(DELAY_PREFIX.length, DELAY_PREFIX.length + 1);
    if (mode === 'r' && kind === 'read') continue;
    const prefix = protectedPrefix(c.slice(DELAY_PREFIX.length + 2));
    if (!children.some((n) => n.startsWith(prefix))) return c;
  }
  return undefined;
}

/**
 * The delay session's timeout for a main session of `mainMs` and a delay of `delayMs`. The
 * client pings an idle session every third of its timeout, so at a crash the delay session
 * was last heard up to a third of its timeout earlier, while the main one may expire up to a
 * tick (at most half its timeout: the ensemble's minimum session is two ticks) after its
 * timeout. Two thirds of the delay session must cover both and the delay.
 */
export function delaySessionTimeout(mainMs: number, delayMs: number): number {
  return Math.ceil(1.5 * (1.5 * mainMs + delayMs));
}

/** The longest delay a delay session of `negotiatedMs` carries beside a main session of `mainMs`. */
function carried(negotiatedMs: number, mainMs: number): number {
  return Math.floor((negotiatedMs * 2) / 3 - 1.5 * mainMs);
}

interface Marker {
  readonly session: ZkSession;
  readonly path: string;
  readonly delayMs: number;
  timer: NodeJS.Timeout | undefined;
}

/** What the markers need of the backend. */
export interface DelayHost {
  readonly connectString: string;
  readonly connectTimeoutMs: number;
}

/** The delay sessions and markers of one backend. */
export class DelayMarkers {
  readonly #host: DelayHost;
  /** One delay session per timeout in use (usually one: an application picks one delay). */
  readonly #sessions = new Map<number, ZkSession>();
  readonly #markers = new Map<ZkGrantData, Marker>();
  /** Holds lost before their marker was written: it is deleted the delay after it is. */
  readonly #lostEarly = new WeakSet<ZkGrantData>();
  /** Holds released before their marker was written: it is deleted as soon as it is. */
  readonly #releasedEarly = new WeakSet<ZkGrantData>();
  readonly #deleter = new Deleter();

  constructor(host: DelayHost) {
    this.#host = host;
  }

  /** Write the marker of a hold just granted with `delayMs`, before the grant is handed out. */
  async mark(grant: Grant<ZkGrantData>, uuid: string, base: string, delayMs: number): Promise<void> {
    const { lockId, data } = grant;
    const s = await this.#session(data.session.sessionTimeoutMs, delayMs);
    const path = `${base}/${markerName(grant.kind, uuid)}`;
    for (let attempt = 0; ; attempt++) {
      try {
        await s.create(path, Buffer.from(String(delayMs)), MODE.EPHEMERAL);
        break;
      } catch (err) {
        // A create whose reply was lost may have landed: the name is ours alone.
        if (err instanceof ZkError && err.rc === RC.NODEEXISTS && attempt > 0) break;
        if (!isConnectionLoss(err) || attempt >= 2 || !s.alive) throw unavailable('zookeeper', `lock-delay marker of '${lockId}'`, err);
      }
    }
    if (this.#releasedEarly.has(data)) {
      await this.#deleter.delete(s, path).catch(() => undefined);
      return;
    }
    const m: Marker = { session: s, path, delayMs, timer: undefined };
    this.#markers.set(data, m);
    if (this.#lostEarly.has(data)) this.lost(data);
  }

  /** The hold vanished without a release: its marker stays for the delay, from now. */
  lost(data: ZkGrantData): void {
    const m = this.#markers.get(data);
    if (!m) {
      this.#lostEarly.add(data);
      return;
    }
    if (m.timer) return;
    m.timer = setTimeout(() => {
      this.#markers.delete(data);
      if (m.session.alive) this.#deleter.delete(m.session, m.path).catch(() => undefined);
    }, m.delayMs);
    m.timer.unref();
  }

  /** A clean release: the marker goes now (a hold already lost keeps its delay). */
  async release(data: ZkGrantData, wasHeld: boolean): Promise<void> {
    if (!wasHeld) return;
    const m = this.#markers.get(data);
    if (!m) {
      this.#releasedEarly.add(data);
      return;
    }
    if (m.timer) return;
    this.#markers.delete(data);
    // Retried in the background when it fails now: a marker left behind would block the lock.
    if (m.session.alive) await this.#deleter.delete(m.session, m.path);
  }

  /** A forced release ends the delay too: delete every marker under `base`. */
  async clear(s: ZkSession, base: string): Promise<void> {
    const children = (await s.children(base).catch(() => [])).filter((c) => c.startsWith(DELAY_PREFIX));
    await Promise.all(children.map((c) => s.delete(`${base}/${c}`)));
  }

  /** Open (or find) the delay session for these timeouts; InvalidArgumentError when the ensemble cannot carry the delay. */
  async prepare(mainMs: number, delayMs: number): Promise<void> {
    await this.#session(mainMs, delayMs);
  }

  async #session(mainMs: number, delayMs: number): Promise<ZkSession> {
    const wanted = delaySessionTimeout(mainMs, delayMs);
    let s = this.#sessions.get(wanted);
    if (!s?.alive) {
      s = ZkSession.start({
        connectString: this.#host.connectString,
        sessionTimeoutMs: wanted,
        connectTimeoutMs: this.#host.connectTimeoutMs,
      });
      this.#sessions.set(wanted, s);
    }
    try {
      await s.ready;
    } catch (err) {
      throw unavailable('zookeeper', 'open the lock-delay session', err);
    }
    if (s.sessionTimeoutMs < wanted) {
      throw new InvalidArgumentError(
        'lockDelayMs',
        `zookeeper: the ensemble's maxSessionTimeout (${s.sessionTimeoutMs} ms) carries a lock-delay of at most ${Math.max(0, carried(s.sessionTimeoutMs, mainMs))} ms beside ${mainMs} ms sessions`,
      );
    }
    return s;
  }

  /** Close: every marker goes with its session (a closing backend released its holds). */
  close(): void {
    this.#deleter.close();
    for (const m of this.#markers.values()) clearTimeout(m.timer);
    this.#markers.clear();
    for (const s of this.#sessions.values()) s.close();
    this.#sessions.clear();
  }

  /** Testing only: a crash leaves the markers until the ensemble expires their sessions. */
  abandon(): void {
    this.#deleter.close();
    for (const m of this.#markers.values()) clearTimeout(m.timer);
    this.#markers.clear();
    for (const s of this.#sessions.values()) s.abandon();
    this.#sessions.clear();
  }
}
