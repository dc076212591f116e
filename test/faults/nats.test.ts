/**
 * Fault tests on a real NATS server with JetStream: every fault of the nemesis that applies to its profile
 * (test/faults/profiles.ts), short runs asserting the safety invariants (test/faults/suite.ts).
 */
import { faultSuite } from './suite.js';

faultSuite('nats');
