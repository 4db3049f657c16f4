import type { Database } from 'lmdb';
import type { Durable } from './open-store.ts';

/** A named set of records. `put` resolves only once the record is on disk, so it survives a crash that follows. */
export class DurableCollection<T> {
  readonly #db: Database;
  readonly #durable: Durable;

  constructor(db: Database, durable: Durable) {
    this.#db = db;
    this.#durable = durable;
  }

  async put(key: string, value: T): Promise<void> {
    await this.#durable(this.#db.put(key, value));
  }

  /**
   * Writes a record inside another write's transaction callback (`Store.atomically`, or a claim's, see
   * `NonceClaims.claim`): it is on disk exactly when that write is, and not written at all when that write's
   * condition fails. Anywhere else, use `put`.
   */
  putWithin(key: string, value: T): void {
    void this.#db.put(key, value);
  }

  get(key: string): T | undefined {
    return this.#db.get(key) as T | undefined;
  }

  async remove(key: string): Promise<void> {
    await this.#durable(this.#db.remove(key));
  }

  /** Records whose key starts with `prefix`, in key order (or the reverse: newest first for time-ordered keys). */
  *entries(prefix = '', opts: { reverse?: boolean } = {}): Generator<[string, T]> {
    const range = opts.reverse ? { reverse: true, ...(prefix ? { start: `${prefix}\uffff`, end: prefix } : {}) } : prefix ? { start: prefix } : {};
    for (const { key, value } of this.#db.getRange(range)) {
      const k = String(key);
      if (prefix && !k.startsWith(prefix)) {
        if (opts.reverse) continue;
        break;
      }
      yield [k, value as T];
    }
  }
}
