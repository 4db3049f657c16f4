import type { Database } from 'lmdb';
import type { DurableCollection } from '../durable-collection.ts';
import { backward, type PutResult, type RecordOrder, type Refused, WRITTEN } from '../record-order.ts';
import type { WriteSet } from '../write-set.ts';
import type { Durable } from './open-lmdb-store.ts';

/**
 * A collection in its own LMDB database: reads come from the memory map, so `get` resolves at once. An ordered
 * collection's `put` compares ranks inside LMDB's write transaction (one writer, so nothing lands in between); an
 * unordered one is a plain put, batched by lmdb-js with every other write.
 */
export class LmdbCollection<T> implements DurableCollection<T> {
  readonly #db: Database;
  readonly #durable: Durable;
  readonly #within: WriteSet<Database>;
  readonly #order: RecordOrder<T> | undefined;
  readonly #refused: ((key: string, refused: Refused) => void) | undefined;

  constructor(db: Database, durable: Durable, within: WriteSet<Database>, order?: RecordOrder<T>, refused?: (key: string, refused: Refused) => void) {
    this.#db = db;
    this.#durable = durable;
    this.#within = within;
    this.#order = order;
    this.#refused = refused;
  }

  async put(key: string, value: T): Promise<void> {
    await this.putIfNewer(key, value);
  }

  async putIfNewer(key: string, value: T): Promise<PutResult> {
    const order = this.#order;
    if (!order) {
      await this.#durable(() => this.#db.put(key, value));
      return WRITTEN;
    }
    const result = await this.#durable(() =>
      this.#db.transaction((): PutResult => {
        const refused = backward(order, this.#db.get(key) as T | undefined, value);
        if (refused) return refused;
        void this.#db.put(key, value);
        return WRITTEN;
      }),
    );
    if (!result.written) this.#refused?.(key, result);
    return result;
  }

  putWithin(key: string, value: T): void {
    this.#within.add(this.#db, key, value);
  }

  get(key: string): Promise<T | undefined> {
    return Promise.resolve(this.#db.get(key) as T | undefined);
  }

  async remove(key: string): Promise<void> {
    await this.#durable(() => this.#db.remove(key));
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
