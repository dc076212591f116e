/**
 * A fenced resource behind a socket, for fault tests of code that uses locksmith
 * (docs/testing.md): a counter that client processes read and write with their fencing
 * tokens, kept in the test process so that clients can be paused, partitioned and killed
 * while it keeps the truth. It records every operation in its own serial order, so a checker
 * can count lost updates, stale operations it accepted and overlapping critical sections.
 */
import { createServer, connect, type Server, type Socket } from 'node:net';
import { FencedResource } from '../fencing.js';
import { InvalidArgumentError, StaleTokenError } from '../errors.js';

/**
 * How the store uses fencing tokens: `reads-and-writes` is what a user must do;
 * `writes` (write-only fencing) and `none` exist to show what breaks without it.
 */
export type FenceMode = 'none' | 'writes' | 'reads-and-writes';

/**
 * One recorded event, in the store's serial order. `begin`/`end` are a client's own
 * markers around its critical section (not fenced, only recorded); `note` is the test's
 * annotation (a fault injected, a client killed).
 */
export interface StoreEvent {
  /** Position in the store's serial order (0, 1, 2, …). */
  readonly seq: number;
  /** Milliseconds since the store started, on the store's monotonic clock. */
  readonly at: number;
  readonly client: string;
  readonly op: 'read' | 'write' | 'begin' | 'end' | 'note';
  /** The fencing token sent with the operation (absent on notes). */
  readonly token?: bigint;
  /** Accepted (true) or rejected as stale (false). */
  readonly ok: boolean;
  /** Value read or written. */
  readonly value?: number;
  /** The text of a note, or the remark sent with a begin/end. */
  readonly text?: string;
}

/** Options of {@link startFencedStore}. */
export interface FencedStoreOptions {
  /** @default 'reads-and-writes' */
  readonly mode?: FenceMode;
  /** Initial counter value. @default 0 */
  readonly initial?: number;
}

/** A running store (see {@link startFencedStore}). */
export interface FencedStore {
  /** Loopback port for {@link connectFencedStore}. */
  readonly port: number;
  readonly mode: FenceMode;
  /** The counter's value now. */
  value(): number;
  /** Writes accepted. */
  accepted(): number;
  /** Operations rejected as stale. */
  rejected(): number;
  /** The client that most recently sent the newest token (the likely current holder). */
  currentHolder(): string | undefined;
  /** Every event so far, in serial order (a copy). */
  history(): StoreEvent[];
  /** Record a test annotation (a fault injected, a client killed) in the serial order. */
  note(client: string, text: string): void;
  close(): Promise<void>;
}

interface Request {
  readonly id: number;
  readonly op: StoreEvent['op'];
  readonly client: string;
  readonly token?: string;
  readonly value?: number;
  readonly text?: string;
}

/** The store's reply on the wire. */
interface Reply {
  readonly id: number;
  readonly ok: boolean;
  readonly value?: number;
  readonly newest?: string;
}

const MODES: ReadonlySet<string> = new Set(['none', 'writes', 'reads-and-writes']);

/** The state machine, apart from the socket plumbing. */
class Counter {
  readonly events: StoreEvent[] = [];
  readonly started = performance.now();
  readonly #resource: FencedResource<number>;
  #accepted = 0;
  #newest = -1n;
  holder: string | undefined;

  constructor(
    readonly mode: FenceMode,
    initial: number,
  ) {
    this.#resource = new FencedResource(initial, { fenceReads: mode === 'reads-and-writes' });
  }

  get value(): number {
    return this.#resource.peek();
  }
  get accepted(): number {
    return this.#accepted;
  }
  get rejected(): number {
    return this.#resource.rejected;
  }

  record(e: Omit<StoreEvent, 'seq' | 'at'>): void {
    this.events.push({ seq: this.events.length, at: performance.now() - this.started, ...e });
  }

  handle(req: Request): Reply {
    const { client, op } = req;
    if (op === 'note') {
      this.record({ client, op, ok: true, text: String(req.text ?? '') });
      return { id: req.id, ok: true };
    }
    const token = BigInt(req.token ?? '-1');
    if (token >= this.#newest) {
      this.#newest = token;
      this.holder = client;
    }
    if (op === 'begin' || op === 'end') {
      this.record({ client, op, token, ok: true, ...(req.text === undefined ? {} : { text: req.text }) });
      return { id: req.id, ok: true };
    }
    try {
      const value = op === 'read' ? this.#read(token) : this.#write(token, Number(req.value));
      this.record({ client, op, token, ok: true, value });
      return { id: req.id, ok: true, value };
    } catch (err) {
      if (!(err instanceof StaleTokenError)) throw err;
      this.record({ client, op, token, ok: false, value: req.value });
      return { id: req.id, ok: false, newest: err.newest.toString() };
    }
  }

  #read(token: bigint): number {
    return this.mode === 'none' ? this.#resource.peek() : this.#resource.read(token);
  }

  #write(token: bigint, value: number): number {
    // Unfenced: write under the newest token seen so far, which always passes the check.
    this.#resource.write(this.mode === 'none' ? this.#resource.newestToken : token, value);
    this.#accepted += 1;
    return value;
  }
}

