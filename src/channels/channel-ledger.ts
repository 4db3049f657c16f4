/**
 * The channel records in the Store, written by compare-and-set: a record is held as the holder of one claim keyed
 * by its channel id (`NonceClaims`), created by `claim` (exactly one creator wins) and moved by `takeover(from, to)`,
 * which writes only if the stored record is still exactly the one read. LMDB compares inside its write transaction,
 * PostgreSQL in the UPDATE's WHERE (fenced by the node's lease in a cluster): of two requests on one channel, on one
 * node or on two nodes over one PostgreSQL, one moves the record from a given version, the other learns it lost and
 * reads again. One key per channel, rewritten in place: nothing grows with the vouchers.
 */
import type { Hex } from 'viem';
import type { NonceClaims } from '../store/nonce-claims.ts';
import type { ChannelRecord } from './channel-record.ts';

/** A record as read, with the exact stored text a compare-and-set compares against. */
export interface HeldRecord {
  record: ChannelRecord;
  raw: string;
}

/** The name of the claim set holding the channel records. */
export const CHANNEL_RECORDS = 'channels';

export class ChannelLedger {
  readonly #claims: NonceClaims;

  constructor(claims: NonceClaims) {
    this.#claims = claims;
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
    const won = await this.#claims.claim(record.channelId.toLowerCase(), raw);
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
