/**
 * What the chain reads of payment channels may cost us. A voucher the gateway holds no record for is checked against
 * the settlement contract (three `eth_call`s), and so is a voucher beyond a channel's recorded balance (a top-up
 * made elsewhere). Both can be made for free: anyone can sign a voucher for a channel that does not exist (a fresh
 * key, a random salt), or keep sending vouchers past an empty channel's balance. Unbounded, each such request would
 * be RPC calls the operator pays for, taken from the reads and sends that settle honest payments.
 *
 * So each channel is read at most once per `perChannelMs` (later asks get that read, or share the one in flight),
 * and reads of all channels together draw on one token bucket (`perSecond`, bursts of `burst`). When it is empty,
 * the read throws {@link ChannelReadsExhausted} and the request is answered without charging (a 503 to come back,
 * or the balance refusal). Honest channels are read once, when first seen or topped up: the bucket is for them.
 */
import type { Hex } from 'viem';
import { TokenBucketLimiter } from '../http/rate-limit.ts';
import type { OnchainChannel } from '../schemes/batch-settlement/cumulative.ts';
import type { ChannelReader } from './chain-channel.ts';

export class ChannelReadsExhausted extends Error {
  readonly retryAfterSeconds: number;
  constructor(retryAfterSeconds: number) {
    super('too many payment channels are being looked up on chain right now');
    this.name = 'ChannelReadsExhausted';
    this.retryAfterSeconds = retryAfterSeconds;
  }
}

export interface ChannelReadBudgetOptions {
  /** Chain reads of channels per second, all channels together. */
  perSecond: number;
  /** Reads allowed at once after a quiet time. */
  burst: number;
  /** A channel read no more often than this; asks in between share the last read. */
  perChannelMs: number;
  /** Channels whose last read is remembered (least recently read forgotten first). */
  maxRemembered?: number;
  now?: () => number;
}

interface Remembered {
  at: number;
  read: Promise<OnchainChannel>;
}

/** `inner` behind the budget: see the module's comment. */
export function budgetedChannelReader(inner: ChannelReader, opts: ChannelReadBudgetOptions): ChannelReader {
  const now = opts.now ?? Date.now;
  const bucket = new TokenBucketLimiter({ capacity: opts.burst, refillPerSecond: opts.perSecond, now, maxKeys: 1 });
  const max = opts.maxRemembered ?? 10_000;
  const last = new Map<string, Remembered>();
  return (network: string, channelId: Hex) => {
    const key = `${network}|${channelId.toLowerCase()}`;
    const seen = last.get(key);
    if (seen && now() - seen.at < opts.perChannelMs) return seen.read;
    const taken = bucket.take('reads', 1);
    if (!taken.allowed) return Promise.reject(new ChannelReadsExhausted(taken.retryAfterSeconds));
    const read = inner(network, channelId);
    last.delete(key);
    last.set(key, { at: now(), read });
    if (last.size > max) last.delete(last.keys().next().value as string);
    // A failed read is not kept: the next ask reads again (within the budget).
    read.catch(() => {
      if (last.get(key)?.read === read) last.delete(key);
    });
    return read;
  };
}
