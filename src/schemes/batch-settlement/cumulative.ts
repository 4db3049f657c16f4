/**
 * The cumulative-voucher rules, as pure functions of the numbers involved: where a voucher stands against the
 * server's channel record (next, replayed, equal, lower, skipped), and whether the chain's channel can honour it.
 */
import { err, ok, type Result } from '../../protocol/result.ts';
import { BatchReason, type BatchReasonCode } from '../../verify/batch-settlement-reasons.ts';

/**
 * A voucher's ceiling against the server's record of the channel:
 * - `next`: exactly `charged + price` (the only one a paid request accepts);
 * - `replayed`: the ceiling the server already holds a signature for, sent again;
 * - `equal`: exactly `charged`, a zero-charge voucher (a refund's, never a paid request's);
 * - `lower`: below `charged + price` otherwise (stale, or an attempt to pay less);
 * - `skipped`: above `charged + price` (the client lost track, or signed ahead).
 * Everything but `next` is refused on a paid request with `cumulative_amount_mismatch` and a corrective 402.
 */
export type VoucherStep = 'next' | 'replayed' | 'equal' | 'lower' | 'skipped';

export interface ChannelRecordAmounts {
  /** What the server has charged on the channel so far (its `chargedCumulativeAmount`). */
  charged: bigint;
  /** The ceiling of the latest voucher the server holds, if any. */
  signedMaxClaimable?: bigint;
}

export function classifyVoucherStep(maxClaimableAmount: bigint, record: ChannelRecordAmounts, price: bigint): VoucherStep {
  const expected = record.charged + price;
  if (maxClaimableAmount === expected) return 'next';
  if (record.signedMaxClaimable !== undefined && maxClaimableAmount === record.signedMaxClaimable) return 'replayed';
  if (maxClaimableAmount === record.charged) return 'equal';
  return maxClaimableAmount < expected ? 'lower' : 'skipped';
}

/** The chain's view of a channel (`channels`, `pendingWithdrawals`, `refundNonce`). */
export interface OnchainChannel {
  balance: bigint;
  totalClaimed: bigint;
  /** Unix seconds a timed withdrawal was initiated, 0 if none. */
  withdrawRequestedAt: number;
  refundNonce: bigint;
}

/**
 * Rules 7, 9 and 10 of the spec's verification: the channel exists (or this payload deposits into it), the voucher
 * stays within the balance (plus the deposit it carries), and it moves past what is already claimed: by at least
 * the price for a paid payload, not below it for a refund's zero-charge voucher.
 */
export function checkVoucherAgainstChannel(
  kind: 'deposit' | 'voucher' | 'refund',
  maxClaimableAmount: bigint,
  channel: OnchainChannel,
  price: bigint,
  depositAmount = 0n,
): Result<true, BatchReasonCode> {
  const balance = channel.balance + (kind === 'deposit' ? depositAmount : 0n);
  if (balance === 0n) return err(BatchReason.channelNotFound, 'the channel has no balance');
  if (maxClaimableAmount > balance) return err(BatchReason.cumulativeExceedsBalance, `voucher ceiling ${maxClaimableAmount} exceeds the channel balance ${balance}`);
  if (kind === 'refund') {
    if (maxClaimableAmount < channel.totalClaimed) return err(BatchReason.cumulativeBelowClaimed, `voucher ceiling ${maxClaimableAmount} is below the claimed ${channel.totalClaimed}`);
  } else if (maxClaimableAmount < channel.totalClaimed + price) {
    return err(BatchReason.cumulativeBelowClaimed, `voucher ceiling ${maxClaimableAmount} does not exceed the claimed ${channel.totalClaimed} by the price ${price}`);
  }
  return ok(true);
}

/**
 * The unclaimed value a server has accepted on a channel: what it could lose if the payer withdrew now. The
 * claim scheduler orders channels by it (and by withdraw deadline).
 */
export function unclaimedExposure(charged: bigint, channel: Pick<OnchainChannel, 'totalClaimed'>): bigint {
  return charged > channel.totalClaimed ? charged - channel.totalClaimed : 0n;
}

/** When a pending timed withdrawal can be finalized (unix seconds), or undefined when none is pending. */
export function withdrawDeadline(channel: Pick<OnchainChannel, 'withdrawRequestedAt'>, withdrawDelay: number): number | undefined {
  return channel.withdrawRequestedAt === 0 ? undefined : channel.withdrawRequestedAt + withdrawDelay;
}
