/** One record write gathered from a transaction callback: where (a collection, however the store names it), key, value. */
export interface RecordWrite<Target> {
  target: Target;
  key: string;
  value: unknown;
}

/**
 * The writes `putWithin` makes while a transaction callback runs (`Store.atomically`, a claim's `withClaim`).
 * Callbacks are synchronous, so the one open set is the current callback's. The store applies the writes after the
 * callback has returned, in one transaction: a callback that throws halfway writes nothing.
 */
export class WriteSet<Target> {
  #open: Map<Target, Map<string, unknown>> | undefined;

  /** Runs `callback`, returning the writes it made (the last write of a key wins, as in a transaction). */
  gather(callback: () => void): RecordWrite<Target>[] {
    if (this.#open) throw new Error('a store transaction callback cannot open another');
    const writes = new Map<Target, Map<string, unknown>>();
    this.#open = writes;
    try {
      callback();
    } finally {
      this.#open = undefined;
    }
    return [...writes].flatMap(([target, byKey]) => [...byKey].map(([key, value]) => ({ target, key, value })));
  }

  add(target: Target, key: string, value: unknown): void {
    if (!this.#open) throw new Error('putWithin outside a store transaction callback (Store.atomically, a claim): use put');
    let byKey = this.#open.get(target);
    if (!byKey) {
      byKey = new Map();
      this.#open.set(target, byKey);
    }
    byKey.set(key, value);
  }
}
