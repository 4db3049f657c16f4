import type { DurableCollection } from '../durable-collection.ts';
import { type PutResult, WRITTEN } from '../record-order.ts';
import type { WriteSet } from '../write-set.ts';
import type { Sql, Writer } from './open-postgres-store.ts';
import { fenceCte, fenceValues, passedFence } from './record-writes.ts';

/** Rows read per round trip while listing: memory stays bounded however large the collection. */
const PAGE = 256;
/** The highest code point: every key that starts with a prefix sorts below `prefix + TOP` (keys compare as "C"). */
const TOP = '\u{10ffff}';

const REMOVE_FENCED = `WITH ${fenceCte(3)}, d AS (DELETE FROM records WHERE collection = $1 AND key = $2 AND EXISTS (SELECT 1 FROM fence) RETURNING 1)
  SELECT EXISTS (SELECT 1 FROM fence) AS live`;

/** A collection's rows in the `records` table. */
export class PostgresCollection<T> implements DurableCollection<T> {
  readonly #name: string;
  readonly #sql: Sql;
  readonly #within: WriteSet<string>;
  readonly #w: Writer;

  constructor(name: string, sql: Sql, within: WriteSet<string>, writer: Writer) {
    this.#name = name;
    this.#sql = sql;
    this.#within = within;
    this.#w = writer;
  }

  async put(key: string, value: T): Promise<void> {
    await this.putIfNewer(key, value);
  }

  /** Goes with the other record writes of this turn of the event loop, in one statement (see `group-commit.ts`). */
  async putIfNewer(key: string, value: T): Promise<PutResult> {
    const refused = (await this.#w.group.write([{ target: this.#name, key, value }], this.#w.lease()))[0];
    if (!refused) return WRITTEN;
    this.#w.onRefused?.(this.#name, key, refused.refused);
    return refused.refused;
  }

  putWithin(key: string, value: T): void {
    this.#within.add(this.#name, key, value);
  }

  /** Read with the other lookups of this collection asked meanwhile, in one statement (see `group-read.ts`). */
  async get(key: string): Promise<T | undefined> {
    return (await this.#sql.recordOf.get(this.#name, key)) as T | undefined;
  }

  async remove(key: string): Promise<void> {
    const lease = this.#w.lease();
    if (!lease) {
      await this.#sql.write('DELETE FROM records WHERE collection = $1 AND key = $2', [this.#name, key]);
      return;
    }
    const { rows } = await this.#sql.write<{ live: boolean }>(REMOVE_FENCED, [this.#name, key, ...fenceValues(lease)]);
    passedFence(lease, rows[0]);
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
