/**
 * `locksmith-dlm/fenced`: ready-made fenced writes for the stores users protect most — a
 * guarded `UPDATE` on PostgreSQL and MySQL/MariaDB, a compare-and-set script on Redis. Each
 * refuses a write whose fencing token is older than the newest the row or key has seen
 * (`StaleTokenError`). See docs/recipes/fencing.md.
 */
export {
  fencedUpdateMysql,
  fencedUpdatePostgres,
  type FencedUpdate,
  type FencedWriteOutcome,
  type MysqlQueryable,
  type PgQueryable,
} from './sql.js';
export { fencedGet, fencedSet, type RedisEvaluator } from './redis.js';
export { StaleTokenError } from '../errors.js';
