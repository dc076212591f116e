/**
 * A fault-injecting decorator over the memory backend, for the core's unit tests: it delays
 * or fails chosen operations. It is not a mock of an engine (engines are tested for real);
 * it exercises the core's reaction to a backend that is slow or unreachable.
 */
import type { AcquireRequest, AcquireResult, Backend, Extension, Grant, LockState } from '../../src/backend.js';
import { MemoryBackend, type MemoryTicket } from '../../src/backends/memory/backend.js';
import { setTimeout as sleep } from 'node:timers/promises';

export class FaultyBackend implements Backend<MemoryTicket, undefined> {
  readonly name = 'faulty';
  readonly inner: MemoryBackend;
  /** Throw this from extend() while set. */
  extendError: Error | undefined;
  extendDelayMs = 0;
  acquireDelayMs = 0;
  acquireError: Error | undefined;
  releaseError: Error | undefined;
  extendCalls = 0;
  concurrentExtends = 0;
  maxConcurrentExtends = 0;
  readonly log: string[] = [];
  /**
   * While set, grants vouch for `shortTtlMs` only and carry a confirmation that `settle`
   * decides (a backend holding on receipt of a hand-off, e.g. Redis's fair hand-off).
   */
  confirm: { readonly shortTtlMs: number; readonly settle: (ttlMs: number) => Promise<Extension> } | undefined;

  constructor(table: string) {
    this.inner = new MemoryBackend(table);
  }
  get capabilities() {
    return this.inner.capabilities;
  }
  async tryAcquire(req: AcquireRequest<MemoryTicket>): Promise<AcquireResult<MemoryTicket, undefined>> {
    if (this.acquireDelayMs) await sleep(this.acquireDelayMs);
    if (this.acquireError) throw this.acquireError;
    const r = await this.inner.tryAcquire(req);
    if (!r.granted || !this.confirm) return r;
    const confirmation = this.confirm.settle(req.ttlMs).finally(() => this.log.push('confirmed'));
    confirmation.catch(() => undefined);
    return { granted: true, grant: { ...r.grant, ttlMs: this.confirm.shortTtlMs, confirmation } };
  }
  waitForChange(lockId: string, ticket: MemoryTicket | undefined, signal: AbortSignal): Promise<void> {
    return this.inner.waitForChange(lockId, ticket, signal);
  }
  cancel(req: AcquireRequest<MemoryTicket>, ticket: MemoryTicket | undefined): Promise<void> {
    return this.inner.cancel(req, ticket);
  }
  async extend(grant: Grant<undefined>, ttlMs: number): Promise<Extension> {
    this.extendCalls += 1;
    this.concurrentExtends += 1;
    this.maxConcurrentExtends = Math.max(this.maxConcurrentExtends, this.concurrentExtends);
    try {
      if (this.extendDelayMs) await sleep(this.extendDelayMs);
      if (this.extendError) throw this.extendError;
      const r = await this.inner.extend(grant, ttlMs);
      this.log.push('extend');
      return r;
    } finally {
      this.concurrentExtends -= 1;
    }
  }
  async release(grant: Grant<undefined>): Promise<boolean> {
    this.log.push('release');
    if (this.releaseError) throw this.releaseError;
    return this.inner.release(grant);
  }
  inspect(lockId: string): Promise<LockState> {
    return this.inner.inspect(lockId);
  }
  close(): Promise<void> {
    return this.inner.close();
  }
}
