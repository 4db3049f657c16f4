import type { PutResult } from './record-order.ts';

/**
 * A named set of records. `put` resolves only once the record is durable (on disk, or committed), so it survives a
 * crash that follows. Reads are authoritative: they see every write acknowledged before them, by any process sharing
 * the store.
 */
export interface DurableCollection<T> {
  /**
   * Writes the record. In a collection with a rank (`StoreOptions.orders`, see `record-order.ts`) a write that would
   * take the stored record backwards is refused: the stored record stays, and the store tells `onRefused` (logged
   * and counted); {@link putIfNewer} answers it. A write whose fence fails (the writer's lease is gone, see
   * `fence.ts`) rejects with `FencedWrite`.
   */
  put(key: string, value: T): Promise<void>;
  /** {@link put}, answering whether the record was written or refused as a backward write. */
  putIfNewer(key: string, value: T): Promise<PutResult>;
  /**
   * Writes a record inside another write's transaction callback (`Store.atomically`, or a claim's, see
   * `NonceClaims.claim`): it is durable exactly when that write is, and not written at all when that write's
   * condition fails (or the callback throws). Anywhere else it throws: use `put`.
   */
  putWithin(key: string, value: T): void;
  get(key: string): Promise<T | undefined>;
  remove(key: string): Promise<void>;
  /** Records whose key starts with `prefix`, in key order (or the reverse: newest first for time-ordered keys). */
  entries(prefix?: string, opts?: { reverse?: boolean }): AsyncGenerator<[string, T]>;
}
