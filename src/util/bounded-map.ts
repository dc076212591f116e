/**
 * A Map that forgets its oldest entry (by first insertion) once it holds more than `limit`:
 * for the caches whose entries only save work (a read, a round trip), so that a long-lived
 * process cannot grow them without bound.
 */
export class BoundedMap<K, V> extends Map<K, V> {
  /** `limit`: the most entries kept. */
  constructor(readonly limit: number) {
    super();
  }

  /** Set `key`, then forget the oldest entry if that made one too many. */
  override set(key: K, value: V): this {
    super.set(key, value);
    if (this.size > this.limit) {
      const oldest = this.keys().next();
      if (!oldest.done) this.delete(oldest.value);
    }
    return this;
  }
}
