/**
 * How many live merchants each wallet holds, and the bound on it: a registration waits for its wallet's turn (one at a
 * time per wallet, so concurrent ones cannot all pass), then is refused 403 once the wallet holds the most it may.
 * Built-in merchants are not counted.
 *
 * Cluster-wide, the bound is held by slots: a wallet's merchants hold numbered claims (`<wallet>#1` to `#max`, in the
 * claims `merchant-wallet-slots`), taken just before a registration writes its merchant and given back when it is
 * deleted, or when the registration ends without one. Of any number of nodes registering for one wallet at once,
 * no more than the bound get a slot, whatever each node counted. A slot is free again when its merchant is gone (or
 * belongs to another wallet) and its claim is older than {@link WALLET_SLOT_GRACE_MS} (a registration in progress at
 * another node holds a slot before its merchant exists; a node that died there leaves one behind).
 */
import { randomUUID } from 'node:crypto';
import { ok, type Err, type HttpFailure, type Ok } from '../../protocol/result.ts';
import type { Logger } from '../../log/logger.ts';
import type { NonceClaims } from '../../store/nonce-claims.ts';
import type { KeyedLock } from './keyed-lock.ts';
import type { MerchantRecord, MerchantRecords } from './merchant-records.ts';
import { refuse, type RegistryFailureStatus, type RegistryRefusalCode } from './registry-refusals.ts';

/** Most merchants one wallet may register, unless configured (`GATE402_MERCHANT_MAX_PER_WALLET`). */
export const DEFAULT_MAX_MERCHANTS_PER_WALLET = 20;

/** The claims of wallets' merchant slots. */
export const WALLET_SLOT_CLAIMS = 'merchant-wallet-slots';

/** How long a slot whose merchant does not exist stays held: longer than any registration takes. */
export const WALLET_SLOT_GRACE_MS = 5 * 60_000;

/** A slot taken for a registration: given back if the registration ends without its merchant. */
export interface WalletSlot {
  release(): Promise<void>;
}

type Refusal = Err<HttpFailure<RegistryRefusalCode> & { status: RegistryFailureStatus }>;

type OwnedIndex = { bySlug: Map<string, string>; byOwner: Map<string, Set<string>> };

export class WalletQuota {
  /** Live self-registered slugs by lower-cased owner (and each slug's owner), read once; dropped when another node writes. */
  #owned: OwnedIndex | undefined;

  private readonly records: MerchantRecords;
  private readonly slots: NonceClaims;
  private readonly maxPerWallet: number;
  private readonly lock: KeyedLock;
  private readonly log: Logger | undefined;
  constructor(records: MerchantRecords, slots: NonceClaims, maxPerWallet: number, lock: KeyedLock, log: Logger | undefined) {
    this.records = records;
    this.slots = slots;
    this.maxPerWallet = maxPerWallet;
    this.lock = lock;
    this.log = log;
  }

  /** Waits for the wallet's turn to register (one registration per wallet at a time); resolves to its release. */
  turn(owner: string): Promise<() => void> {
    return this.lock.turn(`wallet:${owner.toLowerCase()}`); // a slug never holds ':'
  }

  /** Whether `owner` may register one more merchant (403 past the per-wallet bound). */
  async check(owner: string, slug: string): Promise<Ok<undefined> | Refusal> {
    const held = (await this.#ownedIndex()).byOwner.get(owner.toLowerCase())?.size ?? 0;
    if (held < this.maxPerWallet) return ok(undefined);
    return this.#refused(owner, slug, held);
  }

  #refused(owner: string, slug: string, held: number): Refusal {
    this.log?.info('merchant registration refused: wallet quota', { slug, owner, held });
    return refuse(403, `wallet ${owner} already holds ${held} merchants, the most one wallet may register (${this.maxPerWallet}); delete one before registering ${slug}`);
  }

  /**
   * Takes a free slot of `owner` for `slug`, at `now` (ms): the first unclaimed one, or one whose claim went stale;
   * 403 when every slot is held.
   */
  async takeSlot(owner: string, slug: string, now: number): Promise<Ok<WalletSlot> | Refusal> {
    const wallet = owner.toLowerCase();
    const mine = `${slug} ${now} ${randomUUID()}`;
    for (let i = 1; i <= this.maxPerWallet; i++) {
      const key = `${wallet}#${i}`;
      const won = await this.slots.claim(key, mine);
      if (won.claimed || ((await this.#stale(won.holder, wallet, now)) && (await this.slots.takeover(key, won.holder, mine)))) {
        return ok({ release: () => this.slots.release(key, mine).then(() => undefined) });
      }
    }
    return this.#refused(owner, slug, this.maxPerWallet);
  }

  /**
   * Gives back the slot `slug` holds of `owner`'s: its merchant was deleted at `now` (ms). A slot taken after that (the
   * slug registered again at once) is left to its new registration.
   */
  async freeSlot(owner: string, slug: string, now: number): Promise<void> {
    const wallet = owner.toLowerCase();
    for (let i = 1; i <= this.maxPerWallet; i++) {
      const key = `${wallet}#${i}`;
      const holder = await this.slots.holder(key);
      const [held, at] = holder?.split(' ') ?? [];
      if (holder && held === slug && Number(at) <= now) await this.slots.release(key, holder);
    }
  }

  /** Whether a slot's claim is stale: its merchant is not `wallet`'s live merchant, and it was taken long enough ago. */
  async #stale(holder: string, wallet: string, now: number): Promise<boolean> {
    const [slug, at] = holder.split(' ');
    if (!slug || now - Number(at) < WALLET_SLOT_GRACE_MS) return false;
    const record = await this.records.readFresh(slug);
    return !(record?.merchant && !record.builtin && record.merchant.owner.toLowerCase() === wallet);
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
