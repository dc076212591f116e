/**
 * A guarded resource for the fault workers: the `locksmith-dlm/fenced` helpers
 * (docs/recipes/fencing.md) on a real PostgreSQL, MariaDB or Redis. Each worker, inside its
 * section, writes the counter through the helper with its lock's token; the store itself keeps
 * the order of what the helper let through, so the check does not trust any client:
 *
 * - SQL: an `AFTER UPDATE` trigger appends the row's new fence to an audit table whose key is
 *   assigned under the row lock, so the audit's order is the order of the accepted writes;
 * - Redis: the value is the chain of the tokens that wrote it, each write a fenced read and a
 *   fenced write (`fencedGet` raises the fence, so no accepted write is lost from the chain).
 *
 * A stale write accepted is an audited token below one audited before it. Refusals
 * (`StaleTokenError`) are counted in the store too.
 */
import mysql from 'mysql2/promise';
import pg from 'pg';
import { Redis } from 'ioredis';
import { fencedGet, fencedSet, fencedUpdateMysql, fencedUpdatePostgres } from '../../src/fenced/index.js';
import { StaleTokenError } from '../../src/index.js';

/** Which store and where (passed to the worker processes as JSON). */
export interface GuardConfig {
  readonly kind: 'postgres' | 'mysql' | 'redis';
  readonly url: string;
}

/** A worker's handle on the guarded resource. */
export interface Guard {
  /** Write `value` with `token` through the helper; rejects `StaleTokenError` when refused. */
  write(token: bigint, value: number): Promise<void>;
  close(): Promise<void>;
}

/** What the store recorded: writes the helper accepted, stale ones among them, refusals. */
export interface GuardAudit {
  readonly accepted: number;
  readonly staleAccepted: number;
  readonly refused: number;
}

const KEY = 'guarded';

interface Sql {
  query(text: string, values?: unknown[]): Promise<readonly Record<string, unknown>[]>;
  close(): Promise<void>;
}

async function sql(config: GuardConfig): Promise<Sql> {
  if (config.kind === 'postgres') {
    const pool = new pg.Pool({ connectionString: config.url, max: 2 });
    pool.on('error', () => undefined);
    return {
      query: async (text, values) => (await pool.query(text, values)).rows as Record<string, unknown>[],
      close: () => pool.end(),
    };
  }
  const pool = mysql.createPool({ uri: config.url, connectionLimit: 2 });
  return {
    query: async (text, values) => (await pool.query(text, values))[0] as Record<string, unknown>[],
    close: () => pool.end(),
  };
}

const SCHEMA = {
  postgres: [
    'DROP TABLE IF EXISTS guarded, guarded_audit, guarded_refused',
    'CREATE TABLE guarded (id int PRIMARY KEY, value bigint NOT NULL, fence bigint NOT NULL)',
    'CREATE TABLE guarded_audit (seq bigserial PRIMARY KEY, token bigint NOT NULL)',
    'CREATE TABLE guarded_refused (n bigint NOT NULL)',
    `CREATE OR REPLACE FUNCTION guarded_audit() RETURNS trigger LANGUAGE plpgsql AS
       'BEGIN INSERT INTO guarded_audit(token) VALUES (NEW.fence); RETURN NEW; END'`,
    'CREATE TRIGGER guarded_audit AFTER UPDATE ON guarded FOR EACH ROW EXECUTE FUNCTION guarded_audit()',
  ],
  mysql: [
    'DROP TABLE IF EXISTS guarded, guarded_audit, guarded_refused',
    'CREATE TABLE guarded (id int PRIMARY KEY, value bigint NOT NULL, fence bigint NOT NULL)',
    'CREATE TABLE guarded_audit (seq bigint AUTO_INCREMENT PRIMARY KEY, token bigint NOT NULL)',
    'CREATE TABLE guarded_refused (n bigint NOT NULL)',
    'CREATE TRIGGER guarded_audit AFTER UPDATE ON guarded FOR EACH ROW INSERT INTO guarded_audit(token) VALUES (NEW.fence)',
  ],
};

/** Create (or reset) the guarded row, its audit and the refusal counter. */
export async function prepareGuard(config: GuardConfig): Promise<void> {
  if (config.kind === 'redis') {
    const r = new Redis(config.url);
    await r.del(KEY, `${KEY}:refused`);
    r.disconnect();
    return;
  }
  const db = await sql(config);
  try {
    for (const statement of SCHEMA[config.kind]) await db.query(statement);
    await db.query('INSERT INTO guarded (id, value, fence) VALUES (1, 0, 0)');
    await db.query('INSERT INTO guarded_refused (n) VALUES (0)');
  } finally {
    await db.close();
  }
}

/** Open the guarded resource in a worker. */
export async function openGuard(config: GuardConfig): Promise<Guard> {
  if (config.kind === 'redis') {
    const r = new Redis(config.url);
    const counted = async (err: unknown): Promise<never> => {
      if (err instanceof StaleTokenError) await r.incr(`${KEY}:refused`);
      throw err;
    };
    return {
      write: async (token) => {
        const chain = (await fencedGet(r, KEY, token).catch(counted)) ?? '';
        await fencedSet(r, KEY, token, `${chain}${token},`).catch(counted);
      },
      close: async () => {
        r.disconnect();
      },
    };
  }
  const db = await sql(config);
  const pgPool = config.kind === 'postgres' ? new pg.Pool({ connectionString: config.url, max: 1 }) : undefined;
  pgPool?.on('error', () => undefined);
  const myPool = config.kind === 'mysql' ? mysql.createPool({ uri: config.url, connectionLimit: 1 }) : undefined;
  return {
    write: async (token, value) => {
      const update = { table: 'guarded', key: { id: 1 }, set: { value }, token };
      try {
        if (pgPool) await fencedUpdatePostgres(pgPool, update);
        else if (myPool) await fencedUpdateMysql(myPool, update);
      } catch (err) {
        if (err instanceof StaleTokenError) await db.query('UPDATE guarded_refused SET n = n + 1');
        throw err;
      }
    },
    close: async () => {
      await Promise.all([db.close(), pgPool?.end(), myPool?.end()]);
    },
  };
}

/** Read what the store recorded. */
export async function auditGuard(config: GuardConfig): Promise<GuardAudit> {
  let tokens: bigint[];
  let refused: number;
  if (config.kind === 'redis') {
    const r = new Redis(config.url);
    const chain = (await r.hget(KEY, 'value')) ?? '';
    refused = Number((await r.get(`${KEY}:refused`)) ?? 0);
    r.disconnect();
    tokens = chain
      .split(',')
      .filter((t) => t !== '')
      .map((t) => BigInt(t));
  } else {
    const db = await sql(config);
    const text = config.kind === 'postgres' ? 'TEXT' : 'CHAR(30)';
    const rows = await db.query(`SELECT CAST(token AS ${text}) AS token FROM guarded_audit ORDER BY seq`);
    tokens = rows.map((row) => BigInt(String(row['token'])));
    refused = Number((await db.query('SELECT n FROM guarded_refused'))[0]?.['n'] ?? 0);
    await db.close();
  }
  let newest = -1n;
  let staleAccepted = 0;
  for (const t of tokens) {
    if (t < newest) staleAccepted += 1;
    if (t > newest) newest = t;
  }
  return { accepted: tokens.length, staleAccepted, refused };
}
