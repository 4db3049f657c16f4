/**
 * The registry's records, one per slug in the store, kept decoded and frozen in memory: the paid route looks its
 * merchant up on every request, and decoding it from the store each time cost more than the rest of the 402.
 *
 * Writes are conditional, cluster-wide ({@link MerchantRecords.writeIf}): each record carries a version, and writing
 * version n+1 claims the key `{slug}#{n+1}` in the store's `merchant-versions` claims, the record written in the
 * claim's own transaction. Of any number of writers (nodes) that read version n, exactly one writes n+1; the others
 * learn they lost and read again. That is what makes "a slug taken once" and "a signed message accepted once" hold
 * across nodes (the in-process lock only orders one node's writers). One claim row per accepted write, kept (as
 * payment nonces are): a released version could be claimed again by a writer that read long ago.
 *
 * The cache: another node's write reaches this one's cache by a notification (PostgreSQL: a trigger NOTIFYs in the
 * writing transaction, see `src/store/postgres/migrations/073-merchant-change-notices.sql`), and, since a
 * notification can be lost, by revalidation: a cached record older than `revalidateMs` is read again before it is
 * served (past half of it, read again in the background while still served). So no node serves a changed
 * merchant's old price or wallet for longer than `revalidateMs` plus one read. Only slugs that have a record are
 * kept, at most {@link MERCHANT_CACHE_MAX} of them, least recently used first out.
 *
 * While the store does not answer (`StoreUnavailable`: the database restarting), a cached record past `revalidateMs`
 * is still served, until it is twice that old; older, the read's failure is the answer (the paid route's 503). That
 * is safe: no merchant can change meanwhile (a change is a write to the store), and nothing can be charged on what a
 * node serves (a payment's nonce claim is a write to the store too); the one change it could hide is one written just
 * before the store went away whose notification was lost, and that for at most `2 × revalidateMs` plus one read.
 */
import { LRUCache } from 'lru-cache';
import type { Merchant } from '../catalog/merchant.ts';
import type { DurableCollection } from '../../store/durable-collection.ts';
import type { NonceClaims } from '../../store/nonce-claims.ts';
import { isStoreUnavailable } from '../../store/store-unavailable.ts';

/** Merchant records kept decoded in memory; beyond it the least recently used one is read from the store again. */
export const MERCHANT_CACHE_MAX = 10_000;

/** Versions a write steps over, at most, past claims a record put back without its version left behind. */
const VERSION_SKIPS = 64;

/** The claims that order the writes of each slug (`{slug}#{version}`). */
export const MERCHANT_VERSION_CLAIMS = 'merchant-versions';

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
  /** Writes of this slug so far (absent: written before versions, counted as 0). */
  version?: number;
}

/** `value`, frozen all the way down: cached records are shared by every caller. */
function deepFreeze<T>(value: T): T {
  if (value !== null && typeof value === 'object' && !Object.isFrozen(value)) {
    Object.freeze(value);
    for (const v of Object.values(value)) deepFreeze(v);
  }
  return value;
}

interface Cached {
  record: Readonly<MerchantRecord>;
  /** When it was read or written (the clock of the options, ms). */
  at: number;
}

export interface MerchantRecordsOptions {
  /** Serve a cached record at most this long before reading it again (undefined: the store has no other writer). */
  revalidateMs?: number;
  /** Monotonic milliseconds (injectable for tests). */
  now?: () => number;
}

export class MerchantRecords {
  readonly #merchants: DurableCollection<MerchantRecord>;
  readonly #versions: NonceClaims;
  readonly #revalidateMs: number | undefined;
  readonly #now: () => number;
  /** Records read or written, frozen, by slug (see the top of this file). */
  readonly #cache = new LRUCache<string, Cached>({ max: MERCHANT_CACHE_MAX });
  /** Store reads in flight, by slug (as many as requests for distinct uncached slugs are in flight). */
  readonly #reading = new Map<string, Promise<Readonly<MerchantRecord> | undefined>>();
  /** Bumped by each {@link forget}: a read that was out meanwhile may hold what was forgotten, and is not cached. */
  #generation = 0;

