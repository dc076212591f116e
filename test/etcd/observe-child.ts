/**
 * Another process for the listing tests: `observe-child.ts <url> <lockId> <name>` (forked with
 * tsx) takes the lock, sends `{ identity }` to its parent, and holds until the parent disconnects.
 */
import { createLocker } from '../../src/index.js';

const [url, lockId, name] = process.argv.slice(2);
if (!url || !lockId || !name || !process.send) throw new Error('usage: observe-child.ts <url> <lockId> <name> (forked)');
const locker = createLocker(url, { name });
const held = await locker.lock(lockId);
process.send({ identity: locker.identity, token: held.token.toString() });
process.once('disconnect', () => {
  void held
    .release()
    .finally(() => locker.close())
    .then(() => process.exit(0));
});
