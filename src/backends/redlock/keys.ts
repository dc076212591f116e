/**
 * The keys of one lock on every Redlock master (`rl` lease, `rt` token register, `ri` holder's
 * record, `rc` release channel; scripts.ts has the table), built once per lock id and kept: an
 * uncontended cycle used to build them (a regex test, a hash tag and four strings) on every
 * attempt and again on the release (docs/benchmarks.md, "Redlock: the client side, and
 * resolving on a majority").
 */
import { BoundedMap } from '../kit.js';
import { keyBase, WhoRecords } from '../redis-wire/keys.js';

/** The keys of one lock, in the orders the scripts take them. */
export interface RedlockKeys {
  /** `rl rt ri`: ACQUIRE, INSPECT, FORCE. */
  readonly all: readonly [string, string, string];
  /** `rl ri`: RELEASE and EXTEND. */
  readonly lease: readonly [string, string];
  /** `rl rt`: FENCE. */
  readonly fence: readonly [string, string];
  /** The release channel waiters subscribe to. */
  readonly channel: string;
}

/** The keys and release channel of the lock whose keys start with `base` (a `keyBase`). */
export function keysAt(base: string): RedlockKeys {
  const rl = `${base}:rl`;
  const rt = `${base}:rt`;
  const ri = `${base}:ri`;
  return { all: [rl, rt, ri], lease: [rl, ri], fence: [rl, rt], channel: `${base}:rc` };
}

/** One cached lock: its keys, and the holder's record of the last identity that asked (none yet: undefined). */
interface Entry {
  readonly keys: RedlockKeys;
  identity: string | undefined;
  who: string;
}

/** The keys of recently used lock ids under one prefix (bounded: the oldest is forgotten). */
export class RedlockKeyCache {
  readonly #prefix: string;
  readonly #entries = new BoundedMap<string, Entry>(1_024);
  /** Lockers of different identities alternating on one lock rebuild no record. */
  readonly #who = new WhoRecords();

  constructor(prefix: string) {
    this.#prefix = prefix;
  }

  /** The keys of `lockId`. */
  of(lockId: string): RedlockKeys {
    return this.#entry(lockId).keys;
  }

  /** The holder's record (`whoRecord`) of `identity` for `lockId`. */
  who(lockId: string, identity: string): string {
    const e = this.#entry(lockId);
    if (e.identity !== identity) {
      e.who = this.#who.of(lockId, identity);
      e.identity = identity;
    }
    return e.who;
  }

  #entry(lockId: string): Entry {
    let e = this.#entries.get(lockId);
    if (!e) {
      e = { keys: keysAt(keyBase(this.#prefix, lockId)), identity: undefined, who: '' };
      this.#entries.set(lockId, e);
    }
    return e;
  }
}
