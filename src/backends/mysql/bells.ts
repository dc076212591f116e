/**
 * Server-side wake-ups of MySQL/MariaDB waiters in other processes (docs/backends/mysql.md,
 * "Waiting"). MySQL has no notifications, so a first waiter that has waited a few ms blocks on
 * the server instead of its timer: on a connection of its own it takes a named lock that names
 * its queue entry (`GET_LOCK('lsb:<hash>:<seq>', 0)`, a registration only: nobody ever waits
 * on it) and sleeps (`SLEEP(poll)`). Every commit that changes a lock id reads, in its own
 * batch, which connection holds the name of the id's first waiter (`IS_USED_LOCK`), and after
 * the COMMIT sends it `KILL QUERY`: the sleep ends and the waiter attempts at once. Nothing is
 * held across a critical section: the named lock lives only while its owner waits, on a bell
 * connection that runs nothing else (a stray kill can only end a sleep early).
 *
 * Only liveness depends on it: a release that commits before the waiter's name is taken, a
 * refused KILL (another user), a proxy that renumbers connections, all bell connections busy —
 * each leaves the waiter to its poll, which still runs (the sleep lasts one poll interval).
 */
import { createHash } from 'node:crypto';
import type { Pool, PoolConnection } from 'mysql2/promise';
import { causeCode } from '../kit.js';
import type { SqlResult, Stmt } from '../sql/types.js';

/** MySQL's error when the KILL names another user's connection (no CONNECTION_ADMIN / SUPER). */
const DENIED = 'ER_KILL_DENIED_ERROR';
/** The sleep was ended by a KILL QUERY (MySQL 8 reports it as an error on some paths). */
const INTERRUPTED = 'ER_QUERY_INTERRUPTED';

/**
 * The bell connections sleeping now in this process, by scope (server, database, tables):
 * a commit of this process wakes those through the process's own registry
 * (docs/backends/mysql.md, "Waiting"), so it does not ring them.
 */
const sleepingByScope = new Map<string, Set<number>>();
/** An abandoned sleep is ended this much later: out of the way of the attempt that follows the wake-up. */
const ABANDON_KILL_MS = 5;

/** Close a connection now (it may be closed already). */
function drop(conn: PoolConnection): void {
  try {
    conn.destroy();
  } catch {
    // Already gone.
  }
}

/** The bells of one backend: its own small pool of waiting connections. */
export class Bells {
  readonly #waitPool: Pool;
  readonly #killPool: Pool;
  readonly #limit: number;
  readonly #scope: string;
  /** Whether a live (or lock-delayed) hold of the id remains: `?` is the lock id. */
  readonly #held: string;
  /** Bell statements of announcements, to find their results among the others. */
  readonly #stmts = new WeakSet<Stmt>();
  /** Bell connections of this process sleeping on this scope. */
  readonly #sleeping: Set<number>;
  /** This backend's bell connections now in use (destroyed on close: a sleep would hold up the pool's end). */
  readonly #armed = new Set<PoolConnection>();
  #inUse = 0;
  #denied = false;
  #closed = false;

  /**
   * @param waitPool connections that only ever sleep on a bell (`limit` of them at most)
   * @param killPool where the KILL QUERY of a ring is sent
   * @param scope database and tables: the named locks are server-wide
   * @param holders the holders table, and the database's clock in µs (SQL)
   */
  constructor(waitPool: Pool, killPool: Pool, limit: number, scope: string, holders: { table: string; nowSql: string }) {
    this.#waitPool = waitPool;
    this.#killPool = killPool;
    this.#limit = limit;
    this.#scope = scope;
    this.#held = `EXISTS (SELECT 1 FROM ${holders.table} WHERE lock_id = ? AND expires_us + lock_delay_ms * 1000 > ${holders.nowSql})`;
    const sleeping = sleepingByScope.get(scope) ?? new Set<number>();
    sleepingByScope.set(scope, sleeping);
    this.#sleeping = sleeping;
  }

