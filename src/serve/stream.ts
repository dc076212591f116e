/**
 * One Server-Sent Events response with bounded memory (docs/serve.md, "Events"). Frames are
 * Buffers encoded once for every stream of a prefix; a stream writes them as they come
 * unless its client reads too slowly: once more than `bufferBytes` wait unsent, it drops
 * frames instead of buffering them, and when the client has caught up it sends a `resync`
 * frame followed by the whole current state, as the stream began. A slow client never holds
 * back the others or the hand-off, and costs at most about `bufferBytes` of memory.
 */
import type { ServerResponse } from 'node:http';

/** Reads the whole current state as frames (what a stream starts with, and sends after a resync). */
export type Snapshot = (signal: AbortSignal) => Promise<string>;

/** The `error` frame of a stream whose watch or listing failed. */
export function errorFrame(err: unknown): string {
  return `event: error\ndata: ${JSON.stringify({ code: 'BACKEND_UNAVAILABLE', message: (err as Error).message })}\n\n`;
}

/** A stream's response, its snapshot and its bound. */
export class SseStream {
  readonly #res: ServerResponse;
  readonly #limit: number;
  readonly #snapshot: Snapshot;
  readonly #stop: AbortController;
  /** Frames that came while a snapshot is read, sent after it; undefined when none is read. */
  #queued: Buffer[] | undefined;
  #queuedBytes = 0;
  /** Frames are dropped until the client drains what is buffered, then a resync is sent. */
  #behind = false;
  /** How many resyncs this stream has sent (for tests and logs). */
  resyncs = 0;

  constructor(res: ServerResponse, bufferBytes: number, snapshot: Snapshot, stop: AbortController) {
    this.#res = res;
    this.#limit = bufferBytes;
    this.#snapshot = snapshot;
    this.#stop = stop;
  }

  /** Send a frame (encoded once for every stream), or drop it while the client is behind. */
  deliver(frame: Buffer): void {
    if (this.#queued === undefined) return this.#write(frame);
    // A snapshot is being read: keep what comes meanwhile, within the same bound.
    this.#queuedBytes += frame.length;
    if (this.#queuedBytes <= this.#limit) this.#queued.push(frame);
    else this.#behind = true;
  }

  /** Read and send the whole state (`reason`: after frames were dropped, announced by a `resync` frame). */
  async sync(reason?: string): Promise<void> {
    this.#queued = [];
    this.#queuedBytes = 0;
    let text: string;
    try {
      text = await this.#snapshot(this.#stop.signal);
    } catch (err) {
      this.fail(err);
      return;
    }
    if (this.#stop.signal.aborted) return;
    const head = reason === undefined ? '' : `event: resync\ndata: ${JSON.stringify({ reason })}\n\n`;
    const queued = this.#queued;
    this.#queued = undefined;
    if (reason !== undefined) this.resyncs += 1;
    // Too much came while reading: what was kept is incomplete, so read again once drained.
    const overflowed = this.#behind;
    this.#behind = false;
    this.#res.write(head + text);
    if (overflowed) return this.#fallBehind();
    for (const f of queued) this.#write(f);
  }

  /** End the stream with an `error` frame. */
  fail(err: unknown): void {
    if (this.#stop.signal.aborted) return;
    if (!this.#res.destroyed) this.#res.write(errorFrame(err));
    this.#stop.abort();
  }

  #write(frame: Buffer): void {
    if (this.#behind || this.#res.destroyed) return;
    if (this.#res.writableLength > this.#limit) return this.#fallBehind();
    this.#res.write(frame);
  }

  #fallBehind(): void {
    this.#behind = true;
    const resume = (): void => {
      this.#behind = false;
      if (!this.#stop.signal.aborted) void this.sync('the client read too slowly: changes were dropped');
    };
    // 'drain' comes only after a write that found the buffer full.
    if (this.#res.writableNeedDrain) this.#res.once('drain', resume);
    else setImmediate(resume);
  }
}
