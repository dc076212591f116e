/**
 * Optional Prometheus metrics through `prom-client` (an optional peer dependency, imported
 * only when this is called). Metrics are derived from the locker's events, so they cost
 * nothing when not used. Every metric is labelled with the backend's scheme (`backend`)
 * and documented in docs/observability.md, "Metrics".
 *
 * Lock ids are not labels by default: an unbounded label set is how a metrics backend
 * falls over. Pass `lockIdLabel: true` only when lock ids are few and known.
 */
import type { Locker } from './locker.js';
import type { LockerEvents } from './events.js';
import { DriverMissingError } from './errors.js';

/**
 * The part of a prom-client `Registry` locksmith uses. Structural, so that these types
 * compile without prom-client installed; pass prom-client's `Registry` (or `register`).
 */
export interface RegistryLike {
  getSingleMetric(name: string): unknown;
}

/** Options of {@link instrumentPrometheus}. */
export interface PrometheusOptions {
  /** Registry to register on. @default prom-client's global registry */
  readonly registry?: RegistryLike;
  /** Metric name prefix. @default 'locksmith_' */
  readonly prefix?: string;
  /** Add a `lock_id` label (beware of cardinality). @default false */
  readonly lockIdLabel?: boolean;
}

type Prom = typeof import('prom-client');
type Labels = Record<string, string>;

/** The metrics, registered once per registry and prefix (a second locker reuses them). */
function metricsOn(prom: Prom, registers: InstanceType<Prom['Registry']>[], p: string, labelNames: readonly string[]) {
  const buckets = [0.001, 0.005, 0.01, 0.05, 0.1, 0.5, 1, 5, 10, 30, 60];
  const get = <M>(name: string, make: () => M): M => (registers[0]?.getSingleMetric(`${p}${name}`) as M | undefined) ?? make();
  const names = [...labelNames];
  return {
    wait: get(
      'wait_seconds',
      () =>
        new prom.Histogram({ name: `${p}wait_seconds`, help: 'Time from a lock call to the grant', labelNames: names, buckets, registers }),
    ),
    hold: get(
      'hold_seconds',
      () =>
        new prom.Histogram({ name: `${p}hold_seconds`, help: 'Time a lock was held until release', labelNames: names, buckets, registers }),
    ),
    contended: get(
      'contended_total',
      () => new prom.Counter({ name: `${p}contended_total`, help: 'Acquisitions that had to wait', labelNames: names, registers }),
    ),
    lost: get(
      'lost_total',
      () => new prom.Counter({ name: `${p}lost_total`, help: 'Leases lost while held', labelNames: [...names, 'reason'], registers }),
    ),
    held: get(
      'held',
      () => new prom.Gauge({ name: `${p}held`, help: 'Locks currently held by this process', labelNames: names, registers }),
    ),
    timeouts: get(
      'timeouts_total',
      () =>
        new prom.Counter({
          name: `${p}timeouts_total`,
          help: 'Acquisitions that gave up when their wait bound ran out',
          labelNames: names,
          registers,
        }),
    ),
    errors: get(
      'backend_errors_total',
      () =>
        new prom.Counter({
          name: `${p}backend_errors_total`,
          help: 'Backend operations that failed (unreachable, not an answer about the lock)',
          labelNames: ['backend', 'operation'],
          registers,
        }),
    ),
  };
}

/**
 * Export wait time, hold time, contention, held locks, lost leases, timeouts and backend
 * errors of `locker`, labelled by backend scheme. Resolves with a function that detaches
 * the listeners (the metrics stay registered).
 */
export async function instrumentPrometheus(locker: Locker, options: PrometheusOptions = {}): Promise<() => void> {
  const prom = await loadPromClient();
  // The registry is prom-client's own type at run time; the public option is structural.
  const registers = options.registry ? [options.registry as InstanceType<typeof prom.Registry>] : [prom.register];
  const byId = options.lockIdLabel ?? false;
  const backend = locker.scheme;
  const m = metricsOn(prom, registers, options.prefix ?? 'locksmith_', byId ? ['kind', 'backend', 'lock_id'] : ['kind', 'backend']);
  const labels = (e: { kind: string; lockId: string }): Labels =>
    byId ? { kind: e.kind, backend, lock_id: e.lockId } : { kind: e.kind, backend };

  const onAcquired = (e: LockerEvents['acquired']): void => {
    m.wait.observe(labels(e), e.waitedMs / 1000);
    if (!e.reentered) m.held.inc(labels(e));
  };
  const onReleased = (e: LockerEvents['released']): void => {
    m.hold.observe(labels(e), e.heldMs / 1000);
    m.held.dec(labels(e));
  };
  const onWaiting = (e: LockerEvents['waiting']): void => m.contended.inc(labels(e));
  const onLost = (e: LockerEvents['lost']): void => {
    m.lost.inc({ ...labels(e), reason: e.error.reason });
    m.held.dec(labels(e));
  };
  const onTimeout = (e: LockerEvents['timeout']): void => m.timeouts.inc(labels(e));
  const onError = (e: LockerEvents['error']): void => m.errors.inc({ backend, operation: e.operation });
  locker.on('acquired', onAcquired).on('released', onReleased).on('waiting', onWaiting).on('lost', onLost);
  locker.on('timeout', onTimeout).on('error', onError);
  return () => {
    locker.off('acquired', onAcquired).off('released', onReleased).off('waiting', onWaiting).off('lost', onLost);
    locker.off('timeout', onTimeout).off('error', onError);
  };
}

async function loadPromClient(): Promise<Prom> {
  try {
    return await import('prom-client');
  } catch (err) {
    const code = (err as { code?: unknown }).code;
    if (code === 'ERR_MODULE_NOT_FOUND' || code === 'MODULE_NOT_FOUND')
      throw new DriverMissingError('instrumentPrometheus', 'prom-client', { cause: err });
    throw err;
  }
}
