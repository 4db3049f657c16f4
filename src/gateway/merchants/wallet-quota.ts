/**
 * How many live merchants each wallet holds, and the bound on it: a registration waits for its wallet's turn (one at a
 * time per wallet, so concurrent ones cannot all pass), then is refused 403 once the wallet holds the most it may.
 * Built-in merchants are not counted.
 */
import { ok, type Err, type HttpFailure, type Ok } from '../../protocol/result.ts';
import type { Logger } from '../../log/logger.ts';
import type { KeyedLock } from './keyed-lock.ts';
import type { MerchantRecord, MerchantRecords } from './merchant-records.ts';
import { refuse, type RegistryFailureStatus, type RegistryRefusalCode } from './registry-refusals.ts';

/** Most merchants one wallet may register, unless configured (`GATE402_MERCHANT_MAX_PER_WALLET`). */
export const DEFAULT_MAX_MERCHANTS_PER_WALLET = 20;

type OwnedIndex = { bySlug: Map<string, string>; byOwner: Map<string, Set<string>> };

export class WalletQuota {
  /** Live self-registered slugs by lower-cased owner (and each slug's owner), read once; dropped when another node writes. */
  #owned: OwnedIndex | undefined;

  private readonly records: MerchantRecords;
  private readonly maxPerWallet: number;
  private readonly lock: KeyedLock;
  private readonly log: Logger | undefined;
  constructor(records: MerchantRecords, maxPerWallet: number, lock: KeyedLock, log: Logger | undefined) {
    this.records = records;
    this.maxPerWallet = maxPerWallet;
    this.lock = lock;
    this.log = log;
  }

  /** Waits for the wallet's turn to register (one registration per wallet at a time); resolves to its release. */
  turn(owner: string): Promise<() => void> {
    return this.lock.turn(`wallet:${owner.toLowerCase()}`); // a slug never holds ':'
  }

  /** Whether `owner` may register one more merchant (403 past the per-wallet bound). */
  async check(owner: string, slug: string): Promise<Ok<undefined> | Err<HttpFailure<RegistryRefusalCode> & { status: RegistryFailureStatus }>> {
    const held = (await this.#ownedIndex()).byOwner.get(owner.toLowerCase())?.size ?? 0;
    if (held < this.maxPerWallet) return ok(undefined);
    this.log?.info('merchant registration refused: wallet quota', { slug, owner, held });
    return refuse(403, `wallet ${owner} already holds ${held} merchants, the most one wallet may register (${this.maxPerWallet}); delete one before registering ${slug}`);
  }

  /** Live self-registered merchants by owner: one pass over the collection, then kept up to date by each write. */
  async #ownedIndex(): Promise<OwnedIndex> {
    if (this.#owned !== undefined) return this.#owned;
    const index: OwnedIndex = { bySlug: new Map<string, string>(), byOwner: new Map<string, Set<string>>() };
    for await (const [slug, record] of this.records.entries()) if (record.merchant && !record.builtin) addOwned(index, slug, record.merchant.owner);
    this.#owned ??= index;
    return this.#owned;
  }

  /** After `slug`'s record was written. */
  noteOwner(slug: string, record: MerchantRecord): void {
    const index = this.#owned;
    if (index === undefined) return;
    const before = index.bySlug.get(slug);
    if (before !== undefined) {
      index.bySlug.delete(slug);
      const set = index.byOwner.get(before);
      set?.delete(slug);
      if (set?.size === 0) index.byOwner.delete(before);
    }
    if (record.merchant && !record.builtin) addOwned(index, slug, record.merchant.owner);
  }

  /** Another node wrote: the index is read again when next needed. */
  forget(): void {
    this.#owned = undefined;
  }
}

function addOwned(index: OwnedIndex, slug: string, owner: string): void {
  const key = owner.toLowerCase();
  index.bySlug.set(slug, key);
  let set = index.byOwner.get(key);
  if (set === undefined) {
    set = new Set();
    index.byOwner.set(key, set);
  }
  set.add(slug);
}
