/**
 * Optional OpenTelemetry spans, derived from the locker's events: `locksmith.wait` from the
 * moment an acquisition starts waiting to its grant, and `locksmith.hold` from the grant to
 * the release or the loss (a loss ends the span with an error status).
 *
 * The tracer is typed structurally (the few members of `@opentelemetry/api`'s `Tracer` used
 * here), so locksmith never imports the API package: pass `trace.getTracer('my-service')`.
 */
import type { Locker } from './locker.js';
import type { LockerEvents } from './events.js';

/** The part of an OpenTelemetry `Span` locksmith uses. */
export interface SpanLike {
  setAttribute(key: string, value: string | number | boolean): unknown;
  setStatus(status: { code: number; message?: string }): unknown;
  end(endTime?: number): void;
}

/** The part of an OpenTelemetry `Tracer` locksmith uses. */
export interface TracerLike {
  startSpan(name: string, options?: { attributes?: Record<string, string | number | boolean>; startTime?: number }): SpanLike;
}

/** `SpanStatusCode.ERROR` of `@opentelemetry/api` (a stable protocol value). */
const STATUS_ERROR = 2;

/**
 * Emit `locksmith.wait` and `locksmith.hold` spans for `locker` on `tracer`.
 * Returns a function that detaches the listeners and ends any open span.
 */
export function instrumentTracing(locker: Locker, tracer: TracerLike): () => void {
  const waits = new Map<string, SpanLike>();
  const holds = new Map<string, SpanLike>();
  const waitKey = (e: { lockId: string; ownerId: string; kind: string }): string => `${e.kind}\0${e.lockId}\0${e.ownerId}`;
  const holdKey = (e: { lockId: string; ownerId: string; kind: string; token: bigint }): string => `${waitKey(e)}\0${e.token}`;
  const attrs = (e: { lockId: string; ownerId: string; kind: string }): Record<string, string> => ({
    'locksmith.backend': locker.scheme,
    'locksmith.lock_id': e.lockId,
    'locksmith.owner_id': e.ownerId,
    'locksmith.kind': e.kind,
  });

  const onWaiting = (e: LockerEvents['waiting']): void => {
    waits.set(waitKey(e), tracer.startSpan('locksmith.wait', { attributes: attrs(e) }));
  };
  const onAcquired = (e: LockerEvents['acquired']): void => {
    const wait = waits.get(waitKey(e));
    if (wait) {
      waits.delete(waitKey(e));
      wait.setAttribute('locksmith.token', String(e.token));
      wait.end();
    }
    if (e.reentered) return;
    holds.set(holdKey(e), tracer.startSpan('locksmith.hold', { attributes: { ...attrs(e), 'locksmith.token': String(e.token) } }));
  };
  const endHold = (e: { lockId: string; ownerId: string; kind: string; token: bigint }, error?: string): void => {
    const span = holds.get(holdKey(e));
    if (!span) return;
    holds.delete(holdKey(e));
    if (error !== undefined) span.setStatus({ code: STATUS_ERROR, message: error });
    span.end();
  };
  const onTimeout = (e: LockerEvents['timeout']): void => {
    const wait = waits.get(waitKey(e));
    if (!wait) return;
    waits.delete(waitKey(e));
    wait.setStatus({ code: STATUS_ERROR, message: `timed out after ${e.timeoutMs} ms` });
    wait.end();
  };
  const onReleased = (e: LockerEvents['released']): void => endHold(e);
  const onLost = (e: LockerEvents['lost']): void => endHold(e, e.error.message);

  locker.on('waiting', onWaiting).on('acquired', onAcquired).on('released', onReleased).on('lost', onLost).on('timeout', onTimeout);
  return () => {
    locker.off('waiting', onWaiting).off('acquired', onAcquired).off('released', onReleased).off('lost', onLost).off('timeout', onTimeout);
    for (const span of [...waits.values(), ...holds.values()]) span.end();
    waits.clear();
    holds.clear();
  };
}

/** The part of an OpenTelemetry `Meter` locksmith uses (pass `metrics.getMeter('my-service')`). */
export interface MeterLike {
  createCounter(
    name: string,
    options?: { description?: string; unit?: string },
  ): { add(value: number, attributes?: Record<string, string>): void };
  createHistogram(
    name: string,
    options?: { description?: string; unit?: string },
  ): { record(value: number, attributes?: Record<string, string>): void };
}

/**
 * OpenTelemetry metrics of `locker` on `meter`, labelled by backend scheme
 * (`locksmith.backend`): `locksmith.wait` (histogram, s), `locksmith.timeouts`,
 * `locksmith.backend_errors` and `locksmith.lost` (counters). docs/observability.md,
 * "Metrics". Returns a function that detaches the listeners.
 */
export function instrumentMeter(locker: Locker, meter: MeterLike): () => void {
  const backend = locker.scheme;
  const wait = meter.createHistogram('locksmith.wait', { description: 'Time from a lock call to the grant', unit: 's' });
  const timeouts = meter.createCounter('locksmith.timeouts', { description: 'Acquisitions that gave up when their wait bound ran out' });
  const errors = meter.createCounter('locksmith.backend_errors', { description: 'Backend operations that failed' });
  const lost = meter.createCounter('locksmith.lost', { description: 'Leases lost while held' });
  const onAcquired = (e: LockerEvents['acquired']): void =>
    wait.record(e.waitedMs / 1000, { 'locksmith.backend': backend, 'locksmith.kind': e.kind });
  const onTimeout = (e: LockerEvents['timeout']): void => timeouts.add(1, { 'locksmith.backend': backend, 'locksmith.kind': e.kind });
  const onError = (e: LockerEvents['error']): void => errors.add(1, { 'locksmith.backend': backend, 'locksmith.operation': e.operation });
  const onLost = (e: LockerEvents['lost']): void => lost.add(1, { 'locksmith.backend': backend, 'locksmith.reason': e.error.reason });
  locker.on('acquired', onAcquired).on('timeout', onTimeout).on('error', onError).on('lost', onLost);
  return () => {
    locker.off('acquired', onAcquired).off('timeout', onTimeout).off('error', onError).off('lost', onLost);
  };
}
