/**
 * Workarounds for two cassandra-driver defects (found in 4.10.0), kept in one place because
 * both reach into the driver's internals, which its typings do not describe; every access is
 * optional, so a driver that changed them only loses the workaround. See
 * docs/backends/cassandra.md, "Running it here", and docs/guarantees.md, "Figures".
 *
 * 1. {@link guardControlRefresh}: racing control-connection refreshes surface as unhandled
 *    rejections.
 * 2. {@link guardHosts}: when the control connection starts over (every node had refused or
 *    dropped its connections, `lib/control-connection.js` and `lib/host.js`), it puts a new
 *    host object in the client's host map for the same address, and the old one is dropped
 *    from the map without being shut down. Its pool keeps reconnecting; once the node answers
 *    again it holds a connection with a heartbeat timer, and its health-counter interval runs
 *    on — `client.shutdown()` no longer reaches it, and the process never exits. A control
 *    connection that was starting over when `shutdown()` came also lands afterwards, with its
 *    own heartbeat. Here every host that leaves the map is shut down; after `shutdown()`,
 *    every host still known is shut down once more and the control connection closed — at
 *    once, and every second for 30 s (an unref'd timer: it never keeps a process alive by
 *    itself).
 */

/** A host with its connection pool. */
interface DriverHost {
  shutdown?(waitForPending: boolean): Promise<void> | undefined;
}

/** The client's map of hosts: `set` for an address it has replaces the host and emits `remove`. */
interface DriverHosts {
  values?(): readonly DriverHost[];
  on?(event: 'remove', listener: (host: DriverHost) => void): unknown;
}

/** The internals this module touches. */
interface DriverInternals {
  readonly hosts?: DriverHosts | null;
  readonly controlConnection?: {
    readonly host?: DriverHost | null;
    readonly connection?: { close?(): unknown } | null;
  } | null;
}

/** How often, and how many times, a shut-down client is swept (30 s: its read timeout plus a reconnection delay). */
const SWEEP_EVERY_MS = 1_000;
const SWEEPS = 30;

function shutDown(host: DriverHost): void {
  try {
    void host.shutdown?.(false)?.catch(() => undefined);
  } catch {
    /* already gone */
  }
}

/**
 * Watch `client` (connected): shut down every host that leaves its map from now on. The
 * returned function, called after the client's `shutdown()`, sweeps what it still holds.
 */
export function guardHosts(client: object): () => void {
  const c: DriverInternals = client;
  c.hosts?.on?.('remove', shutDown);
  const sweep = (): void => {
    for (const host of c.hosts?.values?.() ?? []) shutDown(host);
    const cc = c.controlConnection;
    if (cc?.host) shutDown(cc.host);
    try {
      cc?.connection?.close?.();
    } catch {
      /* already closed */
    }
  };
  return () => {
    sweep();
    let sweeps = 0;
    const timer = setInterval(() => {
      sweep();
      if (++sweeps >= SWEEPS) clearInterval(timer);
    }, SWEEP_EVERY_MS);
    timer.unref();
  };
}

/**
 * cassandra-driver 4.x refreshes its control connection from a timer and drops the promise.
 * After a node restart two refreshes can run at once; one nulls the connection the other is
 * using, whose TypeError then surfaces as an unhandled rejection: a process run with Node's
 * defaults dies of it (NODEJS-681, apache/cassandra-nodejs-driver#462, open). The refresh
 * that nulled it goes on reconnecting, so the loser's error is dropped here. Returns false
 * when the driver has no such method (nothing to guard). See docs/guarantees.md, "Figures".
 */
export function guardControlRefresh(client: object): boolean {
  const control: unknown = Reflect.get(client, 'controlConnection');
  if (typeof control !== 'object' || control === null) return false;
  const refresh: unknown = Reflect.get(control, '_refresh');
  if (typeof refresh !== 'function') return false;
  const guarded = async (...args: unknown[]): Promise<void> => {
    try {
      const refreshed: unknown = Reflect.apply(refresh, control, args);
      await refreshed;
    } catch {
      // Lost a race with a concurrent refresh, which carries on (see above).
    }
  };
  return Reflect.set(control, '_refresh', guarded);
}
