/**
 * Lock-delay on etcd (docs/backends/etcd.md, "Lock-delay"). A holder granted with
 * `lockDelayMs` also writes a *delay marker* beside the lock's keys, attached to a second
 * lease of its backend whose ttl is longer than the main lease's by at least the delay. A
 * clean release deletes the marker with the holder's key in one transaction. A holder that
 * vanishes (crash, lease expiry) leaves the marker behind: etcd deletes its key with the main
 * lease and the marker only when the longer lease runs out, so for at least the delay the
 * marker names a holder whose key is gone, and every attempt treats it as that holder still
 * holding (a *phantom*). Both expiries are the server's: no client clock is compared.
 */
import { encodeLockId } from './layout.js';
import { createdAt, type EtcdClient, type Entry } from './client.js';
import { KeptAliveLease } from './lease.js';
import type { Holder } from './recipe.js';
import type { LockKind } from '../kit.js';

/** The key prefix of the delay markers of `lockId` (its `%delay` segment is never an encoded lock id). */
export function delayPrefix(prefix: string, lockId: string): string {
  return `${prefix}%delay/${encodeLockId(lockId)}/`;
}

/** The marker of the holder whose key is `holderKey` (named by the key's last segment). */
export function delayKey(prefix: string, lockId: string, holderKey: string): string {
  return `${delayPrefix(prefix, lockId)}${holderKey.slice(holderKey.lastIndexOf('/') + 1)}`;
}

/** What a marker says about the holder it stands for. */
interface MarkerValue {
  readonly key: string;
  readonly rev: string;
  readonly kind: LockKind;
  readonly permits: number;
  /** Permits the vanished hold took (absent: 1). */
  readonly weight?: number;
}

/** The value of the marker of a hold. */
export function markerValue(key: string, rev: bigint, kind: LockKind, permits: number, weight = 1): Buffer {
  const v: MarkerValue = { key, rev: rev.toString(), kind, permits, ...(weight > 1 ? { weight } : {}) };
  return Buffer.from(JSON.stringify(v));
}

/**
 * The markers whose holder key is not in `keys` (same name and create revision): holders
 * that vanished without releasing, still holding for the delay. Each is given the marker's
 * key, so a waiter behind it watches the marker's deletion. A marker that does not parse is
 * ignored (nothing but locksmith writes under `%delay`).
 */
export function phantoms(markers: readonly Entry[], keys: readonly Entry[]): Holder[] {
  const out: Holder[] = [];
  for (const m of markers) {
    let v: MarkerValue;
    try {
      v = JSON.parse(m.value.toString('utf8')) as MarkerValue;
    } catch {
      continue;
    }
    if (typeof v.key !== 'string' || typeof v.rev !== 'string' || !/^\d+$/.test(v.rev)) continue;
    const rev = BigInt(v.rev);
    if (keys.some((k) => k.key === v.key && k.createRevision === rev)) continue;
    const permits = Number.isInteger(v.permits) && v.permits > 0 ? v.permits : 1;
    const kind = v.kind === 'read' || v.kind === 'write' || v.kind === 'semaphore' ? v.kind : 'mutex';
    const weight = Number.isInteger(v.weight) && (v.weight ?? 0) > 0 ? (v.weight as number) : 1;
    out.push({
      ...m,
      createRevision: rev,
      kind,
      permits,
      weight,
      owner: undefined,
      nonce: undefined,
      identity: undefined,
      at: undefined,
      marks: true,
    });
  }
  return out;
}

/** Put a hold's marker on `lease` while the hold's key is still its own; its create revision, or undefined. */
export async function writeMarker(
  client: EtcdClient,
  hold: { readonly key: string; readonly rev: bigint },
  marker: string,
  value: Buffer,
  lease: string,
): Promise<bigint | undefined> {
  const res = await client.txn('lock-delay', {
    compare: [createdAt(hold.key, hold.rev)],
    success: [{ request_put: { key: Buffer.from(marker), value, lease } }],
    failure: [],
  });
  return res.succeeded ? BigInt(res.header.revision) : undefined;
}

/** A clean release: the hold's key (guarded by its create revision) and its marker in one transaction. */
export async function deleteWithMarker(client: EtcdClient, key: string, rev: bigint, marker: string): Promise<boolean> {
  const res = await client.txn('delete', {
    compare: [createdAt(key, rev)],
    success: [{ request_delete_range: { key: Buffer.from(key) } }, { request_delete_range: { key: Buffer.from(marker) } }],
  });
  return res.succeeded && (res.responses[0]?.response_delete_range?.deleted ?? '0') !== '0';
}

/**
 * The delay leases of one main lease, by ttl. A marker's lease must outlive the main lease
 * by the delay even when its last keep-alive reached the server up to a quarter of its own
 * ttl before the holder vanished (keep-alives go every sixth of a ttl, checked every
 * twelfth): with main ttl L and delay D, a ttl of L + (4D + L) / 3 does.
 */
export class DelayLeases {
  readonly #client: EtcdClient;
  readonly #leases = new Map<number, Promise<KeptAliveLease>>();
  readonly #timers = new Set<NodeJS.Timeout>();

  constructor(client: EtcdClient) {
    this.#client = client;
  }

  /** The live delay lease for a delay of `delayMs` behind a main lease of `mainTtlMs`. */
  lease(mainTtlMs: number, delayMs: number): Promise<KeptAliveLease> {
    const seconds = Math.ceil((mainTtlMs + (4 * delayMs + mainTtlMs) / 3) / 1_000);
    const known = this.#leases.get(seconds);
    if (known) return known;
    const granted = KeptAliveLease.grant(this.#client, seconds * 1_000);
    this.#leases.set(seconds, granted);
    granted.then(
      (l) => l.onEnd(() => this.#leases.get(seconds) === granted && this.#leases.delete(seconds)),
      () => this.#leases.get(seconds) === granted && this.#leases.delete(seconds),
    );
    return granted;
  }

  /**
   * A hold whose own ttl ended while we live: its key is deleted now and its marker after
   * the delay (from our monotonic clock, started after the key went), guarded by the
   * marker's create revision.
   */
  lapsed(marker: string, rev: bigint, delayMs: number): void {
    const t = setTimeout(() => {
      this.#timers.delete(t);
      void this.#client
        .txn('delete', { compare: [createdAt(marker, rev)], success: [{ request_delete_range: { key: Buffer.from(marker) } }] })
        .catch(() => undefined);
    }, delayMs);
    t.unref();
    this.#timers.add(t);
  }

  /**
   * Stop keeping the delay leases alive without revoking them (the main lease ended, the
   * backend closed or was abandoned): markers still standing are holds that were never
   * released, and they keep their delay until the server expires their lease.
   */
  end(): void {
    for (const t of this.#timers) clearTimeout(t);
    this.#timers.clear();
    for (const l of this.#leases.values()) void l.then((x) => x.close(false)).catch(() => undefined);
    this.#leases.clear();
  }
}
