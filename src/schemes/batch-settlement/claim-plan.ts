/**
 * Which vouchers go into the next claim transaction, as a pure function of the server's channel records: every
 * channel with accepted-but-unclaimed value, those whose payer started a timed withdrawal first (nearest deadline
 * first), then the largest exposure; at most `maxRows` rows, all of one receiver authorizer (one `ClaimBatch`
 * signature covers them). A row claims what was charged, never more than the voucher allows.
 */
import type { Hex } from 'viem';
import { err, ok, type Result } from '../../protocol/result.ts';
import type { ChannelConfig } from './channel-config.ts';
import type { VoucherClaim } from './claim-batch.ts';
import { withdrawDeadline } from './cumulative.ts';
import { BatchReason, type BatchReasonCode } from '../../verify/batch-settlement-reasons.ts';

/** What a server holds of one channel, for claiming. */
export interface ClaimableChannel {
  config: ChannelConfig;
  /** What the server has charged so far (the amount the claim should reach). */
  charged: bigint;
  /** The latest voucher the payer signed: its ceiling and signature. */
  signedMaxClaimable: bigint;
  signature: Hex;
  /** The chain's `totalClaimed` as last read. */
  totalClaimed: bigint;
  /** Unix seconds a timed withdrawal was initiated, 0 if none. */
  withdrawRequestedAt: number;
}

/** The row that claims a channel's charges with its latest voucher; refused if the charges exceed what it signed. */
export function claimRowFor(channel: ClaimableChannel): Result<VoucherClaim, BatchReasonCode> {
  if (channel.charged > channel.signedMaxClaimable) {
    return err(BatchReason.chargeExceedsSignedCumulative, `charged ${channel.charged} exceeds the signed ceiling ${channel.signedMaxClaimable}`);
  }
  return ok({ config: channel.config, maxClaimableAmount: channel.signedMaxClaimable, signature: channel.signature, totalClaimed: channel.charged });
}

export interface ClaimPlan {
  rows: VoucherClaim[];
  /** The earliest withdraw deadline among the rows (unix seconds), if any row has one. */
  nearestDeadline?: number;
  /** Channels whose records cannot be claimed as they stand (charges above the signed ceiling): a bug to report. */
  refused: { config: ChannelConfig; reason: BatchReasonCode }[];
}

/**
 * The rows of the next claim: only channels with exposure (charged above claimed); withdraw deadlines first
 * (nearest first), then exposure (largest first); one receiver authorizer (that of the most urgent channel).
 */
export function planClaim(channels: readonly ClaimableChannel[], maxRows: number): ClaimPlan {
  const refused: ClaimPlan['refused'] = [];
  const candidates: { channel: ClaimableChannel; row: VoucherClaim; deadline: number | undefined; exposure: bigint }[] = [];
  for (const channel of channels) {
    if (channel.charged <= channel.totalClaimed) continue;
    const row = claimRowFor(channel);
    if (!row.ok) {
      refused.push({ config: channel.config, reason: row.error.code });
      continue;
    }
    candidates.push({ channel, row: row.value, deadline: withdrawDeadline(channel, channel.config.withdrawDelay), exposure: channel.charged - channel.totalClaimed });
  }
  candidates.sort((a, b) => {
    if (a.deadline !== b.deadline) {
      if (a.deadline === undefined) return 1;
      if (b.deadline === undefined) return -1;
      return a.deadline - b.deadline;
    }
    return a.exposure === b.exposure ? 0 : a.exposure > b.exposure ? -1 : 1;
  });
  const authorizer = candidates[0]?.channel.config.receiverAuthorizer.toLowerCase();
  const chosen = candidates.filter((c) => c.channel.config.receiverAuthorizer.toLowerCase() === authorizer).slice(0, Math.max(0, maxRows));
  const deadlines = chosen.map((c) => c.deadline).filter((d): d is number => d !== undefined);
  return { rows: chosen.map((c) => c.row), ...(deadlines.length > 0 ? { nearestDeadline: Math.min(...deadlines) } : {}), refused };
}
