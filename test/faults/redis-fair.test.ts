/**
 * Fault tests on a real Redis with fair workers: every grant is a hand-off held on receipt of
 * the release's message (test/faults/profiles.ts, `redis-fair`), under every fault of the
 * nemesis, asserting the safety invariants (test/faults/suite.ts).
 */
import { faultSuite } from './suite.js';

faultSuite('redis-fair');
