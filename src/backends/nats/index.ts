/**
 * `nats://host1:port,host2:port[?bucket=…&prefix=…&replicas=…&clockSkewMs=…]` — locks
 * in one NATS JetStream key-value bucket: a key per lock, every step a compare-and-set on
 * the key's revision, fencing tokens from the bucket's revisions, leases as stored expiry
 * times, waiters woken by a watch. `nats://user:password@…` authenticates; a user name alone
 * is a token. See docs/backends/nats.md.
 *
 * A host list with ports is not a valid WHATWG URL: `createLocker` percent-encodes its
 * colons (the kit's `encodeHostList`), and {@link createNatsBackend} takes the plain form.
 */
import {
  encodeHostList,
  hostList,
  InvalidArgumentError,
  redact,
  unavailable,
  UrlParams,
  urlUserInfo,
  openConnected,
  type Backend,
  type ConnectOptions,
} from '../kit.js';
import { NatsBackend, type NatsBackendOptions } from './backend.js';
import { checkPrefix } from './keys.js';

export { NatsBackend, type NatsBackendOptions, type NatsStats } from './backend.js';

/** How far the lockers' wall clocks may disagree by default (NTP keeps a LAN far closer). */
const DEFAULT_CLOCK_SKEW_MS = 500;

/** The URL parameters the backend understands. */
const PARAMETERS = ['bucket', 'prefix', 'replicas', 'operationTimeoutMs', 'clockSkewMs'] as const;

/**
 * The backend options of a parsed `nats://` URL (throws `InvalidArgumentError`).
 * @internal
 */
export function natsOptions(url: URL): NatsBackendOptions {
  if (url.protocol !== 'nats:') throw new InvalidArgumentError('url', `not a nats URL: ${redact(url)}`);
  if (url.pathname !== '' && url.pathname !== '/') {
    throw new InvalidArgumentError('url', `nats: a path is not supported, use ?bucket= and ?prefix= (${redact(url)})`);
  }
  const q = new UrlParams(url, PARAMETERS);
  const bucket = q.string('bucket') ?? 'locksmith';
  if (!/^[-_A-Za-z0-9]+$/.test(bucket)) throw new InvalidArgumentError('url', `nats: bad bucket name '${bucket}'`);
  const hosts = hostList(url, 4222);
  const { username, password } = urlUserInfo(url);
  return {
    hosts,
    bucket,
    prefix: checkPrefix(q.string('prefix') ?? ''),
    // One replica by default: replicated compare-and-set is atomic only from nats-server 2.9.21.
    replicas: q.int('replicas', 1, { min: 1, max: 5 }),
    operationTimeoutMs: q.int('operationTimeoutMs', 2_000, { min: 1 }),
    clockSkewMs: q.int('clockSkewMs', DEFAULT_CLOCK_SKEW_MS, { min: 0 }),
    ...(username !== undefined && password !== undefined ? { username, password } : {}),
    ...(username !== undefined && password === undefined ? { token: username } : {}),
  };
}

/** A backend from a raw URL string (plain host list with ports allowed); it connects at first use. */
export function createNatsBackend(raw: string): NatsBackend {
  let url: URL;
  try {
    url = new URL(encodeHostList(raw.trim()));
  } catch (cause) {
    throw new InvalidArgumentError('url', `malformed nats URL '${redact(raw)}'`, { cause });
  }
  return new NatsBackend(natsOptions(url));
}

/**
 * Factory used by `createLocker('nats://…')`: the backend with its bucket open (so an
 * unreachable server fails here); stops, and closes what it opened, when `options.signal`
 * aborts.
 */
export async function createBackend(url: URL, options: ConnectOptions = {}): Promise<Backend> {
  return openConnected(new NatsBackend(natsOptions(url)), options, (err) => unavailable('nats', `connect to ${redact(url)}`, err));
}