/** Serve JSON lines on one socket. */
function serve(socket: Socket, counter: Counter): void {
  let buf = '';
  socket.setEncoding('utf8');
  socket.on('error', () => socket.destroy());
  socket.on('data', (chunk: string) => {
    buf += chunk;
    let nl: number;
    while ((nl = buf.indexOf('\n')) >= 0) {
      const line = buf.slice(0, nl);
      buf = buf.slice(nl + 1);
      if (!line) continue;
      let reply: Reply;
      try {
        reply = counter.handle(JSON.parse(line) as Request);
      } catch {
        // A malformed request (not JSON, a token that is not an integer) ends that client's
        // connection, never the test process that keeps the record.
        socket.destroy();
        return;
      }
      socket.write(`${JSON.stringify(reply)}\n`);
    }
  });
}

/**
 * Start a store on a free loopback port. The counter fences by token per `mode` (with
 * {@link FencedResource}); every operation and its outcome goes into {@link FencedStore.history}.
 */
export async function startFencedStore(options: FencedStoreOptions = {}): Promise<FencedStore> {
  const mode = options.mode ?? 'reads-and-writes';
  if (!MODES.has(mode)) throw new InvalidArgumentError('mode', `unknown fence mode '${String(mode)}'`);
  const counter = new Counter(mode, options.initial ?? 0);
  const sockets = new Set<Socket>();
  const server: Server = createServer((socket) => {
    sockets.add(socket);
    socket.on('close', () => sockets.delete(socket));
    serve(socket, counter);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const addr = server.address();
  let closed: Promise<void> | undefined;
  return {
    port: typeof addr === 'object' && addr !== null ? addr.port : 0,
    mode,
    value: () => counter.value,
    accepted: () => counter.accepted,
    rejected: () => counter.rejected,
    currentHolder: () => counter.holder,
    history: () => [...counter.events],
    note: (client, text) => counter.record({ client, op: 'note', ok: true, text }),
    close() {
      closed ??= new Promise<void>((resolve) => {
        for (const s of sockets) s.destroy();
        server.close(() => resolve());
      });
      return closed;
    },
  };
}

/** A client of a {@link FencedStore}, used from the process under test. */
export interface FencedStoreClient {
  /** Read the counter under `token`; rejects with `StaleTokenError` when the store refuses it. */
  read(token: bigint): Promise<number>;
  /** Write the counter under `token`; rejects with `StaleTokenError` when the store refuses it. */
  write(token: bigint, value: number): Promise<void>;
  /** Mark the start of a critical section (recorded for the checker, never refused). */
  begin(token: bigint): Promise<void>;
  /** Mark its end, with an optional remark for the checker (e.g. whether the lease was still valid). */
  end(token: bigint, text?: string): Promise<void>;
  /** Record a free-form annotation. */
  note(text: string): Promise<void>;
  close(): void;
}

/**
 * Connect to a store on `127.0.0.1:port` as `client` (a name that shows in the history;
 * default `pid:<process.pid>`).
 */
export async function connectFencedStore(port: number, client = `pid:${process.pid}`): Promise<FencedStoreClient> {
  const socket = connect(port, '127.0.0.1');
  await new Promise<void>((resolve, reject) => socket.once('connect', resolve).once('error', reject));
  socket.setEncoding('utf8');
  let nextId = 1;
  const waiting = new Map<number, { resolve: (r: Reply) => void; reject: (e: Error) => void }>();
  let buf = '';
  socket.on('error', () => undefined);
  socket.on('close', () => {
    for (const w of waiting.values()) w.reject(new Error('the fenced store closed the connection'));
    waiting.clear();
  });
  socket.on('data', (chunk: string) => {
    buf += chunk;
    let nl: number;
    while ((nl = buf.indexOf('\n')) >= 0) {
      const reply = JSON.parse(buf.slice(0, nl)) as Reply;
      buf = buf.slice(nl + 1);
      waiting.get(reply.id)?.resolve(reply);
      waiting.delete(reply.id);
    }
  });
  const call = (op: Request['op'], token?: bigint, extra: Partial<Request> = {}): Promise<Reply> =>
    new Promise((resolve, reject) => {
      if (socket.destroyed) return reject(new Error('the fenced store connection is closed'));
      const id = nextId++;
      waiting.set(id, { resolve, reject });
      socket.write(`${JSON.stringify({ id, op, client, token: token?.toString(), ...extra })}\n`);
    });
  const fenced = async (op: 'read' | 'write', token: bigint, value?: number): Promise<number> => {
    const r = await call(op, token, { value });
    if (!r.ok) throw new StaleTokenError(token, BigInt(r.newest ?? '-1'), op);
    return r.value ?? 0;
  };
  return {
    read: (token) => fenced('read', token),
    write: async (token, value) => void (await fenced('write', token, value)),
    begin: async (token) => void (await call('begin', token)),
    end: async (token, text) => void (await call('end', token, { text })),
    note: async (text) => void (await call('note', undefined, { text })),
    close: () => socket.end(),
  };
}
