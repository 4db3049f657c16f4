/**
 * The registry's records, one per slug in the store, kept decoded and frozen in memory: the paid route looks its
 * merchant up on every request, and decoding it from the store each time cost more than the rest of the 402. Sound
 * because the registry is the only writer of its collection (see `registry.ts`) and the cache is updated once a write
 * is durable. Only slugs that have a record are kept (a miss costs the store no decoding, and anyone can ask for any
 * slug), and at most {@link MERCHANT_CACHE_MAX} of them, least recently used first out.
 */
import { LRUCache } from 'lru-cache';
import type { Merchant } from '../catalog/merchant.ts';
import type { DurableCollection } from '../../store/durable-collection.ts';

/** Merchant records kept decoded in memory; beyond it the least recently used one is read from LMDB again. */
export const MERCHANT_CACHE_MAX = 10_000;

export interface MerchantRecord {
  /** `null` after a delete (a tombstone that remembers the nonces). */
  merchant: Merchant | null;
  /** Seeded from the operator's catalog by `MerchantRegistry.upsertBuiltin`; not changeable by signature. */
  builtin: boolean;
  /**
   * The signed messages accepted for this slug while they are still inside the clock window (a list, not an
   * object keyed by nonce: a nonce is merchant-chosen text and could be `__proto__`).
   */
  nonces: { nonce: string; issuedAt: number }[];
}

/** `value`, frozen all the way down: cached records are shared by every caller. */
function deepFreeze<T>(value: T): T {
  if (value !== null && typeof value === 'object' && !Object.isFrozen(value)) {
    Object.freeze(value);
    for (const v of Object.values(value)) deepFreeze(v);
  }
  return value;
}

export class MerchantRecords {
  readonly #merchants: DurableCollection<MerchantRecord>;
  /** Records read or written, frozen, by slug (see the top of this file). */
  readonly #cache = new LRUCache<string, Readonly<MerchantRecord>>({ max: MERCHANT_CACHE_MAX });
  /** Store reads in flight, by slug (as many as requests for distinct uncached slugs are in flight). */
  readonly #reading = new Map<string, Promise<Readonly<MerchantRecord> | undefined>>();

  constructor(merchants: DurableCollection<MerchantRecord>) {
    this.#merchants = merchants;
  }

  /**
   * At once from the cache; else once the store has answered (in PostgreSQL, a round trip), one read per slug
   * however many requests ask for it meanwhile (a cold node's first burst costs the store one query).
   */
  read(slug: string): Readonly<MerchantRecord> | undefined | Promise<Readonly<MerchantRecord> | undefined> {
    const hit = this.#cache.get(slug);
    if (hit !== undefined) return hit;
    let reading = this.#reading.get(slug);
    if (!reading) {
      reading = this.#merchants
        .get(slug)
        .then((record) => {
          // A write that landed while this read was out has cached the newer record: it stays.
          const cached = this.#cache.get(slug);
          if (cached !== undefined) return cached;
          const frozen = deepFreeze(record);
          if (frozen !== undefined) this.#cache.set(slug, frozen);
          return frozen;
        })
        .finally(() => this.#reading.delete(slug));
      this.#reading.set(slug, reading);
    }
    return reading;
  }

  /** Writes `record` durably, then caches a frozen copy of it. */
  async write(slug: string, record: MerchantRecord): Promise<void> {
    this.#cache.delete(slug); // a failed write leaves the next read to the store
    await this.#merchants.put(slug, record);
    this.#cache.set(slug, deepFreeze(structuredClone(record)));
  }

  /** Drops the cached record of `slug` (or every one): the next read asks the store. */
  forget(slug?: string): void {
    if (slug === undefined) this.#cache.clear();
    else this.#cache.delete(slug);
  }

  /** Slugs whose record is held in memory. */
  get cached(): number {
    return this.#cache.size;
  }

  /** Every stored record (tombstones included), from the store. */
  entries(): AsyncIterable<[string, MerchantRecord]> {
    return this.#merchants.entries();
  }
}
