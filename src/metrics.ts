/**
 * Optional Prometheus metrics through `prom-client` (an optional peer dependency, imported
 * only when this is called). Metrics are derived from the locker's events, so they cost
 * nothing when not used.
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

/**
 * Export wait time, hold time, contention, held locks and lost leases of `locker`.
 * Resolves with a function that detaches the listeners (the metrics stay registered).
 */
export async function instrumentPrometheus(locker: Locker, options: PrometheusOptions = {}): Promise<() => void> {
  const prom = await loadPromClient();
  // The registry is prom-client's own type at run time; the public option is structural.
  const registers = options.registry ? [options.registry as InstanceType<typeof prom.Registry>] : [prom.register];
  const p = options.prefix ?? 'locksmith_';
  const byId = options.lockIdLabel ?? false;
  const labelNames = byId ? (['kind', 'lock_id'] as const) : (['kind'] as const);
  const labels = (e: { kind: string; lockId: string }): Record<string, string> =>
    byId ? { kind: e.kind, lock_id: e.lockId } : { kind: e.kind };
  const buckets = [0.001, 0.005, 0.01, 0.05, 0.1, 0.5, 1, 5, 10, 30, 60];

  const existing = registers[0]?.getSingleMetric(`${p}wait_seconds`);
  const wait =
    (existing as InstanceType<typeof prom.Histogram> | undefined) ??
    new prom.Histogram({ name: `${p}wait_seconds`, help: 'Time from a lock call to the grant', labelNames, buckets, registers });
  const hold =
    (registers[0]?.getSingleMetric(`${p}hold_seconds`) as InstanceType<typeof prom.Histogram> | undefined) ??
    new prom.Histogram({ name: `${p}hold_seconds`, help: 'Time a lock was held until release', labelNames, buckets, registers });
  const contended =
    (registers[0]?.getSingleMetric(`${p}contended_total`) as InstanceType<typeof prom.Counter> | undefined) ??
    new prom.Counter({ name: `${p}contended_total`, help: 'Acquisitions that had to wait', labelNames, registers });
  const lost =
    (registers[0]?.getSingleMetric(`${p}lost_total`) as InstanceType<typeof prom.Counter> | undefined) ??
    new prom.Counter({ name: `${p}lost_total`, help: 'Leases lost while held', labelNames: [...labelNames, 'reason'], registers });
  const held =
    (registers[0]?.getSingleMetric(`${p}held`) as InstanceType<typeof prom.Gauge> | undefined) ??
    new prom.Gauge({ name: `${p}held`, help: 'Locks currently held by this process', labelNames, registers });

  const onAcquired = (e: LockerEvents['acquired']): void => {
    wait.observe(labels(e), e.waitedMs / 1000);
    if (!e.reentered) held.inc(labels(e));
  };
  const onReleased = (e: LockerEvents['released']): void => {
    hold.observe(labels(e), e.heldMs / 1000);
    held.dec(labels(e));
  };
  const onWaiting = (e: LockerEvents['waiting']): void => contended.inc(labels(e));
  const onLost = (e: LockerEvents['lost']): void => {
    lost.inc({ ...labels(e), reason: e.error.reason });
    held.dec(labels(e));
  };
  locker.on('acquired', onAcquired).on('released', onReleased).on('waiting', onWaiting).on('lost', onLost);
  return () => {
    locker.off('acquired', onAcquired).off('released', onReleased).off('waiting', onWaiting).off('lost', onLost);
  };
}

async function loadPromClient(): Promise<typeof import('prom-client')> {
  try {
    return await import('prom-client');
  } catch (err) {
    const code = (err as { code?: unknown }).code;
    if (code === 'ERR_MODULE_NOT_FOUND' || code === 'MODULE_NOT_FOUND')
      throw new DriverMissingError('instrumentPrometheus', 'prom-client', { cause: err });
    throw err;
  }
}
