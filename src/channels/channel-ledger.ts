/**
 * The channel records in the Store, written by compare-and-set: a record is held as the holder of one claim keyed
 * by its channel id (`NonceClaims`), created by `claim` (exactly one creator wins) and moved by `takeover(from, to)`,
 * which writes only if the stored record is still exactly the one read. LMDB compares inside its write transaction,
 * PostgreSQL in the UPDATE's WHERE (fenced by the node's lease in a cluster): of two requests on one channel, on one
 * node or on two nodes over one PostgreSQL, one moves the record from a given version, the other learns it lost and
 * reads again. One key per channel, rewritten in place: nothing grows with the vouchers.
 */
import type { Hex } from 'viem';
import type { DurableCollection } from '../store/durable-collection.ts';
import type { NonceClaims } from '../store/nonce-claims.ts';
import type { ChannelRecord } from './channel-record.ts';

/** A record as read, with the exact stored text a compare-and-set compares against. */
export interface HeldRecord {
  record: ChannelRecord;
  raw: string;
}

/** The name of the claim set holding the channel records. */
export const CHANNEL_RECORDS = 'channels';

/**
 * The name of the collection listing every channel the gateway holds a record of (channel id to network): written
 * with the record's creation, in its transaction, so the claim actors can walk the records (claims cannot be listed).
 */
export const CHANNEL_INDEX = 'channel-index';

export class ChannelLedger {
  readonly #claims: NonceClaims;
  readonly #index: DurableCollection<string> | undefined;

  /** `index`: where each created record's channel is listed (see {@link CHANNEL_INDEX}); without it, none is. */
  constructor(claims: NonceClaims, index?: DurableCollection<string>) {
    this.#claims = claims;
    this.#index = index;
  }

  /** Every indexed channel id, with its network (records created before the index existed are not listed). */
  async *channels(): AsyncGenerator<{ channelId: Hex; network: string }> {
    if (!this.#index) return;
    for await (const [channelId, network] of this.#index.entries()) yield { channelId: channelId as Hex, network };
  }

  /** The channel's record, or undefined when the gateway has none. */
  async read(channelId: Hex): Promise<HeldRecord | undefined> {
    const raw = await this.#claims.holder(channelId.toLowerCase());
    if (raw === undefined) return undefined;
    return { record: JSON.parse(raw) as ChannelRecord, raw };
  }

  /** Creates the record at version 1: false when another request created it first (read it again). */
  async create(record: Omit<ChannelRecord, 'version'>): Promise<HeldRecord | undefined> {
    const full: ChannelRecord = { ...record, version: 1 };
    const raw = JSON.stringify(full);
    const key = record.channelId.toLowerCase();
    const index = this.#index;
    const won = await this.#claims.claim(key, raw, index ? () => index.putWithin(key, record.network) : undefined);
    return won.claimed ? { record: full, raw } : undefined;
  }

  /**
   * Replaces `held` with `next` (whose version must be `held`'s + 1) if the stored record is still `held`: the new
   * held record, or undefined when another request moved it first (nothing written).
   */
  async replace(held: HeldRecord, next: ChannelRecord): Promise<HeldRecord | undefined> {
    if (next.version !== held.record.version + 1) throw new Error(`channel ${held.record.channelId}: version ${next.version} does not follow ${held.record.version}`);
    const raw = JSON.stringify(next);
    return (await this.#claims.takeover(held.record.channelId.toLowerCase(), held.raw, raw)) ? { record: next, raw } : undefined;
  }
}
