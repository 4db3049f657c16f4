import type { RecordWrite } from '../write-set.ts';

/** The arrays `unnest($n::text[], $n+1::text[], $n+2::json[])` takes: collections, keys, JSON values. */
export function writeColumns(writes: RecordWrite<string>[]): [string[], string[], string[]] {
  return [writes.map((w) => w.target), writes.map((w) => w.key), writes.map((w) => JSON.stringify(w.value))];
}

/** Upserts the rows of `unnest($first, $first+1, $first+2)` (see {@link writeColumns}), if `condition` holds. */
export const upsertRecords = (first: number, condition = 'true'): string =>
  `INSERT INTO records (collection, key, value) SELECT * FROM unnest($${first}::text[], $${first + 1}::text[], $${first + 2}::json[]) WHERE ${condition} ON CONFLICT (collection, key) DO UPDATE SET value = EXCLUDED.value`;
