import type { Err, Failure, Ok } from '../protocol/result.ts';
import type { DurableCollection } from './durable-collection.ts';
import type { FenceSource } from './fence.ts';
import type { NonceClaims } from './nonce-claims.ts';
import type { RecordOrders, Refused } from './record-order.ts';

/**
 * The records of a gate402 process: in an LMDB environment of its own (`lmdb/`), or in a PostgreSQL database that
 * several processes share (`postgres/`). `open-store.ts` picks one.
 */
/** Which store holds the records: an LMDB environment of this process's own, or a shared PostgreSQL database. */
export type StoreKind = 'lmdb' | 'postgres';

export interface Store {
  /** Which kind of store this is (metrics label their series with it). */
  readonly kind: StoreKind;
  /** Where the records are: the LMDB directory, or the PostgreSQL URL without its password. */
  readonly path: string;
  /** Payment nonces claimed before simulation: one key per on-chain nonce, forever. */
  readonly nonces: NonceClaims;
  /** Another named set of atomic claims (e.g. which payments have been served upstream). */
  claims(name: string): NonceClaims;
  /**
   * Open a named collection of durable records (payments, orders, sponsorships, ...). `fence`: its `put` and `remove` carry
   * that lease instead of the store's (a role one node plays at a time, fenced by the role's lease, see `fence.ts`);
   * `putWithin` writes go with `atomically`'s, under the store's.
   */
  collection<T>(name: string, opts?: { fence?: FenceSource }): DurableCollection<T>;
  /** Runs `write` (its writes made with `putWithin`, in any collections) as one transaction, durably: all or nothing. */
  atomically(write: () => void): Promise<void>;
  /**
   * Fences this store's writes (claims, records, `atomically`) with the lease `lease` names: from now on each commits
   * only while that lease is live at its epoch, checked in the write's own statement, and fails with `FencedWrite`
   * otherwise (see `fence.ts`). Told once, by a cluster node as it joins. LMDB is one node's own: its fence always
   * passes, and this does nothing.
   */
  fence(lease: FenceSource): void;
  /**
   * Not ok while the last durable write failed (a full disk, an I/O error, an unreachable database), and for a while
   * after any write failed: on a nearly full disk small writes may still pass while larger ones fail.
   */
  health(): StoreHealth;
  /** {@link health}, after trying a small durable write when the store is failing (at most once a second). */
  probe(): Promise<StoreHealth>;
  close(): Promise<void>;
}

/** Why the store is not healthy: the last failed write's error as the message, and since when (ms since the epoch). */
export interface StoreFailure extends Failure<'store_unwritable'> {
  since: number;
}

export type StoreHealth = Ok<undefined> | Err<StoreFailure>;

export interface StoreOptions {
  /** Told how long each durable write took, from the write until it was durable (metrics). */
  onCommit?: (seconds: number) => void;
  /** Told of each durable write that failed (metrics). */
  onError?: () => void;
  /** How long a failed write keeps the store unhealthy after writes succeed again (default 60 s). */
  failureMemoryMs?: number;
  /** The rank of each ordered collection's records, by collection name: their writes never go backwards (`record-order.ts`). */
  orders?: RecordOrders;
  /** Told of each write refused as backward (a collection's `put`, or one record of `atomically` or a claim's writes). */
  onRefused?: (collection: string, key: string, refused: Refused) => void;
}
