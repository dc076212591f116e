/**
 * The resource side of the fault tests: a counter behind a TCP socket (JSON lines), in the
 * test process, so that worker processes can be paused and killed while it keeps the truth.
 * It fences by token in one of three modes and records what it accepted, so the checker
 * can count lost updates: every acknowledged increment must be in the final value.
 */
import { createServer, type Server, type Socket } from 'node:net';

/** How the store uses fencing tokens. */
export type FenceMode = 'none' | 'writes' | 'reads-and-writes';

/** A request from a worker. */
export type StoreRequest =
  | { readonly id: number; readonly op: 'read'; readonly token: string; readonly pid: number }
  | { readonly id: number; readonly op: 'write'; readonly token: string; readonly value: number; readonly pid: number };

/** The store's answer. */
export interface StoreReply {
  readonly id: number;
  readonly ok: boolean;
  readonly value?: number;
}

/** A running store. */
export interface FencedStore {
  readonly port: number;
  readonly mode: FenceMode;
  /** The counter's value. */
  value(): number;
  /** Writes accepted. */
  accepted(): number;
  /** Operations rejected as stale. */
  rejected(): number;
  /** pid of the worker that most recently read with the newest token (the current holder). */
  currentHolder(): number | undefined;
  close(): Promise<void>;
}

/** Start a store on a free loopback port. */
export async function startFencedStore(mode: FenceMode): Promise<FencedStore> {
  let value = 0;
  let newest = -1n;
  let accepted = 0;
  let rejected = 0;
  let holder: number | undefined;
  const sockets = new Set<Socket>();

  const handle = (req: StoreRequest): StoreReply => {
    const token = BigInt(req.token);
    if (req.op === 'read') {
      if (mode === 'reads-and-writes') {
        if (token < newest) {
          rejected += 1;
          return { id: req.id, ok: false };
        }
        newest = token;
      }
      if (token >= newest) holder = req.pid;
      return { id: req.id, ok: true, value };
    }
    if (mode !== 'none') {
      if (token < newest) {
        rejected += 1;
        return { id: req.id, ok: false };
      }
      newest = token;
    }
    value = req.value;
    accepted += 1;
    return { id: req.id, ok: true };
  };

  const server: Server = createServer((socket) => {
    sockets.add(socket);
    socket.on('close', () => sockets.delete(socket));
    socket.on('error', () => socket.destroy());
    let buf = '';
    socket.setEncoding('utf8');
    socket.on('data', (chunk: string) => {
      buf += chunk;
      let nl: number;
      while ((nl = buf.indexOf('\n')) >= 0) {
        const line = buf.slice(0, nl);
        buf = buf.slice(nl + 1);
        if (!line) continue;
        const reply = handle(JSON.parse(line) as StoreRequest);
        socket.write(`${JSON.stringify(reply)}\n`);
      }
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const addr = server.address();
  const port = typeof addr === 'object' && addr ? addr.port : 0;
  return {
    port,
    mode,
    value: () => value,
    accepted: () => accepted,
    rejected: () => rejected,
    currentHolder: () => holder,
    close: () =>
      new Promise<void>((resolve) => {
        for (const s of sockets) s.destroy();
        server.close(() => resolve());
      }),
  };
}
