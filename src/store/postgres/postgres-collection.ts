import type { DurableCollection } from '../durable-collection.ts';
import { rankedOf, type PutResult, type RecordOrder, type Refused, WRITTEN } from '../record-order.ts';
import type { WriteSet } from '../write-set.ts';
import type { Sql, Writer } from './open-postgres-store.ts';
import { fenceCte, fenceValues, PLAIN_UPSERT, passedFence } from './record-writes.ts';

/** Rows read per round trip while listing: memory stays bounded however large the collection. */
const PAGE = 256;
/** The highest code point: every key that starts with a prefix sorts below `prefix + TOP` (keys compare as "C"). */
const TOP = '\u{10ffff}';

/** Upserts one row (`$1` collection, `$2` key, `$3` value, `$4` rank, `$5` series) unless the stored one is newer. */
const PUT = (fenced: boolean) => `WITH ${fenceCte(fenced ? 6 : undefined)},
  w AS (INSERT INTO records AS r (collection, key, value, rank, series) SELECT $1, $2, $3::json, $4::bigint, $5::text WHERE EXISTS (SELECT 1 FROM fence)
        ON CONFLICT (collection, key) DO UPDATE SET value = EXCLUDED.value, rank = EXCLUDED.rank, series = EXCLUDED.series
        WHERE r.rank IS NULL OR EXCLUDED.rank IS NULL OR r.series IS DISTINCT FROM EXCLUDED.series OR r.rank <= EXCLUDED.rank
        RETURNING 1)
  SELECT EXISTS (SELECT 1 FROM fence) AS live, EXISTS (SELECT 1 FROM w) AS written,
    CASE WHEN EXISTS (SELECT 1 FROM w) THEN NULL ELSE (SELECT rank FROM records WHERE collection = $1 AND key = $2)::float8 END AS "storedRank"`;
const PUT_FENCED = PUT(true);
const PUT_ALONE = PUT(false);
const REMOVE_FENCED = `WITH ${fenceCte(3)}, d AS (DELETE FROM records WHERE collection = $1 AND key = $2 AND EXISTS (SELECT 1 FROM fence) RETURNING 1)
  SELECT EXISTS (SELECT 1 FROM fence) AS live`;

/** A collection's rows in the `records` table. */
export class PostgresCollection<T> implements DurableCollection<T> {
  readonly #name: string;
  readonly #sql: Sql;
  readonly #within: WriteSet<string>;
  readonly #w: Writer;
  readonly #order: RecordOrder<T> | undefined;

  constructor(name: string, sql: Sql, within: WriteSet<string>, writer: Writer) {
    this.#name = name;
    this.#sql = sql;
    this.#within = within;
    this.#w = writer;
    this.#order = writer.orders?.[name] as RecordOrder<T> | undefined;
  }

  async put(key: string, value: T): Promise<void> {
    await this.putIfNewer(key, value);
  }

  async putIfNewer(key: string, value: T): Promise<PutResult> {
    const lease = this.#w.lease();
    if (!lease && !this.#order) {
      await this.#sql.write(PLAIN_UPSERT, [this.#name, key, JSON.stringify(value)]);
      return WRITTEN;
    }
    const { rank, series } = rankedOf(this.#order, value);
    const { rows } = await this.#sql.write<{ live: boolean; written: boolean; storedRank: number | null }>(lease ? PUT_FENCED : PUT_ALONE, [
      this.#name,
      key,
      JSON.stringify(value),
      rank ?? null,
      series ?? null,
      ...fenceValues(lease),
    ]);
    const row = rows[0];
    passedFence(lease, row);
    if (row?.written) return WRITTEN;
    // Not written past a live fence: the stored record is newer.
    const refused: Refused = { written: false, reason: 'backward', storedRank: row?.storedRank ?? Number.NaN, rank: rank ?? Number.NaN };
    this.#w.onRefused?.(this.#name, key, refused);
    return refused;
  }

  putWithin(key: string, value: T): void {
    this.#within.add(this.#name, key, value);
  }

  async get(key: string): Promise<T | undefined> {
    const { rows } = await this.#sql.read<{ value: T }>('SELECT value FROM records WHERE collection = $1 AND key = $2', [this.#name, key]);
    return rows[0]?.value;
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
