import type { Database } from 'lmdb';
import type { DurableCollection } from '../durable-collection.ts';
import type { WriteSet } from '../write-set.ts';
import type { Durable } from './open-lmdb-store.ts';

/** A collection in its own LMDB database: reads come from the memory map, so `get` resolves at once. */
export class LmdbCollection<T> implements DurableCollection<T> {
  readonly #db: Database;
  readonly #durable: Durable;
  readonly #within: WriteSet<Database>;

  constructor(db: Database, durable: Durable, within: WriteSet<Database>) {
    this.#db = db;
    this.#durable = durable;
    this.#within = within;
  }

  async put(key: string, value: T): Promise<void> {
    await this.#durable(this.#db.put(key, value));
  }

  putWithin(key: string, value: T): void {
    this.#within.add(this.#db, key, value);
  }

  get(key: string): Promise<T | undefined> {
    return Promise.resolve(this.#db.get(key) as T | undefined);
  }

  async remove(key: string): Promise<void> {
    await this.#durable(this.#db.remove(key));
  }

  async *entries(prefix = '', opts: { reverse?: boolean } = {}): AsyncGenerator<[string, T]> {
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
