/**
 * A TCP fault proxy for tests (docs/testing.md): sits between a client and one server port on
 * loopback and, switched at run time, forwards, black-holes, resets or delays the traffic.
 * It is what a network partition between ONE client and its engine looks like, without root,
 * netem or Docker: give that client the proxy's address instead of the server's.
 */
import { connect, createServer, type Server, type Socket } from 'node:net';
import { InvalidArgumentError } from '../errors.js';

/**
 * What the proxy does with traffic.
 * - `pass`: forward both ways.
 * - `blackhole`: keep every socket open, accept new connections, forward nothing (bytes are
 *   held, not dropped, so switching back to `pass` delivers them late — a partition that heals).
 * - `reset`: destroy every connection and refuse new ones (accepted and closed at once).
 * - `latency`: forward every chunk after `latencyMs`, both directions, order kept.
 */
export type FaultMode = 'pass' | 'blackhole' | 'reset' | 'latency';

/** Options of {@link startFaultProxy}. */
export interface FaultProxyOptions {
  /** Server to forward to. */
  readonly targetHost?: string;
  readonly targetPort: number;
  /** Port to listen on (default: a free one chosen by the OS). Always on 127.0.0.1. */
  readonly listenPort?: number;
  /** Initial mode. @default 'pass' */
  readonly mode?: FaultMode;
  /** Delay per chunk in `latency` mode. @default 100 */
  readonly latencyMs?: number;
}

/** A running {@link startFaultProxy} proxy. */
export interface FaultProxy {
  /** The loopback port clients connect to. */
  readonly port: number;
  /** `127.0.0.1:<port>`, to put in a backend URL in place of the server's address. */
  readonly address: string;
  /** The current mode. */
  readonly mode: FaultMode;
  /** Connections open through the proxy now. */
  readonly connections: number;
  /**
   * Switch mode. `latencyMs` sets the delay for `latency` mode. Leaving `blackhole` flushes
   * the held bytes (after the delay in `latency` mode).
   */
  setMode(mode: FaultMode, latencyMs?: number): void;
  /** Stop listening and destroy every connection. Idempotent. */
  close(): Promise<void>;
}

const MODES: ReadonlySet<string> = new Set(['pass', 'blackhole', 'reset', 'latency']);

/** One direction of one connection: a queue so that held and delayed chunks keep their order. */
class Pipe {
  readonly #held: Buffer[] = [];
  #timers = 0;
  constructor(
    readonly to: Socket,
    readonly state: { mode: FaultMode; latencyMs: number },
  ) {}

  push(chunk: Buffer): void {
    this.#held.push(chunk);
    this.flush();
  }

  /** Forward what may go now: nothing in blackhole; in latency each chunk after its delay. */
  flush(): void {
    const { mode, latencyMs } = this.state;
    if (mode === 'blackhole' || mode === 'reset') return;
    if (mode === 'pass' && this.#timers === 0) {
      for (const c of this.#held.splice(0)) if (!this.to.destroyed) this.to.write(c);
      return;
    }
    for (const c of this.#held.splice(0)) {
      this.#timers += 1;
      // Chunks queued in order with the same delay fire in order (timers of equal delay are FIFO).
      setTimeout(() => {
        this.#timers -= 1;
        if (!this.to.destroyed) this.to.write(c);
      }, latencyMs);
    }
  }
}

interface Link {
  readonly client: Socket;
  readonly server: Socket;
  readonly up: Pipe;
  readonly down: Pipe;
}

function drop(links: Set<Link>, link: Link): void {
  links.delete(link);
  link.client.destroy();
  link.server.destroy();
}

/** Handle one incoming connection: refused in `reset` mode, else linked to a new upstream one. */
function accept(client: Socket, target: { host: string; port: number }, state: Pipe['state'], links: Set<Link>): void {
  if (state.mode === 'reset') {
    client.on('error', () => undefined);
    client.resetAndDestroy();
    return;
  }
  const upstream = connect(target);
  const link: Link = { client, server: upstream, up: new Pipe(upstream, state), down: new Pipe(client, state) };
  links.add(link);
  client.on('data', (c: Buffer) => link.up.push(c));
  upstream.on('data', (c: Buffer) => link.down.push(c));
  for (const s of [client, upstream]) {
    s.on('error', () => drop(links, link));
    s.on('close', () => drop(links, link));
  }
}

/**
 * Start a fault proxy on 127.0.0.1 forwarding to `targetHost:targetPort`. Close it when done:
 * it keeps the event loop alive while it listens.
 */
export async function startFaultProxy(options: FaultProxyOptions): Promise<FaultProxy> {
  const targetHost = options.targetHost ?? '127.0.0.1';
  const state = { mode: checkMode(options.mode ?? 'pass'), latencyMs: checkLatency(options.latencyMs ?? 100) };
  const links = new Set<Link>();
  const server: Server = createServer((client) => accept(client, { host: targetHost, port: options.targetPort }, state, links));
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(options.listenPort ?? 0, '127.0.0.1', () => resolve());
  });
  const addr = server.address();
  const port = typeof addr === 'object' && addr !== null ? addr.port : 0;
  let closed: Promise<void> | undefined;
  return {
    port,
    address: `127.0.0.1:${port}`,
    get mode() {
      return state.mode;
    },
    get connections() {
      return links.size;
    },
    setMode(mode, latencyMs) {
      state.mode = checkMode(mode);
      if (latencyMs !== undefined) state.latencyMs = checkLatency(latencyMs);
      for (const link of [...links]) {
        if (mode === 'reset') {
          link.client.resetAndDestroy();
          drop(links, link);
        } else {
          link.up.flush();
          link.down.flush();
        }
      }
    },
    close() {
      closed ??= new Promise<void>((resolve) => {
        for (const link of [...links]) drop(links, link);
        server.close(() => resolve());
      });
      return closed;
    },
  };
}

function checkMode(mode: FaultMode): FaultMode {
  if (!MODES.has(mode)) throw new InvalidArgumentError('mode', `unknown fault mode '${String(mode)}'`);
  return mode;
}

function checkLatency(ms: number): number {
  if (!Number.isFinite(ms) || ms < 0) throw new InvalidArgumentError('latencyMs', 'latencyMs is a finite number ≥ 0');
  return ms;
}