  /** The name prefix of `lockId`'s bells (a GET_LOCK name is at most 64 characters). */
  #prefix(lockId: string): string {
    return `lsb:${createHash('sha1').update(this.#scope).update('\0').update(lockId).digest('hex').slice(0, 32)}:`;
  }

  /** The statement that reads `lockId`'s first live waiter (`seq`) and the connection of its bell, if it sleeps on one (`bell`). */
  announce(queueTable: string, nowSql: string, lockId: string): Stmt {
    const stmt: Stmt = {
      sql: `SELECT seq, IS_USED_LOCK(CONCAT(?, seq)) AS bell FROM ${queueTable} WHERE lock_id = ? AND expires_us > ${nowSql} ORDER BY seq LIMIT 1`,
      params: [this.#prefix(lockId), lockId],
    };
    this.#stmts.add(stmt);
    return stmt;
  }

  /** The connections the bell statements among `stmts` found (to ring once the batch committed). */
  found(stmts: readonly Stmt[], results: readonly SqlResult[], into: number[]): void {
    stmts.forEach((s, i) => {
      if (!this.#stmts.has(s)) return;
      const id = Number(results[i]?.rows[0]?.['bell'] ?? 0);
      if (id > 0 && !this.#sleeping.has(id)) into.push(id);
    });
  }

  /** End the sleep of connections `ids` (after the commit that concerns them); never throws. */
  ring(ids: readonly number[]): void {
    if (this.#denied) return;
    for (const id of ids) {
      this.#killPool.query(`KILL QUERY ${Math.trunc(id)}`).catch((err: unknown) => {
        // Another user's connection: this backend cannot ring, its waiters' polls remain.
        if (causeCode(err) === DENIED) this.#denied = true;
      });
    }
  }

  /**
   * Sleep on the server until a commit rings this waiter (true), `ms` pass (false) or `signal`
   * aborts; undefined when no bell could be armed (all in use, or the server refused).
   */
  async wait(lockId: string, seq: bigint, ms: number, signal: AbortSignal): Promise<boolean | undefined> {
    if (this.#closed || this.#inUse >= this.#limit || signal.aborted) return undefined;
    this.#inUse += 1;
    let conn: PoolConnection | undefined;
    try {
      conn = await this.#waitPool.getConnection();
      this.#armed.add(conn);
      return await this.#sleep(conn, lockId, `${this.#prefix(lockId)}${seq}`, ms, signal);
    } catch {
      return undefined;
    } finally {
      if (conn) this.#unarm(conn, `${this.#prefix(lockId)}${seq}`);
      else this.#inUse -= 1;
    }
  }

  async #sleep(conn: PoolConnection, lockId: string, name: string, ms: number, signal: AbortSignal): Promise<boolean | undefined> {
    const id = conn.threadId;
    let asleep = true;
    // Abandoned (woken locally, aborted): end the sleep so that the connection comes back.
    const stop = (): void => {
      setTimeout(() => {
        if (asleep) this.#killPool.query(`KILL QUERY ${id}`).catch(() => undefined);
      }, ABANDON_KILL_MS).unref();
    };
    signal.addEventListener('abort', stop, { once: true });
    this.#sleeping.add(id);
    try {
      // GET_LOCK first, then the holders: a release that committed before the name was taken
      // (and so could not find it) shows as no hold left, and the waiter attempts at once (-2)
      // instead of sleeping through its poll. SLEEP gives 1 when a KILL QUERY ended it.
      const [rows] = await conn.query(`SELECT IF(GET_LOCK(?, 0) = 1, IF(${this.#held}, SLEEP(?), -2), -1) AS rung`, [
        name,
        lockId,
        ms / 1000,
      ]);
      const rung = Number((rows as Record<string, unknown>[])[0]?.['rung'] ?? -1);
      if (rung === -2) return true;
      return rung < 0 ? undefined : rung === 1;
    } catch (err) {
      if (causeCode(err) === INTERRUPTED) return true;
      throw err;
    } finally {
      asleep = false;
      this.#sleeping.delete(id);
      signal.removeEventListener('abort', stop);
    }
  }

  /** Give the name back and the connection to the pool, in the background (a late kill may interrupt it: then drop the connection). */
  #unarm(conn: PoolConnection, name: string): void {
    if (this.#closed) return void (this.#inUse -= 1);
    conn
      .query('DO RELEASE_LOCK(?)', [name])
      .then(
        () => conn.release(),
        () => drop(conn),
      )
      .finally(() => {
        this.#armed.delete(conn);
        this.#inUse -= 1;
      });
  }

  /** Drop the bell connections (their sleeps end on the server by themselves) and end the pool. */
  async close(): Promise<void> {
    this.#closed = true;
    for (const conn of this.#armed) drop(conn);
    this.#armed.clear();
    if (this.#sleeping.size === 0 && sleepingByScope.get(this.#scope) === this.#sleeping) sleepingByScope.delete(this.#scope);
    await this.#waitPool.end();
  }
}
