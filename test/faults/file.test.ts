/**
 * Fault tests on the file backend: the faults of its profile (test/faults/profiles.ts) that
 * exist on one machine — a holder killed or stopped, wall clocks skewed — each a short run
 * asserting the safety invariants (test/faults/suite.ts).
 */
import { faultSuite } from './suite.js';

faultSuite('file');
