/**
 * The shared conformance suite against a real single-node nats-server with JetStream.
 *
 * A crash is the default `abandon()`: the client drops its connection without releasing, so
 * its holds end only when their stored lease runs out.
 */
import { createLocker } from '../../src/index.js';
import { startNats } from '../../scripts/servers/nats.js';
import { useServer } from '../helpers.js';
import { conformance } from './suite.js';

const server = await useServer(() => startNats());

await conformance({
  name: 'nats',
  createLocker: (options) => createLocker(`${server.url}?bucket=conformance`, options),
  blackHoleUrl: (port) => `nats://127.0.0.1:${port}`,
});
