import { FencedWrite, type LeaseToken } from '../fence.ts';
import { rankedOf, type RecordOrders, type Refused } from '../record-order.ts';
import type { RecordWrite } from '../write-set.ts';
import { LEASES_TABLE } from './leases.ts';

/**
 * How the store's writes are fenced and ordered in SQL, in the statement that writes (so in its transaction):
 *
 * - The fence is a CTE, `fence`, with one row while the writer's lease is live at its epoch (by the database's
 *   clock). It locks that row `FOR KEY SHARE` until the write commits: a renewal (which changes no key) is never held
 *   up by it, but a node taking the lease over (`Leases.take` locks the row `FOR UPDATE`) waits for every write that
 *   passed the fence to commit, so what it reads next includes them; a write that comes after the take sees the new
 *   epoch and writes nothing. No new lock is taken once the lease expired (the row no longer matches), so a take
 *   never waits for more than the writes already under way.
 * - An ordered collection's rows carry their record's rank and series (`record-order.ts`); the upsert's
 *   `ON CONFLICT ... DO UPDATE ... WHERE` keeps a stored row whose rank is higher, in the same series.
 */

/** One row upserted as it is (`$1` collection, `$2` key, `$3` value): unordered and unfenced. */
export const PLAIN_UPSERT = 'INSERT INTO records (collection, key, value) VALUES ($1, $2, $3::json) ON CONFLICT (collection, key) DO UPDATE SET value = EXCLUDED.value';

/** The stored row is not newer than the one proposed (`r` is the stored row, `EXCLUDED` the proposed one). */
const NOT_BACKWARD = 'r.rank IS NULL OR EXCLUDED.rank IS NULL OR r.series IS DISTINCT FROM EXCLUDED.series OR r.rank <= EXCLUDED.rank';

/** The `fence` CTE for the lease in parameters `$first` (name) and `$first+1` (epoch); always one row when unfenced. */
export function fenceCte(first: number | undefined): string {
  if (first === undefined) return 'fence AS (SELECT 1)';
  return `fence AS (SELECT 1 FROM ${LEASES_TABLE} WHERE name = $${first} AND epoch = $${first + 1} AND expires_at > clock_timestamp() FOR KEY SHARE)`;
}

/** The fence's parameters, or none when unfenced. */
export const fenceValues = (lease: LeaseToken | undefined): unknown[] => (lease ? [lease.name, lease.epoch] : []);

/** The fence held when the write ran (`live` of its result), or the write rejects with {@link FencedWrite}. */
export function passedFence(lease: LeaseToken | undefined, row: { live?: boolean } | undefined): void {
  if (lease && row?.live !== true) throw new FencedWrite(lease);
}

/** The arrays `unnest` takes (see {@link upsertRecords}): collections, keys, JSON values, ranks, series. */
export function writeColumns(writes: RecordWrite<string>[], orders: RecordOrders | undefined): [string[], string[], string[], Array<number | null>, Array<string | null>] {
  const ranked = writes.map((w) => rankedOf(orders?.[w.target] as never, w.value as never));
  return [writes.map((w) => w.target), writes.map((w) => w.key), writes.map((w) => JSON.stringify(w.value)), ranked.map((r) => r.rank ?? null), ranked.map((r) => r.series ?? null)];
}

/**
 * Upserts the rows of `unnest($first .. $first+4)` (see {@link writeColumns}) if `condition` holds, each unless the
 * stored row is newer; returns the keys written (`RETURNING collection, key`). With `claimed`, each row also has the
 * claim it goes with, in `$first+5` (`u.claim` in `condition`).
 */
export const upsertRecords = (first: number, condition = 'true', claimed = false): string =>
  `INSERT INTO records AS r (collection, key, value, rank, series)
   SELECT u.collection, u.key, u.value, u.rank, u.series
   FROM unnest($${first}::text[], $${first + 1}::text[], $${first + 2}::json[], $${first + 3}::bigint[], $${first + 4}::text[]${claimed ? `, $${first + 5}::text[]` : ''})
     AS u(collection, key, value, rank, series${claimed ? ', claim' : ''}) WHERE ${condition}
   ON CONFLICT (collection, key) DO UPDATE SET value = EXCLUDED.value, rank = EXCLUDED.rank, series = EXCLUDED.series WHERE ${NOT_BACKWARD}
   RETURNING r.collection, r.key`;

/**
 * Writes `writes` (fenced when `lease` is given) in one statement; answers which were written and, when some were
 * not, the stored rank of each refused one (`collection/key rank`, read in the statement's snapshot: the row that
 * refused it, unchanged by it).
 */
export function upsertStatement(writes: RecordWrite<string>[], lease: LeaseToken | undefined, orders: RecordOrders | undefined): { text: string; values: unknown[] } {
  const fence = lease ? 6 : undefined;
  return {
    text: `WITH ${fenceCte(fence)}, w AS (${upsertRecords(1, 'EXISTS (SELECT 1 FROM fence)')})
           SELECT EXISTS (SELECT 1 FROM fence) AS live, ARRAY(SELECT collection || '/' || key FROM w) AS written,
             CASE WHEN (SELECT count(*) FROM w) = cardinality($2::text[]) OR NOT EXISTS (SELECT 1 FROM fence) THEN NULL ELSE
               ARRAY(SELECT s.rank::text || ' ' || s.collection || '/' || s.key FROM records s JOIN unnest($1::text[], $2::text[]) AS i(c, k) ON s.collection = i.c AND s.key = i.k
                     WHERE s.rank IS NOT NULL AND NOT EXISTS (SELECT 1 FROM w WHERE w.collection = i.c AND w.key = i.k)) END AS stored`,
    values: [...writeColumns(writes, orders), ...fenceValues(lease)],
  };
}

/** The stored ranks {@link upsertStatement} answers (`rank collection/key`), by `collection/key`. */
export function storedRanks(stored: readonly string[] | null | undefined): Map<string, number> {
  const ranks = new Map<string, number>();
  for (const s of stored ?? []) {
    const space = s.indexOf(' ');
    ranks.set(s.slice(space + 1), Number(s.slice(0, space)));
  }
  return ranks;
}

/** The writes of `writes` an ordered collection refused (not among `written`, as `collection/key`), as `onRefused` is told them. */
export function refusedWrites(
  writes: RecordWrite<string>[],
  written: readonly string[],
  orders: RecordOrders | undefined,
  stored: ReadonlyMap<string, number> = new Map(),
): Array<{ collection: string; key: string; refused: Refused }> {
  const done = new Set(written);
  if (writes.every((w) => done.has(`${w.target}/${w.key}`))) return [];
  return writes.flatMap((w) => {
    const id = `${w.target}/${w.key}`;
    if (done.has(id)) return [];
    const { rank } = rankedOf(orders?.[w.target] as never, w.value as never);
    return [{ collection: w.target, key: w.key, refused: { written: false as const, reason: 'backward' as const, storedRank: stored.get(id) ?? Number.NaN, rank: rank ?? Number.NaN } }];
  });
}
