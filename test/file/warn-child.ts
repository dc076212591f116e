/**
 * `warn-child.ts`: creates two lockers without a URL (as a test would) and exits; the test
 * reads the warnings this process printed.
 */
import { createLocker } from '../../src/index.js';

for (let i = 0; i < 2; i++) await createLocker().close();
