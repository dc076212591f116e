/**
 * The round both Redis observability benches measure: sequential uncontended lock + release
 * on one locker, after a warm-up, with the server's own time per EVALSHA read from
 * `INFO commandstats` (reset before the timed part).
 */
import { performance } from 'node:perf_hooks';
import type { Redis } from 'ioredis';
import type * as current from '../../src/index.js';

/** The part of a locksmith build a round uses (the current sources, or an older checkout's). */
export type Lib = Pick<typeof current, 'createLocker'>;

/** µs of the client per lock + release pair, and the server's µs per EVALSHA. */
export async function uncontendedRound(lib: Lib, url: string, tag: string, admin: Redis, ops: number): Promise<[number, number]> {
  const locker = lib.createLocker(url, { ttlMs: 10_000 });
  try {
    for (let i = 0; i < 200; i++) await (await locker.lock(`bench:${tag}:${i % 10}`)).release();
    await admin.config('RESETSTAT');
    const t0 = performance.now();
    for (let i = 0; i < ops; i++) await (await locker.lock(`bench:${tag}:${i % 10}`)).release();
    const took = ((performance.now() - t0) * 1000) / ops;
    const m = /cmdstat_evalsha:calls=\d+,usec=\d+,usec_per_call=([\d.]+)/.exec(await admin.info('commandstats'));
    return [took, Number(m?.[1])];
  } finally {
    await locker.close();
  }
}