  constructor(merchants: DurableCollection<MerchantRecord>, versions: NonceClaims, options: MerchantRecordsOptions = {}) {
    this.#merchants = merchants;
    this.#versions = versions;
    this.#revalidateMs = options.revalidateMs;
    this.#now = options.now ?? (() => performance.now());
  }

  /**
   * At once from the cache (while fresh); else once the store has answered (in PostgreSQL, a round trip), one read
   * per slug however many requests ask for it meanwhile (a cold node's first burst costs the store one query).
   */
  read(slug: string): Readonly<MerchantRecord> | undefined | Promise<Readonly<MerchantRecord> | undefined> {
    const hit = this.#cache.get(slug);
    if (hit !== undefined) {
      const bound = this.#revalidateMs;
      if (bound === undefined) return hit.record;
      const age = this.#now() - hit.at;
      if (age < bound / 2) return hit.record;
      const reading = this.#readStore(slug);
      if (age < bound) {
        reading.catch(() => {}); // read ahead; served from the cache meanwhile
        return hit.record;
      }
      if (age >= 2 * bound) return reading;
      // The store's answer; while it cannot give one, the cached record (see the top of this file).
      return reading.catch((err: unknown) => {
        if (isStoreUnavailable(err)) return hit.record;
        throw err;
      });
    }
    return this.#readStore(slug);
  }

  #readStore(slug: string): Promise<Readonly<MerchantRecord> | undefined> {
    let reading = this.#reading.get(slug);
    if (!reading) {
      const generation = this.#generation;
      const at = this.#now();
      reading = this.#merchants
        .get(slug)
        .then((record) => {
          // A write of this node that landed while this read was out has cached the newer record: it stays.
          const cached = this.#cache.get(slug);
          if (cached !== undefined && cached.at > at && (cached.record.version ?? 0) >= (record?.version ?? 0)) return cached.record;
          const frozen = deepFreeze(record);
          if (frozen === undefined) this.#cache.delete(slug);
          else if (generation === this.#generation) this.#cache.set(slug, { record: frozen, at });
          return frozen;
        })
        .finally(() => this.#reading.delete(slug));
      this.#reading.set(slug, reading);
    }
    return reading;
  }

  /** The stored record, read from the store whatever is cached (what a write decides on). */
  async readFresh(slug: string): Promise<Readonly<MerchantRecord> | undefined> {
    const record = deepFreeze(await this.#merchants.get(slug));
    if (record === undefined) this.#cache.delete(slug);
    return record;
  }

  /**
   * Writes `record` as the next version after `read` (what the writer read with {@link readFresh}), only if no
   * writer anywhere wrote after it; then caches a frozen copy. Resolves to the record written, or `undefined` when
   * another writer came first (read again and decide again). `by` names the writer in the version's claim.
   */
  async writeIf(slug: string, read: Readonly<MerchantRecord> | undefined, record: MerchantRecord, by: string): Promise<MerchantRecord | undefined> {
    this.#cache.delete(slug); // a failed or lost write leaves the next read to the store
    const base = read?.version ?? 0;
    for (let version = base + 1; version <= base + VERSION_SKIPS; version++) {
      const next: MerchantRecord = { ...record, version };
      const won = await this.#versions.claim(`${slug}#${version}`, by, () => this.#merchants.putWithin(slug, next));
      if (won.claimed) {
        const frozen = deepFreeze(structuredClone(next));
        this.#cache.set(slug, { record: frozen, at: this.#now() });
        return frozen;
      }
      // Lost: another writer wrote (the record moved on), or a record was put back without its version (a restore, a
      // blind write), which left claimed versions behind it: those are skipped while the record stays as it was read.
      const now = await this.#merchants.get(slug);
      if ((now?.version ?? 0) !== base || JSON.stringify(now ?? null) !== JSON.stringify(read ?? null)) return undefined;
    }
    return undefined;
  }

  /** Drops the cached record of `slug` (or every one): the next read asks the store. */
  forget(slug?: string): void {
    this.#generation += 1;
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
