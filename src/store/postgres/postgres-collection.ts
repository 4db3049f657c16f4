import type { DurableCollection } from '../durable-collection.ts';
import type { Sql } from './open-postgres-store.ts';
import type { WriteSet } from '../write-set.ts';

/** Rows read per round trip while listing: memory stays bounded however large the collection. */
const PAGE = 256;
/** The highest code point: every key that starts with a prefix sorts below `prefix + TOP` (keys compare as "C"). */
const TOP = '\u{10ffff}';

/** A collection's rows in the `records` table. */
export class PostgresCollection<T> implements DurableCollection<T> {
  readonly #name: string;
  readonly #sql: Sql;
  readonly #within: WriteSet<string>;

  constructor(name: string, sql: Sql, within: WriteSet<string>) {
    this.#name = name;
    this.#sql = sql;
    this.#within = within;
  }

  async put(key: string, value: T): Promise<void> {
    await this.#sql.write('INSERT INTO records (collection, key, value) VALUES ($1, $2, $3::json) ON CONFLICT (collection, key) DO UPDATE SET value = EXCLUDED.value', [
      this.#name,
      key,
      JSON.stringify(value),
    ]);
  }

  putWithin(key: string, value: T): void {
    this.#within.add(this.#name, key, value);
  }

  async get(key: string): Promise<T | undefined> {
    const { rows } = await this.#sql.read<{ value: T }>('SELECT value FROM records WHERE collection = $1 AND key = $2', [this.#name, key]);
    return rows[0]?.value;
  }

  async remove(key: string): Promise<void> {
    await this.#sql.write('DELETE FROM records WHERE collection = $1 AND key = $2', [this.#name, key]);
  }

  async *entries(prefix = '', opts: { reverse?: boolean } = {}): AsyncGenerator<[string, T]> {
    const reverse = opts.reverse === true;
    // Keyset paging: each page starts past the last key of the one before.
    let after: string | undefined;
    for (;;) {
      const bound = after ?? (reverse ? `${prefix}${TOP}` : prefix);
      const past = after === undefined ? (reverse ? '<=' : '>=') : reverse ? '<' : '>';
      const { rows } = await this.#sql.read<{ key: string; value: T }>(
        `SELECT key, value FROM records WHERE collection = $1 AND key ${past} $2 AND starts_with(key, $3) ORDER BY key ${reverse ? 'DESC' : 'ASC'} LIMIT ${PAGE}`,
        [this.#name, bound, prefix],
      );
      for (const r of rows) yield [r.key, r.value];
      if (rows.length < PAGE) return;
      after = rows[rows.length - 1]?.key;
    }
  }
}
