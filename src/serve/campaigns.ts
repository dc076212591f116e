/**
 * Campaigns that wait, and their withdrawal when the session resigns (docs/serve.md,
 * "Elections"). A waiting campaign is a long poll of its session on one replica; `resign`
 * may reach another. On the replica that answers the resign, the session's waiting campaigns
 * in that election are aborted at once; on the others they follow a marker record of the
 * session and election (a reserved lock id whose token the resign moves), read whenever the
 * backend's `waitForChange` for it returns (a notification or the engine's fallback poll). A
 * withdrawn campaign gives up its queue entry as any abandoned wait does and answers
 * `409 CAMPAIGN_WITHDRAWN`.
 */
import { createHash } from 'node:crypto';
import type { Locker } from '../locker.js';
import { oneShot, randomId, RESERVED_PREFIX } from './records.js';
import { ServeError } from './sessions.js';

/** What a campaign withdrawn by its session's resign answers. */
export function withdrawnError(session: string, name: string): ServeError {
  return new ServeError(409, 'CAMPAIGN_WITHDRAWN', `session '${session}' resigned from election '${name}' while this campaign waited`);
}

/** The marker of a session's campaigns in one election: a short, fixed-length reserved lock id. */
function markerId(session: string, name: string): string {
  return `${RESERVED_PREFIX}r/${session}/${createHash('sha256').update(name).digest('base64url').slice(0, 22)}`;
}

/** The waiting campaigns of this replica, by session and election. */
export class Campaigns {
  readonly #waiting = new Map<string, Set<AbortController>>();
  constructor(private readonly locker: Locker) {}

  /**
   * Run one campaign (`waits`: a long poll; one attempt needs no following). `campaign`'s
   * signal aborts, with {@link withdrawnError}, when the session resigns from `name` meanwhile.
   */
  async run<T>(session: string, name: string, waits: boolean, campaign: (signal: AbortSignal) => Promise<T>): Promise<T> {
    if (!waits) return campaign(new AbortController().signal);
    const key = `${session}\0${name}`;
    const withdraw = new AbortController();
    const mine = this.#waiting.get(key) ?? new Set<AbortController>();
    mine.add(withdraw);
    this.#waiting.set(key, mine);
    const done = new AbortController();
    try {
      // The marker's token before the first attempt: a resign after it moves the token.
      const from = await this.#token(markerId(session, name));
      void this.#follow(session, name, from, withdraw, done.signal);
      return await campaign(withdraw.signal);
    } finally {
      done.abort();
      mine.delete(withdraw);
      if (mine.size === 0 && this.#waiting.get(key) === mine) this.#waiting.delete(key);
    }
  }

  /** Withdraw the session's waiting campaigns in `name`, on this replica and on the others. */
  async withdraw(session: string, name: string): Promise<void> {
    for (const c of this.#waiting.get(`${session}\0${name}`) ?? []) c.abort(withdrawnError(session, name));
    if (await this.#mayWaitElsewhere(session, name)) await this.#bump(markerId(session, name));
  }

  /** Whether another replica may hold a waiting campaign of the session (a marker write is needed). */
  async #mayWaitElsewhere(session: string, name: string): Promise<boolean> {
    if (!(await this.locker.backend()).capabilities.fair) return true; // unfair waits are not queued: nothing to read
    const info = await this.locker.inspect(name);
    return info.waiters > info.queue.length || info.queue.some((w) => w.ownerId.includes(`#${session}.`));
  }

  /** Move the marker's token: one hold taken and given back (it leaves only the counter every lock keeps). */
  async #bump(id: string): Promise<void> {
    const backend = await this.locker.backend();
    const got = await backend.tryAcquire(oneShot(id, randomId(9), 10_000, '', false));
    // Refused: another resign holds it this instant, which moved the token just as well.
    if (got.granted) await backend.release(got.grant);
  }

  async #token(id: string): Promise<bigint> {
    const info = await this.locker.inspect(id);
    return info.holders.reduce((max, h) => (h.token > max ? h.token : max), info.lastToken ?? 0n);
  }

  /** Until `done`: wake on each change of the marker; withdraw the campaign once its token moved past `from`. */
  async #follow(session: string, name: string, from: bigint, withdraw: AbortController, done: AbortSignal): Promise<void> {
    const backend = await this.locker.backend();
    const id = markerId(session, name);
    try {
      while (!done.aborted) {
        await backend.waitForChange(id, undefined, done);
        if (!done.aborted && (await this.#token(id)) > from) return withdraw.abort(withdrawnError(session, name));
      }
    } catch {
      // The campaign ended (done), or the backend failed: the campaign's own wait reports that.
    }
  }
}
