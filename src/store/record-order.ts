/**
 * Monotonic records: the order a collection's records go through, so that a write never takes a record backwards
 * (a stale write, a doubly adopted payment, two writes of one node that travelled over different connections and
 * arrived out of order). The record module defines the rank (a pure function); the store compares it inside the
 * write (LMDB: in its write transaction; PostgreSQL: the rank is a column, compared in the upsert's ON CONFLICT).
 *
 * - A write whose rank is lower than the stored record's is refused: the stored record stays, and `put` answers
 *   `{ written: false }` (never an exception: it is a late write, not a failure of the store).
 * - An equal rank is written (last writer wins): a record rewritten in its state (a grown trail, a retried step,
 *   a resumed record entering a state of the same rank) must pass.
 * - Records of different series (`series`, e.g. two attempts on one payment nonce, which its claim orders) are not
 *   compared: the later write wins, as without a rank.
 */
export interface RecordOrder<T> {
  rank(record: T): number;
  /** What ranks are compared within (absent: one series per key). */
  series?(record: T): string;
}

/** Record orders by collection name, given to the store when it opens (see `StoreOptions.orders`). */
export type RecordOrders = Readonly<Record<string, RecordOrder<never>>>;

/** What a `put` did: written, or refused as a backward write (the stored record has a higher rank). */
export type PutResult = { written: true } | Refused;
/** A write refused as backward: the stored record's rank, and the refused one's. */
export interface Refused {
  written: false;
  reason: 'backward';
  storedRank: number;
  rank: number;
}

export const WRITTEN: PutResult = { written: true };

/** The rank and series a record is stored with (both undefined for an unordered collection). */
export interface Ranked {
  rank: number | undefined;
  series: string | undefined;
}

export function rankedOf<T>(order: RecordOrder<T> | undefined, record: T): Ranked {
  if (!order) return { rank: undefined, series: undefined };
  return { rank: order.rank(record), series: order.series?.(record) };
}

/** Why writing `next` over `stored` is refused, or undefined when it may be written (see the top of this file). */
export function backward<T>(order: RecordOrder<T> | undefined, stored: T | undefined, next: T): Refused | undefined {
  if (!order || stored === undefined) return undefined;
  if (order.series && order.series(stored) !== order.series(next)) return undefined;
  const storedRank = order.rank(stored);
  const rank = order.rank(next);
  return rank < storedRank ? { written: false, reason: 'backward', storedRank, rank } : undefined;
}
