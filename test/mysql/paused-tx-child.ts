/**
 * A client paused inside a transaction, for test/mysql/paused-transaction.test.ts: with the
 * session settings the backend uses, it opens a transaction that row-locks the lock row as an
 * attempt's first round trip does, tells the parent (which then SIGSTOPs it), and, when told
 * to go on after SIGCONT, tries to finish that transaction and reports how it went.
 */
import mysql from 'mysql2/promise';

const [url, lockId, seconds] = process.argv.slice(2);
if (url === undefined || lockId === undefined || seconds === undefined) throw new Error('usage: paused-tx-child <url> <lockId> <seconds>');
const conn = await mysql.createConnection(url);
conn.on('error', () => undefined);
await conn.query(
  `SET SESSION tx_isolation = 'READ-COMMITTED', SESSION innodb_lock_wait_timeout = ${seconds}, SESSION idle_transaction_timeout = ${seconds}`,
);
await conn.query('START TRANSACTION');
await conn.query('INSERT INTO locksmith_locks (lock_id) VALUES (?) ON DUPLICATE KEY UPDATE token = token', [lockId]);
process.send?.('in-transaction');
process.on('message', () => {
  // Resumed: the second round trip of the attempt, a write under the row lock it believes it has.
  void (async () => {
    try {
      await conn.query('UPDATE locksmith_locks SET token = token + 1000 WHERE lock_id = ?', [lockId]);
      await conn.query('COMMIT');
      process.send?.({ committed: true });
    } catch (err) {
      process.send?.({ committed: false, code: (err as { code?: string }).code ?? String(err) });
    }
    conn.destroy();
    process.exit(0);
  })();
});
